/*
 * noncommutative: MPI_Allreduce and MPI_Reduce with NON-commutative user ops
 * (MPI_Op_create with commute = 0) over a sweep of message lengths that
 * crosses every size limit of coll rdma and of the module underneath (1
 * element up to about 300 KiB), so that a call handed to a module which does
 * not keep the canonical order r0 op r1 op ... op r(n-1) shows up as a wrong
 * result.
 *
 * Why: Open MPI's tuned, told to use its ring allreduce or chain reduce
 * (coll_tuned_use_dynamic_rules 1, coll_tuned_allreduce_algorithm 4,
 * coll_tuned_reduce_algorithm 2), folds in another order; when coll rdma is
 * selected the user must still get the canonical result, so coll rdma must
 * not hand such calls over for their size (an outside user's trial found 40
 * wrong results).
 *
 * Ops, each on its own contiguous datatype:
 *   mat2   2x2 matrix product of uint32 (wrapping), 16-byte elements;
 *   affine composition of maps x -> m*x + c over uint32 (the lower rank's map
 *          applied first), 8-byte elements;
 *   split  low 16 bits from the left operand, high 16 bits from the right
 *          one, on MPI_UINT32_T (4-byte elements): the result names the
 *          first and the last rank of the fold.
 * All three are associative, so any tree that keeps the rank order is right.
 *
 * Calls, at each count: allreduce, allreduce MPI_IN_PLACE, and at every root
 * reduce (the other ranks pass a NULL receive buffer) and reduce MPI_IN_PLACE;
 * on MPI_COMM_WORLD and on a split whose rank order is the reverse of the
 * world's (a fold in world order would be wrong there).
 *
 * Reference: no communication. Every rank's input is a function of (its rank
 * in the communicator, element index, op, count), so each rank generates the
 * inputs of all ranks and folds them locally, element by element, in rank
 * order 0..n-1. Results are compared exactly, at every rank that receives
 * one; send buffers must be unchanged.
 *
 * -n adds the mat2 op on the 16-byte matrix resized to a 24-byte extent (a
 * gap of 8 bytes after each element: not contiguous), whose gaps in the
 * receive buffer must keep their contents. coll rdma hands non-contiguous
 * reductions to the module underneath, so with tuned's ring/chain forced
 * these can come out wrong: ci/mpi-tests.sh passes -n only in the run with
 * the default decision rules.
 *
 * Options: -m <max bytes> (default 300000): the sweep's largest message;
 *          -n: the non-contiguous case too.
 */
#include "common.h"

enum { OP_MAT2, OP_AFFINE, OP_SPLIT, OP_MAT2_GAP, N_OPS };

typedef struct {
    const char *name;
    MPI_Datatype dtype;
    MPI_Op op;
    size_t data_bytes;   /* bytes of data per element */
    size_t extent;       /* bytes per element in the buffers */
    void (*fold)(const uint32_t *lower, uint32_t *higher); /* higher = lower op higher */
} opcase_t;

/* ------------------------------------------------------------- the ops */
static void mat2_fold(const uint32_t *a, uint32_t *b)
{
    uint32_t r0 = a[0] * b[0] + a[1] * b[2], r1 = a[0] * b[1] + a[1] * b[3];
    uint32_t r2 = a[2] * b[0] + a[3] * b[2], r3 = a[2] * b[1] + a[3] * b[3];
    b[0] = r0; b[1] = r1; b[2] = r2; b[3] = r3;
}

/* (m, c): x -> m*x + c. a then b: x -> b.m*(a.m*x + a.c) + b.c */
static void affine_fold(const uint32_t *a, uint32_t *b)
{
    uint32_t m = a[0] * b[0], c = b[0] * a[1] + b[1];
    b[0] = m; b[1] = c;
}

static void split_fold(const uint32_t *a, uint32_t *b)
{
    b[0] = (a[0] & 0xffffu) | (b[0] & 0xffff0000u);
}

static opcase_t cases[N_OPS];

/* The MPI user functions: len elements, each at the datatype's extent. */
static void apply(int which, void *in, void *inout, int *len)
{
    const opcase_t *c = &cases[which];
    for (int i = 0; i < *len; i++)
        c->fold((const uint32_t *)((char *)in + i * c->extent), (uint32_t *)((char *)inout + i * c->extent));
}
static void mat2_fn(void *in, void *inout, int *len, MPI_Datatype *dt) { (void)dt; apply(OP_MAT2, in, inout, len); }
static void affine_fn(void *in, void *inout, int *len, MPI_Datatype *dt) { (void)dt; apply(OP_AFFINE, in, inout, len); }
static void split_fn(void *in, void *inout, int *len, MPI_Datatype *dt) { (void)dt; apply(OP_SPLIT, in, inout, len); }
static void mat2_gap_fn(void *in, void *inout, int *len, MPI_Datatype *dt) { (void)dt; apply(OP_MAT2_GAP, in, inout, len); }

