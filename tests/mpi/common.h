/*
 * Shared helpers for the coll rdma MPI tests (header only).
 *
 * Every test program:
 *   - calls t_init() instead of MPI_Init() and returns t_finish() from main;
 *   - wraps every communicator in a tcomm_t: t_world for MPI_COMM_WORLD,
 *     t_derive() right after each call that creates communicators from a
 *     parent (dup, split, create, idup; called by every member of the parent,
 *     also those that got MPI_COMM_NULL), t_track_tagged() for
 *     the others (intercommunicators, merged ones, MPI_COMM_SELF), t_free()
 *     instead of MPI_Comm_free();
 *   - makes its blocking barriers with t_barrier(), which checks the barrier
 *     property and counts barriers per communicator.
 *
 * Barrier property check. A POSIX shared memory segment holds a hash table
 * with one entry per communicator instance. The key is built without any
 * communication from what all members know: the parent's entry, how many
 * communicator creations the parent has seen (every member of the parent
 * takes part in each, in the same order), and the lowest parent rank among
 * the new communicator's members (tells apart the communicators one split
 * makes). Entries are never reused. An entry holds, per group (intercommunicators
 * have two), a ring of 3 counters indexed by barrier epoch k mod 3:
 *   entering barrier k: counter[my group][k%3] += 1
 *   after leaving k:    counter[G][k%3] == |G|       (every member entered k)
 *                       counter[G][(k+1)%3] <= |G|-1 (intracommunicators)
 * where G is the own group (the remote group for an intercommunicator, as
 * MPI_Barrier on an intercommunicator only waits for the other group). The
 * member with the lowest world rank of each group zeroes counter[.][(k-1)%3]
 * after leaving barrier k: by then every reader of epoch k-1 is done, and the
 * counter is next used at epoch k+2, which needs this member to have entered
 * k+1. Three slots are enough for a correct barrier; a faulty one shows up as
 * a wrong count.
 *
 * All ranks must run on one host (they share the segment). Its name comes from
 * $CRTEST_SHM, else from the job's PMIx namespace; world rank 0 unlinks it in
 * t_finish().
 *
 * Output on stdout (line buffered), parsed by ci/mpi-tests.sh:
 *   expect: comm <cid> rank <world rank> comms <k> used <u> barriers <B>
 *       k intracommunicators of size > 1 had context id <cid> in this
 *       process, u of them made at least one barrier, together they made B
 *       blocking barriers.
 *   expect-unclaimed: comm <cid> rank <world rank> comms <k> kind <size1|inter>
 *       k communicators with this context id that coll rdma must not claim.
 *   expect-reduction: comm <cid> rank <world rank> kind <allreduce|reduce>
 *           calls <N> native <S> fallback <F> noncontig <a> above <b> both <c>
 *       MPI_Allreduce/MPI_Reduce calls on intracommunicators of size > 1
 *       with this context id: N in all, S that coll rdma must serve itself,
 *       F = a + b + c that it must hand to the module underneath (a: datatype
 *       not contiguous, b: message above coll_rdma_<kind>_max_bytes and
 *       neither reduced in parallel nor around the ring, with a commutative
 *       op, c: both). A message of at least
 *       coll_rdma_<kind>_parallel_min_bytes is reduced in parallel, whatever
 *       its length, unless the communicator's ranks cannot read each
 *       other's memory (decided per communicator, like single-copy bcast:
 *       see t_group_reads_peers); failing that, one of at least
 *       coll_rdma_<kind>_ring_min_bytes with a commutative op goes around
 *       the ring, up to coll_rdma_udp_ring_max_bytes where the communicator
 *       runs over udp (t_group_over_udp).
 *       Counted at call time by the wrappers below (profiling interface), so
 *       the existing programs' plain MPI_Allreduce/MPI_Reduce calls count
 *       too, and so do the reductions Open MPI makes on an intercommunicator's
 *       hidden local communicator (see t_count_hidden_reduce).
 *   info: reduction limits allreduce_max_bytes <v> reduce_max_bytes <v> (<source>)
 *       the limits the classification used (-1 = none), read with MPI_T.
 *   info: parallel reduction from allreduce <v> reduce <v> cross-memory <0|1>
 *       the parallel thresholds (-1 = never) and whether the classification
 *       took process_vm_readv between a node's ranks to be permitted (for
 *       communicators within one node).
 *   expect-bcast: comm <cid> rank <world rank> calls <N> native <S> fallback <F>
 *           above <b> zero <z>
 *       MPI_Bcast calls on intracommunicators of size > 1 with this context
 *       id: N in all, S that coll rdma must serve itself (z of them carry 0
 *       bytes although count > 0: an empty datatype), F = b that it must hand
 *       to the module underneath (more than the limit of the path that
 *       carries it: coll_rdma_bcast_single_copy_max_bytes for single copy,
 *       else coll_rdma_bcast_max_bytes; see t_count_bcast).
 *       Counted by the MPI_Bcast wrapper below, plus the broadcasts Open MPI
 *       makes itself on communicators the program created (see
 *       t_count_hidden_bcast).
 *   info: bcast parameters bcast_max_bytes <v> slot_size <v> window <v> (<source>)
 *       read with MPI_T (-1: not registered; max_bytes -1 also = no limit,
 *       -2 = the model's choice, which is no limit up to 64 MiB).
 *   info: bcast single copy <on|off> from <v> up to <v> (<why>)
 *       whether bcasts of at least coll_rdma_bcast_single_copy_min_bytes
 *       go in one copy here, and their limit (-1 = none).
 *   FAIL: rank <r>: <file>:<line>: <message>
 *   result: rank <r> failures <n> barriers <total>
 *   info: context ids from <source>
 * The context id is Open MPI's c_contextid (see T_HAVE_OMPI_CID below).
 */
#ifndef CRTEST_COMMON_H
#define CRTEST_COMMON_H

/* The context id that Open MPI (and coll rdma's messages) use is c_contextid.
 * MPI_Comm_c2f() is NOT always equal to it: the Fortran handle comes from a
 * separate table, and they drift apart once Open MPI creates communicators of
 * its own (MPI_Intercomm_create makes a temporary dup) or agrees on a context
 * id above the lowest free one. So read it from Open MPI's internal header
 * when it is installed (libopenmpi-dev has it; mpicc adds its directory). */
#if defined(__has_include)
#if __has_include("ompi_config.h") && __has_include("ompi/communicator/communicator.h")
#define T_HAVE_OMPI_CID 1
#include "ompi_config.h"
#include "ompi/communicator/communicator.h"
/* 5.x replaced the context id by a 128-bit one plus a per-process index;
 * coll rdma labels its log lines with the index there. */
#if OMPI_MAJOR_VERSION >= 5
#define T_OMPI_CID(c) ompi_comm_get_local_cid(c)
#define T_OMPI_CID_SOURCE "ompi_comm_get_local_cid()"
#else
#define T_OMPI_CID(c) ompi_comm_get_cid(c)
#define T_OMPI_CID_SOURCE "ompi_comm_get_cid()"
#endif
#endif
#endif
#include <mpi.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The persistent collectives: MPI 4's calls on Open MPI 5, the MPIX_ forms
 * of its 2018 draft (mpi-ext.h) on Open MPI 4.1. */
#if OMPI_MAJOR_VERSION >= 5
#define T_BARRIER_INIT MPI_Barrier_init
#define T_BCAST_INIT MPI_Bcast_init
#define T_ALLREDUCE_INIT MPI_Allreduce_init
#define T_REDUCE_INIT MPI_Reduce_init
#else
#include <mpi-ext.h>
#define T_BARRIER_INIT MPIX_Barrier_init
#define T_BCAST_INIT MPIX_Bcast_init
#define T_ALLREDUCE_INIT MPIX_Allreduce_init
#define T_REDUCE_INIT MPIX_Reduce_init
#endif

/* Everything here is static; not every program uses every helper. */
#define T_API static __attribute__((unused))

#define T_MAX_CID 4096        /* context ids tracked per process */
#define T_ENTRIES (1u << 15)  /* communicator instances per run */
#define T_RING 3
#define T_MAX_FAIL_LINES 20   /* FAIL lines printed per rank (all are counted) */

