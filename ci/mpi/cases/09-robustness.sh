# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read): sections 13-17 (component
# mode), a setup killed at its worst moment, nested setups, ranks that
# disagree on a setting, injected panics and headers that do not match the
# running Open MPI.

# 13. a setup killed at its worst moment leaks nothing past the next job
killed_creator_test "shm-killed-creator-reaped-np2"

# 14. the saved allgather calls back into the communicator during our
#     setup (basic's allgather is gather + the communicator's bcast, which
#     is ours; so is tuned's algorithm 1): the nested call must go to the
#     module underneath, not wait for the setup it is part of. Barriers
#     are counted exactly; the other counts include the calls the module
#     underneath makes through the communicator, so only "served" is checked.
NESTED=('ev:every_rank_served(0; "barrier"; "shm")'
    'ev:all(events("comm_freed") | on(0); .transport == "shm" and .calls.bcast.served > 0)'
    "nowarn:coll:rdma:.*(warning|error)" 'ev:[events("comm_unavailable")] | length == 0')
for np in 2 3; do
    CHECKS=("${NESTED[@]}"); run_test "nested-setup-coll-basic-np$np" "$np" ok --mca coll rdma,libnbc,basic,self \
        "${V[@]}" -- coll_mix -i 20
done
CHECKS=("${NESTED[0]}" "nowarn:coll:rdma:.*(warning|error)"); run_test "nested-setup-barrier-coll-basic-np3" 3 ok \
    --mca coll rdma,libnbc,basic,self "${V[@]}" -- barrier_order -n 2000
CHECKS=("${NESTED[@]}"); run_test "nested-setup-tuned-allgather-1-np3" 3 ok --mca coll_tuned_use_dynamic_rules 1 \
    --mca coll_tuned_allgather_algorithm 1 "${V[@]}" -- coll_mix -i 20

# 15. ranks that disagree on a setting the protocols share (set per rank
#     through the environment, even ranks first): every rank hands over,
#     results stay right, and rank 0 warns once per communicator, naming it
mismatch_test() {  # NAME NP PARAM EVEN ODD WARNING-RE PROGRAM ARGS...
    local name=$1 np=$2 param=$3 even=$4 odd=$5 warning=$6
    shift 6
    # (the wording a user must read: rank 0's warning naming the setting)
    CHECKS=("says-re:coll:rdma: warning: comm 0 rank 0: ranks differ in settings the protocols must share: .*$warning.*; collectives fall back to the module underneath"
        'ev:[events("comm_unavailable") | on(0)] | length == $np and all(.[]; .stage == "agreement")'
        'ev:[events("comm_freed") | on(0)] | length == $np and all(.[]; .transport == "no transport" and all(.calls[]; .served == 0))')
    RUN_WRAPPER=("$ROOT/ci/per-rank-mca.sh" "$param" "$even" "$odd")
    run_test "$name" "$np" ok "${V[@]}" -- "$@"
}
mismatch_test "mismatch-barrier-radix-np4" 4 coll_rdma_barrier_radix 3 1 \
    "coll_rdma_barrier_radix \(3 at rank 0, 1 at rank 1\)" barrier_order -n 3000
# (-w: the program sizes its late-receiver phase by the window; it must
# be the same on every rank)
mismatch_test "mismatch-bcast-window-np4" 4 coll_rdma_bcast_window 64 65 \
    "coll_rdma_bcast_window \(64 at rank 0, 65 at rank 1\)" bcast -w 64 -n 300 -B 1 -L 50 -x 40
mismatch_test "mismatch-allreduce-max-bytes-np4" 4 coll_rdma_allreduce_max_bytes 16384 1024 \
    "coll_rdma_allreduce_max_bytes \(16384 at rank 0, 1024 at rank 1\)" reduce_ops "${RO_PARAM[@]}"
mismatch_test "mismatch-transport-np3" 3 coll_rdma_transport shm auto \
    "coll_rdma_transport \(0 auto, 1 shm, 2 verbs, 3 udp\) \(1 at rank 0, 0 at rank 1\)" coll_mix -i 20
# (a udp parameter differs: every rank falls back before any udp
# setup, which would otherwise derive different ports)
mismatch_test "mismatch-udp-port-range-np3" 3 coll_rdma_udp_port_range 24000-24999 30000-30099 \
    "coll_rdma_udp_port_range \(first\) \(24000 at rank 0, 30000 at rank 1\); coll_rdma_udp_port_range \(ports\) \(1000 at rank 0, 100 at rank 1\)" \
    coll_mix -i 20
mismatch_test "mismatch-pretend-nodes-np4" 4 coll_rdma_test_pretend_nodes 0 2 \
    "coll_rdma_test_pretend_nodes \(1 at rank 0, 2 at rank 1\)" coll_mix -i 20
mismatch_test "mismatch-hierarchy-np4" 4 coll_rdma_hierarchy auto flat \
    "coll_rdma_hierarchy \(0 auto, 1 flat\) \(0 at rank 0, 1 at rank 1\)" coll_mix -i 20
