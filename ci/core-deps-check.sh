#!/usr/bin/env bash
# coll-rdma-core (coll-rdma/core) must build and test without Open MPI,
# mpicc, libibverbs or libclang: no crate in its dependency tree, normal or
# dev, may be ompi-sys (Open MPI's headers, bindgen) or rdma-sys
# (libibverbs' headers, bindgen). A feature turned on in the wrong place
# (btl-ibmc's default `verbs`) or a new dependency on the component would
# bring one back without any test noticing on a machine that has them all.
#
# The check also asks the same of coll-rdma (the component), which must
# name ompi-sys: a `cargo tree` whose output this script misreads would
# otherwise pass for ever.
#
# usage: ci/core-deps-check.sh   (last line: "core deps: N passed, N failed")
set -u
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
FORBIDDEN='^(ompi-sys|rdma-sys) '
passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok: $*"; }
fail() { failed=$((failed + 1)); echo "FAILED: $*"; }

# One crate per line ("name vX.Y.Z ..."), normal and dev edges of the
# package, build dependencies included (bindgen runs in a build script).
crates_of() {
    "$CARGO" tree -q -p "$1" -e normal,build,dev --prefix none 2>&1
}

if tree=$(crates_of coll-rdma-core); then
    found=$(grep -E "$FORBIDDEN" <<<"$tree" | cut -d' ' -f1 | sort -u | paste -sd' ')
    if [ -z "$found" ]; then pass "coll-rdma-core's tree ($(wc -l <<<"$tree") lines) names neither ompi-sys nor rdma-sys"
    else fail "coll-rdma-core depends on $found ('cargo tree -p coll-rdma-core -i <crate>' says through what)"; fi
else
    fail "cargo tree -p coll-rdma-core failed: $(tail -n 3 <<<"$tree" | tr '\n' ' ')"
fi

if tree=$(crates_of coll-rdma); then
    if grep -qE '^ompi-sys ' <<<"$tree"; then pass "the check sees ompi-sys in coll-rdma's tree"
    else fail "no ompi-sys found in coll-rdma's tree: this check no longer reads cargo tree right"; fi
else
    fail "cargo tree -p coll-rdma failed: $(tail -n 3 <<<"$tree" | tr '\n' ' ')"
fi

echo "core deps: $passed passed, $failed failed"
[ "$failed" = 0 ]