typedef struct {
    uint64_t key;                 /* 0 = free */
    uint64_t pad;
    uint64_t cnt[2][T_RING];
} t_entry_t;                      /* 64 bytes */

typedef struct {
    MPI_Comm comm;
    int cid;
    int size;          /* local group size */
    int rank;          /* rank in the local group */
    int rsize;         /* remote group size (intercommunicators) */
    int is_inter;
    int claimable;     /* intracommunicator of size > 1 */
    int grp;           /* my group's index in the entry */
    int resetter;      /* this process zeroes its group's old epochs */
    uint32_t entry;
    uint32_t creations;/* communicators created from this one so far */
    long nbar;         /* barriers made on this communicator */
    int local_cid;     /* intercommunicators: context id of Open MPI's hidden
                        * local communicator (c_local_comm), -1 if unknown */
    int here;          /* members of my group on this node (they share the table) */
    int rhere;         /* intercommunicators: remote members on this node */
    int spans_nodes;   /* some member (either group) runs on another node */
} tcomm_t;

T_API int t_wrank = 0, t_wsize = 1;
T_API long t_failures = 0;
T_API long t_total_barriers = 0;
T_API char t_shm_name[128];
T_API t_entry_t *t_table = NULL;
T_API size_t t_table_bytes = 0;
T_API long t_claim_comms[T_MAX_CID], t_claim_bar[T_MAX_CID];
T_API long t_claim_used[T_MAX_CID];
T_API long t_unclaim_comms[T_MAX_CID];
T_API char t_unclaim_kind[T_MAX_CID][8];
T_API tcomm_t t_world;
T_API int t_selftest_skip = 0; /* $CRTEST_SELFTEST_SKIP_BARRIER=1 */
/* Node of every world rank (index of its first rank's host), and how many
 * nodes the job spans. The table of barrier counters lives in each node's
 * shared memory, so it only sees the ranks of its own node; across nodes a
 * timing check takes over (see t_barrier_delay). */
T_API int *t_node_of = NULL;
T_API int t_nodes = 1;

