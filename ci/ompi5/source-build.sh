#!/usr/bin/env bash
# coll rdma with an Open MPI 5.0.x built from source and installed with
# --prefix (configure's defaults: dlopen support, so a user's component is
# loaded from a file; 5.0's own components are built into libmpi apart from
# the few for optional libraries), inside the Debian 13 chroot of
# ci/ompi5/chroot.sh: run both commands through `ci/ompi5/chroot.sh run --`.
#
#   ci/ompi5/source-build.sh build   Debian 13's openmpi source (the upstream
#                                    release tarball, apt-get source), configured,
#                                    built and installed into PREFIX; 30 to 60
#                                    minutes on 2 busy cores, so never part of
#                                    make check
#   ci/ompi5/source-build.sh test    coll rdma built against the configured
#                                    tree (OMPI_SOURCE), `make install` into a
#                                    temporary HOME, then plain mpirun with no
#                                    flags must be served by coll rdma; prints
#                                    SKIPPED (exit 0) when PREFIX or the tree
#                                    is missing
#
# The build takes configure's defaults apart from what only shortens it
# (no Fortran, Java, OpenSHMEM, ROMIO, UCX, libfabric): with Debian's
# libpmix-dev, libhwloc-dev and libevent-dev installed, configure's default
# takes those three from the system and builds the bundled PRRTE, which is
# what a user's `./configure --prefix=...` gets on Debian 13. Debian's PMIx
# is why mpirun then sets the ranks' component path, as Debian's own Open MPI
# does (docs/install.md). No --with-devel-headers: coll rdma takes the
# internal headers from the tree.
#
# What the test asserts (everything else is recorded in its log):
# - `make install` installs the component and its self-check passes or is
#   explained, and coll-rdma-selfcheck then says OK under plain mpirun (with
#   the environment file sourced when make install wrote one);
# - when mpirun puts a component path without the install directory into
#   the ranks' environment, make install must have written the file, and
#   without it the self-check must say "not served" and why; when mpirun
#   sets none, make install must write no file;
# - the self-check's program ran on PREFIX's libmpi, not on the chroot's
#   Debian one (same version, so the version string cannot tell).
#
# Environment: OMPI5_SRC_PREFIX (default /opt/openmpi-VERSION),
# OMPI5_SRC_TREE (default /var/cache/coll-rdma/ompi5-source/openmpi-VERSION),
# VERSION being the upstream version of the chroot's libopenmpi-dev.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=$ROOT/build/ompi5-source
TIMEOUT=${TEST_TIMEOUT:-180}
# (external PMIx, hwloc and libevent: what configure picks by itself when
# their development packages are installed; named so that a missing one
# stops configure instead of silently building the bundled copy)
CONFIGURE_OPTIONS=(--disable-mpi-fortran --disable-oshmem --disable-mpi-java --disable-io-romio
    --without-ucx --without-ofi --with-pmix=external --with-hwloc=external --with-libevent=external
    --disable-dependency-tracking)

die() { echo "source-build.sh: $*" >&2; exit 2; }

debian_version=$(dpkg-query -W -f='${Version}' libopenmpi-dev 2>/dev/null) \
    || die "no libopenmpi-dev: run me inside ci/ompi5/chroot.sh run"
VERSION=${debian_version#*:}; VERSION=${VERSION%%-*}
PREFIX=${OMPI5_SRC_PREFIX:-/opt/openmpi-$VERSION}
TREE=${OMPI5_SRC_TREE:-/var/cache/coll-rdma/ompi5-source/openmpi-$VERSION}

cmd_build() {
    local work
    work=$(dirname "$TREE")
    mkdir -p "$work" || die "cannot create $work"
    cd "$work" || exit 2
    if [ ! -f "$TREE/configure" ]; then
        apt-get source --download-only "openmpi=$debian_version" >/dev/null \
            || die "apt-get source openmpi=$debian_version failed (deb-src in the chroot's sources?)"
        tar -xJf "openmpi_$VERSION.orig.tar.xz" || die "cannot unpack openmpi_$VERSION.orig.tar.xz"
        [ "$PWD/openmpi-$VERSION" = "$TREE" ] || mv "openmpi-$VERSION" "$TREE"
        rm -f openmpi_*
    fi
    cd "$TREE" || exit 2
    echo "== configure --prefix=$PREFIX ${CONFIGURE_OPTIONS[*]} (log: $TREE/configure.log)"
    nice -n 10 ./configure --prefix="$PREFIX" "${CONFIGURE_OPTIONS[@]}" >configure.log 2>&1 \
        || { tail -n 20 configure.log; die "configure failed"; }
    sed -n '/^Open MPI configuration:/,/^Accelerators/p' configure.log
    echo "== make -j2 (log: $TREE/make.log)"
    nice -n 10 make -j2 >make.log 2>&1 || { tail -n 30 make.log; die "make failed"; }
    echo "== make install"
    nice -n 10 make install >install.log 2>&1 || { tail -n 30 install.log; die "make install failed"; }
    "$PREFIX/bin/ompi_info" --version | head -n 1
}

PASSED=0 FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS $1"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1: $2"; [ -f "$LOGS/$1.log" ] && tail -n 20 "$LOGS/$1.log" | sed 's/^/    /'; }

