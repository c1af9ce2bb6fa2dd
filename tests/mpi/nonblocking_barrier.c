/*
 * nonblocking_barrier: MPI_Ibarrier and the persistent barrier
 * (MPIX_Barrier_init on Open MPI 4.1, MPI_Barrier_init on 5.0).
 *
 * The barrier property, checked with one clock on one host
 * (CLOCK_MONOTONIC: MPI_Wtime counts from each process's own start in Open
 * MPI, so it cannot order events of two processes): every rank
 * notes when it entered (posted or started) barrier k and when the request
 * completed; one MPI_Allreduce (MAX) of the entry times afterwards gives
 * the latest entry, and no rank may have completed before it. One rank,
 * rotating, enters late (sleeps first), so that an early completion would
 * show. Phases:
 *   1. rounds of 1-4 outstanding ibarriers with blocking barriers (t_barrier,
 *      which checks its own property) between the posts, completed by
 *      MPI_Waitall, an MPI_Waitany loop, or an MPI_Test loop in reverse;
 *   2. a persistent barrier started -n times (default 1000) with MPI_Start
 *      + MPI_Wait, then freed;
 *   3. ibarriers pending on MPI_COMM_WORLD while another communicator is
 *      duplicated, used and freed, and an ibarrier pending on a duplicate
 *      while that duplicate is freed only after its wait;
 *   4. progress behind a blocking collective: one rank, rotating, posts an
 *      ibarrier and then enters a blocking MPI_Allreduce on another
 *      communicator, while the others wait on the ibarrier before joining
 *      that allreduce: only if the rank's blocking wait advances the other
 *      communicator's pending barrier can anyone finish;
 *   5. completed at start: every rank but one (rotating) posts an ibarrier
 *      or starts the persistent barrier, then tells that rank with a
 *      message; it posts or starts only then, so at np 2 (one round) its
 *      request is complete on return (MPI_Request_get_status says so
 *      before anything else progresses it), and it completes the request
 *      by MPI_Wait, MPI_Test, MPI_Waitany or MPI_Request_free;
 *   6. MPI_Wait must progress the rest of MPI: rank 0 waits on a barrier
 *      that rank 1 joins only once its blocking MPI_Send of 1 MiB to rank
 *      0 is done, which needs rank 0's progress (its receive is posted
 *      before the wait); a wait that only polled coll rdma's runs would
 *      hang.
 * Options: -r <rounds of phase 1> (default 200), -n <persistent starts>.
 */
#include "common.h"
#include <time.h>
#include <unistd.h>

#define T_MAX_OUTSTANDING 4
#define T_LATE_SLEEP_US 20000

/* Entry and completion times of the barriers of one check. */
typedef struct {
    double entered[T_MAX_OUTSTANDING];
    double left[T_MAX_OUTSTANDING];
    int n;
} nb_times_t;

/* Seconds on the clock every process of the host shares. */
static double host_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Every rank's completion of barrier i came after every rank's entry. */
static void check_order(MPI_Comm comm, nb_times_t *t, const char *what, long round)
{
    double latest[T_MAX_OUTSTANDING];
    T_MPI(MPI_Allreduce(t->entered, latest, t->n, MPI_DOUBLE, MPI_MAX, comm));
    for (int i = 0; i < t->n; i++)
        T_CHECK(t->left[i] >= latest[i], "%s round %ld barrier %d: completed at %.6f before the last entry at %.6f",
                what, round, i, t->left[i], latest[i]);
}

static void late_if_mine(MPI_Comm comm, long round)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (round % 5 == 0 && rank == (int)((round / 5) % size)) usleep(T_LATE_SLEEP_US);
}

/* Completes requests rq[0..n) the way `how` says, noting each one's time. */
static void complete(MPI_Request *rq, int n, int how, nb_times_t *t)
{
    if (how == 0) {
        T_MPI(MPI_Waitall(n, rq, MPI_STATUSES_IGNORE));
        double now = host_now();
        for (int i = 0; i < n; i++) t->left[i] = now;
    } else if (how == 1) {
        for (int done = 0; done < n; done++) {
            int index = MPI_UNDEFINED;
            T_MPI(MPI_Waitany(n, rq, &index, MPI_STATUS_IGNORE));
            T_CHECK(index >= 0 && index < n, "waitany index %d of %d", index, n);
            if (index >= 0 && index < n) t->left[index] = host_now();
        }
    } else {
        for (int i = n - 1; i >= 0; i--) {
            int flag = 0;
            while (!flag) T_MPI(MPI_Test(&rq[i], &flag, MPI_STATUS_IGNORE));
            t->left[i] = host_now();
        }
    }
    for (int i = 0; i < n; i++) T_CHECK(rq[i] == MPI_REQUEST_NULL, "request %d not freed by its completion", i);
}