static void make_cases(void)
{
    MPI_Datatype mat, aff, mat_gap;
    T_MPI(MPI_Type_contiguous(4, MPI_UINT32_T, &mat));
    T_MPI(MPI_Type_commit(&mat));
    T_MPI(MPI_Type_contiguous(2, MPI_UINT32_T, &aff));
    T_MPI(MPI_Type_commit(&aff));
    T_MPI(MPI_Type_create_resized(mat, 0, 24, &mat_gap));
    T_MPI(MPI_Type_commit(&mat_gap));
    MPI_Op op;
    T_MPI(MPI_Op_create(mat2_fn, 0, &op));
    cases[OP_MAT2] = (opcase_t){"mat2x2 uint32 product", mat, op, 16, 16, mat2_fold};
    T_MPI(MPI_Op_create(affine_fn, 0, &op));
    cases[OP_AFFINE] = (opcase_t){"affine map composition", aff, op, 8, 8, affine_fold};
    T_MPI(MPI_Op_create(split_fn, 0, &op));
    cases[OP_SPLIT] = (opcase_t){"left low bits, right high bits", MPI_UINT32_T, op, 4, 4, split_fold};
    T_MPI(MPI_Op_create(mat2_gap_fn, 0, &op));
    cases[OP_MAT2_GAP] = (opcase_t){"mat2x2 resized to 24 B (gap)", mat_gap, op, 16, 24, mat2_fold};
    for (int k = 0; k < N_OPS; k++) {
        int commute = 1;
        MPI_Op_commutative(cases[k].op, &commute);
        T_CHECK(!commute, "%s: MPI says the op is commutative", cases[k].name);
    }
}

/* ----------------------------------------------------------- the data */
/* Word w of element i of rank r's input, for one (op, count) case. Odd
 * multipliers keep the matrix and affine products from collapsing to 0. */
static uint32_t input_word(uint64_t key, int rank, size_t i, int w)
{
    uint64_t x = t_mix(key ^ ((uint64_t)rank << 48) ^ ((uint64_t)i << 3) ^ (uint64_t)w);
    return (uint32_t)x | 1u;
}

static void fill_input(const opcase_t *c, uint64_t key, int rank, size_t count, unsigned char *buf)
{
    for (size_t i = 0; i < count; i++) {
        uint32_t *e = (uint32_t *)(buf + i * c->extent);
        for (size_t w = 0; w < c->data_bytes / 4; w++) e[w] = input_word(key, rank, i, (int)w);
    }
}

static const unsigned char GAP_FILL = 0x3c, NULL_FILL = 0xc3;

/* ---------------------------------------------------------- one check */
static void compare(const char *what, const opcase_t *c, size_t count, const unsigned char *got,
                    const unsigned char *want, int gap_must_hold, MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    long wrong = 0;
    size_t first = 0;
    for (size_t i = 0; i < count; i++) {
        const unsigned char *g = got + i * c->extent, *w = want + i * c->extent;
        int bad = memcmp(g, w, c->data_bytes) != 0;
        if (gap_must_hold)
            for (size_t b = c->data_bytes; b < c->extent && !bad; b++) bad = g[b] != GAP_FILL;
        if (bad && !wrong++) first = i;
    }
    T_CHECK(!wrong, "%s, %s, count %zu (%zu bytes), comm rank %d: %ld element(s) wrong, first %zu: "
            "got %08x.. want %08x..", what, c->name, count, count * c->data_bytes, rank, wrong, first,
            ((const uint32_t *)(got + first * c->extent))[0], ((const uint32_t *)(want + first * c->extent))[0]);
}

typedef struct {
    unsigned char *mine, *send, *recv, *want, *acc;
    size_t cap;
} bufs_t;

static void ensure(bufs_t *b, size_t bytes)
{
    if (bytes <= b->cap) return;
    free(b->mine); free(b->send); free(b->recv); free(b->want); free(b->acc);
    b->mine = malloc(bytes); b->send = malloc(bytes); b->recv = malloc(bytes);
    b->want = malloc(bytes); b->acc = malloc(bytes);
    if (!b->mine || !b->send || !b->recv || !b->want || !b->acc) { T_FAIL("out of memory"); MPI_Abort(MPI_COMM_WORLD, 2); }
    b->cap = bytes;
}

/* The canonical result, folded from rank n-1 down to 0 (acc = r(k) op acc),
 * which is r0 op (r1 op (... op r(n-1))): by associativity, the order MPI
 * defines. */
static void reference(const opcase_t *c, uint64_t key, int n, size_t count, bufs_t *b)
{
    size_t bytes = count * c->extent;
    memset(b->want, GAP_FILL, bytes);
    fill_input(c, key, n - 1, count, b->want);
    for (int r = n - 2; r >= 0; r--) {
        memset(b->acc, GAP_FILL, bytes);
        fill_input(c, key, r, count, b->acc);
        for (size_t i = 0; i < count; i++)
            c->fold((const uint32_t *)(b->acc + i * c->extent), (uint32_t *)(b->want + i * c->extent));
    }
}

static long calls_made;

