/*
 * every_collective: every collective entry point of Open MPI 4.1's mpi.h,
 * blocking and non-blocking (MPI_I*), each result checked against a value
 * computed by formula. Open MPI refuses a communicator unless the selected
 * coll components together provide all of them, so this is what
 * `--mca coll rdma` alone must survive.
 *
 * Communicators: MPI_COMM_WORLD, MPI_COMM_SELF (size 1), an
 * intercommunicator between the lower and the upper half of the ranks (the
 * collectives defined there: all but scan and exscan), and for the
 * neighborhood collectives a cartesian line (non-periodic, so that no rank
 * is both neighbors of another) and a distributed-graph ring, on
 * MPI_COMM_WORLD and on MPI_COMM_SELF. Plus MPI_Reduce_local.
 * Where mpi.h has MPI 4's persistent collectives (MPI_*_init; Open MPI 5.0
 * has them although its mpi.h says MPI_VERSION 3, Open MPI 4.1 has none),
 * each of them too: initialised, started and completed twice, freed.
 *
 * Options: -i <rounds> (default 3).
 */
#include "common.h"

#define C 3 /* elements per block */

static long t_calls = 0;

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define HAVE_PERSISTENT_COLLECTIVES 1
#endif

/* How each collective is called. */
enum call_mode {
    BLOCKING,    /* MPI_Bcast */
    NONBLOCKING, /* MPI_Ibcast, MPI_Wait */
#ifdef HAVE_PERSISTENT_COLLECTIVES
    PERSISTENT, /* MPI_Bcast_init, (MPI_Start, MPI_Wait) x 2, MPI_Request_free */
#endif
    CALL_MODES
};
static const char *const mode_prefix[] = {"", "I", ""};
static const char *const mode_suffix[] = {"", "", "_init"};

#ifdef HAVE_PERSISTENT_COLLECTIVES
#define PERSISTENT_CALL(call) (call)
#define IS_PERSISTENT(mode) ((mode) == PERSISTENT)
#else
/* never reached: keeps the names this mpi.h does not declare out of the code */
#define PERSISTENT_CALL(call) MPI_SUCCESS
#define IS_PERSISTENT(mode) 0
#endif

/* Runs one collective the way `mode` says; the non-blocking and the
 * persistent call must use &rq_ as their request. */
#define RUN(mode, blocking, nonblocking, persistent)                        \
    do {                                                                    \
        t_calls++;                                                          \
        MPI_Request rq_ = MPI_REQUEST_NULL;                                 \
        if (IS_PERSISTENT(mode)) {                                          \
            T_MPI(persistent);                                              \
            for (int start_ = 0; start_ < 2; start_++) {                    \
                T_MPI(MPI_Start(&rq_));                                     \
                T_MPI(MPI_Wait(&rq_, MPI_STATUS_IGNORE));                   \
            }                                                               \
            T_MPI(MPI_Request_free(&rq_));                                  \
        } else if ((mode) == NONBLOCKING) {                                 \
            T_MPI(nonblocking);                                             \
            T_MPI(MPI_Wait(&rq_, MPI_STATUS_IGNORE));                       \
        } else {                                                            \
            T_MPI(blocking);                                                \
        }                                                                   \
    } while (0)

/* COLL(mode, Bcast, Ibcast, (buf, count, type, root, comm)): the forms of
 * one collective from its names and the blocking call's arguments, which
 * the others take too, followed by the info and/or the request. */
