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
# per-run averages. Every coll rdma run is checked to have served what it
# measures (its coll_rdma_verbose 2 tallies: served > 0, 0 handed to the
# fallback; for bcast: served > 0 on every rank, and the only calls handed
# over are those above coll_rdma_bcast_max_bytes), every stock run to have no
# trace of coll rdma, and the results are checked by coll_latency itself. Results go to
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
        --mca mca_base_component_path "$COMPONENT_PATH" "${sel[@]}" --mca coll_rdma_verbose 2 \
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
    awk '$1 ~ /^-?[0-9.]+$/ { v[++n] = $1 }
         END {
             if (n == 0) { print "-"; exit }
             for (i = 2; i <= n; i++) { x = v[i]; j = i - 1
                 while (j > 0 && v[j] > x) { v[j + 1] = v[j]; j-- } v[j + 1] = x }
             if (n % 2) m = v[(n + 1) / 2]; else m = (v[n / 2] + v[n / 2 + 1]) / 2
             printf "%.3f\n", m }'
}

t_start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
RAW=""
problems=0

# ------------------------------------------------- paired samples (main table)
PAIR_COLLS=${BENCH_PAIR_COLLS-barrier allreduce reduce bcast}
PAIRS_DIR=""
if [ -n "$PAIR_COLLS" ] && [ "$STOCK_ONLY" = 0 ]; then
    PAIRS_DIR=$RESULTS/$stamp-$host-pairs
    bash "$ROOT/ci/bench-pairs.sh" --self-test || die "the paired table's arithmetic is wrong (see above)"
    COMPONENT_PATH=$COMPONENT_PATH OMPI_MAJOR=${ompi_version%%.*} BENCH_PAIR_COLLS=$PAIR_COLLS BENCH_PAIR_METRIC=${BENCH_PAIR_METRIC:-auto} \
        bash "$ROOT/ci/bench-pairs.sh" "$PAIRS_DIR" "$BIN/coll_pairs" 'stock=--mca coll ^rdma' 'rdma=' ||
        problems=$((problems + 1))
    # the simulator's shared-memory level, from the floor samples just taken
    echo "== coll-rdma-sim calibration from the paired runs' floor samples (ci/bench-calibration.sh)"
    bash "$ROOT/ci/bench-calibration.sh" "$PAIRS_DIR" "$LOG/cargo-sim.log" ||
        echo "   warning: no simulator calibration from this run (make sim keeps the previous one or the committed file)"
fi

