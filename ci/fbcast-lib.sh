# Helpers of fbcast's MPI tests (sourced by ci/fbcast-tests.sh, one
# machine, and ci/fbcast-netns-tests.sh, network-namespace hosts).
# The caller sets: TEST (the test's name), TDIR (its directory), KEEP (1:
# keep passing tests' files), BASE_TIMEOUT (seconds per mpirun on an idle
# machine), MODE (rdma or stock), MOUNTS (an array), and for run():
# MPI_OPTS, ALL_STATUSES, RANK_ENV, RANK_EXIT (see mode_options in
# ci/fbcast-tests.sh) and PLACEMENT (more mpirun options that place the
# ranks, e.g. --host H1,H2 --map-by node; default none: all here) and
# LAUNCHER (a command that runs mpirun, e.g. ci/netns/enter.sh HOST;
# default none);
# SERVED_TRANSPORT is the transport served_check expects (default shm).

say() { printf '%s\n' "$*"; }
PASSED=0 FAILED=0 SKIPPED=0
# a passing test's files go at once (unless --keep or HOLD_TDIR=1: the next test uses them)
pass() {
    say "PASS $TEST${1:+ ($1)}"; PASSED=$((PASSED + 1))
    [ "$KEEP" = 1 ] || [ "${HOLD_TDIR:-0}" = 1 ] || [ -z "${TDIR:-}" ] || rm -rf "$TDIR"
}
fail() { say "FAIL $TEST: $*"; FAILED=$((FAILED + 1)); [ -f "${LOG:-}" ] && sed 's/^/    | /' "$LOG" | grep -v 'coll:rdma: comm\|also opened' | tail -15; }
skip() { say "SKIPPED $TEST: $*"; SKIPPED=$((SKIPPED + 1)); }

# each mpirun gets BASE_TIMEOUT times the load per core (1..6)
scaled_timeout() {
    local cores load
    cores=$(nproc)
    load=$(cut -d' ' -f1 /proc/loadavg)
    awk -v b="$BASE_TIMEOUT" -v l="$load" -v c="$cores" 'BEGIN { f = l / c; if (f < 1) f = 1; if (f > 6) f = 6; printf "%d", b * f }'
}

# (kept when the caller set them before sourcing this)
PLACEMENT=(${PLACEMENT[@]+"${PLACEMENT[@]}"})
LAUNCHER=(${LAUNCHER[@]+"${LAUNCHER[@]}"})

# run NP PROGRAM ARGS...: mpirun under a timeout; each rank's exit status
# goes to $CODES/code.<rank>, coll rdma's events (docs/events.md) to
# $TDIR/events/rank-<rank>.jsonl; sets RC (mpirun's status, 124 = timed
# out), SECS, LOG
CODES=
run() {
    local np=$1; shift
    CODES=$TDIR/codes
    mkdir -p "$CODES"
    # afresh for each run: coll rdma never writes into a file that exists
    # (none asked for in stock mode, which runs without the component)
    local events=()
    rm -rf "$TDIR/events"
    if [ "$MODE" != stock ]; then
        mkdir -p "$TDIR/events"
        events=(--mca coll_rdma_events_file "$TDIR/events/rank-%r.jsonl")
    fi
    LOG=$TDIR/mpirun.log
    local t0=$SECONDS limit
    limit=$(scaled_timeout)
    timeout -k 10 "$limit" "${LAUNCHER[@]}" mpirun -np "$np" --oversubscribe "${PLACEMENT[@]}" "${MPI_OPTS[@]}" "${ALL_STATUSES[@]}" \
        "${events[@]}" "${RANK_ENV[@]}" \
        bash -c '"$@"; rc=$?; echo $rc > "'"$CODES"'/code.${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-x}}"; '"$RANK_EXIT" fbcast-rank "$@" \
        </dev/null >"$LOG" 2>&1
    RC=$?
    SECS=$((SECONDS - t0))
}

# all_codes NP WANT: every rank exited with WANT (else WHY says which)
all_codes() {
    local np=$1 want=$2 r got
    WHY=
    for ((r = 0; r < np; r++)); do
        got=$(cat "$CODES/code.$r" 2>/dev/null || echo missing)
        [ "$got" = "$want" ] || WHY+="rank $r exited with $got, expected $want; "
    done
    [ -z "$WHY" ]
}

