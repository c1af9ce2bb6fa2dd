/*
 * nonblocking_setup: communicators whose first collective is a
 * non-blocking one, made in the patterns where a setup that blocked
 * inside it would hang or fail: coll rdma starts the setup resumable
 * there and queues the calls behind it (docs/nonblocking.md, "Setup").
 * Each phase runs on a fresh duplicate of MPI_COMM_WORLD (the dup's own
 * context id agreement is Open MPI's MPI_Iallreduce on the world, made
 * from its progress loop):
 *   1. rendezvous: rank 0 sends rank 1 a rendezvous-sized message with
 *      MPI_Issend, then posts MPI_Ibarrier and polls both with MPI_Test;
 *      rank 1 posts its MPI_Ibarrier first, then receives the message
 *      with a blocking MPI_Recv (the setup must advance in its progress),
 *      then waits; the last rank is late (sleeps before its first call);
 *   2. NBX sparse exchange: every rank MPI_Issends to its two neighbours,
 *      then probes (MPI_Iprobe), receives what arrives, posts MPI_Ibarrier
 *      once its sends completed and leaves when the barrier completed; no
 *      blocking collective before;
 *   3. first calls of every kind outstanding together (MPI_Ibcast with
 *      moving roots, MPI_Iallreduce, MPI_Ireduce with moving roots,
 *      MPI_Ibarrier), the last rank late, completed with MPI_Waitany;
 *   4. MPI_Iallreduce and MPI_Ibcast outstanding, then a blocking
 *      MPI_Allreduce while the setup may still be under way (it finishes
 *      the setup, the queued calls, then itself), then the others waited
 *      in reverse order;
 *   5. MPI_Iallreduce outstanding, then a persistent allreduce's *_init
 *      (which finishes the setup the same way), started and waited, then
 *      the MPI_Iallreduce waited.
 *   6. (with -F 1 instead of 1-5) MPI_Iallreduce outstanding, then a
 *      blocking MPI_Bcast on MPI_ERRORS_RETURN that must fail: run with
 *      coll_rdma_allreduce_max_bytes 0 (the queued iallreduce is handed
 *      to the module underneath when the bcast finishes the setup) and
 *      coll_rdma_test_panic_at bcast:1 (the bcast then fails the
 *      communicator), so the iallreduce is pending underneath on a
 *      failed communicator, and must still complete right.
 * Every payload and result is compared with the value each rank computes
 * from the formula every contribution follows.
 * Options: -r <rounds of the whole sequence> (default 3), -F 1 (phase 6
 * alone).
 */
#include "common.h"
#include <stdint.h>
#include <unistd.h>

#define NS_COUNT 48
/* Above the shared-memory BTL's eager limit: MPI_Issend's rendezvous. */
#define NS_BIG (256 * 1024)
#define NS_TAG 4242

static void ns_check_from(const int64_t *got, int count, int from, long seq, const char *what)
{
    for (int i = 0; i < count; i++) {
        if (got[i] != t_contribution(from, seq, i)) {
            T_FAIL("%s (call %ld, from rank %d): element %d is %lld, want %lld", what, seq, from, i, (long long)got[i],
                   (long long)t_contribution(from, seq, i));
            return;
        }
    }
}

static void ns_late(MPI_Comm comm)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size > 1 && rank == size - 1) usleep(T_LATE_US);
}

static MPI_Comm ns_fresh(tcomm_t *out)
{
    MPI_Comm comm;
    T_MPI(MPI_Comm_dup(t_world.comm, &comm));
    t_derive(&t_world, comm, out);
    return out->comm;
}

/* 1. */
static void ns_rendezvous(MPI_Comm comm, long seq)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int count = NS_BIG / (int)sizeof(int64_t);
    int64_t *big = malloc(NS_BIG);
    MPI_Request barrier, send;
    ns_late(comm);
    if (rank == 0 && size > 1) {
        t_fill_contributions(big, count, 0, seq);
        T_MPI(MPI_Issend(big, count, MPI_INT64_T, 1, NS_TAG, comm, &send));
        T_MPI(MPI_Ibarrier(comm, &barrier));
        int sent = 0, passed = 0;
        while (!sent || !passed) {
            if (!sent) T_MPI(MPI_Test(&send, &sent, MPI_STATUS_IGNORE));
            if (!passed) T_MPI(MPI_Test(&barrier, &passed, MPI_STATUS_IGNORE));
        }
    } else if (rank == 1) {
        T_MPI(MPI_Ibarrier(comm, &barrier));
        T_MPI(MPI_Recv(big, count, MPI_INT64_T, 0, NS_TAG, comm, MPI_STATUS_IGNORE));
        ns_check_from(big, count, 0, seq, "rendezvous message");
        T_MPI(MPI_Wait(&barrier, MPI_STATUS_IGNORE));
    } else {
        T_MPI(MPI_Ibarrier(comm, &barrier));
        T_MPI(MPI_Wait(&barrier, MPI_STATUS_IGNORE));
    }
    free(big);
}

