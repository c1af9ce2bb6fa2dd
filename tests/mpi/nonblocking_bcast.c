/*
 * nonblocking_bcast: MPI_Ibcast and the persistent bcast (MPIX_Bcast_init
 * on Open MPI 4.1, MPI_Bcast_init on 5.0). Every result is compared with
 * the bytes the root was given, which every rank computes itself from the
 * call's number and root (never received). Phases:
 *   1. rounds of 1-4 outstanding ibcasts, the root moving at every call,
 *      lengths from 0 to -m bytes (default 1 MiB), a small blocking
 *      MPI_Bcast checked on the spot between some posts, completed by
 *      MPI_Waitall, an MPI_Waitany loop, or MPI_Test polling in reverse
 *      order with computation between the polls (overlap);
 *   2. ibcasts of derived datatypes: a vector of ints (stride 2) on every
 *      rank, and the same signature as contiguous ints at the root and a
 *      vector elsewhere (MPI lets ranks differ), the gaps left untouched;
 *   3. one persistent bcast per root, started -n times in all (default
 *      1000), the root's buffer rewritten before each start, the others'
 *      cleared, and a persistent bcast of zero count;
 *   4. on a communicator of its own, one persistent bcast per root and a
 *      strided one (sent from a packed copy), all started at once -n / 4
 *      times (several of one kind outstanding, each keeping its run and
 *      its decision between starts: glue/run_home.rs, KeptBcast) and
 *      waited for in reverse, buffers rewritten between starts, with a
 *      long blocking allreduce after the third round, whose degree trial
 *      (with coll_rdma_autotune 1) changes the plan the decisions were
 *      kept on; then all freed, and
 *      the communicator;
 * Options: -r <rounds of phase 1> (default 200), -n <persistent starts>,
 *          -m <largest ibcast, bytes>.
 */
#include "common.h"
#include <stdint.h>

#define NB_MAX_OUTSTANDING 4

/* The root's byte i of call `seq`. */
static unsigned char nb_byte(long seq, int root, size_t i)
{
    return (unsigned char)(t_mix((uint64_t)seq * 1000003u + (uint64_t)root * 7919u + i / 8) >> (8 * (i % 8)));
}

static void nb_fill(unsigned char *buf, size_t len, long seq, int root)
{
    for (size_t i = 0; i < len; i++) buf[i] = nb_byte(seq, root, i);
}

static void nb_check(const unsigned char *buf, size_t len, long seq, int root, const char *what)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != nb_byte(seq, root, i)) {
            T_FAIL("%s %ld (%zu bytes, root %d): byte %zu is %u, the root's is %u", what, seq, len, root, i, buf[i],
                   nb_byte(seq, root, i));
            return;
        }
    }
}

/* Work between polls, which the compiler cannot drop. */
static volatile double nb_sink;
static void nb_compute(int units)
{
    double x = 1.0;
    for (int i = 0; i < units * 1000; i++) x = x * 1.0000001 + 1e-9;
    nb_sink = x;
}

static size_t nb_length(long draw, size_t max)
{
    static const size_t lengths[] = { 0, 1, 7, 64, 1000, 4096, 16383, 65536, 262144, 1 << 20 };
    size_t len = lengths[draw % (long)(sizeof lengths / sizeof lengths[0])];
    return len > max ? max : len;
}

