#!/usr/bin/env bash
# Latency of stock Open MPI vs coll rdma, measured with bench/coll_pairs.c
# (paired samples, the main table) and bench/coll_latency.c (the others).
#
# usage: ci/bench.sh [--stock-only]
#   --stock-only   measure stock Open MPI only (no component needed; no
#                  paired table)
# environment (defaults in brackets):
# paired samples (ci/bench-pairs.sh, where their knobs are described:
#   BENCH_PAIR_COLLS ["barrier allreduce reduce bcast"], BENCH_PAIR_NPS ["2 4"],
#   BENCH_PAIR_SIZES [4:67108864], BENCH_PAIR_FACTOR [4], BENCH_PAIRS [21],
#   BENCH_PAIRS_OVERSUBSCRIBED [3 x BENCH_PAIRS, where the ranks outnumber the cores],
#   BENCH_PAIR_LAUNCHES [3], BENCH_SAMPLE_MS [20], BENCH_SPREAD_MAX [0.2],
#   BENCH_FLOOR_DRIFT [1.5]);
#   BENCH_PAIR_COLLS="" leaves the paired table out. Tables, plot data and
#   PNG plots go to bench/results/<date>-<host>-pairs/, with this-vm-shm.conf:
#   the simulator's shared-memory calibration measured from the run's floor
#   samples (ci/bench-calibration.sh), also kept as
#   bench/results/latest-calibration.conf, which make sim then uses.
# the MPI_THREAD_MULTIPLE table (paired as above, np=2 by default): (a) one
# thread at that level: coll rdma against stock at the same level, and
# against coll rdma at the default level (MPI_THREAD_SINGLE: what the
# single-thread paths cost now at MULTIPLE); (b) BENCH_MT_THREADS threads per
# rank, each running the collective on its own duplicate of MPI_COMM_WORLD at
# once, coll rdma against stock (both at MULTIPLE):
#   BENCH_MT_COLLS ["barrier allreduce reduce bcast"; "" leaves the table out],
#   BENCH_MT_NPS ["2"], BENCH_MT_SIZES ["4,4096,65536,1048576": rows of the
#   main table], BENCH_MT_THREADS [2], BENCH_MT_PAIRS [15] rounds per size,
#   BENCH_MT_LAUNCHES [3]. Results in bench/results/<date>-<host>-thread-multiple/
#   and bench/results/latest-thread-multiple.txt.
# the non-blocking and persistent tables (issue 35; ci/bench/nonblocking.sh),
# paired as above: (a) post + wait of each non-blocking call and (b) 8
# MPI_Iallreduce of 8 B outstanding, waited for newest first, coll rdma
# against libnbc (--mca coll ^rdma); (c) the OSU-style overlap figure, the
# same two; (d) persistent start + wait against the blocking call, both
# coll rdma:
#   BENCH_NB_COLLS ["ibarrier ibcast iallreduce ireduce"; "" leaves the
#   tables out], BENCH_NB_NPS ["2"; "2 4" adds np=4] for (a) and (b),
#   BENCH_NB_OVERLAP_NPS ["2"; "" leaves (c) out], BENCH_NB_PERSISTENT_NPS ["2"],
#   BENCH_NB_PERSISTENT_COLLS [the *_init forms of BENCH_NB_COLLS],
#   BENCH_NB_OUTSTANDING [1; 0 leaves (b) out], BENCH_NB_SIZES
#   [4:67108864], BENCH_NB_FACTOR [8], BENCH_NB_PAIRS [15],
#   BENCH_NB_PAIRS_OVERSUBSCRIBED [45], BENCH_NB_LAUNCHES [3]. Results in
#   bench/results/<date>-<host>-nonblocking/ and
#   bench/results/latest-nonblocking.txt.
# whole runs alternating (one mpirun per variant and repetition; these mix the
# VM's fast and slow phases, so their ratios are less trustworthy):
#   BENCH_COLLS    collectives, each COLL or COLL:SIZE [""; the paired table
#                  has barrier], e.g. "barrier allreduce:8 bcast:8"
#   BENCH_NPS      process counts ["2 4"]; above 2 the run is oversubscribed
#                  (--bind-to none), at 2 ranks --bind-to core
#   BENCH_REPS     repetitions of each variant, alternating [5]
#   BENCH_ITERS_2 / BENCH_WARMUP_2   iterations at np=2 [1000000 / 100000]
#   BENCH_ITERS_N / BENCH_WARMUP_N   iterations above np=2 [100000 / 10000]
#   BENCH_TIMEOUT  seconds allowed per mpirun [90]
#   BENCH_RESULTS_DIR  where the results go [bench/results]
# message-size sweep of the reductions (stock vs coll rdma, one mpirun per
# variant covers every size; large sizes get fewer iterations):
#   BENCH_SWEEP_COLLS   collectives swept [""; replaced by the paired table],
#                       e.g. "allreduce reduce"
#   BENCH_SWEEP_SIZES   MIN:MAX bytes [4:1048576], BENCH_SWEEP_FACTOR step [4]
#   BENCH_SWEEP_NPS     process counts [$BENCH_NPS]
#   BENCH_SWEEP_REPS    repetitions of each variant, alternating [5]
#   BENCH_SWEEP_ITERS_2 / BENCH_SWEEP_WARMUP_2  at np=2 [20000 / 2000]
#   BENCH_SWEEP_ITERS_N / BENCH_SWEEP_WARMUP_N  above np=2 [3000 / 300]
#   BENCH_SWEEP_SCALE   above this many bytes, iterations shrink in
#                       proportion to the size [4096], down to
#   BENCH_SWEEP_MIN_ITERS [50]
# allreduce latency by tree degree k, next to the cost model's prediction
# (tuning/src/bin/coll-rdma-model.rs, built with cargo):
#   BENCH_DEGREES       degrees ["1 2 3 4 5 6 7"]; empty: no degree table
#   BENCH_DEGREE_BYTES  message size [65536]
#   BENCH_DEGREE_NPS    process counts ["4 2"]
#   BENCH_DEGREE_REPS   repetitions [5]
#   BENCH_DEGREE_ITERS_2 / BENCH_DEGREE_ITERS_N  timed iterations [5000 / 1000]
# bcast (stock vs coll rdma, one mpirun per variant covers every size):
#   BENCH_BCAST_TABLES  which bcast tables ["throughput skew"; "latency" adds
#                       the OSU-method latency, which the paired table replaces]
#   BENCH_BCAST_NPS     process counts [$BENCH_NPS]
#   BENCH_BCAST_REPS    repetitions of each variant, alternating [5]
#   latency, OSU method (coll_latency -c bcast_ack: the root broadcasts, the
#   receivers take turns to acknowledge; the acknowledgement's cost, measured
#   separately, is subtracted):
#   BENCH_BCAST_SIZES   MIN:MAX bytes [1:1048576], BENCH_BCAST_FACTOR step [4]
#   BENCH_BCAST_ITERS_2 / BENCH_BCAST_WARMUP_2  at np=2 [20000 / 2000]
#   BENCH_BCAST_ITERS_N / BENCH_BCAST_WARMUP_N  above np=2 [3000 / 300]
#   BENCH_BCAST_SCALE / BENCH_BCAST_MIN_ITERS   shrink iterations above this
#                       many bytes [4096], down to [100]
#   back-to-back throughput (coll_latency -c bcast_tput: ITERS bcasts from
#   one root, then a barrier; MB/s):
#   BENCH_TPUT_SIZES [8:262144], BENCH_TPUT_FACTOR [8],
#   BENCH_TPUT_ITERS_2 / BENCH_TPUT_ITERS_N [20000 / 5000] (shrunk above
#   BENCH_BCAST_SCALE bytes, down to BENCH_BCAST_MIN_ITERS)
#   process skew (coll_latency -c bcast_skew: the receivers spin a random
#   0..D us before each bcast; time inside MPI_Bcast, root and receivers):
#   BENCH_SKEW_SIZES [8:32768], BENCH_SKEW_FACTOR [8], BENCH_SKEW_DELAY D [100],
#   BENCH_SKEW_ITERS_2 / BENCH_SKEW_ITERS_N [3000 / 1000], BENCH_SKEW_REPS [3]
#
# Each repetition runs stock Open MPI (--mca coll ^rdma) and coll rdma
# (component from build/components, default priority) one after the other,
# swapping the order every repetition; the table shows the median of the
# per-run averages. Every coll rdma run is checked by its events
# (docs/events.md, ci/bench/events.sh) to have served what it measures on
# every rank (barrier and the degree table: nothing handed over; the sweeps
# and bcast: only calls above coll_rdma_COLL_max_bytes), every stock run to
# have no events of coll rdma, and the results are checked by coll_latency itself. Results go to
# bench/results/<date>-<host>.txt and bench/results/latest.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
COMPDIR=$BUILD/components
BIN=$BUILD/bench
RESULTS=${BENCH_RESULTS_DIR:-$ROOT/bench/results}
COMPONENT_PATH="SYS_DEFAULT:$COMPDIR"

