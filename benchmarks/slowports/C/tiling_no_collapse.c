/* Laplace equation on a 2D grid, Jacobi iterations, tiled OpenACC loops.
 * Usage: ./laplace [nx] [ny] [iterations]
 * The top edge is held at 100, the other edges at 0; the interior starts at 0.
 * Each sweep computes the new interior from the 4 neighbours and the largest
 * change ("error"); the solution runs both sweeps on the accelerator with
 * tile(32,32) and a max reduction. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char *argv[])
{
    int nx = argc > 1 ? atoi(argv[1]) : 258;
    int ny = argc > 2 ? atoi(argv[2]) : 258;
    int niter = argc > 3 ? atoi(argv[3]) : 1000;
    int report = niter >= 10 ? niter / 10 : 1;
    size_t n = (size_t)nx * ny;

    double *restrict T = malloc(n * sizeof(double));
    double *restrict Tnew = malloc(n * sizeof(double));

    /* T[j*nx + i]: row j, column i; row 0 is the hot edge */
    for (size_t p = 0; p < n; p++) {
        T[p] = 0.0;
        Tnew[p] = 0.0;
    }
    for (int i = 0; i < nx; i++)
        T[i] = 100.0;

    double error = 0.0;
    int it;
    double t0 = wall_time();

    #pragma acc data copy(T[0:n]) copyin(Tnew[0:n])
    for (it = 1; it <= niter; it++) {
        error = 0.0;

        #pragma acc parallel loop reduction(max:error) present(T[0:n], Tnew[0:n])   /* DEFECT */
        for (int j = 1; j < ny - 1; j++)
            for (int i = 1; i < nx - 1; i++) {
                Tnew[j * nx + i] = 0.25 * (T[j * nx + i + 1] + T[j * nx + i - 1]
                                         + T[(j + 1) * nx + i] + T[(j - 1) * nx + i]);
                error = fmax(error, fabs(Tnew[j * nx + i] - T[j * nx + i]));
            }

        #pragma acc parallel loop present(T[0:n], Tnew[0:n])
        for (int j = 1; j < ny - 1; j++)
            for (int i = 1; i < nx - 1; i++)
                T[j * nx + i] = Tnew[j * nx + i];

        if (it % report == 0)
            printf("iteration %6d   error = %.6E\n", it, error);
    }

    double t1 = wall_time();
    printf("grid = %d x %d\n", nx, ny);
    printf("iterations = %d\n", niter);
    printf("error = %.6E\n", error);
    double mean = 0.0;
    for (size_t p = 0; p < n; p++)
        mean += T[p];
    mean /= n;
    printf("mean T = %.6E\n", mean);
    printf("time = %9.3f s\n", t1 - t0);

    free(T);
    free(Tnew);
    return 0;
}