T_API void t_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
T_API void t_fail_at(const char *file, int line, const char *fmt, ...)
{
    t_failures++;
    if (t_failures > T_MAX_FAIL_LINES) {
        if (t_failures == T_MAX_FAIL_LINES + 1)
            printf("FAIL: rank %d: further failures are counted, not printed\n", t_wrank);
        return;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("FAIL: rank %d: %s:%d: %s\n", t_wrank, file, line, msg);
    fflush(stdout);
}

#define T_FAIL(...) t_fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define T_CHECK(cond, ...) do { if (!(cond)) T_FAIL(__VA_ARGS__); } while (0)
#define T_MPI(call) do { int rc_ = (call); if (rc_ != MPI_SUCCESS) \
        T_FAIL("%s returned %d", #call, rc_); } while (0)

/* Deterministic per-rank pseudo random numbers (xorshift64). */
T_API uint64_t t_rng_state = 88172645463325252ull;
T_API void t_srand(uint64_t seed)
{
    t_rng_state = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
    if (!t_rng_state) t_rng_state = 1;
}
T_API uint32_t t_rand(void)
{
    uint64_t x = t_rng_state;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    t_rng_state = x;
    return (uint32_t)(x >> 16);
}

/* Open MPI's context id of a communicator. */
T_API int t_cid(MPI_Comm comm)
{
#ifdef T_HAVE_OMPI_CID
    return (int)T_OMPI_CID((ompi_communicator_t *)comm);
#else
    return (int)MPI_Comm_c2f(comm); /* often, not always, the same */
#endif
}

T_API uint64_t t_mix(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Rank `rank`'s contribution to element i of call `seq` (int64 sums with
 * room to spare): every rank computes every other's, so a result is
 * checked against a value computed here, not received. */
T_API int64_t t_contribution(int rank, long seq, int i)
{
    return (int64_t)(t_mix(((uint64_t)seq << 32) ^ ((uint64_t)rank << 20) ^ (uint64_t)i) >> 8);
}

T_API void t_fill_contributions(int64_t *buf, int count, int rank, long seq)
{
    for (int i = 0; i < count; i++) buf[i] = t_contribution(rank, seq, i);
}

/* Fails (once per call) unless got[0..count) is the sum over `size` ranks
 * of their contributions to call `seq`. */
T_API void t_check_contribution_sum(const int64_t *got, int count, int size, long seq, const char *what)
{
    for (int i = 0; i < count; i++) {
        int64_t want = 0;
        for (int r = 0; r < size; r++) want += t_contribution(r, seq, i);
        if (got[i] != want) {
            T_FAIL("%s (call %ld): element %d is %lld, want %lld", what, seq, i, (long long)got[i], (long long)want);
            return;
        }
    }
}

/* One affine map x -> m x + c (mod 2^64), for reductions with a user op:
 * composing maps is associative and not commutative, which shows any fold
 * out of rank order. */
typedef struct { uint64_t m, c; } t_affine_t;

/* An MPI user op over t_affine_t: inout = in, then inout (the lower
 * ranks' map is applied first). */
T_API void t_affine_compose(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    t_affine_t *a = in, *b = inout;
    for (int i = 0; i < *len; i++) {
        uint64_t m = a[i].m * b[i].m, c = b[i].m * a[i].c + b[i].c;
        b[i].m = m;
        b[i].c = c;
    }
}

/* Find or insert the entry of a key (lock free, linear probing). */
T_API uint32_t t_entry_for(uint64_t key)
{
    key |= 1ull << 63; /* never 0 */
    uint32_t i = (uint32_t)(t_mix(key) & (T_ENTRIES - 1));
    for (uint32_t n = 0; n < T_ENTRIES; n++, i = (i + 1) & (T_ENTRIES - 1)) {
        uint64_t cur = __atomic_load_n(&t_table[i].key, __ATOMIC_ACQUIRE);
        if (cur == key) return i;
        if (cur == 0) {
            uint64_t expected = 0;
            if (__atomic_compare_exchange_n(&t_table[i].key, &expected, key, 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return i;
            if (expected == key) return i;
        }
    }
    fprintf(stderr, "rank %d: test table full (%u communicators)\n", t_wrank, T_ENTRIES);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 0;
}

/* A word of this node's shared table that every rank asking with the same
 * key gets, zero until one of them writes it. It lets ranks of one node meet
 * without an MPI call, where the MPI call would change what is tested (a rank
 * whose absence is the point must not drive MPI's progress meanwhile). */
T_API uint64_t *t_node_word(uint64_t key)
{
    return &t_table[t_entry_for(t_mix(key ^ 0x6e6f64652d776f72ull))].cnt[0][0];
}

T_API void t_open_table(void)
{
    const char *env = getenv("CRTEST_SHM");
    const char *ns = getenv("PMIX_NAMESPACE");
    /* Namespace and parent pid repeat once pids wrap; a table left by a
     * killed job under the same pair would hand stale counts to this one.
     * The harness gives every run its own $CRTEST_RUN to rule that out. */
    const char *run = getenv("CRTEST_RUN");
    if (!run) run = "";
    if (env && *env)
        snprintf(t_shm_name, sizeof t_shm_name, "%s", env);
    else if (ns && *ns)
        snprintf(t_shm_name, sizeof t_shm_name, "/crtest.%s.%d.%s", ns, (int)getppid(), run);
    else
        snprintf(t_shm_name, sizeof t_shm_name, "/crtest.single.%d", (int)getpid());
    t_table_bytes = sizeof(t_entry_t) * T_ENTRIES;
    int fd = shm_open(t_shm_name, O_CREAT | O_RDWR, 0600);
    if (fd < 0) {
        fprintf(stderr, "rank %d: shm_open(%s): %s\n", t_wrank, t_shm_name, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* Every rank sets the same size: idempotent, new pages read as zero. */
    if (ftruncate(fd, (off_t)t_table_bytes) != 0) {
        fprintf(stderr, "rank %d: ftruncate(%s): %s\n", t_wrank, t_shm_name, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    void *p = mmap(NULL, t_table_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "rank %d: mmap(%s): %s\n", t_wrank, t_shm_name, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    close(fd);
    t_table = (t_entry_t *)p;
}

/* The ranks, in group `in`, of the *n members of group g (MPI_UNDEFINED
 * for one not in `in`); the caller frees the array. */
T_API int *t_ranks_in(MPI_Group g, MPI_Group in, int *n)
{
    MPI_Group_size(g, n);
    int *a = malloc(sizeof(int) * (size_t)*n), *b = malloc(sizeof(int) * (size_t)*n);
    for (int i = 0; i < *n; i++) a[i] = i;
    MPI_Group_translate_ranks(g, *n, a, in, b);
    free(a);
    return b;
}

/* The world ranks of the *n members of group g; the caller frees them. */
T_API int *t_world_ranks(MPI_Group g, int *n)
{
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int *b = t_ranks_in(g, world, n);
    MPI_Group_free(&world);
    return b;
}

/* Lowest rank, in group `in`, of the members of group g. */
T_API int t_lowest_in(MPI_Group g, MPI_Group in)
{
    int n;
    int *b = t_ranks_in(g, in, &n);
    int low = -1;
    for (int i = 0; i < n; i++)
        if (b[i] != MPI_UNDEFINED && (low < 0 || b[i] < low)) low = b[i];
    free(b);
    return low;
}

/* How many members of g run on this node, and the lowest world rank among
 * them (-1 if none); *spans is set when some member runs elsewhere. */
T_API int t_members_here(MPI_Group g, int *lowest, int *spans)
{
    int n;
    int *b = t_world_ranks(g, &n);
    int here = 0;
    *lowest = -1;
    for (int i = 0; i < n; i++) {
        if (b[i] == MPI_UNDEFINED) continue;
        if (t_node_of[b[i]] != t_node_of[t_wrank]) { *spans = 1; continue; }
        here++;
        if (*lowest < 0 || b[i] < *lowest) *lowest = b[i];
    }
    free(b);
    return here;
}

/* Which node each world rank runs on, from a hash of its host name. */
T_API void t_find_nodes(void)
{
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    uint64_t mine = 0xcbf29ce484222325ull;
    for (const char *c = host; *c; c++) mine = (mine ^ (uint8_t)*c) * 0x100000001b3ull;
    uint64_t *all = malloc(sizeof(uint64_t) * (size_t)t_wsize);
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
    t_node_of = malloc(sizeof(int) * (size_t)t_wsize);
    t_nodes = 0;
    for (int r = 0; r < t_wsize; r++) {
        int first = r;
        for (int q = 0; q < r; q++)
            if (all[q] == all[r]) { first = q; break; }
        t_node_of[r] = first;
        if (first == r) t_nodes++;
    }
    free(all);
    if (t_wrank == 0 && t_nodes > 1)
        printf("info: ranks span %d nodes: barrier counters are checked per node, "
               "and across nodes by timing barriers that one member enters late\n", t_nodes);
}

T_API int t_lowest_world(MPI_Group g)
{
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int low = t_lowest_in(g, world);
    MPI_Group_free(&world);
    return low;
}

T_API void t_fill(tcomm_t *t, MPI_Comm comm, uint64_t key)
{
    memset(t, 0, sizeof *t);
    t->comm = comm;
    if (comm == MPI_COMM_NULL) return;
    MPI_Comm_size(comm, &t->size);
    MPI_Comm_rank(comm, &t->rank);
    MPI_Comm_test_inter(comm, &t->is_inter);
    t->cid = t_cid(comm);
    if (t->cid < 0 || t->cid >= T_MAX_CID) {
        T_FAIL("context id %d beyond the test's table (%d)", t->cid, T_MAX_CID);
        t->cid = T_MAX_CID - 1;
    }
    t->claimable = !t->is_inter && t->size > 1;
    t->entry = t_entry_for(key);
    MPI_Group g;
    MPI_Comm_group(comm, &g);
    int low_local = t_lowest_world(g);
    int low_here;
    t->here = t_members_here(g, &low_here, &t->spans_nodes);
    MPI_Group_free(&g);
    t->resetter = (low_here == t_wrank);
    t->local_cid = -1;
    if (t->is_inter) {
#ifdef T_HAVE_OMPI_CID
        ompi_communicator_t *oc = (ompi_communicator_t *)comm;
        if (oc->c_local_comm) t->local_cid = (int)T_OMPI_CID(oc->c_local_comm);
#endif
        MPI_Comm_remote_size(comm, &t->rsize);
        MPI_Comm_remote_group(comm, &g);
        int low_remote = t_lowest_world(g);
        int unused;
        t->rhere = t_members_here(g, &unused, &t->spans_nodes);
        MPI_Group_free(&g);
        t->grp = low_local < low_remote ? 0 : 1;
    }
}

/* Call on every member of parent after each communicator creation on it. */
T_API void t_derive(tcomm_t *parent, MPI_Comm newcomm, tcomm_t *out)
{
    uint32_t seq = parent->creations++;
    if (newcomm == MPI_COMM_NULL) {
        memset(out, 0, sizeof *out);
        out->comm = MPI_COMM_NULL;
        return;
    }
    MPI_Group g, pg;
    MPI_Comm_group(newcomm, &g);
    MPI_Comm_group(parent->comm, &pg);
    int lowp = t_lowest_in(g, pg);
    MPI_Group_free(&g);
    MPI_Group_free(&pg);
    uint64_t key = ((uint64_t)parent->entry << 40) ^ ((uint64_t)seq << 16) ^ (uint64_t)lowp;
    t_fill(out, newcomm, key);
}

/* A communicator whose members do not all share a tracked parent
 * (intercommunicators, MPI_Intercomm_merge, MPI_COMM_SELF): keyed by `tag`,
 * which the program keeps unique, and the lowest world rank taking part. */
T_API void t_track_tagged(MPI_Comm comm, int tag, tcomm_t *out)
{
    if (comm == MPI_COMM_NULL) {
        memset(out, 0, sizeof *out);
        out->comm = MPI_COMM_NULL;
        return;
    }
    int inter;
    MPI_Group g;
    MPI_Comm_test_inter(comm, &inter);
    MPI_Comm_group(comm, &g);
    int low = t_lowest_world(g);
    MPI_Group_free(&g);
    if (inter) {
        MPI_Comm_remote_group(comm, &g);
        int b = t_lowest_world(g);
        MPI_Group_free(&g);
        if (b < low) low = b;
    }
    uint64_t key = (0x7ffffull << 40) ^ ((uint64_t)(uint32_t)tag << 16) ^ (uint64_t)low;
    t_fill(out, comm, key);
}

/* ------------------------------------------------------------------------
 * Reductions: which MPI_Allreduce/MPI_Reduce calls coll rdma must serve.
 *
 * Its contract: a call on a communicator it claimed (intracommunicator of
 * size > 1) is served natively unless it has count > 0 and either the
 * datatype is not contiguous (count elements are not one gap-free byte
 * range: type size != extent, or holes inside) or count * type size exceeds
 * coll_rdma_<kind>_max_bytes (-1 = no limit) and the op is commutative;
 * those go to the module underneath, except the ones the parallel
 * reduction takes (ranks that read each other's memory, from
 * coll_rdma_<kind>_parallel_min_bytes) or, failing that, the ring
 * (commutative ops from coll_rdma_<kind>_ring_min_bytes). A non-commutative op is served at every
 * length (the module underneath may not keep the rank order). Calls with count 0 are not counted: Open MPI 4.1's MPI_Allreduce
 * and MPI_Reduce return MPI_SUCCESS for them before any coll component is
 * called (seen with the component's counts), so coll rdma never sees them,
 * whatever it would do with them. The limits are read with MPI_T, so
 * whatever mpirun sets (or the component's default) is what is checked;
 * when coll rdma is not loaded the variables do not exist and the limit is
 * taken as -1 (nothing is checked then anyway).
 *
 * The wrappers below use the profiling interface: every MPI_Allreduce and
 * MPI_Reduce of a program that includes this header is counted here before
 * it goes to PMPI_*. Define T_NO_REDUCTION_WRAPPERS before including it to
 * opt out (then nothing is counted).
 */
enum { T_ALLREDUCE = 0, T_REDUCE = 1, T_NKINDS = 2 };
T_API const char *const t_kind_name[T_NKINDS] = {"allreduce", "reduce"};
T_API long t_red_calls[T_NKINDS][T_MAX_CID], t_red_native[T_NKINDS][T_MAX_CID];
T_API long t_red_noncontig[T_NKINDS][T_MAX_CID], t_red_above[T_NKINDS][T_MAX_CID];
T_API long t_red_both[T_NKINDS][T_MAX_CID];
T_API long long t_red_max_bytes[T_NKINDS] = {-1, -1};
T_API long long t_red_parallel_min[T_NKINDS] = {-1, -1};
T_API long long t_red_ring_min[T_NKINDS] = {-1, -1};
/* coll_rdma_udp_ring_max_bytes: over udp, longer calls leave the ring */
T_API long long t_udp_ring_max = -1;
/* coll_rdma_transport and coll_rdma_test_pretend_nodes, as read with MPI_T */
T_API char t_transport_name[64] = "auto";
T_API long long t_pretend_nodes = 0;
/* Whether a communicator within one node whose members do not pretend
 * otherwise reads peers' memory (see t_group_reads_peers). */
T_API int t_cross_memory = 0;
/* Per world rank: sets coll_rdma_test_pretend_no_cross_memory 1. */
T_API int *t_pretends_no_cross_memory = NULL;
T_API const char *t_red_limit_source = "not read";

/* count elements of dt as one gap-free byte range? */
T_API int t_dtype_contiguous(MPI_Datatype dt)
{
    int size = 0;
    MPI_Aint lb, extent, tlb, textent;
    MPI_Type_size(dt, &size);
    MPI_Type_get_extent(dt, &lb, &extent);
    MPI_Type_get_true_extent(dt, &tlb, &textent);
    return (MPI_Aint)size == extent && (MPI_Aint)size == textent;
}

/* Whether coll rdma reads peers' memory on a communicator of the members
 * of g (its local group for an intercommunicator's hidden local one):
 * like the component, which probes per communicator, that takes shared
 * memory (all members on one node, even in a job across nodes) and the
 * consent of every member. */
T_API int t_group_reads_peers(MPI_Group g)
{
    if (!t_cross_memory || !t_node_of || !t_pretends_no_cross_memory) return 0;
    int n;
    int *b = t_world_ranks(g, &n);
    int reads = 1;
    for (int i = 0; i < n && reads; i++)
        reads = b[i] != MPI_UNDEFINED && t_node_of[b[i]] == t_node_of[b[0]]
                && !t_pretends_no_cross_memory[b[i]];
    free(b);
    return reads;
}

/* test(the group of comm): its local group for an intercommunicator. */
T_API int t_comm_group_is(MPI_Comm comm, int (*test)(MPI_Group))
{
    MPI_Group g;
    MPI_Comm_group(comm, &g);
    int verdict = test(g);
    MPI_Group_free(&g);
    return verdict;
}

T_API int t_comm_reads_peers(MPI_Comm comm)
{
    return t_comm_group_is(comm, t_group_reads_peers);
}

/* Whether this machine has a verbs device (auto then joins nodes with
 * verbs rather than udp); looked up once. Assumes that a device, where
 * there is one, works on every node, as on the test beds. */
T_API int t_has_verbs_device(void)
{
    static int found = -1;
    if (found >= 0) return found;
    found = 0;
    DIR *dir = opendir("/sys/class/infiniband");
    if (!dir) return found;
    struct dirent *entry;
    while (!found && (entry = readdir(dir)) != NULL) found = entry->d_name[0] != '.';
    closedir(dir);
    return found;
}

/* Whether coll rdma runs a communicator of the members of g over udp, as
 * the component chooses: udp forced, or auto across real nodes without a
 * verbs device and without pretended nodes (those make auto build the
 * verbs hybrid). */
T_API int t_group_over_udp(MPI_Group g)
{
    if (strcasecmp(t_transport_name, "udp") == 0) return 1;
    /* any other name is auto to the component (with a warning) */
    if (strcasecmp(t_transport_name, "shm") == 0 || strcasecmp(t_transport_name, "verbs") == 0) return 0;
    if (t_pretend_nodes > 1 || !t_node_of) return 0;
    int n, spans = 0;
    int *b = t_world_ranks(g, &n);
    for (int i = 1; i < n && !spans; i++)
        spans = b[i] != MPI_UNDEFINED && b[0] != MPI_UNDEFINED && t_node_of[b[i]] != t_node_of[b[0]];
    free(b);
    return spans && !t_has_verbs_device();
}

T_API int t_comm_over_udp(MPI_Comm comm)
{
    return t_comm_group_is(comm, t_group_over_udp);
}

/* Classify and count one reduction on an intracommunicator (id cid, size
 * members). Size-1 communicators are not claimed by coll rdma: not counted. */
T_API int t_count_reduction(int kind, int cid, int size, int count, MPI_Datatype dt, int commute,
                            int reads_peers, int over_udp)
{
    if (size < 2 || cid < 0 || cid >= T_MAX_CID || count == 0) return 0;
    int tsize = 0;
    MPI_Type_size(dt, &tsize);
    long long bytes = (long long)count * tsize;
    int noncontig = !t_dtype_contiguous(dt);
    int parallel = reads_peers && t_red_parallel_min[kind] >= 0 && bytes >= t_red_parallel_min[kind];
    int ring = !parallel && commute && t_red_ring_min[kind] >= 0 && bytes >= t_red_ring_min[kind]
               && !(over_udp && t_udp_ring_max >= 0 && bytes > t_udp_ring_max);
    int above = commute && t_red_max_bytes[kind] >= 0 && bytes > t_red_max_bytes[kind] && !parallel && !ring;
    t_red_calls[kind][cid]++;
    if (noncontig && above) t_red_both[kind][cid]++;
    else if (noncontig) t_red_noncontig[kind][cid]++;
    else if (above) t_red_above[kind][cid]++;
    else t_red_native[kind][cid]++;
    return noncontig || above ? 2 : 1; /* 2: handed to the module underneath */
}

/* Open MPI runs collectives on an intercommunicator with coll inter, which
 * reduces within each group on the hidden local communicator c_local_comm
 * (an intracommunicator that coll rdma claims when its size is > 1): one
 * MPI_Reduce of the same count and datatype per MPI_Allreduce, and per
 * MPI_Barrier (coll basic's intercommunicator barrier is an allreduce of
 * one MPI_INT). Seen with gdb on 4.1.4 (coll_inter_allreduce_inter). */
T_API void t_count_hidden_bcast(int local_cid, int local_size, int count, MPI_Datatype dt, int reads_peers);
T_API void t_count_hidden_reduce(int local_cid, int local_size, int count, MPI_Datatype dt, int commute,
                                 int reads_peers, int over_udp)
{
    if (local_cid >= 0) t_count_reduction(T_REDUCE, local_cid, local_size, count, dt, commute, reads_peers, over_udp);
    /* ... then the result goes back to the group: a bcast from local rank 0
     * of the same count and datatype on the same hidden communicator (the
     * component's counts show it: one bcast per intercommunicator barrier
     * and allreduce). */
    t_count_hidden_bcast(local_cid, local_size, count, dt, reads_peers);
}

/* The module underneath can come back to coll rdma: for an MPI_Allreduce
 * that coll rdma hands over, tuned (Open MPI 4.1.4, fixed decision rules)
 * picks its "nonoverlapping" algorithm when the op is not commutative (so
 * only with a non-contiguous datatype: coll rdma serves the other
 * non-commutative calls at every length), the
 * communicator has 8 to 15 ranks and the message at least 1 MiB, and that
 * algorithm is an MPI_Reduce to rank 0 and an MPI_Bcast from rank 0 made
 * through the communicator's own collectives, i.e. coll rdma's (seen with
 * the component's counts at 8 ranks). They are counted here like the
 * program's own calls. (For fewer ranks or commutative ops tuned's choices
 * use point-to-point messages only.) */
T_API void t_count_bcast(int cid, int size, int count, long long bytes, int reads_peers);
T_API void t_count_nested(int cid, int size, int count, MPI_Datatype dt, MPI_Op op, int reads_peers, int over_udp)
{
    int commute = 1, tsize = 0;
    MPI_Op_commutative(op, &commute);
    MPI_Type_size(dt, &tsize);
    long long bytes = (long long)count * tsize;
    if (commute || size < 8 || size >= 16 || bytes < 1048576) return;
    t_count_reduction(T_REDUCE, cid, size, count, dt, commute, reads_peers, over_udp);
    t_count_bcast(cid, size, count, bytes, reads_peers);
}

T_API void t_note_reduction(int kind, MPI_Comm comm, int count, MPI_Datatype dt, MPI_Op op)
{
    if (comm == MPI_COMM_NULL) return;
    int inter = 0, size = 0, commute = 1;
    MPI_Op_commutative(op, &commute);
    MPI_Comm_test_inter(comm, &inter);
    MPI_Comm_size(comm, &size);
    if (inter) {
#ifdef T_HAVE_OMPI_CID
        /* MPI_Reduce on an intercommunicator is not used by the tests. */
        ompi_communicator_t *oc = (ompi_communicator_t *)comm;
        if (kind == T_ALLREDUCE && oc->c_local_comm)
            t_count_hidden_reduce((int)T_OMPI_CID(oc->c_local_comm), size, count, dt, commute,
                                  t_comm_reads_peers(comm), t_comm_over_udp(comm));
#endif
        return;
    }
    int cid = t_cid(comm), reads_peers = t_comm_reads_peers(comm), over_udp = t_comm_over_udp(comm);
    if (t_count_reduction(kind, cid, size, count, dt, commute, reads_peers, over_udp) == 2 && kind == T_ALLREDUCE)
        t_count_nested(cid, size, count, dt, op, reads_peers, over_udp);
}

#ifndef T_NO_REDUCTION_WRAPPERS
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm)
{
    t_note_reduction(T_ALLREDUCE, comm, count, datatype, op);
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
               MPI_Op op, int root, MPI_Comm comm)
{
    t_note_reduction(T_REDUCE, comm, count, datatype, op);
    return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}
#endif

/* ------------------------------------------------------------------------
 * Bcast: which MPI_Bcast calls coll rdma must serve.
 *
 * Its contract: every decision rests on the message's byte count (count x
 * type size, the same on every rank whatever datatypes the ranks use), so
 * a call on a communicator it claimed is served natively unless it carries
 * more than the limit of its path: where single copy serves it (see
 * t_bc_single_copy), coll_rdma_bcast_single_copy_max_bytes, else
 * coll_rdma_bcast_max_bytes (-1 = no limit; -2, the default, lets a model
 * choose per transport, never below 64 MiB: these programs broadcast at
 * most 64 MiB, so for them -2 is no limit); non-contiguous
 * datatypes are packed and served natively too, up to 2^31 - 1 bytes (above
 * that a non-contiguous datatype on any rank makes every rank hand over,
 * which one rank cannot classify: bcast_huge.c checks it without this). Calls with count 0 are not
 * counted: Open MPI 4.1's MPI_Bcast returns before any coll component for
 * them (seen with the component's counts). A count > 0 of an empty datatype
 * (0 bytes) does reach the component, which serves it (nothing to move):
 * counted as native ("zero").
 *
 * Broadcasts Open MPI makes itself, on communicators coll rdma claims, are
 * counted too (measured with the component's counts on 4.1.4; see
 * t_count_hidden_bcast): MPI_Intercomm_create makes three on local_comm
 * (one int, one int, the remote processes' names: about 49 bytes per remote
 * process), MPI_Intercomm_merge one (one int) on the intercommunicator's
 * hidden local communicator, and every barrier, allreduce and bcast on an
 * intercommunicator one on it (coll inter). The size of the name list is an
 * estimate: exact for the limits the tests use (0, -1, and >= 1024).
 *
 * Define T_NO_BCAST_WRAPPERS before including this file to opt out of the
 * MPI_Bcast, MPI_Intercomm_create and MPI_Intercomm_merge wrappers.
 */
T_API long t_bc_calls[T_MAX_CID], t_bc_native[T_MAX_CID], t_bc_above[T_MAX_CID];
T_API long t_bc_zero[T_MAX_CID];
T_API long long t_bc_max_bytes = -1;     /* -1: no limit (or not registered); -2: modelled */
T_API long long t_bc_slot_size = -1;     /* -1: not registered */
T_API long long t_bc_window = -1;        /* -1: not registered */
T_API const char *t_bc_param_source = "not read";
/* Single copy: bcasts of at least t_bc_sc_min bytes (-1: never; -2, the
 * default: by placement, see t_bc_single_copy_from) go in one copy where
 * t_bc_single_copy says coll rdma's shared memory reads peers' memory, up
 * to t_bc_sc_max bytes (-1: no limit). */
T_API long long t_bc_sc_min = -1, t_bc_sc_max = -1;
T_API int t_bc_single_copy = 0;   /* on communicators that read peers' memory */
T_API const char *t_bc_single_copy_why = "not read";

/* The shortest single-copy bcast on a communicator of `size` members: the
 * setting, or for -2 the component's rule by placement: 524288 where the
 * launcher put every rank of the job on this node and they outnumber its
 * online cores (and the communicator is no larger than the job), else
 * 8192. */
T_API long long t_bc_single_copy_from(int size)
{
    if (t_bc_sc_min != -2) return t_bc_sc_min;
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE"), *world = getenv("OMPI_COMM_WORLD_SIZE");
    long ranks = local ? atol(local) : 0, cores = sysconf(_SC_NPROCESSORS_ONLN);
    int one_node = ranks >= 1 && world && ranks == atol(world);
    return one_node && ranks > (cores > 0 ? cores : 1) && size <= ranks ? 524288 : 8192;
}

/* Classify and count one bcast of `bytes` bytes (count elements) on an
 * intracommunicator with context id cid and `size` members. */
T_API void t_count_bcast(int cid, int size, int count, long long bytes, int reads_peers)
{
    if (size < 2 || cid < 0 || cid >= T_MAX_CID || count == 0) return;
    t_bc_calls[cid]++;
    long long single_from = t_bc_single_copy_from(size);
    int single = t_bc_single_copy && reads_peers && single_from >= 0 && bytes >= single_from;
    long long limit = single ? t_bc_sc_max : t_bc_max_bytes;
    if (limit >= 0 && bytes > limit) {
        t_bc_above[cid]++;
    } else {
        t_bc_native[cid]++;
        if (bytes == 0) t_bc_zero[cid]++;
    }
}

/* A bcast Open MPI makes itself on an intracommunicator it holds (the
 * hidden local communicator of an intercommunicator, local_cid < 0 if
 * unknown). */
T_API void t_count_hidden_bcast(int local_cid, int local_size, int count, MPI_Datatype dt, int reads_peers)
{
    if (local_cid < 0) return;
    int tsize = 0;
    MPI_Type_size(dt, &tsize);
    t_count_bcast(local_cid, local_size, count, (long long)count * tsize, reads_peers);
}

T_API void t_note_bcast(MPI_Comm comm, int count, MPI_Datatype dt, int root)
{
    if (comm == MPI_COMM_NULL) return;
    int inter = 0, size = 0, tsize = 0;
    MPI_Comm_test_inter(comm, &inter);
    MPI_Comm_size(comm, &size);
    MPI_Type_size(dt, &tsize);
    if (inter) {
        /* coll inter: the root sends to rank 0 of the other group, which
         * broadcasts on its hidden local communicator (from local rank 0);
         * the root's group (MPI_ROOT, MPI_PROC_NULL) makes no local bcast. */
#ifdef T_HAVE_OMPI_CID
        ompi_communicator_t *oc = (ompi_communicator_t *)comm;
        if (root >= 0 && count > 0 && oc->c_local_comm)
            t_count_hidden_bcast((int)T_OMPI_CID(oc->c_local_comm), size, count, dt,
                                 t_comm_reads_peers(comm));
#else
        (void)root;
#endif
        return;
    }
    t_count_bcast(t_cid(comm), size, count, (long long)count * tsize, t_comm_reads_peers(comm));
}

#ifndef T_NO_BCAST_WRAPPERS
int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    t_note_bcast(comm, count, datatype, root);
    return PMPI_Bcast(buffer, count, datatype, root, comm);
}

int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm,
                         int remote_leader, int tag, MPI_Comm *newintercomm)
{
    int rc = PMPI_Intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag,
                                   newintercomm);
    if (rc == MPI_SUCCESS && local_comm != MPI_COMM_NULL) {
        int lsize = 0, rsize = 0;
        MPI_Comm_size(local_comm, &lsize);
        MPI_Comm_remote_size(*newintercomm, &rsize);
        int cid = t_cid(local_comm), reads_peers = t_comm_reads_peers(local_comm);
        /* remote size, length of the name list, the name list */
        t_count_bcast(cid, lsize, 1, (long long)sizeof(int), reads_peers);
        t_count_bcast(cid, lsize, 1, (long long)sizeof(int), reads_peers);
        t_count_bcast(cid, lsize, 1, 49LL * rsize, reads_peers);
    }
    return rc;
}

int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm)
{
    int local_cid = -1, lsize = 0, reads_peers = 0;
#ifdef T_HAVE_OMPI_CID
    ompi_communicator_t *oc = (ompi_communicator_t *)intercomm;
    if (intercomm != MPI_COMM_NULL && oc->c_local_comm)
        local_cid = (int)T_OMPI_CID(oc->c_local_comm);
#endif
    if (intercomm != MPI_COMM_NULL) {
        MPI_Comm_size(intercomm, &lsize);
        reads_peers = t_comm_reads_peers(intercomm);
    }
    int rc = PMPI_Intercomm_merge(intercomm, high, newintracomm);
    /* which group goes first: one int from local rank 0 */
    if (rc == MPI_SUCCESS) t_count_hidden_bcast(local_cid, lsize, 1, MPI_INT, reads_peers);
    return rc;
}
#endif

/* A handle on the MPI_T control variable `name`, its datatype and its
 * count; 0 if it does not exist. */
T_API int t_cvar_open(const char *name, MPI_T_cvar_handle *h, MPI_Datatype *dt, int *count)
{
    int idx, verbosity, bind, scope;
    char vname[256];
    int vname_len = (int)sizeof vname, desc_len = 0;
    MPI_T_enum en;
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS) return 0;
    if (MPI_T_cvar_get_info(idx, vname, &vname_len, &verbosity, dt, &en, NULL, &desc_len,
                            &bind, &scope) != MPI_SUCCESS)
        return 0;
    return MPI_T_cvar_handle_alloc(idx, NULL, h, count) == MPI_SUCCESS;
}

/* Value of an integer MPI_T control variable; *found = 0 if it does not exist. */
T_API long long t_read_cvar(const char *name, int *found)
{
    *found = 0;
    int count;
    MPI_Datatype dt;
    MPI_T_cvar_handle h;
    if (!t_cvar_open(name, &h, &dt, &count)) return -1;
    union { int i; unsigned u; long l; unsigned long ul; long long ll;
            unsigned long long ull; char pad[64]; } v;
    memset(&v, 0, sizeof v);
    int rc = MPI_T_cvar_read(h, &v);
    MPI_T_cvar_handle_free(&h);
    if (rc != MPI_SUCCESS) return -1;
    long long out;
    if (dt == MPI_INT) out = v.i;
    else if (dt == MPI_UNSIGNED) out = v.u;
    else if (dt == MPI_LONG) out = v.l;
    else if (dt == MPI_UNSIGNED_LONG) out = (long long)v.ul;
    else if (dt == MPI_LONG_LONG) out = v.ll;
    else if (dt == MPI_UNSIGNED_LONG_LONG) out = (long long)v.ull;
    else {
        fprintf(stderr, "rank %d: MPI_T variable %s has a type the tests do not read\n",
                t_wrank, name);
        return -1;
    }
    *found = 1;
    return out;
}

/* Whether coll rdma was opened in this job (its MPI_T variables are
 * registered): false under --stock or --mca coll ^rdma. Programs use it to
 * leave out what only coll rdma accepts. */
T_API int t_coll_rdma_registered = 0;

T_API void t_read_reduction_limits(void)
{
    int provided, fa = 0, fr = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        t_red_limit_source = "MPI_T unavailable";
        return;
    }
    t_red_max_bytes[T_ALLREDUCE] = t_read_cvar("coll_rdma_allreduce_max_bytes", &fa);
    t_red_max_bytes[T_REDUCE] = t_read_cvar("coll_rdma_reduce_max_bytes", &fr);
    int fpa = 0, fpr = 0;
    t_red_parallel_min[T_ALLREDUCE] = t_read_cvar("coll_rdma_allreduce_parallel_min_bytes", &fpa);
    t_red_parallel_min[T_REDUCE] = t_read_cvar("coll_rdma_reduce_parallel_min_bytes", &fpr);
    int fra = 0, frr = 0, fudp = 0;
    t_red_ring_min[T_ALLREDUCE] = t_read_cvar("coll_rdma_allreduce_ring_min_bytes", &fra);
    t_red_ring_min[T_REDUCE] = t_read_cvar("coll_rdma_reduce_ring_min_bytes", &frr);
    t_udp_ring_max = t_read_cvar("coll_rdma_udp_ring_max_bytes", &fudp);
    MPI_T_finalize();
    t_coll_rdma_registered = fa || fr;
    if (!fudp) t_udp_ring_max = -1;
    if (!fra) t_red_ring_min[T_ALLREDUCE] = -1;
    if (!frr) t_red_ring_min[T_REDUCE] = -1;
    if (!fpa) t_red_parallel_min[T_ALLREDUCE] = -1;
    if (!fpr) t_red_parallel_min[T_REDUCE] = -1;
    /* t_cross_memory, which the parallel reductions need too, is decided
     * with the bcast parameters (t_read_bcast_params), by the same probe */
    if (fa && fr) t_red_limit_source = "from MPI_T";
    else if (!fa && !fr) t_red_limit_source = "coll_rdma_*_max_bytes not registered";
    else t_red_limit_source = fa ? "coll_rdma_reduce_max_bytes not registered"
                                 : "coll_rdma_allreduce_max_bytes not registered";
    if (!fa) t_red_max_bytes[T_ALLREDUCE] = -1;
    if (!fr) t_red_max_bytes[T_REDUCE] = -1;
}

/* A text MPI_T control variable into buf ("" when not registered). */
T_API void t_read_cvar_text(const char *name, char *buf, int len)
{
    int count;
    MPI_Datatype dt;
    MPI_T_cvar_handle h;
    buf[0] = 0;
    if (!t_cvar_open(name, &h, &dt, &count)) return;
    if (dt != MPI_CHAR) {
        MPI_T_cvar_handle_free(&h);
        return;
    }
    /* count is the variable's buffer size (2048 in Open MPI 4.1), not the
     * value's length */
    char *value = calloc((size_t)count + 1, 1);
    if (value && MPI_T_cvar_read(h, value) == MPI_SUCCESS)
        snprintf(buf, (size_t)len, "%s", value);
    free(value);
    MPI_T_cvar_handle_free(&h);
}

/* Whether this rank may read the memory of the next rank on its node with
 * process_vm_readv (refused e.g. under a Yama ptrace_scope of 1 or more;
 * a rank on another node has a pid of no meaning here), decided like coll
 * rdma's own probe: every rank must be able to, so all ranks learn every
 * verdict. Uses MPI_Allgather only, which the checks do not count. */
T_API int t_cross_memory_permitted(void)
{
    static volatile uint64_t canary = 0x5ca1ab1e0ddba11ull;
    uint64_t mine[2] = {(uint64_t)getpid(), (uint64_t)(uintptr_t)&canary};
    uint64_t *all = malloc(sizeof(uint64_t) * 2 * (size_t)t_wsize);
    MPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, MPI_COMM_WORLD);
    int next = (t_wrank + 1) % t_wsize, ok = 1;
    while (next != t_wrank && t_node_of[next] != t_node_of[t_wrank]) next = (next + 1) % t_wsize;
    if (next != t_wrank) {
        uint64_t seen = 0;
        struct iovec local = {&seen, sizeof seen};
        struct iovec remote = {(void *)(uintptr_t)all[2 * next + 1], sizeof seen};
        long got = syscall(SYS_process_vm_readv, (pid_t)all[2 * next], &local, 1UL, &remote, 1UL, 0UL);
        ok = got == (long)sizeof seen && seen == canary;
    }
    int *verdicts = malloc(sizeof(int) * (size_t)t_wsize);
    MPI_Allgather(&ok, 1, MPI_INT, verdicts, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < t_wsize; r++) ok = ok && verdicts[r];
    free(verdicts);
    free(all);
    return ok;
}

T_API void t_read_bcast_params(void)
{
    int provided, fm = 0, fs = 0, fw = 0, fmin = 0, fmax = 0, fpretend = 0, fnodes = 0;
    char transport[64];
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        t_bc_param_source = "MPI_T unavailable";
        return;
    }
    t_bc_max_bytes = t_read_cvar("coll_rdma_bcast_max_bytes", &fm);
    t_bc_slot_size = t_read_cvar("coll_rdma_bcast_slot_size", &fs);
    t_bc_window = t_read_cvar("coll_rdma_bcast_window", &fw);
    t_bc_sc_min = t_read_cvar("coll_rdma_bcast_single_copy_min_bytes", &fmin);
    t_bc_sc_max = t_read_cvar("coll_rdma_bcast_single_copy_max_bytes", &fmax);
    long long pretend_refused = t_read_cvar("coll_rdma_test_pretend_no_cross_memory", &fpretend);
    long long pretend_nodes = t_read_cvar("coll_rdma_test_pretend_nodes", &fnodes);
    t_read_cvar_text("coll_rdma_transport", transport, (int)sizeof transport);
    MPI_T_finalize();
    if (transport[0]) snprintf(t_transport_name, sizeof t_transport_name, "%s", transport);
    t_pretend_nodes = fnodes ? pretend_nodes : 0;
    t_bc_param_source = fm ? "from MPI_T" : "coll_rdma_bcast_max_bytes not registered";
    if (!fm) t_bc_max_bytes = -1;
    if (!fs) t_bc_slot_size = -1;
    if (!fw) t_bc_window = -1;
    if (!fmin) t_bc_sc_min = -1;
    if (!fmax) t_bc_sc_max = -1;
    /* Single copy, and parallel reduction, need the shared-memory transport
     * (transport shm, or auto without pretended nodes), process_vm_readv
     * permitted, and per communicator: all members on one node (so a node's
     * communicators have it inside a job across nodes too) and the consent
     * of every member (the pretend setting is per rank: a member that sets
     * it refuses for its communicators); see t_group_reads_peers. */
    int pretends = fpretend && pretend_refused == 1, anyone_pretends = 0;
    t_pretends_no_cross_memory = malloc(sizeof(int) * (size_t)t_wsize);
    MPI_Allgather(&pretends, 1, MPI_INT, t_pretends_no_cross_memory, 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < t_wsize; r++) anyone_pretends |= t_pretends_no_cross_memory[r];
    int permitted = t_cross_memory_permitted();
    /* pretended nodes make auto build the hybrid (no peer reads); with shm
     * they only shape coll rdma's two-level schedules, over shared memory */
    int hybrid_pretended = fnodes && pretend_nodes > 1 && strcasecmp(transport, "shm") != 0;
    if (!fmin || t_bc_sc_min == -1) t_bc_single_copy_why = "coll_rdma_bcast_single_copy_min_bytes is -1 or not registered";
    else if (hybrid_pretended) t_bc_single_copy_why = "coll_rdma_test_pretend_nodes";
    else if (strcasecmp(transport, "verbs") == 0) t_bc_single_copy_why = "coll_rdma_transport verbs";
    else if (strcasecmp(transport, "udp") == 0) t_bc_single_copy_why = "coll_rdma_transport udp";
    else if (!permitted) t_bc_single_copy_why = "process_vm_readv refused";
    else if (anyone_pretends) t_bc_single_copy_why = "shared memory, process_vm_readv permitted, "
                                                     "but not with a rank that sets coll_rdma_test_pretend_no_cross_memory";
    else if (t_nodes > 1) t_bc_single_copy_why = "on communicators within one node";
    else t_bc_single_copy_why = "shared memory, process_vm_readv permitted";
    /* (verbs and udp serve node-local ranks too, and read no peer's memory) */
    t_cross_memory = !hybrid_pretended && strcasecmp(transport, "verbs") != 0
                     && strcasecmp(transport, "udp") != 0 && permitted;
    t_bc_single_copy = fmin && t_bc_sc_min != -1 && t_cross_memory;
}

