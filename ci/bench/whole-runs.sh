# Sourced by ci/bench.sh (its header lists the knobs these read): whole runs
# alternating (BENCH_COLLS), one mpirun per variant and repetition.

TABLE=$(printf '%-4s %-11s %6s %10s %10s %11s\n' np collective size stock_us rdma_us rdma/stock)
[ -z "$COLLS" ] || echo "== bench: $COLLS at np $NPS, $REPS repetition(s) of each variant"
for np in $NPS; do
    for spec in $COLLS; do
        coll=${spec%%:*}
        size=0
        [ "$spec" != "$coll" ] && size=${spec#*:}
        [ "$coll" = barrier ] && size=0
        stock_vals="" rdma_vals=""
        for RUN in $(seq 1 "$REPS"); do
            order="stock rdma"
            [ $((RUN % 2)) = 0 ] && order="rdma stock"
            [ "$STOCK_ONLY" = 1 ] && order="stock"
            for variant in $order; do
                v=$(run_one "$variant" "$np" "$coll" "$size")
                case $v in
                    ''|timeout|error|wrong|unused|unexcluded)
                        problems=$((problems + 1))
                        echo "   np=$np $coll $variant run $RUN: ${v:-no result} (logs in ${LOG#"$ROOT"/})" ;;
                esac
                if [ "$variant" = stock ]; then stock_vals="$stock_vals $v"; else rdma_vals="$rdma_vals $v"; fi
            done
        done
        s=$(printf '%s\n' $stock_vals | median)
        r="-"
        [ "$STOCK_ONLY" = 1 ] || r=$(printf '%s\n' $rdma_vals | median)
        ratio=$(awk -v s="$s" -v r="$r" 'BEGIN { if (s ~ /^[0-9.]+$/ && r ~ /^[0-9.]+$/ && s > 0) printf "%.2f", r / s; else print "-" }')
        line=$(printf '%-4s %-11s %6s %10s %10s %11s' "$np" "$coll" "$size" "$s" "$r" "$ratio")
        TABLE="$TABLE"$'\n'"$line"
        echo "$line"
        RAW="$RAW"$'\n'"np=$np $coll size=$size stock:$stock_vals"
        [ "$STOCK_ONLY" = 1 ] || RAW="$RAW"$'\n'"np=$np $coll size=$size rdma: $rdma_vals"
    done
done
