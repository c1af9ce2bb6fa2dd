#!/bin/sh
# Allreduce and reduce over verbs on Soft-RoCE: coll rdma (the ring from
# 16 KiB for allreduce and 8 KiB for reduce, with the tree's size limits
# lifted) against stock Open MPI, size by size, the two taking turns
# (stock, rdma, rdma, stock, ...) so that each pair sees the same load.
# BENCH_RDMA_MCA="--mca coll_rdma_allreduce_ring_min_bytes -1
# --mca coll_rdma_reduce_ring_min_bytes -1" measures the tree instead.
# Runs in guest 0 (ci/rxe/guests.sh run --primary), e.g.
#   ci/rxe/guests.sh run --guests 2 --primary --timeout 3000 -- \
#       sh ci/rxe/bench-reductions.sh two-guests
#   ci/rxe/guests.sh run --timeout 3000 -- sh ci/rxe/bench-reductions.sh one-guest
# two-guests: one rank per guest (transport auto: verbs between them);
# one-guest:  two ranks in one guest, coll_rdma_transport=verbs forced.
# Soft-RoCE under qemu's software emulation is far slower than hardware:
# the ratios say how the tree's schedule compares with stock's on the same
# links, not what either would do on a real fabric.
# environment: BENCH_SIZES (bytes, default "16384 262144 1048576 16777216"),
# BENCH_ROUNDS (pairs per size, default 3), BENCH_ITERS (calls per sample,
# scaled down with size, default 20), BENCH_COLLS (default "allreduce reduce"),
# BENCH_RDMA_MCA (more mpirun options for coll rdma's runs, e.g.
# "--mca coll_rdma_allreduce_segment_size 1048576")
set -u
mode=${1:?usage: bench-reductions.sh one-guest|two-guests}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/build/bench/coll_latency
COMPONENTS=$ROOT/build/components
SIZES=${BENCH_SIZES:-16384 262144 1048576 16777216}
ROUNDS=${BENCH_ROUNDS:-3}
ITERS=${BENCH_ITERS:-20}
COLLS=${BENCH_COLLS:-allreduce reduce}

case $mode in
    two-guests) place="-np 2 --host g0:1,g1:1 --map-by node --mca btl self,vader,tcp" ;;
    one-guest)  place="-np 2 --mca btl self,vader" ;;
    *) echo "unknown mode $mode"; exit 2 ;;
esac
[ "$mode" = one-guest ] && verbs_only="--mca coll_rdma_transport verbs" || verbs_only=""
lifted="--mca coll_rdma_allreduce_max_bytes -1 --mca coll_rdma_reduce_max_bytes -1 ${BENCH_RDMA_MCA:-}"

. "$ROOT/ci/rxe/bench-sample.sh"
# iterations shrink with size so that a 16 MiB sample stays a few seconds
iters_for() { scaled_iters "$1" 262144 2; }

sample() {  # sample VARIANT COLL SIZE -> "avg_us" or "FAIL"
    # coll rdma's samples: a note (not a failure) where its events say that
    # it did not serve over verbs or handed calls over
    if [ "$1" = stock ]; then mca="--mca coll ^rdma" expect=; else
        mca="$lifted $verbs_only"
        expect="every_rank_ready(0; .transport == \"verbs\" or .transport == \"shm+verbs\") and nothing_handed_over"
    fi
    # shellcheck disable=SC2086
    bench_sample "$1 $2 $3" "$2" 2 "$expect" note $place --mca mca_base_component_path "SYS_DEFAULT:$COMPONENTS" $mca \
        "$BIN" -q -c "$2" -m "$3" -w 1 -n "$(iters_for "$3")"
}

echo "# $mode${BENCH_RDMA_MCA:+ (coll rdma with $BENCH_RDMA_MCA)}: coll_latency, avg us per call over ranks; load $(cat /run/rxe/host-loadavg 2>/dev/null || echo '?') (host loadavg at guest start)"
echo "# coll size iters round stock_us rdma_us ratio"
for coll in $COLLS; do
    for size in $SIZES; do
        r=1
        while [ $r -le "$ROUNDS" ]; do
            if [ $((r % 2)) = 1 ]; then s=$(sample stock "$coll" "$size"); t=$(sample rdma "$coll" "$size")
            else t=$(sample rdma "$coll" "$size"); s=$(sample stock "$coll" "$size"); fi
            ratio=$(awk -v s="$s" -v t="$t" 'BEGIN { if (s + 0 > 0 && t + 0 > 0) printf "%.2f", t / s; else print "-" }')
            echo "$coll $size $(iters_for "$size") $r $s $t $ratio"
            r=$((r + 1))
        done
    done
done
