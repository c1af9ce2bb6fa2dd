# One timed sample of build/bench/coll_latency under mpirun, for the
# Soft-RoCE benches (ci/rxe/bench-protection.sh, ci/rxe/bench-reductions.sh;
# sourced, POSIX sh). What coll rdma did is read from its events
# (docs/events.md) with the helpers of ci/served/checks.jq
# (ci/served/events-hold.sh), never from the wording of verbose output.
#
# The caller sets ROOT (the repository) and ITERS (calls per sample at
# small sizes); the functions' own variables start with bs_.
#
# Each sample's events go to a directory of its own under BENCH_RUN_DIR
# (default /run/rxe, the run's directory every guest sees, so that the
# ranks of a job across guests write where the checks read; a temporary
# directory where it does not exist), removed after the sample.

# scaled_iters SIZE REFERENCE_BYTES FLOOR: ITERS calls up to
# REFERENCE_BYTES, fewer above (ITERS * REFERENCE_BYTES / SIZE) so that a
# long sample stays a few seconds, never fewer than FLOOR
scaled_iters() {
    bs_n=$((ITERS * $2 / $1))
    [ "$bs_n" -lt "$3" ] && bs_n=$3
    [ "$bs_n" -gt "$ITERS" ] && bs_n=$ITERS
    echo "$bs_n"
}

# bench_sample LABEL COLL NP EVENTS_JQ ON_MISMATCH MPIRUN_WORDS...
# Runs `mpirun MPIRUN_WORDS` (coll_latency and its arguments last) with coll
# rdma's events recorded, and prints the average in us per call over ranks
# (the third field of coll_latency's line for COLL), or FAIL when the job
# failed, printed no such line or a wrong result. EVENTS_JQ (empty: none,
# e.g. for stock Open MPI) must hold over the NP ranks' events; where it
# does not, ON_MISMATCH says what follows: `fail` (the sample is FAIL) or
# `note` (a line on stderr, the sample counts). LABEL names the sample in
# what goes to stderr.
bench_sample() {
    bs_label=$1 bs_coll=$2 bs_np=$3 bs_events_jq=$4 bs_on_mismatch=$5
    shift 5
    bs_base=${BENCH_RUN_DIR:-/run/rxe}
    [ -d "$bs_base" ] || bs_base=${TMPDIR:-/tmp}
    bs_run=$(mktemp -d "$bs_base/bench-sample.XXXXXX") || { echo "# $bs_label: cannot make a directory in $bs_base" >&2; echo FAIL; return; }
    mkdir "$bs_run/events"
    bs_out=$(mpirun --mca coll_rdma_events_file "$bs_run/events/rank-%r.jsonl" "$@" 2>&1)
    bs_status=$?
    if [ -n "$bs_events_jq" ] && ! bs_why=$(bash "$ROOT/ci/served/events-hold.sh" "$bs_run" "$bs_np" "$bs_events_jq"); then
        echo "# $bs_label: $bs_why" >&2
        printf '%s\n' "$bs_out" | tail -5 >&2
        if [ "$bs_on_mismatch" = fail ]; then
            rm -rf "$bs_run"
            echo FAIL; return
        fi
    fi
    rm -rf "$bs_run"
    bs_line=$(printf '%s\n' "$bs_out" | grep "^$bs_coll ")
    if [ $bs_status != 0 ] || [ -z "$bs_line" ] || printf '%s\n' "$bs_out" | grep -q "WRONG RESULT"; then
        echo "# $bs_label failed (status $bs_status):" >&2; printf '%s\n' "$bs_out" | tail -5 >&2
        echo FAIL; return
    fi
    echo "$bs_line" | awk '{print $3}'
}