static void outstanding_rounds(MPI_Comm comm, int rank, int size, long rounds, size_t max)
{
    unsigned char *buf[NB_MAX_OUTSTANDING];
    size_t len[NB_MAX_OUTSTANDING];
    int root[NB_MAX_OUTSTANDING];
    long seq[NB_MAX_OUTSTANDING];
    MPI_Request rq[NB_MAX_OUTSTANDING];
    long next = 0;
    for (long r = 0; r < rounds; r++) {
        int n = 1 + (int)(r % NB_MAX_OUTSTANDING);
        for (int i = 0; i < n; i++) {
            seq[i] = next++;
            root[i] = (int)(seq[i] % size);
            len[i] = nb_length(seq[i] * 7 + r, max);
            buf[i] = malloc(len[i] + 1);
            if (rank == root[i]) nb_fill(buf[i], len[i], seq[i], root[i]);
            else memset(buf[i], 0xEE, len[i] + 1);
            T_MPI(MPI_Ibcast(buf[i], (int)len[i], MPI_BYTE, root[i], comm, &rq[i]));
            if ((r + i) % 3 == 0) {
                /* A blocking bcast between the posts, checked at once. */
                unsigned char small[256];
                long bseq = -1 - next;
                int broot = (int)((r + i + 1) % size);
                if (rank == broot) nb_fill(small, sizeof small, bseq, broot);
                else memset(small, 0xEE, sizeof small);
                T_MPI(MPI_Bcast(small, (int)sizeof small, MPI_BYTE, broot, comm));
                nb_check(small, sizeof small, bseq, broot, "blocking bcast between ibcasts");
            }
        }
        switch (r % 3) {
        case 0:
            T_MPI(MPI_Waitall(n, rq, MPI_STATUSES_IGNORE));
            break;
        case 1:
            for (int k = 0; k < n; k++) {
                int index;
                T_MPI(MPI_Waitany(n, rq, &index, MPI_STATUS_IGNORE));
            }
            break;
        default:
            for (int i = n - 1; i >= 0; i--) {
                int flag = 0;
                while (!flag) {
                    nb_compute(1);
                    T_MPI(MPI_Test(&rq[i], &flag, MPI_STATUS_IGNORE));
                }
            }
        }
        for (int i = 0; i < n; i++) {
            nb_check(buf[i], len[i], seq[i], root[i], "ibcast");
            if (rank != root[i]) T_CHECK(buf[i][len[i]] == 0xEE, "ibcast %ld wrote past its %zu bytes", seq[i], len[i]);
            free(buf[i]);
        }
    }
}

/* Ints of call `seq` at the root. */
static int nb_int(long seq, int i) { return (int)(t_mix((uint64_t)seq * 31u + (uint64_t)i) & 0x7fffffff); }

static void derived_datatypes(MPI_Comm comm, int rank, int size, long rounds)
{
    enum { COUNT = 300 };
    MPI_Datatype strided;
    T_MPI(MPI_Type_vector(COUNT, 1, 2, MPI_INT, &strided));
    T_MPI(MPI_Type_commit(&strided));
    int *wide = malloc(2 * COUNT * sizeof(int));
    for (long r = 0; r < rounds; r++) {
        int root = (int)(r % size);
        int mixed = (int)(r % 2); /* root contiguous, receivers strided */
        long seq = 50000 + r;
        for (int i = 0; i < 2 * COUNT; i++) wide[i] = -1;
        int contiguous_root = mixed && rank == root;
        if (rank == root)
            for (int i = 0; i < COUNT; i++) wide[contiguous_root ? i : 2 * i] = nb_int(seq, i);
        MPI_Request rq;
        if (contiguous_root) T_MPI(MPI_Ibcast(wide, COUNT, MPI_INT, root, comm, &rq));
        else T_MPI(MPI_Ibcast(wide, 1, strided, root, comm, &rq));
        T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        if (contiguous_root) continue;
        for (int i = 0; i < COUNT; i++) {
            T_CHECK(wide[2 * i] == nb_int(seq, i), "strided ibcast %ld (root %d, mixed %d): element %d is %d, want %d", seq, root, mixed,
                    i, wide[2 * i], nb_int(seq, i));
            T_CHECK(wide[2 * i + 1] == -1, "strided ibcast %ld wrote into gap %d", seq, i);
        }
    }
    T_MPI(MPI_Type_free(&strided));
    free(wide);
}

static void persistent(MPI_Comm comm, int rank, int size, long starts)
{
    enum { LEN = 3000 };
    unsigned char *buf = malloc((size_t)size * LEN);
    MPI_Request *rq = malloc((size_t)size * sizeof *rq);
    for (int root = 0; root < size; root++)
        T_MPI(T_BCAST_INIT(buf + (size_t)root * LEN, LEN, MPI_BYTE, root, comm, MPI_INFO_NULL, &rq[root]));
    for (long s = 0; s < starts; s++) {
        int root = (int)(s % size);
        unsigned char *mine = buf + (size_t)root * LEN;
        long seq = 90000 + s;
        if (rank == root) nb_fill(mine, LEN, seq, root);
        else memset(mine, 0xEE, LEN);
        T_MPI(MPI_Start(&rq[root]));
        T_MPI(MPI_Wait(&rq[root], MPI_STATUS_IGNORE));
        nb_check(mine, LEN, seq, root, "persistent bcast start");
    }
    for (int root = 0; root < size; root++) T_MPI(MPI_Request_free(&rq[root]));
    MPI_Request empty;
    T_MPI(T_BCAST_INIT(buf, 0, MPI_BYTE, 0, comm, MPI_INFO_NULL, &empty));
    for (int s = 0; s < 3; s++) {
        T_MPI(MPI_Start(&empty));
        T_MPI(MPI_Wait(&empty, MPI_STATUS_IGNORE));
    }
    T_MPI(MPI_Request_free(&empty));
    free(rq);
    free(buf);
}

