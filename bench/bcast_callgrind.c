/*
 * bcast_callgrind: blocking MPI_Bcast from rank 0, for callgrind's
 * instruction counts per call (ci/bench/udp-bcast-callgrind.sh runs it
 * under valgrind --tool=callgrind --toggle-collect=PMPI_Bcast).
 *
 * The root bcasts on one communicator and then enters a barrier on
 * another; every other rank enters the barrier first and bcasts after,
 * so its piece has (nearly always) arrived when its bcast begins and
 * its count is the take, not a wait whose length depends on the
 * machine's load. Both communicators are set up by warm-up calls made in
 * the same order on every rank; the counts are zeroed after them
 * (CALLGRIND_ZERO_STATS) and dumped after the measured calls
 * (CALLGRIND_DUMP_STATS_AT), so the setup's waits, which vary from run
 * to run, are left out. Every rank checks every byte it received.
 *
 * usage: bcast_callgrind [CALLS [BYTES]]   (default 1000 calls of 8 bytes)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/callgrind.h>

#define WARM_UP_CALLS 20

static unsigned char call_byte(long call) { return (unsigned char)(call * 7 + 1); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long calls = argc > 1 ? atol(argv[1]) : 1000;
    int bytes = argc > 2 ? atoi(argv[2]) : 8;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm bcast_comm, barrier_comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &bcast_comm);
    MPI_Comm_dup(MPI_COMM_WORLD, &barrier_comm);
    unsigned char *buf = malloc(bytes > 0 ? (size_t)bytes : 1);
    for (int i = 0; i < WARM_UP_CALLS; i++) {
        MPI_Bcast(buf, bytes, MPI_BYTE, 0, bcast_comm);
        MPI_Barrier(barrier_comm);
    }
    MPI_Barrier(barrier_comm);
    CALLGRIND_ZERO_STATS;
    long wrong = 0;
    for (long call = 0; call < calls; call++) {
        memset(buf, rank == 0 ? call_byte(call) : 0xEE, (size_t)bytes);
        if (rank == 0) {
            MPI_Bcast(buf, bytes, MPI_BYTE, 0, bcast_comm);
            MPI_Barrier(barrier_comm);
        } else {
            MPI_Barrier(barrier_comm);
            MPI_Bcast(buf, bytes, MPI_BYTE, 0, bcast_comm);
        }
        for (int j = 0; j < bytes; j++) wrong += buf[j] != call_byte(call);
    }
    CALLGRIND_DUMP_STATS_AT("measured calls");
    MPI_Barrier(bcast_comm);
    if (wrong) fprintf(stderr, "bcast_callgrind: rank %d: %ld wrong bytes\n", rank, wrong);
    MPI_Comm_free(&bcast_comm);
    MPI_Comm_free(&barrier_comm);
    free(buf);
    MPI_Finalize();
    return wrong != 0;
}
