/* {{title}}
 * Usage: ./{{name}} [n]
 * The sum runs on the accelerator: x and y are copied in, and reduction(+:dot) gives every
 * gang, worker and vector lane its own partial sum, added together at the end. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = (argc > 1) ? atoi(argv[1]) : 1000000;
    if (n < 1) {
        fprintf(stderr, "n must be positive\n");
        return 1;
    }
    double *x = malloc(n * sizeof(double));
    double *y = malloc(n * sizeof(double));
    if (x == NULL || y == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        x[i] = (double)(i % 13);
        y[i] = 0.5 * (double)(i % 7);
    }

    double dot = 0.0;
    #pragma acc parallel loop reduction(+:dot) copyin(x[0:n], y[0:n])
    for (int i = 0; i < n; i++)
        dot += x[i] * y[i];

    printf("n = %d\n", n);
    printf("dot = %.1f\n", dot);
    free(x);
    free(y);
    return 0;
}
