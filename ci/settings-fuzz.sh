#!/usr/bin/env bash
# Random legal settings of coll rdma against the MPI test programs: each
# iteration draws a process count and about a third of the tuner's
# parameters, each from values at the edges of what its rule in
# coll-rdma/src/glue/params/table.rs accepts (the least, the most, just
# past a power of two, "choose", "never"), and runs the non-blocking,
# persistent and blocking programs of tests/mpi under them. Every program
# checks its own results against references it computes another way, so a
# run passes only when each program exits 0 and says "passed on". Not part
# of `make check` (minutes to hours): `make fuzz-settings` runs it; a
# failure keeps its log, which starts with the mpirun command that
# reproduces it.
#
# usage: ci/settings-fuzz.sh [--transport shm|udp] [--iterations N]
#                            [--seed S] [--nps "N..."]
#   --transport   shm (default): one machine, shared memory, some
#                 iterations pretending several nodes (two levels over shm);
#                 udp: 4 network-namespace hosts (ci/netns, needs root;
#                 without it SKIPPED), coll_rdma_transport udp, with the udp
#                 and bcast parameters and injected loss, duplication and
#                 reordering drawn too
#   --iterations  draws of settings (default 20)
#   --seed        seed of the draws (default: the time); the same seed and
#                 transport draw the same settings
#   --nps         process counts to draw from (default "2 3 4 5"; udp
#                 "3 4 5 8")
# environment: SETTINGS_FUZZ_LOGDIR (default build/settings-fuzz), where the
#   failing runs' logs go (with udp, a directory every host sees);
#   SETTINGS_FUZZ_TIMEOUT seconds per program run (default 400).
# The last line is "settings fuzz: N runs, N failed (seed S)"; exit status 1
# when a run failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${MPI_TESTS_BUILD_DIR:-$ROOT/build}
LOGDIR=${SETTINGS_FUZZ_LOGDIR:-$BUILD/settings-fuzz}
RUN_TIMEOUT=${SETTINGS_FUZZ_TIMEOUT:-400}
TRANSPORT=shm ITERATIONS=20 SEED=$(date +%s) NPS= INSIDE_HOSTS=
while [ $# -gt 0 ]; do
    case $1 in
        --transport) TRANSPORT=${2:?--transport needs shm or udp}; shift ;;
        --iterations) ITERATIONS=${2:?--iterations needs a number}; shift ;;
        --seed) SEED=${2:?--seed needs a number}; shift ;;
        --nps) NPS=${2:?--nps needs process counts}; shift ;;
        # the udp bed's first host runs the draws (internal)
        --inside) INSIDE_HOSTS=${2:?}; shift ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        *) echo "settings-fuzz: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done
