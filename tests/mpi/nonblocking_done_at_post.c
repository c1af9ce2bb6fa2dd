/*
 * nonblocking_done_at_post: non-blocking calls that find everything they
 * need at their post. Every rank but 0 posts first and then tells rank 0
 * so (an empty message); rank 0 posts only once all have, so its
 * MPI_Ibarrier and MPI_Iallreduce find every peer's part already written,
 * as its MPI_Ireduce (root 0) does at np 2, and its MPI_Ibcast (root 0)
 * only writes. coll rdma ends such a run at the post (all but the
 * MPI_Iallreduce, whose exchange looks for contributions only from its
 * next advance on, so as not to take a slot from a peer posting at the
 * same moment; docs/nonblocking.md) and gives the caller
 * Open MPI's completed empty request, not one of its own; every way of
 * completing a request must treat that one like any other. Rank 0 looks at
 * each request with MPI_Request_get_status (which leaves it in place) and
 * then completes it, in turn, with MPI_Wait, MPI_Test, MPI_Waitall,
 * MPI_Waitany, MPI_Waitsome, MPI_Testall, MPI_Testany or MPI_Testsome, the
 * multi-request ones beside a receive from the last rank that may still be
 * pending (MPI_Request_free is erroneous on a collective's request).
 * Afterwards the handle must be MPI_REQUEST_NULL and every result right
 * (the other ranks check theirs too, and a reduce's other ranks that their
 * receive buffer was left alone). Options: -n rounds (default 32, four
 * kinds times eight ways);
 * -D 1: every call of rank 0's but the MPI_Iallreduce must have ended at
 * its post (np 2 on shared memory, where each run does): complete right
 * after it, and, where Open
 * MPI's headers are installed, with Open MPI's empty request in the
 * handle, no request of coll rdma's.
 */
#include "common.h"
#include <stdint.h>
#ifdef T_HAVE_OMPI_CID
#include "ompi/request/request.h"
#endif

enum { DP_IBARRIER, DP_IALLREDUCE, DP_IREDUCE, DP_IBCAST, DP_KINDS };
static const char *dp_kinds[DP_KINDS] = {"ibarrier", "iallreduce", "ireduce", "ibcast"};
enum { DP_WAIT, DP_TEST, DP_WAITALL, DP_WAITANY, DP_WAITSOME, DP_TESTALL, DP_TESTANY, DP_TESTSOME, DP_WAYS };
static const char *dp_ways[DP_WAYS] = {"MPI_Wait", "MPI_Test", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome",
                                       "MPI_Testall", "MPI_Testany", "MPI_Testsome"};

#define DP_COUNT 3
#define DP_NOTIFY_TAG 5
#define DP_PAIR_TAG 77

static int64_t dp_value(int rank, long round, int i)
{
    return (int64_t)(t_mix(((uint64_t)round << 32) ^ ((uint64_t)rank << 16) ^ (uint64_t)i) >> 12);
}

/* Posts KIND's call of round ROUND on MPI_COMM_WORLD. */
static void dp_post(int kind, long round, int64_t *send, int64_t *recv, MPI_Request *request)
{
    switch (kind) {
    case DP_IBARRIER: T_MPI(MPI_Ibarrier(MPI_COMM_WORLD, request)); break;
    case DP_IALLREDUCE: T_MPI(MPI_Iallreduce(send, recv, DP_COUNT, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, request)); break;
    case DP_IREDUCE: T_MPI(MPI_Ireduce(send, recv, DP_COUNT, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD, request)); break;
    default: T_MPI(MPI_Ibcast(send, DP_COUNT, MPI_INT64_T, 0, MPI_COMM_WORLD, request)); break;
    }
}

/* Completes rank 0's REQUEST the way WAY says, with PAIR (a receive that
 * may be pending) beside it in the multi-request ways and waited for on
 * its own in the others; both handles must end as MPI_REQUEST_NULL. */