COLLS=${BENCH_COLLS-}
NPS=${BENCH_NPS:-2 4}
REPS=${BENCH_REPS:-5}
ITERS_2=${BENCH_ITERS_2:-1000000}
WARMUP_2=${BENCH_WARMUP_2:-100000}
ITERS_N=${BENCH_ITERS_N:-100000}
WARMUP_N=${BENCH_WARMUP_N:-10000}
TIMEOUT=${BENCH_TIMEOUT:-90}
SWEEP_COLLS=${BENCH_SWEEP_COLLS-}
SWEEP_SIZES=${BENCH_SWEEP_SIZES:-4:1048576}
SWEEP_FACTOR=${BENCH_SWEEP_FACTOR:-4}
SWEEP_NPS=${BENCH_SWEEP_NPS:-$NPS}
SWEEP_REPS=${BENCH_SWEEP_REPS:-5}
SWEEP_ITERS_2=${BENCH_SWEEP_ITERS_2:-20000}
SWEEP_WARMUP_2=${BENCH_SWEEP_WARMUP_2:-2000}
SWEEP_ITERS_N=${BENCH_SWEEP_ITERS_N:-3000}
SWEEP_WARMUP_N=${BENCH_SWEEP_WARMUP_N:-300}
SWEEP_SCALE=${BENCH_SWEEP_SCALE:-4096}
SWEEP_MIN_ITERS=${BENCH_SWEEP_MIN_ITERS:-50}
DEGREES=${BENCH_DEGREES-1 2 3 4 5 6 7}
DEGREE_BYTES=${BENCH_DEGREE_BYTES:-65536}
DEGREE_NPS=${BENCH_DEGREE_NPS:-4 2}
DEGREE_REPS=${BENCH_DEGREE_REPS:-5}
DEGREE_ITERS_2=${BENCH_DEGREE_ITERS_2:-5000}
DEGREE_ITERS_N=${BENCH_DEGREE_ITERS_N:-1000}
BCAST_TABLES=${BENCH_BCAST_TABLES-throughput skew}
BCAST_NPS=${BENCH_BCAST_NPS:-$NPS}
BCAST_REPS=${BENCH_BCAST_REPS:-5}
BCAST_SIZES=${BENCH_BCAST_SIZES:-1:1048576}
BCAST_FACTOR=${BENCH_BCAST_FACTOR:-4}
BCAST_ITERS_2=${BENCH_BCAST_ITERS_2:-20000}
BCAST_WARMUP_2=${BENCH_BCAST_WARMUP_2:-2000}
BCAST_ITERS_N=${BENCH_BCAST_ITERS_N:-3000}
BCAST_WARMUP_N=${BENCH_BCAST_WARMUP_N:-300}
BCAST_SCALE=${BENCH_BCAST_SCALE:-4096}
BCAST_MIN_ITERS=${BENCH_BCAST_MIN_ITERS:-100}
TPUT_SIZES=${BENCH_TPUT_SIZES:-8:262144}
TPUT_FACTOR=${BENCH_TPUT_FACTOR:-8}
TPUT_ITERS_2=${BENCH_TPUT_ITERS_2:-20000}
TPUT_ITERS_N=${BENCH_TPUT_ITERS_N:-5000}
SKEW_SIZES=${BENCH_SKEW_SIZES:-8:32768}
SKEW_FACTOR=${BENCH_SKEW_FACTOR:-8}
SKEW_DELAY=${BENCH_SKEW_DELAY:-100}
SKEW_ITERS_2=${BENCH_SKEW_ITERS_2:-3000}
SKEW_ITERS_N=${BENCH_SKEW_ITERS_N:-1000}
SKEW_REPS=${BENCH_SKEW_REPS:-3}

