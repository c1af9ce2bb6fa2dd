#!/usr/bin/env bash
# coll rdma over udp across network-namespace hosts on one machine (what
# `make check-udp` runs): makes a bed of HOSTS hosts (ci/netns/lib.sh:
# namespaces on one bridge, each with its own hostname and private
# directory), then
#   1. ci/mpi-tests.sh's section 1 across them (mpirun as the first host,
#      --hosts, one rank per host and then several, oversubscribed), with
#      --transport udp: every served call must report udp; once as is and
#      once with coll_rdma_test_udp_loss_percent=LOSS (injected receive loss),
#      the two side by side
#   2. ci/fbcast-netns-tests.sh: fbcast of a 64 MiB file to every host and
#      its failure cases, over udp
# and removes the bed, also when a step fails or the run is interrupted
# (Ctrl-C, kill -INT/-TERM); a bed left by a run killed with SIGKILL is
# removed by the next run (or ci/netns/down.sh --stale).
#
# usage: ci/udp-tests.sh [--only mpi|fbcast] [--hosts N] [--nps "N..."]
#                        [--loss PERCENT] [--loss-nps "N..."] [--transport NAME] [--full]
#                        [--tests REGEX]
#   --only      run one of the two parts
#   --tests     run only the MPI tests whose name matches REGEX (ci/mpi-tests.sh
#               --only; e.g. thread_multiple)
#   --hosts N   the number of namespace hosts (default 4)
#   --nps       process counts of the MPI tests without injected loss
#               (default "8": two ranks a host, so that ranks of one host
#               share the group and the channel crosses hosts and not)
#   --loss-nps  process counts of the run with injected loss (default "4":
#               one rank a host; 8 ranks under loss take about 4 minutes
#               on 2 cores, which make check cannot afford)
#   --loss      the injected loss of the second MPI run (default 5; 0: no
#               second run)
#   --transport coll_rdma_transport (default udp; "" lets the component
#               choose, and across these hosts without udp it hands every
#               call to the module underneath: for trying the bed itself)
#   --full      the MPI tests' full iteration counts (default --quick)
# environment: UDP_TESTS_LOGDIR (default build/udp-tests), where the MPI
#   tests' logs go (every host sees it); MPI_TESTS_*, TEST_TIMEOUT,
#   FBCAST_TEST_TIMEOUT as for ci/mpi-tests.sh and ci/fbcast-tests.sh.
# Needs root (namespaces, mounts); without it prints SKIPPED and exits 0.
# The last line is "udp tests: N passed, N failed" (parts); non-zero exit
# status when any part failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${MPI_TESTS_BUILD_DIR:-$ROOT/build}
LOGDIR=${UDP_TESTS_LOGDIR:-$BUILD/udp-tests}
ONLY=
NHOSTS=4
NPS="8"
LOSS_NPS="4"
LOSS=5
TRANSPORT=udp
QUICK=(--quick)
TESTS=
while [ $# -gt 0 ]; do
    case $1 in
        --only) ONLY=${2:?--only needs mpi or fbcast}; shift ;;
        --hosts) NHOSTS=${2:?--hosts needs a number}; shift ;;
        --nps) NPS=${2:?--nps needs process counts}; shift ;;
        --loss-nps) LOSS_NPS=${2:?--loss-nps needs process counts}; shift ;;
        --loss) LOSS=${2:?--loss needs a percentage}; shift ;;
        --transport) TRANSPORT=${2?--transport needs a name}; shift ;;
        --full) QUICK=() ;;
        --tests) TESTS=${2:?--tests needs a regular expression}; shift ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        *) echo "udp-tests: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done
case $ONLY in ''|mpi|fbcast) ;; *) echo "udp-tests: --only takes mpi or fbcast" >&2; exit 2 ;; esac

say() { printf '%s\n' "$*"; }
if [ "$(id -u)" != 0 ]; then
    say "SKIPPED udp tests: they need root (network namespaces, mounts); run make check-udp as root"
    exit 0
