/* y = a*x + y on vectors of n doubles ("saxpy" in double precision).
 * Usage: ./saxpy [n]
 * Both loops run on the accelerator. x and y are pointers, so each
 * compute construct says how many elements to move: x[0:n], y[0:n]. */
#include <stdio.h>
#include <stdlib.h>

/* Fill x with n points spread evenly over [0, 1] and y with 1 - x.
 * Both arrays are only written: copyout brings them back at the end. */
static void init(int n, double *restrict x, double *restrict y)
{
    #pragma acc serial loop copyout(x[0:n], y[0:n])   /* DEFECT */
    for (int i = 0; i < n; i++) {
        x[i] = (double)i / (double)(n - 1);
        y[i] = 1.0 - x[i];
    }
}

/* y = a*x + y: x is only read (copyin), y is read and written (copy). */
static void saxpy(int n, double a, const double *restrict x, double *restrict y)
{
    #pragma acc parallel loop copyin(x[0:n]) copy(y[0:n])
    for (int i = 0; i < n; i++)
        y[i] = a * x[i] + y[i];
}

int main(int argc, char **argv)
{
    int n = (argc > 1) ? atoi(argv[1]) : 1000000;
    if (n < 2) {
        fprintf(stderr, "n must be at least 2\n");
        return 1;
    }
    double *x = malloc(n * sizeof(double));
    double *y = malloc(n * sizeof(double));
    if (x == NULL || y == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }

    init(n, x, y);
    saxpy(n, 2.0, x, y);

    /* every y[i] is now 1 + x[i]: the mean is 1.5 and the last element 2 */
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += y[i];

    printf("n = %d\n", n);
    printf("y_last = %.6f\n", y[n - 1]);
    printf("mean = %.9f\n", sum / n);

    free(x);
    free(y);
    return 0;
}
