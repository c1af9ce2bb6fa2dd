#!/usr/bin/env bash
# Where make check's time goes: each stage runs through this script, which
# appends one row (stage, seconds, status, CPU seconds) to a table, and the last step
# prints the table. A failing stage prints the table so far before make
# stops, so every run, red or green, ends with its timings.
#
# usage:
#   ci/stage.sh start                    empty the table (make check's first step)
#   ci/stage.sh run NAME -- CMD [ARG...] run CMD; record its seconds and
#                                        passed/failed; exit with CMD's status;
#                                        a failed stage also prints why
#                                        (below)
#   ci/stage.sh skip NAME WHY            record a stage left out (SKIP_UDP=1 ...)
#   ci/stage.sh report                   print the table and the closing line
#                                        "stages: N passed, N failed, N skipped"
#   ci/stage.sh --self-test              check the above on a scratch table
#
# The table is $CHECK_TIMES (default build/check-times.tsv), tab-separated:
# stage, seconds (rounded), status, why (skipped stages), CPU seconds.
# Seconds are wall time: on a loaded machine they say where the wait was,
# not what each stage costs alone. CPU seconds (user + system of the stage's
# processes, as the kernel accounts them to their waiting parents: daemons
# that leave their parent, e.g. a qemu guest that forks away, are not in
# it) are what a stage takes from whatever runs beside it, idle or loaded.
#
# Why a stage failed: each stage's output (stdout and stderr) also goes to
# $STAGE_LOGS/NAME.log (default build/stage-logs). A failed stage prints,
# just above the table, the lines of its log that say FAIL or FAILED and
# the few lines under each (a test runner's reasons, a panic's message), at
# most WHY_LINES of them. A CI that keeps only the end of the output then
# still shows the cause, which a long stage prints minutes earlier.
set -u

TABLE=${CHECK_TIMES:-build/check-times.tsv}
STAGE_LOGS=${STAGE_LOGS:-$(dirname "$TABLE")/stage-logs}
WHY_LINES=18

die() { echo "stage.sh: $*" >&2; exit 2; }

record() { # NAME SECONDS STATUS WHY [CPU_SECONDS]
    mkdir -p "$(dirname "$TABLE")" || die "cannot create the directory of $TABLE"
    printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "${5:-0}" >> "$TABLE" || die "cannot append to $TABLE"
}

# The CPU seconds (user + system, rounded) of this shell's waited-for
# children so far: cutime and cstime of /proc/PID/stat (fields 16 and 17
# after the command name, which is "bash" here), in clock ticks. (Not
# bash's `times`: a command substitution would run it in a fresh subshell,
# whose children have used nothing.)
children_cpu_seconds() {
    awk -v tick="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%d\n", ($14 + $15) / tick + 0.5 }' "/proc/$$/stat"
}

report() {
    [ -f "$TABLE" ] || { echo "== stage timings: no table ($TABLE); was 'ci/stage.sh start' run?"; return 0; }
    echo "== stage timings ($TABLE)"
    awk -F'\t' '
        function clock(s) { return sprintf("%d:%02d", int(s / 60), s % 60) }
        BEGIN { printf "  %-22s %8s %7s %8s  %s\n", "stage", "seconds", "m:ss", "cpu s", "status" }
        NF >= 3 {
            printf "  %-22s %8d %7s %8d  %s%s\n", $1, $2, clock($2), $5, $3, ($4 == "" ? "" : " (" $4 ")")
            total += $2; cpu += $5; count[$3]++
        }
        END {
            printf "  %-22s %8d %7s %8d\n", "total", total, clock(total), cpu
            printf "stages: %d passed, %d failed, %d skipped\n", count["passed"], count["failed"], count["skipped"]
        }' "$TABLE"
}

wait_a_little() { # PID: until it ends, or for 2 s at most
    local tries=20
    while [ "$tries" -gt 0 ] && kill -0 "$1" 2>/dev/null; do sleep 0.1; tries=$((tries - 1)); done
}

# The FAIL lines of LOG, each with the lines under it, at most WHY_LINES
# in all (the first ones: later failures often follow from the first).
why_failed() { # NAME LOG
    local lines
    lines=$(grep -E -A4 '(^|[^[:alnum:]_])FAIL(ED)?([^[:alnum:]_]|$)' "$2" 2>/dev/null | head -n "$WHY_LINES")
    if [ -n "$lines" ]; then
        echo "== why stage '$1' failed (its FAIL lines, from $2):"
        printf '%s\n' "$lines"
    else
        echo "== stage '$1' failed without a FAIL line; its last lines (from $2):"
        tail -n 6 "$2" 2>/dev/null
    fi
}

