/*
 * coll_latency: latency of one MPI collective, in microseconds per call.
 *
 *   coll_latency [-c COLL] [-m MIN[:MAX]] [-f FACTOR] [-w WARMUP] [-n ITERS]
 *                [-s SCALE_BYTES] [-l MIN_ITERS] [-r ROOT] [-q]
 *     -c  barrier (default), allreduce, reduce, bcast
 *     -m  message size in bytes, or a range MIN:MAX (default 8; ignored for
 *         barrier)
 *     -f  step of the range: each size is FACTOR times the previous (default 2)
 *     -w  warm-up iterations (default 1000), -n timed iterations (default 10000)
 *     -s  above SCALE_BYTES, iterations and warm-up shrink in proportion to the
 *         size (ITERS * SCALE_BYTES / size), so that large messages do not take
 *         much longer than small ones; 0 (default) keeps them fixed
 *     -l  the least number of timed iterations when -s shrinks them (default 20)
 *     -r  root of reduce and bcast (default 0)
 *     -q  no header lines
 *
 * Barrier: every rank times the whole loop of back-to-back barriers and divides
 * by the number of iterations. The other collectives are timed call by call,
 * with a barrier (untimed) after each call so that one call's skew does not
 * leak into the next one's time.
 * Reductions sum floats (size / 4 of them, at least 1); after each size one
 * more call with every element 1.0 checks the result (== number of ranks, on
 * every rank for allreduce, at the root for reduce): a wrong result prints a
 * "# WRONG RESULT" line and the program exits with status 3.
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
                        "[-m MIN[:MAX]] [-f FACTOR] [-w WARMUP] [-n ITERS] [-s SCALE_BYTES] "
                        "[-l MIN_ITERS] [-r ROOT] [-q]\n");
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
    size_t min_size = 8, max_size = 8, factor = 2, scale = 0;
    long warmup = 1000, iters = 10000, min_iters = 20;
    int root = 0, quiet = 0, wrong = 0;

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
        } else if (strcmp(a, "-f") == 0) {
            factor = strtoul(v, NULL, 0);
            if (factor < 2) usage_exit("-f FACTOR must be at least 2");
        } else if (strcmp(a, "-s") == 0) {
            scale = strtoul(v, NULL, 0);
        } else if (strcmp(a, "-l") == 0) {
            min_iters = atol(v);
            if (min_iters < 1) usage_exit("-l MIN_ITERS must be at least 1");
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

    for (size_t size = min_size;; size = size ? size * factor : 1) {
        long n = iters, w = warmup;
        if (scale > 0 && size > scale) {
            n = (long)((double)iters * (double)scale / (double)size);
            w = (long)((double)warmup * (double)scale / (double)size);
            if (n < min_iters) n = min_iters < iters ? min_iters : iters;
            if (w < 2 && warmup >= 2) w = 2;
        }
        double t = measure(c, sbuf, rbuf, size, root, w, n) * 1e6;
        if (c == C_ALLREDUCE || c == C_REDUCE) {
            int count = (int)(size / sizeof(float));
            if (count < 1) count = 1;
            float *sf = sbuf, *rf = rbuf;
            for (int j = 0; j < count; j++) { sf[j] = 1.0f; rf[j] = -1.0f; }
            run_once(c, sbuf, rbuf, size, root);
            int bad = 0;
            if (c == C_ALLREDUCE || rank == root)
                for (int j = 0; j < count; j++)
                    if (rf[j] != (float)nranks) { bad = 1; break; }
            int any = 0;
            MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (any) {
                wrong = 1;
                if (rank == 0) printf("# WRONG RESULT: %s of %zu bytes\n", names[c], size);
            }
            memset(sbuf, 1, size);
        }
        double tmin, tmax, tsum;
        MPI_Reduce(&t, &tmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
        MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%-13s %11zu %10.3f %10.3f %10.3f %11ld %6d\n", names[c], size,
                   tsum / nranks, tmin, tmax, n, nranks);
        if (size >= max_size) break;
    }
    fflush(stdout);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return wrong ? 3 : 0;
}
