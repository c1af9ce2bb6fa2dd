/*
 * coll_pairs: one collective measured in short samples that take turns with the
 * same measurement in other, concurrently running jobs (stock Open MPI in one,
 * coll rdma in another), with the floor of the machine measured between them.
 *
 * Why separate jobs taking turns, not one job switching communicators: coll
 * rdma reads its parameters once per process and claims every
 * intracommunicator it is offered, so one job cannot have a communicator that
 * stock Open MPI serves while coll rdma is loaded; and a loaded coll rdma
 * registers a progress callback that would run inside the stock side's calls.
 * Two jobs started together, each blocked in the kernel (futex) while the other
 * measures, give stock and coll rdma samples a few milliseconds apart, on the
 * same cores, each job with an untouched stack. ci/bench.sh starts them.
 *
 *   coll_pairs -J JOB -K NJOBS -C CONTROL_FILE [-c COLL] [-m MIN[:MAX]|SIZE,SIZE...]
 *              [-f FACTOR] [-P ROUNDS] [-t SAMPLE_MS] [-i MAX_ITERS] [-n MIN_ITERS]
 *              [-p PINGPONG_MAX] [-r ROOT] [-T WAIT_S] [-S slowest|span|batch] [-H THREADS]
 *              [-M latency|overlap]
 *     -J/-K   this job's index among NJOBS jobs (2 or more) running together
 *             (each waits until all have started);
 *             the jobs take turns measuring the floor (two rounds each)
 *     -C      a file every job maps (create it empty, or not at all: the first
 *             job creates it); its first word says whose turn it is
 *     -c      barrier, allreduce (default), reduce, bcast; ibarrier, iallreduce,
 *             ireduce, ibcast (posted, then MPI_Wait); barrier_init,
 *             allreduce_init, reduce_init, bcast_init (persistent: made once
 *             per size, untimed, at the size's first call, then MPI_Start and
 *             MPI_Wait; MPIX_*_init from mpi-ext.h where MPI is older than 4,
 *             as on Open MPI 4.1); iallreduce_8rev (8 MPI_Iallreduce posted
 *             into 8 result buffers, then waited for newest first)
 *     -m/-f   sizes in bytes MIN..MAX, each FACTOR (default 4) times the last;
 *             or a comma-separated list of sizes, measured in that order
 *     -P      rounds (default 21): a round visits every size in turn, from the
 *             smallest, and gives each one floor sample then one sample of
 *             every job, in job order in even rounds and in reverse order in
 *             odd ones (ABBA...), so neither side always goes first; so a
 *             size's pairs are spread over the whole run
 *     -t      target length of one sample in ms (default 20): the number of
 *             calls in a sample is set per job and size by a warm-up turn
 *     -i      most calls in one sample (default 100000)
 *     -n      fewest calls in one sample (default 1): a warm-up whose first call
 *             was slow (page faults, a descheduled rank) would otherwise leave
 *             samples of one cold call each (coll-rdma-tune passes 20)
 *     -p      most cache-line round trips in one floor sample (default 20000;
 *             a floor sample also stops after 5 ms)
 *     -r      root of reduce and bcast (default 0)
 *     -T      give up (MPI_Abort) after waiting this many seconds for a turn
 *             (default 120): the other job died or never started
 *     -S      the sample's figure: slowest (default), span, evened or batch (see below)
 *     -H      THREADS (default 1) threads in every rank, each with its own
 *             duplicate of MPI_COMM_WORLD, running the same collective at
 *             the same time (2 or more initialise at MPI_THREAD_MULTIPLE;
 *             -S slowest only): see "Threads" below
 *     -M      latency (default), or overlap: the OSU-style overlap of a
 *             non-blocking call (ibarrier, iallreduce, ireduce, ibcast;
 *             -S slowest, -H 1): see overlapped_calls
 *
 * Each sample: a barrier, then calls timed one by one with an (untimed)
 * barrier after each; the sample's figure is, with -S slowest (the default),
 * the slowest rank's mean time per call, and with -S span the mean over the
 * calls of the call's span: from the last rank's entry to the last rank's
 * exit, on the node's monotonic clock (so only when every rank runs on one
 * node), with the calls separated by a barrier of this program's own rather
 * than MPI_Barrier. Span is for oversubscribed runs: there a rank's own time in a call
 * says more about when the scheduler ran it than about the collective (the
 * wait of a descheduled receiver moves between the call and the barrier
 * after it, differently for each implementation), while the span counts
 * exactly the time in which some rank still lacked its result after all had
 * arrived. But the span does not count what happens before the last rank
 * enters: a rank that spins while it waits takes a core from a rank that has
 * not yet entered, and that cost falls outside the span (coll rdma's small
 * bcast at np=4 on 2 cores, spinning 300 polls: 0.06-0.2x stock's span).
 * Nor is which rank enters last the same for every implementation: a rank
 * that reaches the separating barrier early sleeps there and is woken last,
 * so it enters the next call last. Coll rdma's bcast root returns at once
 * and entered last in 77 % of the calls at np=4 on 2 cores, stock's in
 * 37 %; a call whose root enters last is the long kind for a bcast (the
 * data leaves only then: 6.4 and 7.4 us against 2.1-4.3 us when a receiver
 * is last), so the span's mean mixed the implementations' speeds with
 * their own mixes of arrivals (coll rdma 1.12x stock's span, while its span
 * was shorter or even for three of the four last-entering ranks, and
 * 0.87x with root last). With -S evened the figure is the span with that
 * mix evened out: the mean, over the ranks that entered last in at least
 * 1 % of the calls, of the mean span of those calls.
 * With -S batch the figure is rank 0's wall time for the calls, each followed
 * by the same barrier, divided by the number of calls: whatever a wait
 * policy costs the other ranks is in it, and so is the barrier, the same in
 * every job (subtracting the time of barriers alone measured beside it left
 * nothing, or less than nothing, for short calls: 4 ranks on 2 cores pass
 * a barrier faster when a collective has just lined them up). Reductions
 * sum floats; after the warm-up turn of each size one call's
 * result is checked (every element == number of ranks; bcast: a byte pattern
 * on every rank), a wrong one prints "# WRONG RESULT" and the exit status is 3.
 * The floor sample (ranks 0 and 1 of one job, a different one every two
 * rounds): a cache-line ping-pong between the
 * two ranks through the control file (round trip in us), then a plain memcpy
 * of SIZE bytes on rank 0 (us per copy, repeated for at least 1 ms).
 *
 * Environment: COLL_PAIRS_THREAD_LEVEL=multiple initialises the job at
 * MPI_THREAD_MULTIPLE (one thread still makes every call), to price that
 * level against a job at the default level. COLL_PAIRS_BLOCKING=1 measures
 * the blocking call that -c's collective is a form of (allreduce for
 * allreduce_init), to pair it with a job of the other form.
 *
 * Threads (-H THREADS, 2 or more): every warm-up, check and sample runs in
 * THREADS threads at once per rank, thread i on its own duplicate of
 * MPI_COMM_WORLD (MPI allows collectives on different communicators at the
 * same time, never two on one). The warm-up runs in every thread together,
 * and every thread then makes as many calls per sample as the fewest any
 * thread of any rank asked for, so that the threads' samples overlap from
 * start to end. A sample's figure is the slowest thread's (of any rank)
 * mean time per call; each thread's result is checked. The floor, the turns
 * and the figure's reduction stay with the main thread on MPI_COMM_WORLD,
 * outside the threads' timed calls.
 *
 * Output of rank 0 of each job, one line each ('#' lines are comments):
 *   counted as: NAME                            (a comment: the name under
 *                                               which coll rdma's events
 *                                               count the measured calls)
 *   sample JOB COLL SIZE ROUND US ITERS         (-M overlap: US is the time
 *                                               per call left exposed, the
 *                                               mean total - mean compute)
 *   overlap JOB COLL SIZE ROUND PERCENT PURE_US TOTAL_US COMPUTE_US  (-M overlap)
 *   floor  SIZE K PINGPONG_RT_US MEMCPY_US      (K = 0..ROUNDS: floor K of a
 *                                               size is measured just before
 *                                               that size's samples of round K)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum coll {
    C_BARRIER, C_ALLREDUCE, C_REDUCE, C_BCAST, C_IBARRIER, C_IALLREDUCE, C_IREDUCE, C_IBCAST,
    C_BARRIER_INIT, C_ALLREDUCE_INIT, C_REDUCE_INIT, C_BCAST_INIT, C_IALLREDUCE_8REV, C_NCOLLS
};
static const char *names[] = {"barrier", "allreduce", "reduce", "bcast", "ibarrier", "iallreduce", "ireduce", "ibcast",
                              "barrier_init", "allreduce_init", "reduce_init", "bcast_init", "iallreduce_8rev"};

/* The persistent collectives: MPI 4's names on Open MPI 5, the MPIX_
 * extension (mpi-ext.h) on 4.1. */
