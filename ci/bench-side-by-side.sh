#!/usr/bin/env bash
# The ratio columns of several paired runs side by side, e.g. Open MPI 4.1.4's
# (against stock) next to 5.0.7's (against tuned and against han).
#
#   ci/bench-side-by-side.sh [--np N] LABEL=PAIRS_TXT...
#     --np N      only the rows at N ranks [all]
#     LABEL=FILE  a pairs.txt (ci/bench-pairs.sh) or the -pairs/ directory
#                 holding it; every "coll rdma against BASE" table in it gives
#                 one column, named LABEL/BASE
# A ratio followed by '?' comes from a row marked NOT SETTLED; '-': no such row.
set -euo pipefail
np_only=""
if [ "${1:-}" = --np ]; then np_only=$2; shift 2; fi
[ $# -ge 1 ] || { echo "usage: $0 [--np N] LABEL=PAIRS_TXT..." >&2; exit 2; }
for spec in "$@"; do
    label=${spec%%=*} file=${spec#*=}
    [ -d "$file" ] && file=$file/pairs.txt
    [ -f "$file" ] || { echo "bench-side-by-side: no $file" >&2; exit 2; }
    awk -v label="$label" -v np_only="$np_only" '
        /^coll rdma against / { base = $4 }
        $1 ~ /^[0-9]+$/ && NF >= 8 && $6 ~ /^[0-9.]+$/ && (np_only == "" || $1 == np_only) {
            print label "/" base, $1, $2, $3, $6 (/NOT SETTLED/ ? "?" : "") }' "$file"
done | awk '
    { col = $1; key = $2 " " $3 " " $4
      if (!(col in seen)) { seen[col] = 1; cols[++nc] = col }
      if (!(key in kseen)) { kseen[key] = 1; keys[++nk] = key }
      v[col, key] = $5 }
    END {
        printf "%-4s %-10s %9s", "np", "coll", "size"
        for (c = 1; c <= nc; c++) printf " %16s", cols[c]
        printf "\n"
        for (k = 1; k <= nk; k++) {
            split(keys[k], f, " ")
            printf "%-4s %-10s %9s", f[1], f[2], f[3]
            for (c = 1; c <= nc; c++) printf " %16s", ((cols[c], keys[k]) in v) ? v[cols[c], keys[k]] : "-"
            printf "\n"
        }
    }'
