/* Periods of n pendulums swinging far from the vertical, found two ways:
 * by integrating the equation of motion (RK4 steps until the pendulum
 * passes the vertical, a quarter of a period) and with the exact formula
 * (the arithmetic-geometric mean gives the elliptic integral it needs).
 * Usage: ./pendulum [n [dt]]
 *
 * Everything runs on the host. Task: run the loop over the pendulums on
 * the accelerator. The functions it calls, directly or not, need a device
 * version, and the table of lengths they read must be on the device, with
 * the values main gives it. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NLEN 8                 /* families of pendulums, one length each */
#define GRAVITY 9.81           /* m/s^2 */
#define PI 3.141592653589793

static double length[NLEN];    /* metres, set by main */

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

/* Angular acceleration of a pendulum of family k at angle theta. */
static double acceleration(double theta, int k)
{
    return -GRAVITY / length[k] * sin(theta);
}

/* Arithmetic-geometric mean of a and b (a few iterations suffice). */
static double agm(double a, double b)
{
    for (int it = 0; it < 50 && fabs(a - b) > 1.0e-15 * a; it++) {
        const double mean = 0.5 * (a + b);
        b = sqrt(a * b);
        a = mean;
    }
    return a;
}

/* Exact period for amplitude theta0: 4 sqrt(L/g) K(sin(theta0/2)),
 * with K(m) = pi / (2 agm(1, sqrt(1 - m^2))). */
static double period_exact(double theta0, int k)
{
    const double m = sin(0.5 * theta0);
    return 4.0 * sqrt(length[k] / GRAVITY) * PI / (2.0 * agm(1.0, sqrt(1.0 - m * m)));
}

/* Period from RK4 steps of dt, released at rest from theta0: four times the
 * time it takes to reach the vertical (the last step is interpolated). */
static double period_numeric(double theta0, int k, double dt)
{
    double theta = theta0, omega = 0.0, t = 0.0;
    while (1) {
        const double k1t = omega, k1w = acceleration(theta, k);
        const double k2t = omega + 0.5 * dt * k1w, k2w = acceleration(theta + 0.5 * dt * k1t, k);
        const double k3t = omega + 0.5 * dt * k2w, k3w = acceleration(theta + 0.5 * dt * k2t, k);
        const double k4t = omega + dt * k3w, k4w = acceleration(theta + dt * k3t, k);
        const double next = theta + dt / 6.0 * (k1t + 2.0 * k2t + 2.0 * k3t + k4t);
        omega += dt / 6.0 * (k1w + 2.0 * k2w + 2.0 * k3w + k4w);
        if (!(next > 0.0)) /* a NaN too: never loop for ever on bad input */
            return 4.0 * (t + dt * theta / (theta - next));
        theta = next;
        t += dt;
    }
}

int main(int argc, char **argv)
{
    const int n = (argc > 1) ? atoi(argv[1]) : 2000;
    const double dt = (argc > 2) ? atof(argv[2]) : 1.0e-3;
    if (n < 2 || !(dt > 0.0 && dt < 0.1)) {
        fprintf(stderr, "usage: %s [n (>= 2) [dt (0 < dt < 0.1)]]\n", argv[0]);
        return 1;
    }
    double *numeric = malloc((size_t)n * sizeof(double));
    double *exact = malloc((size_t)n * sizeof(double));
    if (numeric == NULL || exact == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int k = 0; k < NLEN; k++)
        length[k] = 0.25 * (k + 1);

    const double t0 = wall_time();
    /* amplitudes from 0.1 to 3 rad, the 8 lengths in turn */
    for (int i = 0; i < n; i++) {
        const double theta0 = 0.1 + 2.9 * (double)i / (double)(n - 1);
        numeric[i] = period_numeric(theta0, i % NLEN, dt);
        exact[i] = period_exact(theta0, i % NLEN);
    }
    const double t1 = wall_time();

    double worst = 0.0, sum = 0.0, longest = 0.0;
    for (int i = 0; i < n; i++) {
        worst = fmax(worst, fabs(numeric[i] - exact[i]) / exact[i]);
        sum += numeric[i];
        longest = fmax(longest, numeric[i]);
    }
    printf("n = %d\n", n);
    printf("mean period = %.10f s\n", sum / n);
    printf("longest period = %.10f s\n", longest);
    printf("largest relative error = %.3e\n", worst);
    printf("time = %.3f s\n", t1 - t0);
    free(numeric);
    free(exact);
    return 0;
}
