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

# 1c. MPI_Iallreduce, MPI_Ireduce, MPI_Ibcast and the
#     persistent allreduce and reduce (issue 35): several outstanding of
#     every kind with moving roots, zero counts, MPI_IN_PLACE and a
#     non-commutative user op, completed in reverse, random and Waitany
#     order with blocking calls between, a late rank, 1000 persistent
#     starts with changed buffers, calls pending across another
#     communicator's dup and free; each result checked against a local
#     reference. The events must count the five kinds served over shm,
#     none handed over, and verbose 1's summary must agree with them.
NR_R=200; [ "$QUICK" = 1 ] && NR_R=60
for np in 1 2 3 4; do
    CHECKS=("${SERVED[@]}")
    if [ "$np" -gt 1 ] && [ "$MODE" = component ]; then
        for kind in iallreduce ireduce ibcast allreduce_init reduce_init; do
            CHECKS+=("ev:every_rank_served(0; \"$kind\"; \"shm\")")
        done
        # (rank 0's freed lines at verbose 1 count the five kinds too)
        CHECKS+=(summary)
    fi
    run_test "nonblocking_reductions-np$np" "$np" ok "${V[@]}" -- nonblocking_reductions -r "$NR_R" -n 1000
done
# ... and a persistent allreduce and reduce whose user op and datatype (a
#     duplicate of MPI_INT) the program frees right after *_init, then
#     starts 200 times: the requests keep both alive, the sums are right
#     with freed memory overwritten (glibc's perturb). Component only:
#     libnbc's persistent requests (Open MPI 4.1.4) crash here.
if [ "$MODE" = component ]; then
    CHECKS=("${SERVED[@]}")
    for kind in allreduce_init reduce_init; do
        CHECKS+=("ev:every_rank_served(0; \"$kind\"; \"shm\")")
    done
    run_test "nonblocking_reductions-freed-op-np3" 3 ok -x GLIBC_TUNABLES=glibc.malloc.perturb=165 "${V[@]}" \
        -- nonblocking_reductions -r 2 -n 2 -f 200
fi

# 1d. communicators whose first collective is a non-blocking or persistent
#     one: Open MPI's own MPI_Iallreduce on MPI_COMM_WORLD when it
#     duplicates it (made from its progress loop), then the program's own
#     calls on fresh duplicates (nonblocking_first). Such a call goes to
#     the module underneath, said once per communicator (setup_deferred),
#     and the first blocking collective sets the communicator up: never
#     the setup exchange from inside Open MPI's progress loop. After that
#     every kind is served; where the setup cannot work, every
#     communicator ends where a blocking first call leaves it: unavailable
#     at stage transport, each kind handed over at most once (the module
#     underneath's functions are installed, the non-blocking ones too).
NF_R=20; [ "$QUICK" = 1 ] && NF_R=5
NF_COMMS='ev:[events("comm_claimed")] | length == 4 * $np'
for np in 2 3; do
    CHECKS=("${SERVED[@]}")
    [ "$MODE" = component ] && CHECKS+=("$NF_COMMS" 'ev:nothing_handed_over'
        'ev:[events("comm_ready")] | length == 4 * $np'
        'ev:[events("setup_deferred") | on(0) | select(.collective == "iallreduce")] | length == $np'
        'ev:[events("setup_deferred")] | length == 3 * $np'
        'ev:[events("comm_freed") | on(0)] | length == $np and all(.[]; .calls.iallreduce.served > 0 and .calls.ireduce.served > 0 and .calls.ibarrier.served > 0)'
        'ev:[events("comm_freed") | select(.calls.allreduce_init.served > 0)] | length == $np')
    run_test "nonblocking-first-np$np" "$np" ok "${V[@]}" -- nonblocking_first -r "$NF_R"