/* Across nodes: every T_LATE_EVERY-th barrier of an intracommunicator
 * that spans nodes, one member (a different one each time) sleeps
 * T_LATE_US before entering. Every other member must leave after the late
 * one entered. The nodes share no clock, so before that barrier each
 * member asks the late one for the time on its clock (a point-to-point
 * round trip, tag T_CLOCK_TAG, answered before the late one sleeps), which
 * places the member's clock on the late one's to within half the round
 * trip; after the barrier the late one sends its entry time. Only a member
 * that left before the late one entered, whatever the offset within that
 * bound, fails: a member descheduled on a loaded machine widens the bound
 * but cannot fail the check, and a barrier that releases early is still
 * caught (by about T_LATE_US). */
#define T_LATE_EVERY 25
#define T_LATE_US 300000
#define T_CLOCK_TAG 23325
/* Clock drift between the round trip and the barrier it judges */
#define T_CLOCK_SLACK_US 5000.0

/* Where a member's clock stands against the late member's. */
typedef struct {
    double offset;    /* late member's clock minus mine, seconds */
    double bound_us;  /* uncertainty of offset, microseconds */
} t_clock_t;

/* Before a timed barrier: the late member answers each other member's
 * clock request; the others learn their offset from it. */
T_API t_clock_t t_clock_to_late(tcomm_t *t, int late_member)
{
    t_clock_t clock = { 0, 0 };
    if (t->rank == late_member) {
        for (int i = 0; i < t->size - 1; i++) {
            MPI_Status st;
            char ping;
            T_MPI(MPI_Recv(&ping, 1, MPI_CHAR, MPI_ANY_SOURCE, T_CLOCK_TAG, t->comm, &st));
            double now = MPI_Wtime();
            T_MPI(MPI_Send(&now, 1, MPI_DOUBLE, st.MPI_SOURCE, T_CLOCK_TAG, t->comm));
        }
        return clock;
    }
    char ping = 0;
    double theirs;
    double asked = MPI_Wtime();
    T_MPI(MPI_Send(&ping, 1, MPI_CHAR, late_member, T_CLOCK_TAG, t->comm));
    T_MPI(MPI_Recv(&theirs, 1, MPI_DOUBLE, late_member, T_CLOCK_TAG, t->comm, MPI_STATUS_IGNORE));
    double answered = MPI_Wtime();
    clock.offset = theirs - (asked + answered) / 2;
    clock.bound_us = (answered - asked) / 2 * 1e6 + T_CLOCK_SLACK_US;
    return clock;
}

