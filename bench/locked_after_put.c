/*
 * locked_after_put: what a locked instruction costs right after a store
 * to a cache line another core is polling, on this machine: the price a
 * non-blocking post pays when its put is followed, before the next post's
 * put, by a compare-exchange, a mutex or a reference count (issue 35,
 * docs/nonblocking.md "What is left of a batch").
 *
 *   cc -O2 -o locked_after_put bench/locked_after_put.c -lpthread
 *   ./locked_after_put [ROUNDS]
 *
 * Two threads, pinned to cores 0 and 1, play 8 outstanding short
 * exchanges: each round each writes a flag word in 8 lines the other
 * polls, then waits for the other's 8, newest first. It runs once as is
 * and once with an atomic add on a private word after every store, and
 * prints both times per round. Without the locked instruction the 8
 * stores' transfers overlap; with it each waits for its line to arrive
 * before the next store issues.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { OUTSTANDING = 8 };

struct polled_line {
    _Atomic uint64_t flag;
    char rest_of_line[56];
} __attribute__((aligned(64)));

/* lines[r][k]: the k-th line thread r polls and the other thread writes */
static struct polled_line lines[2][OUTSTANDING];
/* one private word a line per thread, for the locked instruction */
static struct polled_line private_words[2];

struct player {
    int core;
    int locked_after_store;
    uint64_t first_round;
    uint64_t rounds;
};

static void *play(void *arg)
{
    const struct player *p = arg;
    int peer = 1 - p->core;
    cpu_set_t cores;
    CPU_ZERO(&cores);
    CPU_SET(p->core, &cores);
    pthread_setaffinity_np(pthread_self(), sizeof cores, &cores);
    for (uint64_t round = p->first_round; round < p->first_round + p->rounds; round++) {
        for (int k = 0; k < OUTSTANDING; k++) {
            atomic_store_explicit(&lines[peer][k].flag, round, memory_order_release);
            if (p->locked_after_store)
                atomic_fetch_add_explicit(&private_words[p->core].flag, 1, memory_order_relaxed);
        }
        for (int k = OUTSTANDING - 1; k >= 0; k--)
            while (atomic_load_explicit(&lines[p->core][k].flag, memory_order_acquire) < round)
                __builtin_ia32_pause();
    }
    return NULL;
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* Runs `rounds` rounds from `first_round` on; nanoseconds per round. */
static double time_rounds(int locked_after_store, uint64_t first_round, uint64_t rounds)
{
    pthread_t threads[2];
    struct player players[2];
    double start = seconds();
    for (int core = 0; core < 2; core++) {
        players[core] = (struct player){ core, locked_after_store, first_round, rounds };
        if (pthread_create(&threads[core], NULL, play, &players[core]) != 0) {
            perror("pthread_create");
            exit(1);
        }
    }
    for (int core = 0; core < 2; core++)
        pthread_join(threads[core], NULL);
    return (seconds() - start) / (double)rounds * 1e9;
}

int main(int argc, char **argv)
{
    uint64_t rounds = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000;
    if (rounds == 0) {
        fprintf(stderr, "usage: %s [ROUNDS > 0]\n", argv[0]);
        return 2;
    }
    /* Flags only grow: the second run starts where the first ended. */
    double plain = time_rounds(0, 1, rounds);
    double locked = time_rounds(1, 1 + rounds, rounds);
    printf("%d stores to polled lines a round: %.1f ns a round; with a locked instruction after each store %.1f ns (%.2fx)\n",
           OUTSTANDING, plain, locked, locked / plain);
    return 0;
}
