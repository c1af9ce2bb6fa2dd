# Sourced by ci/mpi-tests.sh: the suite's closing /dev/shm leak check,
# the case selection (want, skip, --list) and run_table, which hands the
# case tables (ci/mpi/cases/*.toml) to ci/runner: every case is a table
# row, run, watched and checked by the runner (ci/runner/src/*.rs).
# Invariants: PASSED, FAILED, SKIPPED and FAILED_NAMES count every case
# for the closing line; RUN_PIDS_FILE lists every rank pid of the suite
# (the runner appends them), for the closing leak check.

PASSED=0 FAILED=0 SKIPPED=0
FAILED_NAMES=()
T_START=$(date +%s)

shm_list() { (cd /dev/shm 2>/dev/null && ls -1 2>/dev/null | grep -E "^$1" || true) | sort; }

# new entries of $2 not in $1 (both newline separated, sorted)
new_entries() { comm -13 <(printf '%s\n' "$1" | sed '/^$/d') <(printf '%s\n' "$2" | sed '/^$/d'); }

# Is /dev/shm/$1 mapped by a live process (another job's segment, not a leak)?
mapped_by_someone() { grep -qsF "/dev/shm/$1" /proc/[0-9]*/maps 2>/dev/null; }

# Was /dev/shm/$1 created by one of the processes listed (one pid a line) in
# file $2? Segment names are coll_rdma.<origin>.<creator pid>.<start>.<nonce>,
# in hex (btl-ibmc/src/shm/naming.rs). A segment another job left (a killed
# or aborted rank of a concurrent test run) is not this test's leak.
created_by() {
    local pid_hex
    pid_hex=$(printf '%s' "$1" | cut -d. -f3)
    [[ $pid_hex =~ ^[0-9a-f]+$ ]] && [ -f "$2" ] && grep -qx "$((16#$pid_hex))" "$2"
}
# Every rank pid of this run, for the final check.
RUN_PIDS_FILE=$(mktemp /tmp/mpi-tests-pids.XXXXXX)
# Open MPI's session directories, under a base of this run's own.
# Instances that run at the same time (ci/mpi-tests-jobs.sh's jobs; udp's
# two parts side by side on one bed) would otherwise share
# /tmp/ompi.HOST.UID: when one job's daemon removes it, empty, at its end,
# just as another's daemon creates it, that launch fails ("mkdir ... File
# exists", orte_init failed, no rank started; seen in CI). 4.1's daemons
# read orte_tmpdir_base, 5.0's prte_tmpdir_base; the ranks learn it from
# them. Remote daemons get it by the environment (the netns hosts' agent
# passes it on) or make it where it is missing.
SESSION_BASE=$(mktemp -d /tmp/crt-session.XXXXXX) || die "cannot make a session directory base under /tmp"
export OMPI_MCA_orte_tmpdir_base=$SESSION_BASE PRTE_MCA_prte_tmpdir_base=$SESSION_BASE
trap 'rm -f "$RUN_PIDS_FILE"; rm -rf "$SESSION_BASE"' EXIT

SHM_BEFORE_ALL=$(shm_list 'coll_rdma\.')

want() {  # want NAME: should this test run?
    # another transport or several hosts: section 1 only (the parameter
    # tests below expect shared memory on one node)
    if [ -n "$TRANSPORT$HOSTS" ] || [ "${#EXTRA_MCA[@]}" -gt 0 ]; then [[ $1 == np[0-9]*-* ]] || return 1; fi
    if [ "$LIST" = 1 ]; then say "$1"; return 1; fi
    [ -z "$ONLY" ] || printf '%s\n' "$1" | grep -Eq -- "$ONLY"
}

skip() {  # skip NAME REASON
    want "$1" || return 0
    SKIPPED=$((SKIPPED + 1))
    printf '%-44s SKIP  (%s)\n' "$1" "$2"
}

