#!/usr/bin/env bash
# Adds coll rdma as an in-tree component (ompi/mca/coll/rdma/) to an Open MPI
# 4.1.x or 5.0.x source tree, recording this repository as the place cargo
# builds it from. Run autogen.pl (and configure, make) in the tree afterwards.
#
#   ompi-patches/apply.sh /path/to/openmpi-X.Y.Z
set -euo pipefail

die() { echo "apply.sh: $*" >&2; exit 1; }
[ $# = 1 ] || die "usage: $0 OPEN_MPI_SOURCE_TREE"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
TREE=$(cd "$1" 2>/dev/null && pwd -P) || die "$1: no such directory"
[ -f "$TREE/VERSION" ] && [ -d "$TREE/ompi/mca/coll" ] || die "$TREE is not an Open MPI source tree"
major=$(sed -n 's/^major=//p' "$TREE/VERSION"); minor=$(sed -n 's/^minor=//p' "$TREE/VERSION")
case "$major.$minor" in
    4.1|5.0) ;;
    *) die "Open MPI $major.$minor: only 4.1.x and 5.0.x are supported" ;;
esac
[ -f "$TREE/autogen.pl" ] || die "$TREE has no autogen.pl (a release tarball without it cannot take new components)"

dest=$TREE/ompi/mca/coll/rdma
mkdir -p "$dest"
install -m 0644 "$REPO"/ompi-patches/intree/rdma/{configure.m4,Makefile.am,README} "$dest/"
echo "$REPO" > "$dest/source-dir"
echo "added $dest (Open MPI $major.$minor, crates from $REPO)"
echo "next: cd $TREE && ./autogen.pl && ./configure ... && make && make install"
