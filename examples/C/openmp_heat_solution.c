/* Heat spreading on an n x n plate wrapped into a torus (periodic edges),
 * explicit steps u <- u + r (sum of the 4 neighbours - 4 u), r = 0.2.
 * A hot square (1) sits in the middle of a cold plate (0). Nothing leaves
 * a torus: the total heat stays the same.
 * Usage: ./heat [n [steps]]    (steps is rounded up to an even number)
 *
 * OpenMP offload: each step is a target region whose loop nest is shared
 * out among teams and their threads; a target data region keeps both
 * arrays on the device for all the steps (u goes in and comes back, v is
 * scratch space), so the map clauses of the steps move nothing. */
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

/* One step from `from` to `to`; row and column indices wrap around. */
static void step(int n, double r, const double *restrict from, double *restrict to)
{
    size_t cells = (size_t)n * n;
    #pragma omp target teams distribute parallel for collapse(2) map(to: from[0:cells]) map(from: to[0:cells])
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int up = (i + n - 1) % n, down = (i + 1) % n;
            int left = (j + n - 1) % n, right = (j + 1) % n;
            double c = from[(size_t)i * n + j];
            to[(size_t)i * n + j] = c + r * (from[(size_t)up * n + j] + from[(size_t)down * n + j]
                                             + from[(size_t)i * n + left] + from[(size_t)i * n + right]
                                             - 4.0 * c);
        }
}

int main(int argc, char *argv[])
{
    const double r = 0.2;   /* stable for r <= 0.25 */
    int n = argc > 1 ? atoi(argv[1]) : 256;
    int steps = argc > 2 ? atoi(argv[2]) : 1000;
    if (n < 4 || steps < 0) {
        fprintf(stderr, "usage: %s [n (>3) [steps (>=0)]]\n", argv[0]);
        return 1;
    }
    size_t cells = (size_t)n * n;
    double *restrict u = malloc(cells * sizeof(double));
    double *restrict v = malloc(cells * sizeof(double));
    double heat0 = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            int hot = i >= 3 * n / 8 && i < 5 * n / 8 && j >= 3 * n / 8 && j < 5 * n / 8;
            u[(size_t)i * n + j] = hot ? 1.0 : 0.0;
            heat0 += u[(size_t)i * n + j];
        }

    double t0 = wall_time();
    double heat = 0.0, hottest = 0.0;
    #pragma omp target data map(tofrom: u[0:cells]) map(alloc: v[0:cells])
    {
        for (int s = 0; s < steps; s += 2) {
            step(n, r, u, v);
            step(n, r, v, u);
        }
        #pragma omp target teams distribute parallel for map(to: u[0:cells]) \
            map(tofrom: heat, hottest) reduction(+:heat) reduction(max:hottest)
        for (size_t k = 0; k < cells; k++) {
            heat += u[k];
            hottest = fmax(hottest, u[k]);
        }
    }
    double t1 = wall_time();

    printf("n = %d, steps = %d\n", n, steps + steps % 2);
    printf("heat drift = %.3e\n", fabs(heat - heat0) / heat0);
    printf("hottest = %.12f\n", hottest);
    printf("center = %.12f\n", u[(size_t)(n / 2) * n + n / 2]);
    printf("time = %.3f s\n", t1 - t0);
    free(u);
    free(v);
    return 0;
}
