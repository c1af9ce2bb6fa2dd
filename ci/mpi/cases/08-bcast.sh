# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read): section 12 (component mode),
# the bcast parameters and paths (window, single copy, above 2 GiB): every
# byte right, the path the events report.

# 12. bcast parameters: every byte still right, the counts as the
#     contract says (bcast reads the slot size, window and limit with
#     MPI_T and sizes its messages around the slot size). The window
#     runs set the ACK interval too: it must not exceed the window, and
#     its default (8) would be clamped with a warning.
CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .transport == "shm" and .bcast.window_slots == 1 and .bcast.slot_bytes == 4096)')
run_test "bcast-window-1-np4" 4 ok --mca coll_rdma_bcast_window 1 \
    --mca coll_rdma_bcast_ack_interval 1 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .transport == "shm" and .bcast.window_slots == 2 and .bcast.slot_bytes == 4096)')
run_test "bcast-window-2-np3" 3 ok --mca coll_rdma_bcast_window 2 \
    --mca coll_rdma_bcast_ack_interval 2 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
# many pieces per message (a 256 KiB bcast is 4096 of them)
CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .transport == "shm" and .bcast.window_slots == 64 and .bcast.slot_bytes == 64)')
run_test "bcast-slot-64-np4" 4 ok --mca coll_rdma_bcast_slot_size 64 "${V[@]}" \
    -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
CHECKS=("${SERVED[@]}"); run_test "bcast-ack-interval-1-np5" 5 ok \
    --mca coll_rdma_bcast_ack_interval 1 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
CHECKS=("${SERVED[@]}"); run_test "bcast-ack-interval-16-np4" 4 ok \
    --mca coll_rdma_bcast_ack_interval 16 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
CHECKS=("${SERVED[@]}"); run_test "bcast-nack-0-np3" 3 ok \
    --mca coll_rdma_bcast_nack 0 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
# no limit: everything natively, 1 MiB and 64 MiB included (bcast takes
# the first of repeated options: -B 2 before BC_PARAM's -B)
CHECKS=("${SERVED[@]}" "$BC_REASON")
run_test "bcast-max-bytes--1-np4" 4 ok --mca coll_rdma_bcast_max_bytes -1 "${V[@]}" \
    -- bcast -B 2 "${BC_PARAM[@]}" "${BC_E[@]}"
CHECKS=("${SERVED[@]}" "$BC_REASON")
run_test "bcast-max-bytes--1-np8" 8 ok --mca coll_rdma_bcast_max_bytes -1 "${V[@]}" \
    -- bcast -n 300 -x 40 -L 50 -B 2 "${BC_E[@]}"
# 0: every bcast with data that goes through the window to the module
# underneath, saying why (the empty-datatype ones, 0 bytes, stay with coll
# rdma, and so do those single copy serves: 16 KiB or more by default,
# whose limit is coll_rdma_bcast_single_copy_max_bytes); no -E, since
# the module underneath may make the root wait
CHECKS=("${SERVED[@]}" 'ev:handed_over("bcast"; .limit_parameter == "coll_rdma_bcast_max_bytes" and .limit == 0)')
run_test "bcast-max-bytes-0-np3" 3 ok --mca coll_rdma_bcast_max_bytes 0 "${V[@]}" \
    -- bcast "${BC_PARAM[@]}"
# single copy: receivers read the root's buffer (process_vm_readv) for
# every bcast of 16 KiB or more, the window below; neither path has a
# limit, so every call is native: 1 MiB from every root, 64 MiB (-B 2),
# odd sizes, non-contiguous datatypes (packed around the single copy)
SC=(--mca coll_rdma_bcast_max_bytes -1 --mca coll_rdma_bcast_single_copy_min_bytes 16384)
for np in 2 3 4; do
    CHECKS=("${SERVED[@]}" "$BC_REASON"
        'ev:every_rank_ready(0; .bcast.single_copy_min_bytes == 16384)')
    run_test "bcast-single-copy-np$np" "$np" ok "${SC[@]}" "${V[@]}" -- bcast -B 2 "${BC_PARAM[@]}" "${BC_E[@]}"
done
# every rank pretends process_vm_readv is refused: all fall back to the
# window together, with the reason, and results are still right
CHECKS=("${SERVED[@]}" "$BC_REASON" 
    'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null)')
run_test "bcast-single-copy-refused-np3" 3 ok "${SC[@]}" --mca coll_rdma_test_pretend_no_cross_memory 1 \
    "${V[@]}" -- bcast -B 2 "${BC_PARAM[@]}" "${BC_E[@]}"
