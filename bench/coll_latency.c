/*
 * coll_latency: latency of one MPI collective, in microseconds per call.
 *
 *   coll_latency [-c COLL] [-m MIN[:MAX]] [-w WARMUP] [-n ITERS] [-r ROOT] [-q]
 *     -c  barrier (default), allreduce, reduce, bcast
 *     -m  message size in bytes, or a range MIN:MAX stepped by powers of two
 *         (default 8; ignored for barrier)
 *     -w  warm-up iterations (default 1000), -n timed iterations (default 10000)
 *     -r  root of reduce and bcast (default 0)
 *     -q  no header lines
 *
 * Barrier: every rank times the whole loop of back-to-back barriers and divides
 * by the number of iterations. The other collectives are timed call by call,
 * with a barrier (untimed) after each call so that one call's skew does not
 * leak into the next one's time.
 * Each rank's figure is reduced to rank 0, which prints min/avg/max over ranks:
 *   # collective  size_bytes  avg_us  min_us  max_us  iterations  ranks
 *   barrier       0           0.41    0.40    0.42    10000       2
 * Lines starting with '#' are comments; ci/bench.sh parses the others.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum coll { C_BARRIER, C_ALLREDUCE, C_REDUCE, C_BCAST };
static const char *names[] = {"barrier", "allreduce", "reduce", "bcast"};

static int rank, nranks;

static void usage_exit(const char *msg)
{
    if (rank == 0) {
        if (msg) fprintf(stderr, "coll_latency: %s\n", msg);
        fprintf(stderr, "usage: coll_latency [-c barrier|allreduce|reduce|bcast] "
                        "[-m MIN[:MAX]] [-w WARMUP] [-n ITERS] [-r ROOT] [-q]\n");
    }
    MPI_Finalize();
    exit(msg ? 2 : 0);
}

/* One call of the collective on `bytes` bytes (floats summed for reductions). */
static void run_once(enum coll c, void *sbuf, void *rbuf, size_t bytes, int root)
{
    int count = (int)(bytes / sizeof(float));
    if (count < 1) count = 1;
    switch (c) {
    case C_BARRIER:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    case C_ALLREDUCE:
        MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case C_REDUCE:
        MPI_Reduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD);
        break;
    case C_BCAST:
        MPI_Bcast(sbuf, (int)(bytes ? bytes : 1), MPI_BYTE, root, MPI_COMM_WORLD);
        break;
    }
}

/* Seconds per call on this rank. */
static double measure(enum coll c, void *sbuf, void *rbuf, size_t bytes, int root,
                      long warmup, long iters)
{
    for (long i = 0; i < warmup; i++) {
        run_once(c, sbuf, rbuf, bytes, root);
        if (c != C_BARRIER) MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (c == C_BARRIER) {
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) MPI_Barrier(MPI_COMM_WORLD);
        return (MPI_Wtime() - t0) / (double)iters;
    }
    double total = 0.0;
    for (long i = 0; i < iters; i++) {
        double t0 = MPI_Wtime();
        run_once(c, sbuf, rbuf, bytes, root);
        total += MPI_Wtime() - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return total / (double)iters;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    enum coll c = C_BARRIER;
    size_t min_size = 8, max_size = 8;
    long warmup = 1000, iters = 10000;
    int root = 0, quiet = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (strcmp(a, "-q") == 0) { quiet = 1; continue; }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) usage_exit(NULL);
        if (!v) usage_exit("option without a value");
        i++;
        if (strcmp(a, "-c") == 0) {
            int found = 0;
            for (int k = 0; k < 4; k++)
                if (strcmp(v, names[k]) == 0) { c = (enum coll)k; found = 1; }
            if (!found) usage_exit("unknown collective");
        } else if (strcmp(a, "-m") == 0) {
            char *end;
            min_size = strtoul(v, &end, 0);
            max_size = (*end == ':') ? strtoul(end + 1, NULL, 0) : min_size;
            if (max_size < min_size) usage_exit("-m MIN:MAX with MAX < MIN");
        } else if (strcmp(a, "-w") == 0) {
            warmup = atol(v);
        } else if (strcmp(a, "-n") == 0) {
            iters = atol(v);
        } else if (strcmp(a, "-r") == 0) {
            root = atoi(v);
        } else {
            usage_exit("unknown option");
        }
    }
    if (iters < 1 || warmup < 0) usage_exit("bad iteration count");
    if (root < 0 || root >= nranks) usage_exit("root out of range");
    if (c == C_BARRIER) min_size = max_size = 0;

    size_t alloc = max_size > 0 ? max_size : sizeof(float);
    if (alloc < sizeof(float)) alloc = sizeof(float);
    void *sbuf = NULL, *rbuf = NULL;
    if (posix_memalign(&sbuf, 4096, alloc) || posix_memalign(&rbuf, 4096, alloc)) {
        fprintf(stderr, "coll_latency: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 1, alloc);
    memset(rbuf, 0, alloc);

    if (rank == 0 && !quiet) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        printf("# coll_latency: %s, %d rank(s), %ld warm-up + %ld timed iterations, host %s\n",
               names[c], nranks, warmup, iters, host);
        printf("# %-11s %11s %10s %10s %10s %11s %6s\n", "collective", "size_bytes", "avg_us",
               "min_us", "max_us", "iterations", "ranks");
    }

    for (size_t size = min_size;; size = size ? size * 2 : 1) {
        double t = measure(c, sbuf, rbuf, size, root, warmup, iters) * 1e6;
        double tmin, tmax, tsum;
        MPI_Reduce(&t, &tmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%-13s %11zu %10.3f %10.3f %10.3f %11ld %6d\n", names[c], size,
                   tsum / nranks, tmin, tmax, iters, nranks);
        if (size >= max_size) break;
    }
    fflush(stdout);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
