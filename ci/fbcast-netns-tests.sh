#!/usr/bin/env bash
# fbcast across network-namespace hosts (a bed of ci/netns/lib.sh, made by
# ci/udp-tests.sh): each host writes its own copy into its private
# directory, which it sees at the bed's common path NETNS_HOME; mpirun runs
# as the first host and reaches the others through the bed's rsh agent
# (OMPI_MCA_plm_rsh_agent), fbcast --hosts included.
#
# usage: ci/fbcast-netns-tests.sh [--only REGEX] [--keep]
# environment: the bed's NETNS_* variables (ci/netns/lib.sh; at least 3
#   hosts); UDP_TESTS_TRANSPORT (default udp): coll_rdma_transport for every
#   rank, given through the environment, and the transport every rank must
#   report its bcasts served over; empty: the component's own choice and no
#   such check; FBCAST_TEST_TIMEOUT, FBCAST_TESTS_BUILD_DIR as in
#   ci/fbcast-tests.sh.
# Tests: a 64 MiB file to every host (fbcast --hosts; sha256 and cmp of each
#   host's copy against the source), a missing source (the same code on
#   every host), a read-only destination on one host (fbcast's documented
#   all-or-nothing: code 4 on every rank, no host gets the file), a rank
#   killed mid-transfer (no file under the final name on any host).
# The last line is "N passed, N failed[, N skipped]"; non-zero exit status
# when any failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${FBCAST_TESTS_BUILD_DIR:-$ROOT/build}
FBCAST=$BUILD/bin/fbcast
COMPDIR=$BUILD/components
BASE_TIMEOUT=${FBCAST_TEST_TIMEOUT:-90}
TRANSPORT=${UDP_TESTS_TRANSPORT-udp}
ONLY=
KEEP=0
while [ $# -gt 0 ]; do
    case $1 in
        --only) ONLY=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

. "$ROOT/ci/fbcast-lib.sh"
die() { say "fbcast-netns-tests: $*" >&2; exit 1; }
want() { [ -z "$ONLY" ] || grep -qE -- "$ONLY" <<<"$1"; }

[ -n "${NETNS_HOSTS:-}" ] && [ -d "${NETNS_STATE:-}" ] ||
    die "no bed of network-namespace hosts in the environment (run me from ci/udp-tests.sh)"
