#!/usr/bin/env bash
# Paired latency of stock Open MPI and coll rdma by message size
# (bench/coll_pairs.c): for each process count and collective, one job per
# variant is started at once; the jobs take turns in short samples (a floor
# sample, then every variant, order reversed every round), so each pair of
# samples is a few milliseconds apart and sees the same state of the VM; and
# every round visits every size, so a size's pairs are spread over the whole
# series instead of falling into one of the VM's core placements together.
# Used by ci/bench.sh (Open MPI 4.1, the host) and ci/ompi5/bench.sh (5.0).
#
#   ci/bench-pairs.sh OUTDIR BIN NAME=MPIRUN_ARGS... 
#     OUTDIR  tables (pairs.txt), data files and plots go there; logs in OUTDIR/logs
#     BIN     the coll_pairs program
#     NAME=MPIRUN_ARGS  one job per variant, e.g. 'stock=--mca coll ^rdma' 'rdma='.
#             The jobs take turns measuring the floor; the one named rdma is compared with
#             every other one (its runs are checked to be served by coll rdma,
#             so are those of a variant named rdma-SOMETHING, e.g. coll rdma
#             at another thread level; the others to have no trace of it).
# environment (defaults in brackets):
#   BENCH_PAIR_COLLS   collectives ["barrier allreduce reduce bcast ibarrier"] (barrier
#                      and ibarrier, MPI_Ibarrier posted then waited: size 0);
#                      on request any other of coll_pairs -c: iallreduce,
#                      ireduce, ibcast (posted then waited), the persistent
#                      barrier_init, allreduce_init, reduce_init, bcast_init,
#                      iallreduce_8rev (ci/bench/nonblocking.sh)
#   BENCH_PAIR_MODE    latency, or overlap: coll_pairs -M overlap, the
#                      OSU-style overlap of a non-blocking call, tabled as
#                      each variant's median overlap % and the median of the
#                      per-pair differences (rdma - other) [latency]
#   BENCH_PAIR_HANDOVER_OK  handover categories (docs/events.md) a coll rdma
#                      job may meet besides "size limit", as a JSON array,
#                      e.g. '["no resumable schedule"]' for the non-blocking
#                      calls whose blocking path has no run yet; their
#                      reasons are noted under the series' table [[]]
#   BENCH_PAIR_NPS     process counts ["2 4"]; above 2 oversubscribed, --bind-to none
#   BENCH_PAIR_SIZES   MIN:MAX bytes [4:67108864], BENCH_PAIR_FACTOR step [4]
#   BENCH_PAIRS        rounds (pairs) per size where the ranks fit the cores [21]
#   BENCH_PAIRS_OVERSUBSCRIBED  rounds per size where the ranks outnumber the
#                      cores [3 x BENCH_PAIRS]: there a pair's ratio spreads
#                      several times wider (IQR 0.2-0.9 of the median at np=4
#                      on 2 cores, 0.02-0.15 at np=2), and with 21 rounds two
#                      runs agreed within 15 % on 24 of 40 np=4 ratios; with
#                      63, on 34 of 39 and 31 of 40 (two pairs of runs,
#                      2026-11-28, docs/bench/2026-11-28)
#   BENCH_PAIR_LAUNCHES  the pairs of a series come from this many launches
#                      (every variant started afresh each time, the rounds
#                      shared out among them) [3]: a job's own state (where
#                      its shared memory landed) moved coll rdma's time at
#                      4 B by up to 1.4x from one launch to the next with the
#                      floor unchanged, while each launch's own pairs agreed
#                      within a few percent, so one launch per row let that
#                      luck decide the row; from 6 launches the table's
#                      launch_ci95 gives the median ratio's interval with
#                      the launch as the unit
#   BENCH_SAMPLE_MS    length of one sample in ms [20]
#   BENCH_PAIR_METRIC  a sample's figure (coll_pairs -S): slowest, the slowest
#                      rank's mean time per call; span, the mean time from
#                      the last rank's entry to the last rank's exit, calls
#                      separated by coll_pairs' own barrier (every rank on
#                      one node only); evened, the span with the mix of
#                      which rank entered last evened out (each such rank's
#                      calls weighted alike: the rank that waited longest in
#                      the separating barrier is woken last, so the mix
#                      follows the implementation, see bench/coll_pairs.c);
#                      batch, rank 0's wall time per call
#                      and that barrier after it (the span leaves out what a
#                      rank that spins while it waits costs the ranks not yet
#                      in the call; batch counts it, diluted by the barrier's
#                      own time); auto, span where the ranks outnumber the
#                      cores and slowest elsewhere [slowest]
#   BENCH_SPREAD_MAX   a row whose spread (IQR of the per-pair ratios / their
#                      median) exceeds this is marked NOT SETTLED [0.2]; so is
#                      a row with fewer than 5 pairs used
#   BENCH_FLOOR_DRIFT  a pair whose floor before and after (the same size's
#                      floor in the next round) differ by more than
#                      this factor is left out of the ratio, if at least half
#                      the pairs remain [1.5]
#   BENCH_PHASE_SPLIT  floor (us) that separates the VM's fast placement from
#                      its slow one [0.25]: the pairs whose floor stayed below
#                      it and those whose floor stayed above it get a median
#                      ratio each (columns fast and slow, "ratio/pairs"),
#                      because the two placements change the ratio itself,
#                      not only the times (shared/notes/benchmarking-on-this-vm.md)
#   BENCH_PAIR_TIMEOUT seconds allowed for one series (all sizes of one
#                      collective at one np) [900]
#   BENCH_PAIR_MPIRUN  the command that starts a job, words split on blanks
#                      [mpirun]; e.g. ci/bench-udp.sh runs mpirun inside a
#                      namespace host with the hosts' environment in front
#   BENCH_PAIR_PLACEMENT  mpirun arguments that replace the default
#                      placement and transports (--bind-to core or, above 2
#                      ranks, --oversubscribe --bind-to none; --mca btl
#                      self,vader), for jobs across hosts
#   BENCH_PAIR_ALL_RDMA  1: every variant is coll rdma (e.g. one parameter
#                      changed), so each must be served by it [0: only the
#                      one named rdma and those named rdma-*, the others
#                      must not load it]
#   BENCH_PAIR_THREADS threads per rank (coll_pairs -H) [1]: from 2, every
#                      sample runs in that many threads at once, each on its
#                      own duplicate of MPI_COMM_WORLD (at
#                      MPI_THREAD_MULTIPLE), the figure the slowest thread's
#                      mean time per call; coll rdma must then have served
#                      the collective on every thread's communicator
#   COMPONENT_PATH     mca_base_component_path for every job (the caller sets it)
#   OMPI_MAJOR         4 or 5 (the caller sets it; 5: component path in the
#                      ranks' environment, as ci/mpi-tests.sh does)
# ci/bench-pairs.sh --self-test checks the table's arithmetic (medians,
# quartiles, spread, the floor-drift rule, the pooling of launches, the
# settled mark) on made-up samples whose answers are worked out by hand
# below.
# Exit status: 0, or 1 when a series failed (timeout, wrong result, a job not
# served as it should be).
set -euo pipefail

