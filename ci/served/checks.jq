# Helpers for ci/mpi-tests.sh's `ev:` checks: questions about the events
# of one test run (docs/events.md), so that each check is one short jq
# expression and no test reads the wording of verbose output.
#
# Input: every event of every process as one array, each with `world` (the
# process's rank in MPI_COMM_WORLD, from its file's name) added; `$np` is
# the job's process count. A check holds when its expression is true.

# The events called NAME, one after the other.
def events($name): .[] | select(.event == $name);
def on($cid): select(.cid == $cid);
def of_rank($rank): select(.rank == $rank);

# comm_ready on communicator CID: every process of the job reported it and
# COND holds for each (the agreed plan, docs/events.md).
def every_rank_ready($cid; cond): [events("comm_ready") | on($cid)] | length == $np and all(.[]; cond);
# ... from the communicator's rank 0 (once or more: context ids are reused)
def rank0_ready($cid; cond): [events("comm_ready") | on($cid) | of_rank(0)] | length > 0 and all(.[]; cond);

# Every process counted at free on CID some calls of COLL served over
# TRANSPORT and none handed over.
def every_rank_served($cid; $coll; $transport):
    [events("comm_freed") | on($cid)]
    | length == $np and all(.[]; .transport == $transport and .calls[$coll].served > 0 and .calls[$coll].handed_over == 0);

# No call handed over anywhere (nor counted so at free).
def nothing_handed_over:
    ([events("handover")] | length == 0) and all(events("comm_freed"); all(.calls[]; .handed_over == 0));

# The first hand-over of COLL whose fields satisfy COND, on any rank.
def handed_over($coll; cond): any(events("handover"); .collective == $coll and cond);
def handed_over_above($parameter): any(events("handover"); .limit_parameter == $parameter);

# CID had no transport on every process, set up failing at STAGE
# (`agreement`: the ranks' settings differ; `transport`), the reason
# matching the regular expression WHY; every call was handed over: none
# served, and (the module underneath's functions installed after the
# first hand-over) no collective counted more than one, but for the
# non-blocking calls queued behind a resumable setup, each counted.
def unavailable_everywhere($cid; $stage; $why):
    ([events("comm_unavailable") | on($cid)]
        | length == $np and all(.[]; .stage == $stage and (.reason | test($why))))
    and ([events("comm_freed") | on($cid)]
        | length == $np and all(.[]; .transport == "no transport"
            and all(.calls | to_entries[]; .value.served == 0 and (.value.handed_over <= 1 or (.key | startswith("i"))))));

# The hierarchy event of CID's rank RANK: the levels its schedules run on.
def hierarchy_of($cid; $rank): [events("hierarchy") | on($cid) | of_rank($rank)] | first;

# Per process and communicator id: no more events NAME about COLL than
# communicators claimed with that id (an autotune runs once per
# communicator).
def once_per_claim($name; $coll):
    group_by(.world) | all(.[];
        (map(select(.event == "comm_claimed")) | group_by(.cid) | map({ key: (.[0].cid | tostring), value: length }) | from_entries) as $claimed
        | map(select(.event == $name and .collective == $coll)) | group_by(.cid)
        | all(.[]; length <= ($claimed[.[0].cid | tostring] // 0)));

# COLL's autotune on comm 0: one plan from rank 0; where it was a trial,
# every rank that chose chose the same value, one of the plan's candidates
# and a row of rank 0's table; with MUST_CHOOSE every rank chose.
def autotune_agreed($coll; $must_choose):
    [events("autotune_plan") | on(0) | select(.collective == $coll)] as $plans
    | [events("autotune") | on(0) | select(.collective == $coll)] as $chosen
    | ($plans | length == 1)
      and if $plans[0].plan == "trial" then
          (if $must_choose then ($chosen | length == $np) else ($chosen | length == 0 or length == $np) end)
          and ($chosen | map(.chosen) | unique | length <= 1)
          and all($chosen[]; .chosen as $value | $plans[0].candidates | index($value) != null)
          and all($chosen[] | select(.rank == 0); .chosen as $value | [.table.rows[].value] | index($value) != null)
        else $chosen | length == 0 end;

# The shm segment's size by its layout (btl-ibmc shm): a 4096-byte header,
# every rank's window rounded up to pages, one ring of 66816 bytes
# (shm/ring.rs RING_BYTES) per ordered pair, the whole rounded up to pages.
def shm_segment_bytes($window; $ranks):
    def pages: ((. + 4095) / 4096 | floor) * 4096;
    (4096 + $ranks * ($window | pages) + $ranks * $ranks * 66816) | pages;

# CID's comm_ready event from rank RANK (the first one: ids are reused).
def ready_of($cid; $rank): [events("comm_ready") | on($cid) | of_rank($rank)] | first;

# Queue pairs across nodes only between the leaders of NODES nodes
# (coll_rdma_hierarchy_queue_pairs_max): rank RANK of CID holds PAIRS verbs
# queue pairs and, as LEADS says, leads its node or reaches its own node
# alone.
def leaders_only_here($cid; $rank; $nodes; $pairs; $leads):
    (ready_of($cid; $rank) | .leaders_only == true and .memory.verbs_queue_pairs == $pairs)
    and (hierarchy_of($cid; $rank) | .levels == "two-level" and .nodes == $nodes and (.node_leader == $rank) == $leads);

# Every rank of CID runs the barrier on two levels, across NODES nodes of
# FEWEST to MOST ranks.
def two_level_barrier_across($cid; $nodes; $fewest; $most):
    every_rank_ready($cid; .barrier.two_level)
    and ([events("hierarchy") | on($cid)]
        | length == $np and all(.[]; .levels == "two-level" and .nodes == $nodes)
        and (map(.node_ranks) | min == $fewest and max == $most));

# Some rank's comm_freed on CID counts calls of COLL served over TRANSPORT.
def served_somewhere($cid; $coll; $transport):
    any(events("comm_freed") | on($cid); .transport == $transport and .calls[$coll].served > 0);

# The bcast multicast counts (comm_freed's bcast_multicast) of the ranks
# whose multicast carried anything, summed: { reports, pieces_sent,
# retransmissions, nacks_sent }.
def multicast_tally:
    [events("comm_freed") | .bcast_multicast // empty
        | select(.pieces_sent + .pieces_delivered + .frames_rejected > 0)]
    | { reports: length, pieces_sent: (map(.pieces_sent) | add // 0),
        retransmissions: (map(.retransmissions) | add // 0), nacks_sent: (map(.nacks_sent) | add // 0) };

# Some communicator's rank 0 counted at free calls of COLL served over one
# of TRANSPORTS (an array of names).
def rank0_served_somewhere($coll; $transports):
    any(events("comm_freed") | of_rank(0); .transport as $t | .calls[$coll].served > 0 and any($transports[]; . == $t));

# The `process` events (what holds for a whole process), one or more per
# process of the job; false when some process wrote none.
def process_facts: [events("process")] as $facts
    | if ($facts | map(.world) | unique | length) == $np then $facts[] else error("a process wrote no process event") end;
# Every process serves MPI_THREAD_MULTIPLE.
def serving_thread_multiple: all(process_facts; .thread_multiple);
# Every process opened underneath coll rdma one of the coll components
# NAMES (an array) that `--mca coll rdma` left out; with [] none at all.
def opened_underneath($names):
    all(process_facts; .components_opened_underneath as $opened
        | if $names == [] then $opened == [] else any($opened[]; IN($names[])) end);
