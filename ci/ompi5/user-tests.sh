#!/usr/bin/env bash
# Open MPI 5 as its users install and run coll rdma (run by ci/ompi5/check.sh
# inside the chroot, after the component is built into build/ompi5/components):
#
# 1. install: `make install` into a temporary HOME (the component built here,
#    not rebuilt), which must write the environment file and pass its own
#    self-check; then, with that file sourced, plain mpirun with no flags:
#    coll-rdma-selfcheck says OK and tests/mpi/sessions.c -r finds coll rdma
#    serving with right results. Without the file sourced, the self-check
#    must say that mpirun's component path leaves the directory out.
# 2. sessions: tests/mpi/sessions.c -r (two MPI 4 sessions, then MPI_Init;
#    results checked, coll rdma required on every communicator) under the
#    component path forms docs/install.md gives for Open MPI 5: --mca
#    mca_base_component_path SYS_DEFAULT:<dir> at np 2-4 (the form that made
#    every rank die in PMIx_Init at the second session,
#    ci/ompi5/pmix-reinit-crash.c) and the environment file, each also with
#    --mca coll rdma; six sessions before MPI_Init once.
#
#   ci/ompi5/user-tests.sh        prints "N passed, N failed"; exit 1 on a failure
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=$ROOT/build/ompi5
COMPDIR=$OUT/components
BIN=$OUT/user-tests
LOGS=$OUT/user-tests/logs
TIMEOUT=${TEST_TIMEOUT:-180}
cd "$ROOT"

[ -f "$COMPDIR/mca_coll_rdma.so" ] || { echo "user-tests: $COMPDIR/mca_coll_rdma.so is missing (run ci/ompi5/check.sh)" >&2; exit 2; }
for v in $(env | sed -n 's/^\(\(OMPI\|PMIX\)_MCA_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
mkdir -p "$BIN" "$LOGS"

# sessions.c reads which functions the coll framework installed: Open MPI's
# internal headers, as for the other test programs (ci/mpi-tests.sh)
flags=()
IFS=: read -ra extra <<<"${OMPI_EXTRA_INCLUDE_DIRS:-}"
for d in "${extra[@]}"; do [ -z "$d" ] || flags+=("-I$d"); done
if pkg-config --exists pmix 2>/dev/null; then read -ra pmix_flags <<<"$(pkg-config --cflags-only-I pmix)"; flags+=("${pmix_flags[@]}"); fi
mpicc -O2 -Wall "${flags[@]}" -o "$BIN/sessions" tests/mpi/sessions.c || { echo "user-tests: cannot compile tests/mpi/sessions.c" >&2; exit 2; }

PASSED=0 FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS $1"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $1: $2"; [ -f "$LOGS/$1.log" ] && tail -n 20 "$LOGS/$1.log" | sed 's/^/    /'; }

# ------------------------------------------------------------------ install
HOME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/coll-rdma-home.XXXXXX")
trap 'rm -rf "$HOME_DIR"' EXIT
ENV_FILE=$HOME_DIR/.openmpi/coll-rdma-env.sh
# -o build: install what check.sh built here, without the host's build step
if HOME=$HOME_DIR timeout -k 5 "$TIMEOUT" make --no-print-directory -o build install \
    COMPONENT="$COMPDIR/mca_coll_rdma.so" BUILD="$OUT" >"$LOGS/install.log" 2>&1; then
    if [ -f "$HOME_DIR/.openmpi/components/mca_coll_rdma.so" ] && [ -f "$ENV_FILE" ] &&
        grep -q 'coll-rdma-selfcheck: OK' "$LOGS/install.log"; then
        pass install
    else
        fail install "make install did not install the component, write $ENV_FILE and pass its self-check"
    fi
else
    fail install "make install failed"
fi