static void dp_complete(int way, MPI_Request *request, MPI_Request *pair, const char *what)
{
    MPI_Request both[2] = {*request, *pair};
    int flag = 0, index, done = 0, outcount, indices[2];
    switch (way) {
    case DP_WAIT: T_MPI(MPI_Wait(request, MPI_STATUS_IGNORE)); break;
    case DP_TEST:
        while (!flag) T_MPI(MPI_Test(request, &flag, MPI_STATUS_IGNORE));
        break;
    case DP_WAITALL: T_MPI(MPI_Waitall(2, both, MPI_STATUSES_IGNORE)); break;
    case DP_WAITANY:
        for (done = 0; done < 2; done++) {
            T_MPI(MPI_Waitany(2, both, &index, MPI_STATUS_IGNORE));
            T_CHECK(index == 0 || index == 1, "%s: MPI_Waitany gave index %d", what, index);
        }
        T_MPI(MPI_Waitany(2, both, &index, MPI_STATUS_IGNORE));
        T_CHECK(index == MPI_UNDEFINED, "%s: MPI_Waitany found a third request (index %d)", what, index);
        break;
    case DP_WAITSOME:
        while (done < 2) {
            T_MPI(MPI_Waitsome(2, both, &outcount, indices, MPI_STATUSES_IGNORE));
            T_CHECK(outcount >= 1 && outcount <= 2, "%s: MPI_Waitsome gave %d", what, outcount);
            done += outcount;
        }
        break;
    case DP_TESTALL:
        while (!flag) T_MPI(MPI_Testall(2, both, &flag, MPI_STATUSES_IGNORE));
        break;
    case DP_TESTANY:
        while (done < 2) {
            T_MPI(MPI_Testany(2, both, &index, &flag, MPI_STATUS_IGNORE));
            if (flag && index != MPI_UNDEFINED) done++;
        }
        break;
    case DP_TESTSOME:
        while (done < 2) {
            T_MPI(MPI_Testsome(2, both, &outcount, indices, MPI_STATUSES_IGNORE));
            T_CHECK(outcount >= 0 && outcount <= 2, "%s: MPI_Testsome gave %d", what, outcount);
            done += outcount;
        }
        break;
    }
    if (way >= DP_WAITALL && way <= DP_TESTSOME) {
        *request = both[0];
        *pair = both[1];
    } else {
        T_MPI(MPI_Wait(pair, MPI_STATUS_IGNORE));
    }
    T_CHECK(*request == MPI_REQUEST_NULL, "%s: the request is not MPI_REQUEST_NULL after %s", what, dp_ways[way]);
    T_CHECK(*pair == MPI_REQUEST_NULL, "%s: the receive beside it is not MPI_REQUEST_NULL after %s", what, dp_ways[way]);
}

/* Checks this rank's result of KIND's call of ROUND against the sum (or
 * the root's values) computed here: the reductions' RECV, the bcast's
 * buffer SEND; a reduce's other ranks must have RECV untouched (-1). */
static int dp_check(int kind, int rank, int size, long round, const int64_t *recv, const int64_t *send, const char *what)
{
    int bad = 0;
    for (int i = 0; i < DP_COUNT; i++) {
        int64_t sum = 0;
        for (int r = 0; r < size; r++) sum += dp_value(r, round, i);
        if (kind == DP_IALLREDUCE || (kind == DP_IREDUCE && rank == 0)) bad += recv[i] != sum;
        else if (kind == DP_IREDUCE) bad += recv[i] != -1;
        else if (kind == DP_IBCAST) bad += send[i] != dp_value(0, round, i);
    }
    T_CHECK(!bad, "%s: %d of %d elements wrong on rank %d", what, bad, DP_COUNT, rank);
    return bad;
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long rounds = t_opt(argc, argv, "-n", DP_KINDS * DP_WAYS);
    int must_be_done = (int)t_opt(argc, argv, "-D", 0);
    int rank = t_wrank, size = t_wsize;
    int64_t send[DP_COUNT], recv[DP_COUNT];
    char what[96];
    /* The communicator's setup (at its first collective) is over before
     * the first round: a call posted during it waits for it. */
    t_barrier(&t_world);
    for (long round = 0; round < rounds; round++) {
        int kind = (int)(round % DP_KINDS), way = (int)(round / DP_KINDS % DP_WAYS);
        snprintf(what, sizeof what, "round %ld, %s completed by %s", round, dp_kinds[kind], dp_ways[way]);
        for (int i = 0; i < DP_COUNT; i++) {
            send[i] = kind == DP_IBCAST && rank != 0 ? -1 : dp_value(rank, round, i);
            recv[i] = -1;
        }
        MPI_Request request, pair = MPI_REQUEST_NULL;
        if (rank != 0) {
            dp_post(kind, round, send, recv, &request);
            T_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, DP_NOTIFY_TAG, MPI_COMM_WORLD));
            if (rank == size - 1) T_MPI(MPI_Send(&round, 1, MPI_LONG, 0, DP_PAIR_TAG, MPI_COMM_WORLD));
            T_MPI(MPI_Wait(&request, MPI_STATUS_IGNORE));
        } else {
            for (int from = 1; from < size; from++)
                T_MPI(MPI_Recv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, DP_NOTIFY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            dp_post(kind, round, send, recv, &request);
            int flag = -1;
            T_MPI(MPI_Request_get_status(request, &flag, MPI_STATUS_IGNORE));
            T_CHECK(request != MPI_REQUEST_NULL, "%s: MPI_Request_get_status freed the request", what);
            if (must_be_done && kind != DP_IALLREDUCE) {
                T_CHECK(flag == 1, "%s: not complete right after its post, though every peer's part was there", what);
#ifdef T_HAVE_OMPI_CID
                T_CHECK(request == &ompi_request_empty, "%s: a request object was made for a call over at its post", what);
#endif
            }
            long paired = -1;
            if (size > 1) T_MPI(MPI_Irecv(&paired, 1, MPI_LONG, size - 1, DP_PAIR_TAG, MPI_COMM_WORLD, &pair));
            dp_complete(way, &request, &pair, what);
            T_CHECK(size == 1 || paired == round, "%s: the receive beside it got %ld", what, paired);
        }
        t_barrier(&t_world);
        dp_check(kind, rank, size, round, recv, send, what);
    }
    return t_finish("nonblocking_done_at_post");
}
