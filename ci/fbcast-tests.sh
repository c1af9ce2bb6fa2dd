#!/usr/bin/env bash
# fbcast's MPI tests: build/bin/fbcast (and the C API, build/lib) under
# mpirun on this machine, each rank writing to its own directory as if it
# were a host of its own (DST with %r). Every mpirun runs under a timeout.
#
# usage: ci/fbcast-tests.sh [--modes "rdma stock"] [--only REGEX] [--keep]
#   --modes   rdma: --mca coll rdma with the component from build/components
#             (each rank's events, docs/events.md, must count its bcasts served
#             over shm); stock: Open MPI's own components (--mca coll ^rdma).
#             Default: both.
#   --only    run only the tests whose name (with its mode) matches REGEX
#   --keep    keep the work directory and each test's files (default: a
#             test's directory is removed when it passes, the rest at the end)
# environment: FBCAST_TEST_TIMEOUT seconds per mpirun on an idle machine
#   (default 90; multiplied by the load per core, 1 to 6, as in
#   ci/mpi-tests.sh); FBCAST_TESTS_BUILD_DIR (default build/);
#   FBCAST_TESTS_WORKDIR where the work directory is made (default the build
#   directory, or TMPDIR (/tmp) when other users may not enter the build
#   directory, as the ownership cases' user must; a fresh mktemp name each
#   run, so that two runs can share it).
# Disk: at most about 300 MiB at a time (checked up front: SKIPPED below
#   400 MiB).
# Prints PASS/FAIL/SKIPPED lines with reasons; the last line is
# "N passed, N failed, N skipped"; non-zero exit status when any failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${FBCAST_TESTS_BUILD_DIR:-$ROOT/build}
FBCAST=$BUILD/bin/fbcast
COMPDIR=$BUILD/components
BASE_TIMEOUT=${FBCAST_TEST_TIMEOUT:-90}
MODES="rdma stock"
ONLY=
KEEP=0
while [ $# -gt 0 ]; do
    case $1 in
        --modes) MODES=$2; shift 2 ;;
        --only) ONLY=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

. "$ROOT/ci/fbcast-lib.sh"
die() { say "fbcast-tests: $*" >&2; exit 1; }

