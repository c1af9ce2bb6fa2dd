/* One launch's latency of a collective at np=2, robust to a loaded machine:
 * S samples of K calls, each call followed by an untimed separator (MPI_Barrier
 * as in bench/coll_pairs.c; "nobarrier": none; "sendrecv": a 1-byte
 * MPI_Sendrecv, which coll rdma does not serve); a sample's figure is the
 * slowest rank's mean time per call. Prints the minimum, 5th, 10th and 25th
 * percentile over the samples (us): preemption only adds time, so the low
 * percentiles of many short samples see the run as on an idle machine.
 *   launch_latency S K COUNT COLL [nobarrier|sendrecv]
 * COUNT floats; COLL 0 reduce (root 0), 1 allreduce, 2 barrier, 3 bcast. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int S = atoi(argv[1]), K = atoi(argv[2]), count = atoi(argv[3]), coll = atoi(argv[4]), sep = argc > 5 ? (argv[5][0] == 's' ? 2 : 0) : 1, rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float *s, *r;
    if (posix_memalign((void **)&s, 4096, count * 4 + 4096) || posix_memalign((void **)&r, 4096, count * 4 + 4096)) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < count; i++) s[i] = 1.0f;
    double *mine = calloc(S, sizeof(double)), *all = calloc(S, sizeof(double));
    for (int w = 0; w < 2000; w++) MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < S; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double total = 0;
        for (int i = 0; i < K; i++) {
            double t0 = MPI_Wtime();
            if (coll == 0) MPI_Reduce(s, r, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
            else if (coll == 1) MPI_Allreduce(s, r, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            else if (coll == 2) MPI_Barrier(MPI_COMM_WORLD);
            else MPI_Bcast(s, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
            total += MPI_Wtime() - t0;
            if (sep == 1) MPI_Barrier(MPI_COMM_WORLD);
            else if (sep == 2) { char x = 0, y; MPI_Sendrecv(&x, 1, MPI_CHAR, 1 - rank, 7, &y, 1, MPI_CHAR, 1 - rank, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
        }
        mine[k] = total / K * 1e6;
    }
    MPI_Reduce(mine, all, S, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(all, S, sizeof(double), cmp);
        printf("%.4f %.4f %.4f %.4f\n", all[0], all[S / 20], all[S / 10], all[S / 4]);
    }
    MPI_Finalize();
    return 0;
}
