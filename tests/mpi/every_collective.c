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
 * (Open MPI 4.1 has no persistent collectives, MPI_*_init.)
 *
 * Options: -i <rounds> (default 3).
 */
#include "common.h"

#define C 3 /* elements per block */

static long t_calls = 0;

/* Runs the blocking call, or the non-blocking one (which must use &rq_)
 * followed by MPI_Wait. */
#define RUN(nb, blocking, nonblocking)                                      \
    do {                                                                    \
        t_calls++;                                                          \
        if (nb) {                                                           \
            MPI_Request rq_;                                                \
            T_MPI(nonblocking);                                             \
            T_MPI(MPI_Wait(&rq_, MPI_STATUS_IGNORE));                       \
        } else {                                                            \
            T_MPI(blocking);                                                \
        }                                                                   \
    } while (0)

static void expect_ints(const char *where, int nb, const char *what, const int *got,
                        const int *want, int n)
{
    for (int k = 0; k < n; k++)
        if (got[k] != want[k]) {
            T_FAIL("%s: MPI_%s%s: element %d is %d, expected %d", where, nb ? "I" : "", what, k,
                   got[k], want[k]);
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

static void intra_suite(tcomm_t *t, const char *where, int nb)
{
    MPI_Comm comm = t->comm;
    int n = t->size, me = t->rank, root = n - 1;
    int *counts = ints(n, 0), *displs = ints(n, 0), *rcounts = ints(n, 0), *rdispls = ints(n, 0);
    int *want = ints(n * 4 * C + 64, 0);
    int *sb, *rb;

    /* barrier */
    if (nb) RUN(1, MPI_SUCCESS, MPI_Ibarrier(comm, &rq_));
    else t_barrier(t);

    /* bcast */
    rb = ints(C, -1);
    for (int i = 0; i < C; i++) { want[i] = v(root, i) + 7; if (me == root) rb[i] = want[i]; }
    RUN(nb, MPI_Bcast(rb, C, MPI_INT, root, comm), MPI_Ibcast(rb, C, MPI_INT, root, comm, &rq_));
    expect_ints(where, nb, "Bcast", rb, want, C);
    free(rb);

    /* gather, gatherv */
    sb = ints(C, 0);
    for (int i = 0; i < C; i++) sb[i] = v(me, i);
    rb = ints(n * C, -1);
    RUN(nb, MPI_Gather(sb, C, MPI_INT, rb, C, MPI_INT, root, comm),
        MPI_Igather(sb, C, MPI_INT, rb, C, MPI_INT, root, comm, &rq_));
    for (int j = 0; j < n; j++) for (int i = 0; i < C; i++) want[j * C + i] = v(j, i);
    if (me == root) expect_ints(where, nb, "Gather", rb, want, n * C);
    free(rb);
    int total = layout(n, vcount, counts, displs);
    rb = ints(total, -1);
    RUN(nb, MPI_Gatherv(sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, root, comm),
        MPI_Igatherv(sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, root, comm, &rq_));
    for (int k = 0; k < total; k++) want[k] = -1;
    for (int j = 0; j < n; j++) for (int i = 0; i < counts[j]; i++) want[displs[j] + i] = v(j, i);
    if (me == root) expect_ints(where, nb, "Gatherv", rb, want, total);
    free(rb);

    /* allgather, allgatherv (same layouts) */
    rb = ints(n * C, -1);
    RUN(nb, MPI_Allgather(sb, C, MPI_INT, rb, C, MPI_INT, comm),
        MPI_Iallgather(sb, C, MPI_INT, rb, C, MPI_INT, comm, &rq_));
    for (int j = 0; j < n; j++) for (int i = 0; i < C; i++) want[j * C + i] = v(j, i);
    expect_ints(where, nb, "Allgather", rb, want, n * C);
    free(rb);
    rb = ints(total, -1);
    RUN(nb, MPI_Allgatherv(sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, comm),
        MPI_Iallgatherv(sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, comm, &rq_));
    for (int k = 0; k < total; k++) want[k] = -1;
    for (int j = 0; j < n; j++) for (int i = 0; i < counts[j]; i++) want[displs[j] + i] = v(j, i);
    expect_ints(where, nb, "Allgatherv", rb, want, total);
    free(rb);
    free(sb);

    /* scatter, scatterv */
    sb = ints(total > n * C ? total : n * C, -1);
    for (int j = 0; j < n; j++) for (int i = 0; i < C; i++) sb[j * C + i] = v(j, i) + 5;
    rb = ints(C, -1);
    RUN(nb, MPI_Scatter(sb, C, MPI_INT, rb, C, MPI_INT, root, comm),
        MPI_Iscatter(sb, C, MPI_INT, rb, C, MPI_INT, root, comm, &rq_));
    for (int i = 0; i < C; i++) want[i] = v(me, i) + 5;
    expect_ints(where, nb, "Scatter", rb, want, C);
    for (int j = 0; j < n; j++) for (int i = 0; i < counts[j]; i++) sb[displs[j] + i] = v(j, i) + 9;
    for (int i = 0; i < C; i++) rb[i] = -1;
    RUN(nb, MPI_Scatterv(sb, counts, displs, MPI_INT, rb, vcount(me), MPI_INT, root, comm),
        MPI_Iscatterv(sb, counts, displs, MPI_INT, rb, vcount(me), MPI_INT, root, comm, &rq_));
    for (int i = 0; i < C; i++) want[i] = i < vcount(me) ? v(me, i) + 9 : -1;
    expect_ints(where, nb, "Scatterv", rb, want, C);
    free(rb);
    free(sb);

    /* alltoall, alltoallv, alltoallw: block j of rank me goes to rank j */
    sb = ints(n * C, 0);
    rb = ints(n * C, -1);
    for (int j = 0; j < n; j++) for (int i = 0; i < C; i++) {
        sb[j * C + i] = me * 1000 + j * 10 + i;
        want[j * C + i] = j * 1000 + me * 10 + i;
    }
    RUN(nb, MPI_Alltoall(sb, C, MPI_INT, rb, C, MPI_INT, comm),
        MPI_Ialltoall(sb, C, MPI_INT, rb, C, MPI_INT, comm, &rq_));
    expect_ints(where, nb, "Alltoall", rb, want, n * C);
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
    RUN(nb, MPI_Alltoallv(sb, counts, displs, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm),
        MPI_Ialltoallv(sb, counts, displs, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm, &rq_));
    expect_ints(where, nb, "Alltoallv", rb, want, rat);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)n);
    int *sbytes = ints(n, 0), *rbytes = ints(n, 0);
    for (int j = 0; j < n; j++) {
        types[j] = MPI_INT;
        sbytes[j] = displs[j] * (int)sizeof(int);
        rbytes[j] = rdispls[j] * (int)sizeof(int);
    }
    for (int k = 0; k < rat; k++) rb[k] = -1;
    RUN(nb, MPI_Alltoallw(sb, counts, sbytes, types, rb, rcounts, rbytes, types, comm),
        MPI_Ialltoallw(sb, counts, sbytes, types, rb, rcounts, rbytes, types, comm, &rq_));
    expect_ints(where, nb, "Alltoallw", rb, want, rat);
    free(types); free(sbytes); free(rbytes); free(sb); free(rb);

    /* reduce, allreduce (sum) */
    sb = ints(n * C, 0);
    rb = ints(n * C, -1);
    for (int i = 0; i < C; i++) { sb[i] = v(me, i); want[i] = 100 * n * (n - 1) / 2 + n * (i + 1); }
    RUN(nb, MPI_Reduce(sb, rb, C, MPI_INT, MPI_SUM, root, comm),
        MPI_Ireduce(sb, rb, C, MPI_INT, MPI_SUM, root, comm, &rq_));
    if (me == root) expect_ints(where, nb, "Reduce", rb, want, C);
    for (int i = 0; i < C; i++) rb[i] = -1;
    RUN(nb, MPI_Allreduce(sb, rb, C, MPI_INT, MPI_SUM, comm),
        MPI_Iallreduce(sb, rb, C, MPI_INT, MPI_SUM, comm, &rq_));
    expect_ints(where, nb, "Allreduce", rb, want, C);

    /* reduce_scatter_block, reduce_scatter: element k of every rank is
     * r * 100 + k + 1; rank me gets its block of the sums */
    for (int k = 0; k < n * C; k++) sb[k] = me * 100 + k + 1;
    for (int i = 0; i < C; i++) { rb[i] = -1; want[i] = 100 * n * (n - 1) / 2 + n * (me * C + i + 1); }
    RUN(nb, MPI_Reduce_scatter_block(sb, rb, C, MPI_INT, MPI_SUM, comm),
        MPI_Ireduce_scatter_block(sb, rb, C, MPI_INT, MPI_SUM, comm, &rq_));
    expect_ints(where, nb, "Reduce_scatter_block", rb, want, C);
    int before = 0;
    for (int j = 0; j < n; j++) { counts[j] = vcount(j); if (j < me) before += counts[j]; }
    for (int i = 0; i < C; i++) {
        rb[i] = -1;
        want[i] = i < vcount(me) ? 100 * n * (n - 1) / 2 + n * (before + i + 1) : -1;
    }
    RUN(nb, MPI_Reduce_scatter(sb, rb, counts, MPI_INT, MPI_SUM, comm),
        MPI_Ireduce_scatter(sb, rb, counts, MPI_INT, MPI_SUM, comm, &rq_));
    expect_ints(where, nb, "Reduce_scatter", rb, want, C);

    /* scan, exscan: prefix sums over ranks 0..me (exclusive: 0..me-1) */
    for (int i = 0; i < C; i++) {
        sb[i] = v(me, i);
        rb[i] = -1;
        want[i] = 100 * me * (me + 1) / 2 + (me + 1) * (i + 1);
    }
    RUN(nb, MPI_Scan(sb, rb, C, MPI_INT, MPI_SUM, comm),
        MPI_Iscan(sb, rb, C, MPI_INT, MPI_SUM, comm, &rq_));
    expect_ints(where, nb, "Scan", rb, want, C);
    for (int i = 0; i < C; i++) { rb[i] = -1; want[i] = 100 * (me - 1) * me / 2 + me * (i + 1); }
    RUN(nb, MPI_Exscan(sb, rb, C, MPI_INT, MPI_SUM, comm),
        MPI_Iexscan(sb, rb, C, MPI_INT, MPI_SUM, comm, &rq_));
    if (me > 0) expect_ints(where, nb, "Exscan", rb, want, C);
    free(sb); free(rb);
    free(counts); free(displs); free(rcounts); free(rdispls); free(want);
}

