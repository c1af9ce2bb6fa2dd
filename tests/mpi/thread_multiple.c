/*
 * thread_multiple: under MPI_THREAD_MULTIPLE, worker threads each run
 * collectives on their own communicator at the same time (barrier; bcast
 * with moving roots at sizes for the window and for single copy; allreduce
 * and reduce short and long), every result checked against a value computed
 * locally; short and medium allreduces also as MPI_Iallreduce waited for at
 * once, so that the workers' MPI_Waits poll their communicators' runs at
 * the same time (coll rdma's own wait, glue/own_wait.rs). Meanwhile one
 * thread polls MPI_Iprobe and MPI_Test, and another creates, uses and
 * frees communicators.
 *
 * With -e the program misuses MPI on purpose: two threads of rank 0 call
 * MPI_Barrier on one communicator at once, while the other ranks never do
 * (they wait in MPI_Recv), so one of the two is certainly inside when the
 * other comes; the job must end with coll rdma's diagnostic, not hang.
 *
 * Options: -t <worker threads> (default 4), -i <iterations per thread> (40),
 *          -c <communicators created and freed> (30), -e (the misuse).
 * Output: "result: rank R failures F barriers B", "FAIL: ..." per problem.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int me, n, iterations = 40, lifecycles = 30;
static int workers_done; /* guarded by done_lock: main sets it, the poller reads it */
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;

/* Bcast lengths in ints: inside the window (a few slots, and one of many
 * slots) and above coll_rdma_bcast_single_copy_min_bytes. */
static const int bcast_counts[] = {1, 16, 3000, 40000, 300000};
/* Reduction lengths in longs: the tree (8 B, 4 KiB) and the parallel or
 * ring paths (64 KiB, 1 MiB). */
static const int reduce_counts[] = {1, 512, 8192, 131072};
#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

struct worker {
    MPI_Comm comm;
    int index, failures, barriers;
};

static int done(void)
{
    pthread_mutex_lock(&done_lock);
    int d = workers_done;
    pthread_mutex_unlock(&done_lock);
    return d;
}

static void fail(struct worker *w, const char *what, int it, long at, long got, long want)
{
    if (w->failures++ < 5)
        printf("FAIL: rank %d: thread %d %s of iteration %d: element %ld is %ld, expected %ld\n", me, w->index, what,
               it, at, got, want);
}

static long bcast_value(int thread, int it, int root, long j) { return (long)thread * 1000003 + it * 7919 + root * 31 + j; }
static long rank_value(int rank, int thread, int it, long j) { return (long)(rank + 1) * (j % 977 + 1) + thread * 13 + it; }

static void check_bcasts(struct worker *w, int it)
{
    int *v = malloc(sizeof(int) * 300000);
    for (int k = 0; k < NELEMS(bcast_counts); k++) {
        int count = bcast_counts[k], root = (it + w->index + k) % n;
        for (int j = 0; j < count; j++) v[j] = me == root ? (int)bcast_value(w->index, it, root, j) : -1;
        MPI_Bcast(v, count, MPI_INT, root, w->comm);
        for (int j = 0; j < count; j++)
            if (v[j] != (int)bcast_value(w->index, it, root, j)) {
                fail(w, "bcast", it, j, v[j], (int)bcast_value(w->index, it, root, j));
                break;
            }
    }
    free(v);
}

static void check_reductions(struct worker *w, int it)
{
    long *in = malloc(sizeof(long) * 131072), *out = malloc(sizeof(long) * 131072);
    for (int k = 0; k < NELEMS(reduce_counts); k++) {
        int count = reduce_counts[k], root = (it + k) % n;
        for (long j = 0; j < count; j++) in[j] = rank_value(me, w->index, it, j);
        MPI_Allreduce(in, out, count, MPI_LONG, MPI_SUM, w->comm);
        for (long j = 0; j < count; j++) {
            long want = 0;
            for (int r = 0; r < n; r++) want += rank_value(r, w->index, it, j);
            if (out[j] != want) { fail(w, "allreduce", it, j, out[j], want); break; }
        }
        if (count <= 512) {
            MPI_Request request;
            for (long j = 0; j < count; j++) out[j] = -1;
            MPI_Iallreduce(in, out, count, MPI_LONG, MPI_SUM, w->comm, &request);
            MPI_Wait(&request, MPI_STATUS_IGNORE);
            for (long j = 0; j < count; j++) {
                long want = 0;
                for (int r = 0; r < n; r++) want += rank_value(r, w->index, it, j);
                if (out[j] != want) { fail(w, "iallreduce", it, j, out[j], want); break; }
            }
        }
        for (long j = 0; j < count; j++) out[j] = -1;
        MPI_Reduce(in, out, count, MPI_LONG, MPI_MAX, root, w->comm);
        if (me == root)
            for (long j = 0; j < count; j++) {
                long want = rank_value(n - 1, w->index, it, j);
                if (out[j] != want) { fail(w, "reduce", it, j, out[j], want); break; }
            }
    }
    free(in);
    free(out);
}

static void *run_worker(void *arg)
{
    struct worker *w = arg;
    for (int it = 0; it < iterations; it++) {
        if (MPI_Barrier(w->comm) == MPI_SUCCESS) w->barriers++;
        check_bcasts(w, it);
        check_reductions(w, it);
    }
    return NULL;
}

/* Drives MPI's progress from another thread all the while: MPI_Iprobe for a
 * message nobody sends, and MPI_Test on a receive that main completes at
 * the end (a send to itself), which must not complete before. */