STOCK_ONLY=0
case ${1:-} in
    --stock-only) STOCK_ONLY=1 ;;
    "") ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench: unknown argument '$1'" >&2; exit 2 ;;
esac

die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# rustup installs into ~/.cargo/bin, which non-login shells may not have on PATH
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
for v in $(env | sed -n 's/^\(OMPI_MCA_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in
        OMPI_MCA_coll*|OMPI_MCA_mca_base_component_path|OMPI_MCA_btl) unset "$v" ;;
    esac
done
for tool in mpicc mpirun ompi_info timeout awk jq; do
    command -v "$tool" >/dev/null || die "$tool not found (run ci/setup.sh)"
done
if [ "$STOCK_ONLY" = 0 ]; then
    [ -f "$COMPDIR/mca_coll_rdma.so" ] ||
        die "$COMPDIR/mca_coll_rdma.so is missing: run 'make build' (or use --stock-only)"
    OMPI_MCA_mca_base_component_path=$COMPONENT_PATH ompi_info --param coll rdma --level 9 2>&1 |
        grep -q coll_rdma_priority || die "ompi_info does not list coll rdma from $COMPDIR"
fi

mkdir -p "$BIN" "$RESULTS" "$COMPDIR"
for prog in coll_latency coll_pairs; do
    if [ ! -x "$BIN/$prog" ] || [ "$ROOT/bench/$prog.c" -nt "$BIN/$prog" ]; then
        mpicc -O2 -Wall -o "$BIN/$prog" "$ROOT/bench/$prog.c"
    fi
