# Sourced by ci/bench.sh (its header lists the knobs these read): the paired
# tables (ci/bench-pairs.sh): the main table, the simulator's calibration
# from its floor samples, and the MPI_THREAD_MULTIPLE tables.

# ------------------------------------------------- paired samples (main table)
PAIR_COLLS=${BENCH_PAIR_COLLS-barrier allreduce reduce bcast}
PAIRS_DIR=""
if [ -n "$PAIR_COLLS" ] && [ "$STOCK_ONLY" = 0 ]; then
    PAIRS_DIR=$RESULTS/$stamp-$host-pairs
    bash "$ROOT/ci/bench-pairs.sh" --self-test || die "the paired table's arithmetic is wrong (see above)"
    COMPONENT_PATH=$COMPONENT_PATH OMPI_MAJOR=${ompi_version%%.*} BENCH_PAIR_COLLS=$PAIR_COLLS BENCH_PAIR_METRIC=${BENCH_PAIR_METRIC:-auto} \
        bash "$ROOT/ci/bench-pairs.sh" "$PAIRS_DIR" "$BIN/coll_pairs" 'stock=--mca coll ^rdma' 'rdma=' ||
        problems=$((problems + 1))
    # the simulator's shared-memory level, from the floor samples just taken
    echo "== coll-rdma-sim calibration from the paired runs' floor samples (ci/bench-calibration.sh)"
    bash "$ROOT/ci/bench-calibration.sh" "$PAIRS_DIR" "$LOG/cargo-sim.log" ||
        echo "   warning: no simulator calibration from this run (make sim keeps the previous one or the committed file)"
fi

# ------------------------------------------ MPI_THREAD_MULTIPLE (issue 37)
MT_COLLS=${BENCH_MT_COLLS-barrier allreduce reduce bcast}
MT_DIR=""
if [ -n "$MT_COLLS" ] && [ "$STOCK_ONLY" = 0 ]; then
    MT_DIR=$RESULTS/$stamp-$host-thread-multiple
    mt_start=$SECONDS
    mt_threads=${BENCH_MT_THREADS:-2}
    mt_pairs() {  # OUTDIR THREADS VARIANT... -> ci/bench-pairs.sh with the table's knobs
        local out=$1 threads=$2
        shift 2
        COMPONENT_PATH=$COMPONENT_PATH OMPI_MAJOR=${ompi_version%%.*} BENCH_PAIR_COLLS=$MT_COLLS \
            BENCH_PAIR_NPS=${BENCH_MT_NPS:-2} BENCH_PAIR_SIZES=${BENCH_MT_SIZES:-4,4096,65536,1048576} \
            BENCH_PAIRS=${BENCH_MT_PAIRS:-15} BENCH_PAIR_LAUNCHES=${BENCH_MT_LAUNCHES:-3} BENCH_PAIR_METRIC=slowest \
            BENCH_PAIR_THREADS=$threads BENCH_PAIR_ALL_RDMA=0 \
            bash "$ROOT/ci/bench-pairs.sh" "$out" "$BIN/coll_pairs" "$@"
    }
    echo "== MPI_THREAD_MULTIPLE, one thread: coll rdma against stock at that level and against coll rdma at the default level"
    mt_pairs "$MT_DIR/one-thread" 1 'stock=-x COLL_PAIRS_THREAD_LEVEL=multiple --mca coll ^rdma' \
        'rdma=-x COLL_PAIRS_THREAD_LEVEL=multiple' 'rdma-single=' || problems=$((problems + 1))
    echo "== MPI_THREAD_MULTIPLE, $mt_threads threads per rank, each on its own communicator: coll rdma against stock"
    mt_pairs "$MT_DIR/threads-$mt_threads" "$mt_threads" 'stock=--mca coll ^rdma' 'rdma=' || problems=$((problems + 1))
    mt_elapsed=$((SECONDS - mt_start))
    {
        echo "MPI_THREAD_MULTIPLE (issue 37), paired samples ($stamp, load $(cut -d' ' -f1-3 /proc/loadavg) at the end, took ${mt_elapsed}s)"
        echo
        echo "(a) one thread at MPI_THREAD_MULTIPLE (COLL_PAIRS_THREAD_LEVEL=multiple). rdma: coll rdma at"
        echo "MULTIPLE; stock: stock Open MPI at MULTIPLE; rdma-single: coll rdma at the default level"
        echo "(MPI_Init: MPI_THREAD_SINGLE), so that table's ratio is MULTIPLE / SINGLE for coll rdma."
        echo
        cat "$MT_DIR/one-thread/pairs.txt" 2>/dev/null || echo "(no table: see the errors above)"
        echo
        echo "(b) $mt_threads threads per rank at MPI_THREAD_MULTIPLE, each on its own duplicate of"
        echo "MPI_COMM_WORLD, all running the collective at once; rdma: coll rdma, stock: stock Open MPI."
        echo
        cat "$MT_DIR/threads-$mt_threads/pairs.txt" 2>/dev/null || echo "(no table: see the errors above)"
    } > "$MT_DIR/thread-multiple.txt"
    echo "== MPI_THREAD_MULTIPLE tables: ${MT_DIR#"$ROOT"/}/thread-multiple.txt, ${mt_elapsed}s"
fi
