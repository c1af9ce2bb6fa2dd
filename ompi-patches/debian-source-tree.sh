#!/usr/bin/env bash
# A configured (not built) Open MPI source tree of the version installed on
# this Debian host, from Debian's own source package, cached outside the
# repository so that repeated runs reuse it.
#
#   ompi-patches/debian-source-tree.sh prepare   fetch + configure if needed,
#                                                 print the tree's path (last line)
#   ompi-patches/debian-source-tree.sh path      print the tree's path (no work)
#
# Environment:
#   COLL_RDMA_CACHE   cache directory (default /var/cache/coll-rdma as root,
#                     else ${XDG_CACHE_HOME:-~/.cache}/coll-rdma)
#   OMPI_SOURCE_CONFIGURE_OPTS  replaces the configure options below
#
# Only Debian's archive is used: `apt-get source` with a private deb-src list
# (the host's mirror, the host's suite) and private package lists under the
# cache, so /etc/apt and the system's package lists are left alone.
set -euo pipefail

die() { echo "debian-source-tree.sh: $*" >&2; exit 1; }
log() { echo "== debian-source-tree.sh: $*" >&2; }

if [ "$(id -u)" = 0 ]; then CACHE=${COLL_RDMA_CACHE:-/var/cache/coll-rdma}
else CACHE=${COLL_RDMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/coll-rdma}; fi

# The package whose source we need: the one that ships libmpi.so.
PKG_VERSION=$(dpkg-query -W -f '${source:Version}' libopenmpi3 2>/dev/null ||
              dpkg-query -W -f '${source:Version}' "$(dpkg -S "$(readlink -f "$(command -v ompi_info)")" | cut -d: -f1)") ||
    die "cannot tell which Debian package provides Open MPI (dpkg-query)"
UPSTREAM=${PKG_VERSION%-*}; UPSTREAM=${UPSTREAM#*:}

# Options that keep the layouts of the structures coll rdma uses identical to
# Debian's build (no --enable-debug, no CUDA, the same external hwloc, libevent
# and PMIx; UCX and libfabric, whose components add endpoint slots to
# ompi_proc_t), while skipping what is slow to configure and irrelevant to
# the C headers (Fortran, Java, OpenSHMEM). See ompi-patches/README.md.
PMIX_DIR=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)/pmix2
DEFAULT_OPTS="--disable-dependency-tracking --disable-mpi-fortran --disable-mpi-java --disable-oshmem --with-hwloc=external --with-libevent=external --with-ucx --with-ofi"
[ -d "$PMIX_DIR" ] && DEFAULT_OPTS+=" --with-pmix=$PMIX_DIR"
# The development packages those options need (Debian's own build-depends).
BUILD_DEPS=(libhwloc-dev libevent-dev libpmix-dev libucx-dev libfabric-dev)
OPTS=${OMPI_SOURCE_CONFIGURE_OPTS:-$DEFAULT_OPTS}
KEY=$(printf '%s\n' "$PKG_VERSION" "$OPTS" | sha256sum | cut -c1-12)
DIR=$CACHE/ompi-source/openmpi-$PKG_VERSION-$KEY
TREE=$DIR/openmpi-$UPSTREAM
STAMP=$DIR/.coll-rdma-configured

# The Debian archive this machine's apt uses (ci/debian-mirror.sh).
host_mirror() {
    bash "$(dirname "${BASH_SOURCE[0]}")/../ci/debian-mirror.sh" || die "no Debian archive URI found in /etc/apt"
}

fetch() {
    local apt=$CACHE/apt suite
    suite=$(. /etc/os-release && echo "${VERSION_CODENAME:?}")
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$DIR"
    echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(host_mirror) $suite main" > "$apt/sources.list"
    local aptopts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
                   -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root -qq)
    log "apt-get source openmpi=$PKG_VERSION ($suite)"
    apt-get "${aptopts[@]}" update
    rm -rf "$TREE"
    (cd "$DIR" && apt-get "${aptopts[@]}" source "openmpi=$PKG_VERSION" >/dev/null)
    [ -x "$TREE/configure" ] || die "apt-get source did not unpack $TREE/configure"
}

prepare() {
    # one preparer at a time (make check starts one in the background,
    # ci/check-prepare.sh, and check-noheaders runs its own): a second
    # waits, then finds the tree configured
    mkdir -p "$CACHE"
    exec 8>"$CACHE/ompi-source.lock"
    flock 8
    if [ -f "$STAMP" ] && [ -f "$TREE/ompi/include/mpi.h" ]; then
        log "cached: $TREE (configured $(cat "$STAMP"))"
        echo "$TREE"; return 0
    fi
    [ -x "$TREE/configure" ] || fetch
    local pkg missing=()
    for pkg in "${BUILD_DEPS[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
    done
    if [ ${#missing[@]} -gt 0 ] && [ -z "${OMPI_SOURCE_CONFIGURE_OPTS:-}" ]; then
        log "apt-get install ${missing[*]}"
        # A fresh image may have empty package lists (setup.sh updates them only when it installs).
        apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
    fi
    log "configure $OPTS (log: $DIR/configure.log)"
    local start=$SECONDS
    # shellcheck disable=SC2086 # OPTS is a list of words
    (cd "$TREE" && ./configure $OPTS >"$DIR/configure.log" 2>&1) ||
        { tail -n 30 "$DIR/configure.log" >&2; die "configure failed (see $DIR/configure.log)"; }
    date -u +%FT%TZ > "$STAMP"
    log "configured in $((SECONDS - start)) s"
    echo "$TREE"
}

case ${1:-} in
    prepare) prepare ;;
    path) echo "$TREE" ;;
    *) die "usage: $0 prepare|path" ;;
esac
