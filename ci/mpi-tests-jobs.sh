#!/usr/bin/env bash
# ci/mpi-tests.sh's cases split over JOBS instances that run side by side
# (make test-mpi, the Open MPI 5 suite). A short case spends most of its wall
# time in mpirun's start and the ranks' setup, not on the cores (np=2
# coll_mix: 0.3 s of CPU in 1 s of wall time), so a second instance can use
# the idle time; on a machine already busy it cannot (47 cases at a load
# average of 6-10 on 2 cores: 145 s in one instance, 144 s in two). The
# Open MPI 5 suite's 165 cases: 281 s in two instances at a load of 1,
# 356 s in one (fresh-clone checks); hence auto by default.
#
# usage: ci/mpi-tests-jobs.sh [--jobs N|auto] [ci/mpi-tests.sh arguments...]
#   --jobs N  instances side by side (default $MPI_TESTS_JOBS, else auto);
#             1 runs ci/mpi-tests.sh alone; auto: 2 when the
#             machine has room (at least one core idle over 3 s), else
#             1, since the ranks of two jobs then only take turns on cores
#             already taken (their waits spin before they yield)
# --list and --build-only go straight to ci/mpi-tests.sh.
#
# Invariants:
# - every case ci/mpi-tests.sh would run with these arguments runs exactly
#   once: the names come from its own --list-deps (then the --only REGEX
#   given here), dealt by ci/mpi-tests-deal.sh, each instance given an --only
#   of exact names;
# - a case runs in the same instance as the cases its checks compare with
#   (smaller-window-than:), after them (ci/mpi-tests-deal.sh);
# - the instances get about equal shares of the seconds the cases took in
#   an earlier run (MPI_TESTS_CASE_SECONDS, default ci/mpi/case-seconds.tsv;
#   the Open MPI 5 run has its own): dealt by count, one instance of the
#   fresh-clone check took 438 s while the other ended after 318 s;
# - the programs are compiled once, before any instance starts (they would
#   race to write the same files in build/tests/);
# - each instance has its own log directory, MPI_TESTS_LOGDIR/job-K
#   (ci/mpi-tests.sh empties its log directory when it starts), and its own
#   /dev/shm leak check, which blames only segments its own ranks created;
# - each instance's lines are printed as they come, prefixed "[K/N] "; the
#   last line sums them up as ci/mpi-tests.sh does ("N passed, N failed",
#   ", N skipped" when some were skipped); the exit status is non-zero when
#   any instance failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HARNESS=$ROOT/ci/mpi-tests.sh
JOBS=${MPI_TESTS_JOBS:-auto}
ONLY=
PASS=()
while [ $# -gt 0 ]; do
    case $1 in
        --jobs) JOBS=${2:?--jobs needs a number}; shift ;;
        --only) ONLY=${2:?--only needs a regex}; shift ;;
        --list|--build-only|-h|--help) exec bash "$HARNESS" "$@" ;;
        --transport|--hosts|--nps) PASS+=("$1" "${2:?$1 needs a value}"); shift ;;
        --mca) PASS+=("$1" "${2:?--mca needs a name}" "${3:?--mca needs a value}"); shift 2 ;;
        *) PASS+=("$1") ;;
    esac
    shift
done
# The cores' busy time over the next few seconds, in cores (0 to nproc),
# from /proc/stat: what the machine does now. The load average would lag:
# the cargo stage before this one runs a thousand fabric threads, whose
# load average of 100 and more takes minutes to decay on an idle machine.
busy_cores() {  # busy_cores SECONDS
    local before after
    before=$(awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat)
    sleep "$1"
    after=$(awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit }' /proc/stat)
    awk -v b="$before" -v a="$after" -v cores="$(nproc)" 'BEGIN {
        split(b, x, " "); split(a, y, " "); busy = y[1] - x[1]; idle = y[2] - x[2]
        printf "%.2f", (busy + idle > 0) ? cores * busy / (busy + idle) : cores }'
}
if [ "$JOBS" = auto ]; then
    busy=$(busy_cores 3)
    JOBS=$(awk -v busy="$busy" -v cores="$(nproc)" 'BEGIN { print (cores >= 2 && busy <= cores - 1 ? 2 : 1) }')
    echo "== MPI tests: $busy of $(nproc) cores busy over 3 s (load average $(cut -d' ' -f1 /proc/loadavg)): $JOBS instance(s)"
