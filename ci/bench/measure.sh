# Sourced by ci/bench.sh (its header lists the knobs these read): one
# coll_latency run of a variant and the median of runs. Invariant: a coll
# rdma run counts only when coll rdma served what it measures, a stock run
# only when coll rdma took no part.

# run_one VARIANT NP COLL SIZE -> prints the average in us, or "timeout"/"error"
run_one() {
    local variant=$1 np=$2 coll=$3 size=$4
    local iters warmup bind=(--bind-to core) over=()
    if [ "$np" -le 2 ]; then
        iters=$ITERS_2 warmup=$WARMUP_2
    else
        iters=$ITERS_N warmup=$WARMUP_N bind=(--bind-to none) over=(--oversubscribe)
    fi
    local sel=(--mca coll '^rdma')
    [ "$variant" = rdma ] && sel=()
    local tag="np$np-$coll-$size-$variant-$RUN"
    local rc=0
    events_mca "$LOG/$tag.events" || { echo error; return; }
    timeout -k 5 "$TIMEOUT" mpirun -np "$np" "${over[@]}" "${bind[@]}" --mca btl self,vader \
        --mca mca_base_component_path "$COMPONENT_PATH" "${sel[@]}" "${EVENTS_MCA[@]}" --mca coll_rdma_verbose 1 \
        "$BIN/coll_latency" -q -c "$coll" -m "$size" -w "$warmup" -n "$iters" \
        </dev/null >"$LOG/$tag.out" 2>"$LOG/$tag.err" || rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo timeout; return; fi
    [ "$rc" = 0 ] || { echo error; return; }
    # make sure the run used what it claims to measure (its events)
    if [ "$variant" = rdma ]; then
        if [ "$coll" = barrier ] && ! served_world_all barrier "$np" "$LOG/$tag.events"; then
            echo unused; return
        fi
    elif ! no_events "$LOG/$tag.events"; then
        echo unexcluded; return
    fi
    awk '!/^#/ && NF >= 7 { print $3; exit }' "$LOG/$tag.out"
}

median() {  # numbers on stdin (non-numeric lines ignored) -> median, or "-"
    awk '$1 ~ /^-?[0-9.]+$/ { v[++n] = $1 }
         END {
             if (n == 0) { print "-"; exit }
             for (i = 2; i <= n; i++) { x = v[i]; j = i - 1
                 while (j > 0 && v[j] > x) { v[j + 1] = v[j]; j-- } v[j + 1] = x }
             if (n % 2) m = v[(n + 1) / 2]; else m = (v[n / 2] + v[n / 2 + 1]) / 2
             printf "%.3f\n", m }'
}
