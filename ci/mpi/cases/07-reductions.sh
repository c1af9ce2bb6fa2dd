# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read): section 11 (component mode),
# the allreduce and reduce parameters and paths (tree, parallel, ring,
# chain, non-commutative ops): every result exact, the path the events
# report.

# 11. allreduce/reduce parameters: every result still exact, the served
#     and fallback counts as the contract says (reduce_ops reads the
#     limits with MPI_T and classifies each call)
for spec in 1:5 2:8 3:8 7:8; do
    k=${spec%:*} np=${spec#*:}
    CHECKS=("${SERVED[@]}" "ev:every_rank_ready(0; .transport == \"shm\" and .allreduce.degree == $k)")
    run_test "allreduce-degree-$k-np$np" "$np" ok \
        --mca coll_rdma_allreduce_degree "$k" "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
done
# the tree alone, also for the smallest messages
CHECKS=("${SERVED[@]}"); run_test "allreduce-exchange-off-np4" 4 ok \
    --mca coll_rdma_allreduce_exchange_max 0 "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
# many pipelined segments; 100 is a multiple of no element size used
CHECKS=("${SERVED[@]}"); run_test "allreduce-segment-64-np4" 4 ok \
    --mca coll_rdma_allreduce_segment_size 64 "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
CHECKS=("${SERVED[@]}"); run_test "allreduce-segment-100-np3" 3 ok \
    --mca coll_rdma_allreduce_segment_size 100 "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
CHECKS=("${SERVED[@]}"); run_test "allreduce-degree-2-segment-64-np5" 5 ok \
    --mca coll_rdma_allreduce_degree 2 --mca coll_rdma_allreduce_segment_size 64 \
    --mca coll_rdma_allreduce_exchange_max 0 "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
# size limits: the larger calls go to the module underneath, and it is said
CHECKS=("${SERVED[@]}" 'ev:handed_over_above("coll_rdma_allreduce_max_bytes")'
    'ev:handed_over("reduce"; .category == "size limit") | not' summary)
run_test "allreduce-max-bytes-1024-np4" 4 ok --mca coll_rdma_allreduce_max_bytes 1024 "${V[@]}" \
    -- reduce_ops "${RO_PARAM[@]}"
CHECKS=("${SERVED[@]}" 'ev:handed_over_above("coll_rdma_reduce_max_bytes")'
    'ev:handed_over("allreduce"; .category == "size limit") | not')
run_test "reduce-max-bytes-1024-np4" 4 ok --mca coll_rdma_reduce_max_bytes 1024 "${V[@]}" \
    -- reduce_ops "${RO_PARAM[@]}"
# 0: every call with data goes to the fallback (count 0 never reaches coll)
CHECKS=("${SERVED[@]}" 'ev:handed_over_above("coll_rdma_allreduce_max_bytes")')
run_test "allreduce-max-bytes-0-np3" 3 ok --mca coll_rdma_allreduce_max_bytes 0 "${V[@]}" \
    -- reduce_ops "${RO_PARAM[@]}"
# the large reductions natively too (reduce_ops' full counts, 100000)
CHECKS=("${SERVED[@]}" 'ev:any(events("handover"); .category == "size limit") | not')
run_test "reduce_ops-max-bytes--1-np4" 4 ok --mca coll_rdma_allreduce_max_bytes -1 \
    --mca coll_rdma_reduce_max_bytes -1 "${V[@]}" -- reduce_ops "${RO[@]}"
# parallel reduction, with the default parameters: from 16 KiB
# (allreduce) and 128 KiB (reduce) each rank reduces its slice of every
# rank's input (process_vm_readv) and writes it into the gathering
# ranks' buffers (process_vm_writev); reduce from 8 KiB to 128 KiB the
# root reads and folds every input alone; below that the tree, so no
# contiguous allreduce or reduce is handed over for its size (the test
# library counts which calls must be): every op and datatype, in place,
# every root, non-commutative user ops, and one more count of 2000000
# (16 MiB of doubles, 32 MiB of matrices); non-contiguous datatypes
# still go to the module underneath (counted)
for np in 2 3 4; do
    CHECKS=("${SERVED[@]}" 'ev:any(events("handover"); .category == "size limit") | not'
        'ev:rank0_ready(0; .allreduce.parallel_min_bytes == 16384 and .reduce.parallel_min_bytes == 8192
            and .reduce.slices_min_bytes == 131072)')
    run_test "reduce_ops-parallel-np$np" "$np" ok "${V[@]}" -- reduce_ops -L 2000000 -x 20
done
PR=(--mca coll_rdma_allreduce_parallel_min_bytes 16384 --mca coll_rdma_reduce_parallel_min_bytes 8192)
# process_vm_readv refused (pretended on every rank), as across nodes:
# commutative ops from 16 KiB (allreduce) and 8 KiB (reduce) go around
# the ring (reduce-scatter, then allgather, between neighbours), so
# none is handed over for its size; the others keep the tree. Every
# op and datatype, every root, in place, 16 MiB of doubles.
CHECKS=("${SERVED[@]}" 'ev:any(events("handover"); .category == "size limit") | not'
    'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null)'
    'ev:rank0_ready(0; .allreduce.ring.from_bytes == 16384 and .reduce.ring.from_bytes == 8192)')
run_test "reduce_ops-parallel-refused-ring-np3" 3 ok "${PR[@]}" --mca coll_rdma_test_pretend_no_cross_memory 1 \
    "${V[@]}" -- reduce_ops -L 2000000 -x 10
CHECKS=("${SERVED[@]}" 'ev:any(events("handover"); .category == "size limit") | not'
    'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null)'
    'ev:rank0_ready(0; .allreduce.ring.from_bytes == 16384)')
run_test "reduce_ops-parallel-refused-ring-np5" 5 ok "${PR[@]}" --mca coll_rdma_test_pretend_no_cross_memory 1 \
    "${V[@]}" -- reduce_ops -x 5
# slots of 64 bytes: many segments a block, some element types longer
# than half a slot, every result still exact
CHECKS=("${SERVED[@]}" 'ev:any(events("handover"); .category == "size limit") | not'
    'ev:rank0_ready(0; .reads_peer_memory == false and .allreduce.ring.from_bytes == 16384 and .allreduce.ring.slot_bytes == 64)')
run_test "reduce_ops-parallel-refused-ring-slot-64-np4" 4 ok "${PR[@]}" --mca coll_rdma_test_pretend_no_cross_memory 1 \
    --mca coll_rdma_ring_segment_size 64 "${V[@]}" -- reduce_ops -x 5
# ... and with the ring turned off: the window up to the old limits, the
# larger calls to the module underneath, saying why
CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null)'
    'ev:every_rank_ready(0; .allreduce.ring == null and .reduce.ring == null and .allreduce.max_bytes != null)'
    'ev:handed_over_above("coll_rdma_allreduce_max_bytes")')
