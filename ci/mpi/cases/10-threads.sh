# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read): sections 18 and 18a (component
# mode), MPI_THREAD_MULTIPLE on shared memory and mpi4py as Python users run
# it.

# 18. MPI_THREAD_MULTIPLE (issue 37): coll rdma serves it, saying so;
#     4 threads each run every collective on their own communicator at
#     once (bcast over the window and in one copy, reductions short and
#     long), one more creates and frees communicators, one polls
#     MPI_Iprobe/MPI_Test; every result checked by the program, every
#     worker communicator served natively (its summary line), nothing
#     handed to the fallback, no warning
# (the counts from the events, docs/events.md: nothing handed over on
# any communicator, each collective served on some communicator's rank 0)
TM_COUNTS='[.[] | select(.event == "comm_freed")] as $freed
    | all($freed[]; .calls | all(.[]; .handed_over == 0))
    and all("barrier", "bcast", "allreduce", "reduce"; . as $coll
        | any($freed[]; .rank == 0 and .calls[$coll].served > 0))'
TM_SERVED=("ev:serving_thread_multiple"
    "nowarn:coll:rdma:.*(warning|error)" "events-file:$TM_COUNTS")
for np in 2 3 4; do
    CHECKS=("${TM_SERVED[@]}")
    run_test "thread-multiple-np$np" "$np" ok "${V[@]}" -- thread_multiple -t 4 -i 20 -c 20
done
# ... across pretended nodes (two-level schedules and leaders)
CHECKS=("${TM_SERVED[@]}")
run_test "thread-multiple-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
    -- thread_multiple -t 4 -i 10 -c 10
# ... over udp (multicast on the default interface; a 1 MiB reduction
#     is above the udp limits and handed over for its size, nothing else;
#     every communicator's frames sealed as by default: encrypt)
if [ -n "${OUTSIDE_ADDRESS:-}" ] && [ "$OUTSIDE_ADDRESS" != 127.0.0.1 ]; then
    CHECKS=("ev:serving_thread_multiple" "nowarn:coll:rdma:.*(warning|error)"
        'ev:all(events("handover"); .category == "size limit")'
        'ev:[events("comm_ready")] | length >= $np and all(.[]; .transport == "udp" and .protection == "encrypt")'
        'ev:[events("comm_freed") | of_rank(0) | select(.transport == "udp")] as $freed
            | all("barrier", "bcast", "allreduce", "reduce"; . as $coll | any($freed[]; .calls[$coll].served > 0))')
    run_test "thread-multiple-udp-np2" 2 ok --mca coll_rdma_transport udp "${V[@]}" -- thread_multiple -t 4 -i 5 -c 5
else
    skip "thread-multiple-udp-np2" "no route towards 239.78.0.0/16 beyond loopback here"
fi
# ... and the erroneous case: two threads of rank 0 in MPI_Barrier on
#     one communicator at once (the other ranks never enter it): the job
#     ends with the error naming the communicator, it does not hang
CHECKS=("says-re:coll:rdma: error: comm [0-9]+ \"shared by two threads\" rank 0: two threads called collectives on this communicator at the same time")
run_test "thread-multiple-two-threads-one-comm-np2" 2 refused "${V[@]}" -- thread_multiple -e
# ... and a thread that dies mid-collective: the first worker of rank 1
#     to enter its communicator's 3rd barrier stops there for good,
#     holding it (coll_rdma_test_thread_stop_at), while the process
#     goes on; that communicator's peers give up after the fault timeout
#     and the job ends with their diagnostic (a hang fails by the
#     run's time limit)
CHECKS=("says-re:coll:rdma: warning: comm [0-9]+ rank 1: coll_rdma_test_thread_stop_at=barrier:3: this thread stops here for good"
    "says-re:coll:rdma: error: comm [0-9]+ rank [0-9]+: barrier failed: .*gave up after [0-9.]+ s without progress waiting for ")
run_test "thread-multiple-killed-thread-np3" 3 refused --mca coll_rdma_test_thread_stop_at barrier:3 \
    --mca coll_rdma_fault_timeout_s 10 "${V[@]}" -- thread_multiple -t 4 -i 20 -c 0

# 18a. mpi4py as Python users run it (Debian's python3-mpi4py asks for
#      MPI_THREAD_MULTIPLE): tests/python/mpi4py_collectives.py checks
#      every result and that it got that level; from the events, coll
#      rdma served barrier, bcast, allreduce and reduce on MPI_COMM_WORLD
#      and on its two Split communicators of 2 ranks or more (all
#      np ranks in reverse order; at np=3 also ranks 0 and 2), handed
#      nothing over on any communicator (mpi4py's own duplicates, which
#      carry its pickled bcasts, included) and freed every one it claimed
for np in 2 3; do
    if ! /usr/bin/python3 -c 'import mpi4py' 2>/dev/null || ! command -v jq >/dev/null; then
        skip "mpi4py-collectives-np$np" "needs Debian's python3-mpi4py (for /usr/bin/python3) and jq: ci/setup.sh installs both"
        continue
    fi
    # into build/tests/ beside the other programs; by a rename, since
    # instances of ci/mpi-tests-jobs.sh may be running it meanwhile
    if [ "$LIST" = 0 ] && ! cmp -s "$ROOT/tests/python/mpi4py_collectives.py" "$BIN/mpi4py_collectives.py"; then
        install -m 0755 "$ROOT/tests/python/mpi4py_collectives.py" "$BIN/.mpi4py_collectives.py.$$"
        mv -f "$BIN/.mpi4py_collectives.py.$$" "$BIN/mpi4py_collectives.py"
    fi
    MPI4PY_SPLITS=$(( np >= 3 ? np + 2 : np ))
    CHECKS=("ev:serving_thread_multiple" "nowarn:coll:rdma:.*(warning|error)"
        "events-file:[.[] | select(.event == \"comm_freed\")] as \$freed
            | ([.[] | select(.event == \"comm_claimed\")] | length) == (\$freed | length)
            and all(\$freed[]; .calls | all(.[]; .handed_over == 0))
            and ([\$freed[] | select(. as \$f | all(\"barrier\", \"bcast\", \"allreduce\", \"reduce\"; \$f.calls[.].served > 0))
                | .cid == 0] | (map(select(.)) | length) == $np and (map(select(. | not)) | length) == $MPI4PY_SPLITS)")
    run_test "mpi4py-collectives-np$np" "$np" ok "${V[@]}" -- mpi4py_collectives.py
done
