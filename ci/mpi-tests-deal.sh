#!/usr/bin/env bash
# Deals ci/mpi-tests.sh's cases to JOBS instances that run side by side
# (ci/mpi-tests-jobs.sh), keeping every case in the same instance as the
# cases it depends on, and the instances' expected seconds close.
#
# usage: ci/mpi-tests-deal.sh JOBS [SECONDS] < cases
#                             (cases: ci/mpi-tests.sh --list-deps)
#        ci/mpi-tests-deal.sh --measure JOB_OUTPUT...
#        ci/mpi-tests-deal.sh --self-test
# Input: one case a line in the order ci/mpi-tests.sh runs them, its name,
# then optionally a tab and the names (space-separated) of the cases it must
# run after (a smaller-window-than: check reads their window size).
# SECONDS: a table "NAME<tab>SECONDS" (# comments) of what each case took in
# an earlier run (ci/mpi/case-seconds.tsv); a case it lacks weighs 2 s.
# Without it every case weighs the same.
# Output: "K<tab>NAME" for every case, K in 1..JOBS, in the input order.
# --measure prints such a table from instances' output (job-K.out: one
# "NAME PASS N.Ns" line per case).
#
# Invariants:
# - every input case is dealt exactly once;
# - a case and the cases it depends on (transitively) share an instance;
#   an instance runs its cases in ci/mpi-tests.sh's order, so a dependency
#   that comes earlier in the input runs before its dependent;
# - a dependency that is not among the input cases (left out by --only) is
#   ignored here: ci/mpi-tests.sh itself then fails the dependent and says to
#   select it too;
# - a dependency listed after its dependent is an error (exit 2): it could
#   never run first;
# - groups (a case with its dependencies), heaviest first (input order
#   among equals), go to the instance with the fewest seconds so far (the
#   lowest K on a tie): the longest-processing-time rule, which keeps the
#   last instance to finish within 4/3 of the best dealing's (Graham);
#   groups of equal weight are dealt round-robin.
set -uo pipefail

