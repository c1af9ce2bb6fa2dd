#!/usr/bin/env bash
# Deals ci/mpi-tests.sh's cases to JOBS instances that run side by side
# (ci/mpi-tests-jobs.sh), keeping every case in the same instance as the
# cases it depends on.
#
# usage: ci/mpi-tests-deal.sh JOBS < cases     (cases: ci/mpi-tests.sh --list-deps)
#        ci/mpi-tests-deal.sh --self-test
# Input: one case a line in the order ci/mpi-tests.sh runs them, its name,
# then optionally a tab and the names (space-separated) of the cases it must
# run after (a smaller-window-than: check reads their window size).
# Output: "K<tab>NAME" for every case, K in 1..JOBS, in the input order.
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
# - groups (a case with its dependencies) go, in input order, to the instance
#   with the fewest cases so far (the lowest K on a tie), so instances of
#   singletons are dealt round-robin as before.
set -uo pipefail

deal() { # JOBS
    awk -F'\t' -v jobs="$1" '
        function root(x) { while (parent[x] != x) x = parent[x]; return x }
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
            for (k = 1; k <= jobs; k++) load[k] = 0
            for (i = 1; i <= n; i++) size[root(order[i])]++
            for (i = 1; i <= n; i++) {
                r = root(order[i])
                if (!(r in job)) {
                    best = 1
                    for (k = 2; k <= jobs; k++) if (load[k] < load[best]) best = k
                    job[r] = best; load[best] += size[r]
                }
                printf "%d\t%s\n", job[r], order[i]
            }
        }
    '
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
    echo "mpi-tests-deal self-test: $passed passed, $failed failed"
    [ "$failed" = 0 ]
}

case ${1:-} in
    --self-test) self_test ;;
    [1-9]*) [[ $1 =~ ^[1-9][0-9]*$ ]] || { echo "mpi-tests-deal: JOBS must be a positive number, not '$1'" >&2; exit 2; }
            deal "$1" ;;
    *) echo "usage: ci/mpi-tests-deal.sh JOBS < cases | --self-test" >&2; exit 2 ;;
esac
