# Sourced by ci/mpi-tests.sh: how long a run may take and what ends it.
# Invariant: every mpirun ends, whatever its ranks do: the watcher ends a
# run at its load-scaled limit (recording what it was doing first) and a
# launcher that outlives its ranks; timeout(1), later, is the backstop.
# Reads TIMEOUT, TIMEOUT_MAX_FACTOR, HOST_LOADAVG_FILE, HOST_CORES.

# TIMEOUT scaled by the load per core now (see TEST_TIMEOUT above): the
# tests' sizes are fixed, and on a machine running other work beside them a
# correct run takes longer in proportion.
# Inside a Soft-RoCE guest the host's load slows the run without showing in
# the guest's own load average; ci/rxe/guests.sh mirrors the host's
# /proc/loadavg into HOST_LOADAVG_FILE, and the larger load per core counts.
load_scaled_timeout() {
    local host=${HOST_LOADAVG_FILE:-}
    [ -n "$host" ] && [ -r "$host" ] || host=/dev/null
    awk -v base="$TIMEOUT" -v cores="$(nproc)" -v host_cores="${HOST_CORES:-1}" -v most="$TIMEOUT_MAX_FACTOR" '
        FNR == 1 { l = $1 / (FILENAME == "/proc/loadavg" ? cores : host_cores); if (l > f) f = l }
        END { if (f < 1) f = 1; if (f > most) f = most; printf "%d\n", base * f + 0.5 }' /proc/loadavg "$host"
}

# KiB of memory a job may still take: the kernel's estimate of available
# memory, or less where a cgroup (v2 or v1) limits this one; 0 if unknown.
free_memory_kib() {
    local free limit used
    free=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo 2>/dev/null)
    free=${free:-0}
    if [ -r /sys/fs/cgroup/memory.max ]; then
        limit=$(cat /sys/fs/cgroup/memory.max) used=$(cat /sys/fs/cgroup/memory.current 2>/dev/null || echo 0)
    elif [ -r /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
        limit=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)
        used=$(cat /sys/fs/cgroup/memory/memory.usage_in_bytes 2>/dev/null || echo 0)
    fi
    if [[ ${limit:-max} =~ ^[0-9]+$ ]] && [ $(((limit - used) / 1024)) -lt "$free" ]; then
        free=$(((limit - used) / 1024))
    fi
    echo "$free"
}

# What a job that outlived its time limit (or, with WHY, a launcher that
# outlived its ranks) was doing, into DIR/hung.txt:
# each of its processes (the launcher, found by the run id RUN on its
# command line, its daemons, and the ranks listed in DIR/pids that run here
# with that run id) with its state and kernel wait channel, its threads'
# states and its kernel stack; then, where gdb is installed, every thread's
# user stack, ranks first (they are what a hang report is about, and the
# job is ended after this). Taken before the job is ended: a hang that
# shows only at the end (all ranks printed their results, the launcher does
# not exit) leaves nothing to read afterwards.
record_hung_job() {  # record_hung_job DIR RUN [WHY]
    local dir=$1 run=$2 why=${3:-the job outlived its limit} out=$1/hung.txt
    local -A seen=()
    local launchers=() ranks=() queue=() order=() p
    read -ra launchers <<<"$(pgrep -f -- "CRTEST_RUN=$run" | tr '\n' ' ')"
    if [ -f "$dir/pids" ]; then
        # with --hosts the file lists the other machines' ranks too
        for p in $(cat "$dir/pids"); do
            tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "CRTEST_RUN=$run" && ranks+=("$p")
        done
    fi
    local family
    family=$(ps -e -o pid=,ppid=)
    queue=("${ranks[@]}" "${launchers[@]}")
    while [ "${#queue[@]}" -gt 0 ]; do
        p=${queue[0]}; queue=("${queue[@]:1}")
        [ -n "$p" ] && [ -z "${seen[$p]:-}" ] && [ -d "/proc/$p" ] || continue
        # the job's own `timeout` says nothing about the job
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = timeout ] && { seen[$p]=skip; continue; }
        seen[$p]=1
        order+=("$p")
        read -ra children <<<"$(awk -v parent="$p" '$2 == parent { printf "%s ", $1 }' <<<"$family")"
        queue+=("${children[@]}")
    done
    {
        echo "== $(date -u +%FT%TZ): $why; load average $(cut -d' ' -f1-3 /proc/loadavg)"
        for p in "${order[@]}"; do
            echo "== pid $p"
            ps -o pid=,ppid=,stat=,wchan:32=,etime=,time=,args= -p "$p" 2>/dev/null
            local t
            for t in /proc/"$p"/task/*; do
                [ -r "$t/stat" ] && echo "   thread ${t##*/}: state $(awk '{print $3}' "$t/stat" 2>/dev/null), waits in $(cat "$t/wchan" 2>/dev/null)"
            done
            echo "-- kernel stack"
            cat "/proc/$p/stack" 2>/dev/null || echo "(not readable)"
        done
        if command -v gdb >/dev/null; then
            for p in "${order[@]}"; do
                echo "== pid $p: user stacks (gdb), main thread first"
                timeout -k 5 20 gdb -q -batch -p "$p" -ex 'thread apply all -ascending bt' 2>&1 |
                    grep -vE '^\[(New LWP|Thread debugging|Inferior)' | head -150
            done
        fi
    } >"$out" 2>&1
}