static void one_count(MPI_Comm comm, const char *comm_name, int which, size_t count, bufs_t *b)
{
    const opcase_t *c = &cases[which];
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    size_t bytes = count * c->extent;
    ensure(b, bytes);
    uint64_t key = t_mix(((uint64_t)which << 40) ^ count ^ ((uint64_t)n << 32));
    reference(c, key, n, count, b);
    memset(b->mine, GAP_FILL, bytes);
    fill_input(c, key, rank, count, b->mine);
    int gapped = c->extent != c->data_bytes;
    char what[96];

    /* allreduce */
    memcpy(b->send, b->mine, bytes);
    memset(b->recv, GAP_FILL, bytes);
    T_MPI(MPI_Allreduce(b->send, b->recv, (int)count, c->dtype, c->op, comm));
    snprintf(what, sizeof what, "%s allreduce", comm_name);
    compare(what, c, count, b->recv, b->want, gapped, comm);
    T_CHECK(memcmp(b->send, b->mine, bytes) == 0, "%s: %s, count %zu: send buffer changed", what, c->name, count);

    /* allreduce in place */
    memcpy(b->recv, b->mine, bytes);
    T_MPI(MPI_Allreduce(MPI_IN_PLACE, b->recv, (int)count, c->dtype, c->op, comm));
    snprintf(what, sizeof what, "%s allreduce in place", comm_name);
    compare(what, c, count, b->recv, b->want, gapped, comm);
    calls_made += 2;

    for (int root = 0; root < n; root++) {
        /* reduce: the other ranks' receive buffers are not significant */
        memcpy(b->send, b->mine, bytes);
        memset(b->recv, rank == root ? GAP_FILL : NULL_FILL, bytes);
        T_MPI(MPI_Reduce(b->send, rank == root ? b->recv : NULL, (int)count, c->dtype, c->op, root, comm));
        snprintf(what, sizeof what, "%s reduce to root %d", comm_name, root);
        if (rank == root) compare(what, c, count, b->recv, b->want, gapped, comm);
        T_CHECK(memcmp(b->send, b->mine, bytes) == 0, "%s: %s, count %zu: send buffer changed", what, c->name, count);

        /* reduce in place at the root */
        memcpy(b->recv, b->mine, bytes);
        if (rank == root)
            T_MPI(MPI_Reduce(MPI_IN_PLACE, b->recv, (int)count, c->dtype, c->op, root, comm));
        else
            T_MPI(MPI_Reduce(b->recv, NULL, (int)count, c->dtype, c->op, root, comm));
        snprintf(what, sizeof what, "%s reduce in place at root %d", comm_name, root);
        if (rank == root) compare(what, c, count, b->recv, b->want, gapped, comm);
        calls_made += 2;
    }
}

/* Counts whose byte lengths sit just below, at and just above every limit
 * that decides between paths: the exchange (up to 4 KiB), segments (8 KiB),
 * coll_rdma_reduce_max_bytes and _parallel_min_bytes (8 KiB),
 * coll_rdma_allreduce_max_bytes and _parallel_min_bytes (16 KiB),
 * 64 KiB, coll_rdma_reduce_parallel_slices_min_bytes and the parallel
 * reduction's staging (128 KiB), and 256 KiB. */
static size_t sweep(size_t data_bytes, size_t max_bytes, size_t *counts)
{
    static const size_t marks[] = {64, 4096, 8192, 16384, 65536, 131072, 262144};
    size_t n = 0;
    counts[n++] = 1; counts[n++] = 2; counts[n++] = 3;
    for (size_t m = 0; m < sizeof marks / sizeof marks[0]; m++) {
        size_t at = marks[m] / data_bytes;
        for (size_t k = at - 1; k <= at + 1; k++)
            if (k > counts[n - 1] && k * data_bytes <= max_bytes) counts[n++] = k;
    }
    if (max_bytes / data_bytes > counts[n - 1]) counts[n++] = max_bytes / data_bytes;
    return n;
}

static void run_all(MPI_Comm comm, const char *comm_name, int with_gaps, size_t max_bytes, bufs_t *b)
{
    size_t counts[32];
    for (int which = 0; which < N_OPS; which++) {
        if (which == OP_MAT2_GAP && !with_gaps) continue;
        size_t n = sweep(cases[which].data_bytes, max_bytes, counts);
        for (size_t k = 0; k < n; k++) one_count(comm, comm_name, which, counts[k], b);
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    size_t max_bytes = (size_t)t_opt(argc, argv, "-m", 300000);
    int with_gaps = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-n") == 0) with_gaps = 1;
    make_cases();
    bufs_t b = {0};

    run_all(MPI_COMM_WORLD, "world", with_gaps, max_bytes, &b);
    MPI_Comm c;
    tcomm_t reversed;
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, t_wsize - 1 - t_wrank, &c));
    t_derive(&t_world, c, &reversed);
    run_all(reversed.comm, "reversed", with_gaps, max_bytes, &b);
    t_free(&reversed);

    if (t_wrank == 0) printf("info: %ld reductions per rank checked%s\n", calls_made, with_gaps ? " (non-contiguous too)" : "");
    free(b.mine); free(b.send); free(b.recv); free(b.want); free(b.acc);
    return t_finish("noncommutative");
}