# (radix 3 is also the model's pick for 4 ranks: the flat radices agree,
#  but a two-level barrier's leaders would choose theirs differently)
mismatch_test "mismatch-barrier-radix-as-set-np4" 4 coll_rdma_barrier_radix 3 0 \
    "coll_rdma_barrier_radix as set \(0 automatic\), with coll_rdma_hierarchy auto \(3 at rank 0, 0 at rank 1\)" coll_mix -i 20
# (which pairs of ranks connect across nodes decides which queue
#  pairs each rank creates: compared wherever the hierarchy is auto)
mismatch_test "mismatch-hierarchy-queue-pairs-max-np4" 4 coll_rdma_hierarchy_queue_pairs_max 64 0 \
    "coll_rdma_hierarchy_queue_pairs_max \(-1 every pair\), with coll_rdma_hierarchy auto \(64 at rank 0, 0 at rank 1\)" coll_mix -i 20
# (autotune on at even ranks only: their windows hold more barriers)
mismatch_test "mismatch-autotune-np4" 4 coll_rdma_autotune 1 0 \
    "coll_rdma_autotune_calls \(0: coll_rdma_autotune off\) \(8 at rank 0, 0 at rank 1\)" barrier_order -n 2000

# (a rank that does not select coll rdma for a communicator at all, its
#  coll_rdma_priority -1, cannot take part in the setup exchange: the
#  others warn at the stall warning and end the job at the fault
#  timeout, instead of hanging inside the module underneath in silence;
#  the events say at which priority each rank claimed or declined)
CHECKS=("says-re:coll:rdma: warning: rank [02] of 3 has waited [0-9.]+ s for every rank of the communicator to join coll rdma's setup exchange"
    "says-re:coll:rdma: error: comm 0 rank [02]: .*gave up after .*the job is ended \(MPI_Abort with status 71\)"
    'ev:([events("comm_claimed") | on(0) | [.world, .priority]] | sort) == [[0, 40], [2, 40]]
        and ([events("comm_not_claimed") | on(0) | [.world, .priority]] | sort) == [[1, -1]]')
RUN_WRAPPER=("$ROOT/ci/per-rank-mca.sh" coll_rdma_priority 40 -1)
run_test "claimed-on-some-ranks-only-np3" 3 refused --mca coll_rdma_stall_warning 1 --mca coll_rdma_fault_timeout_s 4 \
    "${V[@]}" -- coll_mix -i 5

# 16. a panic inside coll rdma (injected, testing only) and a bcast root
#     that cannot pack: the call returns an error on every rank
#     (MPI_ERRORS_RETURN; fault_recovery -e 1 expects exactly one), every
#     later call goes to the module underneath with the right result, and
#     the communicator's teardown skips the closing protocol
FAILED_STATE='ev:any(events("comm_freed") | on(0); .failed)'
CHECKS=("says:coll:rdma: error: internal error in MPI_Allreduce: coll_rdma_test_panic_at=allreduce:3 (testing only)" "$FAILED_STATE")
run_test "panic-allreduce-3-np3" 3 ok --mca coll_rdma_test_panic_at allreduce:3 "${V[@]}" -- fault_recovery -i 10 -e 1
CHECKS=("says:coll:rdma: error: internal error in MPI_Barrier: coll_rdma_test_panic_at=barrier:1 (testing only)" "$FAILED_STATE")
run_test "panic-barrier-1-np2" 2 ok --mca coll_rdma_test_panic_at barrier:1 "${V[@]}" -- fault_recovery -i 10 -e 1
CHECKS=("says:coll:rdma: error: internal error in MPI_Bcast: coll_rdma_test_panic_at=bcast:2 (testing only)" "$FAILED_STATE")
run_test "panic-bcast-2-np3" 3 ok --mca coll_rdma_test_panic_at bcast:2 "${V[@]}" -- fault_recovery -i 10 -e 1
CHECKS=("says-re:coll:rdma: error: comm 0 rank 0: bcast root could not pack its 400-byte message .*the receivers are told \(sent\)"
    'ev:[events("fault") | on(0) | select(.collective == "bcast" and .rank > 0)] | length > 0' "$FAILED_STATE")
run_test "pack-failure-np3" 3 ok --mca coll_rdma_test_pack_failure_at 2 "${V[@]}" -- fault_recovery -i 10 -e 1

# 17. the running Open MPI's structures differ in size from the headers
#     coll rdma was built against (faked, testing only): it steps aside
CHECKS=(noserve "says-re:coll:rdma: warning: mca_coll_base_module_t is 4096 bytes in the running Open MPI, [0-9]+ in the headers coll rdma was built against; coll rdma disqualifies itself")
run_test "module-size-mismatch-np3" 3 ok --mca coll_rdma_test_module_class_size 4096 "${V[@]}" -- coll_mix -i 20
