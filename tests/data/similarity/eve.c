/* Homework 3: power iteration on the GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = (argc > 1) ? atoi(argv[1]) : 1000;
    int iterations = (argc > 2) ? atoi(argv[2]) : 20;
    if (n < 1 || iterations < 1) {
        fprintf(stderr, "usage: %s [n [iterations]]\n", argv[0]);
        return 1;
    }
    const size_t nn = (size_t)n * (size_t)n;
    double *restrict A = malloc(nn * sizeof(double));
    double *restrict x = malloc((size_t)n * sizeof(double));
    double *restrict y = malloc((size_t)n * sizeof(double));
    if (A == NULL || x == NULL || y == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }

    const double x0 = 1.0 / sqrt((double)n);   /* |x| = 1 */
    double eigen = 0.0;

        #pragma acc data create(A[0:nn], y[0:n]) copyout(x[0:n])
    {
        #pragma acc parallel loop gang present(A[0:nn])
        for (int i = 0; i < n; i++) {
            #pragma acc loop vector
            for (int j = 0; j < n; j++)
                A[(size_t)i * n + j] = (double)((i < j ? i : j) + 1);
        }

        #pragma acc parallel loop present(x[0:n])
        for (int j = 0; j < n; j++)
            x[j] = x0;

        for (int step = 0; step < iterations; step++) {
            /* y = A x: rows to gangs, each row's s_row to the vector lanes.
             * s_row is declared inside the gang loop: every row has its own. */
            #pragma acc parallel loop gang vector_length(128) present(A[0:nn], x[0:n], y[0:n])
            for (int i = 0; i < n; i++) {
                double s_row = 0.0;
                #pragma acc loop vector reduction(+:s_row)
                for (int j = 0; j < n; j++)
                    s_row += A[(size_t)i * n + j] * x[j];
                y[i] = s_row;
            }

            /* |x| = 1, so x.y is the Rayleigh quotient: the eigenvalue estimate */
            double num = 0.0, den = 0.0;
            #pragma acc parallel loop reduction(+:num, den) present(x[0:n], y[0:n])
            for (int i = 0; i < n; i++) {
                num += x[i] * y[i];
                den += y[i] * y[i];
            }
            eigen = num;

            double coef = 1.0 / sqrt(den);
            #pragma acc parallel loop present(x[0:n], y[0:n])
            for (int i = 0; i < n; i++)
                x[i] = y[i] * coef;
        }
    }

    const double pi = 3.141592653589793;
    double s = sin(pi / (2.0 * (2.0 * n + 1.0)));
    double exact = 1.0 / (4.0 * s * s);

    printf("n = %d\n", n);
    printf("iterations = %d\n", iterations);
    printf("lambda = %.10E\n", eigen);
    printf("relative error = %.3E\n", fabs(eigen - exact) / exact);

    free(A);
    free(x);
    free(y);
    return 0;
}
