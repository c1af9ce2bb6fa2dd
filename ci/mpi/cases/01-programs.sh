# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read): section 1, the test programs
# at every process count (the only cases --transport, --hosts and --mca
# run), and section 1a, MPI_THREAD_MULTIPLE over the transport or hosts
# asked for.

# Over udp (--transport udp) every rank's comm_ready on MPI_COMM_WORLD
# reports the protection its frames run with: coll_rdma_udp_protection
# as --mca gave it, else the default, encrypt; with none, rank 0 warns so.
UDP_PROTECTED=()
if [ "$TRANSPORT" = udp ] && [ "$MODE" = component ]; then
    udp_protection=encrypt
    for ((i = 1; i + 1 < ${#EXTRA_MCA[@]}; i += 3)); do
        [ "${EXTRA_MCA[i]}" != coll_rdma_udp_protection ] || udp_protection=${EXTRA_MCA[i + 1]}
    done
    UDP_PROTECTED=("ev:every_rank_ready(0; .transport == \"udp\" and .protection == \"$udp_protection\")")
    [ "$udp_protection" != none ] ||
        UDP_PROTECTED+=("says-re:coll:rdma: comm 0: warning: udp frames unprotected \\(coll_rdma_udp_protection=none\\)")
fi

# 1. the three programs at every size
for np in $NPS; do
    # (a single rank has no transport, so no comm_ready)
    SERVED_HERE=("${SERVED[@]}")
    [ "$np" -gt 1 ] && SERVED_HERE+=("${UDP_PROTECTED[@]}")
    CHECKS=("${SERVED_HERE[@]}"); run_test "np$np-barrier_order" "$np" ok "${V[@]}" -- barrier_order -n "$BO_N" -d 200
    CHECKS=("${SERVED_HERE[@]}"); run_test "np$np-comm_lifecycle" "$np" ok "${V[@]}" -- comm_lifecycle -l "$CL_L"
    CHECKS=("${SERVED_HERE[@]}"); run_test "np$np-coll_mix" "$np" ok "${V[@]}" -- coll_mix -i "$CM_I"
    CHECKS=("${SERVED_HERE[@]}"); run_test "np$np-reduce_ops" "$np" ok "${V[@]}" -- reduce_ops "${RO[@]}"
    CHECKS=("${SERVED_HERE[@]}")
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
        CHECKS=("ev:serving_thread_multiple" "nowarn:coll:rdma:.*(warning|error)")
        for what in barrier bcast allreduce reduce; do
            CHECKS+=("ev:rank0_served_somewhere(\"$what\"; $TM_OVER)")
        done
        run_test "np$np-thread_multiple" "$np" ok "${V[@]}" -- thread_multiple -t 2 -i 3 -c 2
    done
fi
