# Sourced by ci/bench.sh (its header lists the knobs these read): the
# reductions by message size (BENCH_SWEEP_*).

# ------------------------------------------------- reductions by message size
# sweep_one VARIANT NP COLL -> "size avg" lines, or one word: timeout, error,
# wrong (coll_latency found a wrong result), unused (coll rdma did not serve
# every call itself), unexcluded (stock run with coll rdma in it)
sweep_one() {
    local variant=$1 np=$2 coll=$3
    local iters=$SWEEP_ITERS_N warmup=$SWEEP_WARMUP_N
    [ "$np" -gt 2 ] || { iters=$SWEEP_ITERS_2; warmup=$SWEEP_WARMUP_2; }
    local sel=(--mca coll '^rdma')
    [ "$variant" = rdma ] && sel=()
    local tag="sweep-np$np-$coll-$variant-$RUN"
    latency_job "$tag" "$np" "${sel[@]}" -- -c "$coll" -m "$SWEEP_SIZES" -f "$SWEEP_FACTOR" -w "$warmup" \
        -n "$iters" -s "$SWEEP_SCALE" -l "$SWEEP_MIN_ITERS" || return 0
    if [ "$variant" = rdma ]; then
        served_world "$coll" "$np" "$LOG/$tag.events" || { echo unused; return; }
    elif ! no_events "$LOG/$tag.events"; then
        echo unexcluded; return
    fi
    awk '!/^#/ && NF >= 7 { print $2, $3 }' "$LOG/$tag.out"
}

SWEEP_TABLE=""
if [ -n "$SWEEP_COLLS" ]; then
    echo "== sweep: $SWEEP_COLLS, $SWEEP_SIZES bytes (x$SWEEP_FACTOR) at np $SWEEP_NPS, $SWEEP_REPS repetition(s)"
    SWEEP_TABLE=$(printf '%-4s %-11s %8s %10s %10s %11s\n' np collective size stock_us rdma_us rdma/stock)
    for np in $SWEEP_NPS; do
        for coll in $SWEEP_COLLS; do
            rm -f "$LOG/sweep.stock" "$LOG/sweep.rdma"
            for RUN in $(seq 1 "$SWEEP_REPS"); do
                order="stock rdma"
                [ $((RUN % 2)) = 0 ] && order="rdma stock"
                [ "$STOCK_ONLY" = 1 ] && order="stock"
                for variant in $order; do
                    out=$(sweep_one "$variant" "$np" "$coll")
                    case $out in
                        ''|timeout|error|wrong|unused|unexcluded)
                            problems=$((problems + 1))
                            echo "   np=$np $coll $variant run $RUN: ${out:-no result} (logs in ${LOG#"$ROOT"/})" ;;
                        *) printf '%s\n' "$out" >> "$LOG/sweep.$variant"
                           RAW="$RAW"$'\n'"np=$np $coll $variant run $RUN: $(printf '%s\n' "$out" | awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $1, $2 }')" ;;
                    esac
                done
            done
            sizes=$({ cat "$LOG"/sweep.stock "$LOG"/sweep.rdma 2>/dev/null || true; } | awk '{ print $1 }' | sort -n | uniq)
            for size in $sizes; do
                s=$({ awk -v z="$size" '$1 == z { print $2 }' "$LOG/sweep.stock" 2>/dev/null || true; } | median)
                r="-"
                [ "$STOCK_ONLY" = 1 ] || r=$({ awk -v z="$size" '$1 == z { print $2 }' "$LOG/sweep.rdma" 2>/dev/null || true; } | median)
                ratio=$(awk -v s="$s" -v r="$r" 'BEGIN { if (s ~ /^[0-9.]+$/ && r ~ /^[0-9.]+$/ && s > 0) printf "%.2f", r / s; else print "-" }')
                line=$(printf '%-4s %-11s %8s %10s %10s %11s' "$np" "$coll" "$size" "$s" "$r" "$ratio")
                SWEEP_TABLE="$SWEEP_TABLE"$'\n'"$line"
                echo "$line"
            done
        done
    done
fi
