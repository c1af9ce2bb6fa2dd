#!/usr/bin/env bash
# One MPI test job of the Soft-RoCE suite, run in a guest by
# ci/rxe-tests.sh: ci/mpi-tests.sh with the arguments after `--` (its own
# checks, every case's events kept in MPI_TESTS_LOGDIR), then checks of
# what coll rdma decided, read from each case's events with the helpers of
# ci/served/checks.jq (ci/served/events-hold.sh), never from the wording
# of verbose output.
#
# usage: ci/rxe/mpi-job.sh [--cases REGEX] [--every JQ]... [--some JQ]...
#                          [--multicast-tally] -- MPI-TESTS-ARGUMENTS...
#   --cases REGEX  the checks below look at the cases whose name matches
#               REGEX (grep -E; default: every case that wrote events)
#   --every JQ  JQ holds over the events of every case looked at
#   --some JQ   JQ holds over the events of at least one of them
#   --multicast-tally  print one line "multicast tally: ..." with the bcast
#               multicast counts of every case's ranks summed
#               (comm_freed's bcast_multicast; every case, --cases or not)
# environment: MPI_TESTS_LOGDIR (required), KEEP_LOGS=1 (the cases' logs
#   must outlive ci/mpi-tests.sh)
# Exit status non-zero when ci/mpi-tests.sh or a check failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
every=() some=() tally=0 only=.
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    case $1 in
        --cases) only=${2:?--cases needs a regular expression}; shift ;;
        --every) every+=("${2:?--every needs a jq expression}"); shift ;;
        --some) some+=("${2:?--some needs a jq expression}"); shift ;;
        --multicast-tally) tally=1 ;;
        *) echo "mpi-job: unknown argument '$1'"; exit 2 ;;
    esac
    shift
done
[ "${1:-}" = -- ] || { echo "mpi-job: usage: mpi-job.sh [--cases REGEX] [--every JQ]... [--some JQ]... [--multicast-tally] -- MPI-TESTS-ARGUMENTS..."; exit 2; }
shift
: "${MPI_TESTS_LOGDIR:?mpi-job: MPI_TESTS_LOGDIR must name the log directory of the job}"
[ "${KEEP_LOGS:-0}" = 1 ] || { echo "mpi-job: KEEP_LOGS=1 is needed: the checks read the cases' events after ci/mpi-tests.sh"; exit 2; }

status=0
"$ROOT/ci/mpi-tests.sh" "$@" || status=$?

# every case that wrote events, with its process count (ci/mpi-tests.sh's
# own events check has made sure every rank wrote its file); those
# --cases names are checked
all_cases=() cases=() nps=()
for dir in "$MPI_TESTS_LOGDIR"/*/; do
    dir=${dir%/}
    n=$(find "$dir/events" -maxdepth 1 -name 'rank-*.jsonl' 2>/dev/null | wc -l)
    [ "$n" -gt 0 ] || continue
    all_cases+=("$dir")
    printf '%s\n' "${dir##*/}" | grep -qE -- "$only" || continue
    cases+=("$dir") nps+=("$n")
done
if [ "${#cases[@]}" = 0 ] && [ $((${#every[@]} + ${#some[@]})) -gt 0 ]; then
    echo "FAIL: no case matching '$only' wrote events in $MPI_TESTS_LOGDIR"; exit 1
fi

# All --every filters of a case in one jq run first (each jq start costs
# seconds under TCG; the pretended nodes' step has 7 filters on 3 cases):
# each filter's verdict is what `jq -e` makes of it alone, the truth of
# its last output (none, an error or a false one fails). Only when the
# conjunction fails is each filter run alone, to name the ones that fail.
held_alone() { # FILTER: jq -e's verdict on FILTER, as a boolean expression
    printf '([(%s)] | length > 0 and (last | . != null and . != false))' "$1"
}
every_at_once=
for filter in "${every[@]}"; do
    every_at_once+="${every_at_once:+ and }$(held_alone "$filter")"
done
for i in "${!cases[@]}"; do
    [ "${#every[@]}" -gt 0 ] || break
    [ "${#every[@]}" -gt 1 ] && "$ROOT/ci/served/events-hold.sh" "${cases[$i]}" "${nps[$i]}" "$every_at_once" >/dev/null && continue
    for filter in "${every[@]}"; do
        out=$("$ROOT/ci/served/events-hold.sh" "${cases[$i]}" "${nps[$i]}" "$filter") || { echo "FAIL: $out"; status=1; }
    done
done
for filter in "${some[@]}"; do
    held=0
    for i in "${!cases[@]}"; do
        "$ROOT/ci/served/events-hold.sh" "${cases[$i]}" "${nps[$i]}" "$filter" >/dev/null && { held=1; break; }
    done
    [ "$held" = 1 ] || { echo "FAIL: no case's events satisfy: $filter"; status=1; }
done
if [ "$tally" = 1 ]; then
    files=()
    for dir in "${all_cases[@]}"; do files+=("$dir"/events/rank-*.jsonl); done
    [ "${#files[@]}" -gt 0 ] || files=(/dev/null)
    jq -n -r -L "$ROOT/ci/served" 'include "checks"; [inputs] | multicast_tally
        | "multicast tally: \(.reports) rank report(s): \(.pieces_sent) piece(s) multicast, \(.retransmissions) retransmitted, \(.nacks_sent) NACK(s)"' \
        "${files[@]}" || { echo "FAIL: the events could not be tallied"; status=1; }
fi
exit "$status"