SELF_TEST=0
if [ "${1:-}" = --self-test ]; then
    # the analysis on made-up samples with known answers (no MPI)
    SELF_TEST=1
    set -- "$(mktemp -d)" none 'stock=' 'rdma='
fi
OUT=$1 BIN=$2
shift 2
[ $# -ge 2 ] || { echo "bench-pairs: need two variants or more" >&2; exit 2; }
COLLS=${BENCH_PAIR_COLLS-barrier allreduce reduce bcast ibarrier}
NPS=${BENCH_PAIR_NPS:-2 4}
SIZES=${BENCH_PAIR_SIZES:-4:67108864}
FACTOR=${BENCH_PAIR_FACTOR:-4}
PAIRS=${BENCH_PAIRS:-21}
PAIRS_OVER=${BENCH_PAIRS_OVERSUBSCRIBED:-$((3 * PAIRS))}
LAUNCHES=${BENCH_PAIR_LAUNCHES:-3}
SAMPLE_MS=${BENCH_SAMPLE_MS:-20}
SPREAD_MAX=${BENCH_SPREAD_MAX:-0.2}
FLOOR_DRIFT=${BENCH_FLOOR_DRIFT:-1.5}
PHASE_SPLIT=${BENCH_PHASE_SPLIT:-0.25}
SERIES_TIMEOUT=${BENCH_PAIR_TIMEOUT:-900}
THREADS=${BENCH_PAIR_THREADS:-1}
MODE=${BENCH_PAIR_MODE:-latency}
HANDOVER_OK=$(jq -c --argjson extra "${BENCH_PAIR_HANDOVER_OK:-[]}" -n '["size limit"] + $extra') ||
    { echo "bench-pairs: BENCH_PAIR_HANDOVER_OK must be a JSON array of categories" >&2; exit 2; }
case $MODE in latency|overlap) ;; *) echo "bench-pairs: BENCH_PAIR_MODE must be latency or overlap" >&2; exit 2 ;; esac
OMPI_MAJOR=${OMPI_MAJOR:-4}
[ "$SELF_TEST" = 0 ] || { SPREAD_MAX=0.2; FLOOR_DRIFT=1.5; PHASE_SPLIT=0.25; LAUNCHES=2; PAIRS=5; PAIRS_OVER=5; }
[ "$LAUNCHES" -ge 1 ] && [ "$LAUNCHES" -le "$PAIRS" ] && [ "$LAUNCHES" -le "$PAIRS_OVER" ] ||
    { echo "bench-pairs: BENCH_PAIR_LAUNCHES must be 1..BENCH_PAIRS (and at most BENCH_PAIRS_OVERSUBSCRIBED)" >&2; exit 2; }