SELFCHECK=$HOME_DIR/.local/bin/coll-rdma-selfcheck
if [ -x "$SELFCHECK" ]; then
    HOME=$HOME_DIR timeout -k 5 "$TIMEOUT" "$SELFCHECK" >"$LOGS/selfcheck-without-env.log" 2>&1
    status=$?
    if [ "$status" = 1 ] && grep -q 'leaves out' "$LOGS/selfcheck-without-env.log"; then
        pass selfcheck-without-env
    else
        fail selfcheck-without-env "expected exit 1 naming the component path mpirun sets (got $status)"
    fi
    HOME=$HOME_DIR timeout -k 5 "$TIMEOUT" bash -c '. "$1" && "$2"' _ "$ENV_FILE" "$SELFCHECK" >"$LOGS/selfcheck-with-env.log" 2>&1
    status=$?
    if [ "$status" = 0 ] && grep -q 'coll-rdma-selfcheck: OK' "$LOGS/selfcheck-with-env.log"; then
        pass selfcheck-with-env
    else
        fail selfcheck-with-env "expected OK after sourcing $ENV_FILE (got $status)"
    fi
else
    fail selfcheck-with-env "make install did not install $SELFCHECK"
fi

# ------------------------------------------------------------------ sessions
# run_sessions NAME NP [ENV_FILE|-] MPIRUN_OPTIONS... [-- SESSIONS_OPTIONS...]
# Point-to-point over tcp on lo, not btl sm: Open MPI 5.0.7's sm btl fails
# now and then to open a peer's segment at the second session
# (MPI_Session_init fails, or the job hangs), with coll ^rdma too.
# glibc fills freed memory (and keeps no per-thread cache of it), so that a
# use of memory PMIx freed at the previous session's end crashes every time,
# not only when something happened to reuse it.
# A run that times out is run again, up to twice more: Open MPI 5.0.7 itself
# now and then hangs between two sessions (ranks wait in MPI_Session_init's
# fence while others wait in PMIx_Group_construct; no coll rdma frame on any
# stack; with coll ^rdma too). A crash, an error or a wrong result fails at
# once.
POISON_FREED=(-x GLIBC_TUNABLES=glibc.malloc.perturb=165:glibc.malloc.tcache_count=0)
run_sessions() {
    local name=$1 np=$2 env_file=$3
    shift 3
    local over=() options=()
    [ "$np" -gt 2 ] && over=(--oversubscribe)
    while [ $# -gt 0 ] && [ "$1" != -- ]; do options+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    local attempt status ok
    for attempt in 1 2 3; do
        HOME=$HOME_DIR timeout -k 5 "$SESSIONS_TIMEOUT" bash -c '[ "$1" = - ] || . "$1"; shift; exec "$@"' _ "$env_file" \
            mpirun -np "$np" "${over[@]}" --mca btl self,tcp --mca btl_tcp_if_include lo "${POISON_FREED[@]}" \
            "${options[@]}" "$BIN/sessions" -r "$@" >"$LOGS/$name.log" 2>&1
        status=$?
        [ "$status" = 124 ] || [ "$status" = 137 ] || break
        echo "RETRY $name: attempt $attempt timed out after ${SESSIONS_TIMEOUT} s (Open MPI's hang between sessions, see above)"
        cp "$LOGS/$name.log" "$LOGS/$name.timeout-$attempt.log"
    done
    ok=$(grep -c '^sessions: rank [0-9]* ok$' "$LOGS/$name.log")
    if [ "$status" = 0 ] && [ "$ok" = "$np" ] && ! grep -q 'sessions: FAIL' "$LOGS/$name.log"; then
        pass "$name"
    else
        fail "$name" "exit status $status, $ok of $np ranks ok"
    fi
}
SESSIONS_TIMEOUT=${SESSIONS_TIMEOUT:-60}
# the form that crashed, at 2 to 4 ranks
for np in 2 3 4; do
    run_sessions "sessions-mca-path-np$np" "$np" - --mca mca_base_component_path "SYS_DEFAULT:$COMPDIR"
done
run_sessions "sessions-mca-path-coll-rdma-np3" 3 - --mca mca_base_component_path "SYS_DEFAULT:$COMPDIR" --mca coll rdma
[ -f "$ENV_FILE" ] && run_sessions "sessions-envfile-np2" 2 "$ENV_FILE"
[ -f "$ENV_FILE" ] && run_sessions "sessions-envfile-coll-rdma-np4" 4 "$ENV_FILE" --mca coll rdma
# more initialisation cycles in one process: open, close and registration each time
run_sessions "sessions-6-cycles-np2" 2 - --mca mca_base_component_path "SYS_DEFAULT:$COMPDIR" -- -s 6

echo "user-tests: $PASSED passed, $FAILED failed (logs in $LOGS)"
[ "$FAILED" = 0 ]