done
# the plots (gnuplot-nox, from Debian); without it the tables are still made
if ! command -v gnuplot >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing gnuplot-nox for the plots"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gnuplot-nox >/dev/null 2>&1 ||
        echo "   warning: could not install gnuplot-nox: no plots"
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
# the tables, one file each in ci/bench/, in the order they run
. "$ROOT/ci/bench/events.sh"
. "$ROOT/ci/bench/measure.sh"

t_start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
RAW=""
problems=0
for BENCH_PART in paired nonblocking whole-runs sweep degrees bcast; do
    . "$ROOT/ci/bench/$BENCH_PART.sh"
done

elapsed=$(( $(date +%s) - t_start ))

{
    echo "coll rdma latency benchmark ($stamp)"
    echo
    if [ -n "$PAIRS_DIR" ] && [ -f "$PAIRS_DIR/pairs.txt" ]; then
        cat "$PAIRS_DIR/pairs.txt"
        echo "(bench/coll_pairs.c through ci/bench-pairs.sh; data, plots and logs in ${PAIRS_DIR#"$ROOT"/}/."
        echo " base_us, rdma_us: medians of the samples, each the slowest rank's mean us per call;"
        echo " ratio: median over the pairs of rdma/base; spread: (Q3 - Q1) / median of those ratios;"
        echo " pairs: used/total (a pair whose cache-line round trip before and after differ by more"
        echo " than BENCH_FLOOR_DRIFT is left out while half remain); floor_us: that round trip between"
        echo " ranks 0 and 1; memcpy_us: one memcpy of size bytes on one rank; to_floor: rdma_us /"
        echo " max(floor_us, memcpy_us).)"
        echo
    fi
    if [ -n "$MT_DIR" ] && [ -f "$MT_DIR/thread-multiple.txt" ]; then
        cat "$MT_DIR/thread-multiple.txt"
        echo
    fi
    if [ -n "$NB_DIR" ] && [ -f "$NB_DIR/nonblocking.txt" ]; then
        cat "$NB_DIR/nonblocking.txt"
        echo
    fi
    if [ -n "$COLLS" ]; then
        echo "$TABLE"
        echo
        echo "us per call, median over $REPS run(s) of each variant of the average over ranks"
        echo "(bench/coll_latency.c). stock: --mca coll ^rdma; rdma: coll rdma at its default priority."
        echo "np=2: --bind-to core; more ranks: --oversubscribe --bind-to none. --mca btl self,vader."
        echo "iterations: np=2 $WARMUP_2 warm-up + $ITERS_2 timed; above $WARMUP_N + $ITERS_N."
        echo
    fi
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
    if [ -n "$SWEEP_TABLE" ]; then
        echo "reductions by message size (float sum; us per call, median over $SWEEP_REPS run(s) of each variant):"
        echo
        echo "$SWEEP_TABLE"
        echo
        echo "iterations: np=2 $SWEEP_WARMUP_2 warm-up + $SWEEP_ITERS_2 timed; above $SWEEP_WARMUP_N + $SWEEP_ITERS_N;"
        echo "above $SWEEP_SCALE bytes shrunk in proportion to the size (at least $SWEEP_MIN_ITERS). coll rdma hands"
        echo "messages above coll_rdma_allreduce_max_bytes / coll_rdma_reduce_max_bytes (defaults: see ompi_info)"
        echo "to the module underneath: above those sizes the rdma column measures that module through coll rdma."
        echo
    fi
    if [ -n "$BLAT_TABLE" ]; then
        echo "bcast latency by message size, OSU method (us per bcast; median over $BCAST_REPS run(s) of each variant):"
        echo
        echo "$BLAT_TABLE"
        echo
        echo "coll_latency -c bcast_ack: root 0 broadcasts, then one receiver (in turn) sends it a"
        echo "0-byte message; latency = the root's time per iteration - ack_us, the one-way cost of that"
        echo "message (half a 0-byte round trip, averaged over the receivers, measured in the same run);"
        echo "loop: the root's time per iteration before the subtraction. A negative latency means the loop"
        echo "was shorter than the separately measured ack (noise, mostly when oversubscribed)."
        echo "iterations: np=2 $BCAST_WARMUP_2 warm-up + $BCAST_ITERS_2 timed; above $BCAST_WARMUP_N + $BCAST_ITERS_N;"
        echo "above $BCAST_SCALE bytes shrunk in proportion to the size (at least $BCAST_MIN_ITERS). coll rdma hands"
        echo "messages above coll_rdma_bcast_max_bytes (default: see ompi_info) to the module underneath."
        echo
    fi
    if [ -n "$BTPUT_TABLE" ]; then
        echo "bcast back-to-back throughput (MB/s = 10^6 bytes/s; median over $BCAST_REPS run(s) of each variant):"
        echo
        echo "$BTPUT_TABLE"
        echo
        echo "coll_latency -c bcast_tput: root 0 makes N bcasts of one size in a row, then one barrier;"
        echo "N * size / the slowest rank's time. N: np=2 $TPUT_ITERS_2, above $TPUT_ITERS_N (shrunk above $BCAST_SCALE bytes)."
        echo
    fi
    if [ -n "$BSKEW_TABLE" ]; then
        echo "bcast under process skew (us inside MPI_Bcast per call; median over $SKEW_REPS run(s) of each variant):"
        echo
        echo "$BSKEW_TABLE"
        echo
        echo "coll_latency -c bcast_skew -D $SKEW_DELAY: before each bcast an untimed barrier, then every receiver"
        echo "spins a random 0..$SKEW_DELAY us (delay_us: the mean spun), root 0 none. root: the root's mean time"
        echo "inside MPI_Bcast; recv: the receivers' mean. iterations: np=2 $SKEW_ITERS_2, above $SKEW_ITERS_N."
        echo
    fi
    if [ -n "$DEGREE_TABLE" ]; then
        echo "allreduce by tree degree k (coll_rdma_allreduce_degree k, coll_rdma_allreduce_exchange_max 0,"
        echo "coll_rdma_allreduce_max_bytes -1 for every coll rdma run, so that the tree serves the size;"
        echo "auto: the component's own choice, as its comm_ready event reports it; predicted: coll-rdma-model,"
        echo "i.e. tuning's AllreduceModel::SHARED_MEMORY, which the component uses with default parameters):"
        echo "$DEGREE_TABLE"
    fi
    echo "raw per-run averages (us):$RAW"
} > "$RESULTS/$stamp-$host.txt"
cp "$RESULTS/$stamp-$host.txt" "$RESULTS/latest.txt"
[ -z "$PAIRS_DIR" ] || [ ! -f "$PAIRS_DIR/pairs.txt" ] || cp "$PAIRS_DIR/pairs.txt" "$RESULTS/latest-pairs.txt"
[ -z "$MT_DIR" ] || [ ! -f "$MT_DIR/thread-multiple.txt" ] || cp "$MT_DIR/thread-multiple.txt" "$RESULTS/latest-thread-multiple.txt"
[ -z "$NB_DIR" ] || [ ! -f "$NB_DIR/nonblocking.txt" ] || cp "$NB_DIR/nonblocking.txt" "$RESULTS/latest-nonblocking.txt"
# make sim uses it in place of the committed this-vm-shm.conf
[ -z "$PAIRS_DIR" ] || [ ! -f "$PAIRS_DIR/this-vm-shm.conf" ] || cp "$PAIRS_DIR/this-vm-shm.conf" "$RESULTS/latest-calibration.conf"

echo "== results: ${RESULTS#"$ROOT"/}/$stamp-$host.txt (and latest.txt), ${elapsed}s"
if [ "$problems" -gt 0 ]; then
    echo "bench: $problems run(s) gave no usable result" >&2
    exit 1
fi
