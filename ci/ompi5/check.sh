#!/usr/bin/env bash
# Builds coll rdma against the Open MPI 5 of the chroot, checks `make install`
# and MPI 4 sessions as users run them (ci/ompi5/user-tests.sh), runs the MPI
# tests there, then fbcast and its tests with coll rdma: what
# `make check-ompi5` runs inside it (ci/ompi5/chroot.sh run).
#
#   ci/ompi5/check.sh [ci/mpi-tests.sh arguments...]
#
# The MPI tests run as ci/mpi-tests-jobs.sh deals them (two instances side by
# side where the machine has room; --jobs N among the arguments says otherwise),
# less the cases left to the Open MPI 4.1 run (ci/ompi5/cases-left-to-4.1.tsv,
# chosen by ci/ompi5/cases-on-5.sh; an --only among the arguments, or
# OMPI5_ALL_CASES=1, runs every case it selects).
#
# Everything goes under build/ompi5/ (cargo's target, the component, the test
# programs, the logs), apart from the host's 4.1 build in target/ and build/;
# cargo's registry and a copy of the dependencies' builds stay in the chroot
# (ci/ompi5/target-cache.sh).
# Without the verbs transport: rdma-sys cannot generate its bindings with
# trixie's clang (docs/ompi5-port.md, build error 1).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=$ROOT/build/ompi5
TARGET=${CARGO_TARGET_DIR:-$OUT/target}
cd "$ROOT"

command -v ompi_info >/dev/null || { echo "check.sh: no ompi_info (run me inside ci/ompi5/chroot.sh run)" >&2; exit 2; }
echo "== Open MPI $(ompi_info --parsable | awk -F: '$1=="ompi" && $2=="version" && $3=="full" {print $4}'), $(cargo --version)"
# The registry and the dependencies' builds persist in the chroot, not in the
# clone: a fresh clone neither downloads nor compiles them again
export CARGO_HOME=${OMPI5_CARGO_HOME:-/var/cache/coll-rdma/cargo-home}
bash ci/ompi5/target-cache.sh seed "$TARGET"
echo "== cargo build --release -p coll-rdma --no-default-features (no verbs)"
CARGO_TARGET_DIR=$TARGET cargo build --release -p coll-rdma --no-default-features
mkdir -p "$OUT/components"
install -m 0755 "$TARGET/release/libmca_coll_rdma.so" "$OUT/components/mca_coll_rdma.so.tmp"
mv -f "$OUT/components/mca_coll_rdma.so.tmp" "$OUT/components/mca_coll_rdma.so"
OMPI_MCA_mca_base_component_path="SYS_DEFAULT:$OUT/components" ompi_info 2>&1 | grep -E 'MCA coll: rdma' \
    || { echo "check.sh: ompi_info does not list coll rdma from $OUT/components" >&2; exit 1; }
echo "== make install and MPI 4 sessions as users run them (ci/ompi5/user-tests.sh)"
bash ci/ompi5/user-tests.sh
echo "== MPI tests (Open MPI 5)"
selection=$(bash ci/ompi5/cases-on-5.sh "$@") || exit 2
only=()
[ -z "$selection" ] || mapfile -t only <<<"$selection"
MPI_TESTS_CASE_SECONDS=$ROOT/ci/ompi5/case-seconds.tsv \
    MPI_TESTS_BUILD_DIR=$OUT MPI_TESTS_LOGDIR=${MPI_TESTS_LOGDIR:-$OUT/mpi-tests} bash ci/mpi-tests-jobs.sh "${only[@]}" "$@"
# fbcast uses the public MPI API only: built against Open MPI 5's mpicc and
# tested with coll rdma (the stock mode runs on the host's Open MPI 4.1)
echo "== cargo build --release -p coll-rdma-fbcast, fbcast tests (Open MPI 5, coll rdma)"
CARGO_TARGET_DIR=$TARGET cargo build --release -p coll-rdma-fbcast
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/include"
install -m 0755 "$TARGET/release/fbcast" "$OUT/bin/fbcast"
install -m 0755 "$TARGET/release/libcoll_rdma_fbcast.so" "$OUT/lib/libcoll_rdma_fbcast.so"
install -m 0644 coll-rdma/fbcast/include/coll_rdma_fbcast.h "$OUT/include/coll_rdma_fbcast.h"
bash ci/ompi5/target-cache.sh store "$TARGET"
FBCAST_TESTS_BUILD_DIR=$OUT bash ci/fbcast-tests.sh --modes rdma