done
if [ "$MODE" = component ]; then
    # (4 communicators per rank, none connected, each kind handed over at
    # most once on each)
    NF_UNAVAILABLE=("$NF_COMMS" 'ev:[events("comm_ready")] | length == 0'
        'ev:[events("comm_unavailable") | select(.stage == "transport")] | length == 4 * $np'
        'ev:[events("comm_freed") | select(.transport == "no transport")] | length == 4 * $np and all(.[]; all(.calls[]; .served == 0 and .handed_over <= 1))')
    if [ -z "$(ls -A /sys/class/infiniband 2>/dev/null)" ] && grep -qa 'libibverbs\.so' "$COMPDIR/mca_coll_rdma.so" 2>/dev/null; then
        CHECKS=("${NF_UNAVAILABLE[@]}" "ev:unavailable_everywhere(0; \"transport\"; $(jq_string "^transport unavailable \\(no RDMA device found"))")
        run_test "nonblocking-first-verbs-without-device-np3" 3 ok --mca coll_rdma_transport verbs "${V[@]}" -- nonblocking_first -r "$NF_R"
    else
        skip "nonblocking-first-verbs-without-device-np3" "an RDMA device is present, or this build has no verbs"
    fi
    CHECKS=("${NF_UNAVAILABLE[@]}" "ev:unavailable_everywhere(0; \"transport\"; $(jq_string '^transport unavailable \(udp: coll_rdma_udp_interface=no-such-if0'))")
    run_test "nonblocking-first-udp-missing-interface-np3" 3 ok --mca coll_rdma_transport udp --mca coll_rdma_udp_interface no-such-if0 \
        "${V[@]}" -- nonblocking_first -r "$NF_R"
    # every reduction with data above the limit: the non-blocking ones
    # are handed over for it too, with the blocking call's parameter
    CHECKS=("$NF_COMMS" 'ev:[events("comm_ready")] | length == 4 * $np'
        'ev:[events("handover") | select(.collective == "iallreduce")] | length > 0 and all(.[]; .limit_parameter == "coll_rdma_allreduce_max_bytes")'
        'ev:[events("comm_freed") | on(0)] | all(.[]; .calls.iallreduce.served == 0 and .calls.ibarrier.served > 0)')
    run_test "nonblocking-first-allreduce-max-bytes-0-np3" 3 ok --mca coll_rdma_allreduce_max_bytes 0 "${V[@]}" \
        -- nonblocking_first -r "$NF_R"
fi

# 1e. MPI_Ibcast and the persistent bcast (issue 35): 1-4 outstanding with
#     moving roots, 0 bytes to 1 MiB, blocking bcasts between the posts,
#     completed by MPI_Waitall, MPI_Waitany or MPI_Test polling with
#     computation between polls; derived datatypes (a vector on every
#     rank, and contiguous at the root with a vector elsewhere); one
#     persistent bcast per root started 1000 times with the buffers
#     rewritten between starts, and one of zero count; every result
#     compared with the root's bytes, computed by each rank. Served over
#     shm by the put tree's run, where the blocking call takes the window;
#     from 16 KiB, where the blocking call reads the root's buffer (single
#     copy), handed over saying that path has no run. Without cross-memory
#     reads (pretended) the window takes every length, and nothing is
#     handed over. Before this, every call went to libnbc, uncounted.
NBC_R=120; [ "$QUICK" = 1 ] && NBC_R=30
NBC_SINGLE_COPY_ONLY='ev:all(events("handover") | select(.collective == "ibcast" or .collective == "bcast_init"); .category == "no resumable schedule" and (.reason | startswith("the single-copy bcast")))'
for np in 1 2 3 4; do
    CHECKS=("${SERVED[@]}")
    if [ "$np" -gt 1 ] && [ "$MODE" = component ]; then
        CHECKS+=('ev:[events("comm_freed") | on(0)] | length == $np and all(.[]; .transport == "shm" and .calls.ibcast.served > 0 and .calls.bcast_init.served > 0 and .calls.bcast_init.handed_over == 0)'
            "$NBC_SINGLE_COPY_ONLY" summary)
    fi
    run_test "nonblocking_bcast-np$np" "$np" ok "${V[@]}" -- nonblocking_bcast -r "$NBC_R" -n 1000
done
if [ "$MODE" = component ]; then
    CHECKS=("${SERVED[@]}" 'ev:every_rank_served(0; "ibcast"; "shm")' 'ev:every_rank_served(0; "bcast_init"; "shm")')
    run_test "nonblocking_bcast-window-only-np3" 3 ok --mca coll_rdma_test_pretend_no_cross_memory 1 "${V[@]}" \
        -- nonblocking_bcast -r "$NBC_R" -n 300
fi
