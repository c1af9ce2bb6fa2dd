/*
 * bcast: MPI_Bcast from every root, at the sizes around the multicast
 * window's slot size and far above it, with contiguous and non-contiguous
 * datatypes, different (signature-compatible) datatypes at the root and at
 * the receivers, back to back, interleaved with other collectives, on
 * sub-communicators and an intercommunicator, and with a receiver that is
 * late while the root broadcasts more than the window holds.
 *
 * Checking. Every message is a pattern that each rank computes from a tag
 * (the communicator and the broadcast's sequence number on it, the same on
 * every member) and the byte's position in the message, so every byte a
 * receiver gets is compared with what the root sent. Buffers carry guard
 * bytes on both sides, and the bytes a non-contiguous datatype skips (its
 * gaps), all filled with a per-rank value before the call: they must keep
 * it on the receivers (nothing written outside the datatype's bytes) and the
 * root's whole buffer must be unchanged after the call. Count 0 must leave
 * the buffer alone.
 *
 * Which calls coll rdma serves itself and which it hands to the module
 * underneath (above the limit of the path that carries it: see
 * t_count_bcast) is counted by common.h
 * (expect-bcast lines); the script compares it with the component's
 * verbose summary.
 *
 * Phases:
 *   sizes:     on MPI_COMM_WORLD, from every root: counts 0 and 1, the
 *              inline limit (40, 41 bytes), slot size - 1, slot size,
 *              slot size + 1, 3 slots + 7; 1 MiB from every root up to 4
 *              ranks (3 roots above), 64 MiB from 2 roots up to 4 ranks (1
 *              root above; -B sets it);
 *   subcomms:  the same small sizes from every root, 1 MiB from one, on a
 *              dup of the world, the even/odd halves, the world reversed
 *              (split with key -rank) and the world without rank 0
 *              (MPI_Comm_create);
 *   datatypes: root and receivers with different datatypes of the same
 *              signature: N MPI_INT vs 1 contiguous type of N ints vs
 *              MPI_Type_vector(N/2, 2, 3, MPI_INT) vs N/2 MPI_2INT vs N
 *              ints resized to an 8-byte extent; bytes vs a vector of every
 *              other byte (around one slot, several slots and, -B and -D
 *              permitting, 1 MiB); an empty datatype (count > 0, 0 bytes);
 *   b2b:       -n back-to-back bcasts, root, size and communicator drawn
 *              from a random sequence every rank shares (most of them
 *              small, some several slots long);
 *   mixed:     bcasts interleaved with barriers, allreduce and reduce (all
 *              results checked) on the world and the reversed world;
 *   late:      one receiver sleeps -L ms while the root broadcasts half a
 *              window of one-slot messages (with -E the root must not wait
 *              for the sleeper), then again while it broadcasts 3 windows
 *              and more of messages (some several slots long); also with
 *              the root moving from message to message;
 *   inter:     an intercommunicator between the halves (4 ranks or more):
 *              bcasts from a root of either group (MPI_ROOT/MPI_PROC_NULL).
 *
 * Self-test: with CRTEST_SELFTEST_CORRUPT_BCAST=1 in the environment the
 * receivers corrupt a data byte, and a byte past the data, now and then
 * after the call, and the checks must report it.
 *
 * Options: -s <slot size> (default: coll_rdma_bcast_slot_size read with
 *          MPI_T, else 4096), -w <window slots> (default: likewise
 *          coll_rdma_bcast_window, else 64), -n <back-to-back bcasts>
 *          (default 3000), -B <0|1|2> (largest messages: 0 none above the
 *          small sizes, 1 up to 1 MiB, 2 also 64 MiB; default 2), -L <late
 *          receiver's sleep in ms> (default 200), -x <mixed iterations>
 *          (default 300), -D <k> (with -B 1 or 2, the datatypes phase sends
 *          1 MiB with every k-th pair only, the first included: default 1,
 *          each; the Soft-RoCE guests, where every byte is emulated, send it
 *          with 3 of the 13 pairs), -E (a root whose bcasts fit in the window must
 *          not wait for a late receiver: coll rdma's promise on shared
 *          memory; the ranks must share one machine).
 */
