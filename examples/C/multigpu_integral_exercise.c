/* ln 2 = integral of 1/(1+x) over [0, 1], by the midpoint rule on n points.
 * Usage: mpirun -np R ./integral [n]
 *
 * The program starts MPI, but every rank computes all the points on the
 * host, and rank 0 prints its own result.
 * To do:
 *  - count the NVIDIA GPUs; when there is at least one, give rank r the GPU
 *    r % ndevices and read back the device number the runtime uses; without
 *    any, every rank stays on the host (ndevices = 0);
 *  - give each rank its own block of the n points, the blocks following each
 *    other in rank order;
 *  - compute f and its sum on the device, f living there only, with no
 *    implicit data movement;
 *  - add the ranks' sums on rank 0. */
#include <stdio.h>
#include <stdlib.h>
#include <mpi.h>

int main(int argc, char *argv[])
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long n = argc > 1 ? atol(argv[1]) : 4000000;
    if (n < nranks) {
        if (rank == 0)
            fprintf(stderr, "usage: %s [n (at least one point per rank)]\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* TODO: ask the OpenACC runtime (-1: not asked yet) */
    int ndevices = -1;
    int device = -1;

    /* TODO: this rank's points only */
    long first = 0;
    long count = n;
    double h = 1.0 / n;
    double *restrict f = malloc(count * sizeof(double));

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    double part = 0.0;
    /* TODO: on the device */
    for (long i = 0; i < count; i++) {
        double x = (first + i + 0.5) * h;
        f[i] = 1.0 / (1.0 + x);
    }
    for (long i = 0; i < count; i++)
        part += h * f[i];
    /* TODO: the sum of every rank's part, on rank 0 */
    double total = part;
    double t1 = MPI_Wtime();

    /* Rank 0 prints every rank's device and block, in rank order. */
    long mine[4] = {device, ndevices, first, count};
    long *all = malloc(4 * (size_t)nranks * sizeof(long));
    MPI_Gather(mine, 4, MPI_LONG, all, 4, MPI_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("ranks = %d\n", nranks);
        for (int r = 0; r < nranks; r++) {
            long *a = all + 4 * r;
            if (a[1] == 0)
                printf("rank %d -> host, ", r);
            else
                printf("rank %d -> device %ld of %ld, ", r, a[0], a[1]);
            printf("points [%ld, %ld)\n", a[2], a[2] + a[3]);
        }
        printf("ln2 = %.12f\n", total);
        printf("time = %.3f s\n", t1 - t0);
    }
    free(all);
    free(f);
    MPI_Finalize();
    return 0;
}