deal() { # JOBS [SECONDS]
    awk -F'\t' -v jobs="$1" -v seconds="${2:-}" '
        function root(x) { while (parent[x] != x) x = parent[x]; return x }
        BEGIN {
            if (seconds != "") {
                while ((getline line < seconds) > 0) {
                    if (line ~ /^#/ || line == "") continue
                    split(line, f, "\t"); took[f[1]] = f[2] + 0
                }
                close(seconds)
            }
        }
        NF == 0 || $1 == "" { next }
        {
            name = $1
            if (name in parent) { printf "mpi-tests-deal: case %s listed twice\n", name > "/dev/stderr"; bad = 1; exit }
            order[++n] = name; parent[name] = name; pos[name] = n
            if (NF > 1) deps[name] = $2
        }
        END {
            if (bad) exit 2
            for (i = 1; i <= n; i++) {
                name = order[i]
                if (!(name in deps)) continue
                count = split(deps[name], list, " ")
                for (j = 1; j <= count; j++) {
                    d = list[j]
                    if (!(d in parent)) continue
                    if (pos[d] > i) {
                        printf "mpi-tests-deal: %s depends on %s, which ci/mpi-tests.sh runs after it\n", name, d > "/dev/stderr"
                        exit 2
                    }
                    a = root(name); b = root(d)
                    if (a != b) parent[a] = b
                }
            }
            # the groups in input order (of their first case), with their weight
            groups = 0
            for (i = 1; i <= n; i++) {
                r = root(order[i])
                if (!(r in weight)) { group[++groups] = r; weight[r] = 0 }
                weight[r] += (seconds == "") ? 1 : ((order[i] in took) ? took[order[i]] : 2)
            }
            # heaviest first, stable (insertion sort: some 200 groups)
            for (i = 2; i <= groups; i++) {
                g = group[i]
                for (j = i - 1; j >= 1 && weight[group[j]] < weight[g]; j--) group[j + 1] = group[j]
                group[j + 1] = g
            }
            for (k = 1; k <= jobs; k++) load[k] = 0
            for (i = 1; i <= groups; i++) {
                best = 1
                for (k = 2; k <= jobs; k++) if (load[k] < load[best]) best = k
                job[group[i]] = best; load[best] += weight[group[i]]
            }
            for (i = 1; i <= n; i++) printf "%d\t%s\n", job[root(order[i])], order[i]
        }
    '
}

# measure JOB_OUTPUT...: "NAME<tab>SECONDS" of every passed case with a time
measure() {
    awk '{ for (i = 2; i < NF; i++) if ($i == "PASS" && $(i + 1) ~ /^[0-9.]+s$/) { t = $(i + 1); sub(/s$/, "", t); print $(i - 1) "\t" t; break } }' "$@" | sort
}

self_test() {
    local passed=0 failed=0 out
    check() { # WHAT CONDITION...
        local what=$1; shift
        if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $what"; fi
    }
    out=$(printf 'a\nb\nc\nd\n' | deal 2)
    check "singletons are dealt round-robin" [ "$(paste -sd, <<<"$out")" = $'1\ta,2\tb,1\tc,2\td' ]
    # b-after-a is the shape of window-one-node-hierarchy-auto-np4 after
    # window-pretend-nodes-np4, which plain round-robin split
    out=$(printf 'x\na\nb\ta\ny\nz\n' | deal 2)
    check "a dependent shares its dependency's instance" \
        [ "$(awk -F'\t' '$2 == "a" || $2 == "b" { print $1 }' <<<"$out" | sort -u | wc -l)" = 1 ]
    check "every case is dealt once, in input order" [ "$(cut -f2 <<<"$out" | paste -sd,)" = "x,a,b,y,z" ]
    check "the instances stay balanced (3 and 2 cases)" \
        [ "$(cut -f1 <<<"$out" | sort | uniq -c | awk '{ print $1 }' | sort | paste -sd,)" = "2,3" ]
    out=$(printf 'a\nb\nc\ta b\nd\te c\ne\n' | deal 3 2>&1)
    check "a dependency listed later is refused" grep -q "d depends on e, which ci/mpi-tests.sh runs after it" <<<"$out"
    out=$(printf 'a\nb\nc\ta b\n' | deal 3)
    check "dependencies chain: a, b and c in one instance" \
        [ "$(cut -f1 <<<"$out" | sort -u | wc -l)" = 1 ]
    out=$(printf 'p\tgone\nq\n' | deal 2)
    check "a dependency left out by --only is ignored" [ "$(paste -sd, <<<"$out")" = $'1\tp,2\tq' ]
    out=$(printf 'a\nb\n' | deal 5)
    check "more instances than cases leaves some empty" [ "$(cut -f1 <<<"$out" | paste -sd,)" = "1,2" ]
    # weights: the 30 s case alone in one instance, the five 5 s ones in
    # the other (by count, round-robin, it would be 30+5+5 against 10)
    local table
    table=$(mktemp)
    printf '# a comment\nh\t30\nq1\t5\nq2\t5\nq3\t5\nq4\t5\nq5\t5\n' >"$table"
    out=$(printf 'q1\nh\nq2\nq3\nq4\nq5\n' | deal 2 "$table")
    check "the heaviest case is dealt first, the others balance it" \
        [ "$(awk -F'\t' '$2 == "h" { h = $1 } $2 != "h" { print ($1 == h) }' <<<"$out" | sort -u)" = 0 ]
    check "weighted: every case dealt once, in input order" [ "$(cut -f2 <<<"$out" | paste -sd,)" = "q1,h,q2,q3,q4,q5" ]
    out=$(printf 'q1\nnew\tq1\nh\n' | deal 2 "$table")
    check "a group weighs the sum of its cases, an unknown case 2 s (7 s vs 30 s)" \
        [ "$(awk -F'\t' '{ k[$2] = $1 } END { print (k["q1"] == k["new"] && k["q1"] != k["h"]) }' <<<"$out")" = 1 ]
    printf 'np2-bcast                                    PASS     2.0s\n[1/2] radix-7-np8    PASS     1.6s  (note)\nx  FAIL  1.0s\n' >"$table"
    check "--measure reads NAME PASS N.Ns lines, prefixed or not" \
        [ "$(measure "$table" | paste -sd,)" = $'np2-bcast\t2.0,radix-7-np8\t1.6' ]
    rm -f "$table"
    echo "mpi-tests-deal self-test: $passed passed, $failed failed"
    [ "$failed" = 0 ]
}

case ${1:-} in
    --self-test) self_test ;;
    --measure) shift; measure "$@" ;;
    [1-9]*) [[ $1 =~ ^[1-9][0-9]*$ ]] || { echo "mpi-tests-deal: JOBS must be a positive number, not '$1'" >&2; exit 2; }
            [ -z "${2:-}" ] || [ -r "$2" ] || { echo "mpi-tests-deal: cannot read the seconds table '$2'" >&2; exit 2; }
            deal "$1" "${2:-}" ;;
    *) echo "usage: ci/mpi-tests-deal.sh JOBS [SECONDS] < cases | --measure JOB_OUTPUT... | --self-test" >&2; exit 2 ;;
esac
