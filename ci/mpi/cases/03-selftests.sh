# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read): section 2, the checks must
# catch what they are for (skipped barriers, corrupted bytes, leaks, a
# launcher that outlives its ranks), across pretended nodes too.

# 2. the checker must catch a broken barrier (works without the component:
#    the test library skips every 50th MPI_Barrier)
run_test "selftest-checker-catches-skipped-barriers" 3 fail -x CRTEST_SELFTEST_SKIP_BARRIER=1 \
    -- barrier_order -n 2000 -d 200

# 2a. across nodes the barrier check compares the late member's entry with
#    every other member's exit on clocks aligned by a round trip: ranks
#    acting as two nodes (ci/fake-node.sh: own host names, so coll rdma sees
#    two nodes without an RDMA device and the module underneath serves
#    them) must pass it, and it must catch the skipped barriers
if unshare --uts true 2>/dev/null; then
    FAKE_NODES=(grep:"info: ranks span 2 nodes")
    CHECKS=("${FAKE_NODES[@]}"); RUN_WRAPPER=("$ROOT/ci/fake-node.sh" 2)
    run_test "fake-nodes-barrier-check-np4" 4 ok -- barrier_order -n 300
    CHECKS=("${FAKE_NODES[@]}" "re:rank [0-9]+ left [0-9]+ us before rank [0-9]+ entered"); RUN_WRAPPER=("$ROOT/ci/fake-node.sh" 2)
    run_test "selftest-node-check-catches-skips" 4 fail -x CRTEST_SELFTEST_SKIP_BARRIER=1 \
        -- barrier_order -n 300
    # ... and placed round robin (as `--map-by node` on real nodes), the
    #    programs' even/odd halves are each within one node: coll rdma
    #    serves them over shared memory, reading peers' memory (parallel
    #    allreduce, single-copy bcast) although the job spans nodes, and the
    #    checker's per-communicator classification must agree
    if [ "$MODE" = component ]; then
        ROUND_ROBIN=("$ROOT/ci/fake-node.sh" --round-robin 2)
        # (the communicators across the pretended nodes are served over
        # shm+verbs on a machine with an RDMA device, else over udp where
        # multicast works on the default interface)
        ACROSS_TOO="${EXPECT_TRANSPORT:-${TRANSPORT:-shm}} shm+verbs udp"
        CHECKS=("${FAKE_NODES[@]}" "$SERVED_WHERE_CONNECTED" "nowarn:coll:rdma:.*warning"); RUN_WRAPPER=("${ROUND_ROBIN[@]}")
        EXPECT_TRANSPORT=$ACROSS_TOO run_test "fake-nodes-round-robin-reduce_ops-np4" 4 ok "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
        CHECKS=("${FAKE_NODES[@]}" "$SERVED_WHERE_CONNECTED" "nowarn:coll:rdma:.*warning"); RUN_WRAPPER=("${ROUND_ROBIN[@]}")
        EXPECT_TRANSPORT=$ACROSS_TOO run_test "fake-nodes-round-robin-bcast-np4" 4 ok "${V[@]}" -- bcast "${BC_PARAM[@]}"
    fi
else
    skip "fake-nodes-barrier-check-np4" "unshare --uts is not permitted here (needs root)"
    skip "selftest-node-check-catches-skips" "unshare --uts is not permitted here (needs root)"
    if [ "$MODE" = component ]; then
        skip "fake-nodes-round-robin-reduce_ops-np4" "unshare --uts is not permitted here (needs root)"
        skip "fake-nodes-round-robin-bcast-np4" "unshare --uts is not permitted here (needs root)"
    fi
fi

# 2a'. a launcher that outlives its ranks (Open MPI 5's prterun, now and
#    then, after ranks exit with a non-zero status) is ended once they have
#    all exited, and the run judged on them: here each rank leaves a child
#    holding mpirun's end of its output open, so mpirun waits for it
HOLDERS=$LOGROOT/holders.$$
LAUNCH_WRAPPER=(sh -c 'sleep 600 & echo $! >>"$0"; exec "$@"' "$HOLDERS")
CHECKS=(launcher-ended)
run_test "selftest-launcher-outliving-ranks-ended-np2" 2 ok -- coll_mix -i 5
[ -f "$HOLDERS" ] && { xargs -r kill <"$HOLDERS" 2>/dev/null || true; rm -f "$HOLDERS"; }

# 2b. the bcast checks must catch a wrong byte and a write outside the
#    datatype (the program corrupts its own buffers now and then)
run_test "selftest-bcast-checker-catches-corruption" 3 fail -x CRTEST_SELFTEST_CORRUPT_BCAST=1 \
    -- bcast -n 300 -B 0 -L 10 -x 10

# 2c. the /dev/shm leak check blames a test only for segments its own ranks
#    created (the creator's pid is in the name): a segment that a concurrent
#    job leaves meanwhile is not this test's leak, one of its own is
DEAD_PID=$(sh -c 'echo $$')
FOREIGN_SEGMENT=coll_rdma.0.$(printf %x "$DEAD_PID").0.0
RUN_WRAPPER=(sh -c '[ "$OMPI_COMM_WORLD_RANK" != 0 ] || : >"/dev/shm/$0"; exec "$@"' "$FOREIGN_SEGMENT")
run_test "selftest-leak-check-ignores-other-jobs-np2" 2 ok -- coll_mix -i 5
rm -f "/dev/shm/$FOREIGN_SEGMENT"
CHECKS=(leaks)
RUN_WRAPPER=(sh -c '[ "$OMPI_COMM_WORLD_RANK" != 0 ] || : >"/dev/shm/coll_rdma.0.$(printf %x $$).0.0"; exec "$@"' leave-own-segment)
run_test "selftest-leak-check-catches-own-np2" 2 ok -- coll_mix -i 5
