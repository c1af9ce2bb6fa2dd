/* Long allreduce and reduce in one job, for ci/rxe/ring-reductions.sh: one
 * mpirun across the two Soft-RoCE guests serves both collectives (each
 * launch there costs tens of seconds of TCG), where coll_latency needs a
 * job per collective.
 *
 * usage: ring-reductions MIN_BYTES MAX_BYTES FACTOR
 * For allreduce, then reduce (root 0), at every size MIN, MIN*FACTOR, ...
 * up to MAX: two calls summing floats (bytes / 4 of them), each with its
 * own input pattern, rank r's element j being small integers from (r, j,
 * call) so that every sum is exact in float. Every element of the result is
 * compared with the sum computed here (every rank for allreduce, the root
 * for reduce); the second pattern differs from the first everywhere, so a
 * result left over from the first call cannot pass.
 * Rank 0 prints one line per collective and size:
 *   allreduce 16 ok            (or "allreduce 16 WRONG RESULT at element 3")
 * Exit status 0 when every result was right, 3 otherwise, 2 on bad usage.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Rank r's element j in call k (0 or 1): 0..6, shifted per call so that
 * the two calls' inputs, and so their sums, differ at every element. */
static float input(int rank, size_t j, int call)
{
    return (float)((rank + j + 3 * (size_t)call) % 7);
}

static float expected(int nranks, size_t j, int call)
{
    float sum = 0.0f;
    for (int r = 0; r < nranks; r++) sum += input(r, j, call);
    return sum;
}

/* Runs one call of COLL ("allreduce" or "reduce") on COUNT floats; returns
 * the index of the first wrong element plus one on this rank, 0 if right. */
static size_t checked_call(int is_reduce, float *send, float *recv, size_t count, int call,
                           int rank, int nranks)
{
    for (size_t j = 0; j < count; j++) {
        send[j] = input(rank, j, call);
        recv[j] = -1.0f;
    }
    if (is_reduce)
        MPI_Reduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
    else
        MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (is_reduce && rank != 0) return 0;
    for (size_t j = 0; j < count; j++)
        if (recv[j] != expected(nranks, j, call)) return j + 1;
    return 0;
}

int main(int argc, char **argv)
{
    int rank, nranks, wrong = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long min = argc == 4 ? atol(argv[1]) : 0, max = argc == 4 ? atol(argv[2]) : 0;
    long factor = argc == 4 ? atol(argv[3]) : 0;
    if (min < 4 || max < min || max > (1L << 30) || factor < 2) {
        if (rank == 0) fprintf(stderr, "usage: ring-reductions MIN_BYTES MAX_BYTES FACTOR (4 <= MIN <= MAX <= 1 GiB, FACTOR >= 2)\n");
        MPI_Finalize();
        return 2;
    }
    float *send = malloc((size_t)max), *recv = malloc((size_t)max);
    if (!send || !recv) {
        fprintf(stderr, "ring-reductions: rank %d: cannot allocate 2 x %ld bytes\n", rank, max);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    static const char *const names[] = { "allreduce", "reduce" };
    for (int is_reduce = 0; is_reduce < 2; is_reduce++) {
        for (long bytes = min; bytes <= max; bytes *= factor) {
            size_t count = (size_t)bytes / sizeof(float), first_wrong = 0;
            /* both calls on every rank whatever the first one gave: only
             * the root checks a reduce, and the ranks must call alike */
            for (int call = 0; call < 2; call++) {
                size_t wrong_here = checked_call(is_reduce, send, recv, count, call, rank, nranks);
                if (!first_wrong) first_wrong = wrong_here;
            }
            /* a wrong element's index plus one, from any rank (0: all right) */
            unsigned long mine = (unsigned long)first_wrong, any = 0;
            MPI_Allreduce(&mine, &any, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
            if (rank == 0) {
                if (any) printf("%s %ld WRONG RESULT at element %lu\n", names[is_reduce], bytes, any - 1);
                else printf("%s %ld ok\n", names[is_reduce], bytes);
                fflush(stdout);
            }
            if (any) wrong = 1;
            if (bytes > max / factor) break;
        }
    }
    free(send);
    free(recv);
    MPI_Finalize();
    return wrong ? 3 : 0;
}
