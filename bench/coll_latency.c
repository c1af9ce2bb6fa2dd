/*
 * coll_latency: latency of one MPI collective, in microseconds per call.
 *
 *   coll_latency [-c COLL] [-m MIN[:MAX]] [-f FACTOR] [-w WARMUP] [-n ITERS]
 *                [-s SCALE_BYTES] [-l MIN_ITERS] [-r ROOT] [-D DELAY_US] [-q]
 *     -c  barrier (default), allreduce, reduce, bcast, or one of the bcast
 *         measurements below: bcast_ack, bcast_tput, bcast_skew
 *     -m  message size in bytes, or a range MIN:MAX (default 8; ignored for
 *         barrier)
 *     -f  step of the range: each size is FACTOR times the previous (default 2),
 *         as long as it does not exceed MAX
 *     -w  warm-up iterations (default 1000), -n timed iterations (default 10000)
 *     -s  above SCALE_BYTES, iterations and warm-up shrink in proportion to the
 *         size (ITERS * SCALE_BYTES / size), so that large messages do not take
 *         much longer than small ones; 0 (default) keeps them fixed
 *     -l  the least number of timed iterations when -s shrinks them (default 20)
 *     -r  root of reduce and bcast (default 0)
 *     -D  bcast_skew: the receivers' largest delay in microseconds (default 100)
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
 *
 * Bcast measurements (all with MPI_BYTE; after each size one more bcast of a
 * pattern is checked on every rank, a wrong byte prints "# WRONG RESULT"
 * and makes the exit status 3):
 *   bcast_ack   latency as the OSU benchmarks measure it: the root
 *               broadcasts, then one receiver sends it a 0-byte
 *               acknowledgement, the receivers taking turns from call to
 *               call, so the root's loop covers the delivery to every
 *               receiver in turn plus one acknowledgement. The
 *               acknowledgement's cost (half the round trip of 0-byte
 *               messages between the root and each receiver, measured
 *               before the sweep) is subtracted. Columns: avg = min = max =
 *               latency (loop - ack), then loop_us and ack_us.
 *   bcast_tput  back-to-back throughput: the root broadcasts ITERS messages
 *               in a row, then one barrier; the time (the slowest rank's,
 *               from a barrier before the first bcast to the end of the
 *               last barrier) divided by ITERS is avg/min/max, then MB/s
 *               (10^6 bytes per second: ITERS * size / time).
 *   bcast_skew  process skew: before each bcast (after an untimed barrier)
 *               every receiver spins for a random 0..DELAY_US microseconds,
 *               the root does not; every rank times its MPI_Bcast. avg, min,
 *               max are over ranks of the mean time inside MPI_Bcast, then
 *               root_us (the root's), recv_us (mean over the receivers),
 *               recv_max_us (the slowest receiver's) and delay_us (the mean
 *               delay actually spun).
 * Lines starting with '#' are comments; ci/bench.sh parses the others.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum coll { C_BARRIER, C_ALLREDUCE, C_REDUCE, C_BCAST, C_BCAST_ACK, C_BCAST_TPUT, C_BCAST_SKEW,
             C_NCOLLS };
static const char *names[] = {"barrier", "allreduce", "reduce", "bcast", "bcast_ack",
                              "bcast_tput", "bcast_skew"};

static int rank, nranks;

static void usage_exit(const char *msg)
{
    if (rank == 0) {
        if (msg) fprintf(stderr, "coll_latency: %s\n", msg);
        fprintf(stderr, "usage: coll_latency [-c barrier|allreduce|reduce|bcast|bcast_ack|"
                        "bcast_tput|bcast_skew] [-m MIN[:MAX]] [-f FACTOR] [-w WARMUP] "
                        "[-n ITERS] [-s SCALE_BYTES] [-l MIN_ITERS] [-r ROOT] [-D DELAY_US] "
                        "[-q]\n");
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
    default: /* the bcast measurements */
        MPI_Bcast(sbuf, (int)(bytes ? bytes : 1), MPI_BYTE, root, MPI_COMM_WORLD);
        break;
    }
}

/* ------------------------------------------------------ bcast measurements */
static double now(void) { return MPI_Wtime(); }

/* The i-th receiver in turn (every rank but the root). */
static int receiver(long i, int root)
{
    int k = (int)(i % (nranks - 1));
    return k < root ? k : k + 1;
}

/* One-way cost of a 0-byte message from a receiver to the root: half the
 * round trip, averaged over the receivers (on the root; 0 elsewhere). */
