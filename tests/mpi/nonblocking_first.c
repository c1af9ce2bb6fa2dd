/*
 * nonblocking_first: communicators whose first collective is a
 * non-blocking or persistent one. coll rdma sets a communicator up at its
 * first collective: waiting in a blocking one or a persistent *_init,
 * resumable behind a non-blocking one (the calls queued until it ends);
 * whatever comes first, every communicator must reach the same state
 * (served, or unavailable with the same stage and reason) and every
 * result must be right.
 *   1. MPI_Comm_dup of MPI_COMM_WORLD before any collective coll rdma
 *      serves on it: Open MPI agrees on the new context id with its own
 *      MPI_Iallreduce on MPI_COMM_WORLD, made from its progress loop, so
 *      that is the world's first call into coll rdma;
 *   2. on the duplicate, MPI_Iallreduce first (several outstanding, with
 *      MPI_Ireduce of moving roots and an MPI_Ibarrier among them,
 *      completed in reverse order);
 *   3. on a second duplicate, a persistent allreduce first (initialised and
 *      started before any other call there, buffers changed between starts;
 *      its *_init sets the duplicate up);
 *   4. blocking barriers on all three (which finish any setup still under
 *      way), then
 *      the same calls again, and a third duplicate made once the world is
 *      set up (Open MPI's MPI_Iallreduce is then served from its progress
 *      loop).
 * Every result is compared with a reference each rank computes locally
 * from the formula every rank's contribution follows.
 * Options: -r <rounds of the non-blocking calls after setup> (default 20).
 */
#include "common.h"
#include <stdint.h>

#define NF_OUTSTANDING 4
#define NF_COUNT 64
#define NF_STARTS 5

/* NF_OUTSTANDING reductions (allreduces and reduces with moving roots) and
 * an ibarrier, all outstanding together, completed in reverse order. */
static void nf_round(MPI_Comm comm, long seq0)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    static int64_t send[NF_OUTSTANDING][NF_COUNT], recv[NF_OUTSTANDING][NF_COUNT];
    MPI_Request rq[NF_OUTSTANDING + 1];
    for (int k = 0; k < NF_OUTSTANDING; k++) {
        t_fill_contributions(send[k], NF_COUNT, rank, seq0 + k);
        for (int i = 0; i < NF_COUNT; i++) recv[k][i] = -1;
        if (k % 2 == 0)
            T_MPI(MPI_Iallreduce(send[k], recv[k], NF_COUNT, MPI_INT64_T, MPI_SUM, comm, &rq[k]));
        else
            T_MPI(MPI_Ireduce(send[k], recv[k], NF_COUNT, MPI_INT64_T, MPI_SUM, (int)((seq0 + k) % size), comm, &rq[k]));
    }
    T_MPI(MPI_Ibarrier(comm, &rq[NF_OUTSTANDING]));
    for (int k = NF_OUTSTANDING; k >= 0; k--) T_MPI(MPI_Wait(&rq[k], MPI_STATUS_IGNORE));
    for (int k = 0; k < NF_OUTSTANDING; k++) {
        if (k % 2 == 0)
            t_check_contribution_sum(recv[k], NF_COUNT, size, seq0 + k, "iallreduce");
        else if (rank == (int)((seq0 + k) % size))
            t_check_contribution_sum(recv[k], NF_COUNT, size, seq0 + k, "ireduce");
    }
}

/* One persistent allreduce started NF_STARTS times, its send buffer
 * refilled between starts. */
static void nf_persistent(MPI_Comm comm, long seq0)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    static int64_t send[NF_COUNT], recv[NF_COUNT];
    MPI_Request rq;
    T_MPI(T_ALLREDUCE_INIT(send, recv, NF_COUNT, MPI_INT64_T, MPI_SUM, comm, MPI_INFO_NULL, &rq));
    for (int s = 0; s < NF_STARTS; s++) {
        t_fill_contributions(send, NF_COUNT, rank, seq0 + s);
        T_MPI(MPI_Start(&rq));
        T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        t_check_contribution_sum(recv, NF_COUNT, size, seq0 + s, "persistent allreduce");
    }
    T_MPI(MPI_Request_free(&rq));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long rounds = t_opt(argc, argv, "-r", 20);
    MPI_Comm comm;
    tcomm_t first, second, third;
    T_MPI(MPI_Comm_dup(t_world.comm, &comm)); /* 1. */
    t_derive(&t_world, comm, &first);
    nf_round(first.comm, 0); /* 2. */
    T_MPI(MPI_Comm_dup(t_world.comm, &comm));
    t_derive(&t_world, comm, &second);
    nf_persistent(second.comm, 100); /* 3. */
    t_barrier(&first); /* 4. */
    t_barrier(&second);
    t_barrier(&t_world);
    for (long r = 0; r < rounds; r++) {
        nf_round(first.comm, 1000 + 10 * r);
        nf_round(t_world.comm, 100000 + 10 * r);
    }
    nf_persistent(second.comm, 200);
    T_MPI(MPI_Comm_dup(t_world.comm, &comm));
    t_derive(&t_world, comm, &third);
    t_barrier(&third);
    nf_round(third.comm, 300);
    t_free(&third);
    t_free(&second);
    t_free(&first);
    return t_finish("nonblocking_first");
}