oversubscribed() { [ "$1" -gt "$(nproc)" ]; }  # NP
pairs_at() { if oversubscribed "$1"; then echo "$PAIRS_OVER"; else echo "$PAIRS"; fi; }  # NP -> rounds per size
# rounds of each launch: the first (rounds % LAUNCHES) launches take one more
rounds_of_launch() {  # LAUNCH NP
    local pairs
    pairs=$(pairs_at "$2")
    echo $(( pairs / LAUNCHES + ($1 <= pairs % LAUNCHES ? 1 : 0) ))
}
NAMES=() ARGS=()
for v in "$@"; do NAMES+=("${v%%=*}"); ARGS+=("${v#*=}"); done
RDMA=-
for i in "${!NAMES[@]}"; do [ "${NAMES[$i]}" = rdma ] && RDMA=$i; done
[ "$RDMA" != - ] || { echo "bench-pairs: no variant named rdma" >&2; exit 2; }
K=${#NAMES[@]}
LOG=$OUT/logs
mkdir -p "$LOG"
TABLE=$OUT/pairs.txt
: >"$TABLE"
problems=0

# whether a job served what it measures: its events (docs/events.md)
. "$(dirname "${BASH_SOURCE[0]}")/bench/events.sh"

# served COLL NP DIR: the events in DIR say that every rank's MPI_COMM_WORLD
# (with BENCH_PAIR_THREADS above 1: each thread's communicator, never comm 0)
# served COLL(s) itself; calls handed over are allowed only for size limits
# (coll_rdma_COLL_max_bytes), counted in the table's notes.
served() {
    local cids='.cid == 0' want=$2
    [ "$THREADS" -le 1 ] || { cids='.cid != 0'; want=$(($2 * THREADS)); }
    events_hold "$3" "[.[] | select(.event == \"comm_freed\" and $cids and .calls[\$coll].served > 0)] | length == \$want" \
        --arg coll "$1" --argjson want "$want"
}

# counted_name OUTFILE COLL: the name under which the job's calls are
# counted in coll rdma's events, as the job says ("# counted as:", e.g.
# allreduce for a job measuring the blocking form, iallreduce for
# iallreduce_8rev); COLL when it does not say
counted_name() {
    local name
    name=$(awk '/^# counted as:/ { print $4; exit }' "$1" 2>/dev/null)
    echo "${name:-$2}"
}

metric_at() { # NP -> coll_pairs' -S for that process count
    case ${BENCH_PAIR_METRIC:-slowest} in
        auto) oversubscribed "$1" && echo span || echo slowest ;;
        *) echo "${BENCH_PAIR_METRIC:-slowest}" ;;
    esac
}

