# Sourced by ci/bench.sh (its header lists the knobs these read): the
# non-blocking and persistent collectives' tables (issue 35), all paired
# samples through ci/bench-pairs.sh:
#   latency      post + MPI_Wait of each non-blocking call, coll rdma against
#                libnbc (--mca coll ^rdma: Open MPI's own non-blocking
#                collectives), by size;
#   outstanding  8 MPI_Iallreduce of 8 B posted, waited for newest first
#                (coll_pairs -c iallreduce_8rev), the same two jobs;
#   overlap      the OSU-style overlap figure of each non-blocking call,
#                the same two jobs (coll_pairs -M overlap);
#   persistent   MPI_Start + MPI_Wait of each persistent collective against
#                the blocking call, both coll rdma (the blocking job runs
#                coll_pairs with COLL_PAIRS_BLOCKING=1).
# Calls that coll rdma hands to libnbc because their blocking path has no
# run yet (handover category "no resumable schedule") are allowed and noted
# under each table: those rows measure libnbc behind coll rdma.

NB_COLLS=${BENCH_NB_COLLS-ibarrier ibcast iallreduce ireduce}
NB_DIR=""
if [ -n "$NB_COLLS" ] && [ "$STOCK_ONLY" = 0 ]; then
    NB_DIR=$RESULTS/$stamp-$host-nonblocking
    nb_start=$SECONDS
    nb_nps=${BENCH_NB_NPS:-2}
    nb_sizes=${BENCH_NB_SIZES:-4:67108864}
    nb_libnbc='libnbc=--mca coll ^rdma'
    # nb_pairs TABLE COLLS NPS SIZES MODE VARIANT... -> ci/bench-pairs.sh
    # into $NB_DIR/TABLE with the tables' shared knobs
    nb_pairs() {
        local table=$1 colls=$2 nps=$3 sizes=$4 mode=$5
        shift 5
        COMPONENT_PATH=$COMPONENT_PATH OMPI_MAJOR=${ompi_version%%.*} BENCH_PAIR_COLLS=$colls \
            BENCH_PAIR_NPS=$nps BENCH_PAIR_SIZES=$sizes BENCH_PAIR_FACTOR=${BENCH_NB_FACTOR:-8} \
            BENCH_PAIRS=${BENCH_NB_PAIRS:-15} BENCH_PAIRS_OVERSUBSCRIBED=${BENCH_NB_PAIRS_OVERSUBSCRIBED:-45} \
            BENCH_PAIR_LAUNCHES=${BENCH_NB_LAUNCHES:-3} BENCH_PAIR_MODE=$mode BENCH_PAIR_THREADS=1 \
            BENCH_PAIR_HANDOVER_OK='["no resumable schedule"]' \
            bash "$ROOT/ci/bench-pairs.sh" "$NB_DIR/$table" "$BIN/coll_pairs" "$@" || problems=$((problems + 1))
    }
    # ibarrier -> barrier_init, and likewise: the persistent forms of NB_COLLS
    nb_persistent=${BENCH_NB_PERSISTENT_COLLS-$(for c in $NB_COLLS; do printf '%s_init ' "${c#i}"; done)}
    echo "== non-blocking collectives: post + wait, coll rdma against libnbc"
    nb_pairs latency "$NB_COLLS" "$nb_nps" "$nb_sizes" latency "$nb_libnbc" 'rdma='
    if [ "${BENCH_NB_OUTSTANDING-1}" = 1 ]; then
        echo "== 8 MPI_Iallreduce of 8 B outstanding, waited for newest first: coll rdma against libnbc"
        nb_pairs outstanding iallreduce_8rev "$nb_nps" 8 latency "$nb_libnbc" 'rdma='
    fi
    nb_overlap_nps=${BENCH_NB_OVERLAP_NPS-2}
    if [ -n "$nb_overlap_nps" ]; then
        echo "== non-blocking collectives: OSU-style overlap, coll rdma against libnbc"
        nb_pairs overlap "$NB_COLLS" "$nb_overlap_nps" "$nb_sizes" overlap "$nb_libnbc" 'rdma='
    fi
    if [ -n "$nb_persistent" ]; then
        echo "== persistent collectives: start + wait against the blocking call, both coll rdma"
        BENCH_PAIR_ALL_RDMA=1 nb_pairs persistent "$nb_persistent" "${BENCH_NB_PERSISTENT_NPS:-2}" "$nb_sizes" latency \
            'blocking=-x COLL_PAIRS_BLOCKING=1' 'rdma='
    fi
    nb_elapsed=$((SECONDS - nb_start))
    {
        echo "Non-blocking and persistent collectives (issue 35), paired samples ($stamp, load $(cut -d' ' -f1-3 /proc/loadavg) at the end, took ${nb_elapsed}s)"
        for table in latency outstanding overlap persistent; do
            [ -f "$NB_DIR/$table/pairs.txt" ] || continue
            echo
            case $table in
                latency) echo "(a) post + MPI_Wait: rdma, coll rdma; libnbc, Open MPI's own (--mca coll ^rdma)." ;;
                outstanding) echo "(b) 8 MPI_Iallreduce of 8 B posted, then waited for newest first; us per batch of 8." ;;
                overlap) echo "(c) OSU-style overlap of each non-blocking call, coll rdma against libnbc." ;;
                persistent) echo "(d) MPI_Start + MPI_Wait of the persistent form (rdma) against the blocking call (blocking), both coll rdma." ;;
            esac
            echo
            cat "$NB_DIR/$table/pairs.txt"
        done
    } >"$NB_DIR/nonblocking.txt"
    echo "== non-blocking tables: ${NB_DIR#"$ROOT"/}/nonblocking.txt, ${nb_elapsed}s"
fi
