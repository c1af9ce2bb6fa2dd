#!/usr/bin/env bash
# Compares what each rank of a test run says it did (its expect lines on
# stdout, tests/mpi/common.h) with what coll rdma recorded in that rank's
# events file (docs/events.md): the counts served and handed over per
# communicator and collective, the hand-over reasons, the transport, and
# that every claimed communicator was freed with its counts. Reads no
# verbose output. Prints one line per problem; exit status 1 if any.
#
# usage: ci/events-check.sh RUN_DIR NP [--where-connected]
#   RUN_DIR  holds out/*/rank.N/stdout (mpirun --output-filename) and
#            events/rank-N.jsonl (coll_rdma_events_file=RUN_DIR/events/rank-%r.jsonl)
#   --where-connected  leave out the communicators that had no transport
#            (comm_unavailable); at least one other must have been served
# environment: EXPECT_TRANSPORT  transports served calls may report,
#   separated by spaces (default shm)
set -euo pipefail

dir=${1:?usage: events-check.sh RUN_DIR NP [--where-connected]}
np=${2:?usage: events-check.sh RUN_DIR NP [--where-connected]}
unavailable_ok=0
[ "${3:-}" = --where-connected ] && unavailable_ok=1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v jq >/dev/null || { echo "jq not found (ci/setup.sh installs it)"; exit 1; }

# One event as one line of words for awk; a line jq cannot parse fails the
# check (every line must be valid JSON of schema version 1).
FLATTEN='
if .v != 1 then "badversion \(.v)"
elif .event == "comm_claimed" then "claimed \(.cid) \(.size)"
elif .event == "comm_not_claimed" then "notclaimed \(.cid)"
elif .event == "comm_unavailable" then "unavailable \(.cid)"
elif .event == "fault" then "fault \(.cid) \(.collective)"
elif .event == "comm_ready" then "ready \(.cid) \(.leaders_only)"
elif .event == "handover" then "handover \(.cid) \(.collective) \(.category | gsub(" "; "_")) \(.limit_parameter // "-")"
elif .event == "comm_freed" then
    .cid as $cid | .transport as $transport
    | .calls | to_entries[] | "freed \($cid) \(.key) \(.value.served) \(.value.handed_over) \($transport)"
else empty end'

status=0
found=0
for rank_dir in "$dir"/out/*/rank.*; do
    [ -d "$rank_dir" ] || continue
    found=$((found + 1))
    rank=${rank_dir##*rank.}
    events=$dir/events/rank-$rank.jsonl
    if [ ! -f "$events" ]; then
        echo "rank $rank: no events file $events"; status=1; continue
    fi
    if ! flat=$(jq -r "$FLATTEN" "$events" 2>"$dir/events/jq-rank-$rank.err"); then
        echo "rank $rank: $events is not one JSON object per line: $(head -c 300 "$dir/events/jq-rank-$rank.err")"; status=1; continue
    fi
    problems=$(awk -v rank="$rank" -v want_transport="${EXPECT_TRANSPORT:-shm}" -v unavailable_ok="$unavailable_ok" \
        -f "$here/served/program.awk" -f "$here/served/events.awk" -f "$here/served/verdict.awk" \
        "$rank_dir/stdout" <(printf '%s\n' "$flat"))
    [ -z "$problems" ] || { printf '%s\n' "$problems"; status=1; }
done
[ "$found" = "$np" ] || { echo "output of $found rank(s) found, expected $np"; status=1; }
exit "$status"
