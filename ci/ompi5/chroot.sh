#!/usr/bin/env bash
# A Debian 13 (trixie) chroot with Open MPI 5.0.x, to build and test this
# source against Open MPI 5 next to the host's 4.1.x.
#
#   ci/ompi5/chroot.sh prepare            create or update the chroot (idempotent)
#   ci/ompi5/chroot.sh run -- CMD ARGS... run CMD inside it, in the repository
#   ci/ompi5/chroot.sh shell              interactive shell inside it
#   ci/ompi5/chroot.sh status             show what exists and what is mounted
#   ci/ompi5/chroot.sh destroy            unmount and delete the chroot
#
# Environment:
#   OMPI5_CHROOT  where the chroot lives (default /var/tmp/coll-rdma-ompi5-trixie;
#                 kept outside the repository because the repository is bound
#                 inside it)
#   OMPI5_MIRROR  Debian mirror URL (default: the host's own Debian mirror, read
#                 from /etc/apt; no other host is ever assumed)
#
# Packages come only from Debian's archive (debootstrap + apt inside). The
# repository is bound at the same absolute path as on the host, so paths in
# cargo's output and in build scripts match. Builds inside should use their own
# CARGO_TARGET_DIR (build/ompi5/target) and CARGO_HOME (build/ompi5/cargo-home)
# so they never mix with the host's 4.1 artefacts.
#
# Mounts are made for the duration of one command and removed on exit, error
# or signal (trap); a lock serialises concurrent invocations on one chroot.
set -euo pipefail

SUITE=trixie
ROOT=${OMPI5_CHROOT:-/var/tmp/coll-rdma-ompi5-trixie}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
STAMP_NAME=.coll-rdma-prepared
# Open MPI 5, the C toolchain and headers that ompi-sys needs (bindgen uses
# libclang), the verbs/rdmacm headers btl-ibmc links against.
PACKAGES=(openmpi-bin libopenmpi-dev build-essential clang libclang-dev pkg-config
    libibverbs-dev librdmacm-dev ca-certificates git procps
    gdb   # user stacks of a test job that outlived its limit (ci/mpi-tests.sh)
    jq)   # reads the events files of the MPI tests (ci/events-check.sh)
# The workspace's declared rust-version; trixie's own cargo is used only if it
# is at least that (OMPI5_RUST=debian|host forces the choice).
RUST_MIN=$(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' "$REPO/Cargo.toml" | head -n1)

die() { echo "chroot.sh: $*" >&2; exit 1; }
log() { echo "== chroot.sh: $*" >&2; }

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot and mounts need it)"

# The host's Debian mirror (ci/debian-mirror.sh says how it is found).
MIRROR=${OMPI5_MIRROR:-$(bash "$REPO/ci/debian-mirror.sh")} || die "no Debian archive URI found in /etc/apt; set OMPI5_MIRROR"
# Security updates from the same host, as the host itself is configured.
SECURITY_MIRROR="${MIRROR%/debian}/debian-security"

