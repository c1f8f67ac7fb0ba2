/* A noisy periodic signal, smoothed, then integrated with a running sum.
 * Usage: ./scan [n [steps]]   (n: a multiple of 8; each step is two passes)
 *
 * Everything runs on the host. Task: run every loop nest on the accelerator,
 * each with the compute construct that fits it (parallel, kernels or
 * serial), and keep the arrays on the device from the first loop to the
 * last with a data region in main. Read the compiler's report: it says how
 * each loop was shared out. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BLOCK 256

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

/* A slow wave of 3 periods plus a fast wobble of period 4 samples. */
static void make_signal(int n, double *restrict s)
{
    const double pi = 3.141592653589793;
    for (int i = 0; i < n; i++) {
        const double t = (double)i / (double)n;
        s[i] = 1.0 + cos(6.0 * pi * t) + 0.5 * cos(0.5 * pi * (double)(i % 4));
    }
}

/* One smoothing pass on a periodic grid (the ends are neighbours). */
static void smooth(int n, const double *restrict in, double *restrict out)
{
    for (int i = 0; i < n; i++) {
        int left = (i == 0) ? n - 1 : i - 1;
        int right = (i == n - 1) ? 0 : i + 1;
        out[i] = 0.25 * in[left] + 0.5 * in[i] + 0.25 * in[right];
    }
}

/* p[i] = s[0] + s[1] + ... + s[i]; offset[] has one value per block. */
static void running_sum(int n, const double *restrict s, double *restrict p,
                        double *restrict offset)
{
    const int nblocks = (n + BLOCK - 1) / BLOCK;

    /* phase 1: the running sum inside each block */
    for (int b = 0; b < nblocks; b++) {
        const int first = b * BLOCK;
        const int end = (first + BLOCK < n) ? first + BLOCK : n;
        double partial = 0.0;
        for (int i = first; i < end; i++) {
            partial += s[i];
            p[i] = partial;
        }
        offset[b] = partial;
    }

    /* phase 2: block totals -> what comes before each block */
    double before = 0.0;
    for (int b = 0; b < nblocks; b++) {
        const double block_total = offset[b];
        offset[b] = before;
        before += block_total;
    }

    /* phase 3: every point gets the offset of its block */
    for (int i = 0; i < n; i++)
        p[i] += offset[i / BLOCK];
}

int main(int argc, char **argv)
{
    const int n = (argc > 1) ? atoi(argv[1]) : 262144;
    const int steps = (argc > 2) ? atoi(argv[2]) : 100;
    if (n < 8 || n % 8 != 0 || steps < 0) {
        fprintf(stderr, "usage: %s [n (a multiple of 8) [steps (>= 0)]]\n", argv[0]);
        return 1;
    }
    const int nblocks = (n + BLOCK - 1) / BLOCK;
    double *s = malloc((size_t)n * sizeof(double));
    double *work = malloc((size_t)n * sizeof(double));
    double *p = malloc((size_t)n * sizeof(double));
    double *offset = malloc((size_t)nblocks * sizeof(double));
    if (s == NULL || work == NULL || p == NULL || offset == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }

    const double t0 = wall_time();
    /* the arrays should stay on the device for this whole block */
    {
        make_signal(n, s);
        for (int k = 0; k < steps; k++) {
            smooth(n, s, work);
            smooth(n, work, s);
        }
        running_sum(n, s, p, offset);
    }
    const double t1 = wall_time();

    /* Smoothing keeps the mean (1) and the wave cancels over each half
     * period, so both integrals are exact whatever n and steps. */
    const double h = 1.0 / (double)n;
    printf("n = %d\n", n);
    printf("steps = %d\n", steps);
    printf("s(t=0) = %.12f\n", s[0]);
    printf("s(t=1/8) = %.12f\n", s[n / 8]);
    printf("integral = %.12f\n", h * p[n - 1]);
    printf("half integral = %.12f\n", h * (p[n / 2] - 0.5 * (s[0] + s[n / 2])));
    printf("time = %.3f s\n", t1 - t0);

    free(s);
    free(work);
    free(p);
    free(offset);
    return 0;
}
