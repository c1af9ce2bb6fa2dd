# coll rdma's verbose lines (coll_rdma_verbose 1) into the served check's
# arrays: claimed and not-claimed lines, the summaries at free, the
# hand-over reasons by class, transport-unavailable lines, and whether only
# the nodes' leaders hold queue pairs across nodes. The fallback of
# ci/mpi-tests.sh's served check where jq is missing (events.awk otherwise).
{
    i = index($0, "coll:rdma: comm ")
    if (i == 0) next
    s = substr($0, i)
    n = split(s, f, " ")
    cid = f[3]
    j = index(s, " handed to the module underneath: ")
    if (j > 0) {
        head = substr(s, 1, j - 1); nh = split(head, hw, " "); kd = hw[nh]
        reason = substr(s, j + length(" handed to the module underneath: "))
        if (index(reason, "not contiguous") > 0) cls = "noncontig"
        else if (index(reason, "coll_rdma_" kd "_max_bytes") > 0) cls = "above"
        else if (kd == "bcast" && index(reason, "coll_rdma_bcast_single_copy_max_bytes") > 0) cls = "above"
        else if (index(reason, "transport unavailable") > 0) { cls = "unavailable"; unavail[cid] = 1 }
        else if (index(reason, "hold queue pairs across nodes") > 0) cls = "leaders"
        else cls = "other"
        reasons[cid, kd, cls]++; rsample[cid, kd, cls] = s
        next
    }
    if (index(s, ": queue pairs across nodes only between the ") > 0) { leaders[cid] = 1; next }
    if (index(s, ": served ") > 0) {
        b = ""; fb = ""; tr = ""; what = ""
        for (k = 1; k <= n; k++) {
            if (f[k] == "served") { b = f[k + 1]; what = f[k + 2] }
            if (f[k] == "over") tr = f[k + 1]
            if (f[k] == "handed") fb = f[k - 1]
        }
        sub(/,$/, "", tr)
        if (b !~ /^[0-9]+$/ || fb !~ /^[0-9]+$/) { problem("cannot parse: " s); next }
        if (what == "allreduce(s)" || what == "reduce(s)" || what == "bcast(s)") {
            kd = substr(what, 1, length(what) - 3)
            rseen[kd]++; rlines[cid, kd]++; rserved[cid, kd] += b; rfall[cid, kd] += fb
            if (b + 0 > 0 && !expected_transport(tr)) problem("comm " cid ": served over \"" tr "\", expected " want_transport ": " s)
            next
        }
        if (what != "barrier(s)") next
        scount[cid]++; sbar[cid] += b
        if (b + 0 > 0) sused[cid]++
        if (fb + 0 != 0) { sfb[cid] += fb; sfbline[cid] = s }
        if (b + 0 > 0 && !expected_transport(tr)) problem("comm " cid ": served over \"" tr "\", expected " want_transport ": " s)
    } else if (index(s, ": claimed at priority ") > 0) {
        j = index(s, "\" size ")
        sz = substr(s, j + 7); sub(/:.*/, "", sz)
        claimed[cid]++
        if (sz + 0 < 2) problem("size-" sz " communicator claimed: " s)
    } else if (index(s, ": not claimed") > 0) {
        notclaimed[cid]++
    } else if (index(s, ": transport unavailable") > 0) {
        unavailable++; unavail[cid] = 1
        if (unavailable == 1 && !unavailable_ok) problem("transport unavailable: " s)
    }
}
