#!/usr/bin/env bash
# The MPI_Bcast arguments ci/bench-udp.sh gives coll_latency are accepted by
# coll_latency for every size range a user may set (BENCH_UDP_BCAST_SIZES),
# including ranges that end below the throughput rows' 64 KiB start: a quick
# run with 8:8 once failed every throughput run (coll_latency's exit status 2,
# "-m MIN:MAX with MAX < MIN"). Runs coll_latency with one rank, stock
# Open MPI, for each range; needs no namespaces. An invalid range must be
# refused by bench-udp.sh itself, before it makes a bed, and so must a
# settle time (BENCH_UDP_SETTLE) that is not a number of seconds, and so must
# unknown --parts and protection sizes (BENCH_UDP_PROTECTION_SIZES) that are
# not byte counts.
# usage: ci/bench-udp-args-test.sh   (last line: "bench-udp args: N passed, N failed")
set -u
cd "$(dirname "$0")/.."
LATENCY=${COLL_LATENCY:-build/bench/coll_latency}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ ! -x "$LATENCY" ] || [ bench/coll_latency.c -nt "$LATENCY" ]; then
    mkdir -p "$(dirname "$LATENCY")"
    mpicc -O2 -Wall -o "$LATENCY" bench/coll_latency.c || { echo "bench-udp args: cannot build $LATENCY"; exit 1; }
