/*
 * overlap_steps: where a non-blocking call's time goes in the OSU-style
 * overlap figure (coll_pairs -M overlap), per rank and per step, at np=2.
 *
 *   mpirun -np 2 overlap_steps CALLS BYTES COLL [SPIN]
 *     COLL   0 MPI_Ibcast (root 0, bytes), 1 MPI_Iallreduce, 2 MPI_Ibarrier,
 *            3 MPI_Ireduce (root 0; floats summed, BYTES / 4 of them, at least 1)
 *     SPIN   1 (default): as coll_pairs, a spin of the slowest rank's pure
 *            time between post and wait; 0: first wait, outside MPI, until
 *            the peer's post has returned (a counter in shared memory), then
 *            that spin, so that the wait measured is the one that finds
 *            whatever the peer's post wrote already there, whatever the load
 *
 * Three repetitions, each of CALLS calls posted then waited for (pure),
 * then CALLS calls with the spin between post and wait, every call
 * followed by MPI_Barrier, as in coll_pairs. Rank 0 prints each rank's
 * mean post and wait times in both, and the overlap figure from them.
 * Under callgrind, --toggle-collect=overlapped_post or overlapped_wait
 * counts the instructions of the overlapped calls' posts or waits alone
 * (docs/nonblocking.md, "What a wait does after the overlap benchmark's
 * spin", used SPIN 0).
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int coll;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void spin_for(double seconds)
{
    double t0 = now();
    while (now() - t0 < seconds) {
    }
}

static void post(void *s, void *r, int bytes, MPI_Request *q)
{
    int floats = bytes / 4 ? bytes / 4 : 1;
    if (coll == 0) MPI_Ibcast(s, bytes, MPI_BYTE, 0, MPI_COMM_WORLD, q);
    else if (coll == 1) MPI_Iallreduce(s, r, floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, q);
    else if (coll == 2) MPI_Ibarrier(MPI_COMM_WORLD, q);
    else MPI_Ireduce(s, r, floats, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD, q);
}

/* Out of line, for callgrind's --toggle-collect. */
__attribute__((noinline)) void overlapped_post(void *s, void *r, int bytes, MPI_Request *q)
{
    post(s, r, bytes, q);
    __asm__ volatile("");
}

__attribute__((noinline)) void overlapped_wait(MPI_Request *q)
{
    MPI_Wait(q, MPI_STATUS_IGNORE);
    __asm__ volatile("");
}

/* The shared counters of SPIN 0: rank r's posts so far at word 8 r. */
static volatile long *posted_counters(int rank)
{
    const char *path = "/dev/shm/overlap-steps";
    if (rank == 0) {
        int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
        if (fd < 0 || ftruncate(fd, 4096) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
        close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int fd = open(path, O_RDWR);
    void *page = fd < 0 ? MAP_FAILED : mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (page == MAP_FAILED) MPI_Abort(MPI_COMM_WORLD, 1);
    close(fd);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) unlink(path);
    return page;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4 || size != 2) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -np 2 overlap_steps CALLS BYTES COLL [SPIN]\n");
        MPI_Finalize();
        return 2;
    }
    int n = atoi(argv[1]), bytes = atoi(argv[2]);
    coll = atoi(argv[3]);
    int after_peer = argc > 4 && atoi(argv[4]) == 0;
    char *s = calloc((size_t)bytes + 4, 1), *r = calloc((size_t)bytes + 4, 1);
    volatile long *posted = after_peer ? posted_counters(rank) : NULL;
    long seq = 0;
    for (int rep = 0; rep < 3; rep++) {
        double pure_post = 0, pure_wait = 0, post_time = 0, wait_time = 0;
        MPI_Request q;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) {
            double t0 = now();
            post(s, r, bytes, &q);
            double t1 = now();
            MPI_Wait(&q, MPI_STATUS_IGNORE);
            pure_post += t1 - t0;
            pure_wait += now() - t1;
            MPI_Barrier(MPI_COMM_WORLD);
        }
        double pure = (pure_post + pure_wait) / n, slowest;
        MPI_Allreduce(&pure, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < n; i++) {
            double t0 = now();
            overlapped_post(s, r, bytes, &q);
            double t1 = now();
            if (posted) {
                seq++;
                __atomic_store_n(&posted[rank * 8], seq, __ATOMIC_RELEASE);
                while (__atomic_load_n(&posted[(1 - rank) * 8], __ATOMIC_ACQUIRE) < seq) {
                }
            }
            spin_for(slowest);
            double t2 = now();
            overlapped_wait(&q);
            post_time += t1 - t0;
            wait_time += now() - t2;
            MPI_Barrier(MPI_COMM_WORLD);
        }
        double mine[4] = {pure_post / n * 1e6, pure_wait / n * 1e6, post_time / n * 1e6, wait_time / n * 1e6}, all[8];
        MPI_Gather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double pure_mean = (all[0] + all[1] + all[4] + all[5]) / 2, exposed_mean = (all[2] + all[3] + all[6] + all[7]) / 2;
            printf("coll %d, %d B: pure post/wait us: r0 %.3f/%.3f r1 %.3f/%.3f; overlapped: r0 %.3f/%.3f r1 %.3f/%.3f; "
                   "overlap %.1f %%\n",
                   coll, bytes, all[0], all[1], all[4], all[5], all[2], all[3], all[6], all[7],
                   100 * (1 - exposed_mean / pure_mean));
        }
    }
    free(s);
    free(r);
    MPI_Finalize();
    return 0;
}
