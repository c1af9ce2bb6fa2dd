#!/usr/bin/env bash
# Whether a jq expression holds over one MPI job's coll rdma events
# (docs/events.md), as ci/mpi-tests.sh's `ev:` checks read them: every
# rank's events as one array, each event with `world` (its process's rank
# in MPI_COMM_WORLD, from its file's name) added, `$np` set, and the
# helpers of ci/served/checks.jq at hand. For the scripts outside
# ci/mpi-tests.sh (the Soft-RoCE steps); reads no verbose output.
#
# usage: ci/served/events-hold.sh RUN_DIR NP JQ
#   RUN_DIR  holds events/rank-N.jsonl
#            (coll_rdma_events_file=RUN_DIR/events/rank-%r.jsonl)
#   NP       the job's process count: that many files must be there
# Exit 0 when JQ holds (jq -e); else 1, saying why on stdout.
set -uo pipefail

dir=${1:?usage: events-hold.sh RUN_DIR NP JQ}
np=${2:?usage: events-hold.sh RUN_DIR NP JQ}
filter=${3:?usage: events-hold.sh RUN_DIR NP JQ}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
command -v jq >/dev/null || { echo "jq not found (ci/setup.sh installs it)"; exit 1; }

files=()
for f in "$dir"/events/rank-*.jsonl; do [ -f "$f" ] && files+=("$f"); done
if [ "${#files[@]}" != "$np" ]; then
    echo "${#files[@]} events file(s) in $dir/events, expected $np"; exit 1
fi
err=$(jq -e -n --argjson np "$np" -L "$here" \
    "include \"checks\"; [inputs | .world = (input_filename | capture(\"rank-(?<r>[0-9]+)[.]jsonl\$\").r | tonumber)] | $filter" \
    "${files[@]}" 2>&1 >/dev/null) && exit 0
echo "the events in $dir do not satisfy: $filter${err:+ ($(printf '%s' "$err" | head -c 300))}"
exit 1
