# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read): section 1b, the non-blocking
# and persistent collectives served natively (a new non-blocking kind gets
# its block here, after the last one).

# 1b. MPI_Ibarrier and the persistent barrier (issue 35): served natively
#     wherever the blocking barrier is (verbose 1 counts them), several
#     outstanding between blocking barriers, completed by MPI_Waitall,
#     MPI_Waitany and MPI_Test loops, a late rank, requests pending across
#     another communicator's dup and free. Shared memory on one host only
#     (not a section 1 name): the check orders events by the host's clock.
NB_R=200; [ "$QUICK" = 1 ] && NB_R=60
for np in 1 2 3 4; do
    CHECKS=("${SERVED[@]}")
    if [ "$np" -gt 1 ] && [ "$MODE" = component ]; then
        for kind in ibarrier barrier_init; do
            CHECKS+=("ev:every_rank_served(0; \"$kind\"; \"shm\")")
        done
    fi
    run_test "nonblocking_barrier-np$np" "$np" ok "${V[@]}" -- nonblocking_barrier -r "$NB_R" -n 1000
done