IFS=, read -ra HOSTS <<<"$NETNS_HOSTS"
NP=${#HOSTS[@]}
[ "$NP" -ge 3 ] || die "needs at least 3 hosts, the bed has $NP"
[ -x "$FBCAST" ] || die "$FBCAST is missing: run 'make build' first"
for tool in mpirun timeout sha256sum cmp stat; do command -v "$tool" >/dev/null || die "$tool not found"; done

if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# Everything through the environment, as a user of fbcast --hosts would set
# it: mpirun hands OMPI_MCA_* to every rank (and the agent passes the
# whole environment on)
export OMPI_MCA_plm_rsh_agent=$NETNS_RSH
export OMPI_MCA_mca_base_component_path=SYS_DEFAULT:$COMPDIR
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_coll=rdma OMPI_MCA_coll_rdma_verbose=1
if [ -n "$TRANSPORT" ]; then
    export OMPI_MCA_coll_rdma_transport=$TRANSPORT
    MODE=rdma SERVED_TRANSPORT=$TRANSPORT
else
    unset OMPI_MCA_coll_rdma_transport
    MODE=auto   # (no served_check: across hosts the component may hand over)
fi
# run() (ci/fbcast-lib.sh): mpirun as the first host, one rank per host,
# each rank's status recorded, mpirun not ending the job at the first
# non-zero one
LAUNCHER=("$NETNS_ENTER" "${HOSTS[0]}")
PLACEMENT=(--host "$NETNS_HOSTS" --map-by node)
MPI_OPTS=()
ALL_STATUSES=(--mca orte_abort_on_non_zero_status 0)
RANK_ENV=()
RANK_EXIT='exit $rc'

# shared by every host (the sources, logs, exit codes); removed with the bed
WORK=$NETNS_STATE/fbcast-tests
mkdir -p "$WORK" || die "cannot create $WORK"
MOUNTS=()
cleanup() { local m; for m in "${MOUNTS[@]}"; do undo_mount "$m"; done; [ "$KEEP" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# host I's private directory, as seen from here
home_of() { echo "$NETNS_STATE/homes/${HOSTS[$1]}"; }
all_homes() { local i; for ((i = 0; i < NP; i++)); do home_of "$i"; done; }
clear_homes() { local h; for h in $(all_homes); do find "$h" -mindepth 1 -delete 2>/dev/null; done; }
# files under the final name, on any host
final_names() { local h; for h in $(all_homes); do [ ! -e "$h/data.bin" ] || echo "$h/data.bin"; done; }

# fbcast_hosts ARGS...: fbcast --hosts (every host) ARGS as the first host,
# as a user runs it, under a timeout; sets RC (its exit status), SECS, LOG
# (coll rdma's events go to $TDIR/events/, for served_check, through the
# environment, which fbcast's own mpirun hands to every rank)
fbcast_hosts() {
    LOG=$TDIR/fbcast.log
    rm -rf "$TDIR/events"; mkdir -p "$TDIR/events"
    local t0=$SECONDS
    OMPI_MCA_coll_rdma_events_file="$TDIR/events/rank-%r.jsonl" \
        timeout -k 10 "$(scaled_timeout)" "${LAUNCHER[@]}" "$FBCAST" --hosts "$NETNS_HOSTS" "$@" </dev/null >"$LOG" 2>&1
    RC=$? SECS=$((SECONDS - t0))
}

say "== fbcast across $NP network-namespace hosts ($NETNS_HOSTS), transport ${TRANSPORT:-automatic}"

make_inputs

# ---- 64 MiB to every host, fbcast starting mpirun itself (--hosts)
TEST=big-file-$NP-hosts
if want "$TEST"; then
    TDIR=$WORK/$TEST; mkdir -p "$TDIR"; clear_homes
    fbcast_hosts --progress "$BIG" "$NETNS_HOME/data.bin"
    WHYS=()
    [ "$RC" = 0 ] || WHYS+=("fbcast exited with $RC after ${SECS}s")
    grep -qE '100\.0% 64\.0 MiB / 64\.0 MiB [0-9.]+ [KMG]?i?B/s' "$LOG" || WHYS+=("no final progress line")
    [ ! -e "$(home_of 0)/data.bin" ] || WHYS+=("the root's host got a copy")
    for ((r = 1; r < NP; r++)); do
        f=$(home_of "$r")/data.bin
        if [ ! -f "$f" ]; then WHYS+=("${HOSTS[r]}: no copy"); continue; fi
        [ "$(sha256sum <"$f" | cut -d' ' -f1)" = "$BIG_SUM" ] || WHYS+=("${HOSTS[r]}: sha256 differs")
        cmp -s "$BIG" "$f" || WHYS+=("${HOSTS[r]}: cmp differs")
        [ "$(stat -c '%a %Y' "$f")" = "$(stat -c '%a %Y' "$BIG")" ] || WHYS+=("${HOSTS[r]}: mode/mtime differ from the source's")
        grep -qE "^ *${HOSTS[r]}: rank $r: written 1 file \(64\.0 MiB\)" "$LOG" || WHYS+=("no summary line '${HOSTS[r]}: rank $r: written 1 file (64.0 MiB)'")
    done
    [ -z "$(temps $(all_homes))" ] || WHYS+=("temporaries left: $(temps $(all_homes) | tr '\n' ' ')")
    # 16 chunks of 4 MiB and the status record at least
    served_check "$NP" 17 || WHYS+=("$WHY")
    if [ ${#WHYS[@]} = 0 ]; then pass "sha256 and cmp equal on ${HOSTS[*]:1}, ${SECS}s"; else fail "${WHYS[*]}"; fi
fi

# ---- missing source: the same code on every host (each rank's status,
# under mpirun), and fbcast --hosts exits with it
TEST=missing-source-$NP-hosts
if want "$TEST"; then
    TDIR=$WORK/$TEST; mkdir -p "$TDIR"; clear_homes
    run "$NP" "$FBCAST" "$WORK/no-such-file" "$NETNS_HOME/data.bin"
    WHYS=()
    [ "$RC" != 124 ] || WHYS+=("timed out")
    all_codes "$NP" 2 || WHYS+=("$WHY")
    grep -q "${HOSTS[0]}: rank 0: FAILED: cannot read .*no-such-file" "$LOG" || WHYS+=("the summary does not give the root's reason")
    fbcast_hosts "$WORK/no-such-file" "$NETNS_HOME/data.bin"
    [ "$RC" = 2 ] || WHYS+=("fbcast --hosts exited with $RC, expected 2")
    grep -q "${HOSTS[0]}: rank 0: FAILED: cannot read .*no-such-file" "$LOG" || WHYS+=("fbcast --hosts: the summary does not give the root's reason")
    [ -z "$(find $(all_homes) -type f)" ] || WHYS+=("files appeared: $(find $(all_homes) -type f | tr '\n' ' ')")
    if [ ${#WHYS[@]} = 0 ]; then pass "code 2 on every host, and from fbcast --hosts"; else fail "${WHYS[*]}"; fi
fi

# ---- read-only destination on one host (fbcast's documented behaviour:
# every rank returns the same code, and no host gets the file)
TEST=read-only-dest-one-host-$NP-hosts
if want "$TEST"; then
    TDIR=$WORK/$TEST; mkdir -p "$TDIR"; clear_homes
    ro=$(home_of 2)
    if ! make_read_only "$ro"; then skip "cannot make a directory read-only here (no tmpfs mount, no chattr)"
    else
        run "$NP" "$FBCAST" "$SMALL" "$NETNS_HOME/data.bin"
        WHYS=()
        [ "$RC" != 124 ] || WHYS+=("timed out")
        all_codes "$NP" 4 || WHYS+=("$WHY")
        [ -z "$(final_names)" ] || WHYS+=("a file under the final name: $(final_names | tr '\n' ' ')")
        [ -z "$(temps $(all_homes))" ] || WHYS+=("temporaries left: $(temps $(all_homes) | tr '\n' ' ')")
        grep -q "${HOSTS[2]}: rank 2: FAILED: cannot create a temporary file in $NETNS_HOME" "$LOG" ||
            WHYS+=("the summary does not name ${HOSTS[2]}'s failure")
        undo_mount "$ro"
        if [ ${#WHYS[@]} = 0 ]; then pass "code 4 on every host, no file and no temporary on any"; else fail "${WHYS[*]}"; fi
    fi
fi

# ---- kill -9 the root, then a receiver, in the middle of a large file
for victim in 0 2; do
    TEST=killed-rank$victim-mid-transfer-$NP-hosts
    want "$TEST" || continue
    TDIR=$WORK/$TEST; mkdir -p "$TDIR/pids"; clear_homes
    limit=$(scaled_timeout)
    LOG=$TDIR/mpirun.log
    t0=$SECONDS
    # the survivors get SIGTERM, then SIGKILL this many seconds later: time
    # to remove their temporaries on a loaded machine (ci/fbcast-tests.sh)
    timeout -k 10 "$limit" "${LAUNCHER[@]}" mpirun -np "$NP" "${PLACEMENT[@]}" --mca odls_base_sigkill_timeout 5 \
        bash -c 'echo $$ > "'"$TDIR"'/pids/$OMPI_COMM_WORLD_RANK"; exec "$@"' fbcast-rank \
        "$FBCAST" --chunk 4K "$HUGE" "$NETNS_HOME/data.bin" </dev/null >"$LOG" 2>&1 &
    job=$!
    kill_mid_transfer "$job" "$victim"
    wait "$job"; RC=$?; SECS=$((SECONDS - t0))
    if [ -z "$killed" ]; then
        if [ "$RC" = 0 ]; then skip "the transfer completed (in ${SECS}s) before rank 1 had written 64 KiB: nothing to kill"
        else fail "rank 1 never wrote 64 KiB of its temporary; mpirun ended with status $RC after ${SECS}s"; fi
        continue
    fi
    WHYS=()
    [ "$RC" != 124 ] && [ "$SECS" -lt "$limit" ] || WHYS+=("mpirun did not end by itself (status $RC after ${SECS}s, limit ${limit}s)")
    [ "$RC" != 0 ] || WHYS+=("mpirun reported success")
    [ -z "$(final_names)" ] || WHYS+=("a file under the final name: $(final_names | tr '\n' ' ')")
    # the killed rank cannot remove its temporary; the others remove theirs
    others_left=$(temps $(all_homes) | grep -v "/${HOSTS[victim]}/" || true)
    [ -z "$others_left" ] || WHYS+=("temporaries of surviving ranks left: $(tr '\n' ' ' <<<"$others_left")")
    note="rank $victim (${HOSTS[victim]}) killed when rank 1 had written $((written >> 10)) KiB; mpirun ended with status $RC ${SECS}s after the start"
    if [ ${#WHYS[@]} = 0 ]; then pass "$note"; else fail "${WHYS[*]} ($note)"; fi
done

say "$PASSED passed, $FAILED failed$([ "$SKIPPED" = 0 ] || echo ", $SKIPPED skipped")"
[ "$FAILED" = 0 ]
