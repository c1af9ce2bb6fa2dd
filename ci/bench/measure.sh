# Sourced by ci/bench.sh (its header lists the knobs these read): one
# coll_latency run of a variant and the median of runs. Invariant: a coll
# rdma run counts only when coll rdma served what it measures, a stock run
# only when coll rdma took no part.

# latency_job TAG NP OPTS... -- ARGS...: one bench/coll_latency job of NP
# ranks (above 2 oversubscribed and unbound, else bound to cores) with the
# mpirun options OPTS and the program's arguments ARGS; its output goes to
# $LOG/TAG.out and .err, its events to $LOG/TAG.events. Returns 0 when it ran
# clean, else prints the problem (timeout, wrong: coll_latency found a wrong
# result, error) and returns 1.
latency_job() {
    local tag=$1 np=$2 opts=() bind=(--bind-to core) over=() rc=0
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    [ "$np" -le 2 ] || { bind=(--bind-to none); over=(--oversubscribe); }
    events_mca "$LOG/$tag.events" || { echo error; return 1; }
    timeout -k 5 "$TIMEOUT" mpirun -np "$np" "${over[@]}" "${bind[@]}" --mca btl self,vader \
        --mca mca_base_component_path "$COMPONENT_PATH" "${opts[@]}" "${EVENTS_MCA[@]}" --mca coll_rdma_verbose 1 \
        "$BIN/coll_latency" -q "$@" </dev/null >"$LOG/$tag.out" 2>"$LOG/$tag.err" || rc=$?
    case $rc in
        0) return 0 ;;
        124|137) echo timeout ;;
        3) echo wrong ;;
        *) echo error ;;
    esac
    return 1
}

# run_one VARIANT NP COLL SIZE -> prints the average in us, or a problem
# word (latency_job's, unused, unexcluded)
run_one() {
    local variant=$1 np=$2 coll=$3 size=$4
    local iters=$ITERS_N warmup=$WARMUP_N
    [ "$np" -gt 2 ] || { iters=$ITERS_2; warmup=$WARMUP_2; }
    local sel=(--mca coll '^rdma')
    [ "$variant" = rdma ] && sel=()
    local tag="np$np-$coll-$size-$variant-$RUN"
    latency_job "$tag" "$np" "${sel[@]}" -- -c "$coll" -m "$size" -w "$warmup" -n "$iters" || return 0
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