static void outstanding_rounds(tcomm_t *world, long rounds)
{
    for (long r = 0; r < rounds; r++) {
        nb_times_t t = { .n = 1 + (int)(r % T_MAX_OUTSTANDING) };
        MPI_Request rq[T_MAX_OUTSTANDING];
        late_if_mine(world->comm, r);
        for (int i = 0; i < t.n; i++) {
            t.entered[i] = host_now();
            T_MPI(MPI_Ibarrier(world->comm, &rq[i]));
            if ((r + i) % 3 == 1) t_barrier(world); /* a blocking one between the posts */
        }
        complete(rq, t.n, (int)(r % 3), &t);
        check_order(world->comm, &t, "ibarrier", r);
    }
}

static void persistent(tcomm_t *world, long starts)
{
    MPI_Request rq;
    T_MPI(T_BARRIER_INIT(world->comm, MPI_INFO_NULL, &rq));
    for (long s = 0; s < starts; s++) {
        nb_times_t t = { .n = 1 };
        late_if_mine(world->comm, s);
        t.entered[0] = host_now();
        T_MPI(MPI_Start(&rq));
        if (s % 2) {
            int flag = 0;
            while (!flag) T_MPI(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
        } else {
            T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        }
        t.left[0] = host_now();
        T_CHECK(rq != MPI_REQUEST_NULL, "start %ld: the persistent request went away at completion", s);
        if (s % 50 == 0) check_order(world->comm, &t, "persistent barrier", s);
    }
    T_MPI(MPI_Request_free(&rq));
    T_CHECK(rq == MPI_REQUEST_NULL, "MPI_Request_free left the handle set");
}

static void across_other_communicators(tcomm_t *world, long rounds)
{
    for (long r = 0; r < rounds; r++) {
        nb_times_t t = { .n = 2 };
        MPI_Request rq[2];
        late_if_mine(world->comm, r);
        t.entered[0] = host_now();
        T_MPI(MPI_Ibarrier(world->comm, &rq[0]));
        MPI_Comm dup;
        T_MPI(MPI_Comm_dup(world->comm, &dup));
        tcomm_t other;
        t_derive(world, dup, &other);
        t.entered[1] = host_now();
        T_MPI(MPI_Ibarrier(other.comm, &rq[1]));
        t_barrier(&other);
        T_MPI(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
        t.left[1] = host_now();
        t_free(&other);
        T_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        t.left[0] = host_now();
        check_order(world->comm, &t, "ibarrier across dup/free", r);
    }
}

static void behind_a_blocking_collective(tcomm_t *world, long rounds)
{
    MPI_Comm dup;
    T_MPI(MPI_Comm_dup(world->comm, &dup));
    tcomm_t other;
    t_derive(world, dup, &other);
    for (long r = 0; r < rounds; r++) {
        nb_times_t t = { .n = 1 };
        MPI_Request rq;
        int blocked_one = (int)(r % world->size);
        long mine = world->rank + r, sum = 0;
        long want = (long)world->size * (world->size - 1) / 2 + (long)world->size * r;
        t.entered[0] = host_now();
        T_MPI(MPI_Ibarrier(world->comm, &rq));
        if (world->rank == blocked_one) {
            usleep(T_LATE_SLEEP_US / 4);
            T_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, other.comm));
            T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        } else {
            T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            T_MPI(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, other.comm));
        }
        t.left[0] = host_now();
        T_CHECK(sum == want, "allreduce behind an ibarrier: %ld, want %ld (round %ld)", sum, want, r);
        check_order(world->comm, &t, "ibarrier behind a blocking allreduce", r);
    }
    t_free(&other);
}

/* Completes the request the way `how` says: MPI_Wait, MPI_Test (which
 * must say complete at once where `complete` says it is), MPI_Waitany, or
 * MPI_Request_free (only where `complete`). */
