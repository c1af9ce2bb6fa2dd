/*
 * bcast_dist: the distribution of MPI_Bcast latency, call by call, with every
 * call's result checked on every rank.
 *
 *   bcast_dist [-m SIZE[,SIZE...]] [-w WARMUP] [-n ITERS] [-s SCALE_BYTES]
 *              [-l MIN_ITERS] [-r ROOT] [-a] [-F EVERY]
 *     -m  message sizes in bytes, comma-separated (default 8)
 *     -w  warm-up calls per size (default 50), -n timed calls (default 1000)
 *     -s  above SCALE_BYTES, timed calls and warm-up shrink in proportion to
 *         the size (ITERS * SCALE_BYTES / size); 0 (default) keeps them
 *     -l  the least number of timed calls when -s shrinks them (default 20)
 *     -r  root (default 0)
 *     -a  also print every call's latency: "call SIZE INDEX US ROOT_US", ROOT_US
 *         counted from the root's entry instead of the last rank's
 *     -F  a self-test of the checking: the root sends the pattern of the call
 *         before on every EVERY-th call (call indices 0, EVERY, ...; warm-up
 *         calls count from -WARMUP), which every receiver must count wrong
 *
 * A call's latency runs from the moment the last rank enters MPI_Bcast until
 * the last rank returns from it: the latest return time over ranks minus the
 * latest entry time, read from CLOCK_MONOTONIC. That needs one clock for all
 * ranks: ranks on one machine, which network-namespace hosts are (one
 * kernel). Each call starts after an untimed MPI_Barrier, so one call's tail
 * does not leak into the next one's time. Counting from the last entry rather
 * than the root's keeps the barrier's own skew out: a collective component
 * under injected loss lets some ranks leave MPI_Barrier late, and that
 * lateness is the barrier's, not the bcast's. It also leaves out a bcast's
 * progress before the last rank came: with -a, ROOT_US counts from the
 * root's entry instead, barrier skew included; the truth lies between.
 * Every call sends a pattern of its own (made from the size, the call index
 * and the offset), and each receiver compares its buffer with it
 * after every call, warm-up included; the buffer is overwritten before each
 * call, so a stale buffer is caught too.
 *
 * Output, on rank 0 (lines starting with '#' are comments):
 *   # bcast_dist  size_bytes  calls  mean_us  median_us  p99_us  max_us  wrong  ranks
 *   bcast_dist    8           1000   201.3    180.2      612.0   2301.4  0      4
 * "wrong" counts the calls with a wrong byte at some rank; any wrong call
 * also prints "# WRONG RESULT" and makes the exit status 3.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;

static void usage_exit(const char *msg)
{
    if (rank == 0) {
        if (msg) fprintf(stderr, "bcast_dist: %s\n", msg);
        fprintf(stderr, "usage: bcast_dist [-m SIZE[,SIZE...]] [-w WARMUP] [-n ITERS] "
                        "[-s SCALE_BYTES] [-l MIN_ITERS] [-r ROOT] [-a] [-F EVERY]\n");
    }
    MPI_Finalize();
    exit(2);
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* The byte at OFFSET of call CALL's message of SIZE bytes: differs between
 * neighbouring calls and sizes, and along the message. */
static unsigned char pattern_byte(size_t size, long call, size_t offset)
{
    uint64_t x = (uint64_t)size * 0x9E3779B97F4A7C15ull ^ (uint64_t)call * 0xBF58476D1CE4E5B9ull ^
                 (uint64_t)offset * 0x94D049BB133111EBull;
    return (unsigned char)(x >> 29 ^ x >> 7);
}

static long parse_count(const char *text, const char *what, long min)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || v < min) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s must be a whole number >= %ld, not '%s'", what, min, text);
        usage_exit(msg);
    }
    return v;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One size: WARMUP + ITERS checked calls; prints the summary on rank 0.
 * Returns the number of wrong calls (the same on every rank). */