# ------------------------------------------ MPI_THREAD_MULTIPLE (issue 37)
MT_COLLS=${BENCH_MT_COLLS-barrier allreduce reduce bcast}
MT_DIR=""
if [ -n "$MT_COLLS" ] && [ "$STOCK_ONLY" = 0 ]; then
    MT_DIR=$RESULTS/$stamp-$host-thread-multiple
    mt_start=$SECONDS
    mt_threads=${BENCH_MT_THREADS:-2}
    mt_pairs() {  # OUTDIR THREADS VARIANT... -> ci/bench-pairs.sh with the table's knobs
        local out=$1 threads=$2
        shift 2
        COMPONENT_PATH=$COMPONENT_PATH OMPI_MAJOR=${ompi_version%%.*} BENCH_PAIR_COLLS=$MT_COLLS \
            BENCH_PAIR_NPS=${BENCH_MT_NPS:-2} BENCH_PAIR_SIZES=${BENCH_MT_SIZES:-4,4096,65536,1048576} \
            BENCH_PAIRS=${BENCH_MT_PAIRS:-15} BENCH_PAIR_LAUNCHES=${BENCH_MT_LAUNCHES:-3} BENCH_PAIR_METRIC=slowest \
            BENCH_PAIR_THREADS=$threads BENCH_PAIR_ALL_RDMA=0 \
            bash "$ROOT/ci/bench-pairs.sh" "$out" "$BIN/coll_pairs" "$@"
    }
    echo "== MPI_THREAD_MULTIPLE, one thread: coll rdma against stock at that level and against coll rdma at the default level"
    mt_pairs "$MT_DIR/one-thread" 1 'stock=-x COLL_PAIRS_THREAD_LEVEL=multiple --mca coll ^rdma' \
        'rdma=-x COLL_PAIRS_THREAD_LEVEL=multiple' 'rdma-single=' || problems=$((problems + 1))
    echo "== MPI_THREAD_MULTIPLE, $mt_threads threads per rank, each on its own communicator: coll rdma against stock"
    mt_pairs "$MT_DIR/threads-$mt_threads" "$mt_threads" 'stock=--mca coll ^rdma' 'rdma=' || problems=$((problems + 1))
    mt_elapsed=$((SECONDS - mt_start))
    {
        echo "MPI_THREAD_MULTIPLE (issue 37), paired samples ($stamp, load $(cut -d' ' -f1-3 /proc/loadavg) at the end, took ${mt_elapsed}s)"
        echo
        echo "(a) one thread at MPI_THREAD_MULTIPLE (COLL_PAIRS_THREAD_LEVEL=multiple). rdma: coll rdma at"
        echo "MULTIPLE; stock: stock Open MPI at MULTIPLE; rdma-single: coll rdma at the default level"
        echo "(MPI_Init: MPI_THREAD_SINGLE), so that table's ratio is MULTIPLE / SINGLE for coll rdma."
        echo
        cat "$MT_DIR/one-thread/pairs.txt" 2>/dev/null || echo "(no table: see the errors above)"
        echo
        echo "(b) $mt_threads threads per rank at MPI_THREAD_MULTIPLE, each on its own duplicate of"
        echo "MPI_COMM_WORLD, all running the collective at once; rdma: coll rdma, stock: stock Open MPI."
        echo
        cat "$MT_DIR/threads-$mt_threads/pairs.txt" 2>/dev/null || echo "(no table: see the errors above)"
    } > "$MT_DIR/thread-multiple.txt"
    echo "== MPI_THREAD_MULTIPLE tables: ${MT_DIR#"$ROOT"/}/thread-multiple.txt, ${mt_elapsed}s"
fi

TABLE=$(printf '%-4s %-11s %6s %10s %10s %11s\n' np collective size stock_us rdma_us rdma/stock)
[ -z "$COLLS" ] || echo "== bench: $COLLS at np $NPS, $REPS repetition(s) of each variant"
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
# ------------------------------------------------- reductions by message size
# sweep_one VARIANT NP COLL -> "size avg" lines, or one word: timeout, error,
# wrong (coll_latency found a wrong result), unused (coll rdma did not serve
# every call itself), unexcluded (stock run with coll rdma in it)
sweep_one() {
    local variant=$1 np=$2 coll=$3
    local iters warmup bind=(--bind-to core) over=()
    if [ "$np" -le 2 ]; then
        iters=$SWEEP_ITERS_2 warmup=$SWEEP_WARMUP_2
    else
        iters=$SWEEP_ITERS_N warmup=$SWEEP_WARMUP_N bind=(--bind-to none) over=(--oversubscribe)
    fi
    local sel=(--mca coll '^rdma')
    [ "$variant" = rdma ] && sel=()
    local tag="sweep-np$np-$coll-$variant-$RUN"
    local rc=0
    timeout -k 5 "$TIMEOUT" mpirun -np "$np" "${over[@]}" "${bind[@]}" --mca btl self,vader \
        --mca mca_base_component_path "$COMPONENT_PATH" "${sel[@]}" --mca coll_rdma_verbose 2 \
        "$BIN/coll_latency" -q -c "$coll" -m "$SWEEP_SIZES" -f "$SWEEP_FACTOR" -w "$warmup" \
        -n "$iters" -s "$SWEEP_SCALE" -l "$SWEEP_MIN_ITERS" \
        </dev/null >"$LOG/$tag.out" 2>"$LOG/$tag.err" || rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo timeout; return; fi
    [ "$rc" = 3 ] && { echo wrong; return; }
    [ "$rc" = 0 ] || { echo error; return; }
    if [ "$variant" = rdma ]; then
        served_within_limit "$coll" "$np" "$LOG/$tag.err" || { echo unused; return; }
    elif grep -q 'coll:rdma:' "$LOG/$tag.err"; then
        echo unexcluded; return
    fi
    awk '!/^#/ && NF >= 7 { print $2, $3 }' "$LOG/$tag.out"
}

