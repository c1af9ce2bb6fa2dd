#!/usr/bin/env bash
# Soak of the workspace's cargo test binaries under load: runs each of them
# many times, several at once, so that a failure hidden by a lucky schedule
# (a protocol that waits on a peer in another call, a check that depends on
# timing) shows up before CI passes it by luck. Not part of `make check`:
# it takes from minutes to hours.
#
# usage: ci/soak-tests.sh [--runs N] [--focus-runs N] [--jobs N] [--only REGEX]
#                         [--pin CPU] [--out DIR]
#   --runs N        runs of every test binary (default 10)
#   --focus-runs N  runs of the binaries that exercise loss, nodes, co-roots,
#                   faults or two levels (default 40; counts --runs): btl-ibmc's
#                   and the core's two, fabric and scale, which hold every
#                   fabric test file as a module
#   --jobs N        binaries run at once (default 3)
#   --only REGEX    only the binaries whose name matches REGEX (grep -E)
#   --pin CPU       run every binary on that one CPU (taskset): its rank
#                   threads then interleave only where the kernel preempts them
#   --out DIR       where results.txt and the failing runs' logs go
#                   (default build/soak/DATE)
# Each run gets `timeout 300`; results.txt has one line per run (binary,
# run number, exit status, seconds). Exit status 1 if any run failed.
set -euo pipefail

runs=10 focus_runs=40 jobs=3 only='' pin='' out=''
focus='fabric|scale|btl_ibmc'
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        --focus-runs) focus_runs=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        --pin) pin=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) sed -n '2,/^set /p' "$0" | sed '$d'; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
out=${out:-build/soak/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# One line per test binary: its path and its package's directory (cargo
# runs a test in its package's directory, so the soak does too).
cargo test --release --workspace --no-run --message-format=json 2>/dev/null | python3 -c '
import json, os, sys
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if message.get("reason") == "compiler-artifact" and message.get("executable") and message["profile"]["test"]:
        print(message["executable"], os.path.dirname(message["manifest_path"]))
' > "$out/binaries.txt"

binary_name() { basename "$1" | sed 's/-[0-9a-f]*$//'; }

: > "$out/jobs.txt"
top=$(( focus_runs > runs ? focus_runs : runs ))
# Round by round, so that stopping early leaves every binary with about as many runs.
for run in $(seq 1 "$top"); do
    while read -r binary package; do
        name=$(binary_name "$binary")
        if [ -n "$only" ] && ! grep -Eq "$only" <<< "$name"; then continue; fi
        if [ "$run" -le "$runs" ] || { [ "$run" -le "$focus_runs" ] && grep -Eqx "$focus" <<< "$name"; }; then
            echo "$binary $package $run"
        fi
    done < "$out/binaries.txt"
done > "$out/jobs.txt"

run_one() {
    local binary=$1 package=$2 run=$3 out=$SOAK_OUT pin=$SOAK_PIN
    local name log started status=0
    name=$(basename "$binary" | sed 's/-[0-9a-f]*$//')
    log=$out/running.$name.$run.$$.log
    started=$(date +%s.%N)
    local pinning=()
    [ -n "$pin" ] && pinning=(taskset -c "$pin")
    (cd "$package" && timeout 300 "${pinning[@]}" "$binary" > "$log" 2>&1) || status=$?
    printf '%s %s rc=%s %.1fs\n' "$name" "$run" "$status" "$(echo "$(date +%s.%N) - $started" | bc)" >> "$out/results.txt"
    if [ "$status" -ne 0 ]; then mv "$log" "$out/FAIL.$name.$run.log"; else rm -f "$log"; fi
}
export -f run_one

echo "soak: $(wc -l < "$out/jobs.txt") runs, $jobs at once${pin:+, on CPU $pin}; results in $out"
: > "$out/results.txt"
SOAK_OUT=$out SOAK_PIN=$pin xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' run_one < "$out/jobs.txt" || true

awk '{ split($4, t, "s"); n[$1]++; if ($3 != "rc=0") failed[$1]++; sum[$1] += t[1]; if (t[1] > max[$1]) max[$1] = t[1] }
     END { for (b in n) printf "%-28s runs %3d  failed %d  mean %6.1f s  max %6.1f s\n", b, n[b], failed[b] + 0, sum[b] / n[b], max[b] }' \
    "$out/results.txt" | sort
if grep -qv 'rc=0' "$out/results.txt"; then
    echo "soak: FAILED runs (logs in $out):"; grep -v 'rc=0' "$out/results.txt"; exit 1
fi
echo "soak: every run passed"
