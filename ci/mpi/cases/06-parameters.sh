# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read): sections 7-10 (component
# mode), parameter values valid and bad, the autotunes, stall warnings,
# forced transports that cannot work here and the version check.

# 7. valid parameter values
for spec in 1:5 2:5 3:8 7:8 64:5; do
    radix=${spec%:*} np=${spec#*:}
    CHECKS=("$SERVED_CHECK" "ev:every_rank_ready(0; .transport == \"shm\" and .barrier.radix == $radix)")
    run_test "radix-$radix-np$np" "$np" ok --mca coll_rdma_barrier_radix "$radix" "${V[@]}" \
        -- barrier_order -n 3000 -d 100
done
# 7a. coll_rdma_autotune (issue 14, part 4): the barriers (and the
#     allreduces around them: the trial agrees through the same
#     allreduce) stay right, the measured table appears once per
#     communicator, and every rank keeps the same radix
for np in 2 4; do
    CHECKS=("${SERVED[@]}" autotune)
    run_test "autotune-np$np" "$np" ok --mca coll_rdma_autotune 1 "${V[@]}" -- barrier_order -n 3000 -d 100
done
CHECKS=("${SERVED[@]}" autotune)
run_test "autotune-coll_mix-np4" 4 ok --mca coll_rdma_autotune 1 --mca coll_rdma_autotune_calls 2 "${V[@]}" -- coll_mix -i 100
# (most of its communicators are freed during their trial: the closing
# barrier runs the candidate whose turn it is)
CHECKS=("${SERVED[@]}" autotune)
run_test "autotune-comm_lifecycle-np4" 4 ok --mca coll_rdma_autotune 1 --mca coll_rdma_autotune_calls 1 "${V[@]}" \
    -- comm_lifecycle -l "$CL_L"
# 7a'. per-rank memory at setup (issue 14, part 1): the line appears
#     and its total is the shm segment's size by the layout's formula
for np in 2 4; do
    CHECKS=("$SERVED_CHECK" memory)
    run_test "verbose-memory-np$np" "$np" ok "${V[@]}" -- barrier_order -n 100
done
# 7b. the allreduce degree autotune: results right (reduce_ops and
#     the non-commutative ops against their serial references) with
#     the trial run before the first tree-served call; at np 2 there is
#     one tree, so nothing is measured; at 3 and 4 the table appears
#     and every rank keeps the one degree it marks
for np in 2 3 4; do
    if [ "$np" = 2 ]; then
        AT=('ev:[events("autotune_plan") | on(0) | select(.collective == "allreduce") | .plan] == ["nothing to measure"]'
            'ev:[events("autotune") | select(.collective == "allreduce")] | length == 0')
    else
        AT=('ev:[events("autotune_plan") | on(0) | select(.collective == "allreduce")]
                | length == 1 and .[0].plan == "trial" and .[0].candidates[0] == 1 and (.[0].candidates | length >= 2)'
            'ev:autotune_agreed("allreduce"; true)')
    fi
    CHECKS=("${SERVED[@]}" autotune autotune-allreduce "${AT[@]}")
    run_test "autotune-reduce_ops-np$np" "$np" ok --mca coll_rdma_autotune 1 --mca coll_rdma_autotune_calls 3 "${V[@]}" \
        -- reduce_ops "${RO_PARAM[@]}"
    CHECKS=("${SERVED[@]}" autotune-allreduce "${AT[@]}")
    run_test "autotune-noncommutative-np$np" "$np" ok --mca coll_rdma_autotune 1 "${V[@]}" -- noncommutative
done
CHECKS=("$SERVED_CHECK"); run_test "spin-polls-0-np4" 4 ok --mca coll_rdma_spin_polls 0 "${V[@]}" -- barrier_order -n 2000
CHECKS=("$SERVED_CHECK"); run_test "spin-polls-1000-np2" 2 ok --mca coll_rdma_spin_polls 1000 "${V[@]}" -- barrier_order -n 2000
CHECKS=("$SERVED_CHECK"); run_test "transport-shm-np3" 3 ok --mca coll_rdma_transport shm "${V[@]}" -- comm_lifecycle -l 200

# 8. stall warnings: one rank arrives late. The warnings must appear,
#    and the generic checks of normal runs (SERVED; quiet at verbose 0)
#    must tolerate them, since a loaded machine makes legitimate waits
#    that long, while still refusing any other warning
#    (6 s late where the warning is required: a wait looks at the clock
#    only every few hundred polls, and on a loaded machine those polls
#    alone can take seconds)
CHECKS=("${SERVED[@]}" "says-re:$STALL_WARNING_RE")
run_test "stall-warning-after-1s" 3 ok --mca coll_rdma_stall_warning 1 "${V[@]}" -- barrier_order -n 200 -s 6
CHECKS=(quiet "says-re:$STALL_WARNING_RE")
run_test "stall-warning-at-verbose-0-is-quiet-enough" 3 ok --mca coll_rdma_stall_warning 1 -- barrier_order -n 200 -s 6
CHECKS=("$SERVED_CHECK" "nore:coll:rdma:.*warning")
run_test "stall-warning-0-never" 3 ok --mca coll_rdma_stall_warning 0 "${V[@]}" -- barrier_order -n 200 -s 3

# 8b. a rank that never comes (it sleeps 90 s before its second
#     barrier): with a 2 s fault timeout the others' barrier fails with
#     MPI_ERR_OTHER, saying what it waited for, and the job ends long
#     before the sleeper would have woken (Open MPI's own report of the
#     error, "MPI_ERR_OTHER", is help text that mpirun now and then loses
#     while the job aborts: "ORTE_ERROR_LOG: ... in file util/show_help.c"
#     stands in its place then)
CHECKS=("says-re:coll:rdma: error: comm 0 rank [0-9]+: barrier failed: .*gave up after [0-9.]+ s without progress waiting for .*barrier [0-9]+, round [0-9]+: notification from rank [0-9]+.*the job looks hung"
    "re:MPI_ERR_OTHER|ORTE_ERROR_LOG: .*show_help\\.c" "within:60")
run_test "fault-timeout-2s-ends-a-hung-barrier" 3 refused --mca coll_rdma_fault_timeout_s 2 "${V[@]}" \
    -- barrier_order -n 200 -s 90

# 9. bad input: the documented warning, then the automatic choice
CHECKS=("$SERVED_CHECK" "says:coll:rdma: warning: coll_rdma_barrier_radix=-3 is invalid (0 = automatic, or 1..=64); using the automatic choice")
run_test "bad-radix--3" 4 ok --mca coll_rdma_barrier_radix -3 "${V[@]}" -- coll_mix -i 50
CHECKS=("$SERVED_CHECK" "says:coll:rdma: warning: coll_rdma_barrier_radix=999 is invalid (0 = automatic, or 1..=64); using the automatic choice")
run_test "bad-radix-999" 4 ok --mca coll_rdma_barrier_radix 999 "${V[@]}" -- coll_mix -i 50
CHECKS=("$SERVED_CHECK" "says:coll:rdma: warning: coll_rdma_transport=\"bogus\" is unknown (auto, shm, verbs, udp); using auto")
run_test "bad-transport-bogus" 4 ok --mca coll_rdma_transport bogus "${V[@]}" -- coll_mix -i 50
# 9b. verbs forced on a machine without an RDMA device, and two
#     pretended nodes (shared memory within them would work, verbs
#     between them cannot, and no rank may go half way): every rank says
#     why, every collective goes to the module underneath, results right
without_device_test "transport-verbs-without-device-np3" 3 "no RDMA device found" coll_rdma_transport verbs
without_device_test "pretend-nodes-without-device-np4" 4 "verbs between the nodes failed: no RDMA device found" \
    coll_rdma_test_pretend_nodes 2
# 9b''. /dev/shm too small for the shared segment (issue 33): a 3 MiB
#     tmpfs on /dev/shm in a private mount namespace, Open MPI's own
#     shared memory kept in /tmp. The segment of 4 ranks is 3.3 MiB
#     with the default windows: its header and windows (2.3 MiB, all
#     that was reserved before) fit, its 16 rings of 66 KiB do not.
#     Every rank says why, naming /dev/shm, and hands every call on it
#     to the module underneath; results right, no SIGBUS (before,
#     setup succeeded with rings the tmpfs could not back). The
#     program's smaller communicators may fit, and are served
if [ "$(id -u)" = 0 ] && unshare -m sh -c 'mount -t tmpfs -o size=3m tmpfs /dev/shm' 2>/dev/null; then
    MPIRUN_WRAPPER=(unshare -m --propagation private sh -c 'mount -t tmpfs -o size=3m tmpfs /dev/shm && exec "$@"' small-dev-shm)
    CHECKS=('ev:unavailable_everywhere(0; "transport"; "posix_fallocate failed: No space left on device.*/dev/shm has no room")')
    # (Open MPI 4 names its shared-memory BTL vader, 5 sm; each ignores the other's)
    run_test "full-dev-shm-falls-back-np4" 4 ok --mca btl_vader_backing_directory /tmp --mca btl_sm_backing_directory /tmp \
        "${V[@]}" -- coll_mix -i 20
else
    skip "full-dev-shm-falls-back-np4" "no private mount namespace with a tmpfs here (needs root and unshare -m)"
fi
# 9b'. the two-level schedules (coll_rdma_hierarchy auto) over pretended
#     nodes on shared memory (coll_rdma_transport shm: the hybrid's
#     pretended nodes need an RDMA device, the Soft-RoCE step covers
#     them): np 5 as nodes of 3 and 2, np 4 as nodes of 2, 1 and 1;
#     barrier order, the other collectives and many communicators
#     (split ones of 1-3 ranks, each its own node when there are more
#     pretended nodes than ranks) right, and verbose 1 says which
#     barrier serves; coll_rdma_hierarchy flat puts the flat ones back
CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .barrier.two_level)'
    'ev:hierarchy_of(0; 0) | .levels == "two-level" and .nodes == 2 and .node_leader == 0 and .node_ranks == 3'
    'ev:hierarchy_of(0; 4) | .levels == "two-level" and .nodes == 2 and .node_leader == 3 and .node_ranks == 2')