MOUNTED=()
mount_bind() { # SRC DST [ro]
    local src=$1 dst=$ROOT$2
    mkdir -p "$dst"
    mountpoint -q "$dst" && return 0
    mount --bind "$src" "$dst"
    MOUNTED+=("$dst")
    if [ "${3:-}" = ro ]; then mount -o remount,bind,ro "$dst"; fi
}
unmount_all() {
    local i
    for ((i=${#MOUNTED[@]}-1; i>=0; i--)); do
        umount "${MOUNTED[$i]}" 2>/dev/null || umount -l "${MOUNTED[$i]}" 2>/dev/null || true
    done
    MOUNTED=()
}
mount_all() {
    trap unmount_all EXIT
    trap 'unmount_all; exit 130' INT TERM
    mkdir -p "$ROOT/proc"
    if ! mountpoint -q "$ROOT/proc"; then
        mount -t proc proc "$ROOT/proc"; MOUNTED+=("$ROOT/proc")
    fi
    mount_bind /dev /dev
    mount_bind /dev/pts /dev/pts
    mount_bind /dev/shm /dev/shm
    # hwloc (inside Open MPI) reads the topology from /sys; read-only is enough.
    mount_bind /sys /sys ro
    mount_bind "$REPO" "$REPO"
    if [ -n "${RUST_FROM_HOST:-}" ]; then
        mount_bind "$HOME/.cargo" /root/.cargo ro
        mount_bind "$HOME/.rustup" /root/.rustup ro
    fi
}

in_chroot() { # CMD... with a clean environment
    chroot "$ROOT" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
        PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        DEBIAN_FRONTEND=noninteractive "${EXTRA_ENV[@]}" "$@"
}
EXTRA_ENV=()

lock() {
    mkdir -p "$(dirname "$ROOT")"
    exec 9>"$ROOT.lock"
    flock 9
}

# Rust: trixie's own cargo if new enough, else the host's rustup toolchain
# bound read-only (decided at prepare time, remembered in the chroot).
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

# Debian's libopenmpi-dev 5.0 omits opal/mca/threads/pthreads/*.h, which its
# opal_config.h names (MCA_threads_*_base_include_HEADER) and every internal
# header reaches. They are taken from Debian's own source package of the
# installed version, into a directory outside the repository that `run`
# passes to ompi-sys as OMPI_EXTRA_INCLUDE_DIRS.
EXTRA_HEADERS=/usr/src/openmpi/extra
fetch_missing_headers() {
    local version
    version=$(in_chroot dpkg-query -W -f='${Version}' libopenmpi-dev)
    if [ -f "$ROOT$EXTRA_HEADERS/.version" ] && [ "$(cat "$ROOT$EXTRA_HEADERS/.version")" = "$version" ]; then
        return 0
    fi
    log "fetching Debian's openmpi $version source for the headers libopenmpi-dev omits"
    in_chroot sh -c "rm -rf /usr/src/openmpi && mkdir -p /usr/src/openmpi && cd /usr/src/openmpi \
        && apt-get source --download-only openmpi=$version >/dev/null 2>&1 \
        && mkdir -p extra && tar -xJf openmpi_*.orig.tar.xz -C extra --strip-components=1 \
               --wildcards '*/opal/mca/threads/pthreads/*.h' \
        && rm -f openmpi_*" || die "could not fetch the openmpi source package"
    echo "$version" >"$ROOT$EXTRA_HEADERS/.version"
}

cmd_prepare() {
    lock
    local t0=$SECONDS
    command -v debootstrap >/dev/null || { log "installing debootstrap"; apt-get -o DPkg::Lock::Timeout=600 install -y debootstrap; }
    if [ ! -f "$ROOT/.coll-rdma-debootstrap-done" ]; then
        # A half-finished debootstrap cannot be resumed reliably: start over.
        [ -d "$ROOT" ] && { log "removing incomplete $ROOT"; cmd_destroy_unlocked; }
        log "debootstrap $SUITE from $MIRROR into $ROOT"
        debootstrap --variant=minbase --components=main "$SUITE" "$ROOT" "$MIRROR"
        touch "$ROOT/.coll-rdma-debootstrap-done"
    fi
    cat >"$ROOT/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb deb-src
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    rm -f "$ROOT/etc/apt/sources.list"
    cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
    # The host's locally added CA certificates (a TLS-inspecting proxy, if
    # any) so that cargo inside reaches crates.io exactly as the host does.
    local local_cas=(/usr/local/share/ca-certificates/*.crt)
    if [ -e "${local_cas[0]}" ]; then
        mkdir -p "$ROOT/usr/local/share/ca-certificates"
        cp "${local_cas[@]}" "$ROOT/usr/local/share/ca-certificates/"
    fi
    # Daemons must not start inside the chroot.
    printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"; chmod +x "$ROOT/usr/sbin/policy-rc.d"
    mount_all
    in_chroot apt-get update
    in_chroot apt-get install -y --no-install-recommends "${PACKAGES[@]}"
    in_chroot update-ca-certificates >/dev/null
    fetch_missing_headers
    local cargo_version
    cargo_version=$(in_chroot apt-cache policy cargo | awk '/Candidate:/ {print $2}')
    cargo_version=${cargo_version#*:}; cargo_version=${cargo_version%%[+~-]*}
    local rust_from=${OMPI5_RUST:-}
    if [ -z "$rust_from" ]; then
        if [ -n "$cargo_version" ] && version_ge "$cargo_version" "${RUST_MIN:-0}"; then
            rust_from=debian
        else
            rust_from=host
        fi
    fi
    if [ "$rust_from" = debian ]; then
        log "trixie's cargo $cargo_version >= $RUST_MIN: installing Debian's rustc/cargo"
        in_chroot apt-get install -y --no-install-recommends rustc cargo
        echo debian >"$ROOT/.coll-rdma-rust"
    else
        log "trixie's cargo ${cargo_version:-none}, workspace needs ${RUST_MIN:-?}: 'run' binds the host's ~/.cargo and ~/.rustup read-only"
        [ -x "$HOME/.cargo/bin/cargo" ] && [ -d "$HOME/.rustup" ] \
            || die "no rustup toolchain in $HOME/.cargo and $HOME/.rustup to bind"
        echo host >"$ROOT/.coll-rdma-rust"
    fi
    in_chroot apt-get clean
    { echo "mirror=$MIRROR"; date -u +%FT%TZ; } >"$ROOT/$STAMP_NAME"
    in_chroot sh -c 'echo "Open MPI: $(ompi_info --version 2>/dev/null | head -n1)"; rustc --version 2>/dev/null; cargo --version 2>/dev/null' >&2 || true
    # Measured unmounted: the bound repository is on the same file system.
    unmount_all
    log "prepared in $((SECONDS - t0)) s; $(du -sh --one-file-system "$ROOT" | cut -f1) on disk"
}

cmd_run() {
    [ -f "$ROOT/$STAMP_NAME" ] || die "$ROOT is not prepared; run: $0 prepare"
    [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || die "usage: $0 run -- CMD [ARGS...]"
    lock
    [ "$(cat "$ROOT/.coll-rdma-rust" 2>/dev/null)" = host ] && RUST_FROM_HOST=1
    mount_all
    EXTRA_ENV=(CARGO_HOME="$REPO/build/ompi5/cargo-home" CARGO_TARGET_DIR="$REPO/build/ompi5/target"
        OMPI_EXTRA_INCLUDE_DIRS="$EXTRA_HEADERS")
    if [ -n "${RUST_FROM_HOST:-}" ]; then
        # The host's ~/.cargo is read-only in here: registries go to CARGO_HOME
        # above, binaries are taken from the bound toolchain.
        EXTRA_ENV+=(RUSTUP_HOME=/root/.rustup PATH=/root/.cargo/bin:/usr/local/bin:/usr/bin:/bin)
    fi
    # mpirun (PRRTE in Open MPI 5) refuses root without these.
    EXTRA_ENV+=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
    local status=0
    in_chroot /bin/sh -c 'cd "$0" && exec "$@"' "$REPO" "$@" || status=$?
    return $status
}

cmd_status() {
    echo "chroot:  $ROOT ($( [ -f "$ROOT/$STAMP_NAME" ] && echo prepared || echo 'not prepared'))"
    echo "mirror:  $MIRROR"
    echo "repo:    $REPO"
    [ -d "$ROOT" ] && echo "disk:    $(du -sh --one-file-system "$ROOT" 2>/dev/null | cut -f1)"
    echo "mounts:"; grep -F " $ROOT/" /proc/mounts || echo "  (none)"
}

cmd_destroy_unlocked() {
    local m
    # Unmount anything left below the chroot (deepest first) before deleting,
    # so rm can never descend into /dev, /proc or the repository.
    while read -r m; do
        umount "$m" 2>/dev/null || umount -l "$m"
    done < <(awk -v r="$ROOT/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r)
    if awk -v r="$ROOT/" 'index($2, r) == 1 {found=1} END {exit !found}' /proc/mounts; then
        die "mounts remain below $ROOT; not deleting"
    fi
    rm -rf --one-file-system "$ROOT"
}

cmd_destroy() {
    lock
    cmd_destroy_unlocked
    rm -f "$ROOT.lock"
    log "removed $ROOT"
}

case "${1:-}" in
    prepare) shift; cmd_prepare "$@" ;;
    run)     shift; cmd_run "$@" ;;
    shell)   shift; cmd_run -- /bin/bash ;;
    status)  shift; cmd_status ;;
    destroy) shift; cmd_destroy ;;
    *) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
