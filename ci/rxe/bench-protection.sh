#!/bin/sh
# What sealing the UD multicast datagrams costs a bcast over verbs on
# Soft-RoCE: coll_rdma_verbs_protection encrypt (the default) against none,
# size by size, the two taking turns (encrypt, none, none, encrypt, ...) so
# that each pair sees the same load; the summary gives, per size, the
# median of the pairs' ratios and their spread (the interquartile range of
# the ratios over their median). Ranks in one guest, coll_rdma_transport
# verbs forced, so every bcast goes over the UD multicast group. Runs in a
# guest of ci/rxe/guests.sh, e.g.
#   ci/rxe/guests.sh run --timeout 3000 -- sh ci/rxe/bench-protection.sh
# Soft-RoCE under qemu's software emulation is far slower than hardware:
# the ratio says what the seal adds on the same emulated links, where the
# wire (the rxe driver's own copies and checksums, in the guest's CPU) is
# cheap for its bytes compared with an adapter's; not a real fabric's cost.
# environment: BENCH_SIZES (bytes, default "8 65536 1048576"), BENCH_ROUNDS
# (pairs per size, default 6), BENCH_ITERS (calls per sample, scaled down
# with size, default 400), BENCH_NP (ranks, default 2),
# BENCH_OTHER (the protection compared with encrypt, default none)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/build/bench/coll_latency
COMPONENTS=$ROOT/build/components
SIZES=${BENCH_SIZES:-8 65536 1048576}
ROUNDS=${BENCH_ROUNDS:-6}
ITERS=${BENCH_ITERS:-400}
NP=${BENCH_NP:-2}
OTHER=${BENCH_OTHER:-none}

. "$ROOT/ci/rxe/bench-sample.sh"
# iterations shrink with size so that a 1 MiB sample stays a few seconds
iters_for() { scaled_iters "$1" 16384 4; }

sample() {  # sample PROTECTION SIZE -> "avg_us" or "FAIL"
    # every rank must have the UD multicast group, sealed as asked (coll
    # rdma's comm_ready)
    bench_sample "$1 sample" bcast "$NP" \
        "every_rank_ready(0; .transport == \"verbs\" and .multicast == \"Datagram\" and .protection == \"$1\")" fail \
        -np "$NP" --oversubscribe --bind-to none --mca btl self,vader --mca mca_base_component_path "SYS_DEFAULT:$COMPONENTS" \
        --mca coll_rdma_transport verbs --mca coll_rdma_verbs_protection "$1" \
        "$BIN" -q -c bcast -m "$2" -w 3 -n "$(iters_for "$2")"
}

echo "# bcast over verbs UD multicast, np $NP in one guest: encrypt against $OTHER; coll_latency, avg us per call over ranks; load $(cat /run/rxe/host-loadavg 2>/dev/null || echo '?') (host loadavg at guest start)"
echo "# size iters round encrypt_us ${OTHER}_us ratio"
RESULTS=$(mktemp)
for size in $SIZES; do
    r=1
    while [ $r -le "$ROUNDS" ]; do
        if [ $((r % 2)) = 1 ]; then e=$(sample encrypt "$size"); o=$(sample "$OTHER" "$size")
        else o=$(sample "$OTHER" "$size"); e=$(sample encrypt "$size"); fi
        ratio=$(awk -v e="$e" -v o="$o" 'BEGIN { if (e + 0 > 0 && o + 0 > 0) printf "%.3f", e / o; else print "-" }')
        echo "$size $(iters_for "$size") $r $e $o $ratio" | tee -a "$RESULTS"
        r=$((r + 1))
    done
done
echo "# size pairs median_encrypt_us median_${OTHER}_us median_ratio spread(IQR/median)"
# column COL of SIZE's complete pairs, sorted
column() { awk -v size="$1" -v col="$2" '$1 == size && $6 != "-" { print $col }' "$RESULTS" | sort -g; }
median() { awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
for size in $SIZES; do
    pairs=$(column "$size" 6 | wc -l)
    spread=$(column "$size" 6 | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "-"; exit }
        m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.2f", (v[NR - int((NR - 1) / 4)] - v[int((NR - 1) / 4) + 1]) / m }')
    echo "$size $pairs $(column "$size" 4 | median) $(column "$size" 5 | median) $(column "$size" 6 | median) $spread"
done
rm -f "$RESULTS"
