/* Largest eigenvalue of the n x n matrix A(i,j) = min(i,j) + 1 (i, j from 0)
 * by power iteration: x <- A x / |A x|, repeated. Its exact value is
 * 1 / (4 sin^2(pi / (2 (2n + 1)))), and the second one is about 9 times
 * smaller, so a few tens of iterations are plenty.
 * Usage: ./power [n [iterations]]
 *
 * Task: run every loop on the accelerator and keep the data there. In the
 * matrix-vector product, give the rows to the gangs and each row's sum to
 * the vector lanes. */
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

    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            A[(size_t)i * n + j] = (double)((i < j ? i : j) + 1);

    const double x0 = 1.0 / sqrt((double)n);   /* |x| = 1 */
    for (int j = 0; j < n; j++)
        x[j] = x0;

    double lambda = 0.0;
    // TODO gpu: try kernels on the whole thing
    #pragma acc kernels copy(A[0:nn], x[0:n], y[0:n], lambda)
    {
        for (int it = 0; it < iterations; it++) {
            for (int i = 0; i < n; i++) {
                double t = 0.0;
                for (int j = 0; j < n; j++) t += A[(size_t)i * n + j] * x[j];
                y[i] = t;
            }
            double nrm = 0.0;
            for (int i = 0; i < n; i++) nrm += y[i] * y[i];
            nrm = sqrt(nrm);
            lambda = nrm;
            for (int i = 0; i < n; i++) x[i] = y[i];
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