fi
for tool in ip unshare mpirun; do
    command -v "$tool" >/dev/null || { say "udp-tests: $tool not found"; exit 2; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

. "$ROOT/ci/netns/lib.sh"

# The MPI test programs, compiled here, before any host runs them
if [ "$ONLY" != fbcast ]; then
    bash "$ROOT/ci/mpi-tests.sh" --build-only || exit 1
fi

T_START=$SECONDS
PASSED=0 FAILED=0 FAILED_PARTS=()
# Ending the run ends the part running: netns_down ends what runs inside
# the namespaces, this the part itself (ci/fbcast-netns-tests.sh runs
# outside them). The part stays in this script's process group, so that a
# signal to the group (kill -9 -PGID) reaches it too.
PART_PID=
NETNS_ON_EXIT='[ -z "$PART_PID" ] || kill -TERM $PART_PID 2>/dev/null'
netns_up "$NHOSTS" || { say "udp-tests: cannot set up $NHOSTS namespace hosts"; exit 1; }
export NETNS_ID NETNS_HOSTS NETNS_STATE NETNS_HOME NETNS_RSH NETNS_ENTER
# mpirun, and everything that starts one (fbcast --hosts), reaches the
# other hosts through the bed's agent; ci/mpi-tests.sh keeps this variable
export OMPI_MCA_plm_rsh_agent=$NETNS_RSH
FIRST_HOST=${NETNS_HOSTS%%,*}

part() {  # part NAME COMMAND...: runs it, counts it, says how long it took
    local name=$1 t0=$SECONDS rc
    shift
    say "== udp tests: $name"
    "$@" &
    PART_PID=$!
    wait "$PART_PID"; rc=$?
    PART_PID=
    part_counted "$name" "$rc" "$((SECONDS - t0))"
}
part_counted() {  # part_counted NAME STATUS SECONDS
    if [ "$2" = 0 ]; then PASSED=$((PASSED + 1)); say "== $1: passed in $3s"
    else FAILED=$((FAILED + 1)); FAILED_PARTS+=("$1"); say "== $1: FAILED (status $2) after $3s"; fi
}
# parts_side_by_side NAME1 -- COMMAND1... -- NAME2 -- COMMAND2...: both parts
# at once, each printed whole once both have ended. The MPI runs wait on the
# network far more than they compute (np=8 barrier_order: 35 s of mostly
# idle ranks), and two jobs on one bed stay apart: each has its own
# communicator ids on the multicast groups, its own logs and its own
# /dev/shm leak check (its ranks' pids).
parts_side_by_side() {
    local name1=$1 name2 cmd1=() cmd2=() t0=$SECONDS out1 out2 pid1 pid2 rc1=0 rc2=0
    shift 2
    while [ "$1" != -- ]; do cmd1+=("$1"); shift; done
    name2=$2
    shift 3
    cmd2=("$@")
    out1=$(mktemp) out2=$(mktemp)
    "${cmd1[@]}" >"$out1" 2>&1 &
    pid1=$!
    "${cmd2[@]}" >"$out2" 2>&1 &
    pid2=$!
    PART_PID="$pid1 $pid2"
    wait "$pid1" || rc1=$?
    wait "$pid2" || rc2=$?
    PART_PID=
    say "== udp tests: $name1 (side by side with the next)"
    cat "$out1"
    part_counted "$name1" "$rc1" "$((SECONDS - t0))"
    say "== udp tests: $name2"
    cat "$out2"
    part_counted "$name2" "$rc2" "$((SECONDS - t0))"
    rm -f "$out1" "$out2"
}

if [ "$ONLY" != fbcast ]; then
    mpi_args=(--hosts "$NETNS_HOSTS" --nps "$NPS" "${QUICK[@]}")
    [ -z "$TRANSPORT" ] || mpi_args+=(--transport "$TRANSPORT")
    [ -z "$TESTS" ] || mpi_args+=(--only "$TESTS")
    # mpirun runs as the first host, so ci/mpi-tests.sh does too
    clean_part=("MPI tests across $NHOSTS hosts, transport ${TRANSPORT:-automatic}" --
        env MPI_TESTS_LOGDIR="$LOGDIR/mpi" "$NETNS_ENTER" "$FIRST_HOST" bash "$ROOT/ci/mpi-tests.sh" "${mpi_args[@]}")
    if [ "$LOSS" -gt 0 ]; then
        parts_side_by_side "${clean_part[@]}" -- \
            "MPI tests across $NHOSTS hosts, transport ${TRANSPORT:-automatic}, ${LOSS} % injected loss" -- \
            env MPI_TESTS_LOGDIR="$LOGDIR/mpi-loss$LOSS" "$NETNS_ENTER" "$FIRST_HOST" bash "$ROOT/ci/mpi-tests.sh" \
            "${mpi_args[@]}" --nps "$LOSS_NPS" --mca coll_rdma_test_udp_loss_percent "$LOSS"
    else
        part "${clean_part[0]}" "${clean_part[@]:2}"
    fi
fi
if [ "$ONLY" != mpi ]; then
    part "fbcast across $NHOSTS hosts, transport ${TRANSPORT:-automatic}" \
        env UDP_TESTS_TRANSPORT="$TRANSPORT" bash "$ROOT/ci/fbcast-netns-tests.sh"
fi

say "== udp tests took $((SECONDS - T_START))s (bed of $NHOSTS hosts: $NETNS_HOSTS)"
[ "$FAILED" = 0 ] || say "failed: ${FAILED_PARTS[*]}"
say "udp tests: $PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
