/*
 * idup_interleaved: MPI_Comm_idup while collectives go on on its parent.
 * Open MPI agrees on the new communicator's context id with MPI_Iallreduce
 * calls of its own on the parent (one MPI_INT, MPI_MAX, then MPI_MIN, and
 * MPI_MIN again to activate it), posted from its progress loop: inside
 * whichever MPI call the rank makes when progress runs, so at a different
 * place among the parent's collectives on each rank. Stock Open MPI copes
 * because its non-blocking (libnbc) and blocking (tuned) collectives match
 * their messages apart; coll rdma must cope too.
 *   1. a parent set up already: half the ranks wait for the idup, then
 *      make a blocking collective on the parent; the others make the
 *      blocking collective first (the agreement is posted from inside it)
 *      and then wait. Barrier, allreduce, bcast and reduce in turn, roots
 *      moving, the halves swapping every round;
 *   2. the same on a parent that is new every round: its first collective
 *      sets it up, on some ranks the agreement (queued behind the setup),
 *      on the others the blocking call (the agreement posted while that
 *      setup waits);
 *   3. the application's own MPI_Iallreduce of one MPI_INT with MPI_MAX
 *      and MPI_MIN (the agreement's shape) outstanding among other
 *      non-blocking reductions, completed in reverse order;
 *   4. MPIX_Comm_iagree's shape where Open MPI makes it an MPI_Iallreduce
 *      (one MPI_INT, MPI_BAND, in place: coll ftagree not selected),
 *      placed as mpi4py's testIAgree places the agreement: the root posts
 *      it before an MPI_Barrier, the others after it.
 * Every new communicator then makes an allreduce and is freed. Every
 * result is compared with a reference each rank computes locally.
 * Options: -r <rounds of 1 and 2> (default 8).
 */
#include "common.h"
#include <stdint.h>

#define II_COUNT 8

enum { II_BARRIER, II_ALLREDUCE, II_BCAST, II_REDUCE, II_KINDS };

static const char *ii_names[II_KINDS] = { "barrier", "allreduce", "bcast", "reduce" };

/* One blocking collective of `kind` on `t`, its result checked. */
static void ii_blocking(tcomm_t *t, int kind, long seq)
{
    int64_t send[II_COUNT], recv[II_COUNT];
    int root = (int)(seq % t->size);
    switch (kind) {
    case II_BARRIER:
        t_barrier(t);
        break;
    case II_ALLREDUCE:
        t_fill_contributions(send, II_COUNT, t->rank, seq);
        T_MPI(MPI_Allreduce(send, recv, II_COUNT, MPI_INT64_T, MPI_SUM, t->comm));
        t_check_contribution_sum(recv, II_COUNT, t->size, seq, "allreduce beside an idup");
        break;
    case II_REDUCE:
        t_fill_contributions(send, II_COUNT, t->rank, seq);
        T_MPI(MPI_Reduce(send, recv, II_COUNT, MPI_INT64_T, MPI_SUM, root, t->comm));
        if (t->rank == root) t_check_contribution_sum(recv, II_COUNT, t->size, seq, "reduce beside an idup");
        break;
    case II_BCAST:
        for (int i = 0; i < II_COUNT; i++) recv[i] = t->rank == root ? seq * 1000 + i : -1;
        T_MPI(MPI_Bcast(recv, II_COUNT, MPI_INT64_T, root, t->comm));
        for (int i = 0; i < II_COUNT; i++)
            T_CHECK(recv[i] == seq * 1000 + i, "bcast beside an idup: element %d is %lld, root %d sent %lld", i,
                    (long long)recv[i], root, (long long)(seq * 1000 + i));
        break;
    }
}

/* MPI_Comm_idup of `parent` with a blocking collective of `kind` made on
 * it before the wait on half the ranks and after it on the others; then
 * the duplicate is used and freed. */
static void ii_round(tcomm_t *parent, int kind, long seq)
{
    MPI_Comm dup;
    MPI_Request req;
    tcomm_t child;
    T_MPI(MPI_Comm_idup(parent->comm, &dup, &req));
    if ((parent->rank + seq) % 2 == 0) {
        T_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        ii_blocking(parent, kind, seq);
    } else {
        ii_blocking(parent, kind, seq);
        T_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    }
    t_derive(parent, dup, &child);
    ii_blocking(&child, II_ALLREDUCE, seq + 1);
    t_free(&child);
}

