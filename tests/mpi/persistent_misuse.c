/*
 * persistent_misuse: MPI_Start of a persistent collective request that is
 * still active, which MPI makes erroneous. The start must be refused the
 * way an MPI function refuses: an MPI error class (MPI_ERR_REQUEST) through
 * the communicator's error handler, here MPI_ERRORS_RETURN; and the request
 * already under way must complete with the right result, as if the second
 * start had not been made.
 * On a set-up duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, -n rounds
 * (default 20) of: a persistent allreduce (int64 sums) and a persistent
 * barrier, each started, started again at once (refused), then waited;
 * every result compared with the sum every rank computes from the formula
 * each contribution follows.
 */
#include "common.h"
#include <stdint.h>

#define PM_COUNT 16

/* Starts *rq again while it is active: must fail with MPI_ERR_REQUEST. */
static void pm_restart_refused(MPI_Request *rq, const char *what, long round)
{
    int rc = MPI_Start(rq);
    int class = MPI_SUCCESS;
    if (rc != MPI_SUCCESS && MPI_Error_class(rc, &class) != MPI_SUCCESS) class = -1;
    T_CHECK(rc != MPI_SUCCESS && class == MPI_ERR_REQUEST,
            "%s round %ld: MPI_Start of an active request returned %d (class %d), want class MPI_ERR_REQUEST (%d)",
            what, round, rc, class, MPI_ERR_REQUEST);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    long rounds = t_opt(argc, argv, "-n", 20);
    MPI_Comm comm;
    tcomm_t dup;
    T_MPI(MPI_Comm_dup(t_world.comm, &comm));
    t_derive(&t_world, comm, &dup);
    T_MPI(MPI_Comm_set_errhandler(dup.comm, MPI_ERRORS_RETURN));
    t_barrier(&dup); /* sets the communicator up */
    int rank, size;
    MPI_Comm_rank(dup.comm, &rank);
    MPI_Comm_size(dup.comm, &size);
    static int64_t send[PM_COUNT], recv[PM_COUNT];
    MPI_Request sum, barrier;
    T_MPI(T_ALLREDUCE_INIT(send, recv, PM_COUNT, MPI_INT64_T, MPI_SUM, dup.comm, MPI_INFO_NULL, &sum));
    T_MPI(T_BARRIER_INIT(dup.comm, MPI_INFO_NULL, &barrier));
    for (long round = 0; round < rounds; round++) {
        t_fill_contributions(send, PM_COUNT, rank, round);
        for (int i = 0; i < PM_COUNT; i++) recv[i] = -1;
        T_MPI(MPI_Start(&sum));
        pm_restart_refused(&sum, "allreduce", round);
        T_MPI(MPI_Start(&barrier));
        pm_restart_refused(&barrier, "barrier", round);
        T_MPI(MPI_Wait(&barrier, MPI_STATUS_IGNORE));
        T_MPI(MPI_Wait(&sum, MPI_STATUS_IGNORE));
        t_check_contribution_sum(recv, PM_COUNT, size, round, "persistent allreduce");
    }
    T_MPI(MPI_Request_free(&sum));
    T_MPI(MPI_Request_free(&barrier));
    t_free(&dup);
    return t_finish("persistent_misuse");
}
