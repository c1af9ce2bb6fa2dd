#!/usr/bin/env bash
# make sim: builds coll-rdma-sim, regenerates docs/scale/ (markdown tables,
# gnuplot data, the validation against the seeds) and draws the PNG plots
# with gnuplot (Debian's gnuplot-nox, installed here when missing and root).
# Options go to coll-rdma-sim (e.g. --largest 1024 --per-node 1,32).
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
"$BIN" --calibrations tuning/sim/calibrations --out "$OUT" "$@"
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