#include "common.h"

#define GUARD 64

static long slot = 4096, window = 64;
/* the datatypes phase sends 1 MiB with every big_pair_every-th pair (-D) */
static long big_pair_every = 1;

/* ------------------------------------------------------------ the pattern */
static inline uint64_t pat_word(uint64_t tag, uint64_t j)
{
    uint64_t x = (j + 1) * 0x9e3779b97f4a7c15ull ^ tag;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    return x;
}

static inline uint8_t pat_byte(uint64_t tag, size_t i)
{
    return (uint8_t)(pat_word(tag, i / 8) >> (8 * (i % 8)));
}

static void pat_fill(uint8_t *p, size_t n, uint64_t tag)
{
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        uint64_t w = pat_word(tag, j / 8);
        memcpy(p + j, &w, 8); /* little endian: byte i%8 of the word */
    }
    for (; j < n; j++) p[j] = pat_byte(tag, j);
}

/* Offset of the first byte that differs from the pattern, or n. */
static size_t pat_check(const uint8_t *p, size_t n, uint64_t tag)
{
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        uint64_t w = pat_word(tag, j / 8), got;
        memcpy(&got, p + j, 8);
        if (got != w) break;
    }
    for (; j < n; j++)
        if (p[j] != pat_byte(tag, j)) return j;
    return n;
}

/* -------------------------------------------------------------- layouts
 * How a rank describes the message's bytes in its buffer. Packed byte i of
 * the message lives at buffer offset ly_off(layout, i). */
enum { LY_BYTES, LY_INTS, LY_CONTIG, LY_VECTOR, LY_2INT, LY_BYTEVEC, LY_RESIZED, LY_N };
static const char *const ly_name[LY_N] = {
    "MPI_BYTE", "MPI_INT", "contiguous(N,MPI_INT)", "vector(N/2,2,3,MPI_INT)", "MPI_2INT",
    "vector(N,1,2,MPI_BYTE)", "int resized to 8"};
static const int ly_unit[LY_N] = {1, 4, 4, 8, 8, 1, 4}; /* message bytes a multiple of */
static MPI_Datatype t_int_resized = MPI_DATATYPE_NULL;

static int ly_contiguous(int ly)
{
    return ly == LY_BYTES || ly == LY_INTS || ly == LY_CONTIG || ly == LY_2INT;
}

static size_t ly_off(int ly, size_t i)
{
    switch (ly) {
    case LY_VECTOR: { size_t e = i / 4, b = e / 2; return (b * 3 + e % 2) * 4 + i % 4; }
    case LY_BYTEVEC: return 2 * i;
    case LY_RESIZED: return (i / 4) * 8 + i % 4;
    default: return i;
    }
}

typedef struct {
    int count;
    MPI_Datatype dt;
    int owned;   /* dt created for this call */
    size_t span; /* buffer bytes from the first to the last data byte */
} ly_desc;

static void ly_make(int ly, size_t bytes, ly_desc *d)
{
    d->owned = 0;
    d->span = bytes ? ly_off(ly, bytes - 1) + 1 : 0;
    switch (ly) {
    case LY_BYTES: d->count = (int)bytes; d->dt = MPI_BYTE; break;
    case LY_INTS: d->count = (int)(bytes / 4); d->dt = MPI_INT; break;
    case LY_2INT: d->count = (int)(bytes / 8); d->dt = MPI_2INT; break;
    case LY_RESIZED: d->count = (int)(bytes / 4); d->dt = t_int_resized; break;
    case LY_CONTIG:
        MPI_Type_contiguous((int)(bytes / 4), MPI_INT, &d->dt);
        d->count = 1; d->owned = 1; break;
    case LY_VECTOR:
        MPI_Type_vector((int)(bytes / 8), 2, 3, MPI_INT, &d->dt);
        d->count = 1; d->owned = 1; break;
    case LY_BYTEVEC:
        MPI_Type_vector((int)bytes, 1, 2, MPI_BYTE, &d->dt);
        d->count = 1; d->owned = 1; break;
    }
    if (d->owned) MPI_Type_commit(&d->dt);
    if (bytes == 0) d->count = 0; /* a count-0 call, whatever the layout */
}

