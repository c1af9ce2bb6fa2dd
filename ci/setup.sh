#!/usr/bin/env bash
# Prepares a Debian 12 machine for building and testing coll rdma.
# Idempotent: installs only the Debian packages that are missing (apt-get,
# with one 'apt-get update' first), then checks the Rust toolchain.
# Fails with an explanation when something cannot be fixed automatically.
set -euo pipefail

PACKAGES=(
    libopenmpi-dev openmpi-bin   # Open MPI 4.1.4: headers, mpicc, mpirun, ompi_info
    libclang-dev clang           # bindgen (ompi-sys)
    build-essential pkg-config   # C compiler for the shim, the tests and the benchmark
    libibverbs-dev librdmacm-dev # the verbs transport (rdma-sys bindings)
    ibverbs-providers            # user-space drivers (rxe, mlx5...) loaded at run time
    gdb                          # user stacks of a test job that outlived its limit (ci/mpi-tests.sh)
    jq                           # reads the events files of the MPI tests (ci/events-check.sh)
    python3-mpi4py               # mpi4py as Python users run it (tests/python, ci/mpi-tests.sh; ~2 MB)
    # (the scripts also use timeout, awk, lscpu: coreutils, mawk and util-linux
    #  are part of every Debian system)
)
MIN_RUST=1.88.0                  # edition 2024 let chains; Cargo.toml rust-version

say() { printf 'setup: %s\n' "$*"; }
fail() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

if ! command -v dpkg-query >/dev/null; then
    fail "dpkg-query not found: this script supports Debian 12 (bookworm) only; install Open MPI 4.1 with its development headers, clang/libclang and a C toolchain by hand"
fi

missing=()
for p in "${PACKAGES[@]}"; do
    installed "$p" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
    say "installing missing packages: ${missing[*]}"
    SUDO=()
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null || fail "not root and no sudo: install ${missing[*]} by hand"
        SUDO=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    # (another installer on the machine, e.g. a test bed's preparation
    # beside make check, holds dpkg's lock for a while: wait for it)
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 update -q
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
    for p in "${missing[@]}"; do
        installed "$p" || fail "package $p is still not installed"
    done
else
    say "Debian packages present"
fi

# Open MPI: the component is bound to the exact installed version.
for tool in mpicc mpirun ompi_info; do
    command -v "$tool" >/dev/null || fail "$tool not found although openmpi-bin/libopenmpi-dev are installed"
done
ompi_version=$(ompi_info --parsable | awk -F: '$1=="ompi" && $2=="version" && $3=="full" {print $4}')
case $ompi_version in
    4.1.*) say "Open MPI $ompi_version" ;;
    *) say "warning: Open MPI $ompi_version found; coll rdma is written for 4.1.x (Debian 12 ships 4.1.4)" ;;
esac

# Rust: the code needs cargo/rustc >= 1.88 (let chains). Debian 12's rustc (1.63) is too
# old; rustup's stable toolchain is the supported way. rustup installs into
# ~/.cargo/bin, which non-login shells may not have on PATH.
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
rust_help="install Rust >= $MIN_RUST with rustup (Debian 12's own rustc is too old for edition 2024):
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    . \"\$HOME/.cargo/env\"
then run this again."
command -v cargo >/dev/null || fail "cargo not found; $rust_help"
cargo_version=$( (cargo --version 2>/dev/null || true) | awk '{print $2}')
[ -n "$cargo_version" ] ||
    fail "'cargo --version' fails ($(command -v cargo)); with rustup, 'rustup default stable' may be missing; $rust_help"
rustc_version=$(rustc --version 2>/dev/null | awk '{print $2}' || true)
version_ge() {  # version_ge A B: A >= B (numeric dotted, pre-release tags ignored)
    awk -v a="${1%%-*}" -v b="${2%%-*}" 'BEGIN {
        n = split(a, x, "."); m = split(b, y, ".")
        for (i = 1; i <= 3; i++) {
            if ((x[i] + 0) > (y[i] + 0)) exit 0
            if ((x[i] + 0) < (y[i] + 0)) exit 1
        }
        exit 0 }'
}
version_ge "$cargo_version" "$MIN_RUST" ||
    fail "cargo $cargo_version ($(command -v cargo)) is older than $MIN_RUST; $rust_help"
[ -z "$rustc_version" ] || version_ge "$rustc_version" "$MIN_RUST" ||
    fail "rustc $rustc_version is older than $MIN_RUST; $rust_help"
say "cargo $cargo_version, rustc ${rustc_version:-?} ($(command -v cargo))"
