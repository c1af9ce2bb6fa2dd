/*
 * away_after_bcast: after each bcast the receivers compute (sleep) -a
 * seconds, away from MPI, while the root stays inside MPI's progress
 * (an MPI_Iprobe loop, as an application polling for messages does);
 * then every rank makes an allreduce. Nothing is wrong: a receiver away
 * from MPI acknowledges nothing, and over a datagram transport the root's
 * repairs between calls must neither wait for it inside MPI_Iprobe nor
 * fail at the fault timeout (the root is not waiting in a collective).
 * Every result is checked; the root reports its longest MPI_Iprobe
 * (for the reader; not asserted: a loaded machine stretches any call).
 *
 * Options: -a <seconds away> (default 4), -n <bytes per bcast> (default
 * 100000), -r <rounds> (default 2).
 */
#include "common.h"
#include <time.h>

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static unsigned char byte_at(int round, long i) { return (unsigned char)(i * 7 + round * 31 + 1); }

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int away = (int)t_opt(argc, argv, "-a", 4);
    long len = t_opt(argc, argv, "-n", 100000);
    int rounds = (int)t_opt(argc, argv, "-r", 2);
    int rank = t_wrank, size = t_wsize;
    unsigned char *message = malloc((size_t)len);
    for (int round = 0; round < rounds; round++) {
        for (long i = 0; i < len; i++) message[i] = rank == 0 ? byte_at(round, i) : 0;
        T_MPI(MPI_Bcast(message, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD));
        for (long i = 0; i < len; i++) {
            if (message[i] != byte_at(round, i)) {
                T_FAIL("round %d: bcast byte %ld is %d, expected %d", round, i, message[i], byte_at(round, i));
                break;
            }
        }
        if (rank == 0) {
            double started = seconds_now(), longest = 0;
            while (seconds_now() - started < away) {
                int flag;
                double before = seconds_now();
                T_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
                if (seconds_now() - before > longest) longest = seconds_now() - before;
            }
            printf("round %d: the root's longest MPI_Iprobe took %.3f s\n", round, longest);
        } else {
            sleep((unsigned)away);
        }
        long one = 1, ranks = 0;
        T_MPI(MPI_Allreduce(&one, &ranks, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        T_CHECK(ranks == size, "round %d: allreduce gave %ld, expected %d", round, ranks, size);
    }
    free(message);
    return t_finish("away_after_bcast");
}