/* The agreement's shape posted by the application, among other
 * reductions, completed in reverse order. */
static void ii_user_agreements(tcomm_t *t, long seq)
{
    int mine = (int)((t->rank * 7 + seq) % 13), max = -1, min = -1;
    int want_max = -1, want_min = 1 << 30;
    for (int r = 0; r < t->size; r++) {
        int v = (int)((r * 7 + seq) % 13);
        if (v > want_max) want_max = v;
        if (v < want_min) want_min = v;
    }
    int64_t send[2][II_COUNT], recv[2][II_COUNT];
    MPI_Request rq[4];
    t_fill_contributions(send[0], II_COUNT, t->rank, seq);
    t_fill_contributions(send[1], II_COUNT, t->rank, seq + 1);
    T_MPI(MPI_Iallreduce(send[0], recv[0], II_COUNT, MPI_INT64_T, MPI_SUM, t->comm, &rq[0]));
    T_MPI(MPI_Iallreduce(&mine, &max, 1, MPI_INT, MPI_MAX, t->comm, &rq[1]));
    T_MPI(MPI_Iallreduce(send[1], recv[1], II_COUNT, MPI_INT64_T, MPI_SUM, t->comm, &rq[2]));
    T_MPI(MPI_Iallreduce(&mine, &min, 1, MPI_INT, MPI_MIN, t->comm, &rq[3]));
    for (int k = 3; k >= 0; k--) T_MPI(MPI_Wait(&rq[k], MPI_STATUS_IGNORE));
    T_CHECK(max == want_max, "iallreduce MPI_MAX of one MPI_INT: %d, want %d", max, want_max);
    T_CHECK(min == want_min, "iallreduce MPI_MIN of one MPI_INT: %d, want %d", min, want_min);
    t_check_contribution_sum(recv[0], II_COUNT, t->size, seq, "iallreduce beside the agreement's shape");
    t_check_contribution_sum(recv[1], II_COUNT, t->size, seq + 1, "iallreduce beside the agreement's shape");
}

/* MPIX_Comm_iagree's shape, posted before a barrier on `root` and after
 * it on the others, then waited for. */
static void ii_agree_around_barrier(tcomm_t *t, int root, long seq)
{
    int mine = t->rank == root ? 0x0b : 0x0d, want = t->size == 1 ? mine : (0x0b & 0x0d);
    MPI_Request rq;
    if (t->rank == root) {
        T_MPI(MPI_Iallreduce(MPI_IN_PLACE, &mine, 1, MPI_INT, MPI_BAND, t->comm, &rq));
        t_barrier(t);
    } else {
        t_barrier(t);
        T_MPI(MPI_Iallreduce(MPI_IN_PLACE, &mine, 1, MPI_INT, MPI_BAND, t->comm, &rq));
    }
    T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    T_CHECK(mine == want, "iallreduce MPI_BAND in place around a barrier (round %ld, root %d): %#x, want %#x", seq, root, mine, want);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long rounds = t_opt(argc, argv, "-r", 8);
    MPI_Comm comm;
    tcomm_t parent, fresh;
    T_MPI(MPI_Comm_dup(t_world.comm, &comm));
    t_derive(&t_world, comm, &parent);
    t_barrier(&parent); /* set up */
    for (long r = 0; r < rounds; r++) /* 1. */
        for (int kind = 0; kind < II_KINDS; kind++) ii_round(&parent, kind, 1000 * r + 10 * kind);
    for (long r = 0; r < rounds; r++) /* 2. */
        for (int kind = 0; kind < II_KINDS; kind++) {
            T_MPI(MPI_Comm_dup(t_world.comm, &comm));
            t_derive(&t_world, comm, &fresh);
            ii_round(&fresh, kind, 500000 + 1000 * r + 10 * kind);
            t_free(&fresh);
        }
    for (long r = 0; r < rounds; r++) ii_user_agreements(&parent, 900000 + 10 * r); /* 3. */
    for (long r = 0; r < rounds; r++) /* 4. */
        for (int root = 0; root < parent.size; root++) ii_agree_around_barrier(&parent, root, r);
    t_free(&parent);
    if (t_wrank == 0) printf("info: %ld rounds of idup beside %s, %s, %s and %s\n", rounds, ii_names[0], ii_names[1], ii_names[2], ii_names[3]);
    return t_finish("idup_interleaved");
}