run_test "reduce_ops-parallel-refused-no-ring-np3" 3 ok "${PR[@]}" --mca coll_rdma_test_pretend_no_cross_memory 1 \
    --mca coll_rdma_allreduce_ring_min_bytes -1 --mca coll_rdma_reduce_ring_min_bytes -1 "${V[@]}" -- reduce_ops -x 10

# non-commutative user ops over lengths crossing every limit (1 element
# to ~300 KiB), every root, in place, world and reversed order. tuned
# told to use its ring allreduce and chain reduce does not keep the
# canonical order for them, so coll rdma must serve every contiguous one
# itself (none handed over for its size); the program checks each
# result against a local fold in rank order.
TUNED_UNORDERED=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4
    --mca coll_tuned_reduce_algorithm 2)
for np in 2 3 4; do
    CHECKS=("${SERVED[@]}" 'ev:nothing_handed_over')
    run_test "noncommutative-tuned-ring-chain-np$np" "$np" ok "${TUNED_UNORDERED[@]}" "${V[@]}" -- noncommutative
done
# ... also where the parallel reduction is refused: the window's tree
# serves every length (the size limits are for commutative ops only)
CHECKS=("${SERVED[@]}" 'ev:nothing_handed_over' 'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null)')
run_test "noncommutative-tuned-ring-chain-parallel-refused-np3" 3 ok "${TUNED_UNORDERED[@]}" \
    --mca coll_rdma_test_pretend_no_cross_memory 1 "${V[@]}" -- noncommutative
# with tuned's own decisions (which keep the order for non-commutative
# ops), plus a non-contiguous datatype: coll rdma cannot serve that one,
# hands it over and says once per kind that the op is not commutative
for np in 2 3 4; do
    CHECKS=("${SERVED[@]}"
        'ev:any(events("handover") | on(0) | of_rank(0); .collective == "allreduce" and .category == "datatype" and .commutative == false)'
        'ev:any(events("handover") | on(0) | of_rank(0); .collective == "reduce" and .category == "datatype" and .commutative == false)')
    run_test "noncommutative-np$np" "$np" ok "${V[@]}" -- noncommutative -n
done
