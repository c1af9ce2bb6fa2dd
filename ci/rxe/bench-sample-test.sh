#!/usr/bin/env bash
# ci/rxe/bench-sample.sh (the Soft-RoCE benches' sample) on this host,
# without guests: coll rdma over shm, 2 ranks, coll_latency's bcast. A
# sample coll rdma served gives coll_latency's average; where the events
# check does not hold (coll rdma excluded with --mca coll ^rdma, or an
# expectation the run cannot meet) `fail` makes the sample FAIL and `note`
# keeps the average with a note on stderr; a job that fails is FAIL. A
# stand-in mpirun (known output and events) checks that the average is the
# one coll_latency printed for the collective asked for.
#
# usage: ci/rxe/bench-sample-test.sh   (last line: "bench-sample: N passed, N failed")
# Needs build/components/mca_coll_rdma.so (make build); builds coll_latency.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
LATENCY=build/bench/coll_latency
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ -f build/components/mca_coll_rdma.so ] || { echo "bench-sample: SKIPPED: no build/components/mca_coll_rdma.so (make build)"; exit 0; }
command -v jq >/dev/null || { echo "bench-sample: SKIPPED: no jq (ci/setup.sh installs it)"; exit 0; }
if [ ! -x "$LATENCY" ] || [ bench/coll_latency.c -nt "$LATENCY" ]; then
    mkdir -p "$(dirname "$LATENCY")"
    mpicc -O2 -Wall -o "$LATENCY" bench/coll_latency.c || { echo "bench-sample: cannot build $LATENCY"; exit 1; }
fi
BENCH_RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/bench-sample-test.XXXXXX")
trap 'rm -rf "$BENCH_RUN_DIR"' EXIT
export BENCH_RUN_DIR
ITERS=50
# shellcheck source=ci/rxe/bench-sample.sh
. ci/rxe/bench-sample.sh

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAILED: $*"; }
SERVED='every_rank_served(0; "bcast"; "shm")'
JOB=(-np 2 --mca btl self,vader --mca mca_base_component_path "SYS_DEFAULT:$ROOT/build/components" --mca coll_rdma_transport shm)
PROGRAM=("$LATENCY" -q -c bcast -m 4096 -w 2 -n 20)

# served: the average is the third field of coll_latency's own bcast line
own=$(mpirun "${JOB[@]}" "${PROGRAM[@]}" 2>/dev/null | awk '$1 == "bcast" { print $3 }')
got=$(bench_sample served bcast 2 "$SERVED" fail "${JOB[@]}" "${PROGRAM[@]}" 2>"$BENCH_RUN_DIR/stderr")
if [[ $got =~ ^[0-9]+(\.[0-9]+)?$ ]] && [[ $own =~ ^[0-9]+(\.[0-9]+)?$ ]] && [ ! -s "$BENCH_RUN_DIR/stderr" ]; then
    pass "a served sample gives an average ($got us; coll_latency's own run: $own us)"
else
    fail "a served sample gave '$got' (coll_latency's own run: '$own'); stderr: $(head -3 "$BENCH_RUN_DIR/stderr")"
fi

# the average is the third field of the collective's line: a stand-in
# mpirun prints known lines and writes events that satisfy SERVED
mkdir -p "$BENCH_RUN_DIR/stand-in"
cat >"$BENCH_RUN_DIR/stand-in/mpirun" <<'STAND_IN'
#!/usr/bin/env bash
pattern=$3 # bench_sample passes --mca coll_rdma_events_file PATTERN first
for rank in 0 1; do
    printf '{"v":1,"event":"comm_freed","cid":0,"rank":%s,"size":2,"transport":"shm","failed":false,"calls":{"bcast":{"served":7,"handed_over":0}}}\n' "$rank" >"${pattern/\%r/$rank}"
done
printf 'barrier 0 1.5 2.5\nbcast 4096 12.345 20.0\nbcast_tput 4096 99.0\n'
STAND_IN
chmod +x "$BENCH_RUN_DIR/stand-in/mpirun"
got=$(PATH=$BENCH_RUN_DIR/stand-in:$PATH bench_sample stand-in bcast 2 "$SERVED" fail -np 2 prog 2>"$BENCH_RUN_DIR/stderr")
if [ "$got" = 12.345 ] && [ ! -s "$BENCH_RUN_DIR/stderr" ]; then
    pass "the average is the third field of the bcast line (12.345 from the stand-in's output)"