static void *run_poller(void *arg)
{
    struct worker *w = arg;
    int token = -1, flag = 0;
    MPI_Request req;
    MPI_Irecv(&token, 1, MPI_INT, me, 2, MPI_COMM_WORLD, &req);
    long polls = 0;
    for (;;) {
        MPI_Iprobe(MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        if (flag) { printf("FAIL: rank %d: MPI_Iprobe found a message nobody sent\n", me); w->failures++; break; }
        MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        if (flag) {
            /* main sends only once the workers are done */
            if (!done()) { printf("FAIL: rank %d: the receive completed before its send\n", me); w->failures++; }
            break;
        }
        polls++;
    }
    if (!flag) MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (token != me * 7 + 1) { printf("FAIL: rank %d: the polled receive got %d\n", me, token); w->failures++; }
    printf("info: rank %d: the poller polled %ld times\n", me, polls);
    return NULL;
}

/* Creates a communicator from its own parent, uses it, frees it, again and
 * again, while the workers run. Every other one by MPI_Comm_idup with a
 * barrier on the parent before the wait: Open MPI's agreement on the new
 * context id (an MPI_Iallreduce on the parent) may then be posted by any
 * thread's progress, the poller's, while this one is inside the barrier. */
static void *run_lifecycle(void *arg)
{
    struct worker *w = arg;
    for (int it = 0; it < lifecycles; it++) {
        MPI_Comm c;
        if (it % 2) {
            MPI_Request request;
            MPI_Comm_idup(w->comm, &c, &request);
            if (MPI_Barrier(w->comm) == MPI_SUCCESS) w->barriers++;
            MPI_Wait(&request, MPI_STATUS_IGNORE);
        } else {
            MPI_Comm_dup(w->comm, &c);
        }
        if (MPI_Barrier(c) == MPI_SUCCESS) w->barriers++;
        long mine = me + it, sum = -1;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, c);
        if (sum != (long)n * (n - 1) / 2 + (long)n * it) fail(w, "lifecycle allreduce", it, 0, sum, (long)n * (n - 1) / 2 + (long)n * it);
        MPI_Comm_free(&c);
    }
    return NULL;
}

static void *misuse_barrier(void *arg)
{
    MPI_Barrier(*(MPI_Comm *)arg);
    return NULL;
}

static int misuse(void)
{
    MPI_Comm shared;
    MPI_Comm_dup(MPI_COMM_WORLD, &shared);
    MPI_Comm_set_name(shared, "shared by two threads");
    MPI_Barrier(shared); /* connected before the misuse */
    if (me == 0) {
        printf("info: rank 0: two threads enter MPI_Barrier on one communicator\n");
        pthread_t a, b;
        pthread_create(&a, NULL, misuse_barrier, &shared);
        pthread_create(&b, NULL, misuse_barrier, &shared);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    } else {
        int never;
        MPI_Recv(&never, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    printf("FAIL: rank %d: the misuse was not stopped\n", me);
    return 1;
}

int main(int argc, char **argv)
{
    int threads = 4, opt, provided, erroneous = 0;
    while ((opt = getopt(argc, argv, "t:i:c:e")) != -1) {
        if (opt == 't') threads = atoi(optarg);
        else if (opt == 'i') iterations = atoi(optarg);
        else if (opt == 'c') lifecycles = atoi(optarg);
        else if (opt == 'e') erroneous = 1;
        else { fprintf(stderr, "usage: %s [-t threads] [-i iterations] [-c communicators] [-e]\n", argv[0]); return 2; }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int failures = 0, barriers = 0;
    if (provided < MPI_THREAD_MULTIPLE) {
        printf("FAIL: rank %d: MPI_THREAD_MULTIPLE not provided (%d)\n", me, provided);
        failures++;
        threads = 0;
    } else if (erroneous) {
        return misuse();
    }
    /* workers, then the lifecycle thread's parent, then the poller */
    int all = threads ? threads + 2 : 0;
    struct worker *w = calloc((size_t)all + 1, sizeof *w);
    pthread_t *tid = calloc((size_t)all + 1, sizeof *tid);
    for (int t = 0; t < all; t++) {
        w[t].index = t;
        if (t <= threads) {
            MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm);
            char name[64];
            snprintf(name, sizeof name, t < threads ? "worker %d" : "lifecycle parent", t);
            MPI_Comm_set_name(w[t].comm, name);
        }
    }
    for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, run_worker, &w[t]);
    if (threads) {
        pthread_create(&tid[threads], NULL, run_lifecycle, &w[threads]);
        pthread_create(&tid[threads + 1], NULL, run_poller, &w[threads + 1]);
    }
    for (int t = 0; t <= threads && t < all; t++) pthread_join(tid[t], NULL);
    if (threads) {
        pthread_mutex_lock(&done_lock);
        workers_done = 1;
        pthread_mutex_unlock(&done_lock);
        int token = me * 7 + 1;
        MPI_Send(&token, 1, MPI_INT, me, 2, MPI_COMM_WORLD);
        pthread_join(tid[threads + 1], NULL);
    }
    for (int t = 0; t < all; t++) {
        failures += w[t].failures;
        barriers += w[t].barriers;
        if (t <= threads) MPI_Comm_free(&w[t].comm);
    }
    printf("result: rank %d failures %d barriers %d\n", me, failures, barriers);
    MPI_Finalize();
    return failures ? 1 : 0;
}
