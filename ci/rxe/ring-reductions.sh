#!/bin/sh
# Long allreduce and reduce across two Soft-RoCE guests (run in guest 0 by
# ci/rxe-tests.sh): 4 ranks, two per guest placed round robin, so every
# neighbour of the ring is in the other guest; 16 B to 16 MiB, each call's
# result checked by coll_latency ("WRONG RESULT" otherwise). Verbose 1 must
# say that the ring serves, that no call was handed over and that every
# RDMA write is one packet (Soft-RoCE).
set -u
cd "$(dirname "$0")/../.."
status=0
for coll in allreduce reduce; do
    out=/run/rxe/ring-$coll.txt
    mpirun -np 4 --host g0:2,g1:2 --map-by node --mca btl self,vader,tcp \
        --mca mca_base_component_path SYS_DEFAULT:"$PWD/build/components" --mca coll_rdma_verbose 1 \
        build/bench/coll_latency -c "$coll" -m 16:16777216 -f 16 -w 0 -n 1 >"$out" 2>&1
    rc=$?
    sizes=$(grep -c "^$coll " "$out")
    echo "$coll: mpirun status $rc, $sizes size(s): $(grep "^$coll " "$out" | awk '{printf "%s ", $2}')"
    grep -h "error" "$out" | head -3
    if [ "$rc" != 0 ] || [ "$sizes" != 6 ] || grep -q "WRONG RESULT" "$out"; then
        echo "FAIL: $coll did not complete every size with the right result"; status=1
    fi
    if ! grep -q "comm 0 rank 0: no parallel $coll (shm+verbs cannot read its peers' memory): $coll of [0-9]* bytes or more with a commutative op goes around a ring" "$out"; then
        echo "FAIL: verbose 1 does not say that the ring serves $coll"; status=1
    fi
    # Soft-RoCE fails a queue pair that retransmits a multi-packet write
    # under load (docs/testbed.md): every write must be one packet here.
    if ! grep -q "coll:rdma: verbs: .* is Soft-RoCE (rxe): every RDMA write is cut to one path MTU" "$out"; then
        echo "FAIL: verbose 1 does not say that the writes are cut to one packet on Soft-RoCE"; status=1
    fi
    if ! grep -q "comm 0 rank 0: served [0-9]* $coll(s) over shm+verbs, 0 handed to the fallback" "$out"; then
        echo "FAIL: $coll calls were handed to the module underneath:"; grep "served [0-9]* $coll(s)" "$out" | head -4; status=1
    fi
done
exit $status