series() {  # NP COLL -> every launch of the series; 0 if all went well
    local launch bad=0
    for launch in $(seq 1 "$LAUNCHES"); do
        launch_once "$1" "$2" "$launch" || bad=1
    done
    return $bad
}

launch_once() {  # NP COLL LAUNCH -> runs every variant's job together; 0 if all went well
    local np=$1 coll=$2 launch=$3 ctl pids=() j rc bad=0
    local place=(--bind-to core) over=() btl=(--mca btl self,vader) launcher
    [ "$np" -le 2 ] || { place=(--bind-to none); over=(--oversubscribe); }
    [ -z "${BENCH_PAIR_PLACEMENT:-}" ] || { read -ra place <<<"$BENCH_PAIR_PLACEMENT"; over=() btl=(); }
    read -ra launcher <<<"${BENCH_PAIR_MPIRUN:-mpirun}"
    local sizes=$SIZES threads=()
    case $coll in barrier|ibarrier|barrier_init) sizes=0 ;; esac
    [ "$THREADS" -le 1 ] || threads=(-H "$THREADS")
    ctl=/dev/shm/coll-pairs-$$-np$np-$coll
    rm -f "$ctl"
    for j in "${!NAMES[@]}"; do
        local env_path=() opt_path=() args=() EVENTS_MCA=()
        events_mca "$LOG/np$np-$coll-${NAMES[$j]}.$launch.events"
        read -ra args <<<"${ARGS[$j]}"
        if [ "$OMPI_MAJOR" -ge 5 ]; then
            env_path=(env "OMPI_MCA_mca_base_component_path=$COMPONENT_PATH")
        else
            opt_path=(--mca mca_base_component_path "$COMPONENT_PATH")
        fi
        timeout -k 5 "$SERIES_TIMEOUT" "${launcher[@]}" -np "$np" "${over[@]}" "${place[@]}" "${btl[@]}" \
            "${opt_path[@]}" "${args[@]}" "${EVENTS_MCA[@]}" --mca coll_rdma_verbose 1 \
            "${env_path[@]}" "$BIN" -J "$j" -K "$K" -C "$ctl" -c "$coll" -m "$sizes" -f "$FACTOR" \
            -P "$(rounds_of_launch "$launch" "$np")" -t "$SAMPLE_MS" -T 120 -S "$(metric_at "$np")" -M "$MODE" "${threads[@]}" \
            </dev/null >"$LOG/np$np-$coll-${NAMES[$j]}.$launch.out" 2>"$LOG/np$np-$coll-${NAMES[$j]}.$launch.err" &
        pids+=($!)
    done
    for j in "${!NAMES[@]}"; do
        rc=0
        wait "${pids[$j]}" || rc=$?
        local why=""
        case $rc in
            0) ;;
            3) why="wrong result" ;;
            124|137) why="timeout after ${SERIES_TIMEOUT}s" ;;
            *) why="exit status $rc" ;;
        esac
        local events=$LOG/np$np-$coll-${NAMES[$j]}.$launch.events
        local counted
        counted=$(counted_name "$LOG/np$np-$coll-${NAMES[$j]}.$launch.out" "$coll")
        local is_rdma=0
        case ${NAMES[$j]} in rdma|rdma-*) is_rdma=1 ;; esac
        [ "${BENCH_PAIR_ALL_RDMA:-0}" = 1 ] && is_rdma=1
        if [ -z "$why" ] && [ "$is_rdma" = 1 ] && ! served "$counted" "$np" "$events"; then
            why="coll rdma did not serve the calls (no comm_freed event counting ${counted}s on every rank)"
        fi
        if [ -z "$why" ] && [ "$is_rdma" = 1 ] && handed_over_except "$counted" "$events" "$HANDOVER_OK"; then
            why="coll rdma handed $counted(s) to the module underneath for a reason not in $HANDOVER_OK (handover events)"
        fi
        if [ -z "$why" ] && [ "$is_rdma" = 0 ] && ! no_events "$events"; then
            why="coll rdma was loaded in a job meant to be without it (it wrote events)"
        fi
        if [ -n "$why" ]; then
            echo "   np=$np $coll ${NAMES[$j]}, launch $launch: $why (logs: $LOG/np$np-$coll-${NAMES[$j]}.$launch.*)" >&2
            bad=1
        fi
    done
    rm -f "$ctl"
    return $bad
}

