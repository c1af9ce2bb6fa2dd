/*
 * Shows, without coll rdma, the crash that MPI 4 sessions hit on Open MPI
 * 5.0.7 / PMIx 5.0.7 (Debian 13) when PMIx warns at its second
 * initialisation in one process: two sessions, one after the other.
 *
 *   mpicc -o pmix-reinit-crash ci/ompi5/pmix-reinit-crash.c
 *   mpirun -np 2 --mca coll ^rdma --mca mca_base_component_path SYS_DEFAULT:/tmp \
 *       -x GLIBC_TUNABLES=glibc.malloc.perturb=165:glibc.malloc.tcache_count=0 \
 *       ./pmix-reinit-crash
 *
 * PRRTE copies mca_base_component_path into each rank's
 * PMIX_MCA_mca_base_component_path; PMIx does not expand SYS_DEFAULT and
 * warns (pmix_show_help) in every PMIx_Init. The first warning prints. The
 * second, in the second session's PMIx_Init, is queued (event_active) on the
 * event base that the first session's PMIx_Finalize freed: left as it was,
 * the freed memory takes the message silently; filled by glibc on free
 * (the GLIBC_TUNABLES above) or reused by any allocation, as coll rdma's
 * were, it crashes: SIGSEGV in event_active <- pmix_show_help <-
 * pmix_mca_base_component_repository_add <- PMIx_Init <- MPI_Session_init.
 * Without the tunables, or with a component path of directories only
 * (--mca mca_base_component_path /tmp), the program survives.
 */
#include <mpi.h>
#include <stdio.h>

static void one_session(void)
{
    MPI_Session session;
    MPI_Group group;
    MPI_Comm comm;
    int rank, one = 1, sum = 0, size;
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session);
    MPI_Group_from_session_pset(session, "mpi://WORLD", &group);
    MPI_Comm_create_from_group(group, "pmix-reinit-crash", MPI_INFO_NULL, MPI_ERRORS_RETURN, &comm);
    MPI_Group_free(&group);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
    printf("pmix-reinit-crash: rank %d session allreduce %s\n", rank, sum == size ? "ok" : "WRONG");
    MPI_Comm_free(&comm);
    MPI_Session_finalize(&session);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    one_session();
    one_session();
    printf("pmix-reinit-crash: survived the second session\n");
    return 0;
}