if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
for v in $(env | sed -n 's/^\(OMPI_MCA_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in OMPI_MCA_coll*|OMPI_MCA_mca_base_component_path|OMPI_MCA_btl) unset "$v" ;; esac
done
for tool in mpirun mpicc ompi_info timeout sha256sum cmp stat; do
    command -v "$tool" >/dev/null || die "$tool not found (run ci/setup.sh)"
done
[ -x "$FBCAST" ] || die "$FBCAST is missing: run 'make build' first"
[ -f "$BUILD/lib/libcoll_rdma_fbcast.so" ] || die "$BUILD/lib/libcoll_rdma_fbcast.so is missing: run 'make build' first"
OMPI_MAJOR=$(ompi_info --parsable | awk -F: '$1=="ompi" && $2=="version" && $3=="full" {split($4, v, "."); print v[1]}')
[[ ${OMPI_MAJOR:-} =~ ^[0-9]+$ ]] || die "cannot read Open MPI's version from ompi_info"

# others_may_enter PATH: whether a user other than us (nobody) may reach PATH
others_may_enter() {
    [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null \
        && setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$1" 2>/dev/null
}
# The ownership cases run fbcast as a user of their own, who must reach the
# work directory: a checkout inside a directory only its owner may enter
# (CI clones into `mktemp -d`) would keep it out, so then the work directory
# goes to TMPDIR, and the binaries the user runs are copied there (below).
# shared_but_unguarded DIR: others may write DIR's entries and it has no
# sticky bit, so anyone could rename our work directory away and put their
# own (with a component root's mpirun would load) in its place
shared_but_unguarded() {
    [ -n "$(find "$1" -maxdepth 0 \( -perm -o+w -o -perm -g+w \) ! -perm -1000 2>/dev/null)" ]
}
WORKDIR=${FBCAST_TESTS_WORKDIR:-$BUILD}
if [ -z "${FBCAST_TESTS_WORKDIR:-}" ] && [ "$(id -u)" = 0 ] && ! others_may_enter "$BUILD" \
    && others_may_enter "${TMPDIR:-/tmp}" && ! shared_but_unguarded "${TMPDIR:-/tmp}"; then
    WORKDIR=${TMPDIR:-/tmp}
fi
mkdir -p "$WORKDIR" || die "cannot create $WORKDIR"
# the peak: the 64 MiB source and three copies, the other inputs, margin
MIN_FREE_MIB=400
free_mib=$(df -Pk "$WORKDIR" | awk 'NR == 2 {print int($4 / 1024)}')
if [ "${free_mib:-0}" -lt "$MIN_FREE_MIB" ]; then
    say "SKIPPED fbcast-tests: ${free_mib:-?} MiB free in $WORKDIR, the tests need $MIN_FREE_MIB MiB (set FBCAST_TESTS_WORKDIR)"
    say "0 passed, 0 failed, 1 skipped"
    exit 0
fi
WORK=$(mktemp -d "$WORKDIR/fbcast-tests.XXXXXX")
# The test user runs fbcast and loads the component: copies it may reach
# where the build directory is closed to it.
if [ "$(id -u)" = 0 ] && ! others_may_enter "$FBCAST" && others_may_enter "$WORKDIR"; then
    mkdir -p "$WORK/staged/bin" "$WORK/staged/components"
    cp "$FBCAST" "$WORK/staged/bin/" && cp "$COMPDIR"/*.so "$WORK/staged/components/" \
        || die "cannot copy fbcast and the component into $WORK/staged"
    # readable by the test user, writable by us alone whatever the umask
    chmod -R u=rwX,go=rX "$WORK/staged"
    FBCAST=$WORK/staged/bin/fbcast COMPDIR=$WORK/staged/components
fi
MOUNTS=()
TEST_USER=
TEST_USER_REFUSED=
cleanup() {
    local m
    [ -z "$TEST_USER" ] || userdel "$TEST_USER" 2>/dev/null
    for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || chattr -i "$m" 2>/dev/null || chmod 755 "$m" 2>/dev/null; done
    if [ "$KEEP" = 1 ]; then say "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

want() { [ -z "$ONLY" ] || grep -qE -- "$ONLY" <<<"$1"; }

# mpirun options for MODE (rdma or stock); for Open MPI 5 the component path
# goes into each rank's environment (see ci/mpi-tests.sh)
mode_options() {
    MPI_OPTS=(--mca btl self,vader)
    # run() checks every rank's exit status: mpirun must not end the others
    # when the first exits with a non-zero status (ORTE's default). Not for
    # the kill tests: with it, ORTE does not end the job when a rank dies.
    # Open MPI 5's prterun has no such switch: there each rank's wrapper
    # exits 0 after recording its status (checked per rank by all_codes).
    ALL_STATUSES=()
    RANK_EXIT='exit $rc'
    if [ "$OMPI_MAJOR" -ge 5 ]; then RANK_EXIT='exit 0'; else ALL_STATUSES=(--mca orte_abort_on_non_zero_status 0); fi
    RANK_ENV=()
    if [ "$1" = rdma ]; then
        MPI_OPTS+=(--mca coll rdma --mca coll_rdma_verbose 1)
        if [ "$OMPI_MAJOR" -ge 5 ]; then
            RANK_ENV=(env "OMPI_MCA_mca_base_component_path=SYS_DEFAULT:$COMPDIR")
        else
            MPI_OPTS+=(--mca mca_base_component_path "SYS_DEFAULT:$COMPDIR")
        fi
    else
        MPI_OPTS+=(--mca coll '^rdma')
    fi
}

# undisturbed_transfer SKIP_WHY FAIL_WHY: the job of a test that disturbs a
# 4-rank transfer of $HUGE ended before the disturbance. A transfer that
# completed (status 0, ranks 1-3 hold the source) was only too fast: no test.
# One that never started or failed is a failure.
undisturbed_transfer() {
    local r
    if [ "$RC" = 0 ]; then
        for r in 1 2 3; do cmp -s "$HUGE" "$TDIR/hosts/r$r/data.bin" || { fail "$2"; return; }; done
        skip "$1"
    else
        fail "$2"
    fi
}
hosts_dirs() { # hosts_dirs NP: fresh per-rank "host" directories under $TDIR/hosts
    local r
    rm -rf "$TDIR/hosts"
    for ((r = 0; r < $1; r++)); do mkdir -p "$TDIR/hosts/r$r"; done
}

# as_test_user: sets TEST_UID/TEST_GID to a user of its own, created for
# these tests (removed at exit) so that fbcast runs as a non-root user;
# fails (WHY says why) when it cannot be made
as_test_user() {
    WHY=$TEST_USER_REFUSED
    if [ -n "$WHY" ]; then return 1; fi
    if [ -n "$TEST_USER" ]; then return 0; fi
    if [ "$(id -u)" != 0 ]; then WHY="creating a test user needs root"; return 1; fi
    command -v useradd >/dev/null && command -v setpriv >/dev/null || { WHY="useradd or setpriv not found"; return 1; }
    local name=fbct$$
    if ! useradd --system --no-create-home --shell /usr/sbin/nologin "$name" 2>"$WORK/useradd.log"; then
        WHY="useradd failed: $(head -1 "$WORK/useradd.log")"; return 1
    fi
    TEST_USER=$name TEST_UID=$(id -u "$name") TEST_GID=$(id -g "$name")
    # the user reaches the inputs and its test directories, nothing else of ours
    chmod o+x "$WORK"
    # A checkout inside a directory only its owner may enter (mktemp -d
    # makes one) keeps every other user out of $WORK whatever its mode:
    # the cases would fail for that, not for fbcast.
    if ! setpriv --reuid="$TEST_UID" --regid="$TEST_GID" --clear-groups test -x "$WORK"; then
        TEST_USER_REFUSED="a directory above $WORK is closed to other users (set FBCAST_TESTS_WORKDIR to one they may enter)"
        WHY=$TEST_USER_REFUSED; return 1
    fi
}

say "== fbcast tests: $FBCAST, Open MPI $OMPI_MAJOR.x, modes: $MODES, work directory $WORK"

# ------------------------------------------------------------------ inputs
make_inputs
TREE=$WORK/tree
mkdir -p "$TREE/sub/deeper" "$TREE/empty-dir" "$TREE/private"
head -c $((5 << 20)) /dev/urandom > "$TREE/sub/deeper/five-mib.bin"
: > "$TREE/zero-bytes"
printf x > "$TREE/sub/one-byte"
printf '#!/bin/sh\necho hi\n' > "$TREE/sub/script.sh"; chmod 755 "$TREE/sub/script.sh"
echo secret > "$TREE/private/key"; chmod 600 "$TREE/private/key"; chmod 700 "$TREE/private"
ln -s sub/one-byte "$TREE/a-link"

# tree_listing DIR: type, mode and sha256 of every directory and regular file
tree_listing() {
    (cd "$1" && find . -mindepth 1 \( -type d -o -type f \) -printf '%y %m %p\n' | sort | while read -r type mode path; do
        if [ "$type" = f ]; then printf '%s %s %s %s\n' "$type" "$mode" "$path" "$(sha256sum < "$path" | cut -d' ' -f1)"
        else printf '%s %s %s\n' "$type" "$mode" "$path"; fi
    done)
}

for MODE in $MODES; do
    mode_options "$MODE"

    # the cases, one file per theme in ci/fbcast/cases/, in the order they run
    for CASE_FILE in 01-files 02-destinations 03-disturbed 04-trees 05-ownership 06-placement 07-interfaces; do
        . "$ROOT/ci/fbcast/cases/$CASE_FILE.sh"
    done
done

say "$PASSED passed, $FAILED failed$([ "$SKIPPED" = 0 ] || echo ", $SKIPPED skipped")"
[ "$FAILED" = 0 ]
