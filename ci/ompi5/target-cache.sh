#!/usr/bin/env bash
# The dependencies' builds of the Open MPI 5 suite, kept inside the chroot
# so that a fresh clone does not compile them again (ci/ompi5/check.sh runs
# this inside ci/ompi5/chroot.sh run): release/ (the component, fbcast) and
# release-tests/ (the MPI tests' case runner, ci/runner, which
# ci/mpi-tests.sh builds even to list the cases).
#
#   ci/ompi5/target-cache.sh seed TARGET    copy each cached profile
#                                           directory into TARGET when
#                                           TARGET has none
#   ci/ompi5/target-cache.sh store TARGET   after a good build: keep each of
#                                           TARGET's profile directories
#                                           not cached for the key yet
#
# Invariants:
# - the key is Cargo.lock and the toolchain (rustc -vV): another lock file or
#   compiler starts from nothing; storing a new key removes the older ones,
#   so the cache holds one build of each profile (about 0.5 GB);
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
PROFILES=(release release-tests)
case $1 in
    seed)
        for profile in "${PROFILES[@]}"; do
            if [ -d "$target/$profile" ]; then
                say "$target/$profile exists: cargo takes it from there"
            elif [ -d "$entry/$profile" ]; then
                mkdir -p "$target"
                cp -a "$entry/$profile" "$target/"
                say "seeded $target/$profile from $entry"
            else
                say "nothing cached for $profile, Cargo.lock and $(rustc --version) (key $key): building every dependency"
            fi
        done ;;
    store)
        [ -d "$target/release" ] || { echo "target-cache: $target/release does not exist" >&2; exit 1; }
        if [ ! -d "$entry" ]; then
            mkdir -p "$CACHE"
            rm -rf "${CACHE:?}"/*
        fi
        for profile in "${PROFILES[@]}"; do
            [ -d "$target/$profile" ] && [ ! -d "$entry/$profile" ] || continue
            rm -rf "$CACHE/$key.$profile.tmp"
            cp -a "$target/$profile" "$CACHE/$key.$profile.tmp"
            mkdir -p "$entry"
            mv "$CACHE/$key.$profile.tmp" "$entry/$profile"
            say "stored $target/$profile in $entry ($(du -sh "$entry/$profile" | cut -f1))"
        done ;;
    *) echo "usage: $0 seed|store TARGET" >&2; exit 2 ;;
esac
