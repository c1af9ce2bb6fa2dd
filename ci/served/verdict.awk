# The events check's verdict for one rank, from the arrays program.awk and
# events.awk filled: one line per problem, nothing when all is well.
END {
    world_expected = ("0" in ecomms) || ("0" in ucomms)
    if (unavailable_ok) {
        # leave out what the unconnected communicators made and said
        for (c in unavail) { delete ecomms[c]; delete claimed[c]; delete scount[c] }
        for (key in rkey) { split(key, kk, SUBSEP); if (kk[1] in unavail) delete rkey[key] }
        for (key in rlines) { split(key, kk, SUBSEP); if (kk[1] in unavail) delete rlines[key] }
        for (key in reasons) { split(key, kk, SUBSEP); if (kk[1] in unavail) delete reasons[key] }
        for (c in unavail) delete sfb[c]
        for (key in rlines) if (rserved[key] > 0) connected_served++
        if (!connected_served) problem("no communicator was served natively: nothing was checked")
    }
    for (c in sfb)
        problem("comm " c ": " sfb[c] " barrier(s) handed to the fallback: " sfbline[c])
    for (c in ecomms) {
        if (sused[c] + 0 != eused[c])
            problem("comm " c ": " eused[c] " communicator(s) with barriers had this id, found " (sused[c] + 0) " served line(s) with barriers")
        if (sbar[c] + 0 != ebar[c])
            problem("comm " c ": the program made " ebar[c] " barrier(s), coll rdma reports " (sbar[c] + 0) " served")
        if (claimed[c] + 0 < ecomms[c])
            problem("comm " c ": " ecomms[c] " communicator(s) to claim, found " (claimed[c] + 0) " claimed line(s)")
    }
    for (c in claimed)
        if (scount[c] + 0 != claimed[c])
            problem("comm " c ": " claimed[c] " claimed line(s) but " (scount[c] + 0) " served summary line(s)")
    for (c in scount)
        if (!(c in ecomms) && sbar[c] > 0)
            problem("comm " c ": coll rdma served " sbar[c] " barrier(s) on a communicator the program did not use")
    for (c in ucomms)
        if (notclaimed[c] + 0 == 0)
            problem("comm " c " (" ukind[c] "): no \"not claimed\" line")
    if (!world_expected) problem("no expect line for MPI_COMM_WORLD (program did not finish?)")

    # reductions
    for (key in rkey) {
        split(key, kk, SUBSEP); c = kk[1]; kd = kk[2]
        if (!(kd in rseen)) {
            if (!(kd in told))
                problem("coll rdma printed no \"served ... " kd "(s)\" line, although the program made " etotal[kd] " " kd "(s) on communicators it claims: the component does not serve (or does not report) " kd " yet")
            told[kd] = 1
            continue
        }
        what = "comm " c ": " kd ": "
        if (c in leaders) {
            # Only the leaders connect across nodes: the program cannot tell
            # which calls that hands over (the ring is off, some roots are
            # refused), so every call must be accounted for, and the
            # reasons are checked below.
            if (rserved[c, kd] + rfall[c, kd] != ecalls[c, kd])
                problem(what ecalls[c, kd] " call(s); coll rdma reports " (rserved[c, kd] + 0) " served and " (rfall[c, kd] + 0) " handed over (queue pairs only between leaders)")
            # (it can only hand over more: what the contract hands over stays handed over)
            if (rfall[c, kd] + 0 < efb[c, kd])
                problem(what efb[c, kd] " call(s) to be handed to the fallback at least; coll rdma reports " (rfall[c, kd] + 0) " (queue pairs only between leaders)")
            continue
        }
        if (rserved[c, kd] + 0 != enat[c, kd])
            problem(what ecalls[c, kd] " call(s), " enat[c, kd] " to be served natively; coll rdma reports " (rserved[c, kd] + 0) " served")
        if (rfall[c, kd] + 0 != efb[c, kd])
            problem(what efb[c, kd] " call(s) to be handed to the fallback (" enc[c, kd] " non-contiguous, " eab[c, kd] " above coll_rdma_" kd "_max_bytes, " ebo[c, kd] " both); coll rdma reports " (rfall[c, kd] + 0))
        if (enc[c, kd] > 0 && reasons[c, kd, "noncontig"] + 0 == 0)
            problem(what "no \"" kd " handed to the module underneath: the datatype is not contiguous\" line")
        if (eab[c, kd] > 0 && reasons[c, kd, "above"] + 0 == 0)
            problem(what "no \"" kd " handed to the module underneath: ... coll_rdma_" kd "_max_bytes ...\" line")
        if (ebo[c, kd] > 0 && reasons[c, kd, "noncontig"] + reasons[c, kd, "above"] == 0)
            problem(what "no \"" kd " handed to the module underneath\" line for calls both non-contiguous and above the limit")
    }
    for (key in rlines) {
        split(key, kk, SUBSEP); c = kk[1]; kd = kk[2]
        if (!((c, kd) in rkey) && rserved[c, kd] + rfall[c, kd] > 0)
            problem("comm " c ": coll rdma reports " rserved[c, kd] " " kd "(s) served and " rfall[c, kd] " handed over on a communicator where the program made none")
    }
    for (key in reasons) {
        split(key, kk, SUBSEP); c = kk[1]; kd = kk[2]; cls = kk[3]
        if (cls == "unavailable" || cls == "other")
            problem("comm " c ": " rsample[key])
        else if (cls == "noncontig" && enc[c, kd] + ebo[c, kd] == 0)
            problem("comm " c ": no non-contiguous " kd " was made there, yet: " rsample[key])
        else if (cls == "above" && eab[c, kd] + ebo[c, kd] == 0 && !(c in leaders))
            problem("comm " c ": no " kd " above the limit was made there, yet: " rsample[key])
        else if (cls == "leaders" && !(c in leaders))
            problem("comm " c ": handed over because only leaders hold queue pairs, but coll rdma never said that only leaders connect there: " rsample[key])
    }
}