# the same refusal with every bcast parameter at its default: the window
# (copy in, copy out) serves every length, 1 MiB from every root and
# 64 MiB included, and says so; every delivery checked by the program
for np in 2 4; do
    CHECKS=("${SERVED[@]}" "$BC_REASON" 
        'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null and .bcast.max_bytes == null)')
    run_test "bcast-refused-default-limits-np$np" "$np" ok --mca coll_rdma_test_pretend_no_cross_memory 1 \
        "${V[@]}" -- bcast -B 2 "${BC_PARAM[@]}" "${BC_E[@]}"
done
# more bytes than a C int counts (2 GiB + 4 KiB from 3 ranks, one
# buffer of about 2.2 GB each, 6.5 GB in all; 8 GiB free asked): contiguous
# buffers everywhere are served natively, in one copy, through the
# window and across pretend nodes; a receiver whose datatype is not
# contiguous (it could not MPI_Pack them) makes every rank hand that
# call over, naming it; every int checked
for variant in single-copy window two-level; do
    case $variant in
        single-copy) HUGE=() HUGE_PATH='ev:every_rank_ready(0; .bcast.single_copy_min_bytes == 16384)' ;;
        window) HUGE=(--mca coll_rdma_test_pretend_no_cross_memory 1) HUGE_PATH='ev:every_rank_ready(0; .bcast.single_copy_min_bytes == null)' ;;
        two-level) HUGE=(--mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2)
            HUGE_PATH='ev:hierarchy_of(0; 0) | .nodes == 2 and .two_level.bcast' ;;
    esac
    if [ -n "$TRANSPORT$HOSTS" ]; then
        skip "bcast-above-2gib-$variant-np3" "shared memory on one machine only"
    elif [ "$(free_memory_kib)" -lt $((8 * 1024 * 1024)) ]; then
        skip "bcast-above-2gib-$variant-np3" "needs 8 GiB of free memory, $(($(free_memory_kib) / 1024)) MiB free"
    else
        CHECKS=("$HUGE_PATH" "nowarn:coll:rdma:.*warning"
            'ev:any(events("comm_freed") | on(0) | of_rank(0); .transport == "shm" and .calls.bcast == { "served": 2, "handed_over": 1 })'
            'ev:any(events("handover") | on(0) | of_rank(2); .collective == "bcast" and .category == "pack limit")')
        run_test "bcast-above-2gib-$variant-np3" 3 ok "${HUGE[@]}" "${V[@]}" -- bcast_huge
    fi
done
# bad values: the documented warning, then the clamped value or the
# automatic choice; results still right
CHECKS=("$SERVED_CHECK"
    "says:coll:rdma: warning: coll_rdma_bcast_window=0 is outside 1..=4096; using 1"
    "says-re:coll:rdma: warning: coll_rdma_bcast_ack_interval=0 is outside 1\.\.=[0-9]+; using 1\$"
    "says:coll:rdma: warning: coll_rdma_bcast_co_roots=-5 is invalid"
    "says:coll:rdma: warning: coll_rdma_bcast_timeout_ms=0 is outside 1..=2147483647; using 1"
    "says:coll:rdma: warning: coll_rdma_bcast_nack=7 is outside 0..=1; using 1"
    "says:coll:rdma: warning: coll_rdma_bcast_fragment_size=1 is outside 64..=1048576; using 64"
    'ev:every_rank_ready(0; .transport == "shm" and .bcast.window_slots == 1 and .bcast.slot_bytes == 4096)')
run_test "bad-bcast-window-etc-np4" 4 ok --mca coll_rdma_bcast_window 0 \
    --mca coll_rdma_bcast_ack_interval 0 --mca coll_rdma_bcast_co_roots -5 \
    --mca coll_rdma_bcast_timeout_ms 0 --mca coll_rdma_bcast_nack 7 \
    --mca coll_rdma_bcast_fragment_size 1 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
# slot size 1 becomes 64 (bcast reads the raw 1 with MPI_T: -s 64 tells
# it the size used); max_bytes -5 is invalid: the automatic choice, which
# has no limit on shared memory
CHECKS=("$SERVED_CHECK"
    "says:coll:rdma: warning: coll_rdma_bcast_slot_size=1 is outside 64..=1048576; using 64"
    "says:coll:rdma: warning: coll_rdma_bcast_max_bytes=-5 is invalid"
    'ev:every_rank_ready(0; .transport == "shm" and .bcast.window_slots == 64 and .bcast.slot_bytes == 64)'
    "$BC_REASON")
run_test "bad-bcast-slot-size-1-np3" 3 ok --mca coll_rdma_bcast_slot_size 1 \
    --mca coll_rdma_bcast_max_bytes -5 "${V[@]}" -- bcast -s 64 "${BC_PARAM[@]}" "${BC_E[@]}"