run_test "two-level-barrier_order-pretend-nodes-np5" 5 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
    -- barrier_order -n "$BO_N"
CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .barrier.two_level)'
    'ev:[events("hierarchy") | on(0)] | length == $np and all(.[]; .levels == "two-level" and .nodes == 3 and .node_ranks <= 2)')
run_test "two-level-coll_mix-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 3 "${V[@]}" \
    -- coll_mix -i "$CM_I"
CHECKS=("${SERVED[@]}" 'ev:any(events("comm_ready"); .barrier.two_level)')
run_test "two-level-comm_lifecycle-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
    -- comm_lifecycle -l "$CL_L"
#     allreduce and reduce on the two-level tree (every op and datatype,
#     non-commutative user ops in rank order), with the default 8 KiB
#     segments and with 64-byte ones (many segments through every level)
CHECKS=("${SERVED[@]}" 'ev:hierarchy_of(0; 0) | .nodes == 2 and .two_level.allreduce'
    'ev:hierarchy_of(0; 4) | .two_level.reduce' 'ev:every_rank_ready(0; .allreduce.two_level)')
run_test "two-level-reduce_ops-pretend-nodes-np5" 5 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
    -- reduce_ops "${RO_PARAM[@]}"
CHECKS=("${SERVED[@]}" 'ev:hierarchy_of(0; 3) | .nodes == 3 and .two_level.allreduce'
    'ev:every_rank_ready(0; .allreduce.two_level and .allreduce.degree == 1)')