static void complete_one(MPI_Request *rq, int how, int complete, int persistent)
{
    int flag = 0, index = MPI_UNDEFINED;
    switch (how) {
    case 0: T_MPI(MPI_Wait(rq, MPI_STATUS_IGNORE)); break;
    case 1:
        T_MPI(MPI_Test(rq, &flag, MPI_STATUS_IGNORE));
        T_CHECK(flag || !complete, "MPI_Test: a request complete at start is not complete");
        while (!flag) T_MPI(MPI_Test(rq, &flag, MPI_STATUS_IGNORE));
        break;
    case 2:
        T_MPI(MPI_Waitany(1, rq, &index, MPI_STATUS_IGNORE));
        T_CHECK(index == 0, "MPI_Waitany index %d", index);
        break;
    default: T_MPI(MPI_Request_free(rq)); return;
    }
    T_CHECK((*rq == MPI_REQUEST_NULL) == !persistent, "the request handle after completion (persistent %d)", persistent);
}

static void completed_at_start(tcomm_t *world, long rounds)
{
    MPI_Request persistent_rq = MPI_REQUEST_NULL;
    /* only at np 2 is the last rank's barrier complete at start (one round) */
    int at_start = world->size == 2;
    for (long r = 0; r < rounds; r++) {
        int last = (int)(r % world->size), persistent = (int)(r / world->size % 2);
        int how = (int)(r % (at_start ? 4 : 3)), frees = how == 3;
        if (persistent && persistent_rq == MPI_REQUEST_NULL)
            T_MPI(T_BARRIER_INIT(world->comm, MPI_INFO_NULL, &persistent_rq));
        nb_times_t t = { .n = 1 };
        MPI_Request rq;
        if (world->rank == last)
            for (int peer = 0; peer < world->size; peer++)
                if (peer != last) T_MPI(MPI_Recv(NULL, 0, MPI_BYTE, peer, 5, world->comm, MPI_STATUS_IGNORE));
        t.entered[0] = host_now();
        if (persistent) {
            rq = persistent_rq;
            T_MPI(MPI_Start(&rq));
        } else {
            T_MPI(MPI_Ibarrier(world->comm, &rq));
        }
        if (world->rank == last && at_start) {
            int flag = 0;
            T_MPI(MPI_Request_get_status(rq, &flag, MPI_STATUS_IGNORE));
            T_CHECK(flag, "round %ld: the last rank's %s barrier was not complete at start", r,
                    persistent ? "persistent" : "non-blocking");
        }
        if (world->rank == last) {
            complete_one(&rq, how, at_start, persistent);
        } else {
            T_MPI(MPI_Send(NULL, 0, MPI_BYTE, last, 5, world->comm));
            T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            if (persistent && frees) T_MPI(MPI_Request_free(&rq));
        }
        t.left[0] = host_now();
        if (persistent) persistent_rq = frees ? MPI_REQUEST_NULL : rq;
        /* a freed request's completion time is not known: skip its check */
        if (!frees) check_order(world->comm, &t, "barrier completed at start", r);
    }
    if (persistent_rq != MPI_REQUEST_NULL) T_MPI(MPI_Request_free(&persistent_rq));
}

static void wait_progresses_the_rest(tcomm_t *world, long rounds)
{
    enum { BYTES = 1 << 20 };
    if (world->size < 2) return;
    char *buf = malloc(BYTES);
    T_CHECK(buf != NULL, "no memory");
    for (long r = 0; r < rounds; r++) {
        MPI_Request rq, recv = MPI_REQUEST_NULL;
        memset(buf, world->rank == 1 ? (int)(r & 0x7f) : 0xff, BYTES);
        if (world->rank == 0) T_MPI(MPI_Irecv(buf, BYTES, MPI_BYTE, 1, 6, world->comm, &recv));
        if (world->rank == 1) T_MPI(MPI_Send(buf, BYTES, MPI_BYTE, 0, 6, world->comm));
        T_MPI(MPI_Ibarrier(world->comm, &rq));
        T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        if (world->rank == 0) {
            T_MPI(MPI_Wait(&recv, MPI_STATUS_IGNORE));
            T_CHECK(buf[0] == (char)(r & 0x7f) && buf[BYTES - 1] == (char)(r & 0x7f), "round %ld: the message", r);
        }
    }
    free(buf);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long rounds = t_opt(argc, argv, "-r", 200);
    long starts = t_opt(argc, argv, "-n", 1000);
    t_barrier(&t_world); /* sets coll rdma's transport up */
    outstanding_rounds(&t_world, rounds);
    persistent(&t_world, starts);
    across_other_communicators(&t_world, rounds / 10 > 0 ? rounds / 10 : 1);
    behind_a_blocking_collective(&t_world, rounds / 10 > 0 ? rounds / 10 : 1);
    completed_at_start(&t_world, rounds);
    wait_progresses_the_rest(&t_world, rounds / 10 > 0 ? rounds / 10 : 1);
    return t_finish("nonblocking_barrier");
}
