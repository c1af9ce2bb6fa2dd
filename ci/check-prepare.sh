#!/usr/bin/env bash
# make check's one-time preparations of its test beds, started in the
# background once the build's setup is done, so that their downloads,
# debootstrap and unpacking overlap the build and the host's tests instead
# of opening the stages that need them (on a fresh machine they took
# minutes: the Open MPI 5 chroot alone 180-320 s, docs/ompi5-port.md):
#   rxe        the Soft-RoCE guests' packages, kernel and initramfs
#              (ci/rxe/guests.sh prepare)
#   ompi5      the Open MPI 5 chroot (ci/ompi5/chroot.sh prepare; not with
#              SKIP_OMPI5=1, nor without root)
#   noheaders  Debian's configured Open MPI source tree of check-noheaders
#              (ompi-patches/debian-source-tree.sh prepare; not with
#              SKIP_NOHEADERS=1, nor without root)
#
#   ci/check-prepare.sh start        start them and return at once
#   ci/check-prepare.sh --self-test  check the above with stand-in steps
#
# Invariants:
# - every preparation is idempotent and holds a lock of its own while it
#   works, and the stage that needs it still runs it: that run waits for
#   the background one, then finds nothing left to do, or (after a failure
#   here) does the work itself and reports the error in its stage. The
#   background only moves work earlier; it never decides an outcome.
# - the steps run one after another (each may install Debian packages on
#   the host, and dpkg serves one installer at a time), at nice 19 and idle
#   I/O priority, so the CPU-bound stages beside them keep the cores.
# - the background job holds none of make's file descriptors (a pipe to a
#   tee would otherwise stay open until it ends).
# Logs: build/check-prepare/NAME.log, and build/check-prepare/status
# ("NAME STATUS SECONDS" per step, as each ends).
# Environment: CHECK_PREPARE_STEPS, a file of "NAME<TAB>COMMAND" lines that
# replaces the steps above (the self-test's stand-ins).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOGS=${CHECK_PREPARE_LOGS:-$ROOT/build/check-prepare}

steps() {
    if [ -n "${CHECK_PREPARE_STEPS:-}" ]; then cat "$CHECK_PREPARE_STEPS"; return; fi
    printf 'rxe\tbash ci/rxe/guests.sh prepare\n'
    # (both stages need root and skip without it: no preparation for them)
    [ "$(id -u)" = 0 ] || return 0
    [ "${SKIP_OMPI5:-0}" = 1 ] || printf 'ompi5\tbash ci/ompi5/chroot.sh prepare\n'
    [ "${SKIP_NOHEADERS:-0}" = 1 ] || printf 'noheaders\tbash ompi-patches/debian-source-tree.sh prepare\n'
}

# at the lowest priority the machine offers (ionice is util-linux's)
lowly() {
    if command -v ionice >/dev/null; then nice -n 19 ionice -c 3 "$@"; else nice -n 19 "$@"; fi
}

run_steps() { # the background job: each step in turn, its status recorded
    local name cmd t0 status
    while IFS=$'\t' read -r name cmd; do
        [ -n "$name" ] || continue
        t0=$SECONDS status=0
        (cd "$ROOT" && lowly sh -c "$cmd") >"$LOGS/$name.log" 2>&1 </dev/null || status=$?
        echo "$name $status $((SECONDS - t0))" >>"$LOGS/status"
    done < <(steps)
}

start() {
    rm -rf "$LOGS"
    mkdir -p "$LOGS"
    : >"$LOGS/status"
    run_steps </dev/null >/dev/null 2>&1 &
    echo "== test beds' preparation in the background (pid $!): $(steps | cut -f1 | paste -sd' '); logs in ${LOGS#"$ROOT"/}/"
}

self_test() {
    local scratch passed=0 failed=0 out
    scratch=$(mktemp -d)
    # shellcheck disable=SC2064 # expand now: the path is fixed
    trap "rm -rf '$scratch'" EXIT
    check() { # WHAT CONDITION...
        local what=$1; shift
        if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $what"; fi
    }
    # stand-ins: each notes when it runs beside another (a shared marker
    # file), the first waits until the test says go (so "start returned
    # before its steps ended" needs no clock), the second fails, the third
    # records its nice value
    cat >"$scratch/steps" <<EOF
one	[ ! -e $scratch/busy ] || echo overlap >>$scratch/overlaps; touch $scratch/busy; i=0; while [ ! -e $scratch/go ] && [ \$i -lt 1200 ]; do sleep 0.1; i=\$((i + 1)); done; rm -f $scratch/busy; echo one-out
two	[ ! -e $scratch/busy ] || echo overlap >>$scratch/overlaps; touch $scratch/busy; sleep 1; rm -f $scratch/busy; exit 3
three	ps -o ni= -p \$\$ >$scratch/nice
EOF
    out=$(CHECK_PREPARE_STEPS=$scratch/steps CHECK_PREPARE_LOGS=$scratch/logs bash "$0" start)
    check "start returns before its steps end" [ ! -s "$scratch/logs/status" ]
    touch "$scratch/go"
    check "start names the steps" grep -q 'one two three' <<<"$out"
    local waited=0
    while [ "$(wc -l <"$scratch/logs/status")" -lt 3 ] && [ "$waited" -lt 1200 ]; do sleep 0.1; waited=$((waited + 1)); done
    check "every step ended and was recorded" [ "$(cut -d' ' -f1 "$scratch/logs/status" | paste -sd,)" = one,two,three ]
    check "the steps ran one after another" [ ! -e "$scratch/overlaps" ]
    check "a step's output goes to its log" grep -qx one-out "$scratch/logs/one.log"
    check "a failing step's status is recorded" grep -q '^two 3 ' "$scratch/logs/status"
    check "a failing step does not stop the next" [ -s "$scratch/nice" ]
    check "the steps run at nice 19 (got $(tr -d ' ' <"$scratch/nice" 2>/dev/null))" [ "$(tr -d ' ' <"$scratch/nice" 2>/dev/null)" = 19 ]
    out=$(SKIP_OMPI5=1 SKIP_NOHEADERS=1 bash -c '. "$1"; steps' sh "$0" 2>/dev/null | cut -f1 | paste -sd,)
    check "SKIP_OMPI5=1 SKIP_NOHEADERS=1 leave only rxe (got $out)" [ "$out" = rxe ]
    out=$(env -u SKIP_OMPI5 -u SKIP_NOHEADERS bash -c '. "$1"; steps' sh "$0" 2>/dev/null | cut -f1 | paste -sd,)
    if [ "$(id -u)" = 0 ]; then
        check "by default (root) rxe, ompi5, noheaders (got $out)" [ "$out" = rxe,ompi5,noheaders ]
    else
        check "without root only rxe (got $out)" [ "$out" = rxe ]
    fi
    echo "check-prepare self-test: $passed passed, $failed failed"
    [ "$failed" = 0 ]
}

[ "${BASH_SOURCE[0]}" = "$0" ] || return 0
case "${1:-}" in
    start) start ;;
    --self-test) self_test ;;
    *) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
