# Sourced by ci/mpi-tests.sh: a case that is more than one run_test (a
# rank killed at its worst moment); called from its case file like
# run_test.

# Rank 0 killed (SIGKILL) inside the transport setup, after creating its
# shared-memory segment and before the other rank (held between the settings
# agreement and the transport setup by coll_rdma_test_setup_pause_s)
# attached it: the segment is left in /dev/shm, and the next job's setup on
# this node must remove it.
descends_from() {  # descends_from PID ANCESTOR: is ANCESTOR among PID's parents?
    local p=$1 i
    for i in $(seq 64); do
        # the parent's pid follows the state, after the command's ") "
        p=$(sed 's/.*) [^ ]* //; s/ .*//' "/proc/$p/stat" 2>/dev/null) || return 1
        [ -n "$p" ] && [ "$p" != 0 ] || return 1
        [ "$p" = "$2" ] && return 0
    done
    return 1
}

killed_creator_test() {
    local name=$1
    want "$name" || return 0
    local dir=$LOGROOT/$name before leaked="" pid="" problem=""
    rm -rf "$dir"
    mkdir -p "$dir"
    before=$(shm_list 'coll_rdma\.')
    timeout -k 5 90 mpirun -np 2 --mca btl self,vader "${COMPONENT_PATH_OPTS[@]}" \
        --mca coll_rdma_test_setup_pause_s 60 "${COMPONENT_PATH_ENV[@]}" "$BIN/barrier_order" -n 10 </dev/null >"$dir/killed-job.log" 2>&1 &
    local job=$!
    # Only a segment mapped by a process of this job counts: another job on
    # the machine (a second make check) may be creating segments too.
    local entry mapper
    for _ in $(seq 300); do
        while IFS= read -r entry; do
            [ -n "$entry" ] || continue
            # (grep fails when a process it lists vanishes while it reads)
            for mapper in $({ grep -lsF "/dev/shm/$entry" /proc/[0-9]*/maps 2>/dev/null || true; } | cut -d/ -f3); do
                if descends_from "$mapper" "$job"; then leaked=$entry pid=$mapper; break 2; fi
            done
        done < <(new_entries "$before" "$(shm_list 'coll_rdma\.')")
        [ -n "$leaked" ] && break
        sleep 0.1
    done
    if [ -z "$leaked" ]; then
        problem="no coll_rdma.* segment of this job appeared while rank 1 slept before its first barrier"
    else
        kill -9 "$pid" || true
        [ -e "/dev/shm/$leaked" ] ||
            problem="killing rank 0 (pid $pid) left nothing in /dev/shm: the test did not hit the window it is about"
    fi
    wait "$job" || true
    if [ -z "$problem" ] && [ ! -e "/dev/shm/$leaked" ]; then
        # It was there after the kill and is gone now: the setup of another
        # job on this machine (a concurrent test run) reaped it first, which
        # is the behaviour under test, by someone else.
        PASSED=$((PASSED + 1))
        printf '%-44s PASS  (the killed rank'"'"'s segment was reaped by another job'"'"'s setup first)\n' "$name"
        return 0
    fi
    if [ -n "$problem" ]; then
        FAILED=$((FAILED + 1))
        FAILED_NAMES+=("$name")
        printf '%-44s FAIL  (%s; logs: %s)\n' "$name" "$problem" "${dir#"$ROOT"/}"
        [ -n "$leaked" ] && rm -f "/dev/shm/$leaked"
        return 0
    fi
    CHECKS=("$SERVED_CHECK" "gone:$leaked")
    run_test "$name" 2 ok "${V[@]}" -- barrier_order -n 100
}
