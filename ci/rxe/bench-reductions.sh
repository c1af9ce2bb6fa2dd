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

# iterations shrink with size so that a 16 MiB sample stays a few seconds
iters_for() { n=$((ITERS * 262144 / $1)); [ "$n" -lt 2 ] && n=2; [ "$n" -gt "$ITERS" ] && n=$ITERS; echo $n; }

sample() {  # sample VARIANT COLL SIZE -> "avg_us" or "FAIL"
    variant=$1 coll=$2 size=$3
    n=$(iters_for "$size")
    if [ "$variant" = stock ]; then mca="--mca coll ^rdma"; else mca="$lifted $verbs_only --mca coll_rdma_verbose 1"; fi
    out=$(mpirun $place --mca mca_base_component_path "SYS_DEFAULT:$COMPONENTS" $mca \
              "$BIN" -q -c "$coll" -m "$size" -w 1 -n "$n" 2>&1)
    status=$?
    if [ "$variant" = rdma ] && ! printf '%s\n' "$out" | grep -q "transport verbs\|transport shm+verbs"; then
        echo "# rdma sample not served over verbs:" >&2; printf '%s\n' "$out" | tail -5 >&2
    fi
    if [ "$variant" = rdma ] && printf '%s\n' "$out" | grep -q "[1-9][0-9]* handed"; then
        echo "# rdma sample handed calls over:" >&2; printf '%s\n' "$out" | grep "[1-9][0-9]* handed" | head -3 >&2
    fi
    line=$(printf '%s\n' "$out" | grep "^$coll ")
    if [ $status != 0 ] || [ -z "$line" ] || printf '%s\n' "$out" | grep -q "WRONG RESULT"; then
        echo "# $variant $coll $size failed (status $status):" >&2; printf '%s\n' "$out" | tail -5 >&2
        echo FAIL; return
    fi
    echo "$line" | awk '{print $3}'
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
