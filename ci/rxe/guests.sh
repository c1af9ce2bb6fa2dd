#!/usr/bin/env bash
# Soft-RoCE test bed: boots qemu guests (software emulation) that run Debian's
# own 6.1 kernel with the rdma_rxe module, so real verbs traffic (RC, UD, UD
# multicast, rdma_cm) can be exercised on a machine without RDMA hardware.
#
#   ci/rxe/guests.sh prepare
#   ci/rxe/guests.sh run [--guests N] [--loss PCT] [--loss-scope mcast|all]
#                        [--netem "SPEC"] [--timeout SECONDS] [--primary]
#                        -- COMMAND [ARGS...]
#   ci/rxe/guests.sh session start [--guests N] [--timeout SECONDS]  (prints DIR)
#   ci/rxe/guests.sh session exec DIR [--all|--guest I] [--timeout SECONDS] -- COMMAND [ARGS...]
#   ci/rxe/guests.sh session alive|stop DIR
#   (environment: RXE_BOOT_TIMEOUT, RXE_MTU, RXE_MEM, RXE_SMP, RXE_VERBOSE)
#
# See docs/testbed.md. Exit status of 'run': 0 when COMMAND exited 0 in every
# guest (with --primary: in guest 0), 1 otherwise, 77 ("SKIPPED: ...") when the
# test bed cannot run on this machine, 2 for a usage error.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${RXE_BUILD_DIR:-$REPO/build/rxe}

# One concern a file, each sourced here: prepare (packages, kernel,
# initramfs, keys), run (one boot of the guests), session (many jobs on one
# boot, ci/rxe/serve.sh in every guest).

say()  { printf 'rxe: %s\n' "$*" >&2; }
die()  { printf 'rxe: error: %s\n' "$*" >&2; exit 1; }
skip() { printf 'SKIPPED: %s\n' "$*" >&2; exit 77; }

usage() {
    sed -n '6,13p' "$HERE/guests.sh" | sed 's/^# \{0,3\}//' >&2
    exit 2
}

# A fresh run directory. Keeps the last 20, but never one changed in the last
# 30 minutes: a running guest's directory changes every half second (its
# host-loadavg), so another run's guests never lose theirs.
new_run_dir() {
    mkdir -p "$BUILD/runs"
    local old
    { ls -1dt "$BUILD"/runs/*/ 2>/dev/null || true; } | tail -n +21 |
        while IFS= read -r old; do
            [ -z "$(find "$old" -maxdepth 0 -mmin -30)" ] && rm -rf "$old"
        done
    mktemp -d "$BUILD/runs/$(date +%Y%m%d-%H%M%S)-XXXX"
}

# Host load per core as a slow-down factor, 1 to 6: timeouts are spent at
# that rate, since TCG guests slow down with the host without their own
# load average showing it.
load_factor_awk='{ f = $1 / cores; if (f < 1) f = 1; if (f > 6) f = 6 }'
# spent_after MS_SO_FAR MS_ELAPSED: milliseconds of timeout spent
spent_after() {
    awk -v s="$1" -v d="$2" -v cores="$(nproc)" "$load_factor_awk"' { printf "%d\n", s + d / f }' /proc/loadavg
}

# qemu and kernel lines that are no output of COMMAND.
NOISE='hub 0 is not connected to host network|terminating on signal|sysrq: Power Off|reboot: Power down'

alive() { kill -0 "$1" 2>/dev/null; }

# Quotes a word for /bin/sh (the guests' dash): 'it'\''s'.
shq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# shellcheck source=ci/rxe/guests-prepare.sh
. "$HERE/guests-prepare.sh"
# shellcheck source=ci/rxe/guests-run.sh
. "$HERE/guests-run.sh"
# shellcheck source=ci/rxe/guests-session.sh
. "$HERE/guests-session.sh"

case ${1:-} in
    prepare) shift; prepare ;;
    run) shift; run "$@" ;;
    session) shift; session "$@" ;;
    *) usage ;;
esac