#define ARGS(...) __VA_ARGS__
#define COLL(mode, name, iname, args)                                       \
    RUN(mode, MPI_##name args, MPI_##iname(ARGS args, &rq_),                \
        PERSISTENT_CALL(MPI_##name##_init(ARGS args, MPI_INFO_NULL, &rq_)))

static void expect_ints(const char *where, int mode, const char *what, const int *got,
                        const int *want, int n)
{
    for (int k = 0; k < n; k++)
        if (got[k] != want[k]) {
            T_FAIL("%s: MPI_%s%s%s: element %d is %d, expected %d", where, mode_prefix[mode], what,
                   mode_suffix[mode], k, got[k], want[k]);
            return;
        }
}

static int *ints(int n, int fill)
{
    int *p = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int k = 0; k < n; k++) p[k] = fill;
    return p;
}

/* What rank r of an intracommunicator contributes, element i. */
static int v(int r, int i) { return r * 100 + i + 1; }

/* Varying counts per rank, and displacements with one unused slot after each block. */
static int vcount(int r) { return r % 3 + 1; }
static int layout(int n, int (*count)(int), int *counts, int *displs)
{
    int at = 0;
    for (int j = 0; j < n; j++) {
        counts[j] = count(j);
        displs[j] = at;
        at += counts[j] + 1;
    }
    return at;
}

/* ---------------------------------------------------------------- intra */

/* MPI_Alltoallv, then MPI_Alltoallw with the same layout in bytes, each
 * checked against `want` (rat elements); `peers` is the number of ranks
 * sent to (the remote group's size on an intercommunicator). */
static void alltoallv_and_w(const char *where, int mode, MPI_Comm comm, int peers, int *sb,
                            int *counts, int *displs, int *rb, int *rcounts, int *rdispls,
                            const int *want, int rat)
{
    COLL(mode, Alltoallv, Ialltoallv, (sb, counts, displs, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm));
    expect_ints(where, mode, "Alltoallv", rb, want, rat);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)peers);
    int *sbytes = ints(peers, 0), *rbytes = ints(peers, 0);
    for (int j = 0; j < peers; j++) {
        types[j] = MPI_INT;
        sbytes[j] = displs[j] * (int)sizeof(int);
        rbytes[j] = rdispls[j] * (int)sizeof(int);
    }
    for (int k = 0; k < rat; k++) rb[k] = -1;
    COLL(mode, Alltoallw, Ialltoallw, (sb, counts, sbytes, types, rb, rcounts, rbytes, types, comm));
    expect_ints(where, mode, "Alltoallw", rb, want, rat);
    free(types); free(sbytes); free(rbytes);
}

