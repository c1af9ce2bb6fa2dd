#!/usr/bin/env bash
# The paired benchmark (ci/bench-pairs.sh) against Open MPI 5: what
# `make bench-ompi5` runs inside the Debian 13 chroot (ci/ompi5/chroot.sh run).
#
#   ci/ompi5/bench.sh
#
# Builds the component as `make check-ompi5` does (ci/ompi5/check.sh
# --build-only: build/ompi5/components/), then measures coll rdma against two
# stock baselines in the same paired run, each job taking turns with the
# others: tuned (`--mca coll ^han,rdma`: 4.1's default choice) and han (stock
# 5.0's default selection, han at priority 35 above tuned; `--mca coll ^rdma`).
# The coll rdma job uses the default selection with the component loaded.
# Defaults: np=2 only (BENCH_PAIR_NPS), the other knobs as ci/bench-pairs.sh.
# Results: bench/results/ompi5/<date>-<host>-pairs/ (pairs.txt, data, plots,
# logs), bench/results/ompi5/latest.txt and latest-pairs.txt. The BENCH_*
# knobs come from build/ompi5/bench.env when it exists (make bench-ompi5
# writes the caller's there).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=$ROOT/build/ompi5
RESULTS=${BENCH_RESULTS_DIR:-$ROOT/bench/results}/ompi5
cd "$ROOT"

# the BENCH_* knobs of the make invocation (make bench-ompi5 writes them here,
# since the chroot starts with an empty environment)
if [ -f "$OUT/bench.env" ]; then
    while IFS= read -r knob; do
        case $knob in BENCH_*=*) export "${knob?}" ;; esac
    done <"$OUT/bench.env"
fi
command -v ompi_info >/dev/null || { echo "bench.sh: no ompi_info (run me inside ci/ompi5/chroot.sh run)" >&2; exit 2; }
version=$(ompi_info --parsable | awk -F: '$1=="ompi" && $2=="version" && $3=="full" {print $4}')
[ "${version%%.*}" -ge 5 ] || { echo "bench.sh: Open MPI $version here, expected 5.x" >&2; exit 2; }
if [ "${BENCH_OMPI5_NO_BUILD:-0}" != 1 ]; then
    bash ci/ompi5/check.sh --build-only
fi
[ -f "$OUT/components/mca_coll_rdma.so" ] || { echo "bench.sh: $OUT/components/mca_coll_rdma.so missing" >&2; exit 1; }
mkdir -p "$OUT/bench" "$RESULTS"
mpicc -O2 -Wall -o "$OUT/bench/coll_pairs" bench/coll_pairs.c
if ! command -v gnuplot >/dev/null && command -v apt-get >/dev/null; then
    echo "== installing gnuplot-nox for the plots (Debian package)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gnuplot-nox >/dev/null 2>&1 ||
        echo "   warning: could not install gnuplot-nox: no plots"
fi

host=$(hostname -s 2>/dev/null || hostname)
stamp=$(date +%Y%m%d-%H%M%S)
dir=$RESULTS/$stamp-$host-pairs
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
bash ci/bench-pairs.sh --self-test
echo "== bench against Open MPI $version: coll rdma vs tuned and vs han, paired samples"
rc=0
BENCH_PAIR_NPS=${BENCH_PAIR_NPS:-2} COMPONENT_PATH="SYS_DEFAULT:$OUT/components" OMPI_MAJOR=${version%%.*} \
    bash ci/bench-pairs.sh "$dir" "$OUT/bench/coll_pairs" \
    'tuned=--mca coll ^han,rdma' 'rdma=' 'han=--mca coll ^rdma' || rc=$?
{
    echo "coll rdma against stock Open MPI $version (Debian 13 chroot), $stamp"
    echo
    cat "$dir/pairs.txt"
    echo
    echo "git rev:    $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo -)"
    echo "component:  sha256 $(sha256sum "$OUT/components/mca_coll_rdma.so" | cut -c1-16)"
    echo "machine:    $(lscpu 2>/dev/null | awk -F: '/^Model name/ { sub(/^[ \t]+/, "", $2); print $2; exit }'), $(nproc) core(s)"
    echo "load:       $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
} >"$RESULTS/$stamp-$host.txt"
cp "$RESULTS/$stamp-$host.txt" "$RESULTS/latest.txt"
cp "$dir/pairs.txt" "$RESULTS/latest-pairs.txt"
echo "== results: ${RESULTS#"$ROOT"/}/$stamp-$host.txt (and latest.txt), plots and data in ${dir#"$ROOT"/}/"
exit $rc
