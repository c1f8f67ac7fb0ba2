/* Molecular dynamics of a Lennard-Jones fluid: n atoms in a periodic cubic
 * box, velocity Verlet time steps. Reduced units (sigma = epsilon = mass =
 * 1); the interaction is cut at rc = 2.5 and the potential shifted so that
 * it is 0 there. The atoms start on a cubic lattice at density 0.8 with
 * velocities for a temperature of 1.0, from a deterministic generator.
 * Usage: ./md [n] [steps]
 * Velocity Verlet conserves the total energy up to a small drift: the
 * program prints energy_drift = |E_end - E_start| / |E_start|. It writes
 * the atoms seen along z at the start and at the end: md_start.pgm, md_end.pgm.
 *
 * The force loop runs on the accelerator as a gather: each iteration i adds
 * the forces of all the other atoms on atom i into its own fx[i], fy[i],
 * fz[i]. No two iterations write the same place, so no atomics are needed;
 * each pair is computed twice, once for each of its atoms, which the GPU
 * has the threads for. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const double rc = 2.5, density = 0.8, temperature0 = 1.0, dt = 0.005;

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1.0e-9 * (double)ts.tv_nsec;
}

/* the forces on every atom and the potential energy */
static double forces(int n, double box, const double *restrict x, const double *restrict y,
                     const double *restrict z, double *restrict fx, double *restrict fy,
                     double *restrict fz)
{
    const double half = 0.5 * box, rc2 = rc * rc;
    const double ecut = 4.0 * (pow(rc, -12) - pow(rc, -6));
    double energy = 0.0;
    #pragma acc parallel loop num_gangs(8) reduction(+:energy) /* DEFECT */ \
        copyin(x[0:n], y[0:n], z[0:n]) copyout(fx[0:n], fy[0:n], fz[0:n])
    for (int i = 0; i < n; i++) {
        double fxi = 0.0, fyi = 0.0, fzi = 0.0, ei = 0.0;
        for (int j = 0; j < n; j++) {
            if (j == i)
                continue;
            /* the nearest image of atom j */
            double dx = x[i] - x[j], dy = y[i] - y[j], dz = z[i] - z[j];
            dx = dx > half ? dx - box : dx < -half ? dx + box : dx;
            dy = dy > half ? dy - box : dy < -half ? dy + box : dy;
            dz = dz > half ? dz - box : dz < -half ? dz + box : dz;
            double r2 = dx * dx + dy * dy + dz * dz;
            if (r2 < rc2) {
                double inv2 = 1.0 / r2, inv6 = inv2 * inv2 * inv2;
                double f = 24.0 * inv2 * inv6 * (2.0 * inv6 - 1.0);
                fxi += f * dx;
                fyi += f * dy;
                fzi += f * dz;
                ei += 0.5 * (4.0 * inv6 * (inv6 - 1.0) - ecut);   /* half of the pair */
            }
        }
        fx[i] = fxi;
        fy[i] = fyi;
        fz[i] = fzi;
        energy += ei;
    }
    return energy;
}

/* the atoms seen along z: a side x side PGM, each pixel the number of atoms
 * in its column of the box (maxval: the largest count) */
static void write_projection(const char *name, int n, double box, const double *x, const double *y)
{
    enum { side = 100 };
    static int count[side][side];
    int top = 1;
    for (int r = 0; r < side; r++)
        for (int c = 0; c < side; c++)
            count[r][c] = 0;
    for (int i = 0; i < n; i++) {
        int c = (int)(x[i] / box * side), r = (int)(y[i] / box * side);
        c = c < 0 ? 0 : c >= side ? side - 1 : c;
        r = r < 0 ? 0 : r >= side ? side - 1 : r;
        if (++count[r][c] > top)
            top = count[r][c];
    }
    FILE *f = fopen(name, "wb");
    if (!f)
        return;
    fprintf(f, "P2\n%d %d\n%d\n", side, side, top);
    for (int r = 0; r < side; r++)
        for (int c = 0; c < side; c++)
            fprintf(f, "%d%c", count[r][c], c == side - 1 ? '\n' : ' ');
    fclose(f);
}

