# Sourced by ci/bench-pairs.sh: the paired table's statistics. From the
# pooled sample and floor lines of one process count and collective
# (pooled NP COLL, in ci/bench-pairs.sh) they compute each size's ratio of
# coll rdma to another variant (median of the per-pair ratios, the
# quartile spread, the floor drift filter, the fast/slow phases, the
# median's 95 % interval over the pairs and over the launches' own medians)
# or, for overlap series, the per-pair differences
# of overlap %. Invariants: they read only their arguments and the
# caller's settings (NAMES, RDMA, LOG, OUT, SPREAD_MAX, FLOOR_DRIFT,
# PHASE_SPLIT) and write nothing but their rows on stdout and the plot data
# files under OUT; the self-test of ci/bench-pairs.sh checks their
# arithmetic on made-up samples.

# The awk functions the table's arithmetic uses (summarize and the self-test):
# sortv sorts a[1..n]; q is the p-quantile with linear interpolation;
# median_ci95 is a distribution-free interval holding the median of the
# population the sorted a[1..n] was drawn from with at least 95 % confidence:
# the order statistics n/2 - 0.98 sqrt(n) (rounded down) and n/2 + 1 + 0.98
# sqrt(n) (rounded up), from the binomial's normal approximation; "-" below
# 6 pairs, where even [min, max] covers less than 97 %. It answers "is the
# ratio below X?" where the spread (which says how far one pair can stray)
# is wide only because each pair is noisy.
AWK_STATS='
    function sortv(a, n,   i, j, x) { for (i = 2; i <= n; i++) { x = a[i]; j = i - 1
        while (j > 0 && a[j] > x) { a[j + 1] = a[j]; j-- } a[j + 1] = x } }
    function q(a, n, p,   h, l) { h = (n - 1) * p + 1; l = int(h); return l >= n ? a[n] : a[l] + (h - l) * (a[l + 1] - a[l]) }
    function ci95_lo(n,   lo) { lo = int(n / 2 - 0.98 * sqrt(n)); return lo < 1 ? 1 : lo }
    function ci95_hi(n,   hi) { hi = n / 2 + 1 + 0.98 * sqrt(n); if (hi > int(hi)) hi = int(hi) + 1; return hi > n ? n : hi }
    function median_ci95(a, n) { return n < 6 ? "-" : sprintf("%.3f-%.3f", a[ci95_lo(n)], a[ci95_hi(n)]) }
'

# summarize NP COLL BASE -> table rows (rdma against variant BASE) and the
# plot data file OUT/np$NP-$COLL-vs-$BASENAME.dat
summarize() {
    local np=$1 coll=$2 base=$3 limit
    # the size limit above which coll rdma handed calls over, from its events
    limit=$(size_limit_of "$coll" "$LOG/np$np-$coll-${NAMES[$RDMA]}.1.events")
    # ... and from which length the parallel reduction serves it anyway
    # (comm_ready's parallel_min_bytes: null for none, and for barrier/bcast)
    local parallel_from
    parallel_from=$(world_ready_field "$LOG/np$np-$coll-${NAMES[$RDMA]}.1.events" ".$coll.parallel_min_bytes // empty")
    pooled "$np" "$coll" | awk -v np="$np" -v coll="$coll" -v base="$base" -v rdma="$RDMA" -v limit="${limit:--1}" -v parallel_from="${parallel_from:--1}" \
        -v spread_max="$SPREAD_MAX" -v drift="$FLOOR_DRIFT" -v phase_split="$PHASE_SPLIT" -v bname="${NAMES[$base]}" -v out="$OUT" "$AWK_STATS"'
    function phase(a, n) { if (n == 0) return "-"; sortv(a, n); return sprintf("%.3f/%d", q(a, n, 0.5), n) }
    $1 == "sample" { s[$2, $4, $5] = $6; if (!($4 in seen)) { seen[$4] = 1; sizes[++ns] = $4 } if ($5 + 1 > nr) nr = $5 + 1 }
    $1 == "floor" { fl[$2, $3] = $4; mc[$2, $3] = $5 }
    $1 == "launch" { for (k = $3; k <= $4; k++) launch_of[k] = $2; if ($2 > nl) nl = $2 }
    END {
        for (z = 1; z <= ns; z++) {
            size = sizes[z]; n = 0; m = 0; nb = 0; nrd = 0; nf = 0; nm = 0; nfast = 0; nslow = 0
            for (k = 0; k < nr; k++) {
                if (((base, size, k) in s) && ((rdma, size, k) in s) && s[base, size, k] > 0) {
                    r = s[rdma, size, k] / s[base, size, k]
                    all[++n] = r; all_launch[n] = launch_of[k]
                    f0 = fl[size, k]; f1 = fl[size, k + 1]
                    if (f0 > 0 && f1 > 0 && f0 / f1 <= drift && f1 / f0 <= drift) {
                        stable[++m] = r; stable_launch[m] = launch_of[k]
                        if (f0 < phase_split && f1 < phase_split) fast[++nfast] = r
                        if (f0 >= phase_split && f1 >= phase_split) slow[++nslow] = r
                    }
                }
                if ((base, size, k) in s) bv[++nb] = s[base, size, k]
                if ((rdma, size, k) in s) rv[++nrd] = s[rdma, size, k]
            }
            for (k = 0; k <= nr; k++) { if ((size, k) in fl) { fv[++nf] = fl[size, k]; mv[++nm] = mc[size, k] } }
            if (n == 0) { printf "%-4s %-10s %9s  no pairs\n", np, coll, size; continue }
            use = (m * 2 >= n) ? m : n
            for (i = 1; i <= use; i++) { u[i] = (m * 2 >= n) ? stable[i] : all[i]; ul[i] = (m * 2 >= n) ? stable_launch[i] : all_launch[i] }
            # each launch'"'"'s own median ratio over the pairs the row uses
            nlm = 0
            for (l = 1; l <= nl; l++) {
                nin = 0
                for (i = 1; i <= use; i++) if (ul[i] == l) inl[++nin] = u[i]
                if (nin) { sortv(inl, nin); lm[++nlm] = q(inl, nin, 0.5) }
                delete inl
            }
            sortv(lm, nlm)
            sortv(u, use); sortv(bv, nb); sortv(rv, nrd); sortv(fv, nf); sortv(mv, nm)
            med = q(u, use, 0.5); q1 = q(u, use, 0.25); q3 = q(u, use, 0.75)
            spread = med > 0 ? (q3 - q1) / med : 0
            bmed = q(bv, nb, 0.5); rmed = q(rv, nrd, 0.5)
            fmed = nf ? q(fv, nf, 0.5) : 0; mmed = nm ? q(mv, nm, 0.5) : 0
            floor = fmed > mmed ? fmed : mmed
            note = spread > spread_max ? "NOT SETTLED" : "settled"
            if (use < 5) note = "NOT SETTLED (only " use " pairs)"
            if (limit >= 0 && size + 0 > limit + 0 && (parallel_from < 0 || size + 0 < parallel_from + 0)) note = note " (rdma handed over: above " limit " B)"
            printf "%-4s %-10s %9s %10.3f %10.3f %8.3f %7.2f %5d/%-3d %8.3f %10.3f %8.2f %9s %9s %13s %13s  %s\n", np, coll, size, bmed, rmed, med, spread, use, n, fmed, mmed, (floor > 0 ? rmed / floor : 0), phase(fast, nfast), phase(slow, nslow), median_ci95(u, use), median_ci95(lm, nlm), note
            printf "%s %.4f %.4f %.4f %.4f %.4f %.4f %.4f\n", size, bmed, rmed, mmed, fmed, med, q1, q3 > (out "/np" np "-" coll "-vs-" bname ".dat")
            delete u; delete ul; delete lm; delete all; delete all_launch; delete stable; delete stable_launch; delete bv; delete rv; delete fv; delete mv; delete fast; delete slow
        }
    }'
}

