/*
 * thread_multiple: under MPI_THREAD_MULTIPLE, several threads each run
 * collectives on their own communicator at the same time; every result is
 * checked. coll rdma does not support MPI_THREAD_MULTIPLE and must step
 * aside (the other components serve everything).
 *
 * Options: -t <threads> (default 3), -i <iterations per thread> (200).
 * Output: "result: rank R failures F barriers B", "FAIL: ..." per problem.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int me, n, iterations = 200;

struct worker {
    MPI_Comm comm;
    int index, failures, barriers;
};

static void *run(void *arg)
{
    struct worker *w = arg;
    for (int it = 0; it < iterations; it++) {
        if (MPI_Barrier(w->comm) == MPI_SUCCESS) w->barriers++;
        long mine = (long)me * (w->index + 1) + it, sum = -1;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, w->comm);
        if (sum != (long)(w->index + 1) * n * (n - 1) / 2 + (long)n * it) {
            printf("FAIL: rank %d: thread %d allreduce of iteration %d: %ld\n", me, w->index, it, sum);
            w->failures++;
        }
        int root = (it + w->index) % n, v[16];
        for (int j = 0; j < 16; j++) v[j] = me == root ? w->index * 100000 + it * 16 + j : -1;
        MPI_Bcast(v, 16, MPI_INT, root, w->comm);
        for (int j = 0; j < 16; j++)
            if (v[j] != w->index * 100000 + it * 16 + j) {
                printf("FAIL: rank %d: thread %d bcast of iteration %d: element %d is %d\n", me, w->index, it, j, v[j]);
                w->failures++;
                break;
            }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 3, opt, provided;
    while ((opt = getopt(argc, argv, "t:i:")) != -1) {
        if (opt == 't') threads = atoi(optarg);
        else if (opt == 'i') iterations = atoi(optarg);
        else { fprintf(stderr, "usage: %s [-t threads] [-i iterations]\n", argv[0]); return 2; }
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
    }
    struct worker *w = calloc((size_t)threads + 1, sizeof *w);
    pthread_t *tid = calloc((size_t)threads + 1, sizeof *tid);
    for (int t = 0; t < threads; t++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm);
        w[t].index = t;
    }
    for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, run, &w[t]);
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        failures += w[t].failures;
        barriers += w[t].barriers;
        MPI_Comm_free(&w[t].comm);
    }
    printf("result: rank %d failures %d barriers %d\n", me, failures, barriers);
    MPI_Finalize();
    return failures ? 1 : 0;
}
