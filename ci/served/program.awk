# What a test program says it did, for the served check (one rank, one
# process): its expect lines (tests/mpi/common.h) into the arrays
# verdict.awk reads. Used with events.awk (coll rdma's events, flattened
# by ci/events-check.sh), then verdict.awk; see "events" in
# ci/mpi-tests.sh. Variables: rank, want_transport, unavailable_ok.
function problem(msg) { print "rank " rank ": " msg; bad++ }
function expected_transport(tr) { return index(" " want_transport " ", " " tr " ") > 0 }
/^info: context ids from MPI_Comm_c2f/ {
    problem("test programs built without Open MPI internal headers: their context ids may not match coll rdma messages")
}
$1 == "expect:" && $2 == "comm" { ecomms[$3] += $7; eused[$3] += $9; ebar[$3] += $11; next }
$1 == "expect-unclaimed:" && $2 == "comm" { ucomms[$3] += $7; ukind[$3] = $9; next }
$1 == "expect-reduction:" && $2 == "comm" {
    c = $3; kd = $7
    rkey[c, kd] = 1; ecalls[c, kd] += $9; enat[c, kd] += $11; efb[c, kd] += $13
    enc[c, kd] += $15; eab[c, kd] += $17; ebo[c, kd] += $19; etotal[kd] += $9
    next
}
$1 == "expect-bcast:" && $2 == "comm" {
    c = $3; kd = "bcast"
    rkey[c, kd] = 1; ecalls[c, kd] += $7; enat[c, kd] += $9; efb[c, kd] += $11
    eab[c, kd] += $13; enc[c, kd] += 0; ebo[c, kd] += 0; etotal[kd] += $7
    next
}
/^info: bcast parameters / {
    if (index($0, "not registered") > 0 || index($0, "MPI_T unavailable") > 0)
        problem("the program could not read coll_rdma_bcast_max_bytes with MPI_T, so it cannot tell which bcasts coll rdma must serve: " $0)
    next
}
/^info: reduction limits / {
    if (index($0, "not registered") > 0 || index($0, "MPI_T unavailable") > 0)
        problem("the program could not read the coll rdma reduction limits with MPI_T, so it cannot tell which calls coll rdma must serve: " $0)
    next
}
