# Called by the case runner (ci/runner/src/launch.rs, main.rs), which
# watches every run itself: the memory a case may take (free_memory_kib)
# and what a hung job's processes were doing (record_hung_job), in one
# place for every suite.

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
