# Sourced by ci/bench.sh (its header lists the knobs these read): the bcast
# tables: latency, throughput and skew (BENCH_BCAST_*, BENCH_TPUT_*,
# BENCH_SKEW_*).

# ------------------------------------------------------------------- bcast
# bcast_run VARIANT NP MODE ARGS... -> the data lines of coll_latency without
# the first column ("size avg min max iterations ranks extra..."), or one
# problem word (timeout, error, wrong, unused, unexcluded)
bcast_run() {
    local variant=$1 np=$2 mode=$3
    shift 3
    local sel=(--mca coll '^rdma')
    [ "$variant" = rdma ] && sel=()
    local tag="$mode-np$np-$variant-$RUN"
    latency_job "$tag" "$np" "${sel[@]}" -- -c "$mode" "$@" || return 0
    if [ "$variant" = rdma ]; then
        served_world bcast "$np" "$LOG/$tag.events" || { echo unused; return; }
    elif ! no_events "$LOG/$tag.events"; then
        echo unexcluded; return
    fi
    awk '!/^#/ && NF >= 7 { $1 = ""; sub(/^ /, ""); print }' "$LOG/$tag.out"
}

# bcast_series NAME NP REPS MODE ARGS...: runs both variants REPS times,
# alternating, into $LOG/NAME-npNP.stock and .rdma
bcast_series() {
    local name=$1 np=$2 reps=$3 mode=$4
    shift 4
    rm -f "$LOG/$name-np$np.stock" "$LOG/$name-np$np.rdma"
    local variant order out
    for RUN in $(seq 1 "$reps"); do
        order="stock rdma"
        [ $((RUN % 2)) = 0 ] && order="rdma stock"
        [ "$STOCK_ONLY" = 1 ] && order="stock"
        for variant in $order; do
            out=$(bcast_run "$variant" "$np" "$mode" "$@")
            case $out in
                ''|timeout|error|wrong|unused|unexcluded)
                    problems=$((problems + 1))
                    echo "   np=$np $mode $variant run $RUN: ${out:-no result} (logs in ${LOG#"$ROOT"/})" ;;
                *) printf '%s\n' "$out" >> "$LOG/$name-np$np.$variant"
                   RAW="$RAW"$'\n'"$name np=$np $variant run $RUN: $(printf '%s\n' "$out" | awk -v c="$BCOL" '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $1, $c }')" ;;
            esac
        done
    done
}

# col_median NAME NP VARIANT SIZE COLUMN -> median of that column for SIZE
col_median() {
    { awk -v z="$4" -v c="$5" '$1 == z { print $c }' "$LOG/$1-np$2.$3" 2>/dev/null || true; } | median
}
ratio() {  # ratio A B -> A/B with 2 decimals, or "-"
    awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2f", a / b; else print "-" }'
}
sizes_of() { { cat "$LOG/$1-np$2".stock "$LOG/$1-np$2".rdma 2>/dev/null || true; } | awk '{ print $1 }' | sort -n | uniq; }

