# Sourced by ci/bench.sh (its header lists the knobs these read): allreduce
# latency by tree degree next to the cost model (BENCH_DEGREE*).

# ----------------------------------------- allreduce by tree degree vs model
# degree_one NP K -> "avg_us used_degree", or a problem word as sweep_one;
# K = auto: the component's own choice; K = stock: stock Open MPI
degree_one() {
    local np=$1 k=$2
    local iters=$DEGREE_ITERS_2
    [ "$np" -le 2 ] || iters=$DEGREE_ITERS_N
    local sel=()
    case $k in
        stock) sel=(--mca coll '^rdma') ;;
        auto) sel=(--mca coll_rdma_allreduce_max_bytes -1) ;;
        *) sel=(--mca coll_rdma_allreduce_degree "$k" --mca coll_rdma_allreduce_exchange_max 0
                --mca coll_rdma_allreduce_max_bytes -1) ;;
    esac
    local tag="degree-np$np-k$k-$RUN"
    latency_job "$tag" "$np" "${sel[@]}" -- -c allreduce -m "$DEGREE_BYTES" -w $((iters / 10 + 1)) -n "$iters" || return 0
    local used="-"
    if [ "$k" = stock ]; then
        no_events "$LOG/$tag.events" || { echo unexcluded; return; }
    else
        served_world_all allreduce "$np" "$LOG/$tag.events" || { echo unused; return; }
        used=$(world_ready_field "$LOG/$tag.events" .allreduce.degree)
        used=${used:--}
        if [ "$k" != auto ] && [ "$used" != - ] && [ "$used" != "$k" ]; then echo "degree-$used-used"; return; fi
    fi
    printf '%s %s\n' "$(awk '!/^#/ && NF >= 7 { print $3; exit }' "$LOG/$tag.out")" "$used"
}

DEGREE_TABLE=""
MODEL=""
if [ -n "$DEGREES" ] && [ "$STOCK_ONLY" = 0 ]; then
    echo "== allreduce of $DEGREE_BYTES bytes by tree degree at np $DEGREE_NPS, $DEGREE_REPS repetition(s); cargo build --release -p tuning --bins"
    if (cd "$ROOT" && cargo build --release -p tuning --bins) > "$LOG/cargo-model.log" 2>&1; then
        MODEL=$ROOT/target/release/coll-rdma-model
    else
        echo "   warning: cannot build coll-rdma-model (see ${LOG#"$ROOT"/}/cargo-model.log): no predictions"
    fi
    for np in $DEGREE_NPS; do
        pred_file=$LOG/model-np$np.txt
        : > "$pred_file"
        if [ -n "$MODEL" ]; then
            "$MODEL" --ranks "$np" --bytes "$DEGREE_BYTES" --degrees "$(printf '%s' "$DEGREES" | tr ' ' ',')" \
                > "$pred_file" 2>&1 || echo "   warning: coll-rdma-model failed: $(head -1 "$pred_file")"
        fi
        best=$(awk '$1 == "best" { print $2; exit }' "$pred_file")
        over_note=""
        [ "$np" -gt 2 ] && over_note=", oversubscribed on $(nproc) core(s)"
        DEGREE_TABLE="$DEGREE_TABLE"$'\n'"allreduce of $DEGREE_BYTES bytes at np=$np$over_note: measured us (median of $DEGREE_REPS) and model us"
        DEGREE_TABLE="$DEGREE_TABLE"$'\n'"$(printf '%-10s %12s %12s %17s' k measured_us predicted_us measured/predicted)"
        echo "   np=$np (model's best degree for this size: ${best:--})"
        for k in $DEGREES auto stock; do
            vals="" used_seen=""
            for RUN in $(seq 1 "$DEGREE_REPS"); do
                out=$(degree_one "$np" "$k")
                case $out in
                    ''|timeout|error|wrong|unused|unexcluded|degree-*)
                        problems=$((problems + 1))
                        echo "   np=$np k=$k run $RUN: ${out:-no result} (logs in ${LOG#"$ROOT"/})" ;;
                    *) vals="$vals ${out%% *}"; used_seen=${out##* } ;;
                esac
            done
            m=$(printf '%s\n' $vals | median)
            label=$k pred="-"
            case $k in
                auto) label="auto(k=${used_seen:--})"
                      [ -n "$used_seen" ] && [ "$used_seen" != - ] &&
                          pred=$(awk -v k="$used_seen" '$1 == "degree" && $2 == k { printf "%.3f", $3 / 1000 }' "$pred_file") ;;
                stock) label="stock" ;;
                *) pred=$(awk -v k="$k" '$1 == "degree" && $2 == k { printf "%.3f", $3 / 1000 }' "$pred_file") ;;
            esac
            # auto may have used a degree outside the list: ask the model
            if [ -z "$pred" ] && [ -n "$MODEL" ] && [ "$k" = auto ]; then
                pred=$("$MODEL" --ranks "$np" --bytes "$DEGREE_BYTES" --degrees "$used_seen" 2>/dev/null |
                    awk '$1 == "degree" { printf "%.3f", $3 / 1000 }')
            fi
            pred=${pred:--}
            ratio=$(awk -v m="$m" -v p="$pred" 'BEGIN { if (m ~ /^[0-9.]+$/ && p ~ /^[0-9.]+$/ && p > 0) printf "%.2f", m / p; else print "-" }')
            line=$(printf '%-10s %12s %12s %17s' "$label" "$m" "$pred" "$ratio")
            DEGREE_TABLE="$DEGREE_TABLE"$'\n'"$line"
            RAW="$RAW"$'\n'"degree np=$np k=$k bytes=$DEGREE_BYTES:$vals"
            echo "$line"
        done
        ex=$(awk '$1 == "exchange" { printf "%.3f", $2 / 1000 }' "$pred_file")
        why=$(awk '$1 == "best" { $1 = ""; $2 = ""; $3 = ""; sub(/^ +/, ""); print; exit }' "$pred_file")
        DEGREE_TABLE="$DEGREE_TABLE"$'\n'"model: exchange variant ${ex:--} us; best tree ${why:--}"$'\n'
    done
fi