fi
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "mpi-tests-jobs: --jobs takes a positive number or auto, not '$JOBS'" >&2; exit 2; }
if [ "$JOBS" = 1 ]; then
    exec bash "$HARNESS" "${PASS[@]}" ${ONLY:+--only "$ONLY"}
fi

BUILD=${MPI_TESTS_BUILD_DIR:-$ROOT/build}
LOGROOT=${MPI_TESTS_LOGDIR:-$BUILD/mpi-tests}

bash "$HARNESS" "${PASS[@]}" --build-only || exit 1
cases=$(bash "$HARNESS" "${PASS[@]}" --list-deps) || { echo "mpi-tests-jobs: ci/mpi-tests.sh --list-deps failed" >&2; exit 2; }
names=$(cut -f1 <<<"$cases")
if [ -n "$ONLY" ]; then
    names=$(grep -E -- "$ONLY" <<<"$names")
    cases=$(awk -F'\t' 'NR == FNR { kept[$0]; next } $1 in kept' <(printf '%s\n' "$names") - <<<"$cases")
fi
[ -n "$names" ] || { echo "mpi-tests-jobs: no case matches${ONLY:+ '$ONLY'}"; echo "0 passed, 0 failed"; exit 0; }
total=$(wc -l <<<"$names")
[ "$JOBS" -le "$total" ] || JOBS=$total

dealt=$(bash "$ROOT/ci/mpi-tests-deal.sh" "$JOBS" "${MPI_TESTS_CASE_SECONDS:-$ROOT/ci/mpi/case-seconds.tsv}" <<<"$cases") || exit 2
# fewer groups than instances leave the last ones empty (the dealing fills
# the lowest numbers first)
JOBS=$(cut -f1 <<<"$dealt" | sort -n | tail -n 1)
# Instance K's cases, as one anchored alternation of exact names: the
# names hold regex characters ("excluded-coll-^rdma", "version-mismatch-9.9.9")
exact_names_regex() { # K
    awk -F'\t' -v k="$1" '$1 == k { print $2 }' <<<"$dealt" |
        sed 's/[][\.^$*+?(){}|\\]/\\&/g' | paste -sd'|' | sed 's/^/^(/; s/$/)$/'
}

rm -rf "$LOGROOT"
mkdir -p "$LOGROOT"
echo "== MPI tests: $total cases in $JOBS instances side by side (logs in $LOGROOT/job-K)"
T_START=$SECONDS
pids=()
for k in $(seq 1 "$JOBS"); do
    : >"$LOGROOT/job-$k.out"
    MPI_TESTS_LOGDIR=$LOGROOT/job-$k bash "$HARNESS" "${PASS[@]}" --only "$(exact_names_regex "$k")" \
        >"$LOGROOT/job-$k.out" 2>&1 &
    pids+=($!)
    # its lines as they come; tail ends once the instance has ended
    tail -n +1 -f --pid="$!" "$LOGROOT/job-$k.out" | sed -u "s|^|[$k/$JOBS] |" &
done
# Ending this script ends the instances (each ends its own running job)
trap 'kill -TERM "${pids[@]}" 2>/dev/null; exit 130' INT TERM
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
trap - INT TERM
wait  # the tails print what is left

passed=0 failed=0 skipped=0
for k in $(seq 1 "$JOBS"); do
    last=$(tail -n 1 "$LOGROOT/job-$k.out")
    if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
        passed=$((passed + BASH_REMATCH[1])) failed=$((failed + BASH_REMATCH[2])) skipped=$((skipped + ${BASH_REMATCH[4]:-0}))
    else
        echo "mpi-tests-jobs: instance $k ended without its closing line (last: '$last')"
        failed=$((failed + 1)) status=1
    fi
done
echo "== $JOBS instances took $((SECONDS - T_START))s"
if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ "$status" = 0 ] && [ "$failed" = 0 ]