# Exit statuses of a job's ranks once none is running any more: one line
# "PID STATUS" per rank still waiting to be reaped (STATUS as a shell reports
# it: the exit code, or 128 + the signal), "PID reaped" for one already
# reaped; nothing and status 1 while a rank runs or NP pids are not yet in
# PIDS_FILE. Only for ranks on this machine (no --hosts).
exited_ranks() {  # exited_ranks PIDS_FILE NP
    local pids=() p stat state
    [ -f "$1" ] && read -ra pids <<<"$(tr '\n' ' ' <"$1")"
    [ "${#pids[@]}" -ge "$2" ] || return 1
    local lines=()
    for p in "${pids[@]}"; do
        if ! stat=$(cat "/proc/$p/stat" 2>/dev/null); then lines+=("$p reaped"); continue; fi
        # fields after the command name, which may hold spaces: state is
        # the 3rd field of the line, exit_code (waitpid's form) the 52nd
        stat=${stat##*) }
        read -ra fields <<<"$stat"
        state=${fields[0]}
        [ "$state" = Z ] || [ "$state" = X ] || return 1
        local code=${fields[49]:-0}
        if [ $((code & 127)) = 0 ]; then lines+=("$p $((code >> 8))"); else lines+=("$p $((128 + (code & 127)))"); fi
    done
    printf '%s\n' "${lines[@]}"
}

# Watches a running test job (JOB: the pid of its `timeout`): at LIMIT
# seconds it marks the run as timed out, records what the job is doing and
# ends it. Open MPI 5's launcher sometimes never exits after ranks ended
# with a non-zero status (prterun stuck on a lock of its own, the ranks
# left as its zombies; seen in the checker self-tests, whose ranks fail on
# purpose): when every rank has exited and the launcher is still there
# LAUNCHER_GRACE seconds later, the watcher records the ranks' statuses in
# DIR/launcher-outlived-ranks, records the job as for a time-out and ends
# the launcher, and the run is judged on what its ranks did.
LAUNCHER_GRACE=${TEST_LAUNCHER_GRACE:-20}
watch_job() {  # watch_job DIR RUN_ID JOB LIMIT NP
    local dir=$1 run=$2 job=$3 limit=$4 np=$5 statuses
    local start=$SECONDS exited_since=
    while [ $((SECONDS - start)) -lt "$limit" ]; do
        sleep 2 || return 0
        if [ -z "$HOSTS" ] && statuses=$(exited_ranks "$dir/pids" "$np"); then
            exited_since=${exited_since:-$SECONDS}
            if [ $((SECONDS - exited_since)) -ge "$LAUNCHER_GRACE" ]; then
                printf '%s\n' "$statuses" >"$dir/launcher-outlived-ranks"
                record_hung_job "$dir" "$run" "mpirun is still there $((SECONDS - exited_since))s after every rank exited"
                kill -TERM "$job"
                return 0
            fi
        else
            exited_since=
        fi
    done
    : >"$dir/timed-out"
    record_hung_job "$dir" "$run"
    kill -TERM "$job"
}
