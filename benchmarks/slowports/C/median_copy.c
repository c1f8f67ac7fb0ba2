/* A signal with spikes, cleaned by a running median of 7 points, then
 * measured: mean, largest and smallest value, what the filter changed.
 * Usage: ./median [n]
 *
 * One parallel loop filters and measures. Each of its variables has the
 * attribute it needs:
 * - window is scratch space that every iteration fills before reading it:
 *   private, one copy per iteration;
 * - the five statistics combine the values of all iterations: reductions,
 *   whose result comes back to the host at the end of the loop;
 * - raw and clean are arrays: copyin and copyout, with their sections;
 * - i, k, j, next, value and change are declared inside the loop body:
 *   private without a clause. */
#define _POSIX_C_SOURCE 199309L
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WIDTH 7             /* points in the window of the median */
#define HALF (WIDTH / 2)

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const int n = (argc > 1) ? atoi(argv[1]) : 2000000;
    if (n < WIDTH) {
        fprintf(stderr, "usage: %s [n (>= %d)]\n", argv[0], WIDTH);
        return 1;
    }
    double *raw = malloc((size_t)n * sizeof(double));
    double *clean = malloc((size_t)n * sizeof(double));
    if (raw == NULL || clean == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }

    /* 5 periods of a wave around 2, and a spike of +4 every 97 points */
    const double pi = 3.141592653589793;
    for (int i = 0; i < n; i++)
        raw[i] = 2.0 + sin(10.0 * pi * (double)i / (double)n) + ((i % 97 == 50) ? 4.0 : 0.0);

    double window[WIDTH];   /* scratch space: the points around i, sorted */
    double sum = 0.0, highest = -DBL_MAX, lowest = DBL_MAX, biggest_change = 0.0;
    int changed = 0;

    const double t0 = wall_time();
    #pragma acc parallel loop copy(raw[0:n], clean[0:n]) private(window) /* DEFECT */ \
        reduction(+:sum, changed) reduction(max:highest, biggest_change) reduction(min:lowest)
    for (int i = 0; i < n; i++) {
        double value = raw[i];
        if (i >= HALF && i < n - HALF) {
            /* insertion sort of the WIDTH points centred on i */
            for (int k = 0; k < WIDTH; k++) {
                const double next = raw[i - HALF + k];
                int j = k;
                while (j > 0 && window[j - 1] > next) {
                    window[j] = window[j - 1];
                    j--;
                }
                window[j] = next;
            }
            value = window[HALF];
        }
        clean[i] = value;

        const double change = fabs(raw[i] - value);
        sum += value;
        highest = fmax(highest, value);
        lowest = fmin(lowest, value);
        biggest_change = fmax(biggest_change, change);
        if (change > 0.5)
            changed++;
    }
    const double t1 = wall_time();

    printf("n = %d\n", n);
    printf("mean = %.12g\n", sum / n);
    printf("maximum = %.12g\n", highest);
    printf("minimum = %.12g\n", lowest);
    printf("largest change = %.12g\n", biggest_change);
    printf("points changed = %d\n", changed);
    printf("clean[n/3] = %.12g\n", clean[n / 3]);
    printf("time = %.3f s\n", t1 - t0);

    free(raw);
    free(clean);
    return 0;
}