/* After a timed barrier: the late member tells the others when it
 * entered; they fail if they certainly left before that. */
T_API void t_check_late_entry(tcomm_t *t, int late_member, t_clock_t clock, double entered, double left, uint64_t k)
{
    if (t->rank == late_member) {
        for (int r = 0; r < t->size; r++)
            if (r != late_member) T_MPI(MPI_Send(&entered, 1, MPI_DOUBLE, r, T_CLOCK_TAG, t->comm));
        return;
    }
    double late_entered;
    T_MPI(MPI_Recv(&late_entered, 1, MPI_DOUBLE, late_member, T_CLOCK_TAG, t->comm, MPI_STATUS_IGNORE));
    double early_us = (late_entered - (left + clock.offset)) * 1e6; /* > 0: left before the late entry */
    if (early_us > clock.bound_us)
        T_FAIL("barrier %llu on comm %d (size %d, several nodes): rank %d left %.0f us before rank %d "
               "entered (clock bound %.0f us; inside the barrier %.0f us; a rank left before all entered)",
               (unsigned long long)k, t->cid, t->size, t->rank, early_us, late_member, clock.bound_us,
               (left - entered) * 1e6);
}

/* Barrier with the property check; sleeps delay_us first when > 0. */
T_API void t_barrier_delay(tcomm_t *t, unsigned delay_us)
{
    if (t->comm == MPI_COMM_NULL) return;
    uint64_t k = (uint64_t)t->nbar;
    t_entry_t *e = &t_table[t->entry];
    uint64_t *mine = e->cnt[t->grp];
    int timed = t->spans_nodes && !t->is_inter && k % T_LATE_EVERY == T_LATE_EVERY - 1;
    int late_member = (int)((k / T_LATE_EVERY) % (uint64_t)(t->size > 0 ? t->size : 1));
    t_clock_t clock = { 0, 0 };
    if (timed) clock = t_clock_to_late(t, late_member);
    if (timed && t->rank == late_member) usleep(T_LATE_US);
    else if (delay_us && !timed) usleep(delay_us);
    __atomic_fetch_add(&mine[k % T_RING], 1, __ATOMIC_SEQ_CST);
    double entered = MPI_Wtime();
    /* Checker self-test: skip every 50th barrier to prove the check bites. */
    int rc = (t_selftest_skip && k % 50 == 49) ? MPI_SUCCESS : MPI_Barrier(t->comm);
    double left = MPI_Wtime();
    if (timed) t_check_late_entry(t, late_member, clock, entered, left, k);
    t->nbar++;
    t_total_barriers++;
    if (rc != MPI_SUCCESS) T_FAIL("MPI_Barrier returned %d (comm %d)", rc, t->cid);
    if (t->is_inter && rc == MPI_SUCCESS && !(t_selftest_skip && k % 50 == 49))
        t_count_hidden_reduce(t->local_cid, t->size, 1, MPI_INT, 1, t_comm_reads_peers(t->comm), t_comm_over_udp(t->comm));
    if (t->is_inter) {
        uint64_t *theirs = e->cnt[1 - t->grp];
        uint64_t seen = __atomic_load_n(&theirs[k % T_RING], __ATOMIC_SEQ_CST);
        if (seen != (uint64_t)t->rhere)
            T_FAIL("intercomm barrier %llu on comm %d: %llu of the %d remote ranks on this node "
                   "(of %d) had entered when this rank left", (unsigned long long)k, t->cid,
                   (unsigned long long)seen, t->rhere, t->rsize);
    } else {
        uint64_t seen = __atomic_load_n(&mine[k % T_RING], __ATOMIC_SEQ_CST);
        uint64_t next = __atomic_load_n(&mine[(k + 1) % T_RING], __ATOMIC_SEQ_CST);
        if (seen != (uint64_t)t->here)
            T_FAIL("barrier %llu on comm %d (size %d, %d on this node): %llu rank(s) had entered when "
                   "rank %d left (a rank left before all entered)", (unsigned long long)k,
                   t->cid, t->size, t->here, (unsigned long long)seen, t->rank);
        if (next > (uint64_t)t->here - 1)
            T_FAIL("barrier %llu on comm %d (size %d): %llu rank(s) already in the "
                   "next barrier when rank %d left this one", (unsigned long long)k,
                   t->cid, t->size, (unsigned long long)next, t->rank);
    }
    if (t->resetter && k >= 1)
        __atomic_store_n(&mine[(k - 1) % T_RING], 0, __ATOMIC_SEQ_CST);
}

