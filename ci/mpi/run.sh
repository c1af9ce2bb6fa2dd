# Sourced by ci/mpi-tests.sh: the runner of one case (run_test), its
# checks, the /dev/shm leak check, and the case selection (want, skip,
# --list); run_table hands a case table (ci/mpi/cases/*.toml) to
# ci/runner, which runs its cases alike. run_test is left for the one case
# that is not a table row, the killed creator of ci/mpi/special.sh, with
# only the two checks it uses (events, gone:); every other check and
# wrapper is the runner's alone (ci/runner/src/checks.rs, table.rs).
# Invariants: a case leaves nothing of its own in /dev/shm (or fails
# saying what it left); CHECKS applies to the next run_test only (it
# empties it, run or not); PASSED, FAILED, SKIPPED and FAILED_NAMES count
# every case for the closing line.

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
trap 'rm -f "$RUN_PIDS_FILE"' EXIT

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

# run_test NAME NP EXPECT [mpirun options...] -- PROGRAM [ARGS...]
#   EXPECT: "ok" (program must pass), "fail" (checker self-test: the program
#           must report failures) or "refused" (Open MPI must refuse the job:
#           non-zero exit, no crash)
#   Further checks are listed in the array CHECKS (set by the caller):
#     events    the counts at free in coll rdma's events
#               (coll_rdma_events_file, docs/events.md) match the program's
#               expect lines per communicator and collective, nothing handed
#               over but what the program expects (ci/events-check.sh); the
#               run gets --mca coll_rdma_events_file DIR/events/rank-%r.jsonl
#     gone:NAME /dev/shm/NAME no longer exists after the run
CHECKS=()
run_test() {
    local name=$1 np=$2 expect=$3
    shift 3
    local opts=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    local prog=$1
    shift
    want "$name" || { CHECKS=(); return 0; }  # (the next test must not inherit them)

    local dir=$LOGROOT/$name
    rm -rf "$dir"
    mkdir -p "$dir"
    local c
    for c in "${CHECKS[@]}"; do
        case $c in
            events)
                mkdir -p "$dir/events"
                opts+=(--mca coll_rdma_events_file "$dir/events/rank-%r.jsonl")
                break ;;
        esac
    done
    local over=()
    [ "$np" -gt 2 ] && over=(--oversubscribe)
    local shm_before crt_before
    shm_before=$(shm_list 'coll_rdma\.')
    crt_before=$(shm_list 'crtest\.')
    local placement=(--mca btl self,vader)
    [ -n "$HOSTS" ] && placement=(--host "$HOSTS" --map-by node --mca btl self,vader,tcp)
    local CAPTURE_OPTS CAPTURE_WRAPPER
    capture_output "$dir/out"
    local run_id
    run_id=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
    local cmd=(mpirun -np "$np" "${over[@]}" "${placement[@]}"
        "${COMPONENT_PATH_OPTS[@]}" "${CAPTURE_OPTS[@]}" -x "CRTEST_RUN=$run_id"
        "${opts[@]}" "${CAPTURE_WRAPPER[@]}" "${COMPONENT_PATH_ENV[@]}"
        "$ROOT/ci/record-pid.sh" "$dir/pids" "$BIN/$prog" "$@")
    printf '%s\n' "${cmd[*]}" > "$dir/command"
    local t0 t1 rc=0
    t0=$(date +%s.%N)
    local run_limit
    run_limit=$(load_scaled_timeout)
    # timeout's own limit, later than the watcher's, is the backstop; a
    # watcher whose sleep was cut short (the job ended) does nothing
    timeout -k 10 "$((run_limit + 600))" "${cmd[@]}" </dev/null >"$dir/mpirun.log" 2>&1 &
    local job=$!
    (set +e; watch_job "$dir" "$run_id" "$job" "$run_limit" "$np") </dev/null >/dev/null 2>&1 &
    local watcher=$!
    wait "$job" || rc=$?
    pkill -P "$watcher" 2>/dev/null || true
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
    [ -e "$dir/timed-out" ] && rc=124
    # the launcher was ended after its ranks: their own statuses stand for
    # its (the first non-zero one; a rank it had reaped already counts as 0)
    local launcher_note=
    if [ -e "$dir/launcher-outlived-ranks" ]; then
        rc=$(awk '$2 != "reaped" && $2 != 0 { print $2; exit }' "$dir/launcher-outlived-ranks")
        rc=${rc:-0}
        launcher_note="mpirun was still there ${LAUNCHER_GRACE}s after every rank had exited (rank statuses: $(awk '{ printf "%s%s", sep, $2; sep = " " }' "$dir/launcher-outlived-ranks")); ended, the run judged on its ranks (what it was doing: ${dir#"$ROOT"/}/hung.txt)"
    fi
    t1=$(date +%s.%N)
    local secs
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')

    local why=()
    # all output, one file per rank: stdout then stderr
    local ranks=()
    local f
    for f in "$dir"/out/*/rank.*; do [ -d "$f" ] && ranks+=("$f"); done
    cat "$dir/mpirun.log" "$dir"/out/*/rank.*/std* 2>/dev/null > "$dir/all.log" || true

    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        why+=("timed out after ${run_limit}s (load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; what its processes were doing: ${dir#"$ROOT"/}/hung.txt)")
    fi
    if [ "$expect" = ok ]; then
        [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ "$rc" = 137 ] || why+=("mpirun exited with status $rc")
        # mpirun's own reason when it could not start a rank at all (its
        # status is then 132, which looks like a SIGILL but is none)
        grep -q 'unable to launch the specified application' "$dir/mpirun.log" 2>/dev/null &&
            why+=("mpirun could not start the program: $(grep -A6 'unable to launch' "$dir/mpirun.log" | grep -E 'Executable:|Node:' | tr -s ' ' | paste -sd ' ')")
        [ "${#ranks[@]}" = "$np" ] || why+=("output of ${#ranks[@]} rank(s) found, expected $np")
        local bad
        bad=$(grep -h '^FAIL:' "$dir"/out/*/rank.*/stdout 2>/dev/null | head -5 || true)
        [ -z "$bad" ] || why+=("program reported failures:"$'\n'"$bad")
        local okranks
        okranks=$(cat "$dir"/out/*/rank.*/stdout 2>/dev/null | grep -c '^result: rank [0-9]* failures 0 ' || true)
        [ "$okranks" = "$np" ] || why+=("$okranks of $np rank(s) printed a clean result line")
    elif [ "$expect" = refused ]; then
        [ "$rc" != 0 ] || why+=("the job ran although it should have been refused")
        grep -Eq 'Segmentation fault|Signal: |Signal code' "$dir/all.log" &&
            why+=("a process crashed instead of failing cleanly:"$'\n'"$(grep -E -m 8 'Signal|\[ *[0-9]+\]' "$dir/all.log")")
    else
        [ "$rc" != 0 ] || why+=("the program passed although its self-test broke it (skipped barriers, corrupted bytes)")
        grep -q '^FAIL:' "$dir"/out/*/rank.*/stdout 2>/dev/null ||
            why+=("no FAIL line although the self-test broke the program (skipped barriers, corrupted bytes)")
    fi

    local c
    for c in "${CHECKS[@]}"; do
        case $c in
            events)
                local out
                out=$(EXPECT_TRANSPORT="${EXPECT_TRANSPORT:-${TRANSPORT:-shm}}" "$ROOT/ci/events-check.sh" "$dir" "$np" 2>&1) ||
                    why+=("${out:-ci/events-check.sh failed without a word}") ;;
            gone:*)
                local g=${c#gone:}
                if [ -e "/dev/shm/$g" ]; then
                    why+=("/dev/shm/$g is still there")
                    rm -f "/dev/shm/$g"
                fi ;;
            *) why+=("run_test knows no check '$c' (the case tables' checks are ci/runner's)") ;;
        esac
    done

    # leftovers in /dev/shm: segments this run's ranks created and left
    local leaked=() e
    [ -f "$dir/pids" ] && cat "$dir/pids" >>"$RUN_PIDS_FILE"
    while IFS= read -r e; do
        [ -n "$e" ] || continue
        mapped_by_someone "$e" && continue
        created_by "$e" "$dir/pids" || continue
        leaked+=("$e")
    done < <(new_entries "$shm_before" "$(shm_list 'coll_rdma\.')")
    [ "${#leaked[@]}" = 0 ] || why+=("left in /dev/shm: ${leaked[*]}")
    for e in "${leaked[@]}"; do rm -f "/dev/shm/$e"; done
    while IFS= read -r e; do
        [ -n "$e" ] && ! mapped_by_someone "$e" && rm -f "/dev/shm/$e"
    done < <(new_entries "$crt_before" "$(shm_list 'crtest\.')")

    if [ "${#why[@]}" = 0 ]; then
        PASSED=$((PASSED + 1))
        printf '%-44s PASS  %6ss\n' "$name" "$secs"
        [ -z "$launcher_note" ] || printf '      note: %s\n' "$launcher_note"
        [ "$KEEP_LOGS" = 1 ] || [ -n "$launcher_note" ] || rm -rf "$dir"
    else
        FAILED=$((FAILED + 1))
        FAILED_NAMES+=("$name")
        printf '%-44s FAIL  %6ss  (logs: %s)\n' "$name" "$secs" "${dir#"$ROOT"/}"
        [ -z "$launcher_note" ] || why+=("note: $launcher_note")
        local w
        for w in "${why[@]}"; do printf '%s\n' "$w" | sed 's/^/      /'; done
        printf '      command: %s\n' "$(cat "$dir/command")"
    fi
    CHECKS=()
}

