#!/usr/bin/env bash
# Builds coll-rdma-tune (tuning/src/bin/coll-rdma-tune) and the program it
# measures with (bench/coll_pairs.c), then runs it on this machine against
# the component in build/components: `make tune` (np=2, quick mode, writes
# build/mca-params.conf). Every argument goes to the tuner and overrides
# these defaults (e.g. --full, --np 2,4, --output FILE; --help lists them).
#
# The sweeps, the comparison and the file are Rust (unit-tested with cargo
# test); this script only builds and passes this machine's settings: the
# component path, and point-to-point over shared memory (--mca btl
# self,vader, as ci/bench-pairs.sh runs); on one host the tuner itself binds
# one rank per core, or oversubscribes above the core count.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
BENCH=$BUILD/bench/coll_pairs
CARGO_OUT=${CARGO_TARGET_DIR:-$ROOT/target}/release

if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
# the sweeps set coll rdma's parameters themselves; leftovers in the
# environment would apply to every job alike and hide what is measured
for v in $(env | sed -n 's/^\(OMPI_MCA_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in
        OMPI_MCA_coll*|OMPI_MCA_mca_base_component_path|OMPI_MCA_btl)
            echo "note: unsetting $v from the environment"; unset "$v" ;;
    esac
done
[ -f "$BUILD/components/mca_coll_rdma.so" ] ||
    { echo "tune: $BUILD/components/mca_coll_rdma.so is missing: run 'make build'" >&2; exit 2; }

cargo build --release -q -p tuning --bin coll-rdma-tune
mkdir -p "$(dirname "$BENCH")"
if [ ! -x "$BENCH" ] || [ "$ROOT/bench/coll_pairs.c" -nt "$BENCH" ]; then
    mpicc -O2 -Wall -o "$BENCH" "$ROOT/bench/coll_pairs.c"
fi

exec "$CARGO_OUT/coll-rdma-tune" --np 2 --quick \
    --mpirun "mpirun --mca btl self,vader" \
    --component-path "SYS_DEFAULT:$BUILD/components" \
    --bench "$BENCH" --output "$BUILD/mca-params.conf" "$@"
