/* Largest eigenvalue of the n x n matrix A(i,j) = min(i,j) + 1 (i, j from 0)
 * by power iteration: x <- A x / |A x|, repeated. Its exact value is
 * 1 / (4 sin^2(pi / (2 (2n + 1)))), and the second one is about 9 times
 * smaller, so a few tens of iterations are plenty.
 * Usage: ./power [n [iterations]]
 *
 * Task: run every loop on the accelerator and keep the data there. In the
 * matrix-vector product, give the rows to the gangs and each ligne's sum to
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

    /* keep data on device */
    #pragma acc enter data create(A[0:nn], x[0:n], y[0:n])

    #pragma acc parallel loop collapse(2) present(A)
    for (int ii = 0; ii < n; ii++)
        for (int jj = 0; jj < n; jj++)
            A[(size_t)ii * n + jj] = (double)((ii < jj ? ii : jj) + 1);

    const double x0 = 1.0 / sqrt((double)n);   /* |x| = 1 */
    #pragma acc kernels present(x)
    for (int j = 0; j < n; j++)
        x[j] = x0;

    double lambda = 0.0;
    for (int it = 0; it < iterations; it++) {
        /* one gang per ligne, the lanes of the gang add the ligne up */
        #pragma acc parallel loop gang num_gangs(n) vector_length(256) present(A, x, y)
        for (int ligne = 0; ligne < n; ligne++) {
            double somme = 0.0;
            #pragma acc loop vector reduction(+:somme)
            for (int colonne = 0; colonne < n; colonne++)
                somme += x[colonne] * A[(size_t)ligne * n + colonne];
            y[ligne] = somme;
        }

        double produit = 0.0, carre = 0.0;
        #pragma acc parallel loop reduction(+:produit) reduction(+:carre) present(x, y)
        for (int m = 0; m < n; m++) {
            produit += y[m] * x[m];
            carre += y[m] * y[m];
        }
        lambda = produit;

        const double facteur = 1.0 / sqrt(carre);
        #pragma acc parallel loop present(x, y) async(1)
        for (int m = 0; m < n; m++)
            x[m] = facteur * y[m];
        #pragma acc wait(1)
    }
    #pragma acc exit data copyout(x[0:n]) delete(A[0:nn], y[0:n])

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
