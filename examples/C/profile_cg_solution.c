/* Poisson's equation -(d2u/dx2 + d2u/dy2) = 1 on the unit square, u = 0 on
 * the edges, solved by conjugate gradients on an n x n grid (5-point
 * Laplacian, never stored as a matrix).
 * Usage: ./cg [n [iterations]]   (n odd: the centre is a grid point)
 *
 * The four vectors are created on the device once, in a data region around
 * the whole solver, and initialised there. Every loop is a parallel loop on
 * data that is present: per iteration, only the results of the two dot
 * products (8 bytes each) travel to the host, which needs them to compute
 * alpha and beta. x comes back once, at the end. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

/* Vectors hold (n+2) x (n+2) values: the grid and a frame of zeros around it
 * (the boundary), so that the stencil needs no special case. */

/* q = A p on the grid points, A being 4 on the diagonal, -1 for each neighbour. */
static void apply_laplacian(int n, const double *restrict p, double *restrict q)
{
    const long w = n + 2;
    #pragma acc parallel loop collapse(2) present(p[0:w*w], q[0:w*w])
    for (int j = 1; j <= n; j++)
        for (int i = 1; i <= n; i++) {
            const long k = j * w + i;
            q[k] = 4.0 * p[k] - p[k - 1] - p[k + 1] - p[k - w] - p[k + w];
        }
}

/* The reductions name their launch geometry: GCC 12 combines the gangs' partial sums one gang
 * at a time, and with the thousands of gangs it launches by default a dot product of 1.05 M
 * values took 12.9 ms on an H100, against 0.5 ms with 1024 gangs (benchmarks/reduction). */
static double dot(long m, const double *restrict a, const double *restrict b)
{
    double sum = 0.0;
    #pragma acc parallel loop num_gangs(1024) vector_length(128) reduction(+:sum) present(a[0:m], b[0:m])
    for (long k = 0; k < m; k++)
        sum += a[k] * b[k];
    return sum;
}

/* x += alpha p, r -= alpha q; returns the new r.r */
static double update_solution(long m, double alpha, const double *restrict p,
                              const double *restrict q, double *restrict x, double *restrict r)
{
    double rr = 0.0;
    #pragma acc parallel loop num_gangs(1024) vector_length(128) reduction(+:rr) \
        present(p[0:m], q[0:m], x[0:m], r[0:m])
    for (long k = 0; k < m; k++) {
        x[k] += alpha * p[k];
        r[k] -= alpha * q[k];
        rr += r[k] * r[k];
    }
    return rr;
}

/* p = r + beta p */
static void update_direction(long m, double beta, const double *restrict r, double *restrict p)
{
    #pragma acc parallel loop present(r[0:m], p[0:m])
    for (long k = 0; k < m; k++)
        p[k] = r[k] + beta * p[k];
}

int main(int argc, char **argv)
{
    const int n = (argc > 1) ? atoi(argv[1]) : 199;
    const int iterations = (argc > 2) ? atoi(argv[2]) : 300;
    if (n < 3 || n % 2 == 0 || iterations < 4) {
        fprintf(stderr, "usage: %s [n (odd, >= 3) [iterations (>= 4)]]\n", argv[0]);
        return 1;
    }
    const long w = n + 2, m = w * w;
    const double h = 1.0 / (n + 1);
    double *x = malloc(m * sizeof(double));
    double *r = malloc(m * sizeof(double));
    double *p = malloc(m * sizeof(double));
    double *q = malloc(m * sizeof(double));
    if (x == NULL || r == NULL || p == NULL || q == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }

    printf("n = %d\n", n);
    printf("iterations = %d\n", iterations);
    const double t0 = wall_time();
    #pragma acc data create(r[0:m], p[0:m], q[0:m]) copyout(x[0:m])
    {
        /* start from x = 0: the residual r = b - A x is h^2 inside, 0 on the frame */
        #pragma acc parallel loop collapse(2) present(x[0:m], r[0:m], p[0:m], q[0:m])
        for (long j = 0; j < w; j++)
            for (long i = 0; i < w; i++) {
                const long k = j * w + i;
                const int inside = (i >= 1 && i <= n && j >= 1 && j <= n);
                x[k] = 0.0;
                q[k] = 0.0;
                r[k] = inside ? h * h : 0.0;
                p[k] = r[k];
            }

        double rr = dot(m, r, r);
        for (int it = 1; it <= iterations; it++) {
            apply_laplacian(n, p, q);
            const double alpha = rr / dot(m, p, q);
            const double rr_new = update_solution(m, alpha, p, q, x, r);
            update_direction(m, rr_new / rr, r, p);
            rr = rr_new;
            if (it % (iterations / 4) == 0)
                printf("iteration %d: residual = %.6e\n", it, sqrt(rr));
        }
    }
    const double t1 = wall_time();

    /* the centre of the square; the exact value is 0.0736713532... */
    printf("u(1/2,1/2) = %.10f\n", x[(n / 2 + 1) * w + n / 2 + 1]);
    printf("time per iteration = %.3f ms\n", 1.0e3 * (t1 - t0) / iterations);
    free(x);
    free(r);
    free(p);
    free(q);
    return 0;
}
