# shellcheck shell=bash
# Sourced by ci/rxe/guests.sh: `session start|exec|alive|stop`.
# One boot of the guests for many commands: 'session start' boots them with
# ci/rxe/serve.sh as every guest's COMMAND and prints the run directory, which
# names the session; 'session exec' posts a job there and waits for it
# (the job runs in guest 0, in every guest with --all, in guest I with
# --guest I); 'session stop' lets the guests power off. Each guest runs its
# jobs one after another in posting order; jobs for different guests, posted
# by 'session exec' calls running side by side, run side by side. The run
# directory is unique per session (mktemp) and holds its sockets, so sessions
# and runs of several worktrees or users never meet.

session_start() {
    local n=2 timeout=14400
    while [ $# -gt 0 ]; do
        case $1 in
            --guests) n=$2; shift 2 ;;
            --timeout) timeout=$2; shift 2 ;;
            *) echo "rxe: unknown option $1" >&2; usage ;;
        esac
    done
    prepare
    local dir pid ready i
    dir=$(new_run_dir)
    RXE_RUN_DIR=$dir setsid "$HERE/guests.sh" run --guests "$n" --timeout "$timeout" -- \
        /bin/sh "$HERE/serve.sh" >"$dir/session.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$dir/session.pid"
    # run's own boot timeout (and its one retry) bounds this wait.
    while :; do
        ready=0
        for ((i = 0; i < n; i++)); do [ -e "$dir/ready.$i" ] && ready=$((ready + 1)); done
        [ "$ready" -lt "$n" ] || break
        if ! alive "$pid"; then
            sed 's/^/  session: /' "$dir/session.log" | tail -20 >&2
            die "the guests of the session did not boot (log: $dir/session.log)"
        fi
        sleep 0.3
    done
    say "session of $n guest(s) ready: $dir"
    echo "$dir"
}

session_dir_check() {
    [ -f "$1/session.pid" ] && [ -f "$1/config" ] || die "no session in '$1' (give the directory 'session start' printed)"
}

session_exec() {
    local dir=${1:-} where=0 timeout=600
    shift || true
    session_dir_check "$dir"
    while [ $# -gt 0 ]; do
        case $1 in
            --all) where=all; shift ;;
            --guest) where=$2; shift 2 ;;
            --timeout) timeout=$2; shift 2 ;;
            --) shift; break ;;
            *) echo "rxe: unknown option $1" >&2; usage ;;
        esac
    done
    [ $# -gt 0 ] || usage
    [[ $timeout =~ ^[0-9]+$ ]] || die "--timeout must be a number of seconds"
    local pid n k a i
    pid=$(cat "$dir/session.pid")
    n=$(sed -n 's/^RXE_N=//p' "$dir/config")
    [ "$where" = all ] || { [[ $where =~ ^[0-9]+$ ]] && [ "$where" -lt "$n" ]; } ||
        die "--guest must be a guest of the session, 0 to $((n - 1)), not '$where'"
    # Jobs are numbered in posting order, one poster at a time; the lock is
    # let go once the job is posted, so that a job for another guest can be
    # posted while this one runs (each guest still runs its jobs in order).
    exec 8>"$dir/.exec.lock"
    flock 8
    k=$(( $(cat "$dir/job-count" 2>/dev/null || echo 0) + 1 ))
    echo "$k" >"$dir/job-count"
    echo "$where" >"$dir/job.$k.where"
    {
        printf 'exec'
        for a in "$@"; do printf ' %s' "$(shq "$a")"; done
        printf '\n'
    } >"$dir/job.$k.tmp"
    mv "$dir/job.$k.tmp" "$dir/job.$k"
    exec 8>&-
    local guests=("$where")
    [ "$where" = all ] && guests=($(seq 0 $((n - 1))))

    local spent_ms=0 last_ms now_ms done_count status=0 gone=0 cancelled=0 cancel_wait=0
    last_ms=$(date +%s%3N)
    while :; do
        done_count=0
        for i in "${guests[@]}"; do [ -e "$dir/job-rc.$k.$i" ] && done_count=$((done_count + 1)); done
        [ "$done_count" -lt "${#guests[@]}" ] || break
        if ! alive "$pid"; then gone=1; break; fi
        now_ms=$(date +%s%3N)
        spent_ms=$(spent_after "$spent_ms" $((now_ms - last_ms)))
        last_ms=$now_ms
        if [ $cancelled = 0 ] && [ "$spent_ms" -ge $((timeout * 1000)) ]; then
            cancelled=1
            : >"$dir/job-cancel.$k"
        fi
        # serve.sh kills a cancelled job within seconds; a guest that does
        # not is stuck, and so is the session
        if [ $cancelled = 1 ]; then
            cancel_wait=$((cancel_wait + 1))
            [ $cancel_wait -lt 120 ] || { gone=1; break; }
        fi
        sleep 0.5
    done
    local rc
    for i in "${guests[@]}"; do
        sed "s/^/[g$i] /" "$dir/job-out.$k.$i" 2>/dev/null || true
        rc=$(cat "$dir/job-rc.$k.$i" 2>/dev/null || true)
        if [ "$rc" = 0 ]; then continue; fi
        status=1
        if [ $cancelled = 1 ]; then
            echo "[g$i] *** TIMEOUT: killed after ${timeout}s (spent at the rate of the host's load per core)"
        elif [ -n "$rc" ]; then
            echo "[g$i] *** COMMAND exited with status $rc"
        fi
    done
    if [ $gone = 1 ]; then
        echo "rxe: *** the session's guests stopped during job $k; last lines of its log:"
        tail -n 15 "$dir/session.log" | sed 's/^/rxe: | /'
        for ((i = 0; i < n; i++)); do
            tr -d '\r' <"$dir/g$i.log" 2>/dev/null | { grep -avE "$NOISE" || true; } | tail -n 5 | sed "s/^/[g$i] | /"
        done
        status=1
    fi
    return $status
}

session_alive() {
    session_dir_check "${1:-}"
    alive "$(cat "$1/session.pid")"
}

session_stop() {
    local dir=${1:-} pid t
    session_dir_check "$dir"
    pid=$(cat "$dir/session.pid")
    : >"$dir/stop"
    for t in $(seq 120); do alive "$pid" || break; sleep 0.5; done
    # run's own cleanup stops the guests
    if alive "$pid"; then kill "$pid" 2>/dev/null || true; sleep 1; fi
    tail -n 1 "$dir/session.log" >&2
}

session() {
    case ${1:-} in
        start) shift; session_start "$@" ;;
        exec) shift; session_exec "$@" ;;
        alive) shift; session_alive "$@" ;;
        stop) shift; session_stop "$@" ;;
        *) usage ;;
    esac
}
