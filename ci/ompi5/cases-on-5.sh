#!/usr/bin/env bash
# Which of ci/mpi-tests.sh's cases the Open MPI 5 run needs: prints
# "--only REGEX" (an anchored alternation of exact names) naming every case
# but those of ci/ompi5/cases-left-to-4.1.tsv, or nothing when every case
# is to run (OMPI5_ALL_CASES=1, or the caller's arguments carry their own
# --only, which then decides alone).
#
#   ci/ompi5/cases-on-5.sh [ci/mpi-tests.sh arguments...]
#   ci/ompi5/cases-on-5.sh --self-test   (make check's "check scripts")
# environment: OMPI5_CASES_TABLE, another table than the one below
#
# Invariant: every name in the table is a case of ci/mpi-tests.sh --list
# with these arguments; a name that is not (renamed, removed) stops the run
# (exit 2), so the table never claims to leave out a case that 4.1 no
# longer runs either.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TABLE=${OMPI5_CASES_TABLE:-$ROOT/ci/ompi5/cases-left-to-4.1.tsv}

# The selection against the harness's own list, on this host's Open MPI:
# it names every case but the table's, none of those; a stale name stops
# it; a caller's --only turns it off.
self_test() {
    local fails=0 cases left selection regex ran scratch
    fail() { echo "cases-on-5 self-test: FAIL: $*"; fails=$((fails + 1)); }
    cases=$(bash "$ROOT/ci/mpi-tests.sh" --list) || { echo "cases-on-5 self-test: ci/mpi-tests.sh --list failed"; return 2; }
    left=$(grep -v '^#' "$TABLE" | cut -f1 | sed '/^$/d')
    selection=$(bash "$0" 2>/dev/null) || fail "the table in the tree was refused"
    [ "$(sed -n 1p <<<"$selection")" = --only ] || fail "no --only printed (got '$(head -c 80 <<<"$selection")')"
    regex=$(sed -n 2p <<<"$selection")
    ran=$(grep -E -- "$regex" <<<"$cases" || true)
    [ "$(wc -l <<<"$ran")" = $(($(wc -l <<<"$cases") - $(wc -l <<<"$left"))) ] ||
        fail "$(wc -l <<<"$ran") of $(wc -l <<<"$cases") cases selected, with $(wc -l <<<"$left") left out"
    [ -z "$(grep -xF -f <(printf '%s\n' "$left") <<<"$ran")" ] || fail "a case of the table is selected"
    scratch=$(mktemp)
    printf 'np2-bcast\tcovered\nno-such-case-np9\tcovered\n' >"$scratch"
    OMPI5_CASES_TABLE=$scratch bash "$0" >/dev/null 2>&1 && fail "a table naming no-such-case-np9 was accepted"
    rm -f "$scratch"
    [ -z "$(bash "$0" --only bcast 2>/dev/null)" ] || fail "the caller's --only did not turn the selection off"
    [ -z "$(OMPI5_ALL_CASES=1 bash "$0" 2>/dev/null)" ] || fail "OMPI5_ALL_CASES=1 did not turn the selection off"
    [ "$fails" = 0 ] || return 1
    echo "cases-on-5 self-test: passed ($(wc -l <<<"$ran") of $(wc -l <<<"$cases") cases selected)"
}
[ "${1:-}" != --self-test ] || { self_test; exit; }

[ "${OMPI5_ALL_CASES:-0}" != 1 ] || exit 0
for arg in "$@"; do [ "$arg" != --only ] || exit 0; done

# the harness's own options (--jobs is ci/mpi-tests-jobs.sh's)
list_args=()
while [ $# -gt 0 ]; do
    case $1 in
        --jobs) shift ;;
        --transport|--hosts|--nps) list_args+=("$1" "${2:?$1 needs a value}"); shift ;;
        --mca) list_args+=("$1" "${2:?--mca needs a name}" "${3:?--mca needs a value}"); shift 2 ;;
        *) list_args+=("$1") ;;
    esac
    shift
done
cases=$(bash "$ROOT/ci/mpi-tests.sh" "${list_args[@]}" --list) ||
    { echo "cases-on-5: ci/mpi-tests.sh --list failed" >&2; exit 2; }
left=$(grep -v '^#' "$TABLE" | cut -f1 | sed '/^$/d')
stale=$(grep -vxF -f <(printf '%s\n' "$cases") <<<"$left" || true)
[ -z "$stale" ] || { echo "cases-on-5: $TABLE names cases that ci/mpi-tests.sh does not list: $(paste -sd' ' <<<"$stale")" >&2; exit 2; }
kept=$(grep -vxF -f <(printf '%s\n' "$left") <<<"$cases")
[ -n "$kept" ] || { echo "cases-on-5: no case left to run" >&2; exit 2; }
echo "cases-on-5: $(wc -l <<<"$kept") of $(wc -l <<<"$cases") cases; $(wc -l <<<"$left") left to the 4.1 run ($TABLE)" >&2
# the names hold regex characters ("excluded-coll-^rdma", "version-mismatch-9.9.9")
printf '%s\n' --only "$(sed 's/[][\.^$*+?(){}|\\]/\\&/g' <<<"$kept" | paste -sd'|' | sed 's/^/^(/; s/$/)$/')"