# served_within_limit COLL NP FILE: every rank's summary for MPI_COMM_WORLD
# says it served COLL(s) itself, and every call it handed over was above
# coll_rdma_COLL_max_bytes (the reason line says "N bytes exceed
# coll_rdma_COLL_max_bytes=L"; the sweeps go beyond the default limits)
served_within_limit() {
    local coll=$1 np=$2 file=$3 n
    n=$(grep -Ec "coll:rdma: comm 0 rank [0-9]+: served [1-9][0-9]* $coll\(s\) over " "$file" || true)
    [ "$n" = "$np" ] || return 1
    { grep -E "coll:rdma: comm 0 rank [0-9]+: $coll handed to the module underneath: " "$file" || true; } |
        awk -v re=": [0-9]+ bytes exceed coll_rdma_${coll}_max_bytes=[0-9]+\$" '
             { if (match($0, re)) {
                   split(substr($0, RSTART + 2), w, /[ =]/); if (w[1] + 0 <= w[5] + 0) bad++ }
               else bad++ }
             END { exit bad ? 1 : 0 }'
}

# served_all COLL FILE: every rank's summary for MPI_COMM_WORLD says it served
# some COLL(s) itself and handed none to the fallback
served_all() {
    local coll=$1 file=$2 lines
    lines=$(grep -E "coll:rdma: comm 0 rank [0-9]+: served [0-9]+ $coll\(s\) over " "$file" || true)
    [ -n "$lines" ] || return 1
    printf '%s\n' "$lines" | grep -Eq "served 0 $coll|, [1-9][0-9]* handed" && return 1
    return 0
}

SWEEP_TABLE=""
if [ -n "$SWEEP_COLLS" ]; then
    echo "== sweep: $SWEEP_COLLS, $SWEEP_SIZES bytes (x$SWEEP_FACTOR) at np $SWEEP_NPS, $SWEEP_REPS repetition(s)"
    SWEEP_TABLE=$(printf '%-4s %-11s %8s %10s %10s %11s\n' np collective size stock_us rdma_us rdma/stock)
    for np in $SWEEP_NPS; do
        for coll in $SWEEP_COLLS; do
            rm -f "$LOG/sweep.stock" "$LOG/sweep.rdma"
            for RUN in $(seq 1 "$SWEEP_REPS"); do
                order="stock rdma"
                [ $((RUN % 2)) = 0 ] && order="rdma stock"
                [ "$STOCK_ONLY" = 1 ] && order="stock"
                for variant in $order; do
                    out=$(sweep_one "$variant" "$np" "$coll")
                    case $out in
                        ''|timeout|error|wrong|unused|unexcluded)
                            problems=$((problems + 1))
                            echo "   np=$np $coll $variant run $RUN: ${out:-no result} (logs in ${LOG#"$ROOT"/})" ;;
                        *) printf '%s\n' "$out" >> "$LOG/sweep.$variant"
                           RAW="$RAW"$'\n'"np=$np $coll $variant run $RUN: $(printf '%s\n' "$out" | awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $1, $2 }')" ;;
                    esac
                done
            done
            sizes=$({ cat "$LOG"/sweep.stock "$LOG"/sweep.rdma 2>/dev/null || true; } | awk '{ print $1 }' | sort -n | uniq)
            for size in $sizes; do
                s=$({ awk -v z="$size" '$1 == z { print $2 }' "$LOG/sweep.stock" 2>/dev/null || true; } | median)
                r="-"
                [ "$STOCK_ONLY" = 1 ] || r=$({ awk -v z="$size" '$1 == z { print $2 }' "$LOG/sweep.rdma" 2>/dev/null || true; } | median)
                ratio=$(awk -v s="$s" -v r="$r" 'BEGIN { if (s ~ /^[0-9.]+$/ && r ~ /^[0-9.]+$/ && s > 0) printf "%.2f", r / s; else print "-" }')
                line=$(printf '%-4s %-11s %8s %10s %10s %11s' "$np" "$coll" "$size" "$s" "$r" "$ratio")
                SWEEP_TABLE="$SWEEP_TABLE"$'\n'"$line"
                echo "$line"
            done
        done
    done
fi

