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
set -euo pipefail
a=$1 b=$2 tol=${3:-0.15} min_pairs=${4:-5}
[ -d "$a" ] && a=$a/pairs.txt
[ -d "$b" ] && b=$b/pairs.txt
[ -f "$a" ] && [ -f "$b" ] || { echo "bench-compare: need two pairs.txt files" >&2; exit 2; }
# rows: "against/np/coll/size ratio fast slow" under a "coll rdma against NAME"
# heading; fast and slow are "ratio/pairs" or "-" (older tables: "-")
rows() {
    awk '/^coll rdma against / { base = $4 }
         $1 ~ /^[0-9]+$/ && NF >= 8 && $6 ~ /^[0-9.]+$/ {
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
