#!/usr/bin/env bash
# Do two paired benchmark runs agree? Compares the ratio column of two
# pairs.txt files (ci/bench-pairs.sh) row by row.
#
#   ci/bench-compare.sh A B [TOLERANCE]
#     A, B       pairs.txt files or the *-pairs/ directories holding them
#     TOLERANCE  largest accepted |ratio_B / ratio_A - 1| [0.15]
# Prints every row with both ratios and their difference, marks those beyond
# the tolerance, and exits 1 if there is any (2 if a file is missing).
set -euo pipefail
a=$1 b=$2 tol=${3:-0.15}
[ -d "$a" ] && a=$a/pairs.txt
[ -d "$b" ] && b=$b/pairs.txt
[ -f "$a" ] && [ -f "$b" ] || { echo "bench-compare: need two pairs.txt files" >&2; exit 2; }
# rows: "np coll size base_us rdma_us ratio ..." under a "coll rdma against NAME" heading
rows() {
    awk '/^coll rdma against / { base = $4 }
         $1 ~ /^[0-9]+$/ && NF >= 8 && $6 ~ /^[0-9.]+$/ { print base, $1, $2, $3, $6 }' "$1"
}
join -j1 <(rows "$a" | awk '{ print $1 "/" $2 "/" $3 "/" $4, $5 }' | sort) \
         <(rows "$b" | awk '{ print $1 "/" $2 "/" $3 "/" $4, $5 }' | sort) |
    awk -v tol="$tol" '
        BEGIN { printf "%-32s %8s %8s %7s\n", "against/np/coll/size", "ratio_A", "ratio_B", "B/A-1" }
        { d = $2 > 0 ? $3 / $2 - 1 : 0; bad = (d > tol || d < -tol)
          printf "%-32s %8.3f %8.3f %+6.1f%%%s\n", $1, $2, $3, d * 100, bad ? "  DISAGREE" : ""
          n++; nb += bad }
        END { printf "%d row(s), %d beyond %.0f%%\n", n, nb, tol * 100; exit nb ? 1 : 0 }'
