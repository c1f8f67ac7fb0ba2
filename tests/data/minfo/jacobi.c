#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#pragma acc routine seq
static double weight(double x) { return 0.25 * x; }

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4096, iter_max = 1000;
    double *A = malloc(n * n * sizeof *A), *Anew = malloc(n * n * sizeof *Anew);
    double error = 1.0, sum = 0.0;
    int iter = 0;
    for (int i = 0; i < n * n; i++) A[i] = Anew[i] = 0.0;
#pragma acc enter data copyin(A[0:n*n]) create(Anew[0:n*n])
    while (error > 1e-6 && iter < iter_max) {
        error = 0.0;
#pragma acc parallel loop reduction(max:error) present(A[0:n*n], Anew[0:n*n])
        for (int j = 1; j < n - 1; j++) {
#pragma acc loop reduction(max:error)
            for (int i = 1; i < n - 1; i++) {
                Anew[j*n+i] = weight(A[j*n+i+1] + A[j*n+i-1] + A[(j-1)*n+i] + A[(j+1)*n+i]);
                error = fmax(error, fabs(Anew[j*n+i] - A[j*n+i]));
            }
        }
#pragma acc kernels
        for (int j = 1; j < n - 1; j++)
            for (int i = 1; i < n - 1; i++)
                A[j*n+i] = Anew[j*n+i];
        iter++;
    }
#pragma acc parallel loop reduction(+:sum)
    for (int i = 0; i < n * n; i++) sum += A[i];
#pragma acc update self(A[0:n*n])
#pragma acc exit data copyout(A[0:n*n]) delete(Anew[0:n*n])
    printf("iterations = %d\nerror = %g\nsum = %g\n", iter, error, sum);
    return 0;
}
