#!/usr/bin/env bash
# make check-noheaders: coll rdma built for an Open MPI installed without its
# internal headers, then run against that Open MPI.
#
# 0. source-tree-include-dirs.sh refuses unfit trees (small fake trees).
# 1. Debian's source of the installed Open MPI, configured, cached outside
#    the repository (ompi-patches/debian-source-tree.sh).
# 2. In a private mount namespace, an empty tmpfs over the system's internal
#    header directory (the one holding ompi/mca/coll/coll.h; mpi.h stays
#    visible, as in an installation without --with-devel-headers), then
#    `make build OMPI_SOURCE=<tree>` into build/noheaders/.
# 3. Checks that the build read the tree's headers, and that bindgen saw the
#    same structure layouts in them as in the system's headers (the host
#    build's bindings, when make build has run).
# 4. A few MPI tests with build/noheaders/components/mca_coll_rdma.so against
#    the system's Open MPI (ci/mpi-tests.sh, MPI_TESTS_BUILD_DIR).
#
# Needs root (mount namespace, the cache under /var/cache). Environment:
#   NOHEADERS_TESTS  ci/mpi-tests.sh --only regex of the MPI tests to run
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
OUT=$ROOT/build/noheaders
TESTS=${NOHEADERS_TESTS:-'^(np2-(reduce_ops|bcast|coll_mix)|plain-coll-rdma-every-collective-np2)$'}
start=$SECONDS

say() { echo "== check-noheaders: $*"; }
fail() { echo "check-noheaders: FAILED: $*" >&2; exit 1; }
skip() { echo "check-noheaders: SKIPPED: $*"; exit 0; }

[ "$(id -u)" = 0 ] || skip "needs root (a mount namespace hides the system's headers)"
command -v unshare >/dev/null || skip "unshare (util-linux) is missing"
command -v apt-get >/dev/null && command -v dpkg-source >/dev/null ||
    skip "apt-get source needs apt and dpkg-dev"

# The refusals of source-tree-include-dirs.sh, on small fake trees: another
# version, a debug build of the installed version, other endpoint tags.
refuses() { # NAME EXPECTED_MESSAGE_REGEX TREE
    local out
    if out=$(bash "$ROOT/ompi-patches/source-tree-include-dirs.sh" "$3" 2>&1); then
        fail "source-tree-include-dirs.sh accepted $1 (printed $out)"
    fi
    grep -qE "$2" <<<"$out" || fail "source-tree-include-dirs.sh refused $1 without saying why: $out"
    say "refuses $1: ${out#source-tree-include-dirs.sh: }"
}
installed=$(ompi_info --version | sed -n 's/^Open MPI v\([0-9.]*\).*/\1/p')
fake=$(mktemp -d); trap 'rm -rf "$fake"' EXIT
mkdir -p "$fake/ompi/mca/coll" "$fake/opal/include" "$fake/ompi/include/ompi"
touch "$fake/ompi/mca/coll/coll.h" "$fake/ompi/include/mpi.h" "$fake/ompi/include/ompi/version.h"
printf 'major=9\nminor=8\nrelease=7\ngreek=\n' > "$fake/VERSION"
refuses "another version" "is Open MPI 9\.8\.7 but the installed libmpi is $installed" "$fake"
IFS=. read -r major minor release <<<"$installed"
printf 'major=%s\nminor=%s\nrelease=%s\ngreek=\n' "$major" "$minor" "$release" > "$fake/VERSION"
echo '#define OPAL_ENABLE_DEBUG 1' > "$fake/opal/include/opal_config.h"
refuses "a --enable-debug tree" "configured with --enable-debug" "$fake"
printf '#define OPAL_ENABLE_DEBUG 0\n#define OMPI_PROC_ENDPOINT_TAG_PORTALS4 0\n' > "$fake/opal/include/opal_config.h"
refuses "a tree with other endpoint tags" "ompi_proc_t differs: .* has PORTALS4" "$fake"

tree=$(bash "$ROOT/ompi-patches/debian-source-tree.sh" prepare | tail -n1)
say "source tree $tree ($((SECONDS - start)) s)"

# The system's internal header directory: where mpicc finds ompi/mca/coll/coll.h.
hide= mpi_h=
for dir in $(mpicc --showme:incdirs); do
    if [ -f "$dir/ompi/mca/coll/coll.h" ]; then hide=$dir; fi
    if [ -z "$mpi_h" ] && [ -f "$dir/mpi.h" ]; then mpi_h=$dir/mpi.h; fi