fi
passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAILED: $*"; }
for sizes in 8:8 8:4096 8:65536 4096:262144 8:1048576; do
    out=$(BENCH_UDP_BCAST_SIZES=$sizes BENCH_UDP_PRINT_ARGS=1 bash ci/bench-udp.sh) || { fail "$sizes: bench-udp.sh refused it"; continue; }
    for test in bcast bcast_tput; do
        args=$(sed -n "s/^$test: //p" <<<"$out")
        [ -n "$args" ] || { fail "$sizes $test: no arguments printed"; continue; }
        # -n/-w small: this checks the arguments, not the speed
        # shellcheck disable=SC2086
        if log=$(timeout 120 mpirun -np 1 --mca coll ^rdma "$LATENCY" -q $args -n 2 -w 1 2>&1); then
            rows=$(grep -c "^$test " <<<"$log")
            max=${sizes#*:}
            last=$(awk -v t="$test" '$1 == t { s = $2 } END { print s }' <<<"$log")
            if [ "$rows" -ge 1 ] && [ "$last" -le "$max" ]; then pass "$sizes $test: $rows row(s), largest $last bytes"
            else fail "$sizes $test: $rows row(s), largest '$last' (MAX $max)"; fi
        else
            fail "$sizes $test: coll_latency $args failed: $(tail -2 <<<"$log" | tr '\n' ' ')"
        fi
    done
done
for bad in 65536:8 8 x:y; do
    if BENCH_UDP_BCAST_SIZES=$bad BENCH_UDP_PRINT_ARGS=1 bash ci/bench-udp.sh >/dev/null 2>&1; then fail "$bad: accepted"
    else pass "$bad: refused"; fi
done
for bad in -1 x 2s; do
    if BENCH_UDP_SETTLE=$bad BENCH_UDP_PRINT_ARGS=1 bash ci/bench-udp.sh >/dev/null 2>&1; then fail "settle $bad: accepted"
    else pass "settle $bad: refused"; fi
done
BENCH_UDP_SETTLE=0.5 BENCH_UDP_PRINT_ARGS=1 bash ci/bench-udp.sh >/dev/null 2>&1 && pass "settle 0.5: accepted" || fail "settle 0.5: refused"
# the paired protection table: which parts run, and its sizes
for bad in "bcast x" protections ""; do
    if BENCH_UDP_PRINT_ARGS=1 bash ci/bench-udp.sh --parts "$bad" >/dev/null 2>&1; then fail "parts '$bad': accepted"
    else pass "parts '$bad': refused"; fi
done
BENCH_UDP_PRINT_ARGS=1 bash ci/bench-udp.sh --parts "protection files" >/dev/null 2>&1 && pass "parts 'protection files': accepted" ||
    fail "parts 'protection files': refused"
for bad in 0 "8 x" "-8"; do
    if BENCH_UDP_PROTECTION_SIZES=$bad BENCH_UDP_PRINT_ARGS=1 bash ci/bench-udp.sh >/dev/null 2>&1; then fail "protection sizes '$bad': accepted"
    else pass "protection sizes '$bad': refused"; fi
done
BENCH_UDP_PROTECTION_SIZES="8 65536 1048576" BENCH_UDP_PRINT_ARGS=1 bash ci/bench-udp.sh >/dev/null 2>&1 &&
    pass "protection sizes '8 65536 1048576': accepted" || fail "protection sizes '8 65536 1048576': refused"
# the loss table: its settings, and bcast_dist (the program it runs) checking
# every call (two ranks, stock Open MPI: every call right, one row a size)
for bad in "BENCH_UDP_LOSS_PERCENTS=100" "BENCH_UDP_LOSS_PERCENTS=5%" "BENCH_UDP_LOSS_HOSTS=1" "BENCH_UDP_LOSS_CALLS=0" \
    "BENCH_UDP_LOSS_SIZES=0" "BENCH_UDP_LOSS_SIZES=8,64"; do
    if env "$bad" BENCH_UDP_PRINT_ARGS=1 bash ci/bench-udp.sh --parts loss >/dev/null 2>&1; then fail "$bad: accepted"
    else pass "$bad: refused"; fi
done
BENCH_UDP_LOSS_PERCENTS="5 1" BENCH_UDP_PRINT_ARGS=1 bash ci/bench-udp.sh --parts loss >/dev/null 2>&1 &&
    pass "parts loss, loss percents '5 1': accepted" || fail "parts loss, loss percents '5 1': refused"
DIST=${BCAST_DIST:-build/bench/bcast_dist}
if [ ! -x "$DIST" ] || [ bench/bcast_dist.c -nt "$DIST" ]; then
    mpicc -O2 -Wall -o "$DIST" bench/bcast_dist.c || { fail "cannot build $DIST"; DIST=; }
fi
if [ -n "$DIST" ]; then
    if log=$(timeout 120 mpirun -np 2 --oversubscribe --mca coll ^rdma "$DIST" -a -m 8,70000 -n 30 -w 2 -s 65536 -l 5 2>&1); then
        rows=$(awk '$1 == "bcast_dist" { printf "%s:%s:%s ", $2, $3, $8 }' <<<"$log")
        calls=$(grep -c '^call ' <<<"$log")
        # 70000 bytes: 30 * 65536 / 70000 = 28 calls; wrong column 0
        if [ "$rows" = "8:30:0 70000:28:0 " ] && [ "$calls" = 58 ]; then pass "bcast_dist: rows $rows, $calls calls listed"
        else fail "bcast_dist: rows '$rows' (want 8:30:0 70000:28:0), $calls calls listed (want 58)"; fi
    else
        fail "bcast_dist failed: $(tail -2 <<<"$log" | tr '\n' ' ')"
    fi
    # its checking can fail: the root sends a stale pattern every 10th call
    # (calls 0, 10 and 20 of each size; the warm-up calls are negative)
    log=$(timeout 120 mpirun -np 2 --oversubscribe --mca coll ^rdma "$DIST" -m 8,70000 -n 30 -w 2 -s 65536 -l 5 -F 10 2>&1)
    status=$?
    rows=$(awk '$1 == "bcast_dist" { printf "%s:%s ", $2, $8 }' <<<"$log")
    if [ "$status" = 3 ] && [ "$rows" = "8:3 70000:3 " ] && grep -q '^# WRONG RESULT' <<<"$log"; then
        pass "bcast_dist -F 10: status 3, wrong calls $rows"
    else
        fail "bcast_dist -F 10: status $status (want 3), wrong calls '$rows' (want 8:3 70000:3)"
    fi
    for bad in "-m 0" "-m 8,x" "-n 0" "-r 5" "-F 0"; do
        # shellcheck disable=SC2086
        if timeout 120 mpirun -np 2 --oversubscribe --mca coll ^rdma "$DIST" $bad >/dev/null 2>&1; then fail "bcast_dist $bad: accepted"
        else pass "bcast_dist $bad: refused"; fi
    done
fi
echo "bench-udp args: $passed passed, $failed failed"
[ "$failed" = 0 ]