run_test "two-level-reduce_ops-segments-64-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 3 \
    --mca coll_rdma_allreduce_degree 1 --mca coll_rdma_allreduce_segment_size 64 --mca coll_rdma_reduce_segment_size 64 "${V[@]}" \
    -- reduce_ops "${RO_PARAM[@]}"
#     bcast in two levels (the root's node from the root, the leaders
#     from the root's leader, the other nodes from their leader; every
#     level over shared windows, since the shm transport's multicast is
#     its window): every root, size and datatype phase of the bcast
#     program, with single copy from 16 KiB within each level and, with
#     cross-memory reads refused and a 2-slot window of 256 bytes, with
#     every message cut into many pieces through both levels
CHECKS=("${SERVED[@]}" "$BC_REASON"
    'ev:hierarchy_of(0; 0) | .nodes == 2 and .node_leader == 0 and .two_level.bcast'
    'ev:hierarchy_of(0; 4) | .node_leader != 4 and .two_level.bcast'
    'ev:[events("hierarchy") | on(0)] | length == $np and all(.[]; .two_level.bcast)')
run_test "two-level-bcast-pretend-nodes-np5" 5 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
    -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
CHECKS=("${SERVED[@]}" 'ev:hierarchy_of(0; 3) | .nodes == 3 and .two_level.bcast')
run_test "two-level-bcast-window-2-slot-256-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 3 \
    --mca coll_rdma_test_pretend_no_cross_memory 1 --mca coll_rdma_bcast_window 2 --mca coll_rdma_bcast_ack_interval 2 \
    --mca coll_rdma_bcast_slot_size 256 "${V[@]}" \
    -- bcast -s 256 -w 2 -n 300 -L 50
#     (coll_rdma_autotune times flat radices only: on a two-level
#     communicator it says it does not run)
CHECKS=("${SERVED[@]}" 'ev:[events("autotune_plan") | on(0) | select(.collective == "barrier") | .plan] == ["two-level"]'
    'ev:[events("autotune") | select(.collective == "barrier")] | length == 0')
run_test "two-level-autotune-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 \
    --mca coll_rdma_autotune 1 "${V[@]}" -- barrier_order -n 2000
