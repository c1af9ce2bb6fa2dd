#!/usr/bin/env bash
# The simulator's shared-memory calibration from one paired run of
# ci/bench-pairs.sh: coll-rdma-sim --calibrate-from reads the floor samples
# of its logs (cache-line round trip and memcpy, bench/coll_pairs.c) and
# writes shm.latency_ns and copy_ns_per_byte, each with what was measured;
# the other keys are copied from tuning/sim/calibrations/this-vm-shm.conf.
# ci/bench.sh runs it after the paired runs; make sim reads the result back
# as bench/results/latest-calibration.conf.
#
#   ci/bench-calibration.sh PAIRS_DIR [BUILD_LOG]
# writes PAIRS_DIR/this-vm-shm.conf (and prints its two measured values);
# exit status 1, with the reason, when it cannot.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: ci/bench-calibration.sh PAIRS_DIR [BUILD_LOG]" >&2; exit 2; }
DIR=$(cd "$1" && pwd)
BUILD_LOG=${2:-/dev/null}
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
(cd "$ROOT" && cargo build --release -p coll-rdma-sim) >"$BUILD_LOG" 2>&1 ||
    { echo "bench-calibration: cannot build coll-rdma-sim (see $BUILD_LOG)" >&2; exit 1; }
SIM=${CARGO_TARGET_DIR:-$ROOT/target}/release/coll-rdma-sim
OUT=$DIR/this-vm-shm.conf
# paths relative to the repository, so that the file's comments read the same anywhere
if ! (cd "$ROOT" && "$SIM" --calibrate-from "${DIR#"$ROOT"/}" --base tuning/sim/calibrations/this-vm-shm.conf) >"$OUT.tmp"; then
    rm -f "$OUT.tmp"
    exit 1
fi
mv -f "$OUT.tmp" "$OUT"
grep -E '^(shm\.latency_ns|copy_ns_per_byte) ' "$OUT" | sed "s|^|   ${OUT#"$ROOT"/}: |"
