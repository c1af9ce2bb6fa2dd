/*
 * nonblocking_stall: a rank late to non-blocking collectives, long enough
 * for the others' waits to pass coll_rdma_stall_warning. The waiting
 * ranks must warn (the case's checks read their stderr) as a blocking
 * call's wait does, and every result must still be right.
 *
 * After a blocking barrier (which sets coll rdma up on the communicator,
 * so that the runs, not the setup, are what waits), rank 1 sleeps -s
 * seconds (default 6); every other rank has already
 * posted an MPI_Ibarrier, an MPI_Iallreduce (sum of int64, every rank's
 * contribution known to all) and an MPI_Ibcast rooted at rank 1, and
 * waits for all three with MPI_Waitall. Then rank 1 posts the same three
 * calls and waits. A started persistent allreduce follows, rank 1 late
 * again by the same time, waited with MPI_Wait. With np 1 nobody waits
 * for anybody: the program only checks the results.
 *
 * With -a, the other ranks compute (sleep) that many seconds between
 * posting (or starting) and waiting: the time away from MPI is not
 * waiting, so a fault timeout longer than the wait itself, though shorter
 * than the time since the post, must not fail the calls.
 *
 * Options: -s <seconds rank 1 is late> (default 6), -a <seconds the others
 * compute after posting> (default 0), -n <int64 elements> (default 5).
 */
#include "common.h"
#include <unistd.h>

static int64_t contribution(int rank, int i) { return (int64_t)rank * 1000 + i + 1; }

static void check_sum(const int64_t *sums, int n, int size, const char *what)
{
    for (int i = 0; i < n; i++) {
        int64_t want = 0;
        for (int r = 0; r < size; r++) want += contribution(r, i);
        T_CHECK(sums[i] == want, "%s: element %d is %lld, expected %lld", what, i, (long long)sums[i], (long long)want);
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int late_seconds = (int)t_opt(argc, argv, "-s", 6);
    int away_seconds = (int)t_opt(argc, argv, "-a", 0);
    int n = (int)t_opt(argc, argv, "-n", 5);
    int rank = t_wrank, size = t_wsize, late = size > 1 ? 1 : 0;
    int64_t *mine = malloc(sizeof(int64_t) * (size_t)n), *sums = malloc(sizeof(int64_t) * (size_t)n);
    int64_t *message = malloc(sizeof(int64_t) * (size_t)n);
    for (int i = 0; i < n; i++) mine[i] = contribution(rank, i);

    for (int i = 0; i < n; i++) message[i] = rank == late ? 7 * i + 3 : -1;
    t_barrier(&t_world);
    if (rank == late && size > 1) sleep((unsigned)late_seconds);
    MPI_Request requests[3];
    T_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &requests[0]));
    T_MPI(MPI_Iallreduce(mine, sums, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &requests[1]));
    T_MPI(MPI_Ibcast(message, n, MPI_INT64_T, late, MPI_COMM_WORLD, &requests[2]));
    if (rank != late) sleep((unsigned)away_seconds);
    T_MPI(MPI_Waitall(3, requests, MPI_STATUSES_IGNORE));
    check_sum(sums, n, size, "MPI_Iallreduce");
    for (int i = 0; i < n; i++)
        T_CHECK(message[i] == 7 * i + 3, "MPI_Ibcast: element %d is %lld, expected %d", i, (long long)message[i], 7 * i + 3);

    MPI_Request persistent;
    T_MPI(T_ALLREDUCE_INIT(mine, sums, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &persistent));
    memset(sums, 0, sizeof(int64_t) * (size_t)n);
    if (rank == late && size > 1) sleep((unsigned)late_seconds);
    T_MPI(MPI_Start(&persistent));
    if (rank != late) sleep((unsigned)away_seconds);
    T_MPI(MPI_Wait(&persistent, MPI_STATUS_IGNORE));
    check_sum(sums, n, size, "persistent allreduce");
    T_MPI(MPI_Request_free(&persistent));

    free(mine);
    free(sums);
    free(message);
    return t_finish("nonblocking_stall");
}