static void ly_free(ly_desc *d)
{
    if (d->owned) MPI_Type_free(&d->dt);
}

/* ------------------------------------------------------ checked bcasts */
static int selftest_corrupt = 0; /* $CRTEST_SELFTEST_CORRUPT_BCAST=1 */

typedef struct {
    tcomm_t t;
    const char *name;
    uint64_t salt; /* the same on every member */
    uint64_t seq;  /* bcasts made on it (the same on every member) */
    long calls, bytes_total;
} bcomm_t;

static void bc_wrap(bcomm_t *c, const char *name)
{
    c->name = name;
    c->salt = t_mix(((uint64_t)c->t.entry + 1) * 0x100000001b3ull);
    c->seq = 0;
    c->calls = 0;
    c->bytes_total = 0;
}

static uint8_t sentinel(void) { return (uint8_t)(0xa5 ^ (t_wrank * 0x3b)); }

/* Check a buffer after the call: the message's bytes at their offsets (if
 * data), everything else (guards, gaps) still the sentinel. Destroys the
 * buffer's data bytes. */
static void check_buffer(const char *what, uint8_t *alloc, int ly, size_t bytes, size_t span,
                         uint64_t tag, int data)
{
    uint8_t s = sentinel();
    uint8_t *base = alloc + GUARD;
    size_t from = 0; /* sentinel check from base + from */
    if (data && bytes) {
        if (ly_contiguous(ly)) {
            size_t bad = pat_check(base, bytes, tag);
            if (bad < bytes) {
                T_FAIL("%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, bad, bytes,
                       base[bad], pat_byte(tag, bad));
                return;
            }
            from = bytes;
        } else {
            for (size_t i = 0; i < bytes; i++) {
                size_t o = ly_off(ly, i);
                if (base[o] != pat_byte(tag, i)) {
                    T_FAIL("%s: byte %zu of %zu (buffer offset %zu) is 0x%02x, expected 0x%02x",
                           what, i, bytes, o, base[o], pat_byte(tag, i));
                    return;
                }
                base[o] = s;
            }
        }
    }
    for (size_t o = 0; o < GUARD; o++)
        if (alloc[o] != s) {
            T_FAIL("%s: guard byte %zu before the buffer was overwritten", what, GUARD - o);
            return;
        }
    for (size_t o = from; o < span + GUARD; o++)
        if (base[o] != s) {
            if (o >= span)
                T_FAIL("%s: byte %zu after the buffer's end was overwritten", what, o - span);
            else
                T_FAIL("%s: gap byte at buffer offset %zu was overwritten (0x%02x)", what, o,
                       base[o]);
            return;
        }
}

/* One bcast of `bytes` bytes from `root` (rank in c), the root describing
 * them with root_ly and the others with recv_ly; checked on every rank. */
