# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read): sections 4-6a (component
# mode), what claims a communicator and what verbose and the events say:
# size-1 communicators, verbose 0, the events file, the plain `--mca coll
# rdma` and README's component list, coll han beside it.

# 4. np=1: size-1 communicators are not claimed (served also checks that
#    every size-1 communicator has its "not claimed" line)
CHECKS=("$SERVED_CHECK" 'ev:any(events("comm_not_claimed"); .size == 1)')
run_test "np1-not-claimed-size1" 1 ok "${V[@]}" -- comm_lifecycle -l 20

# 5. verbose 0 prints nothing
CHECKS=(quiet); run_test "default-verbose-is-silent" 2 ok -- coll_mix -i "$CM_I"
# and verbose 1 is a summary from each communicator's rank 0 (split
# communicators whose rank 0 is another process than the job's)
CHECKS=("$SERVED_CHECK" summary); run_test "verbose-1-summary-coll_mix-np3" 3 ok "${V[@]}" -- coll_mix -i "$CM_I"

# 5a. structured events (docs/events.md) of a known run at verbose 0:
#     nothing printed; every rank's file has only schema-1 lines; comm 0
#     claimed, ready over shm with one agreed barrier radix and window,
#     and freed once per rank; MPI_COMM_SELF declined; and (events) the
#     counts at free equal the calls the program made, per communicator
#     and collective, with a hand-over event for each kind expected
EVENTS_KNOWN='all(.[]; .v == 1)
    and ([.[] | select(.event == "comm_claimed" and .cid == 0)] | length == 3)
    and ([.[] | select(.event == "comm_freed" and .cid == 0)] | length == 3)
    and ([.[] | select(.event == "comm_ready" and .cid == 0)]
        | length == 3 and all(.[]; .transport == "shm" and .size == 3)
          and (map(.barrier.radix) | unique | length == 1)
          and (map(.window_bytes) | unique | length == 1 and .[0] > 0))
    and ([.[] | select(.event == "comm_not_claimed" and .size == 1)] | length >= 3)'
CHECKS=(quiet events "events-file:$EVENTS_KNOWN")
run_test "events-known-run-coll_mix-np3" 3 ok -- coll_mix -i "$CM_I"
CHECKS=(events "events-file:$EVENTS_KNOWN"); run_test "events-known-run-reduce_ops-np3" 3 ok -- reduce_ops "${RO_PARAM[@]}"
# 5b. an events file coll rdma must not create: a link planted where
#     each rank's file would go (rank 0's to a file, rank 1's dangling):
#     both ranks say so, write nothing through the links, and the run
#     goes on right
EVENTS_PLANTED=$LOGROOT/events-planted
if [ "$LIST" = 0 ]; then
    rm -rf "$EVENTS_PLANTED"
    mkdir -p "$EVENTS_PLANTED"
    echo keep >"$EVENTS_PLANTED/victim"
    ln -s victim "$EVENTS_PLANTED/ev.0"
    ln -s absent "$EVENTS_PLANTED/ev.1"
fi
CHECKS=("events-refused:$EVENTS_PLANTED")
run_test "events-file-symlink-refused-np2" 2 ok --mca coll_rdma_events_file "$EVENTS_PLANTED/ev.%r" -- coll_mix -i "$CM_I"

# 6. "--mca coll rdma" alone, and the component list README documents:
#    under rdma alone coll rdma opens the other installed coll components,
#    so every collective entry point (blocking, non-blocking,
#    neighborhood, intercommunicators, size-1 communicators) is provided
#    by Open MPI's own components while coll rdma serves its four.
#    Only its own counts are checked: the other components call its
#    collectives too (e.g. reduce_scatter_block as reduce + scatterv),
#    which the program cannot count.
PLAIN=('ev:opened_underneath(["basic", "libnbc"])'
    "nowarn:coll:rdma:.*(warning|error)" 'ev:[events("comm_unavailable")] | length == 0')
PLAIN_SERVED=()
for kind in barrier bcast allreduce reduce; do
    PLAIN_SERVED+=("ev:every_rank_served(0; \"$kind\"; \"shm\")")