run() { # NAME -- CMD...
    [ $# -ge 3 ] && [ "$2" = -- ] || die "usage: ci/stage.sh run NAME -- CMD [ARG...]"
    local name=$1 started status seconds log fifo tee_pid
    shift 2
    mkdir -p "$STAGE_LOGS" || die "cannot create $STAGE_LOGS"
    log=$STAGE_LOGS/$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_').log
    started=$(date +%s%N)
    # (not a pipeline into tee: a daemon a stage leaves running, holding
    # its stdout, would keep the pipe open and the stage from ending; the
    # tee reads a FIFO and is waited for a moment only, to have the
    # command's last lines in the log)
    fifo=$STAGE_LOGS/.fifo.$$
    rm -f "$fifo" && mkfifo "$fifo" || die "cannot make $fifo"
    tee "$log" < "$fifo" &
    tee_pid=$!
    "$@" > "$fifo" 2>&1
    status=$?
    wait_a_little "$tee_pid"
    rm -f "$fifo"
    seconds=$((($(date +%s%N) - started + 500000000) / 1000000000))
    if [ "$status" = 0 ]; then
        record "$name" "$seconds" passed "" "$(children_cpu_seconds)"
    else
        record "$name" "$seconds" failed "" "$(children_cpu_seconds)"
        why_failed "$name" "$log"
        report
    fi
    return "$status"
}

self_test() {
    local scratch passed=0 failed=0 out status
    scratch=$(mktemp -d) || die "mktemp failed"
    # shellcheck disable=SC2064 # expand now: the path is fixed
    trap "rm -rf '$scratch'" EXIT
    check() { # WHAT CONDITION...
        local what=$1; shift
        if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $what"; fi
    }
    export CHECK_TIMES=$scratch/times.tsv
    bash "$0" start
    bash "$0" run "quick one" -- true >/dev/null
    check "a passing stage exits 0" [ $? = 0 ]
    out=$(bash "$0" run slow -- sh -c 'sleep 1; exit 3')
    status=$?
    check "a failing stage keeps its command's status (3, got $status)" [ "$status" = 3 ]
    check "a failing stage prints the table so far" grep -q '^  quick one .* passed$' <<<"$out"
    bash "$0" skip udp "SKIP_UDP=1"
    out=$(bash "$0" report)
    check "the rows in order, with their status" \
        [ "$(awk -F'\t' '{ print $1 "/" $3 }' "$CHECK_TIMES" | paste -sd,)" = "quick one/passed,slow/failed,udp/skipped" ]
    check "the slow stage took 1 s or more" awk -F'\t' '$1 == "slow" && $2 >= 1 { found = 1 } END { exit !found }' "$CHECK_TIMES"
    check "the sleeping stage used under 1 CPU second" awk -F'\t' '$1 == "slow" && $5 < 1 { found = 1 } END { exit !found }' "$CHECK_TIMES"
    check "a skipped stage says why" grep -q '^  udp .* skipped (SKIP_UDP=1)$' <<<"$out"
    check "the closing line counts each status" [ "$(tail -n 1 <<<"$out")" = "stages: 1 passed, 1 failed, 1 skipped" ]
    check "the total row sums the seconds" \
        [ "$(awk '$1 == "total" { print $2 }' <<<"$out")" = "$(awk -F'\t' '{ s += $2 } END { print s }' "$CHECK_TIMES")" ]
    # (a grandchild that spins for 1.2 s of its own CPU time, however long
    # that takes on a loaded machine: the stage's CPU seconds include it)
    bash "$0" run spinning -- sh -c "python3 -c 'import time
while time.process_time() < 1.2: pass'" >/dev/null
    check "the spinning stage's CPU seconds count its grandchild (1 or more)" \
        awk -F'\t' '$1 == "spinning" && $5 >= 1 { found = 1 } END { exit !found }' "$CHECK_TIMES"
    out=$(bash "$0" run reasons -- sh -c 'echo "case-a PASS"; echo "case-b FAIL (logs: x)"; echo "  it returned 7"; echo "case-c PASS"; exit 1')
    check "a failing stage repeats its FAIL line and the reason under it above the table" \
        [ "$(sed -n '/^== why stage .reasons. failed/,/^== stage timings/p' <<<"$out" | sed -n 2,3p | paste -sd'|')" = "case-b FAIL (logs: x)|  it returned 7" ]
    check "a stage's output is kept in its log" grep -q '^case-c PASS$' "$scratch/stage-logs/reasons.log"
    SECONDS=0
    bash "$0" run leaves-a-daemon -- sh -c 'sleep 30 & echo started' >/dev/null
    check "a daemon holding the stage's output does not hold the stage (took ${SECONDS}s)" [ "$SECONDS" -lt 10 ]
    out=$(bash "$0" run quiet -- sh -c 'echo one; echo "the last words"; exit 1')
    check "a failing stage without a FAIL line shows its last lines" \
        grep -q '^the last words$' <<<"$(sed -n '/failed without a FAIL line/,/^== stage timings/p' <<<"$out")"
    bash "$0" start
    check "start empties the table" [ ! -s "$CHECK_TIMES" ]
    check "run without a command is refused" eval '! bash "$0" run lonely -- 2>/dev/null'
    echo "stage.sh self-test: $passed passed, $failed failed"
    [ "$failed" = 0 ]
}

case "${1:-}" in
    start) mkdir -p "$(dirname "$TABLE")" && : > "$TABLE" || die "cannot empty $TABLE" ;;
    run) shift; run "$@" ;;
    skip) [ $# = 3 ] || die "usage: ci/stage.sh skip NAME WHY"; record "$2" 0 skipped "$3" 0 ;;
    report) report ;;
    --self-test) self_test ;;
    *) die "usage: ci/stage.sh start | run NAME -- CMD... | skip NAME WHY | report | --self-test" ;;
esac
