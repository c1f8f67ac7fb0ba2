/* Why profile_cg's dot products are slow with GCC 12's nvptx offloading: the same dot product
 * of two vectors of m doubles written several ways, each timed over REPS calls.
 *   gcc -O2 -fopenacc -foffload=nvptx-none -DVARIANT=N dot_variants.c -o dotN && ./dotN [m [reps]]
 * prints: variant N ms_per_call X sum S */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef VARIANT
#define VARIANT 1
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double dot(long m, const double *restrict a, const double *restrict b)
{
    double sum = 0.0;
#if VARIANT == 1 /* as in the course: long index, GCC picks the geometry */
    #pragma acc parallel loop reduction(+:sum) present(a[0:m], b[0:m])
    for (long k = 0; k < m; k++)
        sum += a[k] * b[k];
#elif VARIANT == 2 /* int index */
    const int mi = (int)m;
    #pragma acc parallel loop reduction(+:sum) present(a[0:m], b[0:m])
    for (int k = 0; k < mi; k++)
        sum += a[k] * b[k];
#elif VARIANT == 3 /* wider vectors */
    #pragma acc parallel loop vector_length(128) reduction(+:sum) present(a[0:m], b[0:m])
    for (long k = 0; k < m; k++)
        sum += a[k] * b[k];
#elif VARIANT == 4 /* fixed gang count */
    #pragma acc parallel loop num_gangs(1024) vector_length(128) reduction(+:sum) present(a[0:m], b[0:m])
    for (long k = 0; k < m; k++)
        sum += a[k] * b[k];
#elif VARIANT == 5 /* two levels: a gang per block, its vector reduces the block */
    const long block = 1024, blocks = (m + block - 1) / block;
    #pragma acc parallel loop gang vector_length(128) reduction(+:sum) present(a[0:m], b[0:m])
    for (long g = 0; g < blocks; g++) {
        double part = 0.0;
        const long end = (g + 1) * block < m ? (g + 1) * block : m;
        #pragma acc loop vector reduction(+:part)
        for (long k = g * block; k < end; k++)
            part += a[k] * b[k];
        sum += part;
    }
#elif VARIANT == 6 /* float accumulation is not the point: a max reduction, as Jacobi's */
    #pragma acc parallel loop reduction(max:sum) present(a[0:m], b[0:m])
    for (long k = 0; k < m; k++)
        sum = a[k] * b[k] > sum ? a[k] * b[k] : sum;
#endif
    return sum;
}

int main(int argc, char **argv)
{
    const long m = argc > 1 ? atol(argv[1]) : 1050625; /* 1025^2: profile_cg's GPU size */
    const int reps = argc > 2 ? atoi(argv[2]) : 100;
    double *a = malloc(m * sizeof *a), *b = malloc(m * sizeof *b);
    for (long k = 0; k < m; k++) {
        a[k] = 1.0 / (double)(k + 1);
        b[k] = (double)(k % 7);
    }
    double s = 0.0;
    #pragma acc data copyin(a[0:m], b[0:m])
    {
        s = dot(m, a, b); /* warm-up: the driver's JIT, the first launch */
        const double t0 = now();
        for (int r = 0; r < reps; r++)
            s = dot(m, a, b);
        const double t = now() - t0;
        printf("variant %d ms_per_call %.4f sum %.10e\n", VARIANT, 1e3 * t / reps, s);
    }
    free(a);
    free(b);
    return 0;
}