# temps DIR...: our temporaries left anywhere below the directories
temps() { find "$@" -name '.*.fbcast-*' 2>/dev/null; }

# served_check NP MIN: in rdma mode, every rank counted at least MIN bcasts
# served over SERVED_TRANSPORT on MPI_COMM_WORLD and none handed over (its
# comm_freed event)
served_check() {
    local np=$1 min=$2 r n tr=${SERVED_TRANSPORT:-shm}
    [ "$MODE" = rdma ] || return 0
    WHY=
    for ((r = 0; r < np; r++)); do
        n=$(jq -r --arg tr "$tr" 'select(.event == "comm_freed" and .cid == 0 and .transport == $tr
            and .calls.bcast.handed_over == 0) | .calls.bcast.served' "$TDIR/events/rank-$r.jsonl" 2>/dev/null | head -1)
        if [ -z "$n" ]; then WHY+="rank $r: no comm_freed event of MPI_COMM_WORLD over $tr with no bcast handed over in $TDIR/events; "
        elif [ "$n" -lt "$min" ]; then WHY+="rank $r: coll rdma served $n bcasts, expected at least $min; "; fi
    done
    [ -z "$WHY" ]
}

# temp_offset PIDFILE: the file offset of that process's open temporary
temp_offset() {
    local pid fd
    pid=$(cat "$1" 2>/dev/null) || return 0
    for fd in /proc/"$pid"/fd/*; do
        case $(readlink "$fd" 2>/dev/null) in
            *.fbcast-*) awk '/^pos:/ {print $2}' "/proc/$pid/fdinfo/${fd##*/}" 2>/dev/null; return 0 ;;
        esac
    done
}

# make_inputs: the source files in $WORK: BIG (64 MiB, its sha256 in
# BIG_SUM), SMALL (4 MiB, where the size is not the point) and, for the tests
# that act during a transfer, HUGE: HUGE_BYTES = 64 MiB (8 MiB of data, the
# rest a hole) sent in 4 KiB chunks, 16384 broadcasts, long enough to interrupt
make_inputs() {
    BIG=$WORK/big.bin
    head -c $((64 << 20)) /dev/urandom >"$BIG" || die "cannot write $BIG"
    BIG_SUM=$(sha256sum <"$BIG" | cut -d' ' -f1)
    SMALL=$WORK/small.bin
    head -c $((4 << 20)) /dev/urandom >"$SMALL" || die "cannot write $SMALL"
    HUGE=$WORK/huge.bin
    HUGE_BYTES=$((64 << 20))
    head -c $((8 << 20)) /dev/urandom >"$HUGE" && truncate -s "$HUGE_BYTES" "$HUGE" || die "cannot write $HUGE"
}

# kill_mid_transfer JOB VICTIM: while the mpirun JOB runs, waits until rank
# 1 has written more than 64 KiB of its temporary, then SIGKILLs rank VICTIM
# (each rank's pid in $TDIR/pids/<rank>); sets killed (yes, or empty when
# the job ended first) and written (rank 1's offset then)
kill_mid_transfer() {
    local job=$1 victim=$2
    killed= written=
    while kill -0 "$job" 2>/dev/null; do # (bounded by the job's timeout)
        written=$(temp_offset "$TDIR/pids/1")
        if [ "${written:-0}" -gt $((64 << 10)) ] && [ -f "$TDIR/pids/$victim" ]; then
            kill -9 "$(cat "$TDIR/pids/$victim")" && killed=yes
            break
        fi
        sleep 0.05
    done
}

# a read-only directory even for root: a read-only tmpfs, else chattr +i
make_read_only() {
    if mount -t tmpfs -o ro,size=1m fbcast-test-ro "$1" 2>/dev/null; then MOUNTS+=("$1"); return 0; fi
    if [ "$(id -u)" != 0 ]; then chmod 555 "$1"; MOUNTS+=("$1"); return 0; fi
    chattr +i "$1" 2>/dev/null && { MOUNTS+=("$1"); return 0; }
    return 1
}
undo_mount() { umount "$1" 2>/dev/null || chattr -i "$1" 2>/dev/null || chmod 755 "$1"; }
