/*
 * thread_serialized: under MPI_THREAD_SERIALIZED two threads of every rank
 * take turns in MPI, passing a baton (a mutex and a condition variable,
 * which order their memory as MPI requires). In its turn a thread completes
 * the non-blocking collectives the other thread posted in its turn, checks
 * their results against values computed locally, runs a blocking
 * MPI_Allreduce, and posts the next ones: MPI_Iallreduce, MPI_Ireduce and
 * MPI_Ibcast with moving roots, MPI_Ibarrier, and every fifth turn 8
 * MPI_Iallreduce at once, completed in reverse. So a communicator's state,
 * its requests and coll rdma's request pool pass from thread to thread
 * between calls, which below MPI_THREAD_MULTIPLE coll rdma guards with
 * plain loads and stores (glue/thread_level.rs).
 *
 * Options: -i <turns> (default 200).
 * Output: "result: rank R failures F turns T", "FAIL: ..." per problem.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define COUNT 3
#define BATCH 8

static int me, n, turns = 200, failures;
static pthread_mutex_t baton_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t baton_moved = PTHREAD_COND_INITIALIZER;
static int holder; /* guarded by baton_lock: the thread whose turn it is */

/* What the previous turn posted, for the next turn to complete. */
enum kind { K_IALLREDUCE, K_IREDUCE, K_IBCAST, K_IBARRIER, K_BATCH, K_KINDS };
static struct {
    enum kind kind;
    int turn, root;
    long send[BATCH][COUNT], recv[BATCH][COUNT];
    MPI_Request requests[BATCH];
    int outstanding;
} posted;

static long value(int rank, int turn, int call, int j) { return (long)rank * 1000003 + (long)turn * 7919 + call * 131 + j; }

static long sum_over_ranks(int turn, int call, int j)
{
    long total = 0;
    for (int r = 0; r < n; r++) total += value(r, turn, call, j);
    return total;
}

static void fail(const char *what, int turn, int call, int j, long got, long want)
{
    if (failures++ < 5)
        printf("FAIL: rank %d: %s of turn %d, call %d, element %d is %ld, expected %ld\n", me, what, turn, call, j, got,
               want);
}

/* Completes and checks what the previous turn posted. */
static void complete_posted(void)
{
    for (int k = posted.outstanding - 1; k >= 0; k--) MPI_Wait(&posted.requests[k], MPI_STATUS_IGNORE);
    for (int k = 0; k < posted.outstanding; k++)
        for (int j = 0; j < COUNT; j++) {
            long got = posted.recv[k][j];
            switch (posted.kind) {
            case K_IALLREDUCE:
            case K_BATCH:
                if (got != sum_over_ranks(posted.turn, k, j)) fail("MPI_Iallreduce", posted.turn, k, j, got, sum_over_ranks(posted.turn, k, j));
                break;
            case K_IREDUCE:
                if (me == posted.root && got != sum_over_ranks(posted.turn, k, j))
                    fail("MPI_Ireduce", posted.turn, k, j, got, sum_over_ranks(posted.turn, k, j));
                if (me != posted.root && got != -1) fail("MPI_Ireduce's receive buffer off the root", posted.turn, k, j, got, -1);
                break;
            case K_IBCAST:
                if (posted.send[k][j] != value(posted.root, posted.turn, k, j))
                    fail("MPI_Ibcast", posted.turn, k, j, posted.send[k][j], value(posted.root, posted.turn, k, j));
                break;
            default:
                break;
            }
        }
    posted.outstanding = 0;
}

/* Posts this turn's calls. */
static void post(int turn)
{
    posted.turn = turn;
    posted.kind = (enum kind)(turn % K_KINDS);
    posted.root = turn % n;
    posted.outstanding = posted.kind == K_BATCH ? BATCH : 1;
    for (int k = 0; k < posted.outstanding; k++) {
        for (int j = 0; j < COUNT; j++) {
            posted.send[k][j] = posted.kind == K_IBCAST && me != posted.root ? -2 : value(me, turn, k, j);
            posted.recv[k][j] = -1;
        }
        MPI_Request *request = &posted.requests[k];
        switch (posted.kind) {
        case K_IALLREDUCE:
        case K_BATCH:
            MPI_Iallreduce(posted.send[k], posted.recv[k], COUNT, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, request);
            break;
        case K_IREDUCE:
            MPI_Ireduce(posted.send[k], posted.recv[k], COUNT, MPI_LONG, MPI_SUM, posted.root, MPI_COMM_WORLD, request);
            break;
        case K_IBCAST: MPI_Ibcast(posted.send[k], COUNT, MPI_LONG, posted.root, MPI_COMM_WORLD, request); break;
        default: MPI_Ibarrier(MPI_COMM_WORLD, request); break;
        }
    }
}

/* One turn inside MPI: the other thread's calls completed, a blocking
 * allreduce, this turn's calls posted. */
static void take_turn(int turn)
{
    complete_posted();
    long mine[COUNT], total[COUNT];
    for (int j = 0; j < COUNT; j++) mine[j] = value(me, turn, BATCH, j);
    MPI_Allreduce(mine, total, COUNT, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int j = 0; j < COUNT; j++)
        if (total[j] != sum_over_ranks(turn, BATCH, j)) fail("MPI_Allreduce", turn, BATCH, j, total[j], sum_over_ranks(turn, BATCH, j));
    if (turn < turns) post(turn);
}

static void *player(void *arg)
{
    int self = (int)(long)arg;
    for (int turn = self; turn <= turns; turn += 2) {
        pthread_mutex_lock(&baton_lock);
        while (holder != self) pthread_cond_wait(&baton_moved, &baton_lock);
        pthread_mutex_unlock(&baton_lock);
        take_turn(turn);
        pthread_mutex_lock(&baton_lock);
        holder = 1 - self;
        pthread_cond_broadcast(&baton_moved);
        pthread_mutex_unlock(&baton_lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int opt, provided;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while ((opt = getopt(argc, argv, "i:")) != -1)
        if (opt == 'i') turns = atoi(optarg);
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (provided < MPI_THREAD_SERIALIZED) {
        printf("FAIL: rank %d: MPI_THREAD_SERIALIZED not provided (%d)\n", me, provided);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    pthread_t threads[2];
    for (long t = 0; t < 2; t++) pthread_create(&threads[t], NULL, player, (void *)t);
    for (int t = 0; t < 2; t++) pthread_join(threads[t], NULL);
    complete_posted();
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("result: rank %d failures %d turns %d\n", me, failures, turns + 1);
    MPI_Finalize();
    return all ? 1 : 0;
}
