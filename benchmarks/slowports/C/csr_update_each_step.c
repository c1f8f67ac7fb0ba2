/* Diffusion along a line of n cells: steps of u <- u - dt * (L u), where L,
 * the 1-D Laplacian with insulated ends, is a sparse matrix in CSR format:
 * a structure that holds its size and three pointers to arrays.
 * Usage: ./diffusion [n [steps]]
 *
 * The matrix goes to the device once, by a manual deep copy: first the
 * structure itself, then each array it points to. Copying a member's section
 * while the structure is on the device also attaches it: the device copy of
 * the structure then holds the device address of the array. At the end, the
 * arrays leave first (which detaches them), then the structure. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    int nrows;
    int nnz;
    int *rowptr;   /* nrows + 1 entries: row i is entries rowptr[i] .. rowptr[i+1]-1 */
    int *col;      /* nnz column numbers */
    double *val;   /* nnz values */
} csr_t;

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

/* L for n cells: 2 on the diagonal, -1 beside it, and 1 on the diagonal of
 * the two end rows (no flux through the ends, so the total is kept). */
static csr_t *laplacian(int n)
{
    csr_t *A = malloc(sizeof *A);
    A->nrows = n;
    A->nnz = 3 * n - 2;
    A->rowptr = malloc((size_t)(n + 1) * sizeof(int));
    A->col = malloc((size_t)A->nnz * sizeof(int));
    A->val = malloc((size_t)A->nnz * sizeof(double));
    int k = 0;
    for (int i = 0; i < n; i++) {
        A->rowptr[i] = k;
        if (i > 0) {
            A->col[k] = i - 1;
            A->val[k++] = -1.0;
        }
        A->col[k] = i;
        A->val[k++] = (i == 0 || i == n - 1) ? 1.0 : 2.0;
        if (i < n - 1) {
            A->col[k] = i + 1;
            A->val[k++] = -1.0;
        }
    }
    A->rowptr[n] = k;
    return A;
}

static void csr_free(csr_t *A)
{
    free(A->rowptr);
    free(A->col);
    free(A->val);
    free(A);
}

/* y = A x, on the device: A, and the arrays it points to, are there already. */
static void spmv(const csr_t *restrict A, const double *restrict x, double *restrict y)
{
    int n = A->nrows;
    #pragma acc parallel loop present(A[0:1], x[0:n], y[0:n])
    for (int i = 0; i < n; i++) {
        double sum = 0.0;
        for (int k = A->rowptr[i]; k < A->rowptr[i + 1]; k++)
            sum += A->val[k] * x[A->col[k]];
        y[i] = sum;
    }
}

int main(int argc, char *argv[])
{
    const double dt = 0.25;   /* stable: the eigenvalues of L lie in [0, 4] */
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    int steps = argc > 2 ? atoi(argv[2]) : 1000;
    if (n < 2 || steps < 0) {
        fprintf(stderr, "usage: %s [n (>1) [steps (>=0)]]\n", argv[0]);
        return 1;
    }
    csr_t *A = laplacian(n);
    int nnz = A->nnz;
    double *restrict u = malloc((size_t)n * sizeof(double));
    double *restrict lu = malloc((size_t)n * sizeof(double));
    double mass0 = 0.0;
    for (int i = 0; i < n; i++) {
        u[i] = (i < n / 2) ? 1.0 : 0.0;
        mass0 += u[i];
    }

    double t0 = wall_time();
    /* The deep copy: the structure, then its arrays (attached as they arrive). */
    #pragma acc enter data copyin(A[0:1])
    #pragma acc enter data copyin(A->rowptr[0:n + 1], A->col[0:nnz], A->val[0:nnz])
    #pragma acc enter data copyin(u[0:n]) create(lu[0:n])

    for (int s = 0; s < steps; s++) {
        spmv(A, u, lu);
        #pragma acc parallel loop present(u[0:n], lu[0:n])
        for (int i = 0; i < n; i++)
            u[i] -= dt * lu[i];
        #pragma acc update self(u[0:n])   /* DEFECT */
    }

    double mass = 0.0, energy = 0.0;
    #pragma acc parallel loop present(u[0:n]) reduction(+:mass, energy)
    for (int i = 0; i < n; i++) {
        mass += u[i];
        energy += u[i] * u[i];
    }

    /* In reverse order: the arrays (detached from A's device copy), then A. */
    #pragma acc exit data copyout(u[0:n]) delete(lu[0:n])
    #pragma acc exit data delete(A->rowptr[0:n + 1], A->col[0:nnz], A->val[0:nnz])
    #pragma acc exit data delete(A[0:1])
    double t1 = wall_time();

    printf("n = %d, steps = %d, nonzeros = %d\n", n, steps, nnz);
    printf("mass drift = %.3e\n", fabs(mass - mass0) / mass0);
    printf("energy = %.12f\n", energy);
    printf("u[0] = %.12f\n", u[0]);
    printf("u[mid] = %.12f\n", u[n / 2]);
    printf("time = %.3f s\n", t1 - t0);

    free(u);
    free(lu);
    csr_free(A);
    return 0;
}