static void bc_one(bcomm_t *c, int root, size_t bytes, int root_ly, int recv_ly)
{
    if (c->t.comm == MPI_COMM_NULL) return;
    uint64_t tag = t_mix(c->salt ^ (++c->seq * 0x9e3779b97f4a7c15ull));
    int am_root = c->t.rank == root;
    int ly = am_root ? root_ly : recv_ly;
    ly_desc d;
    ly_make(ly, bytes, &d);
    size_t total = d.span + 2 * GUARD;
    uint8_t *alloc = malloc(total);
    if (!alloc) {
        T_FAIL("out of memory (%zu bytes)", total);
        ly_free(&d);
        return;
    }
    memset(alloc, sentinel(), total);
    uint8_t *base = alloc + GUARD;
    if (am_root && bytes) {
        if (ly_contiguous(ly)) pat_fill(base, bytes, tag);
        else for (size_t i = 0; i < bytes; i++) base[ly_off(ly, i)] = pat_byte(tag, i);
    }
    int rc = MPI_Bcast(base, d.count, d.dt, root, c->t.comm);
    if (selftest_corrupt && !am_root && bytes > 0) {
        /* checker self-test: a wrong byte, or a byte written past the data */
        if (c->seq % 97 == 7) base[ly_off(ly, bytes / 2)] ^= 0x10;
        if (c->seq % 97 == 50) base[d.span + GUARD / 2] ^= 0x01;
    }
    char what[200];
    snprintf(what, sizeof what, "bcast #%llu on %s (cid %d) root %d, %zu bytes, %s%s %s",
             (unsigned long long)c->seq, c->name, c->t.cid, root, bytes,
             am_root ? "root's " : "", ly_name[ly],
             am_root ? "(must be unchanged)" : (root_ly != recv_ly ? "(root used another type)" : ""));
    if (rc != MPI_SUCCESS) T_FAIL("%s: MPI_Bcast returned %d", what, rc);
    else check_buffer(what, alloc, ly, bytes, d.span, tag, 1);
    free(alloc);
    ly_free(&d);
    c->calls++;
    c->bytes_total += (long)bytes;
}

static void bc_plain(bcomm_t *c, int root, size_t bytes) { bc_one(c, root, bytes, LY_BYTES, LY_BYTES); }

/* ---------------------------------------------------- shared randomness */
static uint64_t sh_state = 0x1234567887654321ull;
static uint32_t sh_rand(void)
{
    uint64_t x = sh_state;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    sh_state = x;
    return (uint32_t)(x >> 16);
}

/* A size for the back-to-back phases: mostly small (inline pieces and one
 * slot), some of a few slots. */
static size_t sh_size(void)
{
    uint32_t k = sh_rand() % 100, r = sh_rand();
    if (k < 55) return 1 + r % 64;
    if (k < 85) return 1 + r % (size_t)(2 * slot);
    return (size_t)(2 * slot) + r % (size_t)(6 * slot);
}

/* ---------------------------------------------------------------- phases */
static const long MiB = 1024 * 1024;

static void phase_sizes(bcomm_t *c, int big)
{
    if (c->t.comm == MPI_COMM_NULL) return;
    int n = c->t.size;
    size_t small[] = {0, 1, 40, 41, (size_t)slot - 1, (size_t)slot, (size_t)slot + 1,
                      3 * (size_t)slot + 7};
    for (int root = 0; root < n; root++)
        for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) bc_plain(c, root, small[k]);
    if (big >= 1)
        for (int root = 0; root < n; root++)
            if (n <= 4 || root == 0 || root == n - 1 || root == n / 2) bc_plain(c, root, MiB);
    if (big >= 2)
        for (int root = 0; root < n; root++)
            if (root == n - 1 || (n <= 4 && root == 0)) bc_plain(c, root, 64 * MiB);
}

static void phase_subcomm(bcomm_t *c, int big)
{
    if (c->t.comm == MPI_COMM_NULL) return;
    int n = c->t.size;
    size_t small[] = {1, 41, (size_t)slot - 1, (size_t)slot, (size_t)slot + 1, 5 * (size_t)slot};
    for (int root = 0; root < n; root++)
        for (size_t k = 0; k < sizeof small / sizeof small[0]; k++) bc_plain(c, root, small[k]);
    if (big >= 1) bc_plain(c, n - 1, MiB);
    t_barrier(&c->t);
}

