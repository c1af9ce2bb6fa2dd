/*
 * persistent_before_setup: persistent collectives made before their
 * communicator's first blocking collective (OSU's persistent benchmarks
 * make theirs so). MPI makes `*_init` a nonlocal collective call (MPI 4.1
 * section 7.13; the 2018 draft Open MPI 4.1's MPIX_ forms follow), so coll
 * rdma sets the communicator up inside the first one, as a blocking
 * collective would, and serves every start from the first
 * (docs/nonblocking.md, "Setup").
 * On a fresh duplicate of MPI_COMM_WORLD, before any blocking collective
 * on it:
 *   0. with -p 1 (the default), an MPI_Ibarrier and an MPI_Iallreduce of
 *      uint64 sums, which start the communicator's setup resumable and are
 *      queued behind it, are posted with the last rank late, and completed
 *      only after every *_init below: so the first *_init finishes the
 *      setup by waiting while they are pending, and posts them first;
 *   1. every persistent kind is made (MPIX_*_init on Open MPI 4.1, MPI_*_init
 *      on 5.0): a barrier, an allreduce of uint64 sums, an allreduce of a
 *      non-commutative user op on affine maps, a reduce (root size - 1), a
 *      bcast of uint64 (root 0) and a bcast of a vector datatype (every
 *      other element, root size - 1); with -f 1 the user op and the derived
 *      datatypes are freed right after *_init, as MPI allows;
 *   2. -b rounds (default 3) of starts before any blocking collective, the
 *      last of them still under way when
 *   3. a blocking barrier comes (with -B 0 never: no blocking collective
 *      on the communicator at all, as osu_barrier_persistent);
 *   4. -n rounds (default 100) of starts after it.
 *   Each round rewrites the buffers, starts every request (MPI_Startall, or
 *   MPI_Start one by one) and completes them (MPI_Waitall, MPI_Test polling,
 *   MPI_Waitany, MPI_Wait with a status); one rank, rotating, starts late.
 *   Every result is compared with the value each rank computes from the
 *   formula every contribution follows; the barrier with counters in the
 *   node's shared table (no rank may leave before every rank entered).
 *   Prints "info: persistent starts <n> per request".
 * The events show which starts coll rdma served: ci/mpi/cases
 * 02-nonblocking.toml counts them exactly (every start of every round).
 */
#include "common.h"
#include <stdint.h>
#include <unistd.h>

#define PB_COUNT 64   /* uint64 sums and bcasts */
#define PB_MAPS 16    /* affine maps */
#define PB_LATE_US 2000

enum { PB_BARRIER, PB_SUM, PB_AFFINE, PB_REDUCE, PB_BCAST, PB_VECTOR, PB_REQUESTS };

/* Contribution of `rank` to element i of round `seq`'s call `what`. */
static uint64_t pb_value(int rank, long seq, int what, int i)
{
    return t_mix(((uint64_t)seq << 32) ^ ((uint64_t)what << 28) ^ ((uint64_t)rank << 16) ^ (uint64_t)i);
}

static t_affine_t pb_map(int rank, long seq, int i)
{
    t_affine_t x = { pb_value(rank, seq, PB_AFFINE, i) | 1, pb_value(rank, seq, PB_AFFINE, i + 100003) };
    return x;
}

typedef struct {
    MPI_Comm comm;
    int rank, size;
    int here;                      /* ranks of the communicator on this node */
    MPI_Request rq[PB_REQUESTS];
    uint64_t sum_send[PB_COUNT], sum_recv[PB_COUNT];
    t_affine_t maps_send[PB_MAPS], maps_recv[PB_MAPS];
    uint64_t red_send[PB_COUNT], red_recv[PB_COUNT];
    uint64_t bcast[PB_COUNT];
    uint64_t vector[2 * PB_COUNT]; /* every other element carried */
    uint64_t *arrived;             /* the barrier's counter of this round */
} pb_set_t;