BLAT_TABLE="" BTPUT_TABLE="" BSKEW_TABLE=""
for table in $BCAST_TABLES; do
    case $table in
        latency)
            echo "== bcast latency (OSU method), $BCAST_SIZES bytes (x$BCAST_FACTOR) at np $BCAST_NPS, $BCAST_REPS repetition(s)"
            BLAT_TABLE=$(printf '%-4s %8s %10s %10s %11s %14s %13s %13s %12s\n' np size stock_us rdma_us rdma/stock loop_stock_us loop_rdma_us ack_stock_us ack_rdma_us)
            for np in $BCAST_NPS; do
                [ "$np" -ge 2 ] || continue
                it=$BCAST_ITERS_N wu=$BCAST_WARMUP_N
                [ "$np" -le 2 ] && { it=$BCAST_ITERS_2; wu=$BCAST_WARMUP_2; }
                BCOL=2 bcast_series blat "$np" "$BCAST_REPS" bcast_ack -m "$BCAST_SIZES" -f "$BCAST_FACTOR" \
                    -w "$wu" -n "$it" -s "$BCAST_SCALE" -l "$BCAST_MIN_ITERS"
                for size in $(sizes_of blat "$np"); do
                    st=$(col_median blat "$np" stock "$size" 2) rd=-
                    [ "$STOCK_ONLY" = 1 ] || rd=$(col_median blat "$np" rdma "$size" 2)
                    ls=$(col_median blat "$np" stock "$size" 7) lr=-
                    as=$(col_median blat "$np" stock "$size" 8) ar=-
                    if [ "$STOCK_ONLY" = 0 ]; then
                        lr=$(col_median blat "$np" rdma "$size" 7)
                        ar=$(col_median blat "$np" rdma "$size" 8)
                    fi
                    line=$(printf '%-4s %8s %10s %10s %11s %14s %13s %13s %12s' "$np" "$size" "$st" "$rd" "$(ratio "$rd" "$st")" "$ls" "$lr" "$as" "$ar")
                    BLAT_TABLE="$BLAT_TABLE"$'\n'"$line"
                    echo "$line"
                done
            done ;;
        throughput)
            echo "== bcast back-to-back throughput, $TPUT_SIZES bytes (x$TPUT_FACTOR) at np $BCAST_NPS, $BCAST_REPS repetition(s)"
            BTPUT_TABLE=$(printf '%-4s %8s %12s %12s %11s\n' np size stock_MBps rdma_MBps rdma/stock)
            for np in $BCAST_NPS; do
                [ "$np" -ge 2 ] || continue
                it=$TPUT_ITERS_N
                [ "$np" -le 2 ] && it=$TPUT_ITERS_2
                BCOL=7 bcast_series btput "$np" "$BCAST_REPS" bcast_tput -m "$TPUT_SIZES" -f "$TPUT_FACTOR" \
                    -w $((it / 20 + 1)) -n "$it" -s "$BCAST_SCALE" -l "$BCAST_MIN_ITERS"
                for size in $(sizes_of btput "$np"); do
                    st=$(col_median btput "$np" stock "$size" 7) rd=-
                    [ "$STOCK_ONLY" = 1 ] || rd=$(col_median btput "$np" rdma "$size" 7)
                    line=$(printf '%-4s %8s %12s %12s %11s' "$np" "$size" "$st" "$rd" "$(ratio "$rd" "$st")")
                    BTPUT_TABLE="$BTPUT_TABLE"$'\n'"$line"
                    echo "$line"
                done
            done ;;
        skew)
            echo "== bcast under process skew (receivers spin 0..$SKEW_DELAY us before each bcast), $SKEW_SIZES bytes (x$SKEW_FACTOR) at np $BCAST_NPS, $SKEW_REPS repetition(s)"
            BSKEW_TABLE=$(printf '%-4s %8s %13s %12s %10s %13s %12s %10s %9s\n' np size root_stock_us root_rdma_us root_ratio recv_stock_us recv_rdma_us recv_ratio delay_us)
            for np in $BCAST_NPS; do
                [ "$np" -ge 2 ] || continue
                it=$SKEW_ITERS_N
                [ "$np" -le 2 ] && it=$SKEW_ITERS_2
                BCOL=7 bcast_series bskew "$np" "$SKEW_REPS" bcast_skew -m "$SKEW_SIZES" -f "$SKEW_FACTOR" \
                    -w $((it / 10 + 1)) -n "$it" -D "$SKEW_DELAY"
                for size in $(sizes_of bskew "$np"); do
                    rs=$(col_median bskew "$np" stock "$size" 7) rr=-
                    cs=$(col_median bskew "$np" stock "$size" 8) cr=-
                    if [ "$STOCK_ONLY" = 0 ]; then
                        rr=$(col_median bskew "$np" rdma "$size" 7)
                        cr=$(col_median bskew "$np" rdma "$size" 8)
                    fi
                    dl=$(col_median bskew "$np" stock "$size" 10)
                    line=$(printf '%-4s %8s %13s %12s %10s %13s %12s %10s %9s' "$np" "$size" "$rs" "$rr" "$(ratio "$rr" "$rs")" "$cs" "$cr" "$(ratio "$cr" "$cs")" "$dl")
                    BSKEW_TABLE="$BSKEW_TABLE"$'\n'"$line"
                    echo "$line"
                done
            done ;;
        *) echo "   warning: unknown bcast table '$table' in BENCH_BCAST_TABLES (latency, throughput, skew)" ;;
    esac
done