# summarize_overlap NP COLL BASE -> table rows of an overlap series (rdma
# against variant BASE): each variant's median overlap %, the median of the
# per-pair differences rdma - BASE in percentage points with its 95 %
# interval (as median_ci95, "lo..hi"), the pairs, and each variant's median
# pure post+wait time (us); the plot data go to
# OUT/np$NP-$COLL-overlap-vs-$BASENAME.dat. A difference, not a ratio: an
# overlap near 0 % makes a ratio meaningless.
summarize_overlap() {
    local np=$1 coll=$2 base=$3
    pooled "$np" "$coll" | awk -v np="$np" -v coll="$coll" -v base="$base" -v rdma="$RDMA" -v bname="${NAMES[$base]}" -v out="$OUT" "$AWK_STATS"'
    $1 == "overlap" { o[$2, $4, $5] = $6; p[$2, $4, $5] = $7; if (!($4 in seen)) { seen[$4] = 1; sizes[++ns] = $4 } if ($5 + 1 > nr) nr = $5 + 1 }
    END {
        for (z = 1; z <= ns; z++) {
            size = sizes[z]; n = 0; nb = 0; nrd = 0
            for (k = 0; k < nr; k++) {
                if ((base, size, k) in o) { bo[++nb] = o[base, size, k]; bp[nb] = p[base, size, k] }
                if ((rdma, size, k) in o) { ro[++nrd] = o[rdma, size, k]; rp[nrd] = p[rdma, size, k] }
                if (((base, size, k) in o) && ((rdma, size, k) in o)) d[++n] = o[rdma, size, k] - o[base, size, k]
            }
            if (n == 0) { printf "%-4s %-10s %9s  no pairs\n", np, coll, size; continue }
            sortv(bo, nb); sortv(ro, nrd); sortv(bp, nb); sortv(rp, nrd); sortv(d, n)
            ci = n < 6 ? "-" : sprintf("%.1f..%.1f", d[ci95_lo(n)], d[ci95_hi(n)])
            printf "%-4s %-10s %9s %9.1f %9.1f %9.1f %15s %5d %10.3f %10.3f\n", np, coll, size, q(bo, nb, 0.5), q(ro, nrd, 0.5), q(d, n, 0.5), ci, n, q(bp, nb, 0.5), q(rp, nrd, 0.5)
            printf "%s %.2f %.2f %.2f\n", size, q(bo, nb, 0.5), q(ro, nrd, 0.5), q(d, n, 0.5) > (out "/np" np "-" coll "-overlap-vs-" bname ".dat")
            delete bo; delete ro; delete bp; delete rp; delete d
        }
    }'
}

header_overlap() {
    printf '%-4s %-10s %9s %9s %9s %9s %15s %5s %10s %10s\n' np coll size "${NAMES[$1]}_ovl%" rdma_ovl% diff_pts diff_ci95 pairs "${NAMES[$1]}_pure" rdma_pure
}

header() {
    printf '%-4s %-10s %9s %10s %10s %8s %7s %9s %8s %10s %8s %9s %9s %13s %13s  %s\n' np coll size "${NAMES[$1]}_us" rdma_us ratio spread pairs floor_us memcpy_us to_floor fast slow ratio_ci95 launch_ci95 settled
}
