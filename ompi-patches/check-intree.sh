#!/usr/bin/env bash
# make check-intree: coll rdma as an in-tree component of Debian's source of
# the installed Open MPI (4.1.x): apply.sh, autogen.pl, configure, make,
# make install into a private prefix, then a few MPI tests with that
# Open MPI and its installed coll rdma. Long (a whole Open MPI build); not
# part of make check.
#
# Environment:
#   INTREE_DIR    work directory (default /var/cache/coll-rdma/intree)
#   INTREE_STEPS  "full" (default) or "component": stop after configure and
#                 build only ompi/mca/coll/rdma, linking the system's libmpi
#                 of the same version instead of the tree's (not yet built),
#                 and run the MPI tests with that .so and the system's Open MPI
#   INTREE_TESTS  ci/mpi-tests.sh --only regex
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
WORK=${INTREE_DIR:-/var/cache/coll-rdma/intree}
STEPS=${INTREE_STEPS:-full}
TESTS=${INTREE_TESTS:-'^(np2-(reduce_ops|bcast)|plain-coll-rdma-every-collective-np2)$'}
start=$SECONDS

say() { echo "== check-intree: $* ($((SECONDS - start)) s)"; }
fail() { echo "check-intree: FAILED: $*" >&2; exit 1; }
skip() { echo "check-intree: SKIPPED: $*"; exit 0; }

[ "$(id -u)" = 0 ] || skip "needs root (apt-get for the autotools, the cache under /var/cache)"
# autogen.pl needs the autotools; Debian packages only.
missing=()
for pkg in autoconf automake libtool m4 flex dpkg-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "apt-get install ${missing[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# A pristine copy of Debian's source (the no-headers cache holds the .dsc).
bash "$ROOT/ompi-patches/debian-source-tree.sh" prepare >/dev/null
dsc=$(ls "$(dirname "$(bash "$ROOT/ompi-patches/debian-source-tree.sh" path)")"/openmpi_*.dsc | head -n1)
version=$(sed -n 's/^Version: //p' "$dsc"); upstream=${version%-*}; upstream=${upstream#*:}
tree=$WORK/openmpi-$upstream
rm -rf "$WORK"; mkdir -p "$WORK"
dpkg-source --no-check -x "$dsc" "$tree" >/dev/null
say "unpacked $tree"

bash "$ROOT/ompi-patches/apply.sh" "$tree"
(cd "$tree" && ./autogen.pl --force --no-oshmem) > "$WORK/autogen.log" 2>&1 || { tail -n 30 "$WORK/autogen.log" >&2; fail "autogen.pl (log: $WORK/autogen.log)"; }
grep -A1 -- '--- Found ompi / coll / rdma component' "$WORK/autogen.log" | grep -q 'Found configure.m4 file' ||
    fail "autogen.pl did not pick up ompi/mca/coll/rdma/configure.m4 (log: $WORK/autogen.log)"
say "autogen.pl found ompi / coll / rdma and its configure.m4"

prefix=$WORK/install
(cd "$tree" && ./configure --prefix="$prefix" --with-devel-headers --disable-dependency-tracking \
    --disable-mpi-fortran --disable-mpi-java --with-hwloc=external --with-libevent=external \
    --with-pmix=/usr/lib/x86_64-linux-gnu/pmix2) > "$WORK/configure.log" 2>&1 ||
    { tail -n 30 "$WORK/configure.log" >&2; fail "configure (log: $WORK/configure.log)"; }
grep -E 'MCA component coll:rdma' "$WORK/configure.log" | sed 's/^/   /'
grep -qE 'checking if MCA component coll:rdma can compile\.\.\. yes' "$WORK/configure.log" ||
    fail "configure does not build coll rdma (log: $WORK/configure.log)"
# Built as a DSO, not linked into libmpi (which the cdylib cannot be).
grep -q "^MCA_ompi_coll_DSO_SUBDIRS='.*mca/coll/rdma" "$tree/config.log" ||
    fail "configure does not build coll rdma as a DSO (MCA_ompi_coll_DSO_SUBDIRS in $tree/config.log)"
say "configure picked up coll rdma, as a DSO"

# Start cargo from a copy of the host build's target directory, if any: only
# ompi-sys (other headers) and what depends on it are rebuilt.
if [ -d "$ROOT/target/release" ]; then
    mkdir -p "$tree/ompi/mca/coll/rdma/target"
    cp -a --reflink=auto "$ROOT/target/release" "$tree/ompi/mca/coll/rdma/target/"
fi

if [ "$STEPS" = component ]; then
    # libmpi of this tree is not built: link the system's, the same version.
    make -C "$tree/ompi/mca/coll/rdma" coll_rdma_lib_dirs="$(mpicc --showme:libdirs)" > "$WORK/make-component.log" 2>&1 ||
        { tail -n 30 "$WORK/make-component.log" >&2; fail "make in ompi/mca/coll/rdma (log: $WORK/make-component.log)"; }
    so=$tree/ompi/mca/coll/rdma/mca_coll_rdma.so
    [ -f "$so" ] || fail "$so was not built"
    OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$tree/ompi/mca/coll/rdma" ompi_info | grep -c 'MCA coll: rdma' >/dev/null ||
        fail "ompi_info does not list $so"
    say "built $so in the tree (linked to the system's libmpi); ompi_info lists it"
    out=$ROOT/build/intree/component
    mkdir -p "$out/components"; cp -f "$so" "$out/components/"
    MPI_TESTS_BUILD_DIR=$out bash "$ROOT/ci/mpi-tests.sh" --only "$TESTS"
    say "passed"
    exit 0
fi

(cd "$tree" && make -j"$(nproc)" && make install) > "$WORK/make.log" 2>&1 ||
    { tail -n 30 "$WORK/make.log" >&2; fail "make (log: $WORK/make.log)"; }
installed_so=$(ls "$prefix"/lib/openmpi/mca_coll_rdma.so 2>/dev/null) || fail "make install did not install mca_coll_rdma.so"
say "built and installed Open MPI with $installed_so"
"$prefix/bin/ompi_info" | grep -c 'MCA coll: rdma' >/dev/null || fail "the new ompi_info does not list coll rdma"

# ci/mpi-tests.sh takes the component from BUILD/components: that is the
# installed component directory itself.
out=$ROOT/build/intree
mkdir -p "$out"; ln -sfn "$prefix/lib/openmpi" "$out/components"
PATH=$prefix/bin:$PATH LD_LIBRARY_PATH=$prefix/lib MPI_TESTS_BUILD_DIR=$out bash "$ROOT/ci/mpi-tests.sh" --only "$TESTS"
say "passed"