static void phase_datatypes(bcomm_t *c, int big)
{
    if (c->t.comm == MPI_COMM_NULL) return;
    static const int pairs[][2] = {
        {LY_INTS, LY_CONTIG}, {LY_CONTIG, LY_INTS}, {LY_INTS, LY_VECTOR}, {LY_VECTOR, LY_INTS},
        {LY_VECTOR, LY_VECTOR}, {LY_INTS, LY_2INT}, {LY_2INT, LY_VECTOR}, {LY_RESIZED, LY_RESIZED},
        {LY_INTS, LY_RESIZED}, {LY_RESIZED, LY_CONTIG}, {LY_BYTES, LY_BYTEVEC},
        {LY_BYTEVEC, LY_BYTES}, {LY_BYTEVEC, LY_BYTEVEC}};
    int n = c->t.size, turn = 0;
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        int a = pairs[p][0], b = pairs[p][1];
        size_t unit = (size_t)(ly_unit[a] > ly_unit[b] ? ly_unit[a] : ly_unit[b]);
        size_t s = (size_t)slot;
        /* around one slot, several slots, 1 MiB; rounded to the unit */
        size_t sizes[] = {unit, s - 1, s, s + 1, 4 * s + 16, (size_t)MiB};
        int nsizes = big >= 1 && p % (size_t)big_pair_every == 0 ? 6 : 5;
        for (int k = 0; k < nsizes; k++) {
            size_t bytes = sizes[k] / unit * unit;
            if (bytes == 0) bytes = unit;
            bc_one(c, turn++ % n, bytes, a, b);
        }
    }
    /* an empty datatype: count > 0, 0 bytes; the buffer stays untouched */
    MPI_Datatype empty;
    MPI_Type_contiguous(0, MPI_INT, &empty);
    MPI_Type_commit(&empty);
    uint8_t buf[GUARD];
    memset(buf, sentinel(), sizeof buf);
    T_MPI(MPI_Bcast(buf, 5, empty, n - 1, c->t.comm));
    for (size_t o = 0; o < sizeof buf; o++)
        if (buf[o] != sentinel()) {
            T_FAIL("bcast of 5 empty elements on %s wrote into the buffer (byte %zu)", c->name, o);
            break;
        }
    MPI_Type_free(&empty);
    t_barrier(&c->t);
}

/* Back to back: root, size and communicator from the shared sequence. */
static void phase_b2b(bcomm_t **cs, int ncs, long iters)
{
    for (long i = 0; i < iters; i++) {
        bcomm_t *c = cs[sh_rand() % (uint32_t)ncs];
        uint32_t r = sh_rand();
        size_t bytes = sh_size(); /* drawn by everybody, members or not */
        if (c->t.comm == MPI_COMM_NULL) continue;
        bc_plain(c, (int)(r % (uint32_t)c->t.size), bytes);
    }
    for (int k = 0; k < ncs; k++) t_barrier(&cs[k]->t);
}

/* Bcasts interleaved with barriers, allreduce and reduce (checked). */
static void phase_mixed(bcomm_t *c, long iters)
{
    if (c->t.comm == MPI_COMM_NULL) return;
    int n = c->t.size, me = c->t.rank;
    long *v = malloc(sizeof(long) * 6000), *w = malloc(sizeof(long) * 6000);
    for (long it = 0; it < iters; it++) {
        uint32_t op = sh_rand() % 8, r = sh_rand();
        int root = (int)(r % (uint32_t)n);
        if (op < 4) {
            bc_plain(c, root, sh_size());
        } else if (op == 4) {
            t_barrier(&c->t);
        } else {
            /* up to 16000 bytes (served), now and then 48000 (handed over
             * at the default limits) */
            int cnt = 1 + (int)(r >> 8) % (it % 10 == 0 ? 6000 : 2000);
            for (int j = 0; j < cnt; j++) { v[j] = (long)(me + 1) * (j + it); w[j] = -1; }
            long want_f = (long)n * (n + 1) / 2;
            if (op <= 6) {
                T_MPI(MPI_Allreduce(v, w, cnt, MPI_LONG, MPI_SUM, c->t.comm));
            } else {
                T_MPI(MPI_Reduce(v, w, cnt, MPI_LONG, MPI_SUM, root, c->t.comm));
                if (me != root) continue;
            }
            for (int j = 0; j < cnt; j++)
                if (w[j] != want_f * (j + it)) {
                    T_FAIL("%s on %s, iteration %ld: element %d is %ld, expected %ld",
                           op <= 6 ? "allreduce" : "reduce", c->name, it, j, w[j],
                           want_f * (j + it));
                    break;
                }
        }
    }
    free(v);
    free(w);
    t_barrier(&c->t);
}