cmd_test() {
    if [ ! -x "$PREFIX/bin/mpirun" ] || [ ! -f "$TREE/opal/include/opal_config.h" ]; then
        echo "SKIPPED: no Open MPI $VERSION built from source in $PREFIX with its configured tree in $TREE"
        echo "         (ci/ompi5/chroot.sh run -- bash ci/ompi5/source-build.sh build makes both, 30-60 min)"
        exit 0
    fi
    LOGS=$OUT/logs
    mkdir -p "$LOGS"
    cd "$ROOT" || exit 2
    # the source build's tools, and nothing that chroot.sh sets up for
    # Debian's own Open MPI (its missing-header directory) or a user's path
    export PATH=$PREFIX/bin:$PATH
    unset OMPI_EXTRA_INCLUDE_DIRS
    for v in $(env | sed -n 's/^\(\(OMPI\|PMIX\)_MCA_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
    [ "$(command -v mpirun)" = "$PREFIX/bin/mpirun" ] || die "mpirun on PATH is $(command -v mpirun), not $PREFIX's"
    ompi_info -c 2>/dev/null | grep -E 'Configure command line|Internal debug support|dl support' | sed 's/^ */   /'

    echo "== coll rdma against $TREE (OMPI_SOURCE), without verbs (docs/ompi5-port.md)"
    local dirs
    dirs=$(bash ompi-patches/source-tree-include-dirs.sh "$TREE") || { fail build "source-tree-include-dirs.sh refused $TREE"; return; }
    export CARGO_HOME=${OMPI5_CARGO_HOME:-/var/cache/coll-rdma/cargo-home}
    bash ci/ompi5/target-cache.sh seed "$OUT/target"
    if ! OMPI_INCLUDE_DIRS=$dirs CARGO_TARGET_DIR=$OUT/target \
        cargo build --release -p coll-rdma --no-default-features >"$LOGS/build.log" 2>&1; then
        fail build "cargo build failed"
        return
    fi
    mkdir -p "$OUT/components"
    install -m 0755 "$OUT/target/release/libmca_coll_rdma.so" "$OUT/components/mca_coll_rdma.so"
    pass build

    echo "== what mpirun gives the ranks (mpirun -np 1 env | grep MCA_)"
    timeout -k 5 "$TIMEOUT" mpirun -np 1 env 2>&1 | grep -E '^(OMPI|PMIX)_MCA_' | tee "$LOGS/rank-env.log" | sed 's/^/   /'
    local launcher_path
    launcher_path=$(sed -n 's/^OMPI_MCA_mca_base_component_path=//p' "$LOGS/rank-env.log")

    local env_file selfcheck
    home=$(mktemp -d "${TMPDIR:-/tmp}/coll-rdma-home.XXXXXX")
    trap 'rm -rf "$home"' EXIT
    env_file=$home/.openmpi/coll-rdma-env.sh
    selfcheck=$home/.local/bin/coll-rdma-selfcheck
    # -o build: install the component built above, without make build's
    # host-side steps; BUILD=$OUT, which has no fbcast (not needed here)
    if HOME=$home timeout -k 5 "$TIMEOUT" make --no-print-directory -o build install \
        COMPONENT="$OUT/components/mca_coll_rdma.so" BUILD="$OUT" >"$LOGS/install.log" 2>&1 \
        && [ -f "$home/.openmpi/components/mca_coll_rdma.so" ] && [ -x "$selfcheck" ]; then
        pass install
    else
        fail install "make install failed or installed no component and self-check"
        return
    fi
    sed -n '/component-path\|mpirun\|Wrote\|coll-rdma-selfcheck:/p' "$LOGS/install.log" | head -n 12 | sed 's/^/   /'

    # shellcheck source=ci/ompi5/selfcheck-runs.sh
    . "$ROOT/ci/ompi5/selfcheck-runs.sh"
    case ":$launcher_path:" in
    "::")
        [ ! -e "$env_file" ] && pass no-env-file-when-mpirun-sets-no-path \
            || fail no-env-file-when-mpirun-sets-no-path "mpirun sets no component path, but make install wrote $env_file"
        check_selfcheck_ok selfcheck "$home" "$selfcheck" "$LOGS/selfcheck.log" ;;
    *":$home/.openmpi/components:"*)
        fail env-file "mpirun already names the install directory ($launcher_path): unexpected in a fresh HOME"
        return ;;
    *)
        [ -f "$env_file" ] && pass env-file-when-mpirun-replaces-path \
            || fail env-file-when-mpirun-replaces-path "mpirun sets \"$launcher_path\" but make install wrote no $env_file"
        check_selfcheck_not_served "$home" "$selfcheck" "$LOGS/selfcheck-without-env.log"
        check_selfcheck_ok selfcheck "$home" "$selfcheck" "$LOGS/selfcheck.log" "$env_file" ;;
    esac
    sed 's/^/   /' "$LOGS/selfcheck.log" | grep 'coll-rdma-selfcheck:' | head -n 3

    # the same program as the self-check's, to see which libmpi a rank maps
    # (Debian's /usr/lib has the same version)
    printf '#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n' >"$OUT/init.c"
    mpicc -o "$OUT/init" "$OUT/init.c" || { fail libmpi-from-prefix "mpicc failed"; return; }
    local libmpi
    libmpi=$(ldd "$OUT/init" | awk '$1 ~ /^libmpi\.so/ {print $3}')
    case $libmpi in
        "$PREFIX"/*) pass libmpi-from-prefix ;;
        *) fail libmpi-from-prefix "mpicc's program loads libmpi from \"$libmpi\", not $PREFIX" ;;
    esac
}

case ${1:-} in
    build) cmd_build ;;
    test)
        cmd_test
        echo "source-build: $PASSED passed, $FAILED failed"
        [ "$FAILED" = 0 ] ;;
    *) echo "usage: $0 build|test" >&2; exit 2 ;;
esac