/* 2. */
static void ns_nbx(MPI_Comm comm, long seq)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int count = NS_BIG / (int)sizeof(int64_t);
    int targets[2] = {(rank + 1) % size, (rank + size - 1) % size};
    int nsend = size == 1 ? 0 : size == 2 ? 1 : 2;
    int64_t *out = malloc(NS_BIG), *in = malloc(NS_BIG);
    t_fill_contributions(out, count, rank, seq);
    MPI_Request sends[2], barrier = MPI_REQUEST_NULL;
    for (int k = 0; k < nsend; k++) T_MPI(MPI_Issend(out, count, MPI_INT64_T, targets[k], NS_TAG + 1, comm, &sends[k]));
    int received = 0, barrier_posted = 0, done = 0;
    while (!done) {
        int flag;
        MPI_Status status;
        T_MPI(MPI_Iprobe(MPI_ANY_SOURCE, NS_TAG + 1, comm, &flag, &status));
        if (flag) {
            T_MPI(MPI_Recv(in, count, MPI_INT64_T, status.MPI_SOURCE, NS_TAG + 1, comm, MPI_STATUS_IGNORE));
            ns_check_from(in, count, status.MPI_SOURCE, seq, "NBX message");
            received++;
        }
        if (!barrier_posted) {
            int sent = 1;
            if (nsend > 0) T_MPI(MPI_Testall(nsend, sends, &sent, MPI_STATUSES_IGNORE));
            if (sent) {
                T_MPI(MPI_Ibarrier(comm, &barrier));
                barrier_posted = 1;
            }
        } else {
            T_MPI(MPI_Test(&barrier, &done, MPI_STATUS_IGNORE));
        }
    }
    T_CHECK(received == nsend, "NBX: received %d messages, want %d", received, nsend);
    free(out);
    free(in);
}

/* 3. */
#define NS_KINDS 6
static void ns_every_kind(MPI_Comm comm, long seq)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    static int64_t send[NS_KINDS][NS_COUNT], recv[NS_KINDS][NS_COUNT];
    int roots[NS_KINDS] = {0, 0, (int)(seq % size), (int)((seq + 1) % size), size - 1, 0};
    MPI_Request rq[NS_KINDS];
    ns_late(comm);
    for (int k = 0; k < NS_KINDS; k++) {
        t_fill_contributions(send[k], NS_COUNT, rank, seq + k);
        for (int i = 0; i < NS_COUNT; i++) recv[k][i] = -1;
    }
    t_fill_contributions(recv[0], NS_COUNT, roots[0], seq);
    if (rank != roots[0]) memset(recv[0], 0, sizeof recv[0]);
    T_MPI(MPI_Ibcast(recv[0], NS_COUNT, MPI_INT64_T, roots[0], comm, &rq[0]));
    T_MPI(MPI_Iallreduce(send[1], recv[1], NS_COUNT, MPI_INT64_T, MPI_SUM, comm, &rq[1]));
    T_MPI(MPI_Ireduce(send[2], recv[2], NS_COUNT, MPI_INT64_T, MPI_SUM, roots[2], comm, &rq[2]));
    T_MPI(MPI_Ireduce(send[3], recv[3], NS_COUNT, MPI_INT64_T, MPI_SUM, roots[3], comm, &rq[3]));
    t_fill_contributions(recv[4], NS_COUNT, roots[4], seq + 4);
    if (rank != roots[4]) memset(recv[4], 0, sizeof recv[4]);
    T_MPI(MPI_Ibcast(recv[4], NS_COUNT, MPI_INT64_T, roots[4], comm, &rq[4]));
    T_MPI(MPI_Ibarrier(comm, &rq[5]));
    for (int left = NS_KINDS; left > 0; left--) {
        int index;
        T_MPI(MPI_Waitany(NS_KINDS, rq, &index, MPI_STATUS_IGNORE));
        T_CHECK(index != MPI_UNDEFINED, "MPI_Waitany found no request with %d left", left);
    }
    ns_check_from(recv[0], NS_COUNT, roots[0], seq, "ibcast");
    t_check_contribution_sum(recv[1], NS_COUNT, size, seq + 1, "iallreduce");
    if (rank == roots[2]) t_check_contribution_sum(recv[2], NS_COUNT, size, seq + 2, "ireduce");
    if (rank == roots[3]) t_check_contribution_sum(recv[3], NS_COUNT, size, seq + 3, "ireduce");
    ns_check_from(recv[4], NS_COUNT, roots[4], seq + 4, "ibcast");
}