static double kinetic(int n, const double *vx, const double *vy, const double *vz)
{
    double k = 0.0;
    for (int i = 0; i < n; i++)
        k += 0.5 * (vx[i] * vx[i] + vy[i] * vy[i] + vz[i] * vz[i]);
    return k;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 500;
    int steps = argc > 2 ? atoi(argv[2]) : 200;
    if (n < 2 || steps < 1) {
        fprintf(stderr, "usage: %s [n (>= 2)] [steps (>= 1)]\n", argv[0]);
        return 1;
    }
    const double box = cbrt(n / density);
    double *x = malloc(9 * (size_t)n * sizeof(double));
    double *y = x + n, *z = y + n, *vx = z + n, *vy = vx + n, *vz = vy + n;
    double *fx = vz + n, *fy = fx + n, *fz = fy + n;

    /* a cubic lattice of side m >= cbrt(n), and velocities from the
     * Park-Miller generator with the total momentum removed */
    int m = 1;
    while (m * m * m < n)
        m++;
    long long seed = 12345;
    double sum[3] = {0.0, 0.0, 0.0};
    for (int i = 0; i < n; i++) {
        x[i] = (i % m + 0.5) * box / m;
        y[i] = (i / m % m + 0.5) * box / m;
        z[i] = (i / (m * m) + 0.5) * box / m;
        double *v[3] = {vx, vy, vz};
        for (int d = 0; d < 3; d++) {
            seed = 16807 * seed % 2147483647;
            v[d][i] = (double)seed / 2147483647.0 - 0.5;
            sum[d] += v[d][i];
        }
    }
    for (int i = 0; i < n; i++) {
        vx[i] -= sum[0] / n;
        vy[i] -= sum[1] / n;
        vz[i] -= sum[2] / n;
    }
    double scale = sqrt(1.5 * n * temperature0 / kinetic(n, vx, vy, vz));
    for (int i = 0; i < n; i++) {
        vx[i] *= scale;
        vy[i] *= scale;
        vz[i] *= scale;
    }

    double potential = forces(n, box, x, y, z, fx, fy, fz);
    double e0 = potential + kinetic(n, vx, vy, vz);
    printf("atoms = %d\n", n);
    printf("box = %.6f\n", box);
    printf("energy_start = %.10f\n", e0);
    write_projection("md_start.pgm", n, box, x, y);

    double t0 = wall_time();
    for (int s = 1; s <= steps; s++) {
        for (int i = 0; i < n; i++) {
            vx[i] += 0.5 * dt * fx[i];
            vy[i] += 0.5 * dt * fy[i];
            vz[i] += 0.5 * dt * fz[i];
            x[i] += dt * vx[i];
            y[i] += dt * vy[i];
            z[i] += dt * vz[i];
            /* back into the box */
            x[i] -= box * floor(x[i] / box);
            y[i] -= box * floor(y[i] / box);
            z[i] -= box * floor(z[i] / box);
        }
        potential = forces(n, box, x, y, z, fx, fy, fz);
        for (int i = 0; i < n; i++) {
            vx[i] += 0.5 * dt * fx[i];
            vy[i] += 0.5 * dt * fy[i];
            vz[i] += 0.5 * dt * fz[i];
        }
        if (s % 50 == 0 || s == steps) {
            double k = kinetic(n, vx, vy, vz);
            printf("step %d energy = %.10f temperature = %.6f\n", s, potential + k, 2.0 * k / (3.0 * n));
        }
    }
    double t1 = wall_time();

    double e1 = potential + kinetic(n, vx, vy, vz);
    write_projection("md_end.pgm", n, box, x, y);
    printf("energy_end = %.10f\n", e1);
    printf("energy_drift = %.3e\n", fabs(e1 - e0) / fabs(e0));
    printf("time per step = %9.3f ms\n", 1.0e3 * (t1 - t0) / steps);
    free(x);
    return 0;
}
