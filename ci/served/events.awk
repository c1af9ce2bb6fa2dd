# coll rdma's events (docs/events.md), one a line as ci/events-check.sh
# flattens them, into the events check's arrays. Hand-overs are classed
# by their category: noncontig (the datatype), above (this collective's
# own size limit), unavailable, leaders, other.
$1 == "badversion" { problem("an event of schema version " $2 ", expected 1"); next }
$1 == "claimed" {
    claimed[$2]++
    if ($3 + 0 < 2) problem("size-" $3 " communicator " $2 " claimed")
    next
}
$1 == "notclaimed" { notclaimed[$2]++; next }
$1 == "ready" { if ($3 == "true") leaders[$2] = 1; next }
$1 == "unavailable" {
    unavailable++; unavail[$2] = 1
    if (unavailable == 1 && !unavailable_ok) problem("comm " $2 ": no transport (comm_unavailable event)")
    next
}
$1 == "fault" { problem("comm " $2 ": a " $3 " failed midway (fault event)"); next }
$1 == "handover" {
    cid = $2; kd = $3; category = $4; parameter = $5
    # A non-blocking or persistent reduction above its blocking call's
    # limit is handed over for the same reason; the test library does not
    # count those calls (Open MPI makes MPI_Iallreduce itself when it
    # creates a communicator), so they are no problem and nothing to match
    blocking_kd = kd; sub(/^i/, "", blocking_kd); sub(/_init$/, "", blocking_kd)
    if (blocking_kd != kd && category == "size_limit" && parameter == "coll_rdma_" blocking_kd "_max_bytes") next
    # ... and one whose blocking call would take a path without a
    # resumable run (single copy, the parallel reduction) is handed over
    # saying so: the cases that make such calls check those reasons.
    if (blocking_kd != kd && category == "no_resumable_schedule") next
    if (category == "datatype") cls = "noncontig"
    else if (category == "size_limit" && (parameter == "coll_rdma_" kd "_max_bytes" ||
        (kd == "bcast" && parameter == "coll_rdma_bcast_single_copy_max_bytes"))) cls = "above"
    else if (category == "transport") { cls = "unavailable"; unavail[cid] = 1 }
    else if (category == "leaders'_queue_pairs") cls = "leaders"
    else cls = "other"
    reasons[cid, kd, cls]++; rsample[cid, kd, cls] = kd " handover event of category " category " (" parameter ")"
    next
}
$1 == "freed" {
    cid = $2; kd = $3; b = $4; fb = $5; tr = $6
    for (k = 7; k <= NF; k++) tr = tr " " $k
    if (b + 0 > 0 && !expected_transport(tr)) problem("comm " cid ": " kd " served over \"" tr "\", expected " want_transport)
    if (kd == "barrier") {
        scount[cid]++; sbar[cid] += b
        if (b + 0 > 0) sused[cid]++
        if (fb + 0 != 0) { sfb[cid] += fb; sfbline[cid] = "comm_freed: " fb " barrier(s) handed over" }
    } else if (kd == "allreduce" || kd == "reduce" || kd == "bcast") {
        rseen[kd]++; rlines[cid, kd]++; rserved[cid, kd] += b; rfall[cid, kd] += fb
    }
    # The non-blocking and persistent kinds (ibarrier, barrier_init, ...)
    # are not counted by the test library; the cases that make them check
    # their counts themselves (every_rank_served in checks.jq).
    next
}
