# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read): section 1, the test programs
# at every process count (the only cases --transport, --hosts and --mca
# run), and section 1a, MPI_THREAD_MULTIPLE over the transport or hosts
# asked for.

# 1. the three programs at every size
for np in $NPS; do
    CHECKS=("${SERVED[@]}"); run_test "np$np-barrier_order" "$np" ok "${V[@]}" -- barrier_order -n "$BO_N" -d 200
    CHECKS=("${SERVED[@]}"); run_test "np$np-comm_lifecycle" "$np" ok "${V[@]}" -- comm_lifecycle -l "$CL_L"
    CHECKS=("${SERVED[@]}"); run_test "np$np-coll_mix" "$np" ok "${V[@]}" -- coll_mix -i "$CM_I"
    CHECKS=("${SERVED[@]}"); run_test "np$np-reduce_ops" "$np" ok "${V[@]}" -- reduce_ops "${RO[@]}"
    CHECKS=("${SERVED[@]}")
    [ "$np" -gt 1 ] && [ -n "$BC_REASON" ] && CHECKS+=("$BC_REASON" "$BC_PATHS")
    run_test "np$np-bcast" "$np" ok "${V[@]}" -- bcast "${BC[@]}" "${BC_E[@]}"
done

# 1a. MPI_THREAD_MULTIPLE over the transport or hosts asked for (udp
#     between the netns hosts of ci/udp-tests.sh, verbs and shm+verbs in the
#     Soft-RoCE guests): a few iterations of section 18's program (2 worker
#     threads on their own communicators, the Iprobe/Test poller, a thread
#     creating and freeing communicators), results checked by the program,
#     every collective served over an expected transport on some
#     communicator, no warning. Shared memory on one host runs it at
#     length in section 18.
if [ -n "$TRANSPORT$HOSTS" ] && [ "$MODE" = component ]; then
    # (the transports as a JSON array, for the events check)
    TM_OVER=$(printf '%s\n' ${EXPECT_TRANSPORT:-${TRANSPORT:-shm}} | jq -R . | jq -sc .)
    for np in $NPS; do
        [ "$np" -gt 1 ] || continue
        CHECKS=("says:coll:rdma: serving MPI_THREAD_MULTIPLE" "nowarn:coll:rdma:.*(warning|error)")
        for what in barrier bcast allreduce reduce; do
            CHECKS+=("ev:rank0_served_somewhere(\"$what\"; $TM_OVER)")
        done
        run_test "np$np-thread_multiple" "$np" ok "${V[@]}" -- thread_multiple -t 2 -i 3 -c 2
    done
fi