# ----------------------------------------- allreduce by tree degree vs model
# degree_one NP K -> "avg_us used_degree", or a problem word as sweep_one;
# K = auto: the component's own choice; K = stock: stock Open MPI
degree_one() {
    local np=$1 k=$2
    local iters=$DEGREE_ITERS_2 bind=(--bind-to core) over=()
    [ "$np" -le 2 ] || { iters=$DEGREE_ITERS_N; bind=(--bind-to none); over=(--oversubscribe); }
    local sel=()
    case $k in
        stock) sel=(--mca coll '^rdma') ;;
        auto) sel=(--mca coll_rdma_allreduce_max_bytes -1) ;;
        *) sel=(--mca coll_rdma_allreduce_degree "$k" --mca coll_rdma_allreduce_exchange_max 0
                --mca coll_rdma_allreduce_max_bytes -1) ;;
    esac
    local tag="degree-np$np-k$k-$RUN" rc=0
    timeout -k 5 "$TIMEOUT" mpirun -np "$np" "${over[@]}" "${bind[@]}" --mca btl self,vader \
        --mca mca_base_component_path "$COMPONENT_PATH" "${sel[@]}" --mca coll_rdma_verbose 2 \
        "$BIN/coll_latency" -q -c allreduce -m "$DEGREE_BYTES" -w $((iters / 10 + 1)) -n "$iters" \
        </dev/null >"$LOG/$tag.out" 2>"$LOG/$tag.err" || rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo timeout; return; fi
    [ "$rc" = 3 ] && { echo wrong; return; }
    [ "$rc" = 0 ] || { echo error; return; }
    local used="-"
    if [ "$k" = stock ]; then
        grep -q 'coll:rdma:' "$LOG/$tag.err" && { echo unexcluded; return; }
    else
        served_all allreduce "$LOG/$tag.err" || { echo unused; return; }
        used=$(sed -n 's/.*coll:rdma: comm 0 rank 0: transport [a-z]* ready .*allreduce degree \([0-9]*\).*/\1/p' "$LOG/$tag.err" | head -1)
        used=${used:--}
        if [ "$k" != auto ] && [ "$used" != - ] && [ "$used" != "$k" ]; then echo "degree-$used-used"; return; fi
    fi
    printf '%s %s\n' "$(awk '!/^#/ && NF >= 7 { print $3; exit }' "$LOG/$tag.out")" "$used"
}