static void intra_suite(tcomm_t *t, const char *where, int mode)
{
    MPI_Comm comm = t->comm;
    int n = t->size, me = t->rank, root = n - 1;
    int *counts = ints(n, 0), *displs = ints(n, 0), *rcounts = ints(n, 0), *rdispls = ints(n, 0);
    int *want = ints(n * 4 * C + 64, 0);
    int *sb, *rb;

    /* barrier */
    if (mode == BLOCKING) t_barrier(t);
    else COLL(mode, Barrier, Ibarrier, (comm));

    /* bcast */
    rb = ints(C, -1);
    for (int i = 0; i < C; i++) { want[i] = v(root, i) + 7; if (me == root) rb[i] = want[i]; }
    COLL(mode, Bcast, Ibcast, (rb, C, MPI_INT, root, comm));
    expect_ints(where, mode, "Bcast", rb, want, C);
    free(rb);

    /* gather, gatherv */
    sb = ints(C, 0);
    for (int i = 0; i < C; i++) sb[i] = v(me, i);
    rb = ints(n * C, -1);
    COLL(mode, Gather, Igather, (sb, C, MPI_INT, rb, C, MPI_INT, root, comm));
    for (int j = 0; j < n; j++) for (int i = 0; i < C; i++) want[j * C + i] = v(j, i);
    if (me == root) expect_ints(where, mode, "Gather", rb, want, n * C);
    free(rb);
    int total = layout(n, vcount, counts, displs);
    rb = ints(total, -1);
    COLL(mode, Gatherv, Igatherv, (sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, root, comm));
    for (int k = 0; k < total; k++) want[k] = -1;
    for (int j = 0; j < n; j++) for (int i = 0; i < counts[j]; i++) want[displs[j] + i] = v(j, i);
    if (me == root) expect_ints(where, mode, "Gatherv", rb, want, total);
    free(rb);

    /* allgather, allgatherv (same layouts) */
    rb = ints(n * C, -1);
    COLL(mode, Allgather, Iallgather, (sb, C, MPI_INT, rb, C, MPI_INT, comm));
    for (int j = 0; j < n; j++) for (int i = 0; i < C; i++) want[j * C + i] = v(j, i);
    expect_ints(where, mode, "Allgather", rb, want, n * C);
    free(rb);
    rb = ints(total, -1);
    COLL(mode, Allgatherv, Iallgatherv, (sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, comm));
    for (int k = 0; k < total; k++) want[k] = -1;
    for (int j = 0; j < n; j++) for (int i = 0; i < counts[j]; i++) want[displs[j] + i] = v(j, i);
    expect_ints(where, mode, "Allgatherv", rb, want, total);
    free(rb);
    free(sb);

    /* scatter, scatterv */
    sb = ints(total > n * C ? total : n * C, -1);
    for (int j = 0; j < n; j++) for (int i = 0; i < C; i++) sb[j * C + i] = v(j, i) + 5;
    rb = ints(C, -1);
    COLL(mode, Scatter, Iscatter, (sb, C, MPI_INT, rb, C, MPI_INT, root, comm));
    for (int i = 0; i < C; i++) want[i] = v(me, i) + 5;
    expect_ints(where, mode, "Scatter", rb, want, C);
    for (int j = 0; j < n; j++) for (int i = 0; i < counts[j]; i++) sb[displs[j] + i] = v(j, i) + 9;
    for (int i = 0; i < C; i++) rb[i] = -1;
    COLL(mode, Scatterv, Iscatterv, (sb, counts, displs, MPI_INT, rb, vcount(me), MPI_INT, root, comm));
    for (int i = 0; i < C; i++) want[i] = i < vcount(me) ? v(me, i) + 9 : -1;
    expect_ints(where, mode, "Scatterv", rb, want, C);
    free(rb);
    free(sb);

    /* alltoall, alltoallv, alltoallw: block j of rank me goes to rank j */
    sb = ints(n * C, 0);
    rb = ints(n * C, -1);
    for (int j = 0; j < n; j++) for (int i = 0; i < C; i++) {
        sb[j * C + i] = me * 1000 + j * 10 + i;
        want[j * C + i] = j * 1000 + me * 10 + i;
    }
    COLL(mode, Alltoall, Ialltoall, (sb, C, MPI_INT, rb, C, MPI_INT, comm));
    expect_ints(where, mode, "Alltoall", rb, want, n * C);
    free(rb);
    /* me sends (me + j) % 3 + 1 elements to j, which expects as many from me */
    int sat = 0, rat = 0;
    for (int j = 0; j < n; j++) {
        counts[j] = rcounts[j] = (me + j) % 3 + 1;
        displs[j] = sat; sat += counts[j];
        rdispls[j] = rat; rat += rcounts[j] + 1;
    }
    free(sb);
    sb = ints(sat, 0);
    rb = ints(rat, -1);
    for (int k = 0; k < rat; k++) want[k] = -1;
    for (int j = 0; j < n; j++) for (int i = 0; i < counts[j]; i++) {
        sb[displs[j] + i] = me * 1000 + j * 10 + i;
        want[rdispls[j] + i] = j * 1000 + me * 10 + i;
    }
    alltoallv_and_w(where, mode, comm, n, sb, counts, displs, rb, rcounts, rdispls, want, rat);
    free(sb); free(rb);

    /* reduce, allreduce (sum) */
    sb = ints(n * C, 0);
    rb = ints(n * C, -1);
    for (int i = 0; i < C; i++) { sb[i] = v(me, i); want[i] = 100 * n * (n - 1) / 2 + n * (i + 1); }
    COLL(mode, Reduce, Ireduce, (sb, rb, C, MPI_INT, MPI_SUM, root, comm));
    if (me == root) expect_ints(where, mode, "Reduce", rb, want, C);
    for (int i = 0; i < C; i++) rb[i] = -1;
    COLL(mode, Allreduce, Iallreduce, (sb, rb, C, MPI_INT, MPI_SUM, comm));
    expect_ints(where, mode, "Allreduce", rb, want, C);

    /* reduce_scatter_block, reduce_scatter: element k of every rank is
     * r * 100 + k + 1; rank me gets its block of the sums */
    for (int k = 0; k < n * C; k++) sb[k] = me * 100 + k + 1;
    for (int i = 0; i < C; i++) { rb[i] = -1; want[i] = 100 * n * (n - 1) / 2 + n * (me * C + i + 1); }
    COLL(mode, Reduce_scatter_block, Ireduce_scatter_block, (sb, rb, C, MPI_INT, MPI_SUM, comm));
    expect_ints(where, mode, "Reduce_scatter_block", rb, want, C);
    int before = 0;
    for (int j = 0; j < n; j++) { counts[j] = vcount(j); if (j < me) before += counts[j]; }
    for (int i = 0; i < C; i++) {
        rb[i] = -1;
        want[i] = i < vcount(me) ? 100 * n * (n - 1) / 2 + n * (before + i + 1) : -1;
    }
    COLL(mode, Reduce_scatter, Ireduce_scatter, (sb, rb, counts, MPI_INT, MPI_SUM, comm));
    expect_ints(where, mode, "Reduce_scatter", rb, want, C);

    /* scan, exscan: prefix sums over ranks 0..me (exclusive: 0..me-1) */
    for (int i = 0; i < C; i++) {
        sb[i] = v(me, i);
        rb[i] = -1;
        want[i] = 100 * me * (me + 1) / 2 + (me + 1) * (i + 1);
    }
    COLL(mode, Scan, Iscan, (sb, rb, C, MPI_INT, MPI_SUM, comm));
    expect_ints(where, mode, "Scan", rb, want, C);
    for (int i = 0; i < C; i++) { rb[i] = -1; want[i] = 100 * (me - 1) * me / 2 + me * (i + 1); }
    COLL(mode, Exscan, Iexscan, (sb, rb, C, MPI_INT, MPI_SUM, comm));
    if (me > 0) expect_ints(where, mode, "Exscan", rb, want, C);
    free(sb); free(rb);
    free(counts); free(displs); free(rcounts); free(rdispls); free(want);
}

