/* Laplace equation on an n x n grid, solved with Jacobi iterations.
 * The top edge is held at 1, the three other edges at 0.
 * Usage: ./laplace [n [iter_max]]
 *
 * A data region around the iteration loop keeps A and Anew on the device:
 * A goes in once and comes back once (copy), Anew is only scratch space
 * (create). Inside, every compute construct declares with present() that
 * it expects the arrays to be there already: nothing moves any more. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NMAX 4096

/* Fixed-size arrays: their extent is part of their type, so the compiler
 * can move them without being told their size (rows 0..n-1 are used). */
static double A[NMAX][NMAX];
static double Anew[NMAX][NMAX];

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int n = (argc > 1) ? atoi(argv[1]) : 256;
    int iter_max = (argc > 2) ? atoi(argv[2]) : 1000;
    if (n < 3 || n > NMAX || iter_max < 1) {
        fprintf(stderr, "usage: %s [n (3..%d) [iter_max (>0)]]\n", argv[0], NMAX);
        return 1;
    }
    const double tol = 1.0e-6;

    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            A[j][i] = (j == 0) ? 1.0 : 0.0;
            Anew[j][i] = A[j][i];
        }

    double error = 1.0;
    int iter = 0;
    double t0 = wall_time();

    /* A[0:n] is the section made of the first n rows (whole rows of NMAX
     * elements): only the part of the arrays in use goes to the device. */
    #pragma acc data copy(A[0:n]) create(Anew[0:n])
    while (error > tol && iter < iter_max) {
        error = 0.0;

        #pragma acc parallel loop collapse(2) present(A[0:n], Anew[0:n])
        for (int j = 1; j < n - 1; j++)
            for (int i = 1; i < n - 1; i++)
                Anew[j][i] = 0.25 * (A[j][i + 1] + A[j][i - 1]
                                   + A[j - 1][i] + A[j + 1][i]);

        /* the error, on the host */
        #pragma acc update self(A[0:n], Anew[0:n])
        for (int j = 1; j < n - 1; j++)   /* DEFECT */
            for (int i = 1; i < n - 1; i++) {
                double change = fabs(Anew[j][i] - A[j][i]);
                error = (change > error) ? change : error;
            }

        #pragma acc parallel loop collapse(2) present(A[0:n], Anew[0:n])
        for (int j = 1; j < n - 1; j++)
            for (int i = 1; i < n - 1; i++)
                A[j][i] = Anew[j][i];

        iter++;
    }

    double t1 = wall_time();
    printf("n = %d\n", n);
    printf("iterations = %d\n", iter);
    printf("error = %.6E\n", error);
    printf("time per iteration = %9.3f ms\n", 1.0e3 * (t1 - t0) / iter);
    return 0;
}