DEGREE_TABLE=""
MODEL=""
if [ -n "$DEGREES" ] && [ "$STOCK_ONLY" = 0 ]; then
    echo "== allreduce of $DEGREE_BYTES bytes by tree degree at np $DEGREE_NPS, $DEGREE_REPS repetition(s); cargo build --release -p tuning --bins"
    if (cd "$ROOT" && cargo build --release -p tuning --bins) > "$LOG/cargo-model.log" 2>&1; then
        MODEL=$ROOT/target/release/coll-rdma-model
    else
        echo "   warning: cannot build coll-rdma-model (see ${LOG#"$ROOT"/}/cargo-model.log): no predictions"
    fi
    for np in $DEGREE_NPS; do
        pred_file=$LOG/model-np$np.txt
        : > "$pred_file"
        if [ -n "$MODEL" ]; then
            "$MODEL" --ranks "$np" --bytes "$DEGREE_BYTES" --degrees "$(printf '%s' "$DEGREES" | tr ' ' ',')" \
                > "$pred_file" 2>&1 || echo "   warning: coll-rdma-model failed: $(head -1 "$pred_file")"
        fi
        best=$(awk '$1 == "best" { print $2; exit }' "$pred_file")
        over_note=""
        [ "$np" -gt 2 ] && over_note=", oversubscribed on $(nproc) core(s)"
        DEGREE_TABLE="$DEGREE_TABLE"$'\n'"allreduce of $DEGREE_BYTES bytes at np=$np$over_note: measured us (median of $DEGREE_REPS) and model us"
        DEGREE_TABLE="$DEGREE_TABLE"$'\n'"$(printf '%-10s %12s %12s %17s' k measured_us predicted_us measured/predicted)"
        echo "   np=$np (model's best degree for this size: ${best:--})"
        for k in $DEGREES auto stock; do
            vals="" used_seen=""
            for RUN in $(seq 1 "$DEGREE_REPS"); do
                out=$(degree_one "$np" "$k")
                case $out in
                    ''|timeout|error|wrong|unused|unexcluded|degree-*)
                        problems=$((problems + 1))
                        echo "   np=$np k=$k run $RUN: ${out:-no result} (logs in ${LOG#"$ROOT"/})" ;;
                    *) vals="$vals ${out%% *}"; used_seen=${out##* } ;;
                esac
            done
            m=$(printf '%s\n' $vals | median)
            label=$k pred="-"
            case $k in
                auto) label="auto(k=${used_seen:--})"
                      [ -n "$used_seen" ] && [ "$used_seen" != - ] &&
                          pred=$(awk -v k="$used_seen" '$1 == "degree" && $2 == k { printf "%.3f", $3 / 1000 }' "$pred_file") ;;
                stock) label="stock" ;;
                *) pred=$(awk -v k="$k" '$1 == "degree" && $2 == k { printf "%.3f", $3 / 1000 }' "$pred_file") ;;
            esac
            # auto may have used a degree outside the list: ask the model
            if [ -z "$pred" ] && [ -n "$MODEL" ] && [ "$k" = auto ]; then
                pred=$("$MODEL" --ranks "$np" --bytes "$DEGREE_BYTES" --degrees "$used_seen" 2>/dev/null |
                    awk '$1 == "degree" { printf "%.3f", $3 / 1000 }')
            fi
            pred=${pred:--}
            ratio=$(awk -v m="$m" -v p="$pred" 'BEGIN { if (m ~ /^[0-9.]+$/ && p ~ /^[0-9.]+$/ && p > 0) printf "%.2f", m / p; else print "-" }')
            line=$(printf '%-10s %12s %12s %17s' "$label" "$m" "$pred" "$ratio")
            DEGREE_TABLE="$DEGREE_TABLE"$'\n'"$line"
            RAW="$RAW"$'\n'"degree np=$np k=$k bytes=$DEGREE_BYTES:$vals"
            echo "$line"
        done
        ex=$(awk '$1 == "exchange" { printf "%.3f", $2 / 1000 }' "$pred_file")
        why=$(awk '$1 == "best" { $1 = ""; $2 = ""; $3 = ""; sub(/^ +/, ""); print; exit }' "$pred_file")
        DEGREE_TABLE="$DEGREE_TABLE"$'\n'"model: exchange variant ${ex:--} us; best tree ${why:--}"$'\n'
    done
fi

# ------------------------------------------------------------------- bcast
# bcast_run VARIANT NP MODE ARGS... -> the data lines of coll_latency without
# the first column ("size avg min max iterations ranks extra..."), or one
# problem word (timeout, error, wrong, unused, unexcluded)
bcast_run() {
    local variant=$1 np=$2 mode=$3
    shift 3
    local bind=(--bind-to core) over=()
    [ "$np" -le 2 ] || { bind=(--bind-to none); over=(--oversubscribe); }
    local sel=(--mca coll '^rdma')
    [ "$variant" = rdma ] && sel=()
    local tag="$mode-np$np-$variant-$RUN" rc=0
    timeout -k 5 "$TIMEOUT" mpirun -np "$np" "${over[@]}" "${bind[@]}" --mca btl self,vader \
        --mca mca_base_component_path "$COMPONENT_PATH" "${sel[@]}" --mca coll_rdma_verbose 2 \
        "$BIN/coll_latency" -q -c "$mode" "$@" </dev/null >"$LOG/$tag.out" 2>"$LOG/$tag.err" || rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then echo timeout; return; fi
    [ "$rc" = 3 ] && { echo wrong; return; }
    [ "$rc" = 0 ] || { echo error; return; }
    if [ "$variant" = rdma ]; then
        served_within_limit bcast "$np" "$LOG/$tag.err" || { echo unused; return; }
    elif grep -q 'coll:rdma:' "$LOG/$tag.err"; then
        echo unexcluded; return
    fi
    awk '!/^#/ && NF >= 7 { $1 = ""; sub(/^ /, ""); print }' "$LOG/$tag.out"
}