/* One receiver (late) sleeps while the messages come; root < 0: the root
 * moves from message to message (rank k % n, the late one included).
 * With a fixed root, first half a window of one-slot messages: they fit in
 * the window, so the root returns from each at once (MPI_Bcast may return
 * as soon as the buffer can be reused) instead of waiting for the sleeper;
 * with -E a root that waits for the sleeper is a failure (see
 * late_rank_gave_up_on_root). Then 3 windows and more, some messages several
 * slots long: the root must wait for the sleeper's credits, and nothing may
 * be lost or overwritten. */
static int expect_early = 0;

/* -E asks whether the root finished before the late rank entered at all.
 * A clock cannot tell: on a loaded machine a root that is switched out for
 * longer than the sleep looks like one that waited. So the two meet on a
 * word of the node's shared table, with no MPI call between (one would drive
 * MPI's progress from the late rank): the late rank enters only once the
 * root has marked the word after its last bcast, and gives up, marking it
 * first, only after LATE_GIVE_UP_S, which a root that waits for it forces. */
#define LATE_GIVE_UP_S 20.0
enum { LATE_WAITING = 0, LATE_ROOT_DONE = 1, LATE_GAVE_UP = 2 };
static uint64_t late_meetings = 0; /* phase_late calls so far, counted on every rank */

/* The late rank: at least sleep_ms, then until the root is done. Returns
 * 1 if it gave up instead. */