T_API void t_barrier(tcomm_t *t) { t_barrier_delay(t, 0); }

/* Record a communicator's counts (t_free and t_finish do it). */
T_API void t_record(tcomm_t *t)
{
    if (t->comm == MPI_COMM_NULL) return;
    if (t->claimable) {
        t_claim_comms[t->cid]++;
        t_claim_bar[t->cid] += t->nbar;
        if (t->nbar > 0) t_claim_used[t->cid]++;
    } else {
        t_unclaim_comms[t->cid]++;
        snprintf(t_unclaim_kind[t->cid], sizeof t_unclaim_kind[0], "%s",
                 t->is_inter ? "inter" : "size1");
    }
}

T_API void t_free(tcomm_t *t)
{
    if (t->comm == MPI_COMM_NULL) return;
    t_record(t);
    MPI_Comm c = t->comm;
    T_MPI(MPI_Comm_free(&c));
    t->comm = MPI_COMM_NULL;
}

/* Stop tracking a communicator the program must not free (MPI_COMM_SELF). */
T_API void t_release(tcomm_t *t)
{
    t_record(t);
    t->comm = MPI_COMM_NULL;
}

T_API void t_init(int *argc, char ***argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    setvbuf(stderr, NULL, _IOLBF, 0);
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_wsize);
    t_find_nodes();
    t_open_table();
    t_srand((uint64_t)t_wrank + 1);
    const char *skip = getenv("CRTEST_SELFTEST_SKIP_BARRIER");
    t_selftest_skip = skip && strcmp(skip, "1") == 0;
    t_fill(&t_world, MPI_COMM_WORLD, 0x7fffeull << 40);
    t_read_reduction_limits();
    t_read_bcast_params();
