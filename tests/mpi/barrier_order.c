/*
 * barrier_order: the barrier property under load.
 *
 * Nobody may leave barrier k before every member entered barrier k. Checked by
 * t_barrier() (common.h) with shared counters, over thousands of barriers:
 *   1. MPI_COMM_WORLD, back to back;
 *   2. MPI_COMM_WORLD, random ranks sleep a random time before entering;
 *   3. MPI_COMM_WORLD, one late rank per barrier, rotating;
 *   4. even/odd halves (MPI_Comm_split) running their barriers concurrently,
 *      with random delays;
 *   5. a communicator with the ranks in reverse order;
 *   6. barriers alternating between MPI_COMM_WORLD and the half communicator.
 *
 * Options: -n <barriers in phase 1> (default 4000; the other phases scale
 * from it), -d <largest random delay in us> (default 200), -s <seconds>: the
 * last rank sleeps that long before the second barrier (stall warnings; the
 * first barrier on a communicator also sets coll rdma's transport up).
 */
#include "common.h"

static void phase_info(const char *what, long n, double t0)
{
    double dt = MPI_Wtime() - t0;
    if (t_wrank == 0)
        printf("info: %-34s %6ld barriers %8.3f s %9.2f us/barrier\n", what, n, dt,
               n ? dt / (double)n * 1e6 : 0.0);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long n = t_opt(argc, argv, "-n", 4000);
    unsigned maxd = (unsigned)t_opt(argc, argv, "-d", 200);
    if (maxd == 0) maxd = 1;
    unsigned stall = (unsigned)t_opt(argc, argv, "-s", 0);
    double t0;

    if (stall) {
        t_barrier(&t_world); /* the first one also sets the transport up */
        t0 = MPI_Wtime();
        if (t_wrank == t_wsize - 1) sleep(stall);
        t_barrier(&t_world);
        phase_info("one rank late by -s seconds", 1, t0);
    }

    /* 1. back to back */
    t0 = MPI_Wtime();
    for (long i = 0; i < n; i++) t_barrier(&t_world);
    phase_info("world back to back", n, t0);

    /* 2. random delays on random ranks */
    long n2 = n / 4 > 0 ? n / 4 : 1;
    t0 = MPI_Wtime();
    for (long i = 0; i < n2; i++)
        t_barrier_delay(&t_world, (t_rand() % 4 == 0) ? 1 + t_rand() % maxd : 0);
    phase_info("world random delays", n2, t0);

    /* 3. one late rank per barrier, rotating */
    long n3 = n / 20 > 0 ? n / 20 : 1;
    t0 = MPI_Wtime();
    for (long i = 0; i < n3; i++)
        t_barrier_delay(&t_world, (i % t_wsize == t_wrank) ? maxd : 0);
    phase_info("world rotating late rank", n3, t0);

    /* 4. halves, concurrently */
    MPI_Comm c;
    tcomm_t half, rev;
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, t_wrank % 2, t_wrank, &c));
    t_derive(&t_world, c, &half);
    long n4 = n / 2 > 0 ? n / 2 : 1;
    t0 = MPI_Wtime();
    for (long i = 0; i < n4; i++)
        t_barrier_delay(&half, (t_rand() % 8 == 0) ? 1 + t_rand() % maxd : 0);
    phase_info("even/odd halves concurrently", n4, t0);

    /* 5. reversed rank order */
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, t_wsize - t_wrank, &c));
    t_derive(&t_world, c, &rev);
    T_CHECK(rev.rank == t_wsize - 1 - t_wrank, "reversed rank %d, expected %d", rev.rank,
            t_wsize - 1 - t_wrank);
    long n5 = n / 4 > 0 ? n / 4 : 1;
    t0 = MPI_Wtime();
    for (long i = 0; i < n5; i++)
        t_barrier_delay(&rev, (t_rand() % 16 == 0) ? 1 + t_rand() % maxd : 0);
    phase_info("reversed order", n5, t0);

    /* 6. alternating communicators */
    long n6 = n / 8 > 0 ? n / 8 : 1;
    t0 = MPI_Wtime();
    for (long i = 0; i < n6; i++) {
        t_barrier(&half);
        t_barrier(&t_world);
        t_barrier(&rev);
    }
    phase_info("alternating world/half/reversed", 3 * n6, t0);

    t_free(&rev);
    t_free(&half);
    return t_finish("barrier_order");
}