done
for np in 2 4; do
    CHECKS=("${PLAIN[@]}" "${PLAIN_SERVED[@]}")
    run_test "plain-coll-rdma-every-collective-np$np" "$np" ok --mca coll rdma "${V[@]}" -- every_collective -i 3
done
#    A list naming other components is the user's choice, taken as typed.
CHECKS=('ev:opened_underneath([])' "${PLAIN[@]:1}" "${PLAIN_SERVED[@]}")
run_test "readme-coll-list-every-collective-np4" 4 ok --mca coll rdma,tuned,libnbc,basic,inter,self "${V[@]}" \
    -- every_collective -i 3
# the core programs, with the exact counts of section 1
CHECKS=("${PLAIN[@]}" "${SERVED[@]}")
run_test "plain-coll-rdma-barrier_order-np3" 3 ok --mca coll rdma "${V[@]}" -- barrier_order -n "$BO_N" -d 200
CHECKS=("${PLAIN[@]}" "${SERVED[@]}")
run_test "plain-coll-rdma-reduce_ops-np3" 3 ok --mca coll rdma "${V[@]}" -- reduce_ops "${RO[@]}"
CHECKS=("${PLAIN[@]}" "${SERVED[@]}" "$BC_REASON" "$BC_PATHS")
run_test "plain-coll-rdma-bcast-np3" 3 ok --mca coll rdma "${V[@]}" -- bcast "${BC[@]}" "${BC_E[@]}"
# a coll component that cannot be loaded (a file that is no library, in a
#    directory of the component path) is named in a warning; the others
#    carry on (the path is set in each rank's environment by the wrapper,
#    after mpirun's own --mca)
broken_dir=$BUILD/tests/broken-component
mkdir -p "$broken_dir"
printf 'not a shared library\n' >"$broken_dir/mca_coll_broken.so"
CHECKS=("${PLAIN[0]}" "${PLAIN_SERVED[@]}"
    "says:coll:rdma: warning: coll component broken could not be loaded; carrying on without it")
RUN_WRAPPER=(env "OMPI_MCA_mca_base_component_path=$COMPONENT_PATH:$broken_dir")
run_test "plain-coll-rdma-broken-component-np2" 2 ok --mca coll rdma "${V[@]}" -- every_collective -i 1
CHECKS=("${SERVED[@]}" 'ev:opened_underneath([])')
run_test "exclusion-list-untouched-np2" 2 ok --mca coll '^han,adapt' "${V[@]}" -- coll_mix -i 20

# 6a. coll han (priority 35 in Open MPI 5.0, above tuned; 0 in 4.1) and
#     coll rdma (40): by default coll rdma serves its four collectives
#     and han sits underneath; with han above coll rdma
#     (coll_han_priority 50) nothing breaks either. On one node han
#     steps aside on every communicator (it only splits communicators
#     that span nodes): Open MPI 5 says so at coll_base_verbose 10,
#     which these tests check, so that a han that starts serving
#     single-node communicators is noticed (README, "coll han").
HAN=()
[ "$OMPI_MAJOR" -ge 5 ] && HAN=("re:coll:han:comm_query \(0/MPI_COMM_WORLD\): comm has only local processes; disqualifying myself")
HAN_VERBOSE=(--mca coll_base_verbose 10)
[ "$OMPI_MAJOR" -ge 5 ] || HAN_VERBOSE=()
CHECKS=("${SERVED[@]}" "${HAN[@]}")
run_test "han-default-priority-np4" 4 ok "${HAN_VERBOSE[@]}" "${V[@]}" -- coll_mix -i 20
CHECKS=("${SERVED[@]}" "${HAN[@]}")
run_test "han-priority-50-np4" 4 ok --mca coll_han_priority 50 "${HAN_VERBOSE[@]}" "${V[@]}" -- coll_mix -i 20
CHECKS=("${PLAIN[@]}" "${PLAIN_SERVED[@]}" "${HAN[@]}")
run_test "han-priority-50-plain-coll-rdma-np4" 4 ok --mca coll rdma --mca coll_han_priority 50 \
    "${HAN_VERBOSE[@]}" "${V[@]}" -- every_collective -i 2
