#!/usr/bin/env bash
# The dependencies' builds of the Open MPI 5 suite, kept inside the chroot
# so that a fresh clone does not compile them again (ci/ompi5/check.sh runs
# this inside ci/ompi5/chroot.sh run): release/ (the component, fbcast) and
# release-tests/ (the MPI tests' case runner, ci/runner, which
# ci/mpi-tests.sh builds even to list the cases).
#
#   ci/ompi5/target-cache.sh seed TARGET    copy each cached profile
#                                           directory into TARGET when
#                                           TARGET has none: the key's, else
#                                           the newest other key's
#   ci/ompi5/target-cache.sh store TARGET   after a good build: keep each of
#                                           TARGET's profile directories
#                                           not cached for the key yet
#
# Invariants:
# - the key is Cargo.lock and the toolchain (rustc -vV); storing a new key
#   removes the older ones, so the cache holds one build of each profile
#   (about 0.5 GB);
# - another lock file or compiler starts from the newest older key's build
#   (the fresh-clone check after a dependency changed rebuilt all of them,
#   64 s of the Open MPI 5 stage): cargo names each artefact by a hash of
#   its crate, version, features, profile and rustc, so the ones that
#   differ are built anew beside the old and the rest are reused; the
#   stale ones ride along, so an older build over SEED_MAX_MIB is not taken
#   (a start from nothing then resets the growth);
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
# the largest older build (one profile) a seed takes, in MiB
SEED_MAX_MIB=${OMPI5_TARGET_SEED_MAX_MIB:-1024}

# The newest entry of another key holding PROFILE, within SEED_MAX_MIB; none
# when there is no such entry.
older_entry() { # PROFILE
    local dir
    for dir in $(ls -1dt "$CACHE"/*/ 2>/dev/null); do
        dir=${dir%/}
        [ "$dir" != "$entry" ] && [ -d "$dir/$1" ] || continue
        [ "$(du -sm "$dir/$1" | cut -f1)" -le "$SEED_MAX_MIB" ] && echo "$dir"
        return 0
    done
}

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
            elif older=$(older_entry "$profile") && [ -n "$older" ]; then
                mkdir -p "$target"
                cp -a "$older/$profile" "$target/"
                say "seeded $target/$profile from $older (an older Cargo.lock or rustc than key $key): cargo rebuilds what differs"
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