# bcast_series NAME NP REPS MODE ARGS...: runs both variants REPS times,
# alternating, into $LOG/NAME-npNP.stock and .rdma
bcast_series() {
    local name=$1 np=$2 reps=$3 mode=$4
    shift 4
    rm -f "$LOG/$name-np$np.stock" "$LOG/$name-np$np.rdma"
    local variant order out
    for RUN in $(seq 1 "$reps"); do
        order="stock rdma"
        [ $((RUN % 2)) = 0 ] && order="rdma stock"
        [ "$STOCK_ONLY" = 1 ] && order="stock"
        for variant in $order; do
            out=$(bcast_run "$variant" "$np" "$mode" "$@")
            case $out in
                ''|timeout|error|wrong|unused|unexcluded)
                    problems=$((problems + 1))
                    echo "   np=$np $mode $variant run $RUN: ${out:-no result} (logs in ${LOG#"$ROOT"/})" ;;
                *) printf '%s\n' "$out" >> "$LOG/$name-np$np.$variant"
                   RAW="$RAW"$'\n'"$name np=$np $variant run $RUN: $(printf '%s\n' "$out" | awk -v c="$BCOL" '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $1, $c }')" ;;
            esac
        done
    done
}

# col_median NAME NP VARIANT SIZE COLUMN -> median of that column for SIZE
col_median() {
    { awk -v z="$4" -v c="$5" '$1 == z { print $c }' "$LOG/$1-np$2.$3" 2>/dev/null || true; } | median
}
ratio() {  # ratio A B -> A/B with 2 decimals, or "-"
    awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.2f", a / b; else print "-" }'
}
sizes_of() { { cat "$LOG/$1-np$2".stock "$LOG/$1-np$2".rdma 2>/dev/null || true; } | awk '{ print $1 }' | sort -n | uniq; }