done
[ -n "$hide" ] || fail "mpicc's include directories hold no ompi/mca/coll/coll.h: nothing to hide (is libopenmpi-dev installed?)"
case "$mpi_h" in "$hide"/*|"") fail "mpi.h ($mpi_h) is inside $hide: hiding it would hide mpi.h too" ;; esac
say "hiding $hide (mpi.h stays: $mpi_h)"

build_log=$OUT/build.log
mkdir -p "$OUT"
# Start from a copy of the host build's target directory, if there is one:
# cargo then rebuilds only ompi-sys (its headers changed) and what depends
# on it, not every dependency (minutes on 2 cores). Only release/: the MPI
# tests below take their case runner (ci/runner, which reads no Open MPI
# header) from the host's target directory, where the host's MPI tests
# built it (until issue 34 a copy of release-tests/, 0.9 GB, was made for it;
# without either the runner compiled from nothing: 4 minutes of this
# check's 6 at load 20).
for profile in release; do
    if [ ! -d "$OUT/target/$profile" ] && [ -d "$ROOT/target/$profile" ]; then
        mkdir -p "$OUT/target"
        cp -a --reflink=auto "$ROOT/target/$profile" "$OUT/target/"
        say "seeded $OUT/target/$profile from $ROOT/target ($((SECONDS - start)) s)"
    fi
done
export CARGO_TARGET_DIR=$OUT/target HIDE=$hide TREE=$tree OUT ROOT
if ! unshare --mount --propagation private -- bash -c '
    set -euo pipefail
    mount -t tmpfs -o size=1m,mode=0755 coll-rdma-hidden-headers "$HIDE"
    [ -z "$(ls -A "$HIDE")" ] || { echo "$HIDE is not empty inside the namespace" >&2; exit 1; }
    if echo "#include <ompi/mca/coll/coll.h>" | mpicc -E -x c - >/dev/null 2>&1; then
        echo "mpicc still finds ompi/mca/coll/coll.h" >&2; exit 1
    fi
    echo "#include <mpi.h>" | mpicc -E -x c - >/dev/null || { echo "mpi.h is no longer visible" >&2; exit 1; }
    echo "inside the namespace: $HIDE is empty, mpicc finds mpi.h but not ompi/mca/coll/coll.h"
    make --no-print-directory -C "$ROOT" build OMPI_SOURCE="$TREE" BUILD="$OUT"
' > "$build_log" 2>&1; then
    tail -n 40 "$build_log" >&2
    fail "the build with hidden headers failed (log: $build_log)"
fi
grep -E '^inside the namespace|OMPI_INCLUDE_DIRS|MCA coll: rdma' "$build_log" | sed 's/^/   /'
so=$OUT/components/mca_coll_rdma.so
[ -f "$so" ] || fail "$so was not built"
grep -q 'MCA coll: rdma' "$build_log" || fail "ompi_info does not list the component built in $OUT (log: $build_log)"
say "built $so ($((SECONDS - start)) s)"

# The newest ompi-sys build script output of a target directory.
build_script_dir() { # TARGET_DIR HEADER_PREFIX
    local out
    for out in $(ls -t "$1"/release/build/ompi-sys-*/output 2>/dev/null); do
        if grep -q "^cargo:rerun-if-changed=$2" "$out"; then dirname "$out"; return 0; fi
    done
    return 1
}
ours=$(build_script_dir "$CARGO_TARGET_DIR" "$tree/") ||
    fail "ompi-sys's build script in $CARGO_TARGET_DIR did not read its headers from $tree"
! grep -q "$hide/" "$ours/output" || fail "ompi-sys's build script still names $hide ($ours/output)"
say "ompi-sys read $(sed -n 's/^cargo:rerun-if-changed=\(.*version\.h\)$/\1/p' "$ours/output")"

# The same bindings as from the system's headers: same layouts, same constants.
if host=$(build_script_dir "$ROOT/target" "$hide/"); then
    if ! diff -u "$host/out/bindings.rs" "$ours/out/bindings.rs" > "$OUT/bindings.diff"; then
        head -n 40 "$OUT/bindings.diff" >&2
        fail "bindgen saw different declarations in $tree than in $hide (see $OUT/bindings.diff): the configure options do not match the installed build"
    fi
    say "bindings identical to those from the system's headers ($(grep -c 'pub struct' "$ours/out/bindings.rs") structs)"
else
    say "SKIPPED the bindings comparison: no host build from $hide in $ROOT/target (run make build first)"
fi

say "MPI tests with $so: $TESTS"
# (cargo finds the host's runner up to date after its MPI tests; built here otherwise)
(cd "$ROOT" && CARGO_TARGET_DIR=$ROOT/target cargo build -q --profile release-tests -p mpi-runner) >"$OUT/mpi-runner-build.log" 2>&1 ||
    { tail -n 20 "$OUT/mpi-runner-build.log" >&2; fail "cannot build the case runner in $ROOT/target (log: $OUT/mpi-runner-build.log)"; }
MPI_RUNNER=$ROOT/target/release-tests/mpi-runner MPI_TESTS_BUILD_DIR=$OUT bash "$ROOT/ci/mpi-tests.sh" --only "$TESTS"
say "passed in $((SECONDS - start)) s"
