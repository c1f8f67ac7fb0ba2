/* Matrix product C = A x B with the matrices created and initialised on the
 * accelerator, each on its own asynchronous queue.
 * Usage: ./matmul [dim]
 * A is 6 on the diagonal, B is 7 on the diagonal and C starts at zero, so
 * every diagonal element of the result is 42. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Allocate a dim x dim matrix on the host and its copy on the device;
 * the device allocation is queued on `queue`. */
static double *create_mat(int dim, int queue)
{
    size_t n = (size_t)dim * dim;
    double *mat = malloc(n * sizeof(double));
    #pragma acc enter data create(mat[0:n])
    return mat;
}

/* Set the device copy to diag on the diagonal and 0 elsewhere, on `queue`. */
static void init_mat(double *restrict mat, int dim, double diag, int queue)
{
    size_t n = (size_t)dim * dim;
    #pragma acc parallel loop collapse(2) present(mat[0:n])   /* DEFECT */
    for (int i = 0; i < dim; i++)
        for (int j = 0; j < dim; j++)
            mat[(size_t)i * dim + j] = (i == j) ? diag : 0.0;
}

int main(int argc, char *argv[])
{
    int dim = argc > 1 ? atoi(argv[1]) : 200;
    size_t n = (size_t)dim * dim;

    double t0 = wall_time();

    double *restrict A = create_mat(dim, 1);
    double *restrict B = create_mat(dim, 2);
    double *restrict C = create_mat(dim, 3);

    init_mat(A, dim, 6.0, 1);
    init_mat(B, dim, 7.0, 2);
    init_mat(C, dim, 0.0, 3);

    /* The product may start only when the three queues are done. */
    #pragma acc parallel loop collapse(2) present(A[0:n], B[0:n], C[0:n])
    for (int i = 0; i < dim; i++)
        for (int j = 0; j < dim; j++) {
            double sum = 0.0;
            #pragma acc loop seq
            for (int k = 0; k < dim; k++)
                sum += A[(size_t)i * dim + k] * B[(size_t)k * dim + j];
            C[(size_t)i * dim + j] += sum;
        }

    #pragma acc exit data copyout(C[0:n]) delete(A[0:n], B[0:n])

    double t1 = wall_time();
    printf("dim = %d\n", dim);
    printf("C[0] = %f\n", C[0]);
    printf("C[last] = %f\n", C[n - 1]);
    printf("time = %9.3f s\n", t1 - t0);

    free(A);
    free(B);
    free(C);
    return 0;
}