BLAT_TABLE="" BTPUT_TABLE="" BSKEW_TABLE=""
for table in $BCAST_TABLES; do
    case $table in
        latency)
            echo "== bcast latency (OSU method), $BCAST_SIZES bytes (x$BCAST_FACTOR) at np $BCAST_NPS, $BCAST_REPS repetition(s)"
            BLAT_TABLE=$(printf '%-4s %8s %10s %10s %11s %14s %13s %13s %12s\n' np size stock_us rdma_us rdma/stock loop_stock_us loop_rdma_us ack_stock_us ack_rdma_us)
            for np in $BCAST_NPS; do
                [ "$np" -ge 2 ] || continue
                it=$BCAST_ITERS_N wu=$BCAST_WARMUP_N
                [ "$np" -le 2 ] && { it=$BCAST_ITERS_2; wu=$BCAST_WARMUP_2; }
                BCOL=2 bcast_series blat "$np" "$BCAST_REPS" bcast_ack -m "$BCAST_SIZES" -f "$BCAST_FACTOR" \
                    -w "$wu" -n "$it" -s "$BCAST_SCALE" -l "$BCAST_MIN_ITERS"
                for size in $(sizes_of blat "$np"); do
                    st=$(col_median blat "$np" stock "$size" 2) rd=-
                    [ "$STOCK_ONLY" = 1 ] || rd=$(col_median blat "$np" rdma "$size" 2)
                    ls=$(col_median blat "$np" stock "$size" 7) lr=-
                    as=$(col_median blat "$np" stock "$size" 8) ar=-
                    if [ "$STOCK_ONLY" = 0 ]; then
                        lr=$(col_median blat "$np" rdma "$size" 7)
                        ar=$(col_median blat "$np" rdma "$size" 8)
                    fi
                    line=$(printf '%-4s %8s %10s %10s %11s %14s %13s %13s %12s' "$np" "$size" "$st" "$rd" "$(ratio "$rd" "$st")" "$ls" "$lr" "$as" "$ar")
                    BLAT_TABLE="$BLAT_TABLE"$'\n'"$line"
                    echo "$line"
                done
            done ;;
        throughput)
            echo "== bcast back-to-back throughput, $TPUT_SIZES bytes (x$TPUT_FACTOR) at np $BCAST_NPS, $BCAST_REPS repetition(s)"
            BTPUT_TABLE=$(printf '%-4s %8s %12s %12s %11s\n' np size stock_MBps rdma_MBps rdma/stock)
            for np in $BCAST_NPS; do
                [ "$np" -ge 2 ] || continue
                it=$TPUT_ITERS_N
                [ "$np" -le 2 ] && it=$TPUT_ITERS_2
                BCOL=7 bcast_series btput "$np" "$BCAST_REPS" bcast_tput -m "$TPUT_SIZES" -f "$TPUT_FACTOR" \
                    -w $((it / 20 + 1)) -n "$it" -s "$BCAST_SCALE" -l "$BCAST_MIN_ITERS"
                for size in $(sizes_of btput "$np"); do
                    st=$(col_median btput "$np" stock "$size" 7) rd=-
                    [ "$STOCK_ONLY" = 1 ] || rd=$(col_median btput "$np" rdma "$size" 7)
                    line=$(printf '%-4s %8s %12s %12s %11s' "$np" "$size" "$st" "$rd" "$(ratio "$rd" "$st")")
                    BTPUT_TABLE="$BTPUT_TABLE"$'\n'"$line"
                    echo "$line"
                done
            done ;;
        skew)
            echo "== bcast under process skew (receivers spin 0..$SKEW_DELAY us before each bcast), $SKEW_SIZES bytes (x$SKEW_FACTOR) at np $BCAST_NPS, $SKEW_REPS repetition(s)"
            BSKEW_TABLE=$(printf '%-4s %8s %13s %12s %10s %13s %12s %10s %9s\n' np size root_stock_us root_rdma_us root_ratio recv_stock_us recv_rdma_us recv_ratio delay_us)
            for np in $BCAST_NPS; do
                [ "$np" -ge 2 ] || continue
                it=$SKEW_ITERS_N
                [ "$np" -le 2 ] && it=$SKEW_ITERS_2
                BCOL=7 bcast_series bskew "$np" "$SKEW_REPS" bcast_skew -m "$SKEW_SIZES" -f "$SKEW_FACTOR" \
                    -w $((it / 10 + 1)) -n "$it" -D "$SKEW_DELAY"
                for size in $(sizes_of bskew "$np"); do
                    rs=$(col_median bskew "$np" stock "$size" 7) rr=-
                    cs=$(col_median bskew "$np" stock "$size" 8) cr=-
                    if [ "$STOCK_ONLY" = 0 ]; then
                        rr=$(col_median bskew "$np" rdma "$size" 7)
                        cr=$(col_median bskew "$np" rdma "$size" 8)
                    fi
                    dl=$(col_median bskew "$np" stock "$size" 10)
                    line=$(printf '%-4s %8s %13s %12s %10s %13s %12s %10s %9s' "$np" "$size" "$rs" "$rr" "$(ratio "$rr" "$rs")" "$cs" "$cr" "$(ratio "$cr" "$cs")" "$dl")
                    BSKEW_TABLE="$BSKEW_TABLE"$'\n'"$line"
                    echo "$line"
                done
            done ;;
        *) echo "   warning: unknown bcast table '$table' in BENCH_BCAST_TABLES (latency, throughput, skew)" ;;
    esac
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
        echo "auto: the component's own choice, as its verbose output reports it; predicted: coll-rdma-model,"
        echo "i.e. tuning's AllreduceModel::SHARED_MEMORY, which the component uses with default parameters):"
        echo "$DEGREE_TABLE"
    fi
    echo "raw per-run averages (us):$RAW"
} > "$RESULTS/$stamp-$host.txt"
cp "$RESULTS/$stamp-$host.txt" "$RESULTS/latest.txt"
[ -z "$PAIRS_DIR" ] || [ ! -f "$PAIRS_DIR/pairs.txt" ] || cp "$PAIRS_DIR/pairs.txt" "$RESULTS/latest-pairs.txt"
[ -z "$MT_DIR" ] || [ ! -f "$MT_DIR/thread-multiple.txt" ] || cp "$MT_DIR/thread-multiple.txt" "$RESULTS/latest-thread-multiple.txt"
# make sim uses it in place of the committed this-vm-shm.conf
[ -z "$PAIRS_DIR" ] || [ ! -f "$PAIRS_DIR/this-vm-shm.conf" ] || cp "$PAIRS_DIR/this-vm-shm.conf" "$RESULTS/latest-calibration.conf"

echo "== results: ${RESULTS#"$ROOT"/}/$stamp-$host.txt (and latest.txt), ${elapsed}s"
if [ "$problems" -gt 0 ]; then
    echo "bench: $problems run(s) gave no usable result" >&2
    exit 1
fi
