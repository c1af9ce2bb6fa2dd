# Sourced by ci/bench.sh and ci/bench-pairs.sh: whether a benchmark run used
# what it measures, read from coll rdma's structured events (docs/events.md),
# never from the wording of its verbose lines. Invariant: a run's events
# directory holds only that run's files (events_mca makes it afresh), so a
# check never counts another run's ranks.

# events_mca DIR: EVENTS_MCA, the mpirun options that make every rank write
# its events to DIR/rank-<rank>.jsonl (DIR emptied first)
events_mca() {
    rm -rf "$1" && mkdir -p "$1" || return 1
    EVENTS_MCA=(--mca coll_rdma_events_file "$1/rank-%r.jsonl")
}

# events_hold DIR JQ [jq options...]: the jq filter JQ holds over all ranks'
# events in DIR as one array (false when there are none)
events_hold() {
    local dir=$1 filter=$2 files=() f
    shift 2
    for f in "$dir"/rank-*.jsonl; do [ -f "$f" ] && files+=("$f"); done
    [ "${#files[@]}" -gt 0 ] || return 1
    jq -e -s "$@" "$filter" "${files[@]}" >/dev/null 2>&1
}

# no_events DIR: coll rdma wrote no event at all (a stock run: --mca coll
# ^rdma keeps the component from being opened)
no_events() {
    local f
    for f in "$1"/rank-*.jsonl; do [ -e "$f" ] && return 1; done
    return 0
}

# served_world COLL NP DIR: each of the NP ranks' MPI_COMM_WORLD served
# COLL(s) itself, and every call it handed over exceeded
# coll_rdma_COLL_max_bytes (the only reason a benchmark may meet: its sizes
# go beyond the default limits)
served_world() {
    events_hold "$3" '[.[] | select(.event == "comm_freed" and .cid == 0)] as $freed
        | ($freed | length) == $np and all($freed[]; .calls[$coll].served > 0)
        and all(.[] | select(.event == "handover" and .cid == 0 and .collective == $coll);
            .category == "size limit" and .limit_parameter == "coll_rdma_\($coll)_max_bytes")' \
        --arg coll "$1" --argjson np "$2"
}

# served_world_all COLL NP DIR: as served_world, and nothing handed over
served_world_all() {
    events_hold "$3" '[.[] | select(.event == "comm_freed" and .cid == 0)] as $freed
        | ($freed | length) == $np and all($freed[]; .calls[$coll].served > 0 and .calls[$coll].handed_over == 0)' \
        --arg coll "$1" --argjson np "$2"
}

# world_ready_field DIR JQ_PATH: a field of rank 0's comm_ready on
# MPI_COMM_WORLD (e.g. .allreduce.degree), empty without one
world_ready_field() {
    local f
    for f in "$1"/rank-*.jsonl; do
        [ -f "$f" ] || continue
        jq -r "select(.event == \"comm_ready\" and .cid == 0 and .rank == 0) | $2" "$f" 2>/dev/null || true
    done | head -n 1
}

# size_handovers COLL DIR: how many ranks handed a COLL on MPI_COMM_WORLD to
# the module underneath for its size (coll_rdma_COLL_max_bytes)
size_handovers() {
    local f files=()
    for f in "$2"/rank-*.jsonl; do [ -f "$f" ] && files+=("$f"); done
    [ "${#files[@]}" -gt 0 ] || { echo 0; return; }
    jq -s --arg coll "$1" '[.[] | select(.event == "handover" and .cid == 0 and .collective == $coll
        and .category == "size limit")] | length' "${files[@]}" 2>/dev/null || echo 0
}

# handed_over_not_for_size COLL DIR: some rank handed a COLL over, on any
# communicator, for another reason than its size
handed_over_not_for_size() {
    handed_over_except "$1" "$2" '["size limit"]'
}

# handed_over_except COLL DIR CATEGORIES: some rank handed a COLL over, on
# any communicator, for a reason whose category (docs/events.md) is not in
# the JSON array CATEGORIES
handed_over_except() {
    events_hold "$2" 'any(.[]; .event == "handover" and .collective == $coll and (.category | IN($ok[]) | not))' \
        --arg coll "$1" --argjson ok "$3"
}

# handover_reasons COLL DIR: the distinct reasons for which ranks handed a
# COLL over on MPI_COMM_WORLD, joined by "; " (empty for none)
handover_reasons() {
    local f files=()
    for f in "$2"/rank-*.jsonl; do [ -f "$f" ] && files+=("$f"); done
    [ "${#files[@]}" -gt 0 ] || return 0
    jq -r -s --arg coll "$1" '[.[] | select(.event == "handover" and .cid == 0 and .collective == $coll) | .reason]
        | unique | join("; ")' "${files[@]}" 2>/dev/null || true
}

# size_limit_of COLL DIR: the coll_rdma_COLL_max_bytes (bytes) above which
# MPI_COMM_WORLD handed a COLL over, from its handover events; empty if none
size_limit_of() {
    local f
    for f in "$2"/rank-*.jsonl; do
        [ -f "$f" ] || continue
        jq -r --arg coll "$1" 'select(.event == "handover" and .cid == 0 and .collective == $coll
            and .category == "size limit") | .limit' "$f" 2>/dev/null || true
    done | head -n 1
}