# run_table TABLE...: the cases the tables (ci/mpi/cases/*.toml) describe,
# in order, run or listed here by one run of the runner (ci/runner) with
# this suite's settings and lists, their counts added to this suite's
# (under --stock the cases that need the component say SKIP)
one_a_line() { [ $# = 0 ] || [ -z "$*" ] || printf '%s\n' "$@"; }
run_table() {
    local tables=("$@") tally args=() status=0 passed failed skipped
    [ "$LIST" = 1 ] && args+=(--list)
    [ "$MODE" = stock ] && args+=(--stock)
    tally=$(mktemp /tmp/mpi-tests-tally.XXXXXX)
    run_runner --tally "$tally" "${args[@]}" "${tables[@]}" || status=$?
    if [ "$status" -gt 1 ] || ! read -r passed failed skipped <"$tally"; then
        rm -f "$tally"
        die "the case runner failed on ${tables[*]#"$ROOT"/} (status $status)"
    fi
    PASSED=$((PASSED + passed)) FAILED=$((FAILED + failed)) SKIPPED=$((SKIPPED + skipped))
    # (the last name has no newline after it)
    while IFS= read -r name || [ -n "$name" ]; do [ -z "$name" ] || FAILED_NAMES+=("$name"); done < <(tail -n +2 "$tally")
    rm -f "$tally"
}

# skip_tables REASON TABLE...: every case of the tables said skipped for
# REASON (a suite's section that cannot run in this mode), named by the
# runner as --list names them
skip_tables() {
    local reason=$1 name names
    shift
    names=$(LIST=0 LIST_DEPS=0 run_runner --list "$@") || die "the case runner could not list ${*#"$ROOT"/}"
    while IFS= read -r name; do [ -z "$name" ] || skip "$name" "$reason"; done <<<"$names"
}

# run_runner ARG...: the runner with this suite's settings, lists and case
# selection, then ARG...
run_runner() {
    local args=()
    [ "$LIST_DEPS" = 1 ] && args+=(--list-deps)
    [ -n "$ONLY" ] && args+=(--only "$ONLY")
    if [ -n "$TRANSPORT$HOSTS" ] || [ "${#EXTRA_MCA[@]}" -gt 0 ]; then args+=(--section1-only); fi
    [ -n "$TRANSPORT" ] && args+=(--transport "$TRANSPORT")
    [ -n "$HOSTS" ] && args+=(--hosts "$HOSTS")
    [ "$KEEP_LOGS" = 1 ] && args+=(--keep-logs)
    # the suite's lists and values the tables splice (@NAME), one item a line
    local name lists=(--list-var V "$(one_a_line "${V[@]}")" --list-var SERVED "$(one_a_line "${SERVED[@]}")"
        --list-var SERVED_CHECK "$(one_a_line "${SERVED_CHECK:-}")"
        --list-var RO "$(one_a_line "${RO[@]}")" --list-var RO_PARAM "$(one_a_line "${RO_PARAM[@]}")"
        --list-var BC_PARAM "$(one_a_line "${BC_PARAM[@]}")" --list-var BC_E "$(one_a_line "${BC_E[@]}")"
        --list-var BC_REASON "$(one_a_line "${BC_REASON:-}")" --list-var BC_PATHS "$(one_a_line "${BC_PATHS:-}")"
        --list-var BC "$(one_a_line "${BC[@]}")" --list-var CM_I "$CM_I" --list-var BO_N "$BO_N" --list-var CL_L "$CL_L"
        --list-var NPS "$(one_a_line $NPS)" --list-var THREAD_NPS "$(one_a_line "${THREAD_NPS[@]}")"
        --list-var UDP_PROTECTED "$(one_a_line "${UDP_PROTECTED[@]}")" --var TM_OVER "$TM_OVER"
        --list-var NB_R "$NB_R" --list-var NR_R "$NR_R" --list-var NF_R "$NF_R" --list-var NBC_R "$NBC_R"
        --var COMPONENT_SO "$COMPDIR/mca_coll_rdma.so" --var EXPECT_TRANSPORT_HERE "${EXPECT_TRANSPORT:-${TRANSPORT:-shm}}"
        --list-var HAN "$(one_a_line "${HAN[@]}")" --list-var HAN_VERBOSE "$(one_a_line "${HAN_VERBOSE[@]}")"
        --var OMPI_VERSION_RE "${OMPI_VERSION//./\\.}" --var OUTSIDE_ADDRESS "$OUTSIDE_ADDRESS"
        --var OUTSIDE_ADDRESS_RE "${OUTSIDE_ADDRESS//./\\.}" --var OUTSIDE_ADDRESS_JQ "${OUTSIDE_ADDRESS//./\\\\.}"
        --var NO_DEVICE_WHY "$NO_DEVICE_WHY" --var NO_DEVICE_ACROSS_WHY "$NO_DEVICE_ACROSS_WHY")
    "$MPI_RUNNER" --root "$ROOT" --bin "$BIN" --logdir "$LOGROOT" --ompi-major "$OMPI_MAJOR" \
        --component-path "$COMPONENT_PATH" --timeout "$TIMEOUT" --timeout-max-factor "$TIMEOUT_MAX_FACTOR" \
        --pids-file "$RUN_PIDS_FILE" --no-summary "${lists[@]}" "${args[@]}" "$@"
}
