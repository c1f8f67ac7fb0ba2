/* Histogram of pseudo-random values, serial version.
 * Usage: ./histogram [samples] [bins]
 * Each value is the mean of 4 numbers from the Park-Miller generator, so the
 * values lie in [0,1) and pile up around 0.5. The generator is deterministic:
 * the counts are the same on every machine.
 * To do: fill the histogram on the accelerator (one iteration per value),
 * moving only what is needed: x to the device, hist to the device and back.
 * Several iterations may increment the same bin at the same time. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MODULUS 2147483647LL /* 2^31 - 1 */
#define MULTIPLIER 16807LL

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char *argv[])
{
    int n = argc > 1 ? atoi(argv[1]) : 4000000;
    int nbins = argc > 2 ? atoi(argv[2]) : 16;

    double *restrict x = malloc((size_t)n * sizeof(double));
    int *restrict hist = malloc((size_t)nbins * sizeof(int));

    /* the values, on the host */
    long long s = 1;
    for (int i = 0; i < n; i++) {
        double sum = 0.0;
        for (int r = 0; r < 4; r++) {
            s = (MULTIPLIER * s) % MODULUS;
            sum += (double)s / (double)MODULUS;
        }
        x[i] = sum / 4.0;
    }

    for (int b = 0; b < nbins; b++)
        hist[b] = 0;

    double t0 = wall_time();

    /* TODO: on the device */
    for (int i = 0; i < n; i++) {
        int b = (int)(x[i] * nbins);
        hist[b] += 1;
    }

    double t1 = wall_time();

    int total = 0, highest = 0;
    for (int b = 0; b < nbins; b++) {
        total += hist[b];
        if (hist[b] > highest)
            highest = hist[b];
    }

    printf("samples = %d\n", n);
    printf("nbins = %d\n", nbins);
    for (int b = 0; b < nbins; b++) {
        int width = highest > 0 ? (int)(50LL * hist[b] / highest) : 0;
        printf("bin %2d = %8d%s", b, hist[b], width > 0 ? "  " : "");
        for (int k = 0; k < width; k++)
            putchar('*');
        putchar('\n');
    }
    printf("total = %d\n", total);
    printf("time = %9.3f s\n", t1 - t0);

    free(x);
    free(hist);
    return 0;
}
