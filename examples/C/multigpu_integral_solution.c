/* ln 2 = integral of 1/(1+x) over [0, 1], by the midpoint rule on n points,
 * the points shared out among the MPI ranks and each rank on its own GPU.
 * Usage: mpirun -np R ./integral [n]
 *
 * Rank r takes GPU r % ndevices: with fewer GPUs than ranks, they are shared
 * in turn. Without an NVIDIA GPU, acc_get_num_devices says 0 and every rank
 * computes on the host. Each rank keeps f, its block of the values, on its
 * device only, sums it there, and rank 0 adds the ranks' sums with MPI. */
#include <stdio.h>
#include <stdlib.h>
#include <mpi.h>
#include <openacc.h>

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

    /* Asking for a device of a type the machine lacks stops the program
     * (libgomp: "device type nvidia not supported"), so count them first. */
    int ndevices = acc_get_num_devices(acc_device_nvidia);
    int device = -1;
    if (ndevices > 0) {
        acc_set_device_num(rank % ndevices, acc_device_nvidia);
        device = acc_get_device_num(acc_device_nvidia);
    }

    /* This rank's points: indices first .. first + count - 1 of 0 .. n-1. */
    long first = n * rank / nranks;
    long count = n * (rank + 1) / nranks - first;
    double h = 1.0 / n;
    double *restrict f = malloc(count * sizeof(double));

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    double part = 0.0;
    #pragma acc data create(f[0:count])
    {
        #pragma acc parallel loop present(f[0:count])
        for (long i = 0; i < count; i++) {
            double x = (first + i + 0.5) * h;
            f[i] = 1.0 / (1.0 + x);
        }
        #pragma acc parallel loop present(f[0:count]) reduction(+:part)
        for (long i = 0; i < count; i++)
            part += h * f[i];
    }
    double total = 0.0;
    MPI_Reduce(&part, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
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
