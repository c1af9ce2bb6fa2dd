#!/bin/sh
# Long allreduce and reduce across two Soft-RoCE guests (run in guest 0 by
# ci/rxe-tests.sh): 4 ranks, two per guest placed round robin, so every
# neighbour of the ring is in the other guest; 16 B to 4 MiB by factors of
# 4 (the tree below the ring's thresholds of 8 and 16 KiB, the ring from
# them; at 4 MiB each rank's block is 16 of the ring's 64 KiB segments, its
# two slots reused within a step and across calls: 16 MiB takes the same
# path with 4 times the segments, 70 s of emulated copies and checksums,
# and the host's MPI tests run it over shm, reduce_ops-parallel-refused-
# ring-np3 and -np5 with -L 2000000), both collectives in one job
# (ci/rxe/ring-reductions.c: each call's result checked element by
# element, "WRONG RESULT" otherwise; one launch across the guests, where
# one per collective cost a minute more). coll rdma's events
# (docs/events.md, read with the helpers of ci/served/checks.jq) must say,
# for each collective, that the ring serves, that no call was handed over
# and that every RDMA write is one packet (Soft-RoCE).
# Needs build/rxe/bin/ring-reductions (built on the host by ci/rxe-tests.sh).
set -u
cd "$(dirname "$0")/../.."
PROGRAM=build/rxe/bin/ring-reductions
MIN_BYTES=16 MAX_BYTES=4194304 FACTOR=4
# how many sizes the program runs: MIN_BYTES * FACTOR^k up to MAX_BYTES
SIZE_COUNT=$(awk -v b="$MIN_BYTES" -v max="$MAX_BYTES" -v f="$FACTOR" 'BEGIN { for (n = 0; b <= max; b *= f) n++; print n }')
[ -x "$PROGRAM" ] || { echo "FAIL: $PROGRAM missing (ci/rxe-tests.sh builds it on the host)"; exit 1; }
status=0
out=/run/rxe/ring-reductions.txt
# the events go to the run's shared directory, each rank's file written
# from its own guest
run=/run/rxe/ring-reductions
rm -rf "$run"
mkdir -p "$run/events"
mpirun -np 4 --host g0:2,g1:2 --map-by node --mca btl self,vader,tcp \
    --mca mca_base_component_path SYS_DEFAULT:"$PWD/build/components" --mca coll_rdma_verbose 1 \
    --mca coll_rdma_events_file "$run/events/rank-%r.jsonl" \
    "$PROGRAM" "$MIN_BYTES" "$MAX_BYTES" "$FACTOR" >"$out" 2>&1
rc=$?
grep -h "error\|usage" "$out" | head -3
[ "$rc" = 0 ] || { echo "FAIL: mpirun status $rc"; status=1; }
for coll in allreduce reduce; do
    sizes=$(grep -c "^$coll [0-9]* ok$" "$out")
    echo "$coll: mpirun status $rc, $sizes size(s) right: $(grep "^$coll [0-9]* ok$" "$out" | awk '{printf "%s ", $2}')"
    grep "^$coll .*WRONG RESULT" "$out" | head -3
    if [ "$sizes" != "$SIZE_COUNT" ]; then
        echo "FAIL: $coll did not complete every size with the right result"; status=1
    fi
    # no parallel reduction (shm+verbs cannot read peers' memory across
    # the guests): commutative ops of every length from the ring's
    # threshold up, with no upper bound, go around the ring
    if ! why=$(ci/served/events-hold.sh "$run" 4 "rank0_ready(0; .transport == \"shm+verbs\" and .reads_peer_memory == false
            and .$coll.parallel_min_bytes == null and .$coll.ring.from_bytes <= $MAX_BYTES and .$coll.ring.up_to_bytes == null)"); then
        echo "FAIL: the events do not say that the ring serves $coll: $why"; status=1
    fi
    if ! why=$(ci/served/events-hold.sh "$run" 4 "every_rank_served(0; \"$coll\"; \"shm+verbs\")"); then
        echo "FAIL: $coll calls were not all served over shm+verbs (some handed to the module underneath): $why"
        jq -c "select(.event == \"comm_freed\" and .cid == 0) | [.rank, .transport, .calls.$coll]" "$run"/events/rank-*.jsonl | head -4
        status=1
    fi
done
# Soft-RoCE fails a queue pair that retransmits a multi-packet write
# under load (docs/testbed.md): every write must be one packet here.
if ! why=$(ci/served/events-hold.sh "$run" 4 'every_rank_ready(0; .verbs_single_packet_writes == true)'); then
    echo "FAIL: the events do not say that the writes are cut to one packet on Soft-RoCE: $why"; status=1
fi
exit $status