/* ---------------------------------------------------------------- inter */

/* What local rank j of group g contributes, element k. */
static int w(int g, int j, int k) { return g * 10000 + j * 100 + k + 1; }

static void inter_suite(tcomm_t *t, int group, const char *where, int nb)
{
    MPI_Comm comm = t->comm;
    int ln = t->size, rn = t->rsize, me = t->rank, rg = 1 - group;
    int big = 4 * C * (ln > rn ? ln : rn) * (ln > rn ? ln : rn) + 64;
    int *want = ints(big, 0), *sb = ints(big, 0), *rb = ints(big, -1);
    int *counts = ints(rn, 0), *displs = ints(rn, 0), *rcounts = ints(rn, 0), *rdispls = ints(rn, 0);
    int *lcounts = ints(ln, 0);

    if (nb) RUN(1, MPI_SUCCESS, MPI_Ibarrier(comm, &rq_));
    else t_barrier(t);

    /* rooted collectives, with the root at local rank 0 of each group in turn */
    for (int rootg = 0; rootg < 2; rootg++) {
        int in_root_group = group == rootg;
        int root = in_root_group ? (me == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
        int i_am_root = root == MPI_ROOT, receiver = !in_root_group;

        /* bcast */
        for (int i = 0; i < C; i++) { rb[i] = i_am_root ? w(rootg, 0, i) + 3 : -1; want[i] = w(rootg, 0, i) + 3; }
        RUN(nb, MPI_Bcast(rb, C, MPI_INT, root, comm), MPI_Ibcast(rb, C, MPI_INT, root, comm, &rq_));
        if (receiver) expect_ints(where, nb, "Bcast", rb, want, C);

        /* gather, gatherv: the root receives from every remote process */
        for (int i = 0; i < C; i++) sb[i] = w(group, me, i);
        for (int k = 0; k < rn * C; k++) rb[k] = -1;
        RUN(nb, MPI_Gather(sb, C, MPI_INT, rb, C, MPI_INT, root, comm),
            MPI_Igather(sb, C, MPI_INT, rb, C, MPI_INT, root, comm, &rq_));
        for (int j = 0; j < rn; j++) for (int i = 0; i < C; i++) want[j * C + i] = w(rg, j, i);
        if (i_am_root) expect_ints(where, nb, "Gather", rb, want, rn * C);
        int total = layout(rn, vcount, counts, displs);
        for (int k = 0; k < total; k++) { rb[k] = -1; want[k] = -1; }
        RUN(nb, MPI_Gatherv(sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, root, comm),
            MPI_Igatherv(sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, root, comm, &rq_));
        for (int j = 0; j < rn; j++) for (int i = 0; i < counts[j]; i++) want[displs[j] + i] = w(rg, j, i);
        if (i_am_root) expect_ints(where, nb, "Gatherv", rb, want, total);

        /* scatter, scatterv: the root sends to every remote process */
        for (int j = 0; j < rn; j++) for (int i = 0; i < C; i++) sb[j * C + i] = 50000 + j * 100 + i;
        for (int i = 0; i < C; i++) { rb[i] = -1; want[i] = 50000 + me * 100 + i; }
        RUN(nb, MPI_Scatter(sb, C, MPI_INT, rb, C, MPI_INT, root, comm),
            MPI_Iscatter(sb, C, MPI_INT, rb, C, MPI_INT, root, comm, &rq_));
        if (receiver) expect_ints(where, nb, "Scatter", rb, want, C);
        for (int j = 0; j < rn; j++) for (int i = 0; i < counts[j]; i++) sb[displs[j] + i] = 60000 + j * 100 + i;
        for (int i = 0; i < C; i++) { rb[i] = -1; want[i] = i < vcount(me) ? 60000 + me * 100 + i : -1; }
        RUN(nb, MPI_Scatterv(sb, counts, displs, MPI_INT, rb, vcount(me), MPI_INT, root, comm),
            MPI_Iscatterv(sb, counts, displs, MPI_INT, rb, vcount(me), MPI_INT, root, comm, &rq_));
        if (receiver) expect_ints(where, nb, "Scatterv", rb, want, C);

        /* reduce: the root gets the sum over the remote group */
        for (int i = 0; i < C; i++) {
            sb[i] = w(group, me, i);
            rb[i] = -1;
            want[i] = rn * rg * 10000 + 100 * rn * (rn - 1) / 2 + rn * (i + 1);
        }
        RUN(nb, MPI_Reduce(sb, rb, C, MPI_INT, MPI_SUM, root, comm),
            MPI_Ireduce(sb, rb, C, MPI_INT, MPI_SUM, root, comm, &rq_));
        if (i_am_root) expect_ints(where, nb, "Reduce", rb, want, C);
    }

    /* allgather, allgatherv: everybody gets the remote group's blocks */
    for (int i = 0; i < C; i++) sb[i] = w(group, me, i);
    for (int k = 0; k < rn * C; k++) rb[k] = -1;
    for (int j = 0; j < rn; j++) for (int i = 0; i < C; i++) want[j * C + i] = w(rg, j, i);
    RUN(nb, MPI_Allgather(sb, C, MPI_INT, rb, C, MPI_INT, comm),
        MPI_Iallgather(sb, C, MPI_INT, rb, C, MPI_INT, comm, &rq_));
    expect_ints(where, nb, "Allgather", rb, want, rn * C);
    int total = layout(rn, vcount, counts, displs);
    for (int k = 0; k < total; k++) { rb[k] = -1; want[k] = -1; }
    for (int j = 0; j < rn; j++) for (int i = 0; i < counts[j]; i++) want[displs[j] + i] = w(rg, j, i);
    RUN(nb, MPI_Allgatherv(sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, comm),
        MPI_Iallgatherv(sb, vcount(me), MPI_INT, rb, counts, displs, MPI_INT, comm, &rq_));
    expect_ints(where, nb, "Allgatherv", rb, want, total);

    /* alltoall, alltoallv, alltoallw: block j goes to remote process j */
    for (int j = 0; j < rn; j++) for (int i = 0; i < C; i++) {
        sb[j * C + i] = group * 10000 + me * 100 + j * 10 + i;
        rb[j * C + i] = -1;
        want[j * C + i] = rg * 10000 + j * 100 + me * 10 + i;
    }
    RUN(nb, MPI_Alltoall(sb, C, MPI_INT, rb, C, MPI_INT, comm),
        MPI_Ialltoall(sb, C, MPI_INT, rb, C, MPI_INT, comm, &rq_));
    expect_ints(where, nb, "Alltoall", rb, want, rn * C);
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
    RUN(nb, MPI_Alltoallv(sb, counts, displs, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm),
        MPI_Ialltoallv(sb, counts, displs, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm, &rq_));
    expect_ints(where, nb, "Alltoallv", rb, want, rat);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)rn);
    int *sbytes = ints(rn, 0), *rbytes = ints(rn, 0);
    for (int j = 0; j < rn; j++) {
        types[j] = MPI_INT;
        sbytes[j] = displs[j] * (int)sizeof(int);
        rbytes[j] = rdispls[j] * (int)sizeof(int);
    }
    for (int k = 0; k < rat; k++) rb[k] = -1;
    RUN(nb, MPI_Alltoallw(sb, counts, sbytes, types, rb, rcounts, rbytes, types, comm),
        MPI_Ialltoallw(sb, counts, sbytes, types, rb, rcounts, rbytes, types, comm, &rq_));
    expect_ints(where, nb, "Alltoallw", rb, want, rat);
    free(types); free(sbytes); free(rbytes);

    /* allreduce: the sum over the remote group */
    for (int i = 0; i < C; i++) {
        sb[i] = w(group, me, i);
        rb[i] = -1;
        want[i] = rn * rg * 10000 + 100 * rn * (rn - 1) / 2 + rn * (i + 1);
    }
    RUN(nb, MPI_Allreduce(sb, rb, C, MPI_INT, MPI_SUM, comm),
        MPI_Iallreduce(sb, rb, C, MPI_INT, MPI_SUM, comm, &rq_));
    expect_ints(where, nb, "Allreduce", rb, want, C);

    /* reduce_scatter_block, reduce_scatter: the remote group's vectors of
     * C * ln * rn elements (the same length in both groups) are summed and
     * scattered over the local group, C * rn elements each */
    int rc = C * rn, len = C * ln * rn;
    for (int k = 0; k < len; k++) sb[k] = w(group, me, k);
    for (int i = 0; i < rc; i++) {
        rb[i] = -1;
        want[i] = rn * rg * 10000 + 100 * rn * (rn - 1) / 2 + rn * (me * rc + i + 1);
    }
    RUN(nb, MPI_Reduce_scatter_block(sb, rb, rc, MPI_INT, MPI_SUM, comm),
        MPI_Ireduce_scatter_block(sb, rb, rc, MPI_INT, MPI_SUM, comm, &rq_));
    expect_ints(where, nb, "Reduce_scatter_block", rb, want, rc);
    for (int j = 0; j < ln; j++) lcounts[j] = rc;
    for (int i = 0; i < rc; i++) rb[i] = -1;
    RUN(nb, MPI_Reduce_scatter(sb, rb, lcounts, MPI_INT, MPI_SUM, comm),
        MPI_Ireduce_scatter(sb, rb, lcounts, MPI_INT, MPI_SUM, comm, &rq_));
    expect_ints(where, nb, "Reduce_scatter", rb, want, rc);

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

