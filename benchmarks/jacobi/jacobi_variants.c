/* Jacobi 2-D, five ways of writing the same iterations, to find what makes GCC's OpenACC
 * runtime keep the GPU busy (benchmarks/course_gpu.py variants). Build with -DVARIANT=N.
 *   1 the course's first solution: stencil + max reduction, then a copy kernel; the error is
 *     read by the host after every iteration (a wait per iteration)
 *   2 as 1, but the error is computed only every CHECK iterations
 *   3 as 2, every kernel on queue 1 (async), the host waits only to read the error
 *   4 ping-pong: sweeps alternate A->B and B->A (no copy kernel: 16 B per point instead of 32),
 *     async, error every CHECK iterations
 *   5 as 4 with vector_length(128) and an explicit gang/vector loop
 *   6 as 5 with the arrays given as deviceptr (their device addresses, taken once) instead of
 *     present: libgomp then has no mapping to look up at each launch
 * Prints ms per iteration and the bytes each iteration must move (the bandwidth floor). */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef VARIANT
#define VARIANT 1
#endif
#define CHECK 100

#if VARIANT == 3
#define QUEUE async(1) /* variants 1 and 2: every kernel synchronous */
#else
#define QUEUE
#endif

#if VARIANT == 6
#include <openacc.h>
#define ON_DEVICE deviceptr(da, db)
#define A da
#define B db
#else
#define ON_DEVICE present(a[0:nn], b[0:nn])
#define A a
#define B b
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#if VARIANT >= 4
/* One sweep src -> dst on queue 1: variants 4 to 6 alternate a -> b and b -> a. */
#if VARIANT == 6
#define ON_SWEEP deviceptr(src, dst)
static void sweep(const double *src, double *dst, int n, size_t nn)
#else
#define ON_SWEEP present(src[0:nn], dst[0:nn])
static void sweep(const double *restrict src, double *restrict dst, int n, size_t nn)
#endif
{
    (void)nn;
#if VARIANT >= 5
#pragma acc parallel loop gang vector_length(128) ON_SWEEP async(1)
    for (int j = 1; j < n - 1; j++) {
#pragma acc loop vector
        for (int i = 1; i < n - 1; i++)
#else
#pragma acc parallel loop collapse(2) ON_SWEEP async(1)
    for (int j = 1; j < n - 1; j++) {
        for (int i = 1; i < n - 1; i++)
#endif
            dst[j * (size_t)n + i] = 0.25 * (src[j * (size_t)n + i + 1] + src[j * (size_t)n + i - 1]
                                          + src[(j - 1) * (size_t)n + i] + src[(j + 1) * (size_t)n + i]);
    }
}
#endif

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4096;
    int iters = argc > 2 ? atoi(argv[2]) : 1000;
    size_t nn = (size_t)n * n;
    double *restrict a = malloc(nn * sizeof *a);
    double *restrict b = malloc(nn * sizeof *b);
    for (size_t k = 0; k < nn; k++)
        a[k] = b[k] = (k < (size_t)n) ? 1.0 : 0.0;
    double err = 1.0;
    int it = 0;
    double t0 = 0.0;
#pragma acc data copy(a[0:nn]) copyin(b[0:nn])
    {
        t0 = now();
#if VARIANT <= 3
        while (it < iters) {
            int check = VARIANT == 1 || (it + 1) % CHECK == 0 || it + 1 == iters;
            if (check) {
                err = 0.0;
#pragma acc parallel loop collapse(2) reduction(max:err) present(a[0:nn], b[0:nn]) QUEUE
                for (int j = 1; j < n - 1; j++)
                    for (int i = 1; i < n - 1; i++) {
                        double v = 0.25 * (a[j * (size_t)n + i + 1] + a[j * (size_t)n + i - 1]
                                         + a[(j - 1) * (size_t)n + i] + a[(j + 1) * (size_t)n + i]);
                        b[j * (size_t)n + i] = v;
                        err = fmax(err, fabs(v - a[j * (size_t)n + i]));
                    }
#if VARIANT == 3
#pragma acc wait(1)
#endif
            } else {
#pragma acc parallel loop collapse(2) present(a[0:nn], b[0:nn]) QUEUE
                for (int j = 1; j < n - 1; j++)
                    for (int i = 1; i < n - 1; i++)
                        b[j * (size_t)n + i] = 0.25 * (a[j * (size_t)n + i + 1] + a[j * (size_t)n + i - 1]
                                                    + a[(j - 1) * (size_t)n + i] + a[(j + 1) * (size_t)n + i]);
            }
#pragma acc parallel loop collapse(2) present(a[0:nn], b[0:nn]) QUEUE
            for (int j = 1; j < n - 1; j++)
                for (int i = 1; i < n - 1; i++)
                    a[j * (size_t)n + i] = b[j * (size_t)n + i];
            it++;
        }
#pragma acc wait(1)
#else
#if VARIANT == 6
        double *da = acc_deviceptr(a), *db = acc_deviceptr(b);
#endif
        while (it < iters) {
            /* Two sweeps per turn: a -> b, then b -> a (the error on the second, every CHECK). */
            int check = (it + 2) % CHECK == 0 || it + 2 >= iters;
            sweep(A, B, n, nn);
            if (check) {
                err = 0.0;
#pragma acc parallel loop collapse(2) reduction(max:err) ON_DEVICE async(1)
                for (int j = 1; j < n - 1; j++)
                    for (int i = 1; i < n - 1; i++) {
                        double v = 0.25 * (B[j * (size_t)n + i + 1] + B[j * (size_t)n + i - 1]
                                         + B[(j - 1) * (size_t)n + i] + B[(j + 1) * (size_t)n + i]);
                        err = fmax(err, fabs(v - B[j * (size_t)n + i]));
                        A[j * (size_t)n + i] = v;
                    }
#pragma acc wait(1)
            } else {
                sweep(B, A, n, nn);
            }
            it += 2;
        }
#pragma acc wait(1)
#endif
    }
    double t = now() - t0;
    double bytes = (VARIANT <= 3 ? 32.0 : 16.0) * (double)(n - 2) * (double)(n - 2);
    printf("variant %d n %d iterations %d error %.6e ms_per_iter %.4f bytes_per_iter %.0f\n",
           VARIANT, n, it, err, 1e3 * t / it, bytes);
    free(a);
    free(b);
    return 0;
}
