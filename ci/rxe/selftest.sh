#!/usr/bin/env bash
# Checks that the Soft-RoCE test bed works: verbs in one guest, verbs and
# multicast between two guests, Open MPI across guests, packet loss.
# Prints 'N passed, M failed'; exits 77 if the test bed cannot run here.
# usage: ci/rxe/selftest.sh [REGEX]   (only the checks whose name matches)
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
G=$HERE/guests.sh
OUT=$REPO/build/rxe/selftest
mkdir -p "$OUT"
cd "$REPO"

"$G" prepare || exit $?

ONLY=${1:-}
pass=0 fail=0
check() {  # check NAME PATTERN... -- guests.sh-run-arguments
    check_with run_check "$@"
}
run_check() { "$G" run "$@"; }
check_with() {  # check_with FUNCTION NAME PATTERN... -- FUNCTION's arguments
    local fn=$1 name=$2; shift 2
    [ -z "$ONLY" ] || [[ $name =~ $ONLY ]] || return 0
    local pats=()
    while [ "$1" != -- ]; do pats+=("$1"); shift; done
    shift
    local log=$OUT/$name.log t0=$SECONDS ok=1 p
    "$fn" "$@" >"$log" 2>&1 || ok=0
    for p in "${pats[@]}"; do grep -qE -- "$p" "$log" || { ok=0; echo "  missing: $p"; }; done
    if [ $ok = 1 ]; then
        pass=$((pass + 1)); echo "ok   $name ($((SECONDS - t0)) s)"
    else
        fail=$((fail + 1)); echo "FAIL $name ($((SECONDS - t0)) s), log: ${log#$REPO/}"
        tail -n 20 "$log" | sed 's/^/  /'
    fi
}

check devinfo 'state:.*PORT_ACTIVE' -- -- ibv_devinfo
check rc-loopback '1000 iters in' -- -- sh -c \
    'ibv_rc_pingpong -g 1 & sleep 1; ibv_rc_pingpong -g 1 localhost; r=$?; wait $! && exit $r'
# Servers start first; clients retry until the server listens. Multicast
# receivers join, then all meet at a barrier before the sender starts.
check two-guests '\[g0\].*#bytes' '\[g0\] .*ping data' \
      '\[g1\] receiving data transfers' '\[g0\] initiating data transfers' -- \
    --guests 2 --timeout 400 -- sh -c '
    retry() { for t in 1 2 3 4 5 6 7 8 9 10; do "$@" && return 0; sleep 1; done; return 1; }
    if [ "$GUEST_INDEX" = 1 ]; then
        ib_write_lat -d rxe0 -x 1 -n 100 >/dev/null &&
        rping -s -a 10.77.0.2 -C 3 -v >/dev/null || exit 1
        stdbuf -oL mckey -m 239.1.1.1 -b 10.77.0.2 -C 50 >/tmp/mckey.out 2>&1 &
        until grep -q joined /tmp/mckey.out || ! kill -0 $! 2>/dev/null; do sleep 0.2; done
        $RXE_BARRIER mcast && wait $! && cat /tmp/mckey.out
    else
        retry sh -c "ib_write_lat -d rxe0 -x 1 -n 100 g1 | grep -A1 \"#bytes\"" &&
        retry rping -c -a 10.77.0.2 -C 3 -v &&
        $RXE_BARRIER mcast && mckey -s -m 239.1.1.1 -b 10.77.0.1 -C 50
    fi'
if command -v mpicc >/dev/null; then
    mpicc -O2 -o "$OUT/mpi-allreduce" "$HERE/mpi-allreduce.c"
    check mpi-two-guests '\[g0\] g0$' '\[g0\] g1$' 'rank 0/2 on g0: .* OK' 'rank 1/2 on g1: .* OK' -- \
        --guests 2 --primary --timeout 300 -- sh -c "
        mpirun --allow-run-as-root --host g0,g1 -np 2 hostname &&
        mpirun --allow-run-as-root --host g0,g1 -np 2 --mca btl self,tcp $OUT/mpi-allreduce"
fi
check loss '\[g0\] 50 packets transmitted, [0-9]+ received, [0-9.]*[1-9][0-9.]*% packet loss' -- \
    --guests 2 --loss 10 --loss-scope all -- sh -c \
    '[ "$GUEST_INDEX" = 1 ] || ping -q -c 50 -i 0.05 g1 | grep loss'