#if MPI_VERSION >= 4
#define PAIRS_BARRIER_INIT MPI_Barrier_init
#define PAIRS_ALLREDUCE_INIT MPI_Allreduce_init
#define PAIRS_REDUCE_INIT MPI_Reduce_init
#define PAIRS_BCAST_INIT MPI_Bcast_init
#else
#include <mpi-ext.h>
#define PAIRS_BARRIER_INIT MPIX_Barrier_init
#define PAIRS_ALLREDUCE_INIT MPIX_Allreduce_init
#define PAIRS_REDUCE_INIT MPIX_Reduce_init
#define PAIRS_BCAST_INIT MPIX_Bcast_init
#endif

/* The shared control page. Separate 128-byte blocks so that the ping-pong
 * lines share no cache line (or adjacent-line prefetch pair) with the turn. */
struct control {
    _Alignas(128) _Atomic uint32_t turn;
    _Alignas(128) _Atomic uint32_t aborted;
    _Alignas(128) _Atomic uint32_t arrived; /* jobs past their setup */
    _Alignas(128) _Atomic uint64_t ping;
    _Alignas(128) _Atomic uint64_t pong;
    _Alignas(128) _Atomic uint32_t node_arrived; /* the span's separating barrier */
    _Alignas(128) _Atomic uint32_t node_released;
};

enum { MAX_SIZES = 72 };

static int rank, nranks, job, njobs;
static struct control *ctl;
static double wait_limit_s = 120.0;

