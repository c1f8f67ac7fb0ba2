/* One Gram-Schmidt step on two vectors: u = (1, 1, ..., 1) and
 * v = (1, 2, ..., n); v loses its component along u: v <- v - (u.v / u.u) u.
 * Usage: ./gram [n]
 *
 * The vec_ routines are written like a GPU library (cuBLAS, a CUDA kernel):
 * they receive device addresses, and their regions say so with deviceptr,
 * so the runtime neither looks the pointers up nor moves anything. The
 * caller keeps u and v on the device in a data region and hands the library
 * their device addresses with host_data use_device.
 * Expected: afterwards u.v = 0, and |v|^2 = n (n^2 - 1) / 12, the sum of
 * the squares of 1..n around their mean (n + 1) / 2. */
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

/* ---- the "library": every pointer is a device address ---- */

static double vec_dot(int n, const double *x, const double *y)
{
    double sum = 0.0;
    #pragma acc parallel loop deviceptr(x, y) reduction(+:sum)
    for (int k = 0; k < n; k++)
        sum += x[k] * y[k];
    return sum;
}

/* the Euclidean norm of x */
static double vec_nrm2(int n, const double *x)
{
    double sum = 0.0;
    #pragma acc parallel loop deviceptr(x) reduction(+:sum)
    for (int k = 0; k < n; k++)
        sum += x[k] * x[k];
    return sqrt(sum);
}

/* y <- y + alpha x */
static void vec_axpy(int n, double alpha, const double *x, double *y)
{
    #pragma acc parallel loop deviceptr(x, y)
    for (int k = 0; k < n; k++)
        y[k] += alpha * x[k];
}

/* ---- the program ---- */

int main(int argc, char *argv[])
{
    const int n = argc > 1 ? atoi(argv[1]) : 2000000;
    if (n < 2) {
        fprintf(stderr, "usage: %s [n (>1)]\n", argv[0]);
        return 1;
    }
    double *restrict u = malloc((size_t)n * sizeof(double));
    double *restrict v = malloc((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) {
        u[i] = 1.0;
        v[i] = i + 1.0;
    }

    double t0 = wall_time();
    #pragma acc data copyin(u[0:n]) copy(v[0:n])
    {
        /* Inside host_data, u and v stand for their device copies. */
        #pragma acc host_data use_device(u, v)
        {
            double nu = vec_nrm2(n, u);
            vec_axpy(n, -vec_dot(n, u, v) / (nu * nu), u, v);
        }
    }
    double t1 = wall_time();

    /* Checked on the host, from the v that came back. */
    double uv = 0.0, uu = 0.0, vv = 0.0;
    for (int i = 0; i < n; i++) {
        uv += u[i] * v[i];
        uu += u[i] * u[i];
        vv += v[i] * v[i];
    }
    double expected = (double)n * ((double)n * n - 1.0) / 12.0;
    printf("n = %d\n", n);
    printf("cosine = %.3e\n", uv / sqrt(uu * vv));
    printf("ratio = %.12f\n", vv / expected);
    printf("v[0] = %.6f\n", v[0]);
    printf("time = %.3f s\n", t1 - t0);
    free(u);
    free(v);
    return 0;
}