static void pb_make(pb_set_t *s, tcomm_t *t, int free_after_init)
{
    MPI_Comm comm = t->comm;
    s->comm = comm;
    s->rank = t->rank;
    s->size = t->size;
    s->here = t->here;
    MPI_Datatype affine_type, vector_type;
    MPI_Op affine_op;
    T_MPI(MPI_Type_contiguous(2, MPI_UINT64_T, &affine_type));
    T_MPI(MPI_Type_commit(&affine_type));
    T_MPI(MPI_Op_create(t_affine_compose, 0, &affine_op));
    T_MPI(MPI_Type_vector(PB_COUNT, 1, 2, MPI_UINT64_T, &vector_type));
    T_MPI(MPI_Type_commit(&vector_type));
    T_MPI(T_BARRIER_INIT(comm, MPI_INFO_NULL, &s->rq[PB_BARRIER]));
    T_MPI(T_ALLREDUCE_INIT(s->sum_send, s->sum_recv, PB_COUNT, MPI_UINT64_T, MPI_SUM, comm, MPI_INFO_NULL, &s->rq[PB_SUM]));
    T_MPI(T_ALLREDUCE_INIT(s->maps_send, s->maps_recv, PB_MAPS, affine_type, affine_op, comm, MPI_INFO_NULL, &s->rq[PB_AFFINE]));
    T_MPI(T_REDUCE_INIT(s->red_send, s->red_recv, PB_COUNT, MPI_UINT64_T, MPI_SUM, s->size - 1, comm, MPI_INFO_NULL,
                        &s->rq[PB_REDUCE]));
    T_MPI(T_BCAST_INIT(s->bcast, PB_COUNT, MPI_UINT64_T, 0, comm, MPI_INFO_NULL, &s->rq[PB_BCAST]));
    T_MPI(T_BCAST_INIT(s->vector, 1, vector_type, s->size - 1, comm, MPI_INFO_NULL, &s->rq[PB_VECTOR]));
    if (free_after_init) {
        /* The requests must keep them alive (glibc's perturb overwrites
         * freed memory in the case that asks for this). */
        T_MPI(MPI_Type_free(&affine_type));
        T_MPI(MPI_Type_free(&vector_type));
        T_MPI(MPI_Op_free(&affine_op));
    }
}

/* Fills this rank's buffers for round `seq`, the results with garbage. */
static void pb_fill(pb_set_t *s, long seq)
{
    for (int i = 0; i < PB_COUNT; i++) {
        s->sum_send[i] = pb_value(s->rank, seq, PB_SUM, i);
        s->sum_recv[i] = ~(uint64_t)0;
        s->red_send[i] = pb_value(s->rank, seq, PB_REDUCE, i);
        s->red_recv[i] = ~(uint64_t)0;
        s->bcast[i] = s->rank == 0 ? pb_value(0, seq, PB_BCAST, i) : ~(uint64_t)0;
        s->vector[2 * i] = s->rank == s->size - 1 ? pb_value(s->size - 1, seq, PB_VECTOR, i) : ~(uint64_t)0;
        s->vector[2 * i + 1] = (uint64_t)seq; /* the gaps: never written by the bcast */
    }
    for (int i = 0; i < PB_MAPS; i++) {
        s->maps_send[i] = pb_map(s->rank, seq, i);
        s->maps_recv[i].m = s->maps_recv[i].c = 0;
    }
}

static void pb_check(pb_set_t *s, long seq)
{
    int size = s->size;
    uint64_t seen = __atomic_load_n(s->arrived, __ATOMIC_SEQ_CST);
    T_CHECK(seen == (uint64_t)s->here, "persistent barrier, round %ld: rank %d left it with %llu of the %d ranks on this node entered",
            seq, s->rank, (unsigned long long)seen, s->here);
    for (int i = 0; i < PB_COUNT; i++) {
        uint64_t sum = 0, red = 0;
        for (int r = 0; r < size; r++) {
            sum += pb_value(r, seq, PB_SUM, i);
            red += pb_value(r, seq, PB_REDUCE, i);
        }
        if (s->sum_recv[i] != sum) {
            T_FAIL("persistent allreduce (sum), round %ld: element %d wrong", seq, i);
            break;
        }
        if (s->rank == size - 1 && s->red_recv[i] != red) {
            T_FAIL("persistent reduce, round %ld: element %d wrong at the root", seq, i);
            break;
        }
        if (s->rank != size - 1 && s->red_recv[i] != ~(uint64_t)0) {
            T_FAIL("persistent reduce, round %ld: a rank other than the root had its receive buffer written", seq);
            break;
        }
        if (s->bcast[i] != pb_value(0, seq, PB_BCAST, i)) {
            T_FAIL("persistent bcast, round %ld: element %d is not the root's", seq, i);
            break;
        }
        if (s->vector[2 * i] != pb_value(size - 1, seq, PB_VECTOR, i) || s->vector[2 * i + 1] != (uint64_t)seq) {
            T_FAIL("persistent bcast of a vector, round %ld: element %d (or the gap after it) wrong", seq, i);
            break;
        }
    }
    for (int i = 0; i < PB_MAPS; i++) {
        t_affine_t acc = pb_map(0, seq, i);
        for (int r = 1; r < size; r++) {
            t_affine_t x = pb_map(r, seq, i);
            int one = 1;
            t_affine_compose(&acc, &x, &one, NULL);
            acc = x;
        }
        if (s->maps_recv[i].m != acc.m || s->maps_recv[i].c != acc.c) {
            T_FAIL("persistent allreduce (user op), round %ld: element %d out of rank order or wrong", seq, i);
            break;
        }
    }
}