static void fail(const char *msg)
{
    fprintf(stderr, "coll_pairs: job %d rank %d: %s\n", job, rank, msg);
    if (ctl) {
        atomic_store(&ctl->aborted, 1);
        syscall(SYS_futex, &ctl->turn, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    }
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static double now(void) { return MPI_Wtime(); }

/* Sleeps in the kernel until the turn counter reaches t, so that a job which
 * is not measuring takes no CPU from the one which is. */
static void wait_turn(uint32_t t)
{
    double start = now();
    for (;;) {
        uint32_t v = atomic_load_explicit(&ctl->turn, memory_order_acquire);
        if (v == t) return;
        if (atomic_load(&ctl->aborted)) fail("another job gave up; stopping too");
        if (v > t) fail("the turn counter went past this job's turn (jobs run different schedules?)");
        struct timespec ts = {0, 200 * 1000 * 1000};
        syscall(SYS_futex, &ctl->turn, FUTEX_WAIT, v, &ts, NULL, 0);
        if (now() - start > wait_limit_s) fail("waited too long for a turn (did the other job start?)");
    }
}

/* Holds every job until all NJOBS have started: a job measuring while
 * another is still in MPI_Init competes with that start-up for the cores
 * (with stock against itself, job 0's first size came out 8x slower than
 * job 1's and only that size), and its warm-up then picks too few calls. */
static void wait_for_every_job(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        atomic_fetch_add_explicit(&ctl->arrived, 1, memory_order_acq_rel);
        syscall(SYS_futex, &ctl->arrived, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        double start = now();
        for (;;) {
            uint32_t v = atomic_load_explicit(&ctl->arrived, memory_order_acquire);
            if (v >= (uint32_t)njobs) break;
            if (atomic_load(&ctl->aborted)) fail("another job gave up; stopping too");
            struct timespec ts = {0, 200 * 1000 * 1000};
            syscall(SYS_futex, &ctl->arrived, FUTEX_WAIT, v, &ts, NULL, 0);
            if (now() - start > wait_limit_s) fail("waited too long for the other jobs to start");
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void pass_turn(uint32_t t)
{
    atomic_store_explicit(&ctl->turn, t + 1, memory_order_release);
    syscall(SYS_futex, &ctl->turn, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* A collective's calls: how to post one and what to wait for. Non-blocking
 * kinds are posted, then waited for; persistent kinds (*_init) are started
 * on a request made once per communicator, size and root (see planned), then
 * waited for; iallreduce_8rev posts OUTSTANDING iallreduces, each into its
 * own part of rbuf, and waits for them newest first. */
enum { OUTSTANDING = 8 };

/* The blocking call that c is a form of (c itself for a blocking one). */
static enum coll blocking_form(enum coll c)
{
    switch (c) {
    case C_IBARRIER: case C_BARRIER_INIT: return C_BARRIER;
    case C_IALLREDUCE: case C_ALLREDUCE_INIT: case C_IALLREDUCE_8REV: return C_ALLREDUCE;
    case C_IREDUCE: case C_REDUCE_INIT: return C_REDUCE;
    case C_IBCAST: case C_BCAST_INIT: return C_BCAST;
    default: return c;
    }
}

/* The name under which coll rdma's events count c's calls (docs/events.md):
 * ci/bench-pairs.sh checks the job's comm_freed events for it. */
static const char *counted_as(enum coll c)
{
    return c == C_IALLREDUCE_8REV ? names[C_IALLREDUCE] : names[c];
}

static int is_persistent(enum coll c)
{
    return c == C_BARRIER_INIT || c == C_ALLREDUCE_INIT || c == C_REDUCE_INIT || c == C_BCAST_INIT;
}

/* How many of rbuf's parts of the call's size one call writes. */
static int result_copies(enum coll c) { return c == C_IALLREDUCE_8REV ? OUTSTANDING : 1; }

/* The persistent requests made so far, one per communicator, collective,
 * size and root, kept until the end: making one is a collective call whose
 * cost belongs to no sample, and the rounds visit every size in turn. Each
 * rank makes them in the same order (the calls' order), as MPI requires.
 * Only one thread makes calls when a persistent kind is measured (-H 1). */
static struct planned {
    MPI_Comm comm;
    enum coll c;
    size_t bytes;
    int root;
    MPI_Request request;
} planned[MAX_SIZES];
static int nplanned;

static MPI_Request planned_request(MPI_Comm comm, enum coll c, void *sbuf, void *rbuf, int count, int root, size_t bytes)
{
    for (int i = 0; i < nplanned; i++)
        if (planned[i].comm == comm && planned[i].c == c && planned[i].bytes == bytes && planned[i].root == root)
            return planned[i].request;
    if (nplanned == MAX_SIZES) fail("too many persistent requests (sizes) for one run");
    MPI_Request request;
    switch (c) {
    case C_BARRIER_INIT: PAIRS_BARRIER_INIT(comm, MPI_INFO_NULL, &request); break;
    case C_ALLREDUCE_INIT: PAIRS_ALLREDUCE_INIT(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, &request); break;
    case C_REDUCE_INIT: PAIRS_REDUCE_INIT(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, root, comm, MPI_INFO_NULL, &request); break;
    default: PAIRS_BCAST_INIT(sbuf, (int)(bytes ? bytes : 1), MPI_BYTE, root, comm, MPI_INFO_NULL, &request); break;
    }
    planned[nplanned++] = (struct planned){comm, c, bytes, root, request};
    return request;
}

static void free_planned(void)
{
    for (int i = 0; i < nplanned; i++) MPI_Request_free(&planned[i].request);
    nplanned = 0;
}

/* Posts one call of c (a blocking kind runs to its end here) and leaves in
 * requests what is to be waited for, in the order to wait; returns how many. */
static int post(MPI_Comm comm, enum coll c, void *sbuf, void *rbuf, size_t bytes, int root, MPI_Request *requests)
{
    int count = (int)(bytes / sizeof(float));
    if (count < 1) count = 1;
    int bcount = (int)(bytes ? bytes : 1);
    if (is_persistent(c)) {
        requests[0] = planned_request(comm, c, sbuf, rbuf, count, root, bytes);
        MPI_Start(&requests[0]);
        return 1;
    }
    switch (c) {
    case C_BARRIER: MPI_Barrier(comm); return 0;
    case C_ALLREDUCE: MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, comm); return 0;
    case C_REDUCE: MPI_Reduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, root, comm); return 0;
    case C_BCAST: MPI_Bcast(sbuf, bcount, MPI_BYTE, root, comm); return 0;
    case C_IBARRIER: MPI_Ibarrier(comm, &requests[0]); return 1;
    case C_IALLREDUCE: MPI_Iallreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, comm, &requests[0]); return 1;
    case C_IREDUCE: MPI_Ireduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, root, comm, &requests[0]); return 1;
    case C_IBCAST: MPI_Ibcast(sbuf, bcount, MPI_BYTE, root, comm, &requests[0]); return 1;
    default: /* C_IALLREDUCE_8REV */
        for (int i = 0; i < OUTSTANDING; i++)
            MPI_Iallreduce(sbuf, (float *)rbuf + (size_t)i * (size_t)count, count, MPI_FLOAT, MPI_SUM, comm,
                           &requests[OUTSTANDING - 1 - i]);
        return OUTSTANDING;
    }
}

static void wait_in_order(MPI_Request *requests, int n)
{
    for (int i = 0; i < n; i++) MPI_Wait(&requests[i], MPI_STATUS_IGNORE);
}

static void run_on(MPI_Comm comm, enum coll c, void *sbuf, void *rbuf, size_t bytes, int root)
{
    MPI_Request requests[OUTSTANDING];
    wait_in_order(requests, post(comm, c, sbuf, rbuf, bytes, root, requests));
}

static void run_once(enum coll c, void *sbuf, void *rbuf, size_t bytes, int root)
{
    run_on(MPI_COMM_WORLD, c, sbuf, rbuf, bytes, root);
}

/* Seconds per call on this rank over n calls on comm, each followed by a barrier. */
static double timed_calls(MPI_Comm comm, enum coll c, void *sbuf, void *rbuf, size_t bytes, int root, long n)
{
    MPI_Barrier(comm);
    double total = 0.0;
    for (long i = 0; i < n; i++) {
        double t0 = now();
        run_on(comm, c, sbuf, rbuf, bytes, root);
        total += now() - t0;
        MPI_Barrier(comm);
    }
    return total / (double)n;
}

/* The barrier between the calls of a span sample: the same code in every
 * job, through the control page, so that which rank enters the next call last
 * (what the span starts from) does not depend on the implementation under
 * test, whose own MPI_Barrier releases ranks in its own order. Only the
 * measuring job's ranks use it, one job at a time. */
static void node_barrier(void)
{
    uint32_t released = atomic_load_explicit(&ctl->node_released, memory_order_acquire);
    if (atomic_fetch_add_explicit(&ctl->node_arrived, 1, memory_order_acq_rel) == (uint32_t)nranks - 1) {
        atomic_store_explicit(&ctl->node_arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&ctl->node_released, released + 1, memory_order_release);
        syscall(SYS_futex, &ctl->node_released, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        return;
    }
    double start = now();
    for (long polls = 0; atomic_load_explicit(&ctl->node_released, memory_order_acquire) == released; polls++) {
        if (polls < 2000) continue;
        if (atomic_load(&ctl->aborted)) fail("another job gave up; stopping too");
        struct timespec ts = {0, 200 * 1000 * 1000};
        syscall(SYS_futex, &ctl->node_released, FUTEX_WAIT, released, &ts, NULL, 0);
        if (now() - start > wait_limit_s) fail("waited too long in the span's barrier");
    }
}

static double monotonic_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank 0: seconds per call as the wall time of n calls, each followed by
 * node_barrier (see -S batch); the other ranks return 0. */
static double batched_calls(enum coll c, void *sbuf, void *rbuf, size_t bytes, int root, long n)
{
    node_barrier();
    double t0 = monotonic_s();
    for (long i = 0; i < n; i++) {
        run_once(c, sbuf, rbuf, bytes, root);
        node_barrier();
    }
    return rank == 0 ? (monotonic_s() - t0) / (double)n : 0.0;
}

/* The figure of a span sample from every rank's entry and exit times
 * (rank r's n marks at [r * n, (r + 1) * n)): the mean span, or with evened
 * set the mean over the last-entering ranks (those last in at least 1 % of
 * the calls) of their calls' mean span. */
static double span_figure(const double *entries, const double *exits, int nr, long n, int evened)
{
    double *class_sum = calloc((size_t)nr, sizeof(double));
    long *class_calls = calloc((size_t)nr, sizeof(long));
    if (!class_sum || !class_calls) fail("out of memory for the span figure");
    double total = 0.0;
    for (long i = 0; i < n; i++) {
        int last = 0;
        double last_exit = exits[i];
        for (int r = 1; r < nr; r++) {
            if (entries[(size_t)r * n + i] > entries[(size_t)last * n + i]) last = r;
            if (exits[(size_t)r * n + i] > last_exit) last_exit = exits[(size_t)r * n + i];
        }
        double span = last_exit - entries[(size_t)last * n + i];
        if (span < 0.0) span = 0.0;
        total += span;
        class_sum[last] += span;
        class_calls[last]++;
    }
    double figure = total / (double)n;
    if (evened) {
        double sum = 0.0;
        int classes = 0;
        for (int r = 0; r < nr; r++)
            if (class_calls[r] > 0 && class_calls[r] * 100 >= n) { sum += class_sum[r] / (double)class_calls[r]; classes++; }
        if (classes > 0) figure = sum / classes;
    }
    free(class_sum);
    free(class_calls);
    return figure;
}

/* The sizes of -m: MIN[:MAX], each FACTOR times the last (0 is followed by
 * 1), or SIZE,SIZE... in the order given. Returns how many (at most max), or
 * -1 with *why saying what is wrong with spec. */
static int parse_sizes(const char *spec, size_t factor, size_t *out, int max, const char **why)
{
    char *end;
    int n = 0;
    if (strchr(spec, ',')) {
        for (const char *p = spec;; p = end + 1) {
            if (*p < '0' || *p > '9') { *why = "-m SIZE,SIZE...: every size must be a number of bytes"; return -1; }
            size_t size = strtoul(p, &end, 0);
            if (*end != ',' && *end != '\0') { *why = "-m SIZE,SIZE...: every size must be a number of bytes"; return -1; }
            if (n == max) { *why = "too many sizes for -m"; return -1; }
            out[n++] = size;
            if (*end == '\0') return n;
        }
    }
    if (*spec < '0' || *spec > '9') { *why = "-m takes MIN[:MAX] or SIZE,SIZE... (bytes)"; return -1; }
    size_t min_size = strtoul(spec, &end, 0), max_size = min_size;
    if (*end == ':') {
        const char *p = end + 1;
        if (*p < '0' || *p > '9') { *why = "-m takes MIN[:MAX] or SIZE,SIZE... (bytes)"; return -1; }
        max_size = strtoul(p, &end, 0);
    }
    if (*end != '\0') { *why = "-m takes MIN[:MAX] or SIZE,SIZE... (bytes)"; return -1; }
    if (max_size < min_size) { *why = "-m MIN:MAX with MAX < MIN"; return -1; }
    for (size_t size = min_size;; size = size ? size * factor : 1) {
        if (n == max) { *why = "too many sizes for -m and -f"; return -1; }
        out[n++] = size;
        if (size >= max_size || (size ? size * factor : 1) > max_size) break;
    }
    return n;
}

/* parse_sizes on specs whose sizes are written out by hand; 0 if all match. */
static int sizes_self_test(void)
{
    static const struct { const char *spec; size_t factor; int n; size_t want[6]; } cases[] = {
        {"4:1024", 4, 5, {4, 16, 64, 256, 1024}},
        {"0:8", 2, 5, {0, 1, 2, 4, 8}},
        {"4:100", 4, 3, {4, 16, 64}},
        {"8", 4, 1, {8}},
        {"4,4096,65536,1048576", 4, 4, {4, 4096, 65536, 1048576}},
        {"64,8", 4, 2, {64, 8}},
        {"16:8", 4, -1, {0}},
        {"8,,16", 4, -1, {0}},
        {"8,x", 4, -1, {0}},
        {"8:", 4, -1, {0}},
        {"8k", 4, -1, {0}},
        {"", 4, -1, {0}},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t got[MAX_SIZES];
        const char *why = NULL;
        int n = parse_sizes(cases[i].spec, cases[i].factor, got, MAX_SIZES, &why);
        int same = n == cases[i].n && (n >= 0 || why != NULL);
        for (int k = 0; same && k < n; k++) same = got[k] == cases[i].want[k];
        if (!same) {
            fprintf(stderr, "sizes of -m '%s' -f %zu: got %d size(s)", cases[i].spec, cases[i].factor, n);
            for (int k = 0; k < n; k++) fprintf(stderr, " %zu", got[k]);
            fprintf(stderr, ", want %d\n", cases[i].n);
            bad = 1;
        }
    }
    size_t got[3];
    const char *why = NULL;
    if (parse_sizes("1:1048576", 2, got, 3, &why) != -1) { fprintf(stderr, "21 sizes fitted in room for 3\n"); bad = 1; }
    printf("coll_pairs self-test: %s\n", bad ? "FAILED" : "passed (sizes of -m)");
    return bad;
}

/* 0 if got is want (to rounding), else says which case missed and returns 1 */
static int off_by(const char *what, double got, double want)
{
    if (got > want - 1e-9 && got < want + 1e-9) return 0;
    fprintf(stderr, "%s: got %.6f, want %.6f\n", what, got, want);
    return 1;
}

/* span_figure on made-up marks whose answers are worked out by hand;
 * 0 if every answer matches. */
static int span_self_test(void)
{
    /* 3 ranks, 5 calls: last to enter (span) rank 2 (3 - 1 = 2), rank 0
     * (4 - 1 = 3), rank 0 (5 - 2 = 3), rank 2 (2 - 3 < 0: 0), rank 0
     * (3 - 2 = 1). Mean 9/5; evened: rank 0 (3 + 3 + 1) / 3, rank 2
     * (2 + 0) / 2, so (7/3 + 1) / 2 = 5/3. */
    const double entries[15] = {0, 1, 2, 0, 2,   0.5, 0, 0, 0, 1,   1, 0, 0, 3, 0};
    const double exits[15] = {3, 2, 5, 1, 3,   2, 4, 1, 1, 3,   1.5, 1, 2, 2, 3};
    int bad = off_by("span", span_figure(entries, exits, 3, 5, 0), 1.8);
    bad |= off_by("evened", span_figure(entries, exits, 3, 5, 1), 5.0 / 3);
    /* 2 ranks, 200 calls: rank 0 last 199 times (span 1), rank 1 once
     * (span 100), under 1 % of the calls: evened leaves it out (1), the
     * mean keeps it ((199 + 100) / 200). */
    double e2[400], x2[400];
    for (int i = 0; i < 200; i++) { e2[i] = 1; e2[200 + i] = 0; x2[i] = 2; x2[200 + i] = 0; }
    e2[199] = 0; e2[399] = 1; x2[199] = 0; x2[399] = 101;
    bad |= off_by("evened, rare class", span_figure(e2, x2, 2, 200, 1), 1.0);
    bad |= off_by("span, rare class", span_figure(e2, x2, 2, 200, 0), 1.495);
    printf("coll_pairs self-test: %s\n", bad ? "FAILED" : "passed (span and evened figures)");
    return bad;
}

/* -M overlap: the OSU-style overlap figure of a sample of n calls. Each
 * rank first times n calls posted then waited for (pure: communication
 * only), then n calls with a computation between post and wait: a spin for
 * the slowest rank's pure time that makes no MPI call, so only what the
 * post did and what progresses by itself overlaps it. From the means over
 * the ranks of the times per call, overlap % = 100 (1 - (total - compute)
 * / pure): 100 when the communication hid behind the computation entirely,
 * 0 when none of it did, below 0 when the computation delayed it (kept, not
 * clamped: a paired median should see it). */
struct overlap {
    double pure, total, compute; /* seconds per call */
};

static double overlap_percent(struct overlap o)
{
    return o.pure > 0 ? 100.0 * (1.0 - (o.total - o.compute) / o.pure) : 0.0;
}

static void spin_for(double seconds)
{
    double t0 = monotonic_s();
    while (monotonic_s() - t0 < seconds) {
    }
}

/* The means over comm's ranks of the sample's pure, total and compute times. */
static struct overlap overlapped_calls(MPI_Comm comm, enum coll c, void *sbuf, void *rbuf, size_t bytes, int root, long n)
{
    struct overlap mine = {timed_calls(comm, c, sbuf, rbuf, bytes, root, n), 0.0, 0.0}, mean;
    double slowest_pure = 0.0;
    MPI_Allreduce(&mine.pure, &slowest_pure, 1, MPI_DOUBLE, MPI_MAX, comm);
    MPI_Request requests[OUTSTANDING];
    MPI_Barrier(comm);
    for (long i = 0; i < n; i++) {
        double t0 = now();
        int pending = post(comm, c, sbuf, rbuf, bytes, root, requests);
        double t1 = now();
        spin_for(slowest_pure);
        double t2 = now();
        wait_in_order(requests, pending);
        mine.total += now() - t0;
        mine.compute += t2 - t1;
        MPI_Barrier(comm);
    }
    mine.total /= (double)n;
    mine.compute /= (double)n;
    double sums[3], times[3] = {mine.pure, mine.total, mine.compute};
    MPI_Allreduce(times, sums, 3, MPI_DOUBLE, MPI_SUM, comm);
    mean.pure = sums[0] / nranks;
    mean.total = sums[1] / nranks;
    mean.compute = sums[2] / nranks;
    return mean;
}

/* overlap_percent, blocking_form and counted_as against answers worked out
 * by hand; 0 if all match. */
static int forms_self_test(void)
{
    static const struct { struct overlap o; double want; } cases[] = {
        {{10, 12, 10}, 80.0},  /* 2 of 10 us left exposed */
        {{10, 20, 10}, 0.0},   /* none hidden */
        {{10, 10.5, 10.5}, 100.0}, /* all hidden */
        {{10, 25, 10}, -50.0}, /* the computation delayed it by half */
        {{4, 9, 6}, 25.0},
        {{0, 1, 1}, 0.0},      /* no pure time: no figure */
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "overlap case %zu", i);
        bad |= off_by(what, overlap_percent(cases[i].o), cases[i].want);
    }
    static const struct { enum coll c, form; const char *counted; int persistent, copies; } kinds[] = {
        {C_IBARRIER, C_BARRIER, "ibarrier", 0, 1},
        {C_BARRIER_INIT, C_BARRIER, "barrier_init", 1, 1},
        {C_IBCAST, C_BCAST, "ibcast", 0, 1},
        {C_BCAST_INIT, C_BCAST, "bcast_init", 1, 1},
        {C_ALLREDUCE_INIT, C_ALLREDUCE, "allreduce_init", 1, 1},
        {C_REDUCE_INIT, C_REDUCE, "reduce_init", 1, 1},
        {C_IREDUCE, C_REDUCE, "ireduce", 0, 1},
        {C_IALLREDUCE_8REV, C_ALLREDUCE, "iallreduce", 0, OUTSTANDING},
        {C_ALLREDUCE, C_ALLREDUCE, "allreduce", 0, 1},
    };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        enum coll c = kinds[i].c;
        if (blocking_form(c) != kinds[i].form || strcmp(counted_as(c), kinds[i].counted) != 0 ||
            is_persistent(c) != kinds[i].persistent || result_copies(c) != kinds[i].copies) {
            fprintf(stderr, "%s: blocking form %s, counted as %s, persistent %d, %d result(s)\n", names[c],
                    names[blocking_form(c)], counted_as(c), is_persistent(c), result_copies(c));
            bad = 1;
        }
    }
    printf("coll_pairs self-test: %s\n", bad ? "FAILED" : "passed (overlap figure, forms of the collectives)");
    return bad;
}

/* Rank 0: seconds per call as the mean span of n calls (see -S span), or,
 * with evened set, the mean over the ranks that entered last of the mean span
 * of their calls (see -S evened); the other ranks return 0. Entry and exit
 * times go to rank 0 after the calls, outside the timed part. */
static double spanned_calls(enum coll c, void *sbuf, void *rbuf, size_t bytes, int root, long n, int evened)
{
    double *marks = malloc(2 * (size_t)n * sizeof(double));
    if (!marks) fail("out of memory for the span marks");
    double *entry = marks, *exit_ = marks + n;
    node_barrier();
    for (long i = 0; i < n; i++) {
        entry[i] = monotonic_s();
        run_once(c, sbuf, rbuf, bytes, root);
        exit_[i] = monotonic_s();
        node_barrier();
    }
    /* rank r's marks at [r * n, (r + 1) * n) */
    double *entries = NULL, *exits = NULL;
    if (rank == 0) {
        entries = malloc((size_t)nranks * (size_t)n * sizeof(double));
        exits = malloc((size_t)nranks * (size_t)n * sizeof(double));
        if (!entries || !exits) fail("out of memory for the span marks");
    }
    MPI_Gather(entry, (int)n, MPI_DOUBLE, entries, (int)n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(exit_, (int)n, MPI_DOUBLE, exits, (int)n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double figure = rank == 0 ? span_figure(entries, exits, nranks, n, evened) : 0.0;
    free(entries);
    free(exits);
    free(marks);
    return figure;
}

/* Warm-up: batches of doubling length until one takes a quarter of the
 * target; returns the number of calls for a sample of the target length
 * (the same on every rank: it comes from an allreduce). */
static long calibrate(MPI_Comm comm, enum coll c, void *sbuf, void *rbuf, size_t bytes, int root,
                      double target_s, long min_iters, long max_iters)
{
    for (long b = 1;; b *= 2) {
        double t0 = now();
        for (long i = 0; i < b; i++) {
            run_on(comm, c, sbuf, rbuf, bytes, root);
            MPI_Barrier(comm);
        }
        double el = now() - t0, slowest = 0.0;
        MPI_Allreduce(&el, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
        if (slowest >= target_s / 4 || b >= max_iters) {
            double per = slowest / (double)b;
            long n = per > 0 ? (long)(target_s / per) : max_iters;
            return n < min_iters ? min_iters : n > max_iters ? max_iters : n;
        }
    }
}

/* One call on known data on comm, its result checked on every rank; 1 if wrong. */
static int check(MPI_Comm comm, enum coll c, unsigned char *sbuf, unsigned char *rbuf, size_t bytes, int root)
{
    int bad = 0, any = 0;
    enum coll form = blocking_form(c);
    if (form == C_ALLREDUCE || form == C_REDUCE) {
        int count = (int)(bytes / sizeof(float));
        if (count < 1) count = 1;
        long results = (long)count * result_copies(c);
        float *sf = (float *)sbuf, *rf = (float *)rbuf;
        for (int j = 0; j < count; j++) sf[j] = 1.0f;
        for (long j = 0; j < results; j++) rf[j] = -1.0f;
        run_on(comm, c, sbuf, rbuf, bytes, root);
        if (form == C_ALLREDUCE || rank == root)
            for (long j = 0; j < results; j++)
                if (rf[j] != (float)nranks) { bad = 1; break; }
    } else if (form == C_BCAST && bytes > 0) {
        for (size_t j = 0; j < bytes; j++)
            sbuf[j] = rank == root ? (unsigned char)(j * 7 + bytes + (j >> 9)) : (unsigned char)~j;
        run_on(comm, c, sbuf, rbuf, bytes, root);
        for (size_t j = 0; j < bytes; j++)
            if (sbuf[j] != (unsigned char)(j * 7 + bytes + (j >> 9))) { bad = 1; break; }
    }
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm);
    return any;
}

/* One thread's share of every step (-H): its communicator (MPI_COMM_WORLD
 * when there is one thread), its buffers and what its last step gave. */
struct lane {
    MPI_Comm comm;
    unsigned char *sbuf, *rbuf;
    const struct step *step;
    long calls;     /* WARM_UP: calls for a sample of the target length */
    int wrong;      /* CHECK: the result was wrong on some rank */
    double seconds; /* SAMPLE: this rank's mean time per call */
};

/* What every lane does at once: warm up (and count the calls a sample
 * needs), check one result, or time a sample of calls. */
struct step {
    enum { WARM_UP, CHECK, SAMPLE } kind;
    enum coll c;
    size_t size, alloc;
    int root;
    double target_s;
    long min_iters, max_iters, calls;
};

static void *lane_run(void *arg)
{
    struct lane *l = arg;
    const struct step *st = l->step;
    switch (st->kind) {
    case WARM_UP:
        l->calls = calibrate(l->comm, st->c, l->sbuf, l->rbuf, st->size, st->root, st->target_s, st->min_iters, st->max_iters);
        break;
    case CHECK:
        l->wrong = check(l->comm, st->c, l->sbuf, l->rbuf, st->size, st->root);
        memset(l->sbuf, 1, st->alloc);
        break;
    case SAMPLE:
        l->seconds = timed_calls(l->comm, st->c, l->sbuf, l->rbuf, st->size, st->root, st->calls);
        break;
    }
    return NULL;
}

/* Runs step in every lane at once: lane 0 in this thread, the others in
 * threads of their own, joined before returning. */
static void run_lanes(struct lane *lanes, int nlanes, const struct step *step)
{
    pthread_t threads[nlanes];
    for (int i = 0; i < nlanes; i++) lanes[i].step = step;
    for (int i = 1; i < nlanes; i++)
        if (pthread_create(&threads[i], NULL, lane_run, &lanes[i]) != 0) fail("cannot start a thread");
    lane_run(&lanes[0]);
    for (int i = 1; i < nlanes; i++) pthread_join(threads[i], NULL);
}

#define PING_STOP (1ull << 63)

/* Ping values carry the floor's turn in their upper half: the jobs take turns
 * at the floor through the same two words, so a value left there by another
 * job's sample (or an earlier one) can never pass for an answer or a stop. */
static uint64_t ping_value(uint32_t turn, uint64_t i) { return ((uint64_t)turn << 32) | (i & 0xffffffffu); }

/* Testing only (--self-test): rank 1 pauses this long after each answer,
 * as a descheduled rank would; 0 in every measurement. */
static unsigned pong_pause_us;

/* Rank 0's side of the ping-pong: round trip in us. */
static double ping(long max_rt, uint32_t turn)
{
    long done = 0;
    double t0 = monotonic_s(), el = 0.0;
    while (done < max_rt) {
        uint64_t v = ping_value(turn, (uint64_t)done + 1);
        atomic_store_explicit(&ctl->ping, v, memory_order_release);
        while (atomic_load_explicit(&ctl->pong, memory_order_acquire) != v) {
        }
        done++;
        if ((done & 63) == 0 && (el = monotonic_s() - t0) > 5e-3) break;
    }
    el = monotonic_s() - t0;
    /* The stop is answered too: in the last round the next floor follows at
     * once, and its first ping must not overwrite this stop before rank 1
     * has read it (rank 1 would wait for this turn's stop forever). */
    uint64_t stop = PING_STOP | ping_value(turn, 0);
    atomic_store_explicit(&ctl->ping, stop, memory_order_release);
    while (atomic_load_explicit(&ctl->pong, memory_order_acquire) != stop) {
    }
    return el / (double)done * 1e6;
}

/* Rank 1's side: echoes every value of this turn, up to and including the
 * turn's stop marker; values of other turns are not answered, so a value
 * rank 0 writes before rank 1 arrives is still answered and a stale one is
 * not. */
static void pong(uint32_t turn)
{
    uint64_t last = 0;
    for (;;) {
        uint64_t v = atomic_load_explicit(&ctl->ping, memory_order_acquire);
        if (v == last || (uint32_t)((v & ~PING_STOP) >> 32) != turn) continue;
        last = v;
        atomic_store_explicit(&ctl->pong, v, memory_order_release);
        if (v & PING_STOP) return;
        if (pong_pause_us) usleep(pong_pause_us);
    }
}

static void *ping_turns(void *turns)
{
    for (uint32_t t = 1; t <= *(uint32_t *)turns; t++) ping(3, t);
    return NULL;
}

static void *pong_turns(void *turns)
{
    for (uint32_t t = 1; t <= *(uint32_t *)turns; t++) pong(t);
    return NULL;
}

/* Floors of consecutive turns back to back (the last round's floors: no MPI
 * call between them) with rank 1 pausing after each answer, as a descheduled
 * rank 1 does on a busy machine: every turn must end on both sides within
 * 10 s. 0 if so. */
static int floor_self_test(void)
{
    static struct control page;
    static uint32_t turns = 4;
    ctl = &page;
    pong_pause_us = 2000;
    pthread_t pinger, ponger;
    if (pthread_create(&pinger, NULL, ping_turns, &turns) || pthread_create(&ponger, NULL, pong_turns, &turns)) {
        fprintf(stderr, "cannot start the floor self-test's threads\n");
        return 1;
    }
    struct timespec limit;
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += 10;
    int bad = pthread_timedjoin_np(pinger, NULL, &limit) != 0 || pthread_timedjoin_np(ponger, NULL, &limit) != 0;
    if (bad) fprintf(stderr, "the floor's ping-pong did not end within 10 s: rank 1 missed a turn's stop\n");
    printf("coll_pairs self-test: %s\n", bad ? "FAILED" : "passed (floors back to back, rank 1 descheduled)");
    /* a failed run leaves its threads spinning on page: the caller exits */
    return bad;
}

/* us per memcpy of bytes, repeated for at least 1 ms. */
static double memcpy_us(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0) return 0.0;
    memcpy(dst, src, bytes);
    for (long reps = 1;; reps *= 2) {
        double t0 = now();
        for (long i = 0; i < reps; i++) {
            memcpy(dst, src, bytes);
            /* keeps the compiler from merging or dropping the copies */
            __asm__ __volatile__("" : : "r"(dst) : "memory");
        }
        double el = now() - t0;
        if (el >= 1e-3 || reps >= (1l << 24)) return el / (double)reps * 1e6;
    }
}

static void usage_exit(const char *msg)
{
    if (rank == 0) {
        if (msg) fprintf(stderr, "coll_pairs: %s\n", msg);
        fprintf(stderr, "usage: coll_pairs -J JOB -K NJOBS -C CONTROL_FILE [-c barrier|allreduce|"
                        "reduce|bcast|ibarrier|iallreduce|ireduce|ibcast|barrier_init|allreduce_init|reduce_init|bcast_init|"
                        "iallreduce_8rev] [-m MIN[:MAX]|SIZE,SIZE...] [-f FACTOR] [-P ROUNDS] [-t SAMPLE_MS] "
                        "[-i MAX_ITERS] [-n MIN_ITERS] [-p PINGPONG_MAX] [-r ROOT] [-T WAIT_S] [-S slowest|span|evened|batch] "
                        "[-H THREADS] [-M latency|overlap]\n");
    }
    MPI_Finalize();
    exit(msg ? 2 : 0);
}

int main(int argc, char **argv)
{
    /* no MPI: checks the arithmetic of the span figures (make check) */
    if (argc == 2 && strcmp(argv[1], "--self-test") == 0) return span_self_test() | sizes_self_test() | forms_self_test() | floor_self_test();
    /* -H (read here, before MPI is initialised; checked with the other
     * options) */
    int nlanes = 1;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "-H") == 0) nlanes = atoi(argv[i + 1]);
    /* COLL_PAIRS_THREAD_LEVEL=multiple: initialise at MPI_THREAD_MULTIPLE
     * (one thread still makes every call), to price that level against
     * the default in another job; -H 2 or more needs that level */
    const char *level = getenv("COLL_PAIRS_THREAD_LEVEL");
    if ((level && strcmp(level, "multiple") == 0) || nlanes > 1) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided < MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "coll_pairs: MPI_THREAD_MULTIPLE asked for, %d provided\n", provided);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    enum coll c = C_ALLREDUCE;
    size_t factor = 4;
    const char *size_spec = "8";
    long rounds = 21, min_iters = 1, max_iters = 100000, pp_max = 20000;
    double target_ms = 20.0;
    int root = 0;
    const char *ctl_path = NULL;
    enum figure { SLOWEST, SPAN, EVENED, BATCH } figure = SLOWEST;
    int overlap_mode = 0;
    job = -1;
    njobs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) usage_exit(NULL);
        if (!v) usage_exit("option without a value");
        i++;
        if (strcmp(a, "-c") == 0) {
            int found = 0;
            for (int k = 0; k < C_NCOLLS; k++)
                if (strcmp(v, names[k]) == 0) { c = (enum coll)k; found = 1; }
            if (!found) usage_exit("unknown collective");
        } else if (strcmp(a, "-m") == 0) size_spec = v;
        else if (strcmp(a, "-f") == 0) {
            factor = strtoul(v, NULL, 0);
            if (factor < 2) usage_exit("-f FACTOR must be at least 2");
        } else if (strcmp(a, "-P") == 0) rounds = atol(v);
        else if (strcmp(a, "-t") == 0) target_ms = atof(v);
        else if (strcmp(a, "-i") == 0) max_iters = atol(v);
        else if (strcmp(a, "-n") == 0) min_iters = atol(v);
        else if (strcmp(a, "-p") == 0) pp_max = atol(v);
        else if (strcmp(a, "-r") == 0) root = atoi(v);
        else if (strcmp(a, "-T") == 0) wait_limit_s = atof(v);
        else if (strcmp(a, "-J") == 0) job = atoi(v);
        else if (strcmp(a, "-K") == 0) njobs = atoi(v);
        else if (strcmp(a, "-C") == 0) ctl_path = v;
        else if (strcmp(a, "-H") == 0) { /* read before MPI_Init */ }
        else if (strcmp(a, "-M") == 0) {
            if (strcmp(v, "overlap") == 0) overlap_mode = 1;
            else if (strcmp(v, "latency") != 0) usage_exit("-M takes latency or overlap");
        }
        else if (strcmp(a, "-S") == 0) {
            if (strcmp(v, "span") == 0) figure = SPAN;
            else if (strcmp(v, "evened") == 0) figure = EVENED;
            else if (strcmp(v, "batch") == 0) figure = BATCH;
            else if (strcmp(v, "slowest") != 0) usage_exit("-S takes slowest, span, evened or batch");
        }
        else usage_exit("unknown option");
    }
    if (!ctl_path || njobs < 2 || job < 0 || job >= njobs) usage_exit("-J, -K (>= 2) and -C are needed");
    if (nranks < 2) usage_exit("needs 2 ranks or more (the floor is a ping-pong between ranks 0 and 1)");
    if (rounds < 1 || max_iters < 1 || max_iters > INT_MAX || pp_max < 1 || target_ms <= 0) usage_exit("bad -P, -i, -p or -t");
    if (min_iters < 1 || min_iters > max_iters) usage_exit("bad -n (1 up to -i)");
    if (root < 0 || root >= nranks) usage_exit("root out of range");
    if (nlanes < 1 || nlanes > 16) usage_exit("bad -H (1 to 16 threads)");
    if (nlanes > 1 && figure != SLOWEST) usage_exit("-H with 2 threads or more takes -S slowest only");
    /* COLL_PAIRS_BLOCKING=1: the blocking call that -c's collective is a
     * form of, so that a job of it pairs with one of the non-blocking or
     * persistent form (ci/bench/nonblocking.sh) */
    const char *blocking = getenv("COLL_PAIRS_BLOCKING");
    if (blocking && strcmp(blocking, "1") == 0) c = blocking_form(c);
    if (nlanes > 1 && is_persistent(c)) usage_exit("-H with 2 threads or more takes no persistent collective");
    if (overlap_mode && (nlanes > 1 || figure != SLOWEST || c == blocking_form(c) || is_persistent(c) || c == C_IALLREDUCE_8REV))
        usage_exit("-M overlap takes ibarrier, ibcast, iallreduce or ireduce, -S slowest and -H 1");
    size_t sizes[MAX_SIZES];
    const char *why = NULL;
    int nsizes = parse_sizes(size_spec, factor, sizes, MAX_SIZES, &why);
    if (nsizes < 0) usage_exit(why);
    if (blocking_form(c) == C_BARRIER) { sizes[0] = 0; nsizes = 1; }
    size_t max_size = 0;
    for (int z = 0; z < nsizes; z++)
        if (sizes[z] > max_size) max_size = sizes[z];

    int fd = open(ctl_path, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0) fail("cannot open the control file");
    ctl = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ctl == MAP_FAILED) { ctl = NULL; fail("cannot map the control file"); }
    close(fd);

    size_t alloc = max_size < sizeof(float) ? sizeof(float) : max_size;
    struct lane lanes[nlanes];
    memset(lanes, 0, sizeof lanes);
    for (int i = 0; i < nlanes; i++) {
        size_t results_alloc = alloc * (size_t)result_copies(c);
        if (posix_memalign((void **)&lanes[i].sbuf, 4096, alloc) || posix_memalign((void **)&lanes[i].rbuf, 4096, results_alloc))
            fail("out of memory");
        memset(lanes[i].sbuf, 1, alloc);
        memset(lanes[i].rbuf, 0, results_alloc);
        lanes[i].comm = MPI_COMM_WORLD;
        if (nlanes > 1) {
            char name[64];
            MPI_Comm_dup(MPI_COMM_WORLD, &lanes[i].comm);
            snprintf(name, sizeof name, "coll_pairs thread %d", i);
            MPI_Comm_set_name(lanes[i].comm, name);
        }
    }
    unsigned char *sbuf = lanes[0].sbuf, *rbuf = lanes[0].rbuf;

    if (rank == 0) {
        printf("# coll_pairs: %s, job %d of %d, %d rank(s) of %d thread(s), %ld rounds, %.1f ms samples, figure: %s\n",
               names[c], job, njobs, nranks, nlanes, rounds, target_ms,
               figure == SPAN    ? "mean span from the last entry to the last exit"
               : figure == EVENED ? "mean span, each rank's calls as the last to enter weighted alike"
               : figure == BATCH ? "wall time per call and the barrier after it"
               : overlap_mode    ? "mean over the ranks of the time per call not hidden by the computation (total - compute)"
                                 : "slowest rank's mean time per call");
        printf("# counted as: %s\n", counted_as(c));
        fflush(stdout);
    }
    wait_for_every_job();
    int wrong = 0;
    uint32_t t = 0; /* the schedule is the same in every job: turn t belongs to one job */
    /* Every size's rounds are spread over the whole series: a round samples
     * every size once. With the rounds of one size back to back (about 1.5 s),
     * a row's pairs all fell into one of the VM's core placements, which last
     * seconds and change the ratio itself, so two runs disagreed by up to 40 %
     * on a row; spread over the series, each row sees the run's mixture. */
    long calls[MAX_SIZES];
    for (int z = 0; z < nsizes; z++) {
        size_t size = sizes[z];
        for (int j = 0; j < njobs; j++, t++) {
            if (j != job) continue;
            wait_turn(t);
            struct step step = {WARM_UP, c, size, alloc, root, target_ms * 1e-3, min_iters, max_iters, 0};
            /* The first calls of a job also set up its communicator's
             * resources (windows, connections): a warm-up of its own. */
            if (z == 0) run_lanes(lanes, nlanes, &step);
            run_lanes(lanes, nlanes, &step);
            calls[z] = lanes[0].calls;
            if (nlanes > 1) { /* the same count in every thread of every rank: the samples overlap */
                long fewest = lanes[0].calls;
                for (int i = 1; i < nlanes; i++)
                    if (lanes[i].calls < fewest) fewest = lanes[i].calls;
                MPI_Allreduce(&fewest, &calls[z], 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
            }
            step.kind = CHECK;
            run_lanes(lanes, nlanes, &step);
            for (int i = 0; i < nlanes; i++) {
                if (!lanes[i].wrong) continue;
                wrong = 1;
                if (rank == 0) printf("# WRONG RESULT: %s of %zu bytes (thread %d)\n", names[c], size, i);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) pass_turn(t);
        }
    }
    for (long k = 0; k <= rounds; k++) {
        /* The floor's two ranks come out of it awake and hot: when one job
         * measured every floor, an identical second job (coll rdma against
         * itself, quiet machine) came out 1.03-1.15x slower at every size.
         * So the floor passes from job to job every two rounds, once
         * before each order of the jobs. */
        int floor_job = (int)((k / 2) % njobs);
        for (int z = 0; z < nsizes; z++) {
            size_t size = sizes[z];
            if (job == floor_job && rank <= 1) { /* the floor, before round k and after the last */
                wait_turn(t);
                if (rank == 1) pong(t);
                else {
                    double rt = ping(pp_max, t), mc = memcpy_us(rbuf, sbuf, size);
                    printf("floor %zu %ld %.4f %.3f\n", size, k, rt, mc);
                    pass_turn(t);
                }
            }
            t++;
            if (k == rounds) continue;
            for (int q = 0; q < njobs; q++, t++) {
                int j = k % 2 == 0 ? q : njobs - 1 - q;
                if (j != job) continue;
                wait_turn(t);
                double slowest = 0.0;
                if (figure == SPAN || figure == EVENED) slowest = spanned_calls(c, sbuf, rbuf, size, root, calls[z], figure == EVENED);
                else if (figure == BATCH) slowest = batched_calls(c, sbuf, rbuf, size, root, calls[z]);
                else if (overlap_mode) {
                    struct overlap o = overlapped_calls(MPI_COMM_WORLD, c, sbuf, rbuf, size, root, calls[z]);
                    slowest = o.total - o.compute;
                    if (rank == 0)
                        printf("overlap %d %s %zu %ld %.2f %.4f %.4f %.4f\n", job, names[c], size, k, overlap_percent(o),
                               o.pure * 1e6, o.total * 1e6, o.compute * 1e6);
                } else {
                    struct step step = {SAMPLE, c, size, alloc, root, 0.0, 0, 0, calls[z]};
                    run_lanes(lanes, nlanes, &step);
                    double mine = lanes[0].seconds;
                    for (int i = 1; i < nlanes; i++)
                        if (lanes[i].seconds > mine) mine = lanes[i].seconds;
                    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                }
                MPI_Barrier(MPI_COMM_WORLD);
                if (rank == 0) {
                    printf("sample %d %s %zu %ld %.4f %ld\n", job, names[c], size, k, slowest * 1e6, calls[z]);
                    pass_turn(t);
                }
            }
        }
        if (rank == 0) fflush(stdout);
    }
    free_planned();
    for (int i = 0; i < nlanes; i++) {
        if (nlanes > 1) MPI_Comm_free(&lanes[i].comm);
        free(lanes[i].sbuf);
        free(lanes[i].rbuf);
    }
    munmap(ctl, 4096);
    MPI_Finalize();
    return wrong ? 3 : 0;
}