static int late_rank_gave_up_on_root(uint64_t *word, long sleep_ms)
{
    double t0 = MPI_Wtime();
    usleep((useconds_t)(sleep_ms * 1000));
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) != LATE_ROOT_DONE) {
        if (MPI_Wtime() - t0 > LATE_GIVE_UP_S) {
            uint64_t waiting = LATE_WAITING;
            if (__atomic_compare_exchange_n(word, &waiting, LATE_GAVE_UP, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return 1;
        }
        usleep(1000);
    }
    return 0;
}

/* The root, after its last bcast: whether it finished before the late rank
 * gave up on it. */
static int root_done_before_late_rank(uint64_t *word)
{
    uint64_t waiting = LATE_WAITING;
    return __atomic_compare_exchange_n(word, &waiting, LATE_ROOT_DONE, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}

static void phase_late(bcomm_t *c, int root, int late, long sleep_ms)
{
    uint64_t meeting = ++late_meetings; /* before returning: non-members count it too */
    if (c->t.comm == MPI_COMM_NULL || c->t.size < 2) return;
    int n = c->t.size;
    if (root >= 0) {
        long few = window / 2 > 0 ? window / 2 : 1;
        uint64_t *word = NULL;
        if (expect_early) {
            if (c->t.spans_nodes)
                T_FAIL("-E needs the root and the late rank on one node (%s spans nodes)",
                       c->name);
            else
                word = t_node_word(c->salt ^ 0x6c6174652d726f6full ^ meeting);
        }
        t_barrier(&c->t);
        if (c->t.rank == late) {
            if (word) {
                if (late_rank_gave_up_on_root(word, sleep_ms))
                    printf("info: late receiver on %s: rank %d gave up waiting for root %d after "
                           "%.0f s and entered\n", c->name, late, root, LATE_GIVE_UP_S);
            } else {
                usleep((useconds_t)(sleep_ms * 1000));
            }
        }
        double t0 = MPI_Wtime();
        for (long k = 0; k < few; k++) bc_plain(c, root, k % 2 ? 17 : (size_t)slot);
        double dt = MPI_Wtime() - t0;
        if (c->t.rank == root) {
            printf("info: late receiver on %s: root %d made %ld one-slot bcasts (window %ld) "
                   "in %.3f ms while rank %d was away%s\n", c->name, root, few, window,
                   dt * 1e3, late, word ? " (it enters once the root is done)" : "");
            if (word && !root_done_before_late_rank(word))
                T_FAIL("root %d on %s made %ld bcasts that fit in the window of %ld only after "
                       "rank %d, which waited %.0f s for it to finish them, gave up and entered: "
                       "it waited for the late rank", root, c->name, few, window, late,
                       LATE_GIVE_UP_S);
        }
    }
    long msgs = 3 * window + 5, pieces = 0;
    t_barrier(&c->t);
    if (c->t.rank == late) usleep((useconds_t)(sleep_ms * 1000));
    double t0 = MPI_Wtime();
    for (long k = 0; k < msgs; k++) {
        size_t bytes = k % 3 == 0 ? 2 * (size_t)slot + 3 : k % 3 == 1 ? 17 : (size_t)slot;
        pieces += (long)((bytes + (size_t)slot - 1) / (size_t)slot);
        int r = root >= 0 ? root : (int)(k % n);
        bc_plain(c, r, bytes);
    }
    double dt = MPI_Wtime() - t0;
    if (root >= 0 && c->t.rank == root)
        printf("info: late receiver on %s: root %d made %ld bcasts (%ld pieces, window %ld) "
               "in %.1f ms while rank %d slept %ld ms\n", c->name, root, msgs, pieces, window,
               dt * 1e3, late, sleep_ms);
    t_barrier(&c->t);
}

/* An intercommunicator between the halves: every member of the root's group
 * passes MPI_ROOT (the root) or MPI_PROC_NULL, the other group the root's
 * rank; checked on the receivers, the others' buffers untouched. */
static void phase_inter(tcomm_t *half)
{
    if (t_wsize < 2) return;
    MPI_Comm ic;
    int remote_leader = t_wrank % 2 ? 0 : 1; /* world rank of the other half's rank 0 */
    T_MPI(MPI_Intercomm_create(half->comm, 0, MPI_COMM_WORLD, remote_leader, 4242, &ic));
    tcomm_t inter;
    t_track_tagged(ic, 4242, &inter);
    int group = t_wrank % 2, lrank = inter.rank;
    size_t sizes[] = {1, 41, (size_t)slot + 1, 3 * (size_t)slot};
    uint64_t seq = 0;
    for (int from = 0; from < 2; from++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            size_t bytes = sizes[k];
            int rroot = (int)(seq % (uint64_t)(from == 0 ? (t_wsize + 1) / 2 : t_wsize / 2));
            uint64_t tag = t_mix(0x1f2e3d4c5b6a7988ull ^ ++seq);
            uint8_t *alloc = malloc(bytes + 2 * GUARD);
            memset(alloc, sentinel(), bytes + 2 * GUARD);
            int rootarg, data;
            if (group == from) {
                rootarg = lrank == rroot ? MPI_ROOT : MPI_PROC_NULL;
                if (lrank == rroot) pat_fill(alloc + GUARD, bytes, tag);
                data = lrank == rroot; /* the root's buffer must be unchanged */
            } else {
                rootarg = rroot;
                data = 1;
            }
            T_MPI(MPI_Bcast(alloc + GUARD, (int)bytes, MPI_BYTE, rootarg, ic));
            char what[160];
            snprintf(what, sizeof what, "intercommunicator bcast %llu from group %d rank %d, "
                     "%zu bytes (%s)", (unsigned long long)seq, from, rroot, bytes,
                     group == from ? (rootarg == MPI_ROOT ? "root" : "MPI_PROC_NULL") : "receiver");
            check_buffer(what, alloc, LY_BYTES, bytes, bytes, tag, data);
            free(alloc);
        }
    t_barrier(&inter);
    t_free(&inter);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    /* the values coll rdma uses: out-of-range ones are clamped (it warns) */
    if (t_bc_slot_size >= 0)
        slot = t_bc_slot_size < 64 ? 64 : t_bc_slot_size > 1048576 ? 1048576 : (long)t_bc_slot_size;
    if (t_bc_window >= 0)
        window = t_bc_window < 1 ? 1 : t_bc_window > 4096 ? 4096 : (long)t_bc_window;
    slot = t_opt(argc, argv, "-s", slot);
    window = t_opt(argc, argv, "-w", window);
    long iters = t_opt(argc, argv, "-n", 3000);
    int big = (int)t_opt(argc, argv, "-B", 2);
    long sleep_ms = t_opt(argc, argv, "-L", 200);
    long mixed = t_opt(argc, argv, "-x", 300);
    big_pair_every = t_opt(argc, argv, "-D", 1);
    if (big_pair_every < 1) big_pair_every = 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-E") == 0) expect_early = 1;
    const char *corrupt = getenv("CRTEST_SELFTEST_CORRUPT_BCAST");
    selftest_corrupt = corrupt && strcmp(corrupt, "1") == 0;
    if (slot < 2) slot = 2;
    if (window < 1) window = 1;

    MPI_Type_create_resized(MPI_INT, 0, 8, &t_int_resized);
    MPI_Type_commit(&t_int_resized);

    if (t_wrank == 0)
        printf("info: slot size %ld, window %ld, bcast_max_bytes %lld, %ld back-to-back, "
               "big level %d, 1 MiB datatype pairs 1 in %ld\n", slot, window, t_bc_max_bytes,
               iters, big, big_pair_every);

    bcomm_t world, dup, half, rev, tail;
    world.t = t_world;
    bc_wrap(&world, "world");
    MPI_Comm c;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    t_derive(&t_world, c, &dup.t);
    bc_wrap(&dup, "dup");
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, t_wrank % 2, t_wrank, &c));
    t_derive(&t_world, c, &half.t);
    bc_wrap(&half, "half");
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, -t_wrank, &c));
    t_derive(&t_world, c, &rev.t);
    bc_wrap(&rev, "reversed");
    {
        MPI_Group wg, g;
        int zero = 0;
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_excl(wg, 1, &zero, &g);
        T_MPI(MPI_Comm_create(MPI_COMM_WORLD, g, &c));
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
        t_derive(&t_world, c, &tail.t);
        bc_wrap(&tail, "world without rank 0");
    }

    double t0 = MPI_Wtime(), tp = t0;
