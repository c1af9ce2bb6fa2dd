#!/bin/sh
# Long allreduce and reduce across two Soft-RoCE guests (run in guest 0 by
# ci/rxe-tests.sh): 4 ranks, two per guest placed round robin, so every
# neighbour of the ring is in the other guest; 16 B to 16 MiB, each call's
# result checked by coll_latency ("WRONG RESULT" otherwise). coll rdma's
# events (docs/events.md, read with the helpers of ci/served/checks.jq)
# must say that the ring serves, that no call was handed over and that
# every RDMA write is one packet (Soft-RoCE).
set -u
cd "$(dirname "$0")/../.."
status=0
for coll in allreduce reduce; do
    out=/run/rxe/ring-$coll.txt
    # the events go to the run's shared directory, each rank's file
    # written from its own guest
    run=/run/rxe/ring-$coll
    rm -rf "$run"
    mkdir -p "$run/events"
    mpirun -np 4 --host g0:2,g1:2 --map-by node --mca btl self,vader,tcp \
        --mca mca_base_component_path SYS_DEFAULT:"$PWD/build/components" --mca coll_rdma_verbose 1 \
        --mca coll_rdma_events_file "$run/events/rank-%r.jsonl" \
        build/bench/coll_latency -c "$coll" -m 16:16777216 -f 16 -w 0 -n 1 >"$out" 2>&1
    rc=$?
    sizes=$(grep -c "^$coll " "$out")
    echo "$coll: mpirun status $rc, $sizes size(s): $(grep "^$coll " "$out" | awk '{printf "%s ", $2}')"
    grep -h "error" "$out" | head -3
    if [ "$rc" != 0 ] || [ "$sizes" != 6 ] || grep -q "WRONG RESULT" "$out"; then
        echo "FAIL: $coll did not complete every size with the right result"; status=1
    fi
    # no parallel reduction (shm+verbs cannot read peers' memory across
    # the guests): commutative ops of every length from the ring's
    # threshold up, 16 MiB included, go around the ring
    if ! why=$(ci/served/events-hold.sh "$run" 4 "rank0_ready(0; .transport == \"shm+verbs\" and .reads_peer_memory == false
            and .$coll.parallel_min_bytes == null and .$coll.ring.from_bytes <= 16777216 and .$coll.ring.up_to_bytes == null)"); then
        echo "FAIL: the events do not say that the ring serves $coll: $why"; status=1
    fi
    # Soft-RoCE fails a queue pair that retransmits a multi-packet write
    # under load (docs/testbed.md): every write must be one packet here.
    if ! why=$(ci/served/events-hold.sh "$run" 4 'every_rank_ready(0; .verbs_single_packet_writes == true)'); then
        echo "FAIL: the events do not say that the writes are cut to one packet on Soft-RoCE: $why"; status=1
    fi
    if ! why=$(ci/served/events-hold.sh "$run" 4 "every_rank_served(0; \"$coll\"; \"shm+verbs\")"); then
        echo "FAIL: $coll calls were not all served over shm+verbs (some handed to the module underneath): $why"
        jq -c "select(.event == \"comm_freed\" and .cid == 0) | [.rank, .transport, .calls.$coll]" "$run"/events/rank-*.jsonl | head -4
        status=1
    fi
done
exit $status