check mcast-loss '\[g0\] 50 packets transmitted, 50 received, 0% packet loss' \
      '\[g0\] 50 packets transmitted, [0-9]+ received, [0-9.]*[1-9][0-9.]*% packet loss' -- \
    --guests 2 --loss 10 -- sh -c \
    '[ "$GUEST_INDEX" = 1 ] || { ping -q -c 50 -i 0.05 g1; ping -L -q -c 50 -i 0.05 224.0.0.1; } | grep loss'
check three-guests-mcast '\[g1\] receiving data transfers' '\[g2\] receiving data transfers' -- \
    --guests 3 --timeout 400 -- sh -c '
    me=10.77.0.$((GUEST_INDEX + 1))
    if [ "$GUEST_INDEX" = 0 ]; then
        $RXE_BARRIER mcast && mckey -s -m 239.1.1.1 -b $me -C 100
    else
        stdbuf -oL mckey -m 239.1.1.1 -b $me -C 100 >/tmp/mckey.out 2>&1 &
        until grep -q joined /tmp/mckey.out || ! kill -0 $! 2>/dev/null; do sleep 0.2; done
        $RXE_BARRIER mcast && wait $! && cat /tmp/mckey.out
    fi'

# Jobs for guest 0 and guest 1 posted together run side by side: each
# waits (60 s at most) for the other's mark in the shared run directory,
# which it could never see if the session ran one job after the other.
side_by_side() {  # side_by_side DIR
    local lane pids=() status=0
    rm -f "$1"/lane-mark.*
    for lane in 0 1; do
        "$G" session exec "$1" --guest "$lane" --timeout 120 -- sh -c '
            me=$GUEST_INDEX; other=$((1 - me))
            : >/run/rxe/lane-mark.$me
            i=0
            until [ -e /run/rxe/lane-mark.$other ]; do
                i=$((i + 1)); [ $i -le 300 ] || { echo "g$me alone: no mark of g$other"; exit 1; }
                sleep 0.2
            done
            echo "g$me ran beside g$other"' &
        pids+=($!)
    done
    for lane in "${pids[@]}"; do wait "$lane" || status=1; done
    return $status
}

# A session: jobs in one boot, each guest's loss replaced between jobs, a
# failing job and a job past its timeout reported without ending the session.
session_sequence() {
    local dir ok=0
    dir=$("$G" session start --guests 2 --timeout 900) || return 1
    {
        "$G" session exec "$dir" --all -- sh -c 'echo "job on g$GUEST_INDEX of $GUEST_COUNT"' &&
        "$G" session exec "$dir" --all -- sh ci/rxe/netem.sh all 30 &&
        "$G" session exec "$dir" -- sh -c 'ping -q -c 40 -i 0.05 g1 | grep loss' &&
        "$G" session exec "$dir" --all -- sh ci/rxe/netem.sh none &&
        "$G" session exec "$dir" -- sh -c 'echo "after none:"; ping -q -c 40 -i 0.05 g1 | grep loss' &&
        ! "$G" session exec "$dir" -- sh -c 'exit 3' &&
        ! "$G" session exec "$dir" --timeout 2 -- sleep 1000 &&
        "$G" session exec "$dir" -- echo "still serving after the timeout" &&
        side_by_side "$dir"
    } || ok=1
    "$G" session stop "$dir"
    if "$G" session alive "$dir"; then echo "the session still runs after stop"; ok=1; fi
    return $ok
}
check_with session_sequence session '\[g0\] job on g0 of 2' '\[g1\] job on g1 of 2' \
    '\[g0\] 40 packets transmitted, [0-9]+ received, [0-9.]*[1-9][0-9.]*% packet loss' \
    'after none:' '\[g0\] 40 packets transmitted, 40 received, 0% packet loss' \
    '\[g0\] \*\*\* COMMAND exited with status 3' '\[g0\] \*\*\* TIMEOUT' \
    '\[g0\] still serving after the timeout' '\[g0\] g0 ran beside g1' '\[g1\] g1 ran beside g0' --

echo "$pass passed, $fail failed"
[ $fail = 0 ]
