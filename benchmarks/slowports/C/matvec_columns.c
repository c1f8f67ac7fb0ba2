/* Largest eigenvalue of the n x n matrix A(i,j) = min(i,j) + 1 (i, j from 0)
 * by power iteration: x <- A x / |A x|, repeated. Its exact value is
 * 1 / (4 sin^2(pi / (2 (2n + 1)))), and the second one is about 9 times
 * smaller, so a few tens of iterations are plenty.
 * Usage: ./power [n [iterations]]
 *
 * The matrix is built on the device and never leaves it. In the product
 * y = A x each gang takes whole rows, and the vector lanes of the gang share
 * the sum along a row (a vector-level reduction). */
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
    double lambda = 0.0;

    /* A and y only exist on the device; x goes back to the host at the end */
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

        for (int it = 0; it < iterations; it++) {
            /* y = A x: rows to gangs, each row's sum to the vector lanes.
             * sum is declared inside the gang loop: every row has its own. */
            #pragma acc parallel loop gang vector_length(128) present(A[0:nn], x[0:n], y[0:n])
            for (int i = 0; i < n; i++) {
                double sum = 0.0;
                #pragma acc loop vector reduction(+:sum)
                for (int j = 0; j < n; j++)
                    sum += A[(size_t)j * n + i] * x[j];   /* DEFECT: A is symmetric */
                y[i] = sum;
            }

            /* |x| = 1, so x.y is the Rayleigh quotient: the eigenvalue estimate */
            double xy = 0.0, yy = 0.0;
            #pragma acc parallel loop reduction(+:xy, yy) present(x[0:n], y[0:n])
            for (int i = 0; i < n; i++) {
                xy += x[i] * y[i];
                yy += y[i] * y[i];
            }
            lambda = xy;

            double scale = 1.0 / sqrt(yy);
            #pragma acc parallel loop present(x[0:n], y[0:n])
            for (int i = 0; i < n; i++)
                x[i] = y[i] * scale;
        }
    }

    const double pi = 3.141592653589793;
    double s = sin(pi / (2.0 * (2.0 * n + 1.0)));
    double exact = 1.0 / (4.0 * s * s);

    printf("n = %d\n", n);
    printf("iterations = %d\n", iterations);
    printf("lambda = %.10E\n", lambda);
    printf("relative error = %.3E\n", fabs(lambda - exact) / exact);

    free(A);
    free(x);
    free(y);
    return 0;
}
