#!/usr/bin/env bash
# Do two paired benchmark runs agree? Compares two pairs.txt files
# (ci/bench-pairs.sh) row by row, twice:
#   - the ratio column, over all pairs: it mixes the VM's fast and slow
#     placements in whatever proportion each run met, so two runs can
#     disagree on it although nothing changed (shared/notes/benchmarking-on-this-vm.md);
#   - the fast and slow columns, each over the pairs of one placement only,
#     compared where both runs have at least MIN_PAIRS pairs of it.
#
#   ci/bench-compare.sh A B [TOLERANCE] [MIN_PAIRS]
#     A, B       pairs.txt files or the *-pairs/ directories holding them
#     TOLERANCE  largest accepted |ratio_B / ratio_A - 1| [0.15]
#     MIN_PAIRS  pairs a placement needs in both runs to be compared [5]
# Prints every row with both ratios and their difference, marks those beyond
# the tolerance, and exits 1 if any per-placement comparison disagrees (the
# all-pairs disagreements are counted and printed, not judged), 2 if a file
# is missing.
#   ci/bench-compare.sh --self-test  checks the comparison on two made-up
#     tables whose verdicts are worked out by hand (make check runs it)
set -euo pipefail
if [ "${1:-}" = --self-test ]; then
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    head='np   coll            size   stock_us    rdma_us    ratio  spread     pairs floor_us  memcpy_us to_floor      fast      slow  settled'
    # allreduce 4: 0.5 -> 0.55 (+10 %, agrees); 1024: fast 0.4 -> 0.6
    # (+50 %, disagrees); slow 0.9/2 has too few pairs to compare; the
    # closing line must not count as a row (it did: "21 rounds per size
    # from 3 launch(es)" passed for np=21).
    for run in A B; do
        if [ "$run" = A ]; then r4=0.500 f4=0.500/9 r1k=0.400 f1k=0.400/9; else r4=0.550 f4=0.550/9 r1k=0.600 f1k=0.600/9; fi
        { echo "coll rdma against stock (--mca coll ^rdma), paired samples:"; echo; echo "$head"
          echo "2    allreduce          4      1.000      0.500    $r4    0.10    9/9     0.120      0.003     1.66  $f4         -  settled"
          echo "2    allreduce       1024      1.000      0.500    $r1k    0.10    9/9     0.120      0.003     1.66  $f1k   0.900/2  settled"
          echo "21 rounds per size from 3 launch(es) of every job, samples of about 20 ms, sizes 4:1024 (x4); took 9s."
        } >"$dir/$run.txt"
    done
    out=$(bash "$0" "$dir/A.txt" "$dir/B.txt") && rc=0 || rc=$?
    want='2 row(s): all-pairs ratios 1 beyond 15%; per placement 2 comparison(s), 1 beyond 15%'
    if [ "$rc" = 1 ] && [ "$(tail -n1 <<<"$out")" = "$want" ] && grep -q '^stock/2/allreduce/1024 .*fast 0.400/0.600 DISAGREE' <<<"$out"; then
        echo "bench-compare self-test: passed"; exit 0
    fi
    printf 'bench-compare self-test: FAILED (exit %s, want 1 and the line "%s"):\n%s\n' "$rc" "$want" "$out" >&2
    exit 1
fi
a=$1 b=$2 tol=${3:-0.15} min_pairs=${4:-5}
[ -d "$a" ] && a=$a/pairs.txt
[ -d "$b" ] && b=$b/pairs.txt
[ -f "$a" ] && [ -f "$b" ] || { echo "bench-compare: need two pairs.txt files" >&2; exit 2; }
# rows: "against/np/coll/size ratio fast slow" under a "coll rdma against NAME"
# heading; fast and slow are "ratio/pairs" or "-" (older tables: "-"); the
# size column must be a number, or the closing line ("21 rounds per size
# from 3 launch(es) ...") would pass for a row
rows() {
    awk '/^coll rdma against / { base = $4 }
         $1 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ && NF >= 8 && $6 ~ /^[0-9.]+$/ {
             fast = ($12 ~ /^[0-9.]+\/[0-9]+$/) ? $12 : "-"
             slow = ($13 ~ /^[0-9.]+\/[0-9]+$/) ? $13 : "-"
             print base "/" $1 "/" $2 "/" $3, $6, fast, slow }' "$1" | sort
}
join -j1 <(rows "$a") <(rows "$b") |
    awk -v tol="$tol" -v min_pairs="$min_pairs" '
        function differ(x, y) { d = x > 0 ? y / x - 1 : 0; return d > tol || d < -tol }
        # one placement: "-" when either run has too few pairs of it
        function placement(x, y, name,   px, py) {
            if (split(x, px, "/") < 2 || split(y, py, "/") < 2 || px[2] < min_pairs || py[2] < min_pairs) return "-"
            compared++
            if (differ(px[1], py[1])) { bad++; return sprintf("%s %.3f/%.3f DISAGREE", name, px[1], py[1]) }
            return sprintf("%s %.3f/%.3f", name, px[1], py[1])
        }
        BEGIN { printf "%-32s %8s %8s %7s  %s\n", "against/np/coll/size", "ratio_A", "ratio_B", "B/A-1", "per placement (A/B)" }
        { mixed = differ($2, $5); dm = d; nmixed += mixed; n++
          f = placement($3, $6, "fast"); s = placement($4, $7, "slow")
          printf "%-32s %8.3f %8.3f %+6.1f%%%s  %s  %s\n", $1, $2, $5, dm * 100, mixed ? " (all pairs differ)" : "", f, s }
        END {
            printf "%d row(s): all-pairs ratios %d beyond %.0f%%; per placement %d comparison(s), %d beyond %.0f%%\n", n, nmixed, tol * 100, compared, bad, tol * 100
            exit bad ? 1 : 0 }'
