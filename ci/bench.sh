#!/usr/bin/env bash
# Latency of stock Open MPI vs coll rdma, measured with bench/coll_latency.c.
#
# usage: ci/bench.sh [--stock-only]
#   --stock-only   measure stock Open MPI only (no component needed)
# environment (defaults in brackets):
#   BENCH_COLLS    collectives, each COLL or COLL:SIZE ["barrier"],
#                  e.g. "barrier allreduce:8 bcast:8"
#   BENCH_NPS      process counts ["2 4"]; above 2 the run is oversubscribed
#                  (--bind-to none), at 2 ranks --bind-to core
#   BENCH_REPS     repetitions of each variant, alternating [5]
#   BENCH_ITERS_2 / BENCH_WARMUP_2   iterations at np=2 [1000000 / 100000]
#   BENCH_ITERS_N / BENCH_WARMUP_N   iterations above np=2 [100000 / 10000]
#   BENCH_TIMEOUT  seconds allowed per mpirun [90]
#
# Each repetition runs stock Open MPI (--mca coll ^rdma) and coll rdma
# (component from build/components, default priority) one after the other,
# swapping the order every repetition; the table shows the median of the
# per-run averages. Results go to bench/results/<date>-<host>.txt and
# bench/results/latest.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
COMPDIR=$BUILD/components
BIN=$BUILD/bench
RESULTS=$ROOT/bench/results
COMPONENT_PATH="SYS_DEFAULT:$COMPDIR"

COLLS=${BENCH_COLLS:-barrier}
NPS=${BENCH_NPS:-2 4}
REPS=${BENCH_REPS:-5}
ITERS_2=${BENCH_ITERS_2:-1000000}
WARMUP_2=${BENCH_WARMUP_2:-100000}
ITERS_N=${BENCH_ITERS_N:-100000}
WARMUP_N=${BENCH_WARMUP_N:-10000}
TIMEOUT=${BENCH_TIMEOUT:-90}

STOCK_ONLY=0
case ${1:-} in
    --stock-only) STOCK_ONLY=1 ;;
    "") ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench: unknown argument '$1'" >&2; exit 2 ;;
esac

die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
for v in $(env | sed -n 's/^\(OMPI_MCA_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in
        OMPI_MCA_coll*|OMPI_MCA_mca_base_component_path|OMPI_MCA_btl) unset "$v" ;;
    esac
done
for tool in mpicc mpirun ompi_info timeout awk; do
    command -v "$tool" >/dev/null || die "$tool not found (run ci/setup.sh)"
done
if [ "$STOCK_ONLY" = 0 ]; then
    [ -f "$COMPDIR/mca_coll_rdma.so" ] ||
        die "$COMPDIR/mca_coll_rdma.so is missing: run 'make build' (or use --stock-only)"
    OMPI_MCA_mca_base_component_path=$COMPONENT_PATH ompi_info --param coll rdma --level 9 2>&1 |
        grep -q coll_rdma_priority || die "ompi_info does not list coll rdma from $COMPDIR"
fi

mkdir -p "$BIN" "$RESULTS" "$COMPDIR"
if [ ! -x "$BIN/coll_latency" ] || [ "$ROOT/bench/coll_latency.c" -nt "$BIN/coll_latency" ]; then
    mpicc -O2 -Wall -o "$BIN/coll_latency" "$ROOT/bench/coll_latency.c"
fi

LOG=$BUILD/bench-logs
rm -rf "$LOG"
mkdir -p "$LOG"

# ------------------------------------------------------------ machine facts
model=$(lscpu 2>/dev/null | awk -F: '/^Model name/ { sub(/^[ \t]+/, "", $2); print $2; exit }')
ompi_version=$(ompi_info --parsable | awk -F: '$1=="ompi" && $2=="version" && $3=="full" {print $4}')
if rev=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null); then
    changes=$(git -C "$ROOT" status --porcelain 2>/dev/null | wc -l)
    [ "$changes" = 0 ] || rev="$rev + $changes uncommitted change(s)"
else
    rev="none (no commit yet)"
fi
component_sum="-"
[ -f "$COMPDIR/mca_coll_rdma.so" ] && component_sum=$(sha256sum "$COMPDIR/mca_coll_rdma.so" | cut -c1-16)
host=$(hostname -s 2>/dev/null || hostname)
stamp=$(date +%Y%m%d-%H%M%S)