static void neighbor_suite(const topo_t *tp, const char *where, int nb)
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
    RUN(nb, MPI_Neighbor_allgather(sb, C, MPI_INT, rb, C, MPI_INT, comm),
        MPI_Ineighbor_allgather(sb, C, MPI_INT, rb, C, MPI_INT, comm, &rq_));
    expect_ints(where, nb, "Neighbor_allgather", rb, want, 2 * C + 2);
    /* allgatherv: the blocks in reverse order, one unused slot between */
    for (int s = 0; s < in; s++) { rcounts[s] = C; rdispls[s] = (in - 1 - s) * (C + 1); }
    for (int k = 0; k < 2 * C + 2; k++) rb[k] = want[k] = -1;
    for (int s = 0; s < in; s++)
        for (int i = 0; i < C; i++)
            want[rdispls[s] + i] = tp->src[s] == MPI_PROC_NULL ? -1 : nv(tp->src[s], 0, i);
    RUN(nb, MPI_Neighbor_allgatherv(sb, C, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm),
        MPI_Ineighbor_allgatherv(sb, C, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm, &rq_));
    expect_ints(where, nb, "Neighbor_allgatherv", rb, want, 2 * C + 2);

    /* alltoall, alltoallv, alltoallw: block d goes to destination d */
    for (int d = 0; d < out; d++) for (int i = 0; i < C; i++) sb[d * C + i] = nv(me, d, i);
    for (int k = 0; k < 2 * C + 2; k++) rb[k] = want[k] = -1;
    for (int s = 0; s < in; s++)
        for (int i = 0; i < C; i++)
            want[s * C + i] = tp->src[s] == MPI_PROC_NULL ? -1 : nv(tp->src[s], tp->slot_at_src[s], i);
    RUN(nb, MPI_Neighbor_alltoall(sb, C, MPI_INT, rb, C, MPI_INT, comm),
        MPI_Ineighbor_alltoall(sb, C, MPI_INT, rb, C, MPI_INT, comm, &rq_));
    expect_ints(where, nb, "Neighbor_alltoall", rb, want, 2 * C + 2);
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
    RUN(nb, MPI_Neighbor_alltoallv(sb, counts, displs, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm),
        MPI_Ineighbor_alltoallv(sb, counts, displs, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm, &rq_));
    expect_ints(where, nb, "Neighbor_alltoallv", rb, want, 2 * C + 2);
    for (int k = 0; k < 2 * C + 2; k++) rb[k] = -1;
    RUN(nb, MPI_Neighbor_alltoallw(sb, counts, sbytes, types, rb, rcounts, rbytes, types, comm),
        MPI_Ineighbor_alltoallw(sb, counts, sbytes, types, rb, rcounts, rbytes, types, comm, &rq_));
    expect_ints(where, nb, "Neighbor_alltoallw", rb, want, 2 * C + 2);
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
        for (int nb = 0; nb < 2; nb++) {
            intra_suite(&t_world, "MPI_COMM_WORLD", nb);
            intra_suite(&self, "MPI_COMM_SELF", nb);
            intra_suite(&half, "half", nb);
            if (inter.comm != MPI_COMM_NULL) inter_suite(&inter, group, "intercommunicator", nb);
            neighbor_suite(&line, "cartesian line", nb);
            neighbor_suite(&ring, "graph ring", nb);
            neighbor_suite(&self_line, "cartesian line on MPI_COMM_SELF", nb);
            neighbor_suite(&self_ring, "graph ring on MPI_COMM_SELF", nb);
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