#define PHASE_DONE(name)                                                                     \
    do {                                                                                     \
        double now_ = MPI_Wtime();                                                           \
        if (t_wrank == 0) printf("info: phase %-9s %8.3f s\n", name, now_ - tp);            \
        tp = now_;                                                                           \
    } while (0)

    phase_sizes(&world, big);
    t_barrier(&world.t);
    PHASE_DONE("sizes");

    phase_subcomm(&dup, big);
    phase_subcomm(&half, big);
    phase_subcomm(&rev, big);
    phase_subcomm(&tail, big);
    PHASE_DONE("subcomms");

    phase_datatypes(&world, big);
    phase_datatypes(&rev, 0);
    PHASE_DONE("datatypes");

    bcomm_t *all[] = {&world, &rev, &half, &dup, &tail};
    phase_b2b(all, 5, iters);
    PHASE_DONE("b2b");

    phase_mixed(&world, mixed);
    phase_mixed(&rev, mixed / 2);
    PHASE_DONE("mixed");

    int n = t_wsize;
    phase_late(&world, 0, n - 1, sleep_ms);
    phase_late(&world, n - 1, 0, sleep_ms / 2);
    phase_late(&half, -1, half.t.size - 1, sleep_ms / 2);
    PHASE_DONE("late");

    if (t_wsize >= 2) phase_inter(&half.t);
    PHASE_DONE("inter");

    long calls = world.calls + dup.calls + half.calls + rev.calls + tail.calls;
    long bytes = world.bytes_total + dup.bytes_total + half.bytes_total + rev.bytes_total +
                 tail.bytes_total;
    printf("info: rank %d: %ld checked bcasts, %.1f MiB, in %.3f s\n", t_wrank, calls,
           (double)bytes / MiB, MPI_Wtime() - t0);

    MPI_Type_free(&t_int_resized);
    t_free(&dup.t);
    t_free(&half.t);
    t_free(&rev.t);
    t_free(&tail.t);
    t_world = world.t; /* its barrier count */
    return t_finish("bcast");
}