# -------------------------------------------------------------- measuring
# run_one VARIANT NP COLL SIZE -> prints the average in us, or "timeout"/"error"
run_one() {
    local variant=$1 np=$2 coll=$3 size=$4
    local iters warmup bind=(--bind-to core) over=()
    if [ "$np" -le 2 ]; then
        iters=$ITERS_2 warmup=$WARMUP_2
    else
        iters=$ITERS_N warmup=$WARMUP_N bind=(--bind-to none) over=(--oversubscribe)
    fi
    local sel=(--mca coll '^rdma')
    [ "$variant" = rdma ] && sel=()
    local tag="np$np-$coll-$size-$variant-$RUN"
    local rc=0
    timeout -k 5 "$TIMEOUT" mpirun -np "$np" "${over[@]}" "${bind[@]}" --mca btl self,vader \
        --mca mca_base_component_path "$COMPONENT_PATH" "${sel[@]}" --mca coll_rdma_verbose 1 \
        "$BIN/coll_latency" -q -c "$coll" -m "$size" -w "$warmup" -n "$iters" \
        </dev/null >"$LOG/$tag.out" 2>"$LOG/$tag.err" || rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo timeout; return; fi
    [ "$rc" = 0 ] || { echo error; return; }
    # make sure the run used what it claims to measure
    if [ "$variant" = rdma ]; then
        if [ "$coll" = barrier ] && ! grep -Eq 'coll:rdma: comm 0 rank [0-9]+: served [1-9][0-9]* barrier\(s\) over [a-z]+, 0 handed' "$LOG/$tag.err"; then
            echo unused; return
        fi
    elif grep -q 'coll:rdma:' "$LOG/$tag.err"; then
        echo unexcluded; return
    fi
    awk '!/^#/ && NF >= 7 { print $3; exit }' "$LOG/$tag.out"
}

median() {  # numbers on stdin (non-numeric lines ignored) -> median, or "-"
    awk '$1 ~ /^[0-9.]+$/ { v[++n] = $1 }
         END {
             if (n == 0) { print "-"; exit }
             for (i = 2; i <= n; i++) { x = v[i]; j = i - 1
                 while (j > 0 && v[j] > x) { v[j + 1] = v[j]; j-- } v[j + 1] = x }
             if (n % 2) m = v[(n + 1) / 2]; else m = (v[n / 2] + v[n / 2 + 1]) / 2
             printf "%.3f\n", m }'
}

echo "== bench: $COLLS at np $NPS, $REPS repetition(s) of each variant"
t_start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
TABLE=$(printf '%-4s %-11s %6s %10s %10s %11s\n' np collective size stock_us rdma_us rdma/stock)
RAW=""
problems=0
for np in $NPS; do
    for spec in $COLLS; do
        coll=${spec%%:*}
        size=0
        [ "$spec" != "$coll" ] && size=${spec#*:}
        [ "$coll" = barrier ] && size=0
        stock_vals="" rdma_vals=""
        for RUN in $(seq 1 "$REPS"); do
            order="stock rdma"
            [ $((RUN % 2)) = 0 ] && order="rdma stock"
            [ "$STOCK_ONLY" = 1 ] && order="stock"
            for variant in $order; do
                v=$(run_one "$variant" "$np" "$coll" "$size")
                case $v in
                    ''|timeout|error|unused|unexcluded)
                        problems=$((problems + 1))
                        echo "   np=$np $coll $variant run $RUN: ${v:-no result} (logs in ${LOG#"$ROOT"/})" ;;
                esac
                if [ "$variant" = stock ]; then stock_vals="$stock_vals $v"; else rdma_vals="$rdma_vals $v"; fi
            done
        done
        s=$(printf '%s\n' $stock_vals | median)
        r="-"
        [ "$STOCK_ONLY" = 1 ] || r=$(printf '%s\n' $rdma_vals | median)
        ratio=$(awk -v s="$s" -v r="$r" 'BEGIN { if (s ~ /^[0-9.]+$/ && r ~ /^[0-9.]+$/ && s > 0) printf "%.2f", r / s; else print "-" }')
        line=$(printf '%-4s %-11s %6s %10s %10s %11s' "$np" "$coll" "$size" "$s" "$r" "$ratio")
        TABLE="$TABLE"$'\n'"$line"
        echo "$line"
        RAW="$RAW"$'\n'"np=$np $coll size=$size stock:$stock_vals"
        [ "$STOCK_ONLY" = 1 ] || RAW="$RAW"$'\n'"np=$np $coll size=$size rdma: $rdma_vals"
    done
done
elapsed=$(( $(date +%s) - t_start ))

{
    echo "coll rdma latency benchmark ($stamp)"
    echo
    echo "$TABLE"
    echo
    echo "us per call, median over $REPS run(s) of each variant of the average over ranks"
    echo "(bench/coll_latency.c). stock: --mca coll ^rdma; rdma: coll rdma at its default priority."
    echo "np=2: --bind-to core; more ranks: --oversubscribe --bind-to none. --mca btl self,vader."
    echo "iterations: np=2 $WARMUP_2 warm-up + $ITERS_2 timed; above $WARMUP_N + $ITERS_N."
    echo
    echo "machine:    $model"
    echo "cores:      $(nproc) online ($(lscpu 2>/dev/null | awk -F: '/^CPU\(s\):/ {gsub(/ /, "", $2); print $2}') CPU(s))"
    echo "kernel:     $(uname -srm)"
    echo "Open MPI:   $ompi_version"
    echo "date:       $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "git rev:    $rev"
    echo "component:  sha256 $component_sum"
    echo "host:       $host"
    echo "load:       $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end (1/5/15 min)"
    echo "took:       ${elapsed}s"
    echo
    echo "raw per-run averages (us):$RAW"
} > "$RESULTS/$stamp-$host.txt"
cp "$RESULTS/$stamp-$host.txt" "$RESULTS/latest.txt"

echo "== results: ${RESULTS#"$ROOT"/}/$stamp-$host.txt (and latest.txt), ${elapsed}s"
if [ "$problems" -gt 0 ]; then
    echo "bench: $problems run(s) gave no usable result" >&2
    exit 1
fi