# run_table TABLE...: the cases the tables (ci/mpi/cases/*.toml) describe,
# in order, run or listed here by one run of the runner (ci/runner) with
# this suite's settings and lists, their counts added to this suite's
one_a_line() { [ $# = 0 ] || [ -z "$*" ] || printf '%s\n' "$@"; }
run_table() {
    local tables=("$@") tally args=() status=0 passed failed skipped
    [ "$LIST" = 1 ] && args+=(--list)
    [ "$LIST_DEPS" = 1 ] && args+=(--list-deps)
    [ "$MODE" = stock ] && args+=(--stock)
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
    tally=$(mktemp /tmp/mpi-tests-tally.XXXXXX)
    "$MPI_RUNNER" --root "$ROOT" --bin "$BIN" --logdir "$LOGROOT" --ompi-major "$OMPI_MAJOR" \
        --component-path "$COMPONENT_PATH" --timeout "$TIMEOUT" --timeout-max-factor "$TIMEOUT_MAX_FACTOR" \
        --pids-file "$RUN_PIDS_FILE" --tally "$tally" --no-summary \
        "${lists[@]}" "${args[@]}" "${tables[@]}" || status=$?
    if [ "$status" -gt 1 ] || ! read -r passed failed skipped <"$tally"; then
        rm -f "$tally"
        die "the case runner failed on ${tables[*]#"$ROOT"/} (status $status)"
    fi
    PASSED=$((PASSED + passed)) FAILED=$((FAILED + failed)) SKIPPED=$((SKIPPED + skipped))
    # (the last name has no newline after it)
    while IFS= read -r name || [ -n "$name" ]; do [ -z "$name" ] || FAILED_NAMES+=("$name"); done < <(tail -n +2 "$tally")
    rm -f "$tally"
}