static void all_at_once(tcomm_t *world, long starts)
{
    MPI_Comm dup;
    T_MPI(MPI_Comm_dup(world->comm, &dup));
    tcomm_t own;
    t_derive(world, dup, &own);
    MPI_Comm comm = own.comm;
    int rank = own.rank, size = own.size;
    t_barrier(&own); /* sets the communicator up; no allreduce yet */
    enum { LEN = 777, COUNT = 100 };
    MPI_Datatype strided;
    T_MPI(MPI_Type_vector(COUNT, 1, 2, MPI_INT, &strided));
    T_MPI(MPI_Type_commit(&strided));
    int *wide = malloc(2 * COUNT * sizeof(int));
    unsigned char *buf = malloc((size_t)size * LEN);
    MPI_Request *rq = malloc((size_t)(size + 1) * sizeof *rq);
    for (int root = 0; root < size; root++)
        T_MPI(T_BCAST_INIT(buf + (size_t)root * LEN, LEN, MPI_BYTE, root, comm, MPI_INFO_NULL, &rq[root]));
    T_MPI(T_BCAST_INIT(wide, 1, strided, 0, comm, MPI_INFO_NULL, &rq[size]));
    enum { TREE = 1024 }; /* 8 KiB: above the exchange, below the parallel reduction */
    int64_t *tree_in = malloc(TREE * sizeof(int64_t)), *tree_out = malloc(TREE * sizeof(int64_t));
    for (long s = 0; s < starts; s++) {
        long seq = 130000 + s * (size + 1);
        for (int root = 0; root < size; root++) {
            unsigned char *mine = buf + (size_t)root * LEN;
            if (rank == root) nb_fill(mine, LEN, seq + root, root);
            else memset(mine, 0xEE, LEN);
        }
        for (int i = 0; i < 2 * COUNT; i++) wide[i] = rank == 0 && i % 2 == 0 ? nb_int(seq + size, i / 2) : -1;
        for (int k = 0; k <= size; k++) T_MPI(MPI_Start(&rq[k]));
        for (int k = size; k >= 0; k--) T_MPI(MPI_Wait(&rq[k], MPI_STATUS_IGNORE));
        for (int root = 0; root < size; root++) nb_check(buf + (size_t)root * LEN, LEN, seq + root, root, "persistent bcasts at once");
        for (int i = 0; i < COUNT; i++) {
            T_CHECK(wide[2 * i] == nb_int(seq + size, i), "persistent strided bcast %ld: element %d is %d, want %d", s, i, wide[2 * i],
                    nb_int(seq + size, i));
            T_CHECK(wide[2 * i + 1] == -1, "persistent strided bcast %ld wrote into gap %d", s, i);
        }
        if (s == 2) {
            /* Long enough for the tree: its first call runs the degree
             * trial where autotune is on, which changes the plan
             * (Decisions::generation). */
            for (int i = 0; i < TREE; i++) tree_in[i] = rank + i;
            T_MPI(MPI_Allreduce(tree_in, tree_out, TREE, MPI_INT64_T, MPI_SUM, comm));
            for (int i = 0; i < TREE; i++)
                T_CHECK(tree_out[i] == (int64_t)size * (size - 1) / 2 + (int64_t)size * i, "allreduce between starts: element %d", i);
        }
    }
    for (int k = 0; k <= size; k++) T_MPI(MPI_Request_free(&rq[k]));
    T_MPI(MPI_Type_free(&strided));
    t_free(&own);
    free(tree_in);
    free(tree_out);
    free(rq);
    free(buf);
    free(wide);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long rounds = t_opt(argc, argv, "-r", 200);
    long starts = t_opt(argc, argv, "-n", 1000);
    size_t max = (size_t)t_opt(argc, argv, "-m", 1 << 20);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    t_barrier(&t_world); /* sets coll rdma's transport up */
    outstanding_rounds(t_world.comm, rank, size, rounds, max);
    derived_datatypes(t_world.comm, rank, size, rounds / 10 > 0 ? rounds / 10 : 2);
    persistent(t_world.comm, rank, size, starts);
    all_at_once(&t_world, starts / 4 > 0 ? starts / 4 : 1);
    return t_finish("nonblocking_bcast");
}