else
    fail "from the stand-in's output the sample gave '$got', expected 12.345; stderr: $(head -3 "$BENCH_RUN_DIR/stderr")"
fi

# not served: coll rdma excluded, so its events are missing
got=$(bench_sample excluded bcast 2 "$SERVED" fail "${JOB[@]}" --mca coll '^rdma' "${PROGRAM[@]}" 2>"$BENCH_RUN_DIR/stderr")
if [ "$got" = FAIL ] && grep -q 'events file(s)' "$BENCH_RUN_DIR/stderr"; then
    pass "with coll ^rdma the sample is FAIL: $(head -1 "$BENCH_RUN_DIR/stderr")"
else
    fail "with coll ^rdma the sample gave '$got'; stderr: $(head -3 "$BENCH_RUN_DIR/stderr")"
fi

# an expectation the events contradict: fail, or a note with `note`
WRONG='every_rank_ready(0; .transport == "verbs")'
got=$(bench_sample contradicted bcast 2 "$WRONG" fail "${JOB[@]}" "${PROGRAM[@]}" 2>"$BENCH_RUN_DIR/stderr")
if [ "$got" = FAIL ] && grep -q 'do not satisfy' "$BENCH_RUN_DIR/stderr"; then
    pass "events that contradict the expectation make the sample FAIL"
else
    fail "events that contradict the expectation gave '$got'; stderr: $(head -3 "$BENCH_RUN_DIR/stderr")"
fi
got=$(bench_sample noted bcast 2 "$WRONG" note "${JOB[@]}" "${PROGRAM[@]}" 2>"$BENCH_RUN_DIR/stderr")
if [[ $got =~ ^[0-9]+(\.[0-9]+)?$ ]] && grep -q 'do not satisfy' "$BENCH_RUN_DIR/stderr"; then
    pass "with note the sample keeps its average ($got us) and says why on stderr"
else
    fail "with note the sample gave '$got'; stderr: $(head -3 "$BENCH_RUN_DIR/stderr")"
fi

# no expectation (stock Open MPI): only the job's own result counts
got=$(bench_sample stock bcast 2 "" fail "${JOB[@]}" --mca coll '^rdma' "${PROGRAM[@]}" 2>"$BENCH_RUN_DIR/stderr")
if [[ $got =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
    pass "a stock sample (no events expected) gives an average ($got us)"
else
    fail "a stock sample gave '$got'; stderr: $(head -3 "$BENCH_RUN_DIR/stderr")"
fi

# a job that fails (coll_latency refuses its arguments): FAIL
got=$(bench_sample broken bcast 2 "" fail "${JOB[@]}" "$LATENCY" -q -c bcast -m 8:4 2>"$BENCH_RUN_DIR/stderr")
if [ "$got" = FAIL ] && grep -q 'failed (status' "$BENCH_RUN_DIR/stderr"; then
    pass "a failing job makes the sample FAIL"
else
    fail "a failing job gave '$got'"
fi

# the iterations shrink with size between the floor and ITERS
if [ "$(scaled_iters 8 16384 4)" = 50 ] && [ "$(scaled_iters 65536 16384 4)" = 12 ] &&
    [ "$(scaled_iters 16777216 16384 4)" = 4 ]; then
    pass "scaled_iters: ITERS up to the reference size, ITERS * reference / size above, never under the floor"
else
    fail "scaled_iters: $(scaled_iters 8 16384 4) $(scaled_iters 65536 16384 4) $(scaled_iters 16777216 16384 4), expected 50 12 4"
fi
leftover=$(find "$BENCH_RUN_DIR" -name 'bench-sample.*' | head -1)
[ -z "$leftover" ] && pass "each sample removes its events directory" || fail "left $leftover behind"

echo "bench-sample: $passed passed, $failed failed"
[ "$failed" = 0 ]