case $TRANSPORT in shm|udp) ;; *) echo "settings-fuzz: --transport takes shm or udp" >&2; exit 2 ;; esac
[[ $ITERATIONS =~ ^[0-9]+$ && $SEED =~ ^[0-9]+$ ]] || { echo "settings-fuzz: --iterations and --seed take numbers" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if [ "$TRANSPORT" = udp ] && [ -z "$INSIDE_HOSTS" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "SKIPPED settings fuzz over udp: it needs root (network namespaces)"
        exit 0
    fi
    bash "$ROOT/ci/mpi-tests.sh" --build-only >/dev/null || exit 1
    . "$ROOT/ci/netns/lib.sh"
    netns_up 4 || { echo "settings-fuzz: cannot set up 4 namespace hosts"; exit 1; }
    export NETNS_ID NETNS_HOSTS NETNS_STATE NETNS_HOME NETNS_RSH NETNS_ENTER
    export OMPI_MCA_plm_rsh_agent=$NETNS_RSH
    "$NETNS_ENTER" "${NETNS_HOSTS%%,*}" bash "$0" --transport udp --iterations "$ITERATIONS" \
        --seed "$SEED" ${NPS:+--nps "$NPS"} --inside "$NETNS_HOSTS"
    exit $?
fi
[ -n "$INSIDE_HOSTS" ] || bash "$ROOT/ci/mpi-tests.sh" --build-only >/dev/null || exit 1

# The values drawn, per parameter (without coll_rdma_): the edges of each
# rule, so that a draw meets what a site may legally set and our own
# tests do not (one-byte segments are refused by the rule, 64 is its least).
declare -A VALUES=(
    [barrier_radix]="0 1 2 5 64" [spin_polls]="-1 0 1 100000"
    [allreduce_degree]="0 1 2 3 64" [allreduce_segment_size]="64 72 1000 8192 1048576"
    [allreduce_exchange_max]="-1 0 8 100" [allreduce_max_bytes]="0 1 64 16384 100000000"
    [allreduce_parallel_min_bytes]="0 1 4096 16384 2147483647" [ring_segment_size]="64 4096 65536"
    [allreduce_ring_min_bytes]="0 64 16384 2147483647" [reduce_degree]="0 1 2 64"
    [reduce_segment_size]="64 8192 1048576" [reduce_max_bytes]="0 8 8192 1000000"
    [reduce_parallel_min_bytes]="0 8192 2147483647" [reduce_ring_min_bytes]="0 8192 2147483647"
    [reduce_parallel_slices_min_bytes]="0 131072" [bcast_window]="1 2 64 4096"
    [bcast_max_bytes]="-2 -1 0 100 1048576" [autotune]="0 1" [autotune_calls]="1 3"
    [stall_warning]="0 10" [fault_timeout_s]="0 120"
)
if [ "$TRANSPORT" = shm ]; then
    VALUES+=(
        [bcast_slot_size]="64 100 4096 1048576"
        [bcast_single_copy_min_bytes]="0 1 16384 2147483647" [bcast_single_copy_max_bytes]="-1 0 65536"
        [test_pretend_nodes]="0 0 2 3" [test_pretend_no_cross_memory]="0 1"
        [hierarchy_queue_pairs_max]="-1 0 1 64"
    )
    NPS=${NPS:-2 3 4 5}
    PLACEMENT=(--oversubscribe --bind-to none --mca btl self,vader)
else
    VALUES+=(
        [udp_window]="1 2 16 1024 65536" [udp_ack_interval]="1 2 32 4096" [udp_cwnd_initial]="1 8 100000"
        [udp_ssthresh_initial]="1 2 1024" [udp_fragment_bytes]="0 100 600 1400" [udp_loss_tolerance]="0 10 100"
        [udp_repair_backoff]="0 2" [udp_segmentation_offload]="0 1" [udp_protection]="encrypt authenticate none"
        [udp_cipher]="aegis-128l aes-256-gcm" [bcast_co_roots]="-1 0 1 3" [bcast_nack]="0 1"
        [bcast_timeout_ms]="1 20 200" [bcast_tail_repeat]="0 1 64" [bcast_parity_percent]="0 25 100"
        [bcast_ack_interval]="1 8 4096" [bcast_fragment_size]="64 4096 1048576" [udp_ring_max_bytes]="0 262144"
        [test_udp_loss_percent]="0 0 5 20" [test_udp_duplicate_percent]="0 0 10 50"
        [test_udp_reorder_percent]="0 0 10 50"
    )
    NPS=${NPS:-3 4 5 8}
    PLACEMENT=(--host "$INSIDE_HOSTS" --map-by node --oversubscribe --bind-to none --mca btl self,vader,tcp
        --mca coll_rdma_transport udp)
fi
# The programs and their shortened arguments; -F 0: a setting may hand a
# call to libnbc, which refuses a request freed while started.
# Over udp the bcasts are shorter: a draw of 64-byte fragments, a window
# of one and 20 % loss moves about 130 fragments a second (300 KB
# bcasts took 600 s, every result right).
BCAST_MAX=300000
[ "$TRANSPORT" = shm ] || BCAST_MAX=65536
PROGRAMS=(
    "nonblocking_reductions -r 12 -n 20 -F 0"
    "nonblocking_bcast -r 12 -n 20 -m $BCAST_MAX"
    "nonblocking_barrier -n 200"
    "coll_mix -i 40"
    "every_collective -i 1"
)
# Only the shipped component, from our build, whatever the machine has.
COMPONENT_PATH=SYS_DEFAULT:$BUILD/components
[ -f "$BUILD/components/mca_coll_rdma.so" ] || { echo "settings-fuzz: no $BUILD/components/mca_coll_rdma.so: run make build first" >&2; exit 1; }

mkdir -p "$LOGDIR"
RANDOM=$SEED
pick() { local values=("$@"); printf '%s' "${values[RANDOM % ${#values[@]}]}"; }
mapfile -t KEYS < <(printf '%s\n' "${!VALUES[@]}" | sort)
read -ra NP_CHOICES <<<"$NPS"
runs=0 failed=0
for ((i = 1; i <= ITERATIONS; i++)); do
    np=$(pick "${NP_CHOICES[@]}")
    mca=() drawn=""
    for key in "${KEYS[@]}"; do
        ((RANDOM % 3 == 0)) || continue
        read -ra values <<<"${VALUES[$key]}"
        value=$(pick "${values[@]}")
        mca+=(--mca "coll_rdma_$key" "$value")
        drawn+=" $key=$value"
    done
    for program in "${PROGRAMS[@]}"; do
        read -ra words <<<"$program"
        log=$LOGDIR/$TRANSPORT-$SEED-$i-${words[0]}.log
        cmd=(mpirun -np "$np" "${PLACEMENT[@]}" --mca mca_base_component_path "$COMPONENT_PATH"
            --mca coll_rdma_verbose 1 "${mca[@]}" "$BUILD/tests/${words[0]}" "${words[@]:1}")
        t0=$SECONDS
        { printf '%q ' "${cmd[@]}"; echo; } >"$log"
        timeout -k 5 "$RUN_TIMEOUT" "${cmd[@]}" </dev/null >>"$log" 2>&1
        rc=$?
        runs=$((runs + 1))
        why=
        if [ "$rc" != 0 ]; then why="exit status $rc"
        elif ! grep -q "passed on" "$log"; then why="no \"passed on\" line"
        elif grep -qiE "panick|error" "$log"; then why="an error line"
        elif [ "$TRANSPORT" = udp ] && ! grep -q " over udp" "$log"; then why="not served over udp"
        fi
        if [ -n "$why" ]; then
            failed=$((failed + 1))
            echo "FAILED ($why, ${log#"$ROOT"/}) iteration $i, np $np, ${words[0]}:$drawn"
        else
            rm -f "$log"
        fi
        echo "   iteration $i np $np ${words[0]}: $((SECONDS - t0))s${why:+ FAILED}"
    done
done
echo "settings fuzz: $runs runs, $failed failed (seed $SEED, transport $TRANSPORT)"
[ "$failed" = 0 ]