#ifdef T_HAVE_OMPI_CID
    if (t_wrank == 0) printf("info: context ids from " T_OMPI_CID_SOURCE "\n");
#else
    if (t_wrank == 0) printf("info: context ids from MPI_Comm_c2f() (no Open MPI internal headers)\n");
#endif
}

/* "-name value" integer options with a default. */
T_API long t_opt(int argc, char **argv, const char *name, long dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0) return strtol(argv[i + 1], NULL, 0);
    return dflt;
}

T_API int t_finish(const char *prog)
{
    t_record(&t_world);
    /* Everybody learns whether anybody failed. Not a barrier, so the barrier
     * count of MPI_COMM_WORLD stays exactly what the program made. Done
     * before the expect lines: this allreduce is counted too. */
    long mine = t_failures, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("info: reduction limits allreduce_max_bytes %lld reduce_max_bytes %lld (%s)\n",
           t_red_max_bytes[T_ALLREDUCE], t_red_max_bytes[T_REDUCE], t_red_limit_source);
    printf("info: parallel reduction from allreduce %lld reduce %lld cross-memory %d\n",
           t_red_parallel_min[T_ALLREDUCE], t_red_parallel_min[T_REDUCE], t_cross_memory);
    printf("info: bcast parameters bcast_max_bytes %lld slot_size %lld window %lld (%s)\n",
           t_bc_max_bytes, t_bc_slot_size, t_bc_window, t_bc_param_source);
    printf("info: bcast single copy %s from %lld (setting %lld) up to %lld (%s)\n", t_bc_single_copy ? "on" : "off",
           t_bc_single_copy_from(t_wsize), t_bc_sc_min, t_bc_sc_max, t_bc_single_copy_why);
    for (int c = 0; c < T_MAX_CID; c++) {
        if (t_bc_calls[c])
            printf("expect-bcast: comm %d rank %d calls %ld native %ld fallback %ld above %ld "
                   "zero %ld\n", c, t_wrank, t_bc_calls[c], t_bc_native[c], t_bc_above[c],
                   t_bc_above[c], t_bc_zero[c]);
        for (int k = 0; k < T_NKINDS; k++)
            if (t_red_calls[k][c])
                printf("expect-reduction: comm %d rank %d kind %s calls %ld native %ld "
                       "fallback %ld noncontig %ld above %ld both %ld\n", c, t_wrank,
                       t_kind_name[k], t_red_calls[k][c], t_red_native[k][c],
                       t_red_noncontig[k][c] + t_red_above[k][c] + t_red_both[k][c],
                       t_red_noncontig[k][c], t_red_above[k][c], t_red_both[k][c]);
        if (t_claim_comms[c])
            printf("expect: comm %d rank %d comms %ld used %ld barriers %ld\n", c, t_wrank,
                   t_claim_comms[c], t_claim_used[c], t_claim_bar[c]);
        if (t_unclaim_comms[c])
            printf("expect-unclaimed: comm %d rank %d comms %ld kind %s\n", c, t_wrank,
                   t_unclaim_comms[c], t_unclaim_kind[c]);
    }
    /* each node has its own table: its first rank removes it */
    if (t_node_of[t_wrank] == t_wrank) shm_unlink(t_shm_name);
    printf("result: rank %d failures %ld barriers %ld\n", t_wrank, t_failures,
           t_total_barriers);
    if (t_wrank == 0)
        printf("%s: %s on %d rank(s), %ld failure(s) in total\n", prog,
               all ? "FAILED" : "passed", t_wsize, all);
    fflush(stdout);
    munmap((void *)t_table, t_table_bytes);
    MPI_Finalize();
    return all ? 1 : 0;
}

#endif