# pooled NP COLL -> every launch's sample and floor lines, rounds renumbered
# so that they follow on from the launch before (floor K of a launch stays
# the floor before its round K and after its round K-1), and after each
# launch's lines "launch L FIRST LAST": the rounds that launch measured
pooled() {
    local launch first=0 rounds
    for launch in $(seq 1 "$LAUNCHES"); do
        rounds=$(rounds_of_launch "$launch" "$1")
        cat "$LOG/np$1-$2-"*".$launch.out" 2>/dev/null |
            awk -v first="$first" '$1 == "sample" || $1 == "overlap" { $5 += first; print } $1 == "floor" { $3 += first; print }'
        echo "launch $launch $first $((first + rounds - 1))"
        first=$((first + rounds + 1))
    done
}

# the table's statistics: AWK_STATS, summarize, summarize_overlap, header,
# header_overlap
. "$(dirname "${BASH_SOURCE[0]}")/bench/pair-stats.sh"

# plot DAT BASE NP COLL: latency (log-log, both implementations and the memcpy
# line) and ratio (median with the quartiles of the per-pair ratios) against
# size, as DAT without .dat plus -latency.png / -ratio.png
PLOTS=()
# run_gnuplot STEM: the gnuplot script on stdin after the settings every
# plot shares (PNG, size on x); errors in STEM.gnuplot.log; 1 if it failed
run_gnuplot() {
    { printf '%s\n' 'set terminal pngcairo size 900,600 noenhanced' 'set xlabel "bytes"' 'set key top left' 'set grid'; cat; } |
        gnuplot 2>"$1.gnuplot.log" || { echo "   gnuplot failed, see $1.gnuplot.log" >&2; return 1; }
}

# plottable DAT: gnuplot is there and DAT has a size above 0 (a barrier's
# only size, 0, has no place on a log axis)
plottable() {
    command -v gnuplot >/dev/null || { echo "   no gnuplot (Debian package gnuplot-nox): no plots" >&2; return 1; }
    awk '$1 > 0' "$1" | grep -q .
}

plot() {
    local dat=$1 base=$2 np=$3 coll=$4 stem=${1%.dat}
    plottable "$dat" || return 0
    run_gnuplot "$stem" <<EOF_PLOT || return 0
set output "$stem-latency.png"
set title "$coll, np=$np: us per call (median of paired samples) against size"
set logscale xy
set ylabel "us"
plot "$dat" using (\$1 > 0 ? \$1 : 1/0):2 with linespoints title "$base", \
     "" using (\$1 > 0 ? \$1 : 1/0):3 with linespoints title "coll rdma", \
     "" using (\$1 > 0 ? \$1 : 1/0):(\$4 > 0 ? \$4 : 1/0) with lines dashtype 2 title "memcpy of N bytes (one rank)", \
     "" using (\$1 > 0 ? \$1 : 1/0):(\$5 > 0 ? \$5 : 1/0) with lines dashtype 3 title "cache-line round trip, ranks 0-1 (floor)"
set output "$stem-ratio.png"
set title "$coll, np=$np: coll rdma / $base, median of per-pair ratios, bars: quartiles"
unset logscale y
set logscale x
set ylabel "ratio (below 1: coll rdma faster)"
set yrange [0:*]
plot "$dat" using (\$1 > 0 ? \$1 : 1/0):6:7:8 with yerrorlines title "rdma / $base", \
     1 with lines dashtype 2 title "1.0"
EOF_PLOT
    PLOTS+=("$stem-latency.png" "$stem-ratio.png")
}

# plot_overlap DAT BASE NP COLL: each variant's overlap % against size, as
# DAT without .dat plus .png
plot_overlap() {
    local dat=$1 base=$2 np=$3 coll=$4 stem=${1%.dat}
    plottable "$dat" || return 0
    run_gnuplot "$stem" <<EOF_PLOT || return 0
set output "$stem.png"
set title "$coll, np=$np: overlap % (OSU-style, median of paired samples) against size"
set logscale x
set ylabel "overlap %"
plot "$dat" using 1:2 with linespoints title "$base", "" using 1:3 with linespoints title "coll rdma"
EOF_PLOT
    PLOTS+=("$stem.png")
}