static long run_size(size_t size, long warmup, long iters, int root, int print_all, long corrupt_every)
{
    unsigned char *buf = malloc(size);
    double *start = malloc(sizeof(double) * iters), *end = malloc(sizeof(double) * iters);
    double *latest = malloc(sizeof(double) * iters), *last_entry = malloc(sizeof(double) * iters);
    if (!buf || !start || !end || !latest || !last_entry) {
        fprintf(stderr, "bcast_dist: out of memory at %zu bytes\n", size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    long wrong = 0;
    for (long call = -warmup; call < iters; call++) {
        if (rank == root) {
            long sent = corrupt_every > 0 && call % corrupt_every == 0 ? call - 1 : call;
            for (size_t i = 0; i < size; i++) buf[i] = pattern_byte(size, sent, i);
        } else {
            /* never the pattern of this call at byte 0 */
            memset(buf, pattern_byte(size, call, 0) ^ 0xFF, size);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_us();
        MPI_Bcast(buf, (int)size, MPI_BYTE, root, MPI_COMM_WORLD);
        double t1 = now_us();
        if (rank != root) {
            for (size_t i = 0; i < size; i++) {
                if (buf[i] != pattern_byte(size, call, i)) {
                    wrong++;
                    break;
                }
            }
        }
        if (call >= 0) {
            start[call] = t0;
            end[call] = t1;
        }
    }
    long wrong_total = 0;
    MPI_Allreduce(&wrong, &wrong_total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce(end, latest, (int)iters, MPI_DOUBLE, MPI_MAX, root, MPI_COMM_WORLD);
    MPI_Reduce(start, last_entry, (int)iters, MPI_DOUBLE, MPI_MAX, root, MPI_COMM_WORLD);
    if (rank == root) {
        if (print_all)
            for (long i = 0; i < iters; i++)
                printf("call %zu %ld %.2f %.2f\n", size, i, latest[i] - last_entry[i], latest[i] - start[i]);
        for (long i = 0; i < iters; i++) latest[i] -= last_entry[i];
        double sum = 0;
        for (long i = 0; i < iters; i++) sum += latest[i];
        qsort(latest, (size_t)iters, sizeof(double), compare_doubles);
        double median = iters % 2 ? latest[iters / 2] : (latest[iters / 2 - 1] + latest[iters / 2]) / 2;
        long p99 = (long)(0.99 * (double)iters);
        if (p99 >= iters) p99 = iters - 1;
        printf("bcast_dist %zu %ld %.2f %.2f %.2f %.2f %ld %d\n", size, iters, sum / (double)iters, median,
               latest[p99], latest[iters - 1], wrong_total, nranks);
        if (wrong_total) printf("# WRONG RESULT: %ld of %ld calls of %zu bytes\n", wrong_total, iters + warmup, size);
        fflush(stdout);
    }
    free(buf);
    free(start);
    free(end);
    free(latest);
    free(last_entry);
    return wrong_total;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *sizes = "8";
    long warmup = 50, iters = 1000, scale = 0, min_iters = 20, corrupt_every = 0;
    int root = 0, print_all = 0, opt;
    while ((opt = getopt(argc, argv, "m:w:n:s:l:r:aF:")) != -1) {
        switch (opt) {
        case 'm': sizes = optarg; break;
        case 'w': warmup = parse_count(optarg, "-w", 0); break;
        case 'n': iters = parse_count(optarg, "-n", 1); break;
        case 's': scale = parse_count(optarg, "-s", 0); break;
        case 'l': min_iters = parse_count(optarg, "-l", 1); break;
        case 'r': root = (int)parse_count(optarg, "-r", 0); break;
        case 'a': print_all = 1; break;
        case 'F': corrupt_every = parse_count(optarg, "-F", 1); break;
        default: usage_exit(NULL);
        }
    }
    if (optind != argc) usage_exit("unexpected argument");
    if (root >= nranks) usage_exit("-r must name a rank");
    if (rank == 0)
        printf("# bcast_dist size_bytes calls mean_us median_us p99_us max_us wrong ranks\n");
    long wrong = 0;
    char *list = strdup(sizes), *save = NULL;
    for (char *item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        long size = parse_count(item, "every -m size", 1);
        if (size > 1L << 30) usage_exit("sizes above 1 GiB are not supported");
        long n = iters, w = warmup;
        if (scale > 0 && size > scale) {
            n = (long)((double)iters * (double)scale / (double)size);
            w = (long)((double)warmup * (double)scale / (double)size);
            if (n < min_iters) n = min_iters;
        }
        wrong += run_size((size_t)size, w, n, root, print_all, corrupt_every);
    }
    free(list);
    MPI_Finalize();
    return wrong ? 3 : 0;
}
