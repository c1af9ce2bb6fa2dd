#!/usr/bin/env bash
# make sim: builds coll-rdma-sim, regenerates docs/scale/ (markdown tables,
# gnuplot data, the validation against the seeds) and draws the PNG plots
# with gnuplot (Debian's gnuplot-nox, installed here when missing and root).
# Options go to coll-rdma-sim (e.g. --largest 1024 --per-node 1,32).
# The shared-memory calibration: SIM_SHM_CALIBRATION=FILE when set, else
# bench/results/latest-calibration.conf (written by make bench) when it
# exists, else the committed tuning/sim/calibrations/this-vm-shm.conf. The
# validation compares with SIM_MEASURED_PAIRS (set empty: with nothing), by
# default bench/results/latest-pairs.txt when it exists. The committed
# docs/scale is made with
#   SIM_SHM_CALIBRATION=tuning/sim/calibrations/this-vm-shm.conf SIM_MEASURED_PAIRS= make sim
# (CI machines differ: it must not depend on a local bench).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${SIM_OUT:-docs/scale}
CARGO=${CARGO:-cargo}

echo "== building coll-rdma-sim"
"$CARGO" build --release -q -p coll-rdma-sim
BIN=${CARGO_TARGET_DIR:-target}/release/coll-rdma-sim

mkdir -p "$OUT"
rm -f "$OUT"/*.dat "$OUT"/*.png "$OUT"/*.md "$OUT"/plots.gp
echo "== running the simulator into $OUT"
start=$(date +%s)
SIM_ARGS=(--calibrations tuning/sim/calibrations --out "$OUT" --bench-results bench/results)
[ -z "${SIM_SHM_CALIBRATION:-}" ] || SIM_ARGS+=(--shm-calibration "$SIM_SHM_CALIBRATION")
[ -z "${SIM_MEASURED_PAIRS+set}" ] || SIM_ARGS+=(--measured-pairs "${SIM_MEASURED_PAIRS:-none}")
# coll-rdma-sim says which calibration and which measured figures it used
"$BIN" "${SIM_ARGS[@]}" "$@"
echo "== simulated in $(( $(date +%s) - start )) s"

if ! command -v gnuplot >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing gnuplot-nox for the plots"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gnuplot-nox >/dev/null 2>&1 ||
        echo "   warning: could not install gnuplot-nox: no plots"
fi
if command -v gnuplot >/dev/null; then
    (cd "$OUT" && gnuplot plots.gp 2>plots.log) || { echo "gnuplot failed, see $OUT/plots.log" >&2; exit 1; }
    rm -f "$OUT/plots.log"
    echo "== plots: $(ls "$OUT"/*.png | wc -l) PNG files in $OUT"
else
    echo "== no gnuplot (Debian package gnuplot-nox): tables only" >&2
fi
