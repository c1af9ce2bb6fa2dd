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
command -v jq >/dev/null || { echo "jq not found (ci/setup.sh installs it)"; exit 1; }

# One event as one line of words for awk; a line jq cannot parse fails the
# check (every line must be valid JSON of schema version 1).
FLATTEN='
if .v != 1 then "badversion \(.v)"
elif .event == "comm_claimed" then "claimed \(.cid) \(.size)"
elif .event == "comm_not_claimed" then "notclaimed \(.cid)"
elif .event == "comm_unavailable" then "unavailable \(.cid)"
elif .event == "fault" then "fault \(.cid) \(.collective)"
elif .event == "handover" then "handover \(.cid) \(.collective) \(.category | gsub(" "; "_"))"
elif .event == "comm_freed" then
    .cid as $cid | .transport as $transport
    | .calls | to_entries[] | "freed \($cid) \(.key) \(.value.served) \(.value.handed_over) \($transport)"
else empty end'

CHECK_AWK='
function problem(msg) { print "rank " rank ": " msg; bad++ }
function expected_transport(tr) { return index(" " want_transport " ", " " tr " ") > 0 }
# what the program says it did (its stdout)
FILENAME == prog && $1 == "expect:" && $2 == "comm" { ecomms[$3] += $7; eused[$3] += $9; ebar[$3] += $11; next }
FILENAME == prog && $1 == "expect-unclaimed:" && $2 == "comm" { ucomms[$3] += $7; ukind[$3] = $9; next }
FILENAME == prog && $1 == "expect-reduction:" && $2 == "comm" {
    c = $3; kd = $7
    rkey[c, kd] = 1; ecalls[c, kd] += $9; enat[c, kd] += $11; efb[c, kd] += $13
    enc[c, kd] += $15; eab[c, kd] += $17; ebo[c, kd] += $19
    next
}
FILENAME == prog && $1 == "expect-bcast:" && $2 == "comm" {
    c = $3; kd = "bcast"
    rkey[c, kd] = 1; ecalls[c, kd] += $7; enat[c, kd] += $9; efb[c, kd] += $11; eab[c, kd] += $13
    next
}
FILENAME == prog && /^info: (bcast parameters|reduction limits) / {
    if (index($0, "not registered") > 0 || index($0, "MPI_T unavailable") > 0)
        problem("the program could not read coll rdma limits with MPI_T, so it cannot tell which calls coll rdma must serve: " $0)
    next
}
FILENAME == prog && /^info: context ids from MPI_Comm_c2f/ {
    problem("test programs built without Open MPI internal headers: their context ids may not match coll rdma events")
    next
}
FILENAME == prog { next }
# the events, flattened by FLATTEN
$1 == "badversion" { problem("an event of schema version " $2 ", expected 1"); next }
$1 == "claimed" { claimed[$2]++; if ($3 + 0 < 2) problem("size-" $3 " communicator " $2 " claimed"); next }
$1 == "notclaimed" { notclaimed[$2]++; next }
$1 == "unavailable" { unavail[$2] = 1; if (!unavailable_ok && !told_unavailable++) problem("comm " $2 ": no transport (comm_unavailable)"); next }
$1 == "fault" { problem("comm " $2 ": a " $3 " failed midway (fault event)"); next }
$1 == "handover" { reasons[$2, $3, $4]++; if ($4 == "leaders'"'"'_queue_pairs") leaders[$2] = 1; next }
$1 == "freed" {
    c = $2; kd = $3; tr = $6; for (k = 7; k <= NF; k++) tr = tr " " $k
    if (kd == "barrier") {
        freed[c]++; sbar[c] += $4
        if ($4 + 0 > 0) sused[c]++
        if ($5 + 0 != 0) sfb[c] += $5
    } else {
        rlines[c, kd]++; rserved[c, kd] += $4; rfall[c, kd] += $5
    }
    if ($4 + 0 > 0 && !expected_transport(tr)) problem("comm " c ": " kd " served over \"" tr "\", expected " want_transport)
    next
}
END {
    world_expected = ("0" in ecomms) || ("0" in ucomms)
    if (!world_expected) problem("no expect line for MPI_COMM_WORLD (program did not finish?)")
    if (unavailable_ok) {
        for (c in unavail) { delete ecomms[c]; delete claimed[c]; delete freed[c]; delete sfb[c] }
        for (key in rkey) { split(key, kk, SUBSEP); if (kk[1] in unavail) delete rkey[key] }
        for (key in rlines) { split(key, kk, SUBSEP); if (kk[1] in unavail) delete rlines[key] }
        for (key in reasons) { split(key, kk, SUBSEP); if (kk[1] in unavail) delete reasons[key] }
        for (key in rlines) if (rserved[key] > 0) connected_served++
        if (!connected_served) problem("no communicator was served natively: nothing was checked")
    }
    for (c in sfb) problem("comm " c ": " sfb[c] " barrier(s) handed to the fallback")
    for (c in ecomms) {
        if (sused[c] + 0 != eused[c])
            problem("comm " c ": " eused[c] " communicator(s) with barriers had this id, the events free " (sused[c] + 0) " with barriers")
        if (sbar[c] + 0 != ebar[c])
            problem("comm " c ": the program made " ebar[c] " barrier(s), the events count " (sbar[c] + 0) " served")
        if (claimed[c] + 0 < ecomms[c])
            problem("comm " c ": " ecomms[c] " communicator(s) to claim, " (claimed[c] + 0) " comm_claimed event(s)")
    }
    for (c in claimed)
        if (freed[c] + 0 != claimed[c])
            problem("comm " c ": " claimed[c] " comm_claimed but " (freed[c] + 0) " comm_freed event(s)")
    for (c in freed)
        if (!(c in ecomms) && sbar[c] > 0)
            problem("comm " c ": coll rdma served " sbar[c] " barrier(s) on a communicator the program did not use")
    for (c in ucomms)
        if (notclaimed[c] + 0 == 0)
            problem("comm " c " (" ukind[c] "): no comm_not_claimed event")
    for (key in rkey) {
        split(key, kk, SUBSEP); c = kk[1]; kd = kk[2]
        what = "comm " c ": " kd ": "
        if (!((c, kd) in rlines)) { problem(what ecalls[c, kd] " call(s) made, no comm_freed counts"); continue }
        if (c in leaders) {
            if (rserved[c, kd] + rfall[c, kd] != ecalls[c, kd])
                problem(what ecalls[c, kd] " call(s); the events count " (rserved[c, kd] + 0) " served and " (rfall[c, kd] + 0) " handed over (queue pairs only between leaders)")
            if (rfall[c, kd] + 0 < efb[c, kd])
                problem(what efb[c, kd] " call(s) to be handed over at least; the events count " (rfall[c, kd] + 0) " (queue pairs only between leaders)")
            continue
        }
        if (rserved[c, kd] + 0 != enat[c, kd])
            problem(what ecalls[c, kd] " call(s), " enat[c, kd] " to be served natively; the events count " (rserved[c, kd] + 0) " served")
        if (rfall[c, kd] + 0 != efb[c, kd])
            problem(what efb[c, kd] " call(s) to be handed over (" enc[c, kd] " non-contiguous, " eab[c, kd] " above the limit, " ebo[c, kd] " both); the events count " (rfall[c, kd] + 0))
        if (enc[c, kd] > 0 && reasons[c, kd, "datatype"] + 0 == 0)
            problem(what "no handover event of category datatype for the non-contiguous calls")
        if (eab[c, kd] > 0 && reasons[c, kd, "size_limit"] + 0 == 0)
            problem(what "no handover event of category size limit for the calls above the limit")
        if (ebo[c, kd] > 0 && reasons[c, kd, "datatype"] + reasons[c, kd, "size_limit"] == 0)
            problem(what "no handover event for the calls both non-contiguous and above the limit")
    }
    for (key in rlines) {
        split(key, kk, SUBSEP); c = kk[1]; kd = kk[2]
        if (!((c, kd) in rkey) && rserved[c, kd] + rfall[c, kd] > 0)
            problem("comm " c ": the events count " rserved[c, kd] " " kd "(s) served and " rfall[c, kd] " handed over on a communicator where the program made none")
    }
    for (key in reasons) {
        split(key, kk, SUBSEP); c = kk[1]; kd = kk[2]; cls = kk[3]
        if (cls == "datatype") { if (enc[c, kd] + ebo[c, kd] == 0) problem("comm " c ": a " kd " handed over for its datatype, none was made non-contiguous") }
        else if (cls == "size_limit") { if (eab[c, kd] + ebo[c, kd] == 0 && !(c in leaders)) problem("comm " c ": a " kd " handed over above the limit, none was made above it") }
        else if (cls == "leaders'"'"'_queue_pairs") { }
        else problem("comm " c ": a " kd " handed over for a reason of category " cls)
    }
    exit bad > 0
}'

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
    awk -v rank="$rank" -v want_transport="${EXPECT_TRANSPORT:-shm}" -v unavailable_ok="$unavailable_ok" -v prog="$rank_dir/stdout" \
        "$CHECK_AWK" "$rank_dir/stdout" <(printf '%s\n' "$flat") || status=1
done
[ "$found" = "$np" ] || { echo "output of $found rank(s) found, expected $np"; status=1; }
exit "$status"