/* 4. */
static void ns_then_blocking(MPI_Comm comm, long seq)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    static int64_t send[3][NS_COUNT], recv[3][NS_COUNT];
    MPI_Request rq[2];
    for (int k = 0; k < 3; k++) t_fill_contributions(send[k], NS_COUNT, rank, seq + k);
    T_MPI(MPI_Iallreduce(send[0], recv[0], NS_COUNT, MPI_INT64_T, MPI_SUM, comm, &rq[0]));
    int root = (int)(seq % size);
    t_fill_contributions(recv[1], NS_COUNT, root, seq + 1);
    if (rank != root) memset(recv[1], 0, sizeof recv[1]);
    T_MPI(MPI_Ibcast(recv[1], NS_COUNT, MPI_INT64_T, root, comm, &rq[1]));
    T_MPI(MPI_Allreduce(send[2], recv[2], NS_COUNT, MPI_INT64_T, MPI_SUM, comm));
    t_check_contribution_sum(recv[2], NS_COUNT, size, seq + 2, "blocking allreduce behind the setup");
    T_MPI(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
    T_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    t_check_contribution_sum(recv[0], NS_COUNT, size, seq, "iallreduce before a blocking call");
    ns_check_from(recv[1], NS_COUNT, root, seq + 1, "ibcast before a blocking call");
}

/* 5. */
static void ns_then_init(MPI_Comm comm, long seq)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    static int64_t send[2][NS_COUNT], recv[2][NS_COUNT];
    MPI_Request pending, persistent;
    t_fill_contributions(send[0], NS_COUNT, rank, seq);
    T_MPI(MPI_Iallreduce(send[0], recv[0], NS_COUNT, MPI_INT64_T, MPI_SUM, comm, &pending));
    T_MPI(T_ALLREDUCE_INIT(send[1], recv[1], NS_COUNT, MPI_INT64_T, MPI_SUM, comm, MPI_INFO_NULL, &persistent));
    for (int s = 0; s < 3; s++) {
        t_fill_contributions(send[1], NS_COUNT, rank, seq + 1 + s);
        T_MPI(MPI_Start(&persistent));
        T_MPI(MPI_Wait(&persistent, MPI_STATUS_IGNORE));
        t_check_contribution_sum(recv[1], NS_COUNT, size, seq + 1 + s, "persistent allreduce behind the setup");
    }
    T_MPI(MPI_Request_free(&persistent));
    T_MPI(MPI_Wait(&pending, MPI_STATUS_IGNORE));
    t_check_contribution_sum(recv[0], NS_COUNT, size, seq, "iallreduce before an *_init");
}

/* 6. */
static void ns_then_failure(MPI_Comm comm, long seq)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    static int64_t send[NS_COUNT], recv[NS_COUNT];
    MPI_Request pending;
    t_fill_contributions(send, NS_COUNT, rank, seq);
    T_MPI(MPI_Iallreduce(send, recv, NS_COUNT, MPI_INT64_T, MPI_SUM, comm, &pending));
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int64_t word = rank;
    int rc = MPI_Bcast(&word, 1, MPI_INT64_T, 0, comm);
    T_CHECK(rc != MPI_SUCCESS, "-F 1: the MPI_Bcast meant to fail succeeded (run with coll_rdma_test_panic_at=bcast:1)");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
    T_MPI(MPI_Wait(&pending, MPI_STATUS_IGNORE));
    t_check_contribution_sum(recv, NS_COUNT, size, seq, "iallreduce handed over, then its communicator failed");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long rounds = t_opt(argc, argv, "-r", 3);
    if (t_opt(argc, argv, "-F", 0)) {
        for (long r = 0; r < rounds; r++) {
            tcomm_t c;
            ns_then_failure(ns_fresh(&c), 1000 * (r + 1) + 600);
            t_free(&c);
        }
        return t_finish("nonblocking_setup");
    }
    for (long r = 0; r < rounds; r++) {
        tcomm_t c[5];
        long seq = 1000 * (r + 1);
        ns_rendezvous(ns_fresh(&c[0]), seq);
        ns_nbx(ns_fresh(&c[1]), seq + 100);
        ns_every_kind(ns_fresh(&c[2]), seq + 200);
        ns_then_blocking(ns_fresh(&c[3]), seq + 300);
        ns_then_init(ns_fresh(&c[4]), seq + 400);
        /* Every call after the setup, on each: the same kinds again. */
        for (int k = 0; k < 5; k++) ns_every_kind(c[k].comm, seq + 500 + 10 * k);
        for (int k = 0; k < 5; k++) t_barrier(&c[k]);
        for (int k = 4; k >= 0; k--) t_free(&c[k]);
    }
    return t_finish("nonblocking_setup");
}
