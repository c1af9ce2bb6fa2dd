#!/usr/bin/env bash
# usage: ci/served/summary-check.sh DIR
# Checks coll_rdma_verbose 1's summary (docs/verbose.md) of the run in DIR
# (ci/mpi-tests.sh's layout: world rank W's output in DIR/out/*/rank.W/,
# its events in DIR/events/rank-W.jsonl) against the events, which the
# component records by another path:
#  - no coll:rdma line is longer than 200 characters after Open MPI's
#    "[host:pid] " prefix;
#  - no rank's detail ("comm C rank R: ...") is printed but warnings and
#    errors;
#  - the lines said when communicators became ready are exactly one per
#    comm_ready event of a communicator's rank 0, from that process, with
#    its size, transport, barrier radix and tree degrees;
#  - the lines said when communicators were freed (one per family of
#    calls made: blocking, non-blocking, persistent) give, together,
#    exactly the counts of each comm_freed event of a communicator's rank
#    0, from that process: its transport and each collective's served and
#    handed-over counts;
#  - the caveats on calls with a non-commutative op handed over are
#    exactly one per such handover event of a communicator's rank 0 (one
#    per collective and reason category), from that process.
# Prints what differs and exits 1, else prints nothing and exits 0.
set -euo pipefail
dir=$1
problems=()
said_ready=$(mktemp) said_freed=$(mktemp) logged_ready=$(mktemp) logged_freed=$(mktemp)
said_caveats=$(mktemp) logged_caveats=$(mktemp)
trap 'rm -f "$said_ready" "$said_freed" "$logged_ready" "$logged_freed" "$said_caveats" "$logged_caveats"' EXIT

shopt -s nullglob
outputs=("$dir"/out/*/rank.*)
[ "${#outputs[@]}" -gt 0 ] || { echo "no per-rank output in $dir/out"; exit 1; }
for out in "${outputs[@]}"; do
    world=${out##*rank.}
    lines=$(cat "$out"/std* 2>/dev/null | grep 'coll:rdma: ' | sed -E 's/^\[[^]]*\] //' || true)
    [ -n "$lines" ] || continue
    long=$(printf '%s\n' "$lines" | awk 'length($0) > 200' | head -2)
    [ -z "$long" ] || problems+=("world rank $world printed lines over 200 characters: $long")
    detail=$(printf '%s\n' "$lines" | grep -E '^coll:rdma: comm [0-9]+ rank [0-9]+: ' | grep -Ev '^coll:rdma: comm [0-9]+ rank [0-9]+: (warning|error|freed with)' | head -2 || true)
    [ -z "$detail" ] || problems+=("world rank $world printed a rank's detail at verbose 1: $detail")
    printf '%s\n' "$lines" | sed -nE "s/^coll:rdma: comm ([0-9]+) \(([0-9]+) ranks\) over ([a-z+]+): barrier radix ([0-9]+)( two-level)?, allreduce degree ([0-9]+)( two-level)?, reduce degree ([0-9]+), .*/$world \1 \2 \3 \4 \6 \8/p" >>"$said_ready"
    printf '%s\n' "$lines" | sed -nE "s/^coll:rdma: comm ([0-9]+): ([a-z_]+) with a non-commutative op handed to the module underneath \(([^)]*)\): .*/$world \1 \2 \3/p" >>"$said_caveats"
    printf '%s\n' "$lines" | sed -nE 's/^coll:rdma: comm ([0-9]+) freed: served over ([^:]+): ([^;]*); handed over: ([^;]*).*/\1|\2|\3|\4/p' |
        while IFS='|' read -r cid transport served handed; do
            printf '%s\n' "$served" | tr ',' '\n' | while read -r name count; do
                over=$(printf '%s\n' "$handed" | tr ',' '\n' | awk -v n="$name" '$1 == n { print $2 }')
                echo "$world $cid $transport $name $count ${over:-0}"
            done
        done >>"$said_freed"
done

events=("$dir"/events/rank-*.jsonl)
[ "${#events[@]}" -gt 0 ] || { echo "no events in $dir/events"; exit 1; }
for file in "${events[@]}"; do
    world=${file##*/rank-}
    world=${world%.jsonl}
    jq -r --arg w "$world" 'select(.event == "comm_ready" and .rank == 0)
        | "\($w) \(.cid) \(.size) \(.transport) \(.barrier.radix) \(.allreduce.degree) \(.reduce.degree)"' "$file" >>"$logged_ready"
    jq -r --arg w "$world" 'select(.event == "comm_freed" and .rank == 0) | . as $e | .calls | to_entries[]
        | select((.key | IN("barrier", "allreduce", "reduce", "bcast")) or .value.served + .value.handed_over > 0)
        | "\($w) \($e.cid) \($e.transport) \(.key) \(.value.served) \(.value.handed_over)"' "$file" >>"$logged_freed"
    jq -r --arg w "$world" 'select(.event == "handover" and .rank == 0 and .commutative == false)
        | "\($w) \(.cid) \(.collective) \(.category)"' "$file" >>"$logged_caveats"
done

compare() {  # compare WHAT SAID LOGGED
    local diff
    diff=$(diff <(sort "$2") <(sort "$3") || true)
    [ -z "$diff" ] || problems+=("$1 lines differ from the events (< said, > events): $(printf '%s\n' "$diff" | grep '^[<>]' | head -6 | paste -sd';')")
}
[ -s "$logged_ready" ] || problems+=("no communicator became ready (no comm_ready event of a rank 0)")
compare "ready" "$said_ready" "$logged_ready"
compare "freed" "$said_freed" "$logged_freed"
compare "non-commutative caveat" "$said_caveats" "$logged_caveats"

[ "${#problems[@]}" = 0 ] && exit 0
printf '%s\n' "${problems[@]}"
exit 1