CHECKS=("${SERVED[@]}"
    'ev:[events("hierarchy")] | length > 0 and all(.[]; .levels == "flat" and .reason == "coll_rdma_hierarchy=flat")'
    'ev:all(events("comm_ready"); (.barrier.two_level or .allreduce.two_level) | not)')
run_test "hierarchy-flat-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 \
    --mca coll_rdma_hierarchy flat "${V[@]}" -- barrier_order -n 2000
#     a job on one node (as its launcher says) lays out no bcast node
#     stage and no two-level barrier: with the default
#     coll_rdma_hierarchy=auto its window is smaller than where nodes are
#     pretended (the node stage more than doubled the bcast region)
CHECKS=("${SERVED[@]}")
run_test "window-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
    -- coll_mix -i 20
CHECKS=("${SERVED[@]}" "smaller-window-than:window-pretend-nodes-np4")
run_test "window-one-node-hierarchy-auto-np4" 4 ok --mca coll_rdma_transport shm "${V[@]}" -- coll_mix -i 20
CHECKS=("$SERVED_CHECK" "says:coll:rdma: warning: coll_rdma_hierarchy=\"bogus\" is unknown (auto, flat); using auto")
run_test "bad-hierarchy-bogus" 3 ok --mca coll_rdma_hierarchy bogus "${V[@]}" -- coll_mix -i 20
# 9c. udp forced where its setup cannot work: an interface that does
#     not exist (this rank's own failure), and ranks on different hosts'
#     views (rank 0 on loopback, rank 1 on the outside interface: setup
#     refuses a loopback address unless every rank has it). Every rank
#     falls back alike, rank 0 warns why at verbosity 0, results right
udp_fallback_test "transport-udp-missing-interface-np3" 3 "[0-9]+" \
    'coll_rdma_udp_interface=no-such-if0: no interface named "no-such-if0" with an IPv4 address' \
    --mca coll_rdma_udp_interface no-such-if0
# (communicators of the even or of the odd ranks alone share one
# address, so udp serves them)
# (OUTSIDE_ADDRESS: ci/mpi-tests.sh's, the source address of the route
# towards the group range)
if [ -n "$OUTSIDE_ADDRESS" ] && [ "$OUTSIDE_ADDRESS" != 127.0.0.1 ]; then
    RUN_WRAPPER=("$ROOT/ci/per-rank-mca.sh" coll_rdma_udp_interface 127.0.0.1 "$OUTSIDE_ADDRESS")
    udp_fallback_test "transport-udp-loopback-mismatch-np4" 4 0 \
        "rank 1 is on ${OUTSIDE_ADDRESS//./\\.} and rank 0 on 127\\.0\\.0\\.1: a loopback address reaches only its own host"
else
    skip "transport-udp-loopback-mismatch-np4" "no route towards 239.78.0.0/16 beyond loopback here"
fi
# 9d. udp's frames under each protection but the default (encrypt, which
#     thread-multiple-udp-np2 and the netns bed's section 1 check): every
#     rank's comm_ready reports the one asked for, bcasts are served over
#     udp and the results are right; with none rank 0 warns so
for protection in authenticate none; do
    if [ -z "$OUTSIDE_ADDRESS" ] || [ "$OUTSIDE_ADDRESS" = 127.0.0.1 ]; then
        skip "transport-udp-protection-$protection-np3" "no route towards 239.78.0.0/16 beyond loopback here"
        continue
    fi
    CHECKS=("nowarn:coll:rdma:.*warning" "ev:every_rank_served(0; \"bcast\"; \"udp\")"
        "ev:every_rank_ready(0; .transport == \"udp\" and .protection == \"$protection\")")
    [ "$protection" != none ] ||
        CHECKS+=("says-re:coll:rdma: comm 0: warning: udp frames unprotected \\(coll_rdma_udp_protection=none\\)")
    run_test "transport-udp-protection-$protection-np3" 3 ok "${V[@]}" --mca coll_rdma_transport udp \
        --mca coll_rdma_udp_protection "$protection" -- coll_mix -i 20
done
# 10. version mismatch: coll rdma steps aside, the job still runs correctly
#    (the contract says "coll:rdma: built against ..."; the component
#    prints it as a warning, "coll:rdma: warning: built against ...": both pass)
CHECKS=(noserve "says-re:coll:rdma: (warning: )?built against Open MPI ${OMPI_VERSION//./\\.} but running in Open MPI 9\\.9\\.9; coll rdma disqualifies itself")
run_test "version-mismatch-9.9.9" 4 ok --mca coll_rdma_test_running_version 9.9.9 "${V[@]}" \
    -- coll_mix -i 50