static double ack_cost(int root, long iters)
{
    double total = 0.0;
    char b = 0;
    for (int r = 0; r < nranks; r++) {
        if (r == root) continue;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        for (long i = 0; i < iters; i++) {
            if (rank == root) {
                MPI_Send(&b, 0, MPI_BYTE, r, 7, MPI_COMM_WORLD);
                MPI_Recv(&b, 0, MPI_BYTE, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == r) {
                MPI_Recv(&b, 0, MPI_BYTE, root, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&b, 0, MPI_BYTE, root, 7, MPI_COMM_WORLD);
            }
        }
        total += (now() - t0) / (double)iters / 2.0;
    }
    return rank == root ? total / (nranks - 1) : 0.0;
}

/* bcast_ack: seconds per iteration of the root's loop (0 elsewhere). */
static double bcast_ack_loop(void *buf, int bytes, int root, long warmup, long iters)
{
    char b = 0;
    double t0 = 0.0;
    for (long i = -warmup; i < iters; i++) {
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = now();
        }
        MPI_Bcast(buf, bytes, MPI_BYTE, root, MPI_COMM_WORLD);
        int r = receiver(i + warmup, root);
        if (rank == root)
            MPI_Recv(&b, 0, MPI_BYTE, r, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else if (rank == r)
            MPI_Send(&b, 0, MPI_BYTE, root, 8, MPI_COMM_WORLD);
    }
    double t = (now() - t0) / (double)iters;
    MPI_Barrier(MPI_COMM_WORLD);
    return rank == root ? t : 0.0;
}

/* bcast_tput: seconds for iters back-to-back bcasts and one barrier. */
static double bcast_tput_loop(void *buf, int bytes, int root, long warmup, long iters)
{
    for (long i = 0; i < warmup; i++) MPI_Bcast(buf, bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    for (long i = 0; i < iters; i++) MPI_Bcast(buf, bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    return now() - t0;
}

static unsigned long long skew_rng = 0;
static double skew_delay_us(double max_us)
{
    skew_rng ^= skew_rng << 13;
    skew_rng ^= skew_rng >> 7;
    skew_rng ^= skew_rng << 17;
    return max_us * (double)(skew_rng >> 11) / 9007199254740992.0; /* [0, max) */
}

/* bcast_skew: mean seconds inside MPI_Bcast on this rank; *spun: mean delay. */
static double bcast_skew_loop(void *buf, int bytes, int root, long warmup, long iters,
                              double max_us, double *spun)
{
    double inside = 0.0, delayed = 0.0;
    for (long i = -warmup; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank != root) {
            double d = skew_delay_us(max_us), until = now() + d * 1e-6;
            while (now() < until) {
            }
            if (i >= 0) delayed += d;
        }
        double t0 = now();
        MPI_Bcast(buf, bytes, MPI_BYTE, root, MPI_COMM_WORLD);
        if (i >= 0) inside += now() - t0;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    *spun = delayed / (double)iters;
    return inside / (double)iters;
}

/* One bcast of a pattern, checked on every rank; 1 if any byte is wrong. */
static int bcast_check(unsigned char *buf, size_t bytes, int root, unsigned salt)
{
    for (size_t j = 0; j < bytes; j++)
        buf[j] = rank == root ? (unsigned char)(j * 7 + salt + (j >> 9)) : (unsigned char)~j;
    MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    int bad = 0, any = 0;
    for (size_t j = 0; j < bytes; j++)
        if (buf[j] != (unsigned char)(j * 7 + salt + (j >> 9))) { bad = 1; break; }
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
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
    double max_delay_us = 100.0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
        if (strcmp(a, "-q") == 0) { quiet = 1; continue; }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) usage_exit(NULL);
        if (!v) usage_exit("option without a value");
        i++;
        if (strcmp(a, "-c") == 0) {
            int found = 0;
            for (int k = 0; k < C_NCOLLS; k++)
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
        } else if (strcmp(a, "-D") == 0) {
            max_delay_us = atof(v);
            if (max_delay_us < 0) usage_exit("-D DELAY_US must not be negative");
        } else {
            usage_exit("unknown option");
        }
    }
    if (iters < 1 || warmup < 0) usage_exit("bad iteration count");
    if (root < 0 || root >= nranks) usage_exit("root out of range");
    if (c == C_BARRIER) min_size = max_size = 0;
    if ((c == C_BCAST_ACK || c == C_BCAST_SKEW) && nranks < 2) usage_exit("needs 2 ranks or more");
    if (c >= C_BCAST_ACK && min_size == 0) min_size = 1;
    skew_rng = 0x9e3779b97f4a7c15ull * (unsigned long long)(rank + 1);

    size_t alloc = max_size > 0 ? max_size : sizeof(float);
    if (alloc < sizeof(float)) alloc = sizeof(float);
    void *sbuf = NULL, *rbuf = NULL;
    if (posix_memalign(&sbuf, 4096, alloc) || posix_memalign(&rbuf, 4096, alloc)) {
        fprintf(stderr, "coll_latency: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 1, alloc);
    memset(rbuf, 0, alloc);

    double ack_s = 0.0;
    if (c == C_BCAST_ACK) ack_s = ack_cost(root, iters < 10000 ? iters : 10000);

    if (rank == 0 && !quiet) {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        printf("# coll_latency: %s, %d rank(s), %ld warm-up + %ld timed iterations, host %s\n",
               names[c], nranks, warmup, iters, host);
        const char *extra = c == C_BCAST_ACK ? "  loop_us ack_us"
                          : c == C_BCAST_TPUT ? "  MBps"
                          : c == C_BCAST_SKEW ? "  root_us recv_us recv_max_us delay_us" : "";
        printf("# %-11s %11s %10s %10s %10s %11s %6s%s\n", "collective", "size_bytes", "avg_us",
               "min_us", "max_us", "iterations", "ranks", extra);
    }

    for (size_t size = min_size;; size = size ? size * factor : 1) {
        long n = iters, w = warmup;
        if (scale > 0 && size > scale) {
            n = (long)((double)iters * (double)scale / (double)size);
            w = (long)((double)warmup * (double)scale / (double)size);
            if (n < min_iters) n = min_iters < iters ? min_iters : iters;
            if (w < 2 && warmup >= 2) w = 2;
        }
        if (c >= C_BCAST_ACK) {
            int bytes = (int)size;
            char line[256] = "";
            if (c == C_BCAST_ACK) {
                double loop = bcast_ack_loop(sbuf, bytes, root, w, n), root_loop = 0, ack = 0;
                MPI_Reduce(&loop, &root_loop, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                MPI_Reduce(&ack_s, &ack, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                double lat = (root_loop - ack) * 1e6;
                snprintf(line, sizeof line, "%10.3f %10.3f %10.3f %11ld %6d %9.3f %7.3f", lat,
                         lat, lat, n, nranks, root_loop * 1e6, ack * 1e6);
            } else if (c == C_BCAST_TPUT) {
                double t = bcast_tput_loop(sbuf, bytes, root, w, n), tmin = 0, tmax = 0, tsum = 0;
                MPI_Reduce(&t, &tmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
                MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                MPI_Reduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
                double mbps = tmax > 0 ? (double)n * (double)size / tmax / 1e6 : 0.0;
                snprintf(line, sizeof line, "%10.3f %10.3f %10.3f %11ld %6d %10.1f",
                         tmax / n * 1e6, tmin / n * 1e6, tmax / n * 1e6, n, nranks, mbps);
            } else {
                double spun = 0.0;
                double t = bcast_skew_loop(sbuf, bytes, root, w, n, max_delay_us, &spun);
                double tmin = 0, tmax = 0, tsum = 0, troot = 0, trmax = 0, spunsum = 0;
                double mine_root = rank == root ? t : 0.0, mine_recv = rank == root ? 0.0 : t;
                MPI_Reduce(&t, &tmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
                MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                MPI_Reduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
                MPI_Reduce(&mine_root, &troot, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                MPI_Reduce(&mine_recv, &trmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
                MPI_Reduce(&spun, &spunsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
                double trecv = (tsum - troot) / (nranks - 1);
                snprintf(line, sizeof line,
                         "%10.3f %10.3f %10.3f %11ld %6d %8.3f %8.3f %11.3f %8.3f",
                         tsum / nranks * 1e6, tmin * 1e6, tmax * 1e6, n, nranks, troot * 1e6,
                         trecv * 1e6, trmax * 1e6, spunsum / (nranks - 1));
            }
            if (bcast_check(sbuf, size, root, (unsigned)size)) {
                wrong = 1;
                if (rank == 0) printf("# WRONG RESULT: %s of %zu bytes\n", names[c], size);
            }
            if (rank == 0) printf("%-13s %11zu %s\n", names[c], size, line);
            if (size >= max_size || size * factor > max_size) break;
            continue;
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
        if (size >= max_size || (size ? size * factor : 1) > max_size) break;
    }
    fflush(stdout);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return wrong ? 3 : 0;
}
