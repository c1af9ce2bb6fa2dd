#!/usr/bin/env bash
# The dependencies' release builds of the Open MPI 5 suite, kept inside the
# chroot so that a fresh clone does not compile them again (ci/ompi5/check.sh
# runs this inside ci/ompi5/chroot.sh run).
#
#   ci/ompi5/target-cache.sh seed TARGET    copy the cached release/ into
#                                           TARGET when TARGET has none
#   ci/ompi5/target-cache.sh store TARGET   after a good build: keep TARGET's
#                                           release/ when nothing is cached
#                                           for the key yet
#
# Invariants:
# - the key is Cargo.lock and the toolchain (rustc -vV): another lock file or
#   compiler starts from nothing; storing a new key removes the older ones,
#   so the cache holds one build (about 0.4 GB);
# - cargo still decides what to rebuild: a seeded target is only a start, so
#   a stale or partial entry costs time, never a wrong build (the workspace's
#   own crates, from another clone's path, are always rebuilt);
# - ci/ompi5/chroot.sh's lock serialises every run in the chroot, so no
#   other run reads an entry while it is written (written apart, then renamed).
# Environment: OMPI5_TARGET_CACHE (default /var/cache/coll-rdma/ompi5-target,
# a path inside the chroot).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${OMPI5_TARGET_CACHE:-/var/cache/coll-rdma/ompi5-target}

say() { echo "== target-cache: $*"; }

cache_key() {
    { cat "$ROOT/Cargo.lock"; rustc -vV; } | sha256sum | cut -c1-16
}

[ $# = 2 ] || { echo "usage: $0 seed|store TARGET" >&2; exit 2; }
target=$2
key=$(cache_key)
entry=$CACHE/$key
case $1 in
    seed)
        if [ -d "$target/release" ]; then
            say "$target/release exists: cargo takes it from there"
        elif [ -d "$entry/release" ]; then
            mkdir -p "$target"
            cp -a "$entry/release" "$target/"
            say "seeded $target/release from $entry"
        else
            say "nothing cached for Cargo.lock and $(rustc --version) (key $key): building every dependency"
        fi ;;
    store)
        [ -d "$target/release" ] || { echo "target-cache: $target/release does not exist" >&2; exit 1; }
        if [ -d "$entry/release" ]; then exit 0; fi
        mkdir -p "$CACHE"
        rm -rf "${CACHE:?}"/*
        cp -a "$target/release" "$CACHE/$key.tmp"
        mkdir -p "$entry"
        mv "$CACHE/$key.tmp" "$entry/release"
        say "stored $target/release as $entry ($(du -sh "$entry" | cut -f1))" ;;
    *) echo "usage: $0 seed|store TARGET" >&2; exit 2 ;;
esac