/* Starts every request of round `seq` (the rank `seq % size` late). */
static void pb_start(pb_set_t *s, long seq)
{
    pb_fill(s, seq);
    if (s->rank == (int)(seq % s->size)) usleep(PB_LATE_US);
    s->arrived = t_node_word(0x70627365ull ^ ((uint64_t)seq << 8));
    __atomic_fetch_add(s->arrived, 1, __ATOMIC_SEQ_CST);
    if (seq % 2 == 0) {
        T_MPI(MPI_Startall(PB_REQUESTS, s->rq));
    } else {
        for (int k = 0; k < PB_REQUESTS; k++) T_MPI(MPI_Start(&s->rq[k]));
    }
}

/* Completes every request of round `seq`, by one of four ways. */
static void pb_complete(pb_set_t *s, long seq)
{
    switch (seq % 4) {
    case 0:
        T_MPI(MPI_Waitall(PB_REQUESTS, s->rq, MPI_STATUSES_IGNORE));
        break;
    case 1:
        for (int left = PB_REQUESTS; left > 0;) {
            left = 0;
            for (int k = PB_REQUESTS - 1; k >= 0; k--) {
                int done = 0;
                T_MPI(MPI_Test(&s->rq[k], &done, MPI_STATUS_IGNORE));
                left += !done;
            }
        }
        break;
    case 2:
        for (int n = 0; n < PB_REQUESTS; n++) {
            int index = MPI_UNDEFINED;
            T_MPI(MPI_Waitany(PB_REQUESTS, s->rq, &index, MPI_STATUS_IGNORE));
            T_CHECK(index != MPI_UNDEFINED, "MPI_Waitany found no active request after %d of %d", n, PB_REQUESTS);
        }
        break;
    default:
        for (int k = PB_REQUESTS - 1; k >= 0; k--) {
            MPI_Status status;
            int cancelled = 1;
            T_MPI(MPI_Wait(&s->rq[k], &status));
            T_MPI(MPI_Test_cancelled(&status, &cancelled));
            T_CHECK(!cancelled, "request %d of round %ld reports itself cancelled", k, seq);
        }
    }
    for (int k = 0; k < PB_REQUESTS; k++)
        T_CHECK(s->rq[k] != MPI_REQUEST_NULL, "persistent request %d became MPI_REQUEST_NULL when completed", k);
    pb_check(s, seq);
}

/* Step 0: non-blocking calls posted before the setup (libnbc's), the last
 * rank late, so that the others' are pending when *_init sets up. */
typedef struct {
    MPI_Request rq[2];
    uint64_t send[PB_COUNT], recv[PB_COUNT];
} pb_early_t;

static void pb_post_early(pb_early_t *e, tcomm_t *t)
{
    for (int i = 0; i < PB_COUNT; i++) {
        e->send[i] = pb_value(t->rank, -1, PB_SUM, i);
        e->recv[i] = ~(uint64_t)0;
    }
    if (t->rank == t->size - 1) usleep(PB_LATE_US);
    T_MPI(MPI_Ibarrier(t->comm, &e->rq[0]));
    T_MPI(MPI_Iallreduce(e->send, e->recv, PB_COUNT, MPI_UINT64_T, MPI_SUM, t->comm, &e->rq[1]));
}

static void pb_complete_early(pb_early_t *e, tcomm_t *t)
{
    T_MPI(MPI_Waitall(2, e->rq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < PB_COUNT; i++) {
        uint64_t sum = 0;
        for (int r = 0; r < t->size; r++) sum += pb_value(r, -1, PB_SUM, i);
        if (e->recv[i] != sum) {
            T_FAIL("MPI_Iallreduce pending across the setup in *_init: element %d wrong", i);
            break;
        }
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long before = t_opt(argc, argv, "-b", 3), after = t_opt(argc, argv, "-n", 100);
    int free_after_init = (int)t_opt(argc, argv, "-f", 0);
    int pending_early = (int)t_opt(argc, argv, "-p", 1), blocking = (int)t_opt(argc, argv, "-B", 1);
    MPI_Comm comm;
    tcomm_t fresh;
    T_MPI(MPI_Comm_dup(t_world.comm, &comm));
    t_derive(&t_world, comm, &fresh);
    static pb_set_t set;
    static pb_early_t early;
    if (pending_early) pb_post_early(&early, &fresh); /* 0. */
    pb_make(&set, &fresh, free_after_init); /* 1. */
    if (pending_early) pb_complete_early(&early, &fresh);
    long seq = 0;
    for (long r = 0; r < before; r++, seq++) { /* 2. */
        pb_start(&set, seq);
        if (blocking && r == before - 1) t_barrier(&fresh); /* 3., the starts under way */
        pb_complete(&set, seq);
    }
    if (blocking && before == 0) t_barrier(&fresh);
    for (long r = 0; r < after; r++, seq++) { /* 4. */
        pb_start(&set, seq);
        pb_complete(&set, seq);
    }
    for (int k = 0; k < PB_REQUESTS; k++) T_MPI(MPI_Request_free(&set.rq[k]));
    if (t_wrank == 0) printf("info: persistent starts %ld per request\n", before + after);
    t_free(&fresh);
    return t_finish("persistent_before_setup");
}