if [ "$SELF_TEST" = 1 ]; then
    # size 64: stock 10 us in every round, rdma 5 6 7 8 100 -> ratios .5 .6 .7
    # .8 10; floors all 1: every pair used, median .7, Q1 .6, Q3 .8, spread
    # .2/.7 = .29 > .2: NOT SETTLED; rdma median 7, floor max(1, .5) = 1.
    # size 256: the same, but the floor jumps to 5 between rounds 3 and 4: pair
    # 3 left out (4 of 5 remain), ratios .5 .6 .7 10 -> median .65, Q1 .575,
    # Q3 .7 + .25 * 9.3 = 3.025 (linear interpolation), spread 2.45/.65 =
    # 3.77; rdma_us, the median of all its samples, 7; floor median 1.
    # size 1024: ratios 1.0 1.05 0.95 1.0 1.02 -> median 1.0, Q1 1.0, Q3 1.02,
    # spread .02: settled; memcpy 3 us above the floor: to_floor = 10/3.
    # Phases (split 0.25 us): sizes 64 and 256 have floors of 1 and 5, all
    # slow: slow = the median of their used pairs (.7 of 5, .65 of 4), fast
    # none; size 1024's floor is 0.1, all fast: fast 1.0 of 5, slow none.
    # The five rounds come from two launches (3 + 2 rounds), pooled as
    # rounds 0-2 and 4-5: the pairs and floors below are those of rounds 0-4
    # of one launch, each launch also measuring its own floor before its
    # first round (launch 2's floor 0 is round 3's floor before).
    for launch in 1 2; do
        first=$(( launch == 1 ? 0 : 3 )) last=$(( launch == 1 ? 2 : 4 ))
        {
            for k in $(seq "$first" "$last"); do
                local_k=$((k - first))
                r=(5 6 7 8 100)
                echo "sample 0 allreduce 64 $local_k 10 1"; echo "sample 1 allreduce 64 $local_k ${r[$k]} 1"
                echo "sample 0 allreduce 256 $local_k 10 1"; echo "sample 1 allreduce 256 $local_k ${r[$k]} 1"
                q=(10 10.5 9.5 10 10.2)
                echo "sample 0 allreduce 1024 $local_k 10 1"; echo "sample 1 allreduce 1024 $local_k ${q[$k]} 1"
                o=(0 10 20 30 40) p=(1 2 3 4 5)
                echo "overlap 0 iallreduce 64 $local_k ${o[$k]} ${p[$k]} 0 0"; echo "overlap 1 iallreduce 64 $local_k 50 2 0 0"
            done
            for k in $(seq "$first" $((last + 1))); do
                echo "floor 64 $((k - first)) 1 0.5"
                echo "floor 256 $((k - first)) $([ "$k" -ge 4 ] && echo 5 || echo 1) 0.5"
                echo "floor 1024 $((k - first)) 0.1 3"
            done
        } >"$LOG/np2-allreduce-stock.$launch.out"
    done
    # overlap: libnbc 0 10 20 30 40 %, rdma 50 % in every round -> medians
    # 20 and 50, differences 50 40 30 20 10 -> median 30, 5 pairs (no
    # interval below 6); pure times 1..5 -> 3, and 2.
    got_overlap=$(summarize_overlap 2 allreduce 0 | awk '{ print $3, $4, $5, $6, $7, $8, $9, $10 }')
    want_overlap="64 20.0 50.0 30.0 - 5 3.000 2.000"
    got=$(summarize 2 allreduce 0 | awk '{ print $3, $6, $7, $8, $11, $12, $13, $14, $15, $16, $17 }')
    want=$'64 0.700 0.29 5/5 7.00 - 0.700/5 - - NOT SETTLED\n256 0.650 3.77 4/5 7.00 - 0.650/4 - - NOT SETTLED\n1024 1.000 0.02 5/5 3.33 1.000/5 - - - settled'
    got=$(printf '%s\n' "$got" | sed 's/ *$//')
    # The interval over launches: six launches of two rounds each, launch L
    # with ratios 0.1 L and 0.1 L + 1 (floors steady): the launches' own
    # medians are 0.6 .. 1.1, so launch_ci95 is their 1st and 6th (n = 6),
    # 0.600-1.100, while the twelve pairs pooled give the 2nd and 11th of
    # .1 .2 .3 .4 .5 .6 1.1 .. 1.6: 0.200-1.500.
    rm -f "$LOG"/*.out
    LAUNCHES=6 PAIRS=12
    for launch in 1 2 3 4 5 6; do
        {
            echo "sample 0 allreduce 64 0 10 1"; echo "sample 1 allreduce 64 0 $launch 1"
            echo "sample 0 allreduce 64 1 10 1"; echo "sample 1 allreduce 64 1 $((launch + 10)) 1"
            for k in 0 1 2; do echo "floor 64 $k 1 0.5"; done
        } >"$LOG/np2-allreduce-stock.$launch.out"
    done
    got_launches=$(summarize 2 allreduce 0 | awk '{ print $3, $8, $14, $15 }')
    want_launches="64 12/12 0.200-1.500 0.600-1.100"
    rm -rf "$OUT"
    # The median's interval on its own, worked out by hand: 1..100 -> the
    # 40th and 61st (n/2 - 9.8 down, n/2 + 1 + 9.8 up); 1..25 -> 7th and 19th
    # (12.5 - 4.9 down, 13.5 + 4.9 up); 1..6 -> 1st and 6th (clamped); 5 -> none.
    ci=$(awk "$AWK_STATS"'BEGIN { for (n = 1; n <= 100; n++) a[n] = n; printf "%s", median_ci95(a, 100)
        printf " %s %s %s\n", median_ci95(a, 25), median_ci95(a, 6), median_ci95(a, 5) }')
    want_ci="40.000-61.000 7.000-19.000 1.000-6.000 -"
    if [ "$got" = "$want" ] && [ "$ci" = "$want_ci" ] && [ "$got_overlap" = "$want_overlap" ] && [ "$got_launches" = "$want_launches" ]; then
        echo "bench-pairs self-test: passed (3 rows, 4 intervals, 1 overlap row, 1 interval over launches)"; exit 0
    fi
    printf 'bench-pairs self-test: FAILED\nwant:\n%s\n%s\n%s\n%s\ngot:\n%s\n%s\n%s\n%s\n' "$want" "$want_ci" "$want_overlap" "$want_launches" \
        "$got" "$ci" "$got_overlap" "$got_launches" >&2
    exit 1
fi

t0=$SECONDS
declare -A ROWS
NOTES=()
for np in $NPS; do
    for coll in $COLLS; do
        echo "== pairs: $coll at np=$np, ${NAMES[*]} taking turns, $(pairs_at "$np") rounds of ${SAMPLE_MS} ms samples from $LAUNCHES launch(es), each round visiting every size"
        if ! series "$np" "$coll"; then problems=$((problems + 1)); fi
        for b in "${!NAMES[@]}"; do
            [ "$b" = "$RDMA" ] && continue
            [ "$K" -gt 2 ] && echo "   rdma against ${NAMES[$b]}:"
            if [ "$MODE" = overlap ]; then
                rows=$(summarize_overlap "$np" "$coll" "$b")
                header_overlap "$b" | sed 's/^/   /'
            else
                rows=$(summarize "$np" "$coll" "$b")
                header "$b" | sed 's/^/   /'
            fi
            printf '%s\n' "$rows" | sed 's/^/   /'
            ROWS[$b]="${ROWS[$b]:-}$rows"$'\n'
            [ -f "$OUT/np$np-$coll-vs-${NAMES[$b]}.dat" ] && plot "$OUT/np$np-$coll-vs-${NAMES[$b]}.dat" "${NAMES[$b]}" "$np" "$coll"
            [ -f "$OUT/np$np-$coll-overlap-vs-${NAMES[$b]}.dat" ] && plot_overlap "$OUT/np$np-$coll-overlap-vs-${NAMES[$b]}.dat" "${NAMES[$b]}" "$np" "$coll"
        done
        counted=$(counted_name "$LOG/np$np-$coll-rdma.1.out" "$coll")
        handed=$(size_handovers "$counted" "$LOG/np$np-$coll-rdma.1.events")
        [ "$handed" = 0 ] || echo "   note: coll rdma handed $counted(s) above its size limit to the module underneath on $handed rank(s): those rows measure that module behind coll rdma"
        if [ "$HANDOVER_OK" != '["size limit"]' ]; then
            reasons=$(handover_reasons "$counted" "$LOG/np$np-$coll-rdma.1.events")
            [ -z "$reasons" ] || NOTES+=("np=$np $counted: coll rdma handed some calls to the module underneath ($reasons): the rows of those sizes measure that module behind coll rdma")
        fi
    done
done
elapsed=$((SECONDS - t0))
{
    for b in "${!NAMES[@]}"; do
        [ "$b" = "$RDMA" ] && continue
        echo "coll rdma against ${NAMES[$b]} (${ARGS[$b]:-default selection}), paired samples:"
        echo
        if [ "$MODE" = overlap ]; then header_overlap "$b"; else header "$b"; fi
        printf '%s' "${ROWS[$b]:-}" | grep -v '^$' || true
        echo
    done
    [ "$MODE" = latency ] || echo "Overlap (coll_pairs -M overlap): per sample, every rank times N calls posted then waited for (pure), then N calls with a spin of the slowest rank's pure time between post and wait (no MPI call in it); overlap % = 100 (1 - (total - compute) / pure) from the means over the ranks; 100: all hidden, 0: none, below 0: the computation delayed the call. diff_pts: median of the per-pair differences rdma - other, in percentage points; pure: median post+wait us."
    [ "${#NOTES[@]}" = 0 ] || printf 'Note: %s\n' "${NOTES[@]}"
    echo "Jobs: $(for j in "${!NAMES[@]}"; do printf '%s: mpirun %s; ' "${NAMES[$j]}" "${ARGS[$j]:-(default selection)}"; done)"
    if [ -n "${BENCH_PAIR_PLACEMENT:-}" ]; then echo "Placement: ${BENCH_PAIR_MPIRUN:-mpirun} $BENCH_PAIR_PLACEMENT."
    else echo "np=2 --bind-to core, more ranks --oversubscribe --bind-to none; --mca btl self,vader."; fi
    [ "$THREADS" -le 1 ] || echo "Threads: $THREADS per rank (coll_pairs -H $THREADS, MPI_THREAD_MULTIPLE), each on its own duplicate of MPI_COMM_WORLD, running the collective at once; a sample's figure is the slowest thread's mean time per call."
    for np in $NPS; do
        [ "$MODE" = latency ] || continue   # the overlap line above says what an overlap sample is
        case $(metric_at "$np") in
            span) echo "np=$np: a sample's figure is the mean span of a call, from the last rank's entry to the last rank's exit, calls separated by coll_pairs' own barrier (the same in every job): with more ranks than cores, a rank's own time says where the scheduler put the wait." ;;
            evened) echo "np=$np: a sample's figure is the span of a call (as for span) with the ranks' turns at entering last weighted alike: the mean over the ranks that entered last in at least 1 % of the calls of the mean span of those calls." ;;
            batch) echo "np=$np: a sample's figure is rank 0's wall time per call and the barrier after it (coll_pairs' own, the same in every job)." ;;
            *) echo "np=$np: a sample's figure is the slowest rank's mean time per call, calls separated by MPI_Barrier." ;;
        esac
    done
    echo "Rounds per size: $(for np in $NPS; do printf '%s at np=%s, ' "$(pairs_at "$np")" "$np"; done)from $LAUNCHES launch(es) of every job, samples of about $SAMPLE_MS ms, sizes $SIZES (x$FACTOR); took ${elapsed}s."
    unsettled=$(printf '%s' "${ROWS[@]}" | grep -c 'NOT SETTLED' || true)
    [ "${#PLOTS[@]}" = 0 ] || { echo "plots:"; printf '  %s\n' "${PLOTS[@]}"; }
    [ "$unsettled" = 0 ] || echo "WARNING: $unsettled row(s) NOT SETTLED (spread above $SPREAD_MAX): their ratio may move between runs"
} >"$TABLE"
[ "${#PLOTS[@]}" = 0 ] || { echo "== plots:"; printf '   %s\n' "${PLOTS[@]}"; }
[ "$problems" = 0 ]
