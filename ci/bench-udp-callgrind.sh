#!/usr/bin/env bash
# Instructions per blocking MPI_Bcast over udp, counted by callgrind: a
# figure that does not move with the machine's load, for comparing builds
# (wall-clock pairs at load 35-160 could not tell them apart).
#
# usage: ci/bench-udp-callgrind.sh OUTDIR LABEL:COMPONENT_DIR...
#   each COMPONENT_DIR holds an mca_coll_rdma.so (e.g. build/components of
#   a build of another commit); for each, at each size, REPS runs of
#   bench/bcast_callgrind.c at np 2, one rank in each of two
#   network-namespace hosts (ci/netns/lib.sh), coll_rdma_transport=udp,
#   under valgrind --tool=callgrind counting inside PMPI_Bcast only, the
#   warm-up calls left out. Prints one line per label, size and rank:
#   instructions per call of each run.
# environment: BYTES (sizes, default "8 4096"), REPS (default 3), CALLS
#   (measured calls a run, default 1000), EXTRA_MCA (more mpirun words,
#   e.g. "--mca coll_rdma_udp_protection none").
# Needs root (namespaces) and valgrind.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -ge 2 ] || { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd); shift
for tool in valgrind callgrind_annotate mpicc mpirun; do
    command -v "$tool" >/dev/null || { echo "bench-udp-callgrind: $tool not found"; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "bench-udp-callgrind: needs root (network namespaces)"; exit 2; }
PROG=$ROOT/build/bench/bcast_callgrind
mkdir -p "$ROOT/build/bench"
[ "$PROG" -nt "$ROOT/bench/bcast_callgrind.c" ] || mpicc -O2 -Wall -o "$PROG" "$ROOT/bench/bcast_callgrind.c" || exit 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
. "$ROOT/ci/netns/lib.sh"
netns_up 2 || { echo "bench-udp-callgrind: cannot set up 2 namespace hosts"; exit 1; }
export OMPI_MCA_plm_rsh_agent=$NETNS_RSH
calls=${CALLS:-1000}
status=0
for spec in "$@"; do
    label=${spec%%:*} dir=$(cd "${spec#*:}" && pwd) || exit 2
    for bytes in ${BYTES:-8 4096}; do
        declare -A per_call=()
        for rep in $(seq 1 "${REPS:-3}"); do
            run="$OUT/$label-$bytes-$rep"
            mkdir -p "$run"
            # shellcheck disable=SC2086 # EXTRA_MCA is words for mpirun
            "$NETNS_ENTER" "${NETNS_HOSTS%%,*}" mpirun --host "$NETNS_HOSTS" -np 2 --map-by node \
                --mca mca_base_component_path "SYS_DEFAULT:$dir" --mca coll_rdma_transport udp ${EXTRA_MCA:-} \
                --mca coll_rdma_events_file "$run/events-%r.jsonl" \
                valgrind --tool=callgrind --callgrind-out-file="$run/callgrind.%q{OMPI_COMM_WORLD_RANK}" \
                --toggle-collect=PMPI_Bcast "$PROG" "$calls" "$bytes" >"$run/out.log" 2>&1 ||
                { echo "FAIL $label $bytes B run $rep (log: $run/out.log)"; status=1; continue; }
            # the served calls must be coll rdma's, over udp
            jq -e -s "[.[] | select(.event == \"comm_freed\" and .transport == \"udp\") | .calls.bcast.served] | add == $((calls + 20))" \
                "$run/events-0.jsonl" >/dev/null ||
                { echo "FAIL $label $bytes B run $rep: rank 0's events do not count $((calls + 20)) bcasts served over udp"; status=1; }
            for rank in 0 1; do
                # the dump after the measured calls (file suffix .1)
                total=$(sed -n 's/^summary: //p' "$run/callgrind.$rank.1")
                per_call[$rank]+=" $((total / calls))"
            done
        done
        for rank in 0 1; do echo "$label $bytes B rank $rank ($([ $rank = 0 ] && echo root || echo receiver)): instructions per call:${per_call[$rank]:-}"; done
        unset per_call
    done
done
exit "$status"