/* ---------------------------------------------------------------- inter */

/* What local rank j of group g contributes, element k. */
static int w(int g, int j, int k) { return g * 10000 + j * 100 + k + 1; }

static void inter_suite(tcomm_t *t, int group, const char *where, int mode)
{
    MPI_Comm comm = t->comm;
    int ln = t->size, rn = t->rsize, me = t->rank, rg = 1 - group;
    int big = 4 * C * (ln > rn ? ln : rn) * (ln > rn ? ln : rn) + 64;
    int *want = ints(big, 0), *sb = ints(big, 0), *rb = ints(big, -1);
    int *counts = ints(rn, 0), *displs = ints(rn, 0), *rcounts = ints(rn, 0), *rdispls = ints(rn, 0);
    int *lcounts = ints(ln, 0);

    if (mode == BLOCKING) t_barrier(t);
    else COLL(mode, Barrier, Ibarrier, (comm));

    /* rooted collectives, with the root at local rank 0 of each group in turn */
    for (int rootg = 0; rootg < 2; rootg++) {
        int in_root_group = group == rootg;
        int root = in_root_group ? (me == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
        int i_am_root = root == MPI_ROOT, receiver = !in_root_group;

        /* bcast */
        for (int i = 0; i < C; i++) { rb[i] = i_am_root ? w(rootg, 0, i) + 3 : -1; want[i] = w(rootg, 0, i) + 3; }
        COLL(mode, Bcast, Ibcast, (rb, C, MPI_INT, root, comm));
        if (receiver) expect_ints(where, mode, "Bcast", rb, want, C);

        /* gather, gatherv: the root receives from every remote process */
        for (int i = 0; i < C; i++) sb[i] = w(group, me, i);
        for (int k = 0; k < rn * C; k++) rb[k] = -1;
        COLL(mode, Gather, Igather, (sb, C, MPI_INT, rb, C, MPI_INT, root, comm));
        for (int j = 0; j < rn; j++) for (int i = 0; i < C; i++) want[j * C + i] = w(rg, j, i);
        if (i_am_root) expect_ints(where, mode, "Gather", rb, want, rn * C);
        int total = layout(rn, vcount, counts, displs);
        for (int k = 0; k < total; k++) { rb[k] = -1; want[k] = -1; }
        COLL(mode, Gatherv, Igatherv, (sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, root, comm));
        for (int j = 0; j < rn; j++) for (int i = 0; i < counts[j]; i++) want[displs[j] + i] = w(rg, j, i);
        if (i_am_root) expect_ints(where, mode, "Gatherv", rb, want, total);

        /* scatter, scatterv: the root sends to every remote process */
        for (int j = 0; j < rn; j++) for (int i = 0; i < C; i++) sb[j * C + i] = 50000 + j * 100 + i;
        for (int i = 0; i < C; i++) { rb[i] = -1; want[i] = 50000 + me * 100 + i; }
        COLL(mode, Scatter, Iscatter, (sb, C, MPI_INT, rb, C, MPI_INT, root, comm));
        if (receiver) expect_ints(where, mode, "Scatter", rb, want, C);
        for (int j = 0; j < rn; j++) for (int i = 0; i < counts[j]; i++) sb[displs[j] + i] = 60000 + j * 100 + i;
        for (int i = 0; i < C; i++) { rb[i] = -1; want[i] = i < vcount(me) ? 60000 + me * 100 + i : -1; }
        COLL(mode, Scatterv, Iscatterv, (sb, counts, displs, MPI_INT, rb, vcount(me), MPI_INT, root, comm));
        if (receiver) expect_ints(where, mode, "Scatterv", rb, want, C);

        /* reduce: the root gets the sum over the remote group */
        for (int i = 0; i < C; i++) {
            sb[i] = w(group, me, i);
            rb[i] = -1;
            want[i] = rn * rg * 10000 + 100 * rn * (rn - 1) / 2 + rn * (i + 1);
        }
        COLL(mode, Reduce, Ireduce, (sb, rb, C, MPI_INT, MPI_SUM, root, comm));
        if (i_am_root) expect_ints(where, mode, "Reduce", rb, want, C);
    }

    /* allgather, allgatherv: everybody gets the remote group's blocks */
    for (int i = 0; i < C; i++) sb[i] = w(group, me, i);
    for (int k = 0; k < rn * C; k++) rb[k] = -1;
    for (int j = 0; j < rn; j++) for (int i = 0; i < C; i++) want[j * C + i] = w(rg, j, i);
    COLL(mode, Allgather, Iallgather, (sb, C, MPI_INT, rb, C, MPI_INT, comm));
    expect_ints(where, mode, "Allgather", rb, want, rn * C);
    int total = layout(rn, vcount, counts, displs);
    for (int k = 0; k < total; k++) { rb[k] = -1; want[k] = -1; }
    for (int j = 0; j < rn; j++) for (int i = 0; i < counts[j]; i++) want[displs[j] + i] = w(rg, j, i);
    COLL(mode, Allgatherv, Iallgatherv, (sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, comm));
    expect_ints(where, mode, "Allgatherv", rb, want, total);

    /* alltoall, alltoallv, alltoallw: block j goes to remote process j */
    for (int j = 0; j < rn; j++) for (int i = 0; i < C; i++) {
        sb[j * C + i] = group * 10000 + me * 100 + j * 10 + i;
        rb[j * C + i] = -1;
        want[j * C + i] = rg * 10000 + j * 100 + me * 10 + i;
    }
    COLL(mode, Alltoall, Ialltoall, (sb, C, MPI_INT, rb, C, MPI_INT, comm));
    expect_ints(where, mode, "Alltoall", rb, want, rn * C);
    int sat = 0, rat = 0;
    for (int j = 0; j < rn; j++) {
        counts[j] = rcounts[j] = (me + j) % 3 + 1;
        displs[j] = sat; sat += counts[j];
        rdispls[j] = rat; rat += rcounts[j] + 1;
    }
    for (int k = 0; k < rat; k++) { rb[k] = -1; want[k] = -1; }
    for (int j = 0; j < rn; j++) for (int i = 0; i < counts[j]; i++) {
        sb[displs[j] + i] = group * 10000 + me * 100 + j * 10 + i;
        want[rdispls[j] + i] = rg * 10000 + j * 100 + me * 10 + i;
    }
    alltoallv_and_w(where, mode, comm, rn, sb, counts, displs, rb, rcounts, rdispls, want, rat);

    /* allreduce: the sum over the remote group */
    for (int i = 0; i < C; i++) {
        sb[i] = w(group, me, i);
        rb[i] = -1;
        want[i] = rn * rg * 10000 + 100 * rn * (rn - 1) / 2 + rn * (i + 1);
    }
    COLL(mode, Allreduce, Iallreduce, (sb, rb, C, MPI_INT, MPI_SUM, comm));
    expect_ints(where, mode, "Allreduce", rb, want, C);

    /* reduce_scatter_block, reduce_scatter: the remote group's vectors of
     * C * ln * rn elements (the same length in both groups) are summed and
     * scattered over the local group, C * rn elements each */
    int rc = C * rn, len = C * ln * rn;
    for (int k = 0; k < len; k++) sb[k] = w(group, me, k);
    for (int i = 0; i < rc; i++) {
        rb[i] = -1;
        want[i] = rn * rg * 10000 + 100 * rn * (rn - 1) / 2 + rn * (me * rc + i + 1);
    }
    COLL(mode, Reduce_scatter_block, Ireduce_scatter_block, (sb, rb, rc, MPI_INT, MPI_SUM, comm));
    expect_ints(where, mode, "Reduce_scatter_block", rb, want, rc);
    for (int j = 0; j < ln; j++) lcounts[j] = rc;
    for (int i = 0; i < rc; i++) rb[i] = -1;
    COLL(mode, Reduce_scatter, Ireduce_scatter, (sb, rb, lcounts, MPI_INT, MPI_SUM, comm));
    expect_ints(where, mode, "Reduce_scatter", rb, want, rc);

    free(want); free(sb); free(rb); free(counts); free(displs); free(rcounts); free(rdispls);
    free(lcounts);
}

/* --------------------------------------------------------- neighborhood */

/* A process topology's neighbor lists, and for each source the index of
 * this process among that source's destinations (which of its blocks
 * arrives here). */
typedef struct {
    MPI_Comm comm;
    int me, indeg, outdeg;
    int src[2], dst[2], slot_at_src[2];
} topo_t;

/* The value a process puts in block b of its send buffer, element i. */
static int nv(int sender, int b, int i) { return sender * 100 + b * 10 + i + 1; }

static void neighbor_suite(const topo_t *tp, const char *where, int mode)
{
    MPI_Comm comm = tp->comm;
    int in = tp->indeg, out = tp->outdeg, me = tp->me;
    int sb[2 * C], rb[2 * C + 2], want[2 * C + 2], counts[2], displs[2], rcounts[2], rdispls[2];
    MPI_Aint sbytes[2], rbytes[2];
    MPI_Datatype types[2] = {MPI_INT, MPI_INT};

    /* allgather, allgatherv: every destination gets my one block */
    for (int i = 0; i < C; i++) sb[i] = nv(me, 0, i);
    for (int k = 0; k < 2 * C + 2; k++) rb[k] = want[k] = -1;
    for (int s = 0; s < in; s++)
        for (int i = 0; i < C; i++) want[s * C + i] = tp->src[s] == MPI_PROC_NULL ? -1 : nv(tp->src[s], 0, i);
    COLL(mode, Neighbor_allgather, Ineighbor_allgather, (sb, C, MPI_INT, rb, C, MPI_INT, comm));
    expect_ints(where, mode, "Neighbor_allgather", rb, want, 2 * C + 2);
    /* allgatherv: the blocks in reverse order, one unused slot between */
    for (int s = 0; s < in; s++) { rcounts[s] = C; rdispls[s] = (in - 1 - s) * (C + 1); }
    for (int k = 0; k < 2 * C + 2; k++) rb[k] = want[k] = -1;
    for (int s = 0; s < in; s++)
        for (int i = 0; i < C; i++)
            want[rdispls[s] + i] = tp->src[s] == MPI_PROC_NULL ? -1 : nv(tp->src[s], 0, i);
    COLL(mode, Neighbor_allgatherv, Ineighbor_allgatherv, (sb, C, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm));
    expect_ints(where, mode, "Neighbor_allgatherv", rb, want, 2 * C + 2);

    /* alltoall, alltoallv, alltoallw: block d goes to destination d */
    for (int d = 0; d < out; d++) for (int i = 0; i < C; i++) sb[d * C + i] = nv(me, d, i);
    for (int k = 0; k < 2 * C + 2; k++) rb[k] = want[k] = -1;
    for (int s = 0; s < in; s++)
        for (int i = 0; i < C; i++)
            want[s * C + i] = tp->src[s] == MPI_PROC_NULL ? -1 : nv(tp->src[s], tp->slot_at_src[s], i);
    COLL(mode, Neighbor_alltoall, Ineighbor_alltoall, (sb, C, MPI_INT, rb, C, MPI_INT, comm));
    expect_ints(where, mode, "Neighbor_alltoall", rb, want, 2 * C + 2);
    for (int d = 0; d < out; d++) { counts[d] = C; displs[d] = d * C; sbytes[d] = displs[d] * (MPI_Aint)sizeof(int); }
    for (int s = 0; s < in; s++) {
        rcounts[s] = C;
        rdispls[s] = (in - 1 - s) * (C + 1);
        rbytes[s] = rdispls[s] * (MPI_Aint)sizeof(int);
    }
    for (int k = 0; k < 2 * C + 2; k++) rb[k] = want[k] = -1;
    for (int s = 0; s < in; s++)
        for (int i = 0; i < C; i++)
            want[rdispls[s] + i] = tp->src[s] == MPI_PROC_NULL ? -1 : nv(tp->src[s], tp->slot_at_src[s], i);
    COLL(mode, Neighbor_alltoallv, Ineighbor_alltoallv, (sb, counts, displs, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm));
    expect_ints(where, mode, "Neighbor_alltoallv", rb, want, 2 * C + 2);
    for (int k = 0; k < 2 * C + 2; k++) rb[k] = -1;
    COLL(mode, Neighbor_alltoallw, Ineighbor_alltoallw, (sb, counts, sbytes, types, rb, rcounts, rbytes, types, comm));
    expect_ints(where, mode, "Neighbor_alltoallw", rb, want, 2 * C + 2);
}

/* A line of the communicator's ranks (non-periodic: the ends have
 * MPI_PROC_NULL neighbors). */
static void make_line(MPI_Comm base, topo_t *tp)
{
    int n;
    MPI_Comm_size(base, &n);
    int dims[1] = {n}, periods[1] = {0};
    T_MPI(MPI_Cart_create(base, 1, dims, periods, 0, &tp->comm));
    MPI_Comm_rank(tp->comm, &tp->me);
    tp->indeg = tp->outdeg = 2;
    T_MPI(MPI_Cart_shift(tp->comm, 0, 1, &tp->src[0], &tp->src[1]));
    tp->dst[0] = tp->src[0];
    tp->dst[1] = tp->src[1];
    /* my left neighbor sends me its block 1 (its right), my right one its block 0 */
    tp->slot_at_src[0] = 1;
    tp->slot_at_src[1] = 0;
}

/* A directed ring: each rank receives from its left neighbor and sends to
 * its right one (on one rank, to itself). */
static void make_ring(MPI_Comm base, topo_t *tp)
{
    int n, me;
    MPI_Comm_size(base, &n);
    MPI_Comm_rank(base, &me);
    int left = (me + n - 1) % n, right = (me + 1) % n;
    int weight = 1;
    T_MPI(MPI_Dist_graph_create_adjacent(base, 1, &left, &weight, 1, &right, &weight, MPI_INFO_NULL, 0,
                                         &tp->comm));
    MPI_Comm_rank(tp->comm, &tp->me);
    tp->indeg = tp->outdeg = 1;
    tp->src[0] = left;
    tp->dst[0] = right;
    tp->slot_at_src[0] = 0;
}

static void reduce_local_check(void)
{
    int in[C], inout[C], want[C];
    for (int i = 0; i < C; i++) { in[i] = t_wrank + i; inout[i] = 10 * i; want[i] = t_wrank + 11 * i; }
    t_calls++;
    T_MPI(MPI_Reduce_local(in, inout, C, MPI_INT, MPI_SUM));
    expect_ints("local", 0, "Reduce_local", inout, want, C);
    double din[2] = {2.0, 3.0}, dio[2] = {5.0, 0.5};
    t_calls++;
    T_MPI(MPI_Reduce_local(din, dio, 2, MPI_DOUBLE, MPI_PROD));
    T_CHECK(dio[0] == 10.0 && dio[1] == 1.5, "MPI_Reduce_local prod: %g %g", dio[0], dio[1]);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long rounds = t_opt(argc, argv, "-i", 3);

    tcomm_t self, line_t, ring_t, self_line_t, self_ring_t, half, inter;
    t_track_tagged(MPI_COMM_SELF, 1, &self);
    topo_t line, ring, self_line, self_ring;
    make_line(MPI_COMM_WORLD, &line);
    t_derive(&t_world, line.comm, &line_t);
    make_ring(MPI_COMM_WORLD, &ring);
    t_derive(&t_world, ring.comm, &ring_t);
    make_line(MPI_COMM_SELF, &self_line);
    t_track_tagged(self_line.comm, 2, &self_line_t);
    make_ring(MPI_COMM_SELF, &self_ring);
    t_track_tagged(self_ring.comm, 3, &self_ring_t);

    /* the intercommunicator: lower half (group 0) and upper half (group 1) */
    int group = t_wrank < t_wsize / 2 ? 0 : 1;
    MPI_Comm c;
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, group, t_wrank, &c));
    t_derive(&t_world, c, &half);
    inter.comm = MPI_COMM_NULL;
    if (t_wsize >= 2) {
        MPI_Comm ic;
        T_MPI(MPI_Intercomm_create(half.comm, 0, MPI_COMM_WORLD, group ? 0 : t_wsize / 2, 77, &ic));
        t_track_tagged(ic, 4, &inter);
    }

    for (long it = 0; it < rounds; it++) {
        for (int mode = 0; mode < CALL_MODES; mode++) {
            intra_suite(&t_world, "MPI_COMM_WORLD", mode);
            intra_suite(&self, "MPI_COMM_SELF", mode);
            intra_suite(&half, "half", mode);
            if (inter.comm != MPI_COMM_NULL) inter_suite(&inter, group, "intercommunicator", mode);
            neighbor_suite(&line, "cartesian line", mode);
            neighbor_suite(&ring, "graph ring", mode);
            neighbor_suite(&self_line, "cartesian line on MPI_COMM_SELF", mode);
            neighbor_suite(&self_ring, "graph ring on MPI_COMM_SELF", mode);
        }
        reduce_local_check();
    }
    if (t_wrank == 0) printf("info: %ld collective calls on rank 0\n", t_calls);

    t_free(&inter);
    t_free(&half);
    t_free(&self_ring_t);
    t_free(&self_line_t);
    t_free(&ring_t);
    t_free(&line_t);
    t_release(&self);
    return t_finish("every_collective");
}
