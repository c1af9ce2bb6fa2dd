#!/usr/bin/env bash
# MPI tests of coll rdma: builds tests/mpi/*.c into build/tests/ and runs them
# under mpirun with the component from build/components/, then checks from
# coll rdma's structured events (docs/events.md) that it served every call
# the programs made and decided as each case expects.
#
# usage: ci/mpi-tests.sh [--stock] [--quick] [--only REGEX] [--list]
#                         [--list-deps] [--transport NAME] [--hosts HOSTS] [--nps "N..."]
#                         [--build-only]
#   --stock       run the programs against stock Open MPI (no component needed;
#                 the checks that need the component are skipped)
#   --quick       fewer iterations (a fast smoke test)
#   --only REGEX  run only the tests whose name matches REGEX (grep -E)
#   --list        print the test names and exit
#   --list-deps   the same, each name followed by a tab and the names of the
#                 cases it must run after in the same instance (its
#                 smaller-window-than: references), if any
#                 (ci/mpi-tests-jobs.sh deals by them)
#   --transport NAME  run the programs (section 1 only) with
#                 coll_rdma_transport=NAME and expect every served call to
#                 report that transport (e.g. verbs, in the Soft-RoCE guests)
#   --hosts HOSTS mpirun --host HOSTS (ranks on several machines; needs a
#                 launcher that reaches them), TCP between hosts
#   --nps "N..."  process counts of section 1 (default "1 2 3 4 5 8")
#   --mca NAME VALUE  one more MCA parameter for every run of section 1
#                 (repeatable; implies section 1 only, like --transport)
#   --build-only  only bring the programs in build/tests/ up to date
# environment:
#   TEST_TIMEOUT  seconds allowed for each mpirun on an idle machine (default
#                 120); each run gets this times the machine's load per core
#                 when it starts (1-minute load average / cores, from 1 up to
#                 TEST_TIMEOUT_MAX_FACTOR, default 6), so that a busy machine
#                 slows a test down without failing it, while a hang still
#                 ends the run
#   MPI_TESTS_NO_BUILD=1  never compile: stop if a program in build/tests/ is
#                 missing or older than its source. The Soft-RoCE guests set
#                 it: a program compiled inside one guest lands in that
#                 guest's private overlay, which the other guests (and mpirun
#                 there) cannot see, so ci/rxe-tests.sh builds on the host
#   KEEP_LOGS=1   keep the logs of passing tests too (build/mpi-tests/)
#   MPI_TESTS_LOGDIR  where the logs go (default build/mpi-tests); with
#                 --hosts it must be a directory every host sees, since each
#                 rank's output file is written on its own host
#   EXPECT_TRANSPORT  transport(s) the served calls may report, separated by
#                 spaces (default: the --transport name, else shm); e.g.
#                 "verbs shm" when communicators within one node use shm
#   MPI_TESTS_BUILD_DIR  where the component (components/) and the test
#                 programs (tests/) are, and the logs unless MPI_TESTS_LOGDIR
#                 says otherwise (default build/; the Open MPI 5 chroot uses
#                 build/ompi5, so that its artefacts never mix with the host's)
#   OMPI_EXTRA_INCLUDE_DIRS  more include directories (':'-separated) for
#                 mpicc, as for ompi-sys: the test programs include Open MPI's
#                 internal headers too (ci/ompi5/chroot.sh run sets it)
#   MPI_TEST_CFLAGS  more flags for mpicc
#
# Open MPI 5 (PRRTE's mpirun) is told apart by the version ompi_info reports:
# each rank's output is captured by ci/rank-output.sh, since PRRTE's own
# capture (--output dir=...:nocopy) loses output with PMIx 5.0.7, and the
# component path is put in each rank's environment
# (OMPI_MCA_mca_base_component_path), since PRRTE hands it to PMIx too when
# it is given to mpirun (as --mca or in mpirun's environment), which then
# complains about it.
#
# The last line is "N passed, N failed" (", N skipped" when some were skipped);
# the exit status is non-zero when any test failed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${MPI_TESTS_BUILD_DIR:-$ROOT/build}
COMPDIR=$BUILD/components
BIN=$BUILD/tests
LOGROOT=${MPI_TESTS_LOGDIR:-$BUILD/mpi-tests}
TIMEOUT=${TEST_TIMEOUT:-120}
TIMEOUT_MAX_FACTOR=${TEST_TIMEOUT_MAX_FACTOR:-6}
KEEP_LOGS=${KEEP_LOGS:-0}

MODE=component
QUICK=0
ONLY=
LIST=0
LIST_DEPS=0
BUILD_ONLY=0
TRANSPORT=
HOSTS=
NPS_SET=
EXTRA_MCA=()
while [ $# -gt 0 ]; do
    case $1 in
        --stock) MODE=stock ;;
        --quick) QUICK=1 ;;
        --only) ONLY=${2:?--only needs a regex}; shift ;;
        --list) LIST=1 ;;
        --list-deps) LIST=1 LIST_DEPS=1 ;;
        --build-only) BUILD_ONLY=1 ;;
        --transport) TRANSPORT=${2:?--transport needs a name}; shift ;;
        --hosts) HOSTS=${2:?--hosts needs a host list}; shift ;;
        --nps) NPS_SET=${2:?--nps needs process counts}; shift ;;
        --mca) EXTRA_MCA+=(--mca "${2:?--mca needs a name}" "${3:?--mca needs a value}"); shift 2 ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        *) echo "mpi-tests: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
    shift
done

say() { printf '%s\n' "$*"; }
die() { printf 'mpi-tests: error: %s\n' "$*" >&2; exit 2; }

# ---------------------------------------------------------------- environment
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
for v in $(env | sed -n 's/^\(OMPI_MCA_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in
        OMPI_MCA_coll*|OMPI_MCA_mca_base_component_path|OMPI_MCA_btl)
            say "note: unsetting $v from the environment (the tests set it themselves)"
            unset "$v" ;;
    esac
done
[ -f "$HOME/.openmpi/mca-params.conf" ] &&
    say "note: $HOME/.openmpi/mca-params.conf exists and may change what these tests see"

for tool in mpicc mpirun ompi_info timeout awk; do
    command -v "$tool" >/dev/null || die "$tool not found (run ci/setup.sh)"
done

# SYS_DEFAULT keeps Open MPI's own components; our directory comes after it.
# $HOME/.openmpi/components (USER_DEFAULT) is deliberately left out so that an
# installed, possibly stale, copy of the component can never be picked up.
COMPONENT_PATH="SYS_DEFAULT:$COMPDIR"
SYSDIR=$(ompi_info --path pkglibdir | awk '{print $2}')
OMPI_VERSION=$(ompi_info --parsable | awk -F: '$1=="ompi" && $2=="version" && $3=="full" {print $4}')
OMPI_MAJOR=${OMPI_VERSION%%.*}
[[ $OMPI_MAJOR =~ ^[0-9]+$ ]] || die "cannot read Open MPI's version from ompi_info (got '$OMPI_VERSION')"
# mpirun's options that differ between the 4.x launcher (ORTE) and 5.x's
# (PRRTE): capture_output DIR sets CAPTURE_OPTS (mpirun options) and
# CAPTURE_WRAPPER (a command each rank runs its program with) so that each
# rank's stdout and stderr go to DIR/<job>/rank.<N>/ and nowhere else;
# COMPONENT_PATH_OPTS (mpirun options) and COMPONENT_PATH_ENV (in front of
# each rank's program) give the ranks the component path.
if [ "$OMPI_MAJOR" -ge 5 ]; then
    capture_output() { CAPTURE_OPTS=(); CAPTURE_WRAPPER=("$ROOT/ci/rank-output.sh" "$1"); }
    COMPONENT_PATH_ENV=(env "OMPI_MCA_mca_base_component_path=$COMPONENT_PATH")
    COMPONENT_PATH_OPTS=()
else
    capture_output() { CAPTURE_OPTS=(--output-filename "$1:nocopy"); CAPTURE_WRAPPER=(); }
    COMPONENT_PATH_ENV=()
    COMPONENT_PATH_OPTS=(--mca mca_base_component_path "$COMPONENT_PATH")
fi
# mpicc: the test programs include ompi_config.h (tests/mpi/common.h), which
# on Debian's Open MPI 5 needs the PMIx headers and the headers
# libopenmpi-dev omits (see docs/ompi5-port.md)
MPICC_FLAGS=()
if [ -n "${OMPI_EXTRA_INCLUDE_DIRS:-}" ]; then
    IFS=: read -ra extra_dirs <<<"$OMPI_EXTRA_INCLUDE_DIRS"
    for d in "${extra_dirs[@]}"; do [ -z "$d" ] || MPICC_FLAGS+=("-I$d"); done
fi
if [ "$OMPI_MAJOR" -ge 5 ] && pkg-config --exists pmix 2>/dev/null; then
    read -ra pmix_flags <<<"$(pkg-config --cflags-only-I pmix)"
    MPICC_FLAGS+=("${pmix_flags[@]}")
fi
read -ra user_cflags <<<"${MPI_TEST_CFLAGS:-}"
MPICC_FLAGS+=("${user_cflags[@]}")

if [ "$MODE" = component ] && [ "$LIST" = 0 ] && [ "$BUILD_ONLY" = 0 ]; then
    [ -f "$COMPDIR/mca_coll_rdma.so" ] ||
        die "$COMPDIR/mca_coll_rdma.so is missing: run 'make build' first (or use --stock)"
    if [ -n "$SYSDIR" ] && [ -e "$SYSDIR/mca_coll_rdma.so" ]; then
        die "$SYSDIR/mca_coll_rdma.so exists: a copy in Open MPI's own component directory would be loaded next to ours; remove it"
    fi
    if ! OMPI_MCA_mca_base_component_path=$COMPONENT_PATH \
        ompi_info --param coll rdma --level 9 2>&1 | grep 'coll_rdma_priority' >/dev/null; then
        OMPI_MCA_mca_base_component_path=$COMPONENT_PATH ompi_info --param coll rdma --level 9 2>&1 | sed 's/^/  ompi_info: /' | head -20
        die "ompi_info does not list coll rdma from $COMPDIR (see above)"
    fi
fi
[ -e "$HOME/.openmpi/components/mca_coll_rdma.so" ] &&
    say "note: $HOME/.openmpi/components/mca_coll_rdma.so exists; the tests ignore it (component path is $COMPONENT_PATH)"

# -------------------------------------------------------------------- build
mkdir -p "$BIN" "$COMPDIR"
if [ "$LIST" = 0 ]; then
    for src in "$ROOT"/tests/mpi/*.c; do
        prog=$(basename "$src" .c)
        if [ ! -x "$BIN/$prog" ] || [ "$src" -nt "$BIN/$prog" ] ||
            [ "$ROOT/tests/mpi/common.h" -nt "$BIN/$prog" ]; then
            [ "${MPI_TESTS_NO_BUILD:-0}" = 1 ] &&
                die "$BIN/$prog is missing or older than its source and MPI_TESTS_NO_BUILD=1: run 'ci/mpi-tests.sh --build-only' where every host sees the result"
            mpicc -O2 -Wall "${MPICC_FLAGS[@]}" -o "$BIN/$prog.tmp" "$src" || die "cannot compile $src"
            mv -f "$BIN/$prog.tmp" "$BIN/$prog"
        fi
    done
fi
[ "$BUILD_ONLY" = 1 ] && { say "mpi-tests: programs in $BIN are up to date"; exit 0; }

# ------------------------------------------------------------------ helpers
PASSED=0 FAILED=0 SKIPPED=0
FAILED_NAMES=()
T_START=$(date +%s)

shm_list() { (cd /dev/shm 2>/dev/null && ls -1 2>/dev/null | grep -E "^$1" || true) | sort; }

# new entries of $2 not in $1 (both newline separated, sorted)
new_entries() { comm -13 <(printf '%s\n' "$1" | sed '/^$/d') <(printf '%s\n' "$2" | sed '/^$/d'); }

# Is /dev/shm/$1 mapped by a live process (another job's segment, not a leak)?
mapped_by_someone() { grep -qsF "/dev/shm/$1" /proc/[0-9]*/maps 2>/dev/null; }

# Was /dev/shm/$1 created by one of the processes listed (one pid a line) in
# file $2? Segment names are coll_rdma.<origin>.<creator pid>.<start>.<nonce>,
# in hex (btl-ibmc/src/shm/naming.rs). A segment another job left (a killed
# or aborted rank of a concurrent test run) is not this test's leak.
created_by() {
    local pid_hex
    pid_hex=$(printf '%s' "$1" | cut -d. -f3)
    [[ $pid_hex =~ ^[0-9a-f]+$ ]] && [ -f "$2" ] && grep -qx "$((16#$pid_hex))" "$2"
}
# Every rank pid of this run, for the final check.
RUN_PIDS_FILE=$(mktemp /tmp/mpi-tests-pids.XXXXXX)
trap 'rm -f "$RUN_PIDS_FILE"' EXIT

SHM_BEFORE_ALL=$(shm_list 'coll_rdma\.')

# --list's line for case NAME; with --list-deps, the cases its CHECKS
# compare with (set before run_test, so they are the case's own)
list_case() {  # list_case NAME
    local c deps=()
    if [ "$LIST_DEPS" = 1 ]; then
        for c in "${CHECKS[@]}"; do
            [[ $c == smaller-window-than:* ]] && deps+=("${c#smaller-window-than:}")
        done
    fi
    if [ "${#deps[@]}" -gt 0 ]; then printf '%s\t%s\n' "$1" "${deps[*]}"; else say "$1"; fi
}

want() {  # want NAME: should this test run?
    # another transport or several hosts: section 1 only (the parameter
    # tests below expect shared memory on one node)
    if [ -n "$TRANSPORT$HOSTS" ] || [ "${#EXTRA_MCA[@]}" -gt 0 ]; then [[ $1 == np[0-9]*-* ]] || return 1; fi
    if [ "$LIST" = 1 ]; then list_case "$1"; return 1; fi
    [ -z "$ONLY" ] || printf '%s\n' "$1" | grep -Eq -- "$ONLY"
}

skip() {  # skip NAME REASON
    want "$1" || return 0
    SKIPPED=$((SKIPPED + 1))
    printf '%-44s SKIP  (%s)\n' "$1" "$2"
}

# TIMEOUT scaled by the load per core now (see TEST_TIMEOUT above): the
# tests' sizes are fixed, and on a machine running other work beside them a
# correct run takes longer in proportion.
# Inside a Soft-RoCE guest the host's load slows the run without showing in
# the guest's own load average; ci/rxe/guests.sh mirrors the host's
# /proc/loadavg into HOST_LOADAVG_FILE, and the larger load per core counts.
# KiB of memory a job may still take: the kernel's estimate of available
# memory, or less where a cgroup (v2 or v1) limits this one; 0 if unknown.
free_memory_kib() {
    local free limit used
    free=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo 2>/dev/null)
    free=${free:-0}
    if [ -r /sys/fs/cgroup/memory.max ]; then
        limit=$(cat /sys/fs/cgroup/memory.max) used=$(cat /sys/fs/cgroup/memory.current 2>/dev/null || echo 0)
    elif [ -r /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
        limit=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)
        used=$(cat /sys/fs/cgroup/memory/memory.usage_in_bytes 2>/dev/null || echo 0)
    fi
    if [[ ${limit:-max} =~ ^[0-9]+$ ]] && [ $(((limit - used) / 1024)) -lt "$free" ]; then
        free=$(((limit - used) / 1024))
    fi
    echo "$free"
}

load_scaled_timeout() {
    local host=${HOST_LOADAVG_FILE:-}
    [ -n "$host" ] && [ -r "$host" ] || host=/dev/null
    awk -v base="$TIMEOUT" -v cores="$(nproc)" -v host_cores="${HOST_CORES:-1}" -v most="$TIMEOUT_MAX_FACTOR" '
        FNR == 1 { l = $1 / (FILENAME == "/proc/loadavg" ? cores : host_cores); if (l > f) f = l }
        END { if (f < 1) f = 1; if (f > most) f = most; printf "%d\n", base * f + 0.5 }' /proc/loadavg "$host"
}

# What a job that outlived its time limit (or, with WHY, a launcher that
# outlived its ranks) was doing, into DIR/hung.txt:
# each of its processes (the launcher, found by the run id RUN on its
# command line, its daemons, and the ranks listed in DIR/pids that run here
# with that run id) with its state and kernel wait channel, its threads'
# states and its kernel stack; then, where gdb is installed, every thread's
# user stack, ranks first (they are what a hang report is about, and the
# job is ended after this). Taken before the job is ended: a hang that
# shows only at the end (all ranks printed their results, the launcher does
# not exit) leaves nothing to read afterwards.
record_hung_job() {  # record_hung_job DIR RUN [WHY]
    local dir=$1 run=$2 why=${3:-the job outlived its limit} out=$1/hung.txt
    local -A seen=()
    local launchers=() ranks=() queue=() order=() p
    read -ra launchers <<<"$(pgrep -f -- "CRTEST_RUN=$run" | tr '\n' ' ')"
    if [ -f "$dir/pids" ]; then
        # with --hosts the file lists the other machines' ranks too
        for p in $(cat "$dir/pids"); do
            tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "CRTEST_RUN=$run" && ranks+=("$p")
        done
    fi
    local family
    family=$(ps -e -o pid=,ppid=)
    queue=("${ranks[@]}" "${launchers[@]}")
    while [ "${#queue[@]}" -gt 0 ]; do
        p=${queue[0]}; queue=("${queue[@]:1}")
        [ -n "$p" ] && [ -z "${seen[$p]:-}" ] && [ -d "/proc/$p" ] || continue
        # the job's own `timeout` says nothing about the job
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = timeout ] && { seen[$p]=skip; continue; }
        seen[$p]=1
        order+=("$p")
        read -ra children <<<"$(awk -v parent="$p" '$2 == parent { printf "%s ", $1 }' <<<"$family")"
        queue+=("${children[@]}")
    done
    {
        echo "== $(date -u +%FT%TZ): $why; load average $(cut -d' ' -f1-3 /proc/loadavg)"
        for p in "${order[@]}"; do
            echo "== pid $p"
            ps -o pid=,ppid=,stat=,wchan:32=,etime=,time=,args= -p "$p" 2>/dev/null
            local t
            for t in /proc/"$p"/task/*; do
                [ -r "$t/stat" ] && echo "   thread ${t##*/}: state $(awk '{print $3}' "$t/stat" 2>/dev/null), waits in $(cat "$t/wchan" 2>/dev/null)"
            done
            echo "-- kernel stack"
            cat "/proc/$p/stack" 2>/dev/null || echo "(not readable)"
        done
        if command -v gdb >/dev/null; then
            for p in "${order[@]}"; do
                echo "== pid $p: user stacks (gdb), main thread first"
                timeout -k 5 20 gdb -q -batch -p "$p" -ex 'thread apply all -ascending bt' 2>&1 |
                    grep -vE '^\[(New LWP|Thread debugging|Inferior)' | head -150
            done
        fi
    } >"$out" 2>&1
}

# Exit statuses of a job's ranks once none is running any more: one line
# "PID STATUS" per rank still waiting to be reaped (STATUS as a shell reports
# it: the exit code, or 128 + the signal), "PID reaped" for one already
# reaped; nothing and status 1 while a rank runs or NP pids are not yet in
# PIDS_FILE. Only for ranks on this machine (no --hosts).
exited_ranks() {  # exited_ranks PIDS_FILE NP
    local pids=() p stat state
    [ -f "$1" ] && read -ra pids <<<"$(tr '\n' ' ' <"$1")"
    [ "${#pids[@]}" -ge "$2" ] || return 1
    local lines=()
    for p in "${pids[@]}"; do
        if ! stat=$(cat "/proc/$p/stat" 2>/dev/null); then lines+=("$p reaped"); continue; fi
        # fields after the command name, which may hold spaces: state is
        # the 3rd field of the line, exit_code (waitpid's form) the 52nd
        stat=${stat##*) }
        read -ra fields <<<"$stat"
        state=${fields[0]}
        [ "$state" = Z ] || [ "$state" = X ] || return 1
        local code=${fields[49]:-0}
        if [ $((code & 127)) = 0 ]; then lines+=("$p $((code >> 8))"); else lines+=("$p $((128 + (code & 127)))"); fi
    done
    printf '%s\n' "${lines[@]}"
}

# Watches a running test job (JOB: the pid of its `timeout`): at LIMIT
# seconds it marks the run as timed out, records what the job is doing and
# ends it. Open MPI 5's launcher sometimes never exits after ranks ended
# with a non-zero status (prterun stuck on a lock of its own, the ranks
# left as its zombies; seen in the checker self-tests, whose ranks fail on
# purpose): when every rank has exited and the launcher is still there
# LAUNCHER_GRACE seconds later, the watcher records the ranks' statuses in
# DIR/launcher-outlived-ranks, records the job as for a time-out and ends
# the launcher, and the run is judged on what its ranks did.
LAUNCHER_GRACE=${TEST_LAUNCHER_GRACE:-20}
watch_job() {  # watch_job DIR RUN_ID JOB LIMIT NP
    local dir=$1 run=$2 job=$3 limit=$4 np=$5 statuses
    local start=$SECONDS exited_since=
    while [ $((SECONDS - start)) -lt "$limit" ]; do
        sleep 2 || return 0
        if [ -z "$HOSTS" ] && statuses=$(exited_ranks "$dir/pids" "$np"); then
            exited_since=${exited_since:-$SECONDS}
            if [ $((SECONDS - exited_since)) -ge "$LAUNCHER_GRACE" ]; then
                printf '%s\n' "$statuses" >"$dir/launcher-outlived-ranks"
                record_hung_job "$dir" "$run" "mpirun is still there $((SECONDS - exited_since))s after every rank exited"
                kill -TERM "$job"
                return 0
            fi
        else
            exited_since=
        fi
    done
    : >"$dir/timed-out"
    record_hung_job "$dir" "$run"
    kill -TERM "$job"
}

# run_test NAME NP EXPECT [mpirun options...] -- PROGRAM [ARGS...]
#   EXPECT: "ok" (program must pass), "fail" (checker self-test: the program
#           must report failures) or "refused" (Open MPI must refuse the job:
#           non-zero exit, no crash)
#   Further checks are listed in the array CHECKS (set by the caller):
#     Checks on what coll rdma decided and counted read its events
#     (coll_rdma_events_file, docs/events.md), never its verbose lines; a
#     run with any of them gets
#     --mca coll_rdma_events_file DIR/events/rank-%r.jsonl:
#     events    the counts at free match the program's expect lines per
#               communicator and collective, nothing handed over but what
#               the program expects (ci/events-check.sh)
#     events-where-connected  the same, but a communicator that had no
#               transport (ranks acting as nodes without an RDMA device
#               between them) is left out; at least one other must have
#               been served
#     events-file:JQ  every rank wrote an events file, and the jq filter JQ
#               holds (jq -e, over all ranks' events as one array: `-s`)
#     ev:JQ     every rank wrote an events file, and JQ holds over all
#               ranks' events as one array, each event with `world` (its
#               process's rank in MPI_COMM_WORLD) added, with $np and the
#               helpers of ci/served/checks.jq (every_rank_ready, ...)
#     smaller-window-than:NAME  comm 0's window on rank 0 (comm_ready's
#               window_bytes) is smaller than in the test NAME, run first
#   Checks of wording a user must read (warnings and errors, which stay
#   worded as they are; the tests name them so):
#     says:STR  the fixed string STR appears in the output
#     says-re:RE  the extended regular expression RE matches a line of it
#     events-refused:DIR  every rank warned that coll_rdma_events_file
#               (given by the caller) was refused and it runs on without
#               events; DIR/victim (planted by the caller) still holds
#               "keep" and DIR/absent (a dangling link's target) was not
#               created
#     quiet     no coll:rdma output at all but stall warnings (see nowarn)
#     noserve   coll rdma claimed no communicator (no comm_claimed event)
#   Checks of the output of the programs and of Open MPI itself:
#     grep:STR  the fixed string STR appears in the output
#     re:RE     the extended regular expression RE matches a line of the output
#     nore:RE   no line of the output matches RE
#     nowarn:RE like nore:RE, but a stall warning ("coll:rdma: warning: rank R
#               of N has waited S s for ...") is tolerated and counted: it
#               says a wait was slow (a loaded machine can make a legitimate
#               wait exceed coll_rdma_stall_warning), not that anything went
#               wrong; a wait that never ends still fails by the timeout,
#               and the stall-warning tests check these lines with re:/nore:
#     gone:NAME /dev/shm/NAME no longer exists after the run
#     leaks     the run must leave a segment of its own in /dev/shm (a test of
#               the leak check itself; otherwise any is a failure)
#     within:N  mpirun ended within N seconds (a job that must not hang)
#     autotune  the barrier autotune (events): per process and context
#               id no more plans or choices than communicators claimed;
#               comm 0 has exactly one plan, and if a trial, every rank
#               chose the same radix, one of the candidates and a row of
#               rank 0's table
#     memory    every rank's comm_ready on comm 0 (shm) states the segment
#               size the layout formula gives for np ranks
#     autotune-allreduce  the same for the allreduce degree, whose trial
#               only runs once a call reaches the tree (so no choice is
#               also right)
#     launcher-ended  mpirun outlived the ranks and was ended for it (a test
#               of watch_job itself)
#   RUN_WRAPPER (array, set by the caller like CHECKS): a command that each
#   rank runs with the program as its arguments (e.g. ci/per-rank-mca.sh)
#   LAUNCH_WRAPPER (array, likewise): the same, but run first, with the
#   streams that mpirun reads (before the output is sent to files)
#   MPIRUN_WRAPPER (array, likewise): a command that runs mpirun itself
#   with its arguments (e.g. in a private mount namespace)
# A wait's report that it is slow (btl-ibmc's wait loops), not an error.
STALL_WARNING_RE='coll:rdma: warning: rank [0-9]+ of [0-9]+ has waited [0-9]+\.[0-9] s for '
CHECKS=()
RUN_WRAPPER=()
LAUNCH_WRAPPER=()
MPIRUN_WRAPPER=()
# events_hold DIR NP JQ: the jq expression JQ holds over the events of
# every rank of the run in DIR (ev: above; the helpers are
# ci/served/checks.jq); says why not on stdout
events_hold() {
    local dir=$1 np=$2 filter=$3 files=() f
    for f in "$dir"/events/rank-*.jsonl; do [ -f "$f" ] && files+=("$f"); done
    if [ "${#files[@]}" != "$np" ]; then
        echo "${#files[@]} events file(s) in ${dir#"$ROOT"/}/events, expected $np"; return 1
    fi
    jq -e -n --argjson np "$np" -L "$ROOT/ci/served" \
        "include \"checks\"; [inputs | .world = (input_filename | capture(\"rank-(?<r>[0-9]+)[.]jsonl\$\").r | tonumber)] | $filter" \
        "${files[@]}" >/dev/null 2>"$dir/jq.err" && return 0
    echo "the events do not satisfy: $filter $(head -c 300 "$dir/jq.err")"
    return 1
}

# jq_string TEXT: TEXT as a string literal an ev: check can hold (quotes
# and backslashes escaped as JSON does, which jq reads alike)
jq_string() { jq -n --arg text "$1" '$text'; }

declare -A WINDOW_BYTES=()
# window_bytes DIR: the window per rank of comm 0 on rank 0 (its first
# comm_ready event), empty without one
window_bytes() {
    jq -r 'select(.event == "comm_ready" and .cid == 0 and .rank == 0) | .window_bytes' \
        "$1"/events/rank-*.jsonl 2>/dev/null | head -n 1 || true
}

run_test() {
    local name=$1 np=$2 expect=$3
    shift 3
    local opts=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    local prog=$1
    shift
    want "$name" || { CHECKS=(); RUN_WRAPPER=(); LAUNCH_WRAPPER=(); MPIRUN_WRAPPER=(); return 0; }  # (the next test must not inherit them)

    local dir=$LOGROOT/$name
    rm -rf "$dir"
    mkdir -p "$dir"
    local c
    for c in "${CHECKS[@]}"; do
        case $c in
            events|events-where-connected|events-file:*|ev:*|autotune|autotune-allreduce|memory|noserve|smaller-window-than:*)
                mkdir -p "$dir/events"
                opts+=(--mca coll_rdma_events_file "$dir/events/rank-%r.jsonl")
                break ;;
        esac
    done
    local over=()
    [ "$np" -gt 2 ] && over=(--oversubscribe)
    local shm_before crt_before
    shm_before=$(shm_list 'coll_rdma\.')
    crt_before=$(shm_list 'crtest\.')
    local placement=(--mca btl self,vader)
    [ -n "$HOSTS" ] && placement=(--host "$HOSTS" --map-by node --mca btl self,vader,tcp)
    local CAPTURE_OPTS CAPTURE_WRAPPER
    capture_output "$dir/out"
    local run_id
    run_id=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
    local cmd=("${MPIRUN_WRAPPER[@]}" mpirun -np "$np" "${over[@]}" "${placement[@]}"
        "${COMPONENT_PATH_OPTS[@]}" "${CAPTURE_OPTS[@]}" -x "CRTEST_RUN=$run_id"
        "${opts[@]}" "${LAUNCH_WRAPPER[@]}" "${CAPTURE_WRAPPER[@]}" "${COMPONENT_PATH_ENV[@]}" "${RUN_WRAPPER[@]}"
        "$ROOT/ci/record-pid.sh" "$dir/pids" "$BIN/$prog" "$@")
    printf '%s\n' "${cmd[*]}" > "$dir/command"
    local t0 t1 rc=0
    t0=$(date +%s.%N)
    local run_limit
    run_limit=$(load_scaled_timeout)
    # timeout's own limit, later than the watcher's, is the backstop; a
    # watcher whose sleep was cut short (the job ended) does nothing
    timeout -k 10 "$((run_limit + 600))" "${cmd[@]}" </dev/null >"$dir/mpirun.log" 2>&1 &
    local job=$!
    (set +e; watch_job "$dir" "$run_id" "$job" "$run_limit" "$np") </dev/null >/dev/null 2>&1 &
    local watcher=$!
    wait "$job" || rc=$?
    pkill -P "$watcher" 2>/dev/null || true
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
    [ -e "$dir/timed-out" ] && rc=124
    # the launcher was ended after its ranks: their own statuses stand for
    # its (the first non-zero one; a rank it had reaped already counts as 0)
    local launcher_note=
    if [ -e "$dir/launcher-outlived-ranks" ]; then
        rc=$(awk '$2 != "reaped" && $2 != 0 { print $2; exit }' "$dir/launcher-outlived-ranks")
        rc=${rc:-0}
        launcher_note="mpirun was still there ${LAUNCHER_GRACE}s after every rank had exited (rank statuses: $(awk '{ printf "%s%s", sep, $2; sep = " " }' "$dir/launcher-outlived-ranks")); ended, the run judged on its ranks (what it was doing: ${dir#"$ROOT"/}/hung.txt)"
    fi
    t1=$(date +%s.%N)
    local secs
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')

    local why=()
    # all output, one file per rank: stdout then stderr
    local ranks=()
    local f
    for f in "$dir"/out/*/rank.*; do [ -d "$f" ] && ranks+=("$f"); done
    cat "$dir/mpirun.log" "$dir"/out/*/rank.*/std* 2>/dev/null > "$dir/all.log" || true

    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        why+=("timed out after ${run_limit}s (load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; what its processes were doing: ${dir#"$ROOT"/}/hung.txt)")
    fi
    if [ "$expect" = ok ]; then
        [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ "$rc" = 137 ] || why+=("mpirun exited with status $rc")
        # mpirun's own reason when it could not start a rank at all (its
        # status is then 132, which looks like a SIGILL but is none)
        grep -q 'unable to launch the specified application' "$dir/mpirun.log" 2>/dev/null &&
            why+=("mpirun could not start the program: $(grep -A6 'unable to launch' "$dir/mpirun.log" | grep -E 'Executable:|Node:' | tr -s ' ' | paste -sd ' ')")
        [ "${#ranks[@]}" = "$np" ] || why+=("output of ${#ranks[@]} rank(s) found, expected $np")
        local bad
        bad=$(grep -h '^FAIL:' "$dir"/out/*/rank.*/stdout 2>/dev/null | head -5 || true)
        [ -z "$bad" ] || why+=("program reported failures:"$'\n'"$bad")
        local okranks
        okranks=$(cat "$dir"/out/*/rank.*/stdout 2>/dev/null | grep -c '^result: rank [0-9]* failures 0 ' || true)
        [ "$okranks" = "$np" ] || why+=("$okranks of $np rank(s) printed a clean result line")
    elif [ "$expect" = refused ]; then
        [ "$rc" != 0 ] || why+=("the job ran although it should have been refused")
        grep -Eq 'Segmentation fault|Signal: |Signal code' "$dir/all.log" &&
            why+=("a process crashed instead of failing cleanly:"$'\n'"$(grep -E -m 8 'Signal|\[ *[0-9]+\]' "$dir/all.log")")
    else
        [ "$rc" != 0 ] || why+=("the program passed although its self-test broke it (skipped barriers, corrupted bytes)")
        grep -q '^FAIL:' "$dir"/out/*/rank.*/stdout 2>/dev/null ||
            why+=("no FAIL line although the self-test broke the program (skipped barriers, corrupted bytes)")
    fi

    local c stalls=0
    for c in "${CHECKS[@]}"; do
        case $c in
            events|events-where-connected)
                local flag=() out
                [ "$c" = events-where-connected ] && flag=(--where-connected)
                out=$(EXPECT_TRANSPORT="${EXPECT_TRANSPORT:-${TRANSPORT:-shm}}" "$ROOT/ci/events-check.sh" "$dir" "$np" "${flag[@]}" 2>&1) ||
                    why+=("${out:-ci/events-check.sh failed without a word}") ;;
            events-file:*)
                local filter=${c#events-file:} files=()
                for f in "$dir"/events/rank-*.jsonl; do [ -f "$f" ] && files+=("$f"); done
                if [ "${#files[@]}" != "$np" ]; then
                    why+=("${#files[@]} events file(s) in ${dir#"$ROOT"/}/events, expected $np")
                elif ! jq -e -s "$filter" "${files[@]}" >/dev/null 2>"$dir/jq.err"; then
                    why+=("the events do not satisfy: $filter $(head -c 300 "$dir/jq.err")")
                fi ;;
            ev:*)
                local out
                out=$(events_hold "$dir" "$np" "${c#ev:}") || why+=("$out") ;;
            events-refused:*)
                local planted=${c#events-refused:} warned
                warned=$(grep -c "coll:rdma: warning: coll_rdma_events_file: cannot create .*; running on without events" "$dir/all.log" || true)
                [ "$warned" = "$np" ] || why+=("$warned rank(s) warned that the events file was refused, expected $np")
                [ "$(cat "$planted/victim" 2>/dev/null)" = keep ] || why+=("$planted/victim was written through the link")
                [ ! -e "$planted/absent" ] || why+=("$planted/absent was created through the dangling link") ;;
            autotune|autotune-allreduce)
                local coll=barrier must_choose=true out
                [ "$c" = autotune-allreduce ] && coll=allreduce must_choose=false
                out=$(events_hold "$dir" "$np" "once_per_claim(\"autotune_plan\"; \"$coll\") and once_per_claim(\"autotune\"; \"$coll\")
                    and autotune_agreed(\"$coll\"; $must_choose)") || why+=("$out") ;;
            memory)
                local out
                out=$(events_hold "$dir" "$np" 'every_rank_ready(0; .transport == "shm" and .memory.shm_ranks == $np
                    and .memory.total_bytes == shm_segment_bytes(.window_bytes; $np))') || why+=("$out") ;;
            quiet)
                local printed
                printed=$(grep 'coll:rdma:' "$dir/all.log" | grep -Ev -- "$STALL_WARNING_RE" || true)
                [ -z "$printed" ] || why+=("coll:rdma printed something:"$'\n'"$(printf '%s\n' "$printed" | head -3)")
                stalls=$(grep -cE -- "$STALL_WARNING_RE" "$dir/all.log" || true) ;;
            noserve)
                # (a process that disqualified coll rdma writes no events)
                cat "$dir"/events/rank-*.jsonl 2>/dev/null | grep -q '"event":"comm_claimed"' &&
                    why+=("coll rdma claimed a communicator (comm_claimed in ${dir#"$ROOT"/}/events)") ;;
            says:*)
                local s=${c#says:}
                grep -qF -- "$s" "$dir/all.log" || why+=("missing message: $s") ;;
            says-re:*)
                local re=${c#says-re:}
                grep -qE -- "$re" "$dir/all.log" || why+=("no line says: $re") ;;
            grep:*)
                local s=${c#grep:}
                grep -qF -- "$s" "$dir/all.log" || why+=("missing message: $s") ;;
            re:*)
                local re=${c#re:}
                grep -qE -- "$re" "$dir/all.log" || why+=("no line matches: $re") ;;
            launcher-ended)
                [ -n "$launcher_note" ] || why+=("mpirun outlived its ranks, but the run was not ended as such") ;;
            smaller-window-than:*)
                # comm 0's window on rank 0 is smaller than in the test named
                # (run before this one), from the comm_ready events
                local reference=${c#smaller-window-than:} mine theirs
                mine=$(window_bytes "$dir")
                theirs=${WINDOW_BYTES[$reference]:-}
                if [ -z "$theirs" ]; then
                    why+=("no window size from $reference, which must run first (select it too)")
                elif [ -z "$mine" ] || [ "$mine" -ge "$theirs" ]; then
                    why+=("comm 0's window is ${mine:-?} bytes per rank, not less than $theirs in $reference")
                fi ;;
            gone:*)
                local g=${c#gone:}
                if [ -e "/dev/shm/$g" ]; then
                    why+=("/dev/shm/$g is still there")
                    rm -f "/dev/shm/$g"
                fi ;;
            within:*)
                local limit=${c#within:}
                awk -v s="$secs" -v n="$limit" 'BEGIN { exit !(s <= n) }' ||
                    why+=("mpirun took ${secs}s, more than ${limit}s") ;;
            nore:*)
                local re=${c#nore:}
                grep -qE -- "$re" "$dir/all.log" &&
                    why+=("unexpected output:"$'\n'"$(grep -E -- "$re" "$dir/all.log" | head -3)") ;;
            nowarn:*)
                local re=${c#nowarn:} unexpected
                unexpected=$(grep -E -- "$re" "$dir/all.log" | grep -Ev -- "$STALL_WARNING_RE" || true)
                [ -z "$unexpected" ] || why+=("unexpected output:"$'\n'"$(printf '%s\n' "$unexpected" | head -3)")
                stalls=$(grep -cE -- "$STALL_WARNING_RE" "$dir/all.log" || true) ;;
        esac
    done

    # leftovers in /dev/shm: segments this run's ranks created and left
    local leaked=() e
    [ -f "$dir/pids" ] && cat "$dir/pids" >>"$RUN_PIDS_FILE"
    while IFS= read -r e; do
        [ -n "$e" ] || continue
        mapped_by_someone "$e" && continue
        created_by "$e" "$dir/pids" || continue
        leaked+=("$e")
    done < <(new_entries "$shm_before" "$(shm_list 'coll_rdma\.')")
    local must_leak=0
    for c in "${CHECKS[@]}"; do [ "$c" = leaks ] && must_leak=1; done
    if [ "$must_leak" = 1 ]; then
        [ "${#leaked[@]}" -gt 0 ] || why+=("the leak check missed the segment this run left in /dev/shm")
    elif [ "${#leaked[@]}" -gt 0 ]; then
        why+=("left in /dev/shm: ${leaked[*]}")
    fi
    for e in "${leaked[@]}"; do rm -f "/dev/shm/$e"; done
    while IFS= read -r e; do
        [ -n "$e" ] && ! mapped_by_someone "$e" && rm -f "/dev/shm/$e"
    done < <(new_entries "$crt_before" "$(shm_list 'crtest\.')")

    # kept after the logs go, for a later test's smaller-window-than check
    WINDOW_BYTES[$name]=$(window_bytes "$dir")
    if [ "${#why[@]}" = 0 ]; then
        PASSED=$((PASSED + 1))
        if [ "$stalls" -gt 0 ]; then
            printf '%-44s PASS  %6ss  (%s stall warning(s) accepted)\n' "$name" "$secs" "$stalls"
        else
            printf '%-44s PASS  %6ss\n' "$name" "$secs"
        fi
        [ -z "$launcher_note" ] || printf '      note: %s\n' "$launcher_note"
        [ "$KEEP_LOGS" = 1 ] || [ -n "$launcher_note" ] || rm -rf "$dir"
    else
        FAILED=$((FAILED + 1))
        FAILED_NAMES+=("$name")
        printf '%-44s FAIL  %6ss  (logs: %s)\n' "$name" "$secs" "${dir#"$ROOT"/}"
        [ -z "$launcher_note" ] || why+=("note: $launcher_note")
        local w
        for w in "${why[@]}"; do printf '%s\n' "$w" | sed 's/^/      /'; done
        printf '      command: %s\n' "$(cat "$dir/command")"
    fi
    CHECKS=()
    RUN_WRAPPER=()
    LAUNCH_WRAPPER=()
    MPIRUN_WRAPPER=()
}

# ------------------------------------------------------------------- tests
rm -rf "$LOGROOT"
mkdir -p "$LOGROOT"

if [ "$QUICK" = 1 ]; then
    BO_N=1000; CL_L=100; CM_I=30; NPS="1 2 3 4"; RO=(-m 1000 -x 40); RO_PARAM=(-m 1000 -x 20)
    BC=(-n 300 -B 1 -L 50 -x 60); BC_PARAM=(-n 300 -B 1 -L 50 -x 40)
else
    BO_N=20000; CL_L=1000; CM_I=300; NPS="1 2 3 4 5 8"; RO=(-x 150); RO_PARAM=(-m 1000 -x 60)
    BC=(-n 3000); BC_PARAM=(-n 1000 -B 1 -L 100 -x 100)
fi
[ -n "$NPS_SET" ] && NPS=$NPS_SET

if [ "$LIST" = 0 ]; then
    say "== coll rdma MPI tests ($MODE mode, Open MPI $OMPI_VERSION, $(nproc) core(s), timeout ${TIMEOUT}s per run, times the load per core up to ${TIMEOUT_MAX_FACTOR}x)"
    say "   component path: $COMPONENT_PATH"
    [ "$MODE" = component ] && say "   component: $COMPDIR/mca_coll_rdma.so ($(stat -c '%s bytes, %y' "$COMPDIR/mca_coll_rdma.so" | cut -d. -f1))"
fi

if [ "$MODE" = component ]; then
    V=(--mca coll_rdma_verbose 1)
    [ -n "$TRANSPORT" ] && V+=(--mca coll_rdma_transport "$TRANSPORT")
    V+=("${EXTRA_MCA[@]}")
    # the checks read coll rdma's events (docs/events.md) with jq
    command -v jq >/dev/null || die "jq not found (run ci/setup.sh): the checks read coll rdma's events with it"
    SERVED_CHECK=events SERVED_WHERE_CONNECTED=events-where-connected
    SERVED=("$SERVED_CHECK" "nowarn:coll:rdma:.*warning")
    # bcast: coll rdma's root returns at once while its messages fit in the
    # window, even with a receiver asleep (stock Open MPI's tuned does not)
    BC_E=(-E)
    # ... checked without a clock (the late rank enters only once the root
    # is done, meeting it on the node's shared table), so only where all
    # ranks share one machine, and only without --transport or --hosts
    # (never tried over the emulated verbs)
    [ -n "$TRANSPORT$HOSTS" ] && BC_E=()
    # every size is served natively by default (issue 12): single copy from
    # 16 KiB on shared memory, the window below it and on verbs, with no
    # limit below 64 MiB; comm_ready says which path serves which lengths
    BC_REASON='ev:handed_over("bcast"; true) | not'
    BC_PATHS='ev:rank0_ready(0; if .reads_peer_memory then .bcast.single_copy_min_bytes == 16384 else .bcast.single_copy_min_bytes == null end)'
else
    V=()
    SERVED=()
    BC_E=()
    BC_REASON=
    BC_PATHS=
fi

# 1. the three programs at every size
for np in $NPS; do
    CHECKS=("${SERVED[@]}"); run_test "np$np-barrier_order" "$np" ok "${V[@]}" -- barrier_order -n "$BO_N" -d 200
    CHECKS=("${SERVED[@]}"); run_test "np$np-comm_lifecycle" "$np" ok "${V[@]}" -- comm_lifecycle -l "$CL_L"
    CHECKS=("${SERVED[@]}"); run_test "np$np-coll_mix" "$np" ok "${V[@]}" -- coll_mix -i "$CM_I"
    CHECKS=("${SERVED[@]}"); run_test "np$np-reduce_ops" "$np" ok "${V[@]}" -- reduce_ops "${RO[@]}"
    CHECKS=("${SERVED[@]}")
    [ "$np" -gt 1 ] && [ -n "$BC_REASON" ] && CHECKS+=("$BC_REASON" "$BC_PATHS")
    run_test "np$np-bcast" "$np" ok "${V[@]}" -- bcast "${BC[@]}" "${BC_E[@]}"
done

# 1a. MPI_THREAD_MULTIPLE over the transport or hosts asked for (udp
#     between the netns hosts of ci/udp-tests.sh, verbs and shm+verbs in the
#     Soft-RoCE guests): a few iterations of section 18's program (2 worker
#     threads on their own communicators, the Iprobe/Test poller, a thread
#     creating and freeing communicators), results checked by the program,
#     every collective served over an expected transport on some
#     communicator, no warning. Shared memory on one host runs it at
#     length in section 18.
if [ -n "$TRANSPORT$HOSTS" ] && [ "$MODE" = component ]; then
    TM_OVER=$(printf '%s' "${EXPECT_TRANSPORT:-${TRANSPORT:-shm}}" | sed 's/+/\\+/g; s/  */|/g')
    for np in $NPS; do
        [ "$np" -gt 1 ] || continue
        CHECKS=("grep:coll:rdma: serving MPI_THREAD_MULTIPLE" "nowarn:coll:rdma:.*(warning|error)")
        for what in barrier bcast allreduce reduce; do
            CHECKS+=("re:coll:rdma: comm [0-9]+ rank 0: served [1-9][0-9]* $what\\(s\\) over ($TM_OVER)")
        done
        run_test "np$np-thread_multiple" "$np" ok "${V[@]}" -- thread_multiple -t 2 -i 3 -c 2
    done
fi

# 1b. MPI_Ibarrier and the persistent barrier (issue 35): served natively
#     wherever the blocking barrier is (verbose 1 counts them), several
#     outstanding between blocking barriers, completed by MPI_Waitall,
#     MPI_Waitany and MPI_Test loops, a late rank, requests pending across
#     another communicator's dup and free. Shared memory on one host only
#     (not a section 1 name): the check orders events by the host's clock.
NB_R=200; [ "$QUICK" = 1 ] && NB_R=60
for np in 1 2 3 4; do
    CHECKS=("${SERVED[@]}")
    if [ "$np" -gt 1 ] && [ "$MODE" = component ]; then
        for kind in ibarrier barrier_init; do
            CHECKS+=("ev:every_rank_served(0; \"$kind\"; \"shm\")")
        done
    fi
    run_test "nonblocking_barrier-np$np" "$np" ok "${V[@]}" -- nonblocking_barrier -r "$NB_R" -n 1000
done

# 1c. MPI_Iallreduce, MPI_Ireduce (and MPI_Ibcast, still libnbc's) and the
#     persistent allreduce and reduce (issue 35): several outstanding of
#     every kind with moving roots, zero counts, MPI_IN_PLACE and a
#     non-commutative user op, completed in reverse, random and Waitany
#     order with blocking calls between, a late rank, 1000 persistent
#     starts with changed buffers, calls pending across another
#     communicator's dup and free; each result checked against a local
#     reference. The events must count the four kinds served over shm,
#     none handed over.
NR_R=200; [ "$QUICK" = 1 ] && NR_R=60
for np in 1 2 3 4; do
    CHECKS=("${SERVED[@]}")
    if [ "$np" -gt 1 ] && [ "$MODE" = component ]; then
        for kind in iallreduce ireduce allreduce_init reduce_init; do
            CHECKS+=("ev:every_rank_served(0; \"$kind\"; \"shm\")")
        done
    fi
    run_test "nonblocking_reductions-np$np" "$np" ok "${V[@]}" -- nonblocking_reductions -r "$NR_R" -n 1000
done

# 1d. communicators whose first collective is a non-blocking or persistent
#     one: Open MPI's own MPI_Iallreduce on MPI_COMM_WORLD when it
#     duplicates it (made from its progress loop), then the program's own
#     calls on fresh duplicates (nonblocking_first). Such a call goes to
#     the module underneath, said once per communicator (setup_deferred),
#     and the first blocking collective sets the communicator up: never
#     the setup exchange from inside Open MPI's progress loop. After that
#     every kind is served; where the setup cannot work, every
#     communicator ends where a blocking first call leaves it: unavailable
#     at stage transport, each kind handed over at most once (the module
#     underneath's functions are installed, the non-blocking ones too).
NF_R=20; [ "$QUICK" = 1 ] && NF_R=5
NF_COMMS='ev:[events("comm_claimed")] | length == 4 * $np'
for np in 2 3; do
    CHECKS=("${SERVED[@]}")
    [ "$MODE" = component ] && CHECKS+=("$NF_COMMS" 'ev:nothing_handed_over'
        'ev:[events("comm_ready")] | length == 4 * $np'
        'ev:[events("setup_deferred") | on(0) | select(.collective == "iallreduce")] | length == $np'
        'ev:[events("setup_deferred")] | length == 3 * $np'
        'ev:[events("comm_freed") | on(0)] | length == $np and all(.[]; .calls.iallreduce.served > 0 and .calls.ireduce.served > 0 and .calls.ibarrier.served > 0)'
        'ev:[events("comm_freed") | select(.calls.allreduce_init.served > 0)] | length == $np')
    run_test "nonblocking-first-np$np" "$np" ok "${V[@]}" -- nonblocking_first -r "$NF_R"
done
if [ "$MODE" = component ]; then
    # (4 communicators per rank, none connected, each kind handed over at
    # most once on each)
    NF_UNAVAILABLE=("$NF_COMMS" 'ev:[events("comm_ready")] | length == 0'
        'ev:[events("comm_unavailable") | select(.stage == "transport")] | length == 4 * $np'
        'ev:[events("comm_freed") | select(.transport == "no transport")] | length == 4 * $np and all(.[]; all(.calls[]; .served == 0 and .handed_over <= 1))')
    if [ -z "$(ls -A /sys/class/infiniband 2>/dev/null)" ] && grep -qa 'libibverbs\.so' "$COMPDIR/mca_coll_rdma.so" 2>/dev/null; then
        CHECKS=("${NF_UNAVAILABLE[@]}" "ev:unavailable_everywhere(0; \"transport\"; $(jq_string "^transport unavailable \\(no RDMA device found"))")
        run_test "nonblocking-first-verbs-without-device-np3" 3 ok --mca coll_rdma_transport verbs "${V[@]}" -- nonblocking_first -r "$NF_R"
    else
        skip "nonblocking-first-verbs-without-device-np3" "an RDMA device is present, or this build has no verbs"
    fi
    CHECKS=("${NF_UNAVAILABLE[@]}" "ev:unavailable_everywhere(0; \"transport\"; $(jq_string '^transport unavailable \(udp: coll_rdma_udp_interface=no-such-if0'))")
    run_test "nonblocking-first-udp-missing-interface-np3" 3 ok --mca coll_rdma_transport udp --mca coll_rdma_udp_interface no-such-if0 \
        "${V[@]}" -- nonblocking_first -r "$NF_R"
    # every reduction with data above the limit: the non-blocking ones
    # are handed over for it too, with the blocking call's parameter
    CHECKS=("$NF_COMMS" 'ev:[events("comm_ready")] | length == 4 * $np'
        'ev:[events("handover") | select(.collective == "iallreduce")] | length > 0 and all(.[]; .limit_parameter == "coll_rdma_allreduce_max_bytes")'
        'ev:[events("comm_freed") | on(0)] | all(.[]; .calls.iallreduce.served == 0 and .calls.ibarrier.served > 0)')
    run_test "nonblocking-first-allreduce-max-bytes-0-np3" 3 ok --mca coll_rdma_allreduce_max_bytes 0 "${V[@]}" \
        -- nonblocking_first -r "$NF_R"
fi

# 2. the checker must catch a broken barrier (works without the component:
#    the test library skips every 50th MPI_Barrier)
run_test "selftest-checker-catches-skipped-barriers" 3 fail -x CRTEST_SELFTEST_SKIP_BARRIER=1 \
    -- barrier_order -n 2000 -d 200

# 2a. across nodes the barrier check compares the late member's entry with
#    every other member's exit on clocks aligned by a round trip: ranks
#    acting as two nodes (ci/fake-node.sh: own host names, so coll rdma sees
#    two nodes without an RDMA device and the module underneath serves
#    them) must pass it, and it must catch the skipped barriers
if unshare --uts true 2>/dev/null; then
    FAKE_NODES=(grep:"info: ranks span 2 nodes")
    CHECKS=("${FAKE_NODES[@]}"); RUN_WRAPPER=("$ROOT/ci/fake-node.sh" 2)
    run_test "fake-nodes-barrier-check-np4" 4 ok -- barrier_order -n 300
    CHECKS=("${FAKE_NODES[@]}" "re:rank [0-9]+ left [0-9]+ us before rank [0-9]+ entered"); RUN_WRAPPER=("$ROOT/ci/fake-node.sh" 2)
    run_test "selftest-node-check-catches-skips" 4 fail -x CRTEST_SELFTEST_SKIP_BARRIER=1 \
        -- barrier_order -n 300
    # ... and placed round robin (as `--map-by node` on real nodes), the
    #    programs' even/odd halves are each within one node: coll rdma
    #    serves them over shared memory, reading peers' memory (parallel
    #    allreduce, single-copy bcast) although the job spans nodes, and the
    #    checker's per-communicator classification must agree
    if [ "$MODE" = component ]; then
        ROUND_ROBIN=("$ROOT/ci/fake-node.sh" --round-robin 2)
        # (the communicators across the pretended nodes are served over
        # shm+verbs on a machine with an RDMA device, else over udp where
        # multicast works on the default interface)
        ACROSS_TOO="${EXPECT_TRANSPORT:-${TRANSPORT:-shm}} shm+verbs udp"
        CHECKS=("${FAKE_NODES[@]}" "$SERVED_WHERE_CONNECTED" "nowarn:coll:rdma:.*warning"); RUN_WRAPPER=("${ROUND_ROBIN[@]}")
        EXPECT_TRANSPORT=$ACROSS_TOO run_test "fake-nodes-round-robin-reduce_ops-np4" 4 ok "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
        CHECKS=("${FAKE_NODES[@]}" "$SERVED_WHERE_CONNECTED" "nowarn:coll:rdma:.*warning"); RUN_WRAPPER=("${ROUND_ROBIN[@]}")
        EXPECT_TRANSPORT=$ACROSS_TOO run_test "fake-nodes-round-robin-bcast-np4" 4 ok "${V[@]}" -- bcast "${BC_PARAM[@]}"
    fi
else
    skip "fake-nodes-barrier-check-np4" "unshare --uts is not permitted here (needs root)"
    skip "selftest-node-check-catches-skips" "unshare --uts is not permitted here (needs root)"
    if [ "$MODE" = component ]; then
        skip "fake-nodes-round-robin-reduce_ops-np4" "unshare --uts is not permitted here (needs root)"
        skip "fake-nodes-round-robin-bcast-np4" "unshare --uts is not permitted here (needs root)"
    fi
fi

# 2a'. a launcher that outlives its ranks (Open MPI 5's prterun, now and
#    then, after ranks exit with a non-zero status) is ended once they have
#    all exited, and the run judged on them: here each rank leaves a child
#    holding mpirun's end of its output open, so mpirun waits for it
HOLDERS=$LOGROOT/holders.$$
LAUNCH_WRAPPER=(sh -c 'sleep 600 & echo $! >>"$0"; exec "$@"' "$HOLDERS")
CHECKS=(launcher-ended)
run_test "selftest-launcher-outliving-ranks-ended-np2" 2 ok -- coll_mix -i 5
[ -f "$HOLDERS" ] && { xargs -r kill <"$HOLDERS" 2>/dev/null || true; rm -f "$HOLDERS"; }

# 2b. the bcast checks must catch a wrong byte and a write outside the
#    datatype (the program corrupts its own buffers now and then)
run_test "selftest-bcast-checker-catches-corruption" 3 fail -x CRTEST_SELFTEST_CORRUPT_BCAST=1 \
    -- bcast -n 300 -B 0 -L 10 -x 10

# 2c. the /dev/shm leak check blames a test only for segments its own ranks
#    created (the creator's pid is in the name): a segment that a concurrent
#    job leaves meanwhile is not this test's leak, one of its own is
DEAD_PID=$(sh -c 'echo $$')
FOREIGN_SEGMENT=coll_rdma.0.$(printf %x "$DEAD_PID").0.0
RUN_WRAPPER=(sh -c '[ "$OMPI_COMM_WORLD_RANK" != 0 ] || : >"/dev/shm/$0"; exec "$@"' "$FOREIGN_SEGMENT")
run_test "selftest-leak-check-ignores-other-jobs-np2" 2 ok -- coll_mix -i 5
rm -f "/dev/shm/$FOREIGN_SEGMENT"
CHECKS=(leaks)
RUN_WRAPPER=(sh -c '[ "$OMPI_COMM_WORLD_RANK" != 0 ] || : >"/dev/shm/coll_rdma.0.$(printf %x $$).0.0"; exec "$@"' leave-own-segment)
run_test "selftest-leak-check-catches-own-np2" 2 ok -- coll_mix -i 5

# 3. excluded: no trace of coll rdma, results still right
CHECKS=(quiet); run_test "excluded-coll-^rdma" 3 ok --mca coll '^rdma' --mca coll_rdma_verbose 1 -- coll_mix -i "$CM_I"

# without_device_test NAME NP WHY PARAM VALUE: with --mca PARAM VALUE a
# communicator needs verbs; on a machine without an RDMA device every rank
# must report "transport unavailable (WHY...)" and hand every call over:
# the first by itself, the later ones by installing the functions underneath
# on the communicator, so that they no longer pass through coll rdma (no
# collective counts more than the one handed-over call)
# A component built without the verbs transport (the Open MPI 5 chroot's,
# docs/ompi5-port.md) gives that as the reason instead, with the same fallback.
without_device_test() {
    local name=$1 np=$2 why=$3 param=$4 value=$5
    if [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
        skip "$name" "this machine has an RDMA device (the Soft-RoCE tests cover verbs)"
        return
    fi
    # (the component links libibverbs exactly when it has the verbs transport)
    grep -qa 'libibverbs\.so' "$COMPDIR/mca_coll_rdma.so" 2>/dev/null ||
        why="this build of coll rdma has no verbs support"
    CHECKS=("ev:unavailable_everywhere(0; \"transport\"; $(jq_string "^transport unavailable \\($why"))"
        'ev:all(events("comm_freed") | select(.transport == "no transport"); all(.calls[]; .handed_over <= 1))')
    run_test "$name" "$np" ok --mca "$param" "$value" "${V[@]}" -- coll_mix -i 20
}

# udp_fallback_test NAME NP CIDS WHY [mpirun options...]: with
# coll_rdma_transport udp and a udp setup that cannot work on
# MPI_COMM_WORLD, every rank reports "transport unavailable (udp: WHY...)"
# (WHY an extended regular expression) for it, rank 0 as a warning
# (printed at any verbosity: the user asked for udp), and hands every call
# over: nothing is served on the communicators whose context ids match the
# regular expression CIDS, and the program's results are checked as always
udp_fallback_test() {
    local name=$1 np=$2 cids=$3 why=$4 r
    shift 4
    # (the wording a user must read: rank 0's warning at any verbosity)
    CHECKS=("says-re:coll:rdma: warning: comm 0 rank 0: transport unavailable \(udp: $why.*\); collectives fall back to the module underneath"
        "ev:unavailable_everywhere(0; \"transport\"; $(jq_string "^transport unavailable \\(udp: $why"))"
        "ev:all(events(\"comm_freed\") | select(.cid | tostring | test(\"^($cids)\$\")); all(.calls[]; .served == 0))")
    run_test "$name" "$np" ok "$@" "${V[@]}" --mca coll_rdma_transport udp -- coll_mix -i 20
}

# Rank 0 killed (SIGKILL) inside the transport setup, after creating its
# shared-memory segment and before the other rank (held between the settings
# agreement and the transport setup by coll_rdma_test_setup_pause_s)
# attached it: the segment is left in /dev/shm, and the next job's setup on
# this node must remove it.
descends_from() {  # descends_from PID ANCESTOR: is ANCESTOR among PID's parents?
    local p=$1 i
    for i in $(seq 64); do
        # the parent's pid follows the state, after the command's ") "
        p=$(sed 's/.*) [^ ]* //; s/ .*//' "/proc/$p/stat" 2>/dev/null) || return 1
        [ -n "$p" ] && [ "$p" != 0 ] || return 1
        [ "$p" = "$2" ] && return 0
    done
    return 1
}

killed_creator_test() {
    local name=$1
    want "$name" || return 0
    local dir=$LOGROOT/$name before leaked="" pid="" problem=""
    rm -rf "$dir"
    mkdir -p "$dir"
    before=$(shm_list 'coll_rdma\.')
    timeout -k 5 90 mpirun -np 2 --mca btl self,vader "${COMPONENT_PATH_OPTS[@]}" \
        --mca coll_rdma_test_setup_pause_s 60 "${COMPONENT_PATH_ENV[@]}" "$BIN/barrier_order" -n 10 </dev/null >"$dir/killed-job.log" 2>&1 &
    local job=$!
    # Only a segment mapped by a process of this job counts: another job on
    # the machine (a second make check) may be creating segments too.
    local entry mapper
    for _ in $(seq 300); do
        while IFS= read -r entry; do
            [ -n "$entry" ] || continue
            # (grep fails when a process it lists vanishes while it reads)
            for mapper in $({ grep -lsF "/dev/shm/$entry" /proc/[0-9]*/maps 2>/dev/null || true; } | cut -d/ -f3); do
                if descends_from "$mapper" "$job"; then leaked=$entry pid=$mapper; break 2; fi
            done
        done < <(new_entries "$before" "$(shm_list 'coll_rdma\.')")
        [ -n "$leaked" ] && break
        sleep 0.1
    done
    if [ -z "$leaked" ]; then
        problem="no coll_rdma.* segment of this job appeared while rank 1 slept before its first barrier"
    else
        kill -9 "$pid" || true
        [ -e "/dev/shm/$leaked" ] ||
            problem="killing rank 0 (pid $pid) left nothing in /dev/shm: the test did not hit the window it is about"
    fi
    wait "$job" || true
    if [ -z "$problem" ] && [ ! -e "/dev/shm/$leaked" ]; then
        # It was there after the kill and is gone now: the setup of another
        # job on this machine (a concurrent test run) reaped it first, which
        # is the behaviour under test, by someone else.
        PASSED=$((PASSED + 1))
        printf '%-44s PASS  (the killed rank'"'"'s segment was reaped by another job'"'"'s setup first)\n' "$name"
        return 0
    fi
    if [ -n "$problem" ]; then
        FAILED=$((FAILED + 1))
        FAILED_NAMES+=("$name")
        printf '%-44s FAIL  (%s; logs: %s)\n' "$name" "$problem" "${dir#"$ROOT"/}"
        [ -n "$leaked" ] && rm -f "/dev/shm/$leaked"
        return 0
    fi
    CHECKS=("$SERVED_CHECK" "gone:$leaked")
    run_test "$name" 2 ok "${V[@]}" -- barrier_order -n 100
}

COMP_TESTS=(
    "np1-not-claimed-size1" "default-verbose-is-silent"
    "events-known-run-coll_mix-np3" "events-known-run-reduce_ops-np3" "events-file-symlink-refused-np2"
    "plain-coll-rdma-every-collective-np2"
    "plain-coll-rdma-every-collective-np4" "readme-coll-list-every-collective-np4"
    "plain-coll-rdma-barrier_order-np3" "plain-coll-rdma-reduce_ops-np3" "plain-coll-rdma-bcast-np3"
    "plain-coll-rdma-broken-component-np2"
    "han-default-priority-np4" "han-priority-50-np4" "han-priority-50-plain-coll-rdma-np4"
    "exclusion-list-untouched-np2"
    "radix-1-np5" "radix-2-np5" "radix-3-np8" "radix-7-np8" "radix-64-np5"
    "autotune-np2" "autotune-np4" "autotune-coll_mix-np4" "autotune-comm_lifecycle-np4"
    "verbose-memory-np2" "verbose-memory-np4"
    "autotune-reduce_ops-np2" "autotune-reduce_ops-np3" "autotune-reduce_ops-np4"
    "autotune-noncommutative-np2" "autotune-noncommutative-np3" "autotune-noncommutative-np4"
    "spin-polls-0-np4" "spin-polls-1000-np2" "transport-shm-np3" "transport-verbs-without-device-np3"
    "transport-udp-missing-interface-np3" "transport-udp-loopback-mismatch-np4"
    "pretend-nodes-without-device-np4"
    "stall-warning-after-1s" "stall-warning-at-verbose-0-is-quiet-enough" "stall-warning-0-never"
    "bad-radix--3" "bad-radix-999" "bad-transport-bogus" "version-mismatch-9.9.9"
    "allreduce-degree-1-np5" "allreduce-degree-2-np8" "allreduce-degree-3-np8" "allreduce-degree-7-np8"
    "allreduce-exchange-off-np4" "allreduce-segment-64-np4" "allreduce-segment-100-np3"
    "allreduce-degree-2-segment-64-np5" "allreduce-max-bytes-1024-np4" "reduce-max-bytes-1024-np4"
    "allreduce-max-bytes-0-np3"
    "bcast-window-1-np4" "bcast-window-2-np3" "bcast-slot-64-np4" "bcast-ack-interval-1-np5"
    "bcast-ack-interval-16-np4" "bcast-nack-0-np3" "bcast-max-bytes--1-np4" "bcast-max-bytes--1-np8"
    "bcast-max-bytes-0-np3" "bcast-single-copy-np2" "bcast-single-copy-np3" "bcast-single-copy-np4"
    "bcast-single-copy-refused-np3" "bcast-refused-default-limits-np2" "bcast-refused-default-limits-np4"
    "bcast-above-2gib-single-copy-np3" "bcast-above-2gib-window-np3" "bcast-above-2gib-two-level-np3"
    "reduce_ops-max-bytes--1-np4"
    "reduce_ops-parallel-np2" "reduce_ops-parallel-np3" "reduce_ops-parallel-np4" "reduce_ops-parallel-refused-ring-np3"
    "reduce_ops-parallel-refused-ring-np5" "reduce_ops-parallel-refused-ring-slot-64-np4"
    "reduce_ops-parallel-refused-no-ring-np3"
    "noncommutative-tuned-ring-chain-np2" "noncommutative-tuned-ring-chain-np3" "noncommutative-tuned-ring-chain-np4"
    "noncommutative-tuned-ring-chain-parallel-refused-np3" "noncommutative-np2" "noncommutative-np3" "noncommutative-np4"
    "bad-bcast-window-etc-np4"
    "bad-bcast-slot-size-1-np3" "shm-killed-creator-reaped-np2"
    "nested-setup-coll-basic-np2" "nested-setup-coll-basic-np3" "nested-setup-barrier-coll-basic-np3"
    "nested-setup-tuned-allgather-1-np3"
    "mismatch-barrier-radix-np4" "mismatch-bcast-window-np4" "mismatch-allreduce-max-bytes-np4"
    "mismatch-transport-np3" "mismatch-udp-port-range-np3" "mismatch-pretend-nodes-np4" "mismatch-autotune-np4" "mismatch-barrier-radix-as-set-np4" "mismatch-hierarchy-queue-pairs-max-np4"
    "claimed-on-some-ranks-only-np3"
    "panic-allreduce-3-np3" "panic-barrier-1-np2" "panic-bcast-2-np3" "pack-failure-np3"
    "module-size-mismatch-np3" "thread-multiple-np2" "thread-multiple-np3" "thread-multiple-np4"
    "thread-multiple-pretend-nodes-np4" "thread-multiple-udp-np2" "thread-multiple-two-threads-one-comm-np2"
    "mpi4py-collectives-np2" "mpi4py-collectives-np3"
    "thread-multiple-killed-thread-np3"
)
if [ "$MODE" = stock ]; then
    for t in "${COMP_TESTS[@]}"; do skip "$t" "needs the component"; done
else
    # 4. np=1: size-1 communicators are not claimed (served also checks that
    #    every size-1 communicator has its "not claimed" line)
    CHECKS=("$SERVED_CHECK" 'ev:any(events("comm_not_claimed"); .size == 1)')
    run_test "np1-not-claimed-size1" 1 ok "${V[@]}" -- comm_lifecycle -l 20

    # 5. verbose 0 prints nothing
    CHECKS=(quiet); run_test "default-verbose-is-silent" 2 ok -- coll_mix -i "$CM_I"

    # 5a. structured events (docs/events.md) of a known run at verbose 0:
    #     nothing printed; every rank's file has only schema-1 lines; comm 0
    #     claimed, ready over shm with one agreed barrier radix and window,
    #     and freed once per rank; MPI_COMM_SELF declined; and (events) the
    #     counts at free equal the calls the program made, per communicator
    #     and collective, with a hand-over event for each kind expected
    EVENTS_KNOWN='all(.[]; .v == 1)
        and ([.[] | select(.event == "comm_claimed" and .cid == 0)] | length == 3)
        and ([.[] | select(.event == "comm_freed" and .cid == 0)] | length == 3)
        and ([.[] | select(.event == "comm_ready" and .cid == 0)]
            | length == 3 and all(.[]; .transport == "shm" and .size == 3)
              and (map(.barrier.radix) | unique | length == 1)
              and (map(.window_bytes) | unique | length == 1 and .[0] > 0))
        and ([.[] | select(.event == "comm_not_claimed" and .size == 1)] | length >= 3)'
    CHECKS=(quiet events "events-file:$EVENTS_KNOWN")
    run_test "events-known-run-coll_mix-np3" 3 ok -- coll_mix -i "$CM_I"
    CHECKS=(events "events-file:$EVENTS_KNOWN"); run_test "events-known-run-reduce_ops-np3" 3 ok -- reduce_ops "${RO_PARAM[@]}"
    # 5b. an events file coll rdma must not create: a link planted where
    #     each rank's file would go (rank 0's to a file, rank 1's dangling):
    #     both ranks say so, write nothing through the links, and the run
    #     goes on right
    EVENTS_PLANTED=$LOGROOT/events-planted
    if [ "$LIST" = 0 ]; then
        rm -rf "$EVENTS_PLANTED"
        mkdir -p "$EVENTS_PLANTED"
        echo keep >"$EVENTS_PLANTED/victim"
        ln -s victim "$EVENTS_PLANTED/ev.0"
        ln -s absent "$EVENTS_PLANTED/ev.1"
    fi
    CHECKS=("events-refused:$EVENTS_PLANTED")
    run_test "events-file-symlink-refused-np2" 2 ok --mca coll_rdma_events_file "$EVENTS_PLANTED/ev.%r" -- coll_mix -i "$CM_I"

    # 6. "--mca coll rdma" alone, and the component list README documents:
    #    under rdma alone coll rdma opens the other installed coll components,
    #    so every collective entry point (blocking, non-blocking,
    #    neighborhood, intercommunicators, size-1 communicators) is provided
    #    by Open MPI's own components while coll rdma serves its four.
    #    Only its own counts are checked: the other components call its
    #    collectives too (e.g. reduce_scatter_block as reduce + scatterv),
    #    which the program cannot count.
    PLAIN=("says-re:coll:rdma: --mca coll rdma: also opened [a-z, ]*(basic|libnbc)[a-z, ]* underneath coll rdma"
        "nowarn:coll:rdma:.*(warning|error)" 'ev:[events("comm_unavailable")] | length == 0')
    PLAIN_SERVED=()
    for kind in barrier bcast allreduce reduce; do
        PLAIN_SERVED+=("ev:every_rank_served(0; \"$kind\"; \"shm\")")
    done
    for np in 2 4; do
        CHECKS=("${PLAIN[@]}" "${PLAIN_SERVED[@]}")
        run_test "plain-coll-rdma-every-collective-np$np" "$np" ok --mca coll rdma "${V[@]}" -- every_collective -i 3
    done
    #    A list naming other components is the user's choice, taken as typed.
    CHECKS=("nore:also opened" "${PLAIN[@]:1}" "${PLAIN_SERVED[@]}")
    run_test "readme-coll-list-every-collective-np4" 4 ok --mca coll rdma,tuned,libnbc,basic,inter,self "${V[@]}" \
        -- every_collective -i 3
    # the core programs, with the exact counts of section 1
    CHECKS=("${PLAIN[@]}" "${SERVED[@]}")
    run_test "plain-coll-rdma-barrier_order-np3" 3 ok --mca coll rdma "${V[@]}" -- barrier_order -n "$BO_N" -d 200
    CHECKS=("${PLAIN[@]}" "${SERVED[@]}")
    run_test "plain-coll-rdma-reduce_ops-np3" 3 ok --mca coll rdma "${V[@]}" -- reduce_ops "${RO[@]}"
    CHECKS=("${PLAIN[@]}" "${SERVED[@]}" "$BC_REASON" "$BC_PATHS")
    run_test "plain-coll-rdma-bcast-np3" 3 ok --mca coll rdma "${V[@]}" -- bcast "${BC[@]}" "${BC_E[@]}"
    # a coll component that cannot be loaded (a file that is no library, in a
    #    directory of the component path) is named in a warning; the others
    #    carry on (the path is set in each rank's environment by the wrapper,
    #    after mpirun's own --mca)
    broken_dir=$BUILD/tests/broken-component
    mkdir -p "$broken_dir"
    printf 'not a shared library\n' >"$broken_dir/mca_coll_broken.so"
    CHECKS=("${PLAIN[0]}" "${PLAIN_SERVED[@]}"
        "says:coll:rdma: warning: coll component broken could not be loaded; carrying on without it")
    RUN_WRAPPER=(env "OMPI_MCA_mca_base_component_path=$COMPONENT_PATH:$broken_dir")
    run_test "plain-coll-rdma-broken-component-np2" 2 ok --mca coll rdma "${V[@]}" -- every_collective -i 1
    CHECKS=("${SERVED[@]}" "nore:also opened")
    run_test "exclusion-list-untouched-np2" 2 ok --mca coll '^han,adapt' "${V[@]}" -- coll_mix -i 20

    # 6a. coll han (priority 35 in Open MPI 5.0, above tuned; 0 in 4.1) and
    #     coll rdma (40): by default coll rdma serves its four collectives
    #     and han sits underneath; with han above coll rdma
    #     (coll_han_priority 50) nothing breaks either. On one node han
    #     steps aside on every communicator (it only splits communicators
    #     that span nodes): Open MPI 5 says so at coll_base_verbose 10,
    #     which these tests check, so that a han that starts serving
    #     single-node communicators is noticed (README, "coll han").
    HAN=()
    [ "$OMPI_MAJOR" -ge 5 ] && HAN=("re:coll:han:comm_query \(0/MPI_COMM_WORLD\): comm has only local processes; disqualifying myself")
    HAN_VERBOSE=(--mca coll_base_verbose 10)
    [ "$OMPI_MAJOR" -ge 5 ] || HAN_VERBOSE=()
    CHECKS=("${SERVED[@]}" "${HAN[@]}")
    run_test "han-default-priority-np4" 4 ok "${HAN_VERBOSE[@]}" "${V[@]}" -- coll_mix -i 20
    CHECKS=("${SERVED[@]}" "${HAN[@]}")
    run_test "han-priority-50-np4" 4 ok --mca coll_han_priority 50 "${HAN_VERBOSE[@]}" "${V[@]}" -- coll_mix -i 20
    CHECKS=("${PLAIN[@]}" "${PLAIN_SERVED[@]}" "${HAN[@]}")
    run_test "han-priority-50-plain-coll-rdma-np4" 4 ok --mca coll rdma --mca coll_han_priority 50 \
        "${HAN_VERBOSE[@]}" "${V[@]}" -- every_collective -i 2

    # 7. valid parameter values
    for spec in 1:5 2:5 3:8 7:8 64:5; do
        radix=${spec%:*} np=${spec#*:}
        CHECKS=("$SERVED_CHECK" "ev:every_rank_ready(0; .transport == \"shm\" and .barrier.radix == $radix)")
        run_test "radix-$radix-np$np" "$np" ok --mca coll_rdma_barrier_radix "$radix" "${V[@]}" \
            -- barrier_order -n 3000 -d 100
    done
    # 7a. coll_rdma_autotune (issue 14, part 4): the barriers (and the
    #     allreduces around them: the trial agrees through the same
    #     allreduce) stay right, the measured table appears once per
    #     communicator, and every rank keeps the same radix
    for np in 2 4; do
        CHECKS=("${SERVED[@]}" autotune)
        run_test "autotune-np$np" "$np" ok --mca coll_rdma_autotune 1 "${V[@]}" -- barrier_order -n 3000 -d 100
    done
    CHECKS=("${SERVED[@]}" autotune)
    run_test "autotune-coll_mix-np4" 4 ok --mca coll_rdma_autotune 1 --mca coll_rdma_autotune_calls 2 "${V[@]}" -- coll_mix -i 100
    # (most of its communicators are freed during their trial: the closing
    # barrier runs the candidate whose turn it is)
    CHECKS=("${SERVED[@]}" autotune)
    run_test "autotune-comm_lifecycle-np4" 4 ok --mca coll_rdma_autotune 1 --mca coll_rdma_autotune_calls 1 "${V[@]}" \
        -- comm_lifecycle -l "$CL_L"
    # 7a'. per-rank memory at setup (issue 14, part 1): the line appears
    #     and its total is the shm segment's size by the layout's formula
    for np in 2 4; do
        CHECKS=("$SERVED_CHECK" memory)
        run_test "verbose-memory-np$np" "$np" ok "${V[@]}" -- barrier_order -n 100
    done
    # 7b. the allreduce degree autotune: results right (reduce_ops and
    #     the non-commutative ops against their serial references) with
    #     the trial run before the first tree-served call; at np 2 there is
    #     one tree, so nothing is measured; at 3 and 4 the table appears
    #     and every rank keeps the one degree it marks
    for np in 2 3 4; do
        if [ "$np" = 2 ]; then
            AT=('ev:[events("autotune_plan") | on(0) | select(.collective == "allreduce") | .plan] == ["nothing to measure"]'
                'ev:[events("autotune") | select(.collective == "allreduce")] | length == 0')
        else
            AT=('ev:[events("autotune_plan") | on(0) | select(.collective == "allreduce")]
                    | length == 1 and .[0].plan == "trial" and .[0].candidates[0] == 1 and (.[0].candidates | length >= 2)'
                'ev:autotune_agreed("allreduce"; true)')
        fi
        CHECKS=("${SERVED[@]}" autotune autotune-allreduce "${AT[@]}")
        run_test "autotune-reduce_ops-np$np" "$np" ok --mca coll_rdma_autotune 1 --mca coll_rdma_autotune_calls 3 "${V[@]}" \
            -- reduce_ops "${RO_PARAM[@]}"
        CHECKS=("${SERVED[@]}" autotune-allreduce "${AT[@]}")
        run_test "autotune-noncommutative-np$np" "$np" ok --mca coll_rdma_autotune 1 "${V[@]}" -- noncommutative
    done
    CHECKS=("$SERVED_CHECK"); run_test "spin-polls-0-np4" 4 ok --mca coll_rdma_spin_polls 0 "${V[@]}" -- barrier_order -n 2000
    CHECKS=("$SERVED_CHECK"); run_test "spin-polls-1000-np2" 2 ok --mca coll_rdma_spin_polls 1000 "${V[@]}" -- barrier_order -n 2000
    CHECKS=("$SERVED_CHECK"); run_test "transport-shm-np3" 3 ok --mca coll_rdma_transport shm "${V[@]}" -- comm_lifecycle -l 200

    # 8. stall warnings: one rank arrives late. The warnings must appear,
    #    and the generic checks of normal runs (SERVED; quiet at verbose 0)
    #    must tolerate them, since a loaded machine makes legitimate waits
    #    that long, while still refusing any other warning
    #    (6 s late where the warning is required: a wait looks at the clock
    #    only every few hundred polls, and on a loaded machine those polls
    #    alone can take seconds)
    CHECKS=("${SERVED[@]}" "says-re:$STALL_WARNING_RE")
    run_test "stall-warning-after-1s" 3 ok --mca coll_rdma_stall_warning 1 "${V[@]}" -- barrier_order -n 200 -s 6
    CHECKS=(quiet "says-re:$STALL_WARNING_RE")
    run_test "stall-warning-at-verbose-0-is-quiet-enough" 3 ok --mca coll_rdma_stall_warning 1 -- barrier_order -n 200 -s 6
    CHECKS=("$SERVED_CHECK" "nore:coll:rdma:.*warning")
    run_test "stall-warning-0-never" 3 ok --mca coll_rdma_stall_warning 0 "${V[@]}" -- barrier_order -n 200 -s 3

    # 8b. a rank that never comes (it sleeps 90 s before its second
    #     barrier): with a 2 s fault timeout the others' barrier fails with
    #     MPI_ERR_OTHER, saying what it waited for, and the job ends long
    #     before the sleeper would have woken (Open MPI's own report of the
    #     error, "MPI_ERR_OTHER", is help text that mpirun now and then loses
    #     while the job aborts: "ORTE_ERROR_LOG: ... in file util/show_help.c"
    #     stands in its place then)
    CHECKS=("says-re:coll:rdma: error: comm 0 rank [0-9]+: barrier failed: .*gave up after [0-9.]+ s without progress waiting for .*barrier [0-9]+, round [0-9]+: notification from rank [0-9]+.*the job looks hung"
        "re:MPI_ERR_OTHER|ORTE_ERROR_LOG: .*show_help\\.c" "within:60")
    run_test "fault-timeout-2s-ends-a-hung-barrier" 3 refused --mca coll_rdma_fault_timeout_s 2 "${V[@]}" \
        -- barrier_order -n 200 -s 90

    # 9. bad input: the documented warning, then the automatic choice
    CHECKS=("$SERVED_CHECK" "says:coll:rdma: warning: coll_rdma_barrier_radix=-3 is invalid (0 = automatic, or 1..=64); using the automatic choice")
    run_test "bad-radix--3" 4 ok --mca coll_rdma_barrier_radix -3 "${V[@]}" -- coll_mix -i 50
    CHECKS=("$SERVED_CHECK" "says:coll:rdma: warning: coll_rdma_barrier_radix=999 is invalid (0 = automatic, or 1..=64); using the automatic choice")
    run_test "bad-radix-999" 4 ok --mca coll_rdma_barrier_radix 999 "${V[@]}" -- coll_mix -i 50
    CHECKS=("$SERVED_CHECK" "says:coll:rdma: warning: coll_rdma_transport=\"bogus\" is unknown (auto, shm, verbs, udp); using auto")
    run_test "bad-transport-bogus" 4 ok --mca coll_rdma_transport bogus "${V[@]}" -- coll_mix -i 50
    # 9b. verbs forced on a machine without an RDMA device, and two
    #     pretended nodes (shared memory within them would work, verbs
    #     between them cannot, and no rank may go half way): every rank says
    #     why, every collective goes to the module underneath, results right
    without_device_test "transport-verbs-without-device-np3" 3 "no RDMA device found" coll_rdma_transport verbs
    without_device_test "pretend-nodes-without-device-np4" 4 "verbs between the nodes failed: no RDMA device found" \
        coll_rdma_test_pretend_nodes 2
    # 9b''. /dev/shm too small for the shared segment (issue 33): a 3 MiB
    #     tmpfs on /dev/shm in a private mount namespace, Open MPI's own
    #     shared memory kept in /tmp. The segment of 4 ranks is 3.3 MiB
    #     with the default windows: its header and windows (2.3 MiB, all
    #     that was reserved before) fit, its 16 rings of 66 KiB do not.
    #     Every rank says why, naming /dev/shm, and hands every call on it
    #     to the module underneath; results right, no SIGBUS (before,
    #     setup succeeded with rings the tmpfs could not back). The
    #     program's smaller communicators may fit, and are served
    if [ "$(id -u)" = 0 ] && unshare -m sh -c 'mount -t tmpfs -o size=3m tmpfs /dev/shm' 2>/dev/null; then
        MPIRUN_WRAPPER=(unshare -m --propagation private sh -c 'mount -t tmpfs -o size=3m tmpfs /dev/shm && exec "$@"' small-dev-shm)
        CHECKS=('ev:unavailable_everywhere(0; "transport"; "posix_fallocate failed: No space left on device.*/dev/shm has no room")')
        # (Open MPI 4 names its shared-memory BTL vader, 5 sm; each ignores the other's)
        run_test "full-dev-shm-falls-back-np4" 4 ok --mca btl_vader_backing_directory /tmp --mca btl_sm_backing_directory /tmp \
            "${V[@]}" -- coll_mix -i 20
    else
        skip "full-dev-shm-falls-back-np4" "no private mount namespace with a tmpfs here (needs root and unshare -m)"
    fi
    # 9b'. the two-level schedules (coll_rdma_hierarchy auto) over pretended
    #     nodes on shared memory (coll_rdma_transport shm: the hybrid's
    #     pretended nodes need an RDMA device, the Soft-RoCE step covers
    #     them): np 5 as nodes of 3 and 2, np 4 as nodes of 2, 1 and 1;
    #     barrier order, the other collectives and many communicators
    #     (split ones of 1-3 ranks, each its own node when there are more
    #     pretended nodes than ranks) right, and verbose 1 says which
    #     barrier serves; coll_rdma_hierarchy flat puts the flat ones back
    CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .barrier.two_level)'
        'ev:hierarchy_of(0; 0) | .levels == "two-level" and .nodes == 2 and .node_leader == 0 and .node_ranks == 3'
        'ev:hierarchy_of(0; 4) | .levels == "two-level" and .nodes == 2 and .node_leader == 3 and .node_ranks == 2')
    run_test "two-level-barrier_order-pretend-nodes-np5" 5 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
        -- barrier_order -n "$BO_N"
    CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .barrier.two_level)'
        'ev:[events("hierarchy") | on(0)] | length == $np and all(.[]; .levels == "two-level" and .nodes == 3 and .node_ranks <= 2)')
    run_test "two-level-coll_mix-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 3 "${V[@]}" \
        -- coll_mix -i "$CM_I"
    CHECKS=("${SERVED[@]}" 'ev:any(events("comm_ready"); .barrier.two_level)')
    run_test "two-level-comm_lifecycle-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
        -- comm_lifecycle -l "$CL_L"
    #     allreduce and reduce on the two-level tree (every op and datatype,
    #     non-commutative user ops in rank order), with the default 8 KiB
    #     segments and with 64-byte ones (many segments through every level)
    CHECKS=("${SERVED[@]}" 'ev:hierarchy_of(0; 0) | .nodes == 2 and .two_level.allreduce'
        'ev:hierarchy_of(0; 4) | .two_level.reduce' 'ev:every_rank_ready(0; .allreduce.two_level)')
    run_test "two-level-reduce_ops-pretend-nodes-np5" 5 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
        -- reduce_ops "${RO_PARAM[@]}"
    CHECKS=("${SERVED[@]}" 'ev:hierarchy_of(0; 3) | .nodes == 3 and .two_level.allreduce'
        'ev:every_rank_ready(0; .allreduce.two_level and .allreduce.degree == 1)')
    run_test "two-level-reduce_ops-segments-64-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 3 \
        --mca coll_rdma_allreduce_degree 1 --mca coll_rdma_allreduce_segment_size 64 --mca coll_rdma_reduce_segment_size 64 "${V[@]}" \
        -- reduce_ops "${RO_PARAM[@]}"
    #     bcast in two levels (the root's node from the root, the leaders
    #     from the root's leader, the other nodes from their leader; every
    #     level over shared windows, since the shm transport's multicast is
    #     its window): every root, size and datatype phase of the bcast
    #     program, with single copy from 16 KiB within each level and, with
    #     cross-memory reads refused and a 2-slot window of 256 bytes, with
    #     every message cut into many pieces through both levels
    CHECKS=("${SERVED[@]}" "$BC_REASON"
        'ev:hierarchy_of(0; 0) | .nodes == 2 and .node_leader == 0 and .two_level.bcast'
        'ev:hierarchy_of(0; 4) | .node_leader != 4 and .two_level.bcast'
        'ev:[events("hierarchy") | on(0)] | length == $np and all(.[]; .two_level.bcast)')
    run_test "two-level-bcast-pretend-nodes-np5" 5 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
        -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
    CHECKS=("${SERVED[@]}" 'ev:hierarchy_of(0; 3) | .nodes == 3 and .two_level.bcast')
    run_test "two-level-bcast-window-2-slot-256-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 3 \
        --mca coll_rdma_test_pretend_no_cross_memory 1 --mca coll_rdma_bcast_window 2 --mca coll_rdma_bcast_ack_interval 2 \
        --mca coll_rdma_bcast_slot_size 256 "${V[@]}" \
        -- bcast -s 256 -w 2 -n 300 -L 50
    #     (coll_rdma_autotune times flat radices only: on a two-level
    #     communicator it says it does not run)
    CHECKS=("${SERVED[@]}" 'ev:[events("autotune_plan") | on(0) | select(.collective == "barrier") | .plan] == ["two-level"]'
        'ev:[events("autotune") | select(.collective == "barrier")] | length == 0')
    run_test "two-level-autotune-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 \
        --mca coll_rdma_autotune 1 "${V[@]}" -- barrier_order -n 2000
    CHECKS=("${SERVED[@]}"
        'ev:[events("hierarchy")] | length > 0 and all(.[]; .levels == "flat" and .reason == "coll_rdma_hierarchy=flat")'
        'ev:all(events("comm_ready"); (.barrier.two_level or .allreduce.two_level) | not)')
    run_test "hierarchy-flat-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 \
        --mca coll_rdma_hierarchy flat "${V[@]}" -- barrier_order -n 2000
    #     a job on one node (as its launcher says) lays out no bcast node
    #     stage and no two-level barrier: with the default
    #     coll_rdma_hierarchy=auto its window is smaller than where nodes are
    #     pretended (the node stage more than doubled the bcast region)
    CHECKS=("${SERVED[@]}")
    run_test "window-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
        -- coll_mix -i 20
    CHECKS=("${SERVED[@]}" "smaller-window-than:window-pretend-nodes-np4")
    run_test "window-one-node-hierarchy-auto-np4" 4 ok --mca coll_rdma_transport shm "${V[@]}" -- coll_mix -i 20
    CHECKS=("$SERVED_CHECK" "says:coll:rdma: warning: coll_rdma_hierarchy=\"bogus\" is unknown (auto, flat); using auto")
    run_test "bad-hierarchy-bogus" 3 ok --mca coll_rdma_hierarchy bogus "${V[@]}" -- coll_mix -i 20
    # 9c. udp forced where its setup cannot work: an interface that does
    #     not exist (this rank's own failure), and ranks on different hosts'
    #     views (rank 0 on loopback, rank 1 on the outside interface: setup
    #     refuses a loopback address unless every rank has it). Every rank
    #     falls back alike, rank 0 warns why at verbosity 0, results right
    udp_fallback_test "transport-udp-missing-interface-np3" 3 "[0-9]+" \
        'coll_rdma_udp_interface=no-such-if0: no interface named "no-such-if0" with an IPv4 address' \
        --mca coll_rdma_udp_interface no-such-if0
    # (communicators of the even or of the odd ranks alone share one
    # address, so udp serves them)
    # (the source address of the route towards the group range; where there
    # is no `ip`, as in the Open MPI 5 chroot, the first address that
    # `hostname -I` lists)
    if command -v ip >/dev/null; then
        OUTSIDE_ADDRESS=$(ip -4 route get 239.78.0.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1 || true)
    else
        OUTSIDE_ADDRESS=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+(\.[0-9]+){3}$' | grep -v '^127\.' | head -1 || true)
    fi
    if [ -n "$OUTSIDE_ADDRESS" ] && [ "$OUTSIDE_ADDRESS" != 127.0.0.1 ]; then
        RUN_WRAPPER=("$ROOT/ci/per-rank-mca.sh" coll_rdma_udp_interface 127.0.0.1 "$OUTSIDE_ADDRESS")
        udp_fallback_test "transport-udp-loopback-mismatch-np4" 4 0 \
            "rank 1 is on ${OUTSIDE_ADDRESS//./\\.} and rank 0 on 127\\.0\\.0\\.1: a loopback address reaches only its own host"
    else
        skip "transport-udp-loopback-mismatch-np4" "no route towards 239.78.0.0/16 beyond loopback here"
    fi
    # 10. version mismatch: coll rdma steps aside, the job still runs correctly
    #    (the contract says "coll:rdma: built against ..."; the component
    #    prints it as a warning, "coll:rdma: warning: built against ...": both pass)
    CHECKS=(noserve "says-re:coll:rdma: (warning: )?built against Open MPI ${OMPI_VERSION//./\\.} but running in Open MPI 9\\.9\\.9; coll rdma disqualifies itself")
    run_test "version-mismatch-9.9.9" 4 ok --mca coll_rdma_test_running_version 9.9.9 "${V[@]}" \
        -- coll_mix -i 50

    # 11. allreduce/reduce parameters: every result still exact, the served
    #     and fallback counts as the contract says (reduce_ops reads the
    #     limits with MPI_T and classifies each call)
    for spec in 1:5 2:8 3:8 7:8; do
        k=${spec%:*} np=${spec#*:}
        CHECKS=("${SERVED[@]}" "ev:every_rank_ready(0; .transport == \"shm\" and .allreduce.degree == $k)")
        run_test "allreduce-degree-$k-np$np" "$np" ok \
            --mca coll_rdma_allreduce_degree "$k" "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
    done
    # the tree alone, also for the smallest messages
    CHECKS=("${SERVED[@]}"); run_test "allreduce-exchange-off-np4" 4 ok \
        --mca coll_rdma_allreduce_exchange_max 0 "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
    # many pipelined segments; 100 is a multiple of no element size used
    CHECKS=("${SERVED[@]}"); run_test "allreduce-segment-64-np4" 4 ok \
        --mca coll_rdma_allreduce_segment_size 64 "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
    CHECKS=("${SERVED[@]}"); run_test "allreduce-segment-100-np3" 3 ok \
        --mca coll_rdma_allreduce_segment_size 100 "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
    CHECKS=("${SERVED[@]}"); run_test "allreduce-degree-2-segment-64-np5" 5 ok \
        --mca coll_rdma_allreduce_degree 2 --mca coll_rdma_allreduce_segment_size 64 \
        --mca coll_rdma_allreduce_exchange_max 0 "${V[@]}" -- reduce_ops "${RO_PARAM[@]}"
    # size limits: the larger calls go to the module underneath, and it is said
    CHECKS=("${SERVED[@]}" 'ev:handed_over_above("coll_rdma_allreduce_max_bytes")'
        'ev:handed_over("reduce"; .category == "size limit") | not')
    run_test "allreduce-max-bytes-1024-np4" 4 ok --mca coll_rdma_allreduce_max_bytes 1024 "${V[@]}" \
        -- reduce_ops "${RO_PARAM[@]}"
    CHECKS=("${SERVED[@]}" 'ev:handed_over_above("coll_rdma_reduce_max_bytes")'
        'ev:handed_over("allreduce"; .category == "size limit") | not')
    run_test "reduce-max-bytes-1024-np4" 4 ok --mca coll_rdma_reduce_max_bytes 1024 "${V[@]}" \
        -- reduce_ops "${RO_PARAM[@]}"
    # 0: every call with data goes to the fallback (count 0 never reaches coll)
    CHECKS=("${SERVED[@]}" 'ev:handed_over_above("coll_rdma_allreduce_max_bytes")')
    run_test "allreduce-max-bytes-0-np3" 3 ok --mca coll_rdma_allreduce_max_bytes 0 "${V[@]}" \
        -- reduce_ops "${RO_PARAM[@]}"
    # the large reductions natively too (reduce_ops' full counts, 100000)
    CHECKS=("${SERVED[@]}" 'ev:any(events("handover"); .category == "size limit") | not')
    run_test "reduce_ops-max-bytes--1-np4" 4 ok --mca coll_rdma_allreduce_max_bytes -1 \
        --mca coll_rdma_reduce_max_bytes -1 "${V[@]}" -- reduce_ops "${RO[@]}"
    # parallel reduction, with the default parameters: from 16 KiB
    # (allreduce) and 128 KiB (reduce) each rank reduces its slice of every
    # rank's input (process_vm_readv) and writes it into the gathering
    # ranks' buffers (process_vm_writev); reduce from 8 KiB to 128 KiB the
    # root reads and folds every input alone; below that the tree, so no
    # contiguous allreduce or reduce is handed over for its size (the test
    # library counts which calls must be): every op and datatype, in place,
    # every root, non-commutative user ops, and one more count of 2000000
    # (16 MiB of doubles, 32 MiB of matrices); non-contiguous datatypes
    # still go to the module underneath (counted)
    for np in 2 3 4; do
        CHECKS=("${SERVED[@]}" 'ev:any(events("handover"); .category == "size limit") | not'
            'ev:rank0_ready(0; .allreduce.parallel_min_bytes == 16384 and .reduce.parallel_min_bytes == 8192
                and .reduce.slices_min_bytes == 131072)')
        run_test "reduce_ops-parallel-np$np" "$np" ok "${V[@]}" -- reduce_ops -L 2000000 -x 20
    done
    PR=(--mca coll_rdma_allreduce_parallel_min_bytes 16384 --mca coll_rdma_reduce_parallel_min_bytes 8192)
    # process_vm_readv refused (pretended on every rank), as across nodes:
    # commutative ops from 16 KiB (allreduce) and 8 KiB (reduce) go around
    # the ring (reduce-scatter, then allgather, between neighbours), so
    # none is handed over for its size; the others keep the tree. Every
    # op and datatype, every root, in place, 16 MiB of doubles.
    CHECKS=("${SERVED[@]}" 'ev:any(events("handover"); .category == "size limit") | not'
        'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null)'
        'ev:rank0_ready(0; .allreduce.ring.from_bytes == 16384 and .reduce.ring.from_bytes == 8192)')
    run_test "reduce_ops-parallel-refused-ring-np3" 3 ok "${PR[@]}" --mca coll_rdma_test_pretend_no_cross_memory 1 \
        "${V[@]}" -- reduce_ops -L 2000000 -x 10
    CHECKS=("${SERVED[@]}" 'ev:any(events("handover"); .category == "size limit") | not'
        'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null)'
        'ev:rank0_ready(0; .allreduce.ring.from_bytes == 16384)')
    run_test "reduce_ops-parallel-refused-ring-np5" 5 ok "${PR[@]}" --mca coll_rdma_test_pretend_no_cross_memory 1 \
        "${V[@]}" -- reduce_ops -x 5
    # slots of 64 bytes: many segments a block, some element types longer
    # than half a slot, every result still exact
    CHECKS=("${SERVED[@]}" 'ev:any(events("handover"); .category == "size limit") | not'
        'ev:rank0_ready(0; .reads_peer_memory == false and .allreduce.ring.from_bytes == 16384 and .allreduce.ring.slot_bytes == 64)')
    run_test "reduce_ops-parallel-refused-ring-slot-64-np4" 4 ok "${PR[@]}" --mca coll_rdma_test_pretend_no_cross_memory 1 \
        --mca coll_rdma_ring_segment_size 64 "${V[@]}" -- reduce_ops -x 5
    # ... and with the ring turned off: the window up to the old limits, the
    # larger calls to the module underneath, saying why
    CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null)'
        'ev:every_rank_ready(0; .allreduce.ring == null and .reduce.ring == null and .allreduce.max_bytes != null)'
        'ev:handed_over_above("coll_rdma_allreduce_max_bytes")')
    run_test "reduce_ops-parallel-refused-no-ring-np3" 3 ok "${PR[@]}" --mca coll_rdma_test_pretend_no_cross_memory 1 \
        --mca coll_rdma_allreduce_ring_min_bytes -1 --mca coll_rdma_reduce_ring_min_bytes -1 "${V[@]}" -- reduce_ops -x 10

    # non-commutative user ops over lengths crossing every limit (1 element
    # to ~300 KiB), every root, in place, world and reversed order. tuned
    # told to use its ring allreduce and chain reduce does not keep the
    # canonical order for them, so coll rdma must serve every contiguous one
    # itself (none handed over for its size); the program checks each
    # result against a local fold in rank order.
    TUNED_UNORDERED=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4
        --mca coll_tuned_reduce_algorithm 2)
    for np in 2 3 4; do
        CHECKS=("${SERVED[@]}" 'ev:nothing_handed_over')
        run_test "noncommutative-tuned-ring-chain-np$np" "$np" ok "${TUNED_UNORDERED[@]}" "${V[@]}" -- noncommutative
    done
    # ... also where the parallel reduction is refused: the window's tree
    # serves every length (the size limits are for commutative ops only)
    CHECKS=("${SERVED[@]}" 'ev:nothing_handed_over' 'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null)')
    run_test "noncommutative-tuned-ring-chain-parallel-refused-np3" 3 ok "${TUNED_UNORDERED[@]}" \
        --mca coll_rdma_test_pretend_no_cross_memory 1 "${V[@]}" -- noncommutative
    # with tuned's own decisions (which keep the order for non-commutative
    # ops), plus a non-contiguous datatype: coll rdma cannot serve that one,
    # hands it over and says once per kind that the op is not commutative
    for np in 2 3 4; do
        CHECKS=("${SERVED[@]}"
            'ev:any(events("handover") | on(0) | of_rank(0); .collective == "allreduce" and .category == "datatype" and .commutative == false)'
            'ev:any(events("handover") | on(0) | of_rank(0); .collective == "reduce" and .category == "datatype" and .commutative == false)')
        run_test "noncommutative-np$np" "$np" ok "${V[@]}" -- noncommutative -n
    done

    # 12. bcast parameters: every byte still right, the counts as the
    #     contract says (bcast reads the slot size, window and limit with
    #     MPI_T and sizes its messages around the slot size). The window
    #     runs set the ACK interval too: it must not exceed the window, and
    #     its default (8) would be clamped with a warning.
    CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .transport == "shm" and .bcast.window_slots == 1 and .bcast.slot_bytes == 4096)')
    run_test "bcast-window-1-np4" 4 ok --mca coll_rdma_bcast_window 1 \
        --mca coll_rdma_bcast_ack_interval 1 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
    CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .transport == "shm" and .bcast.window_slots == 2 and .bcast.slot_bytes == 4096)')
    run_test "bcast-window-2-np3" 3 ok --mca coll_rdma_bcast_window 2 \
        --mca coll_rdma_bcast_ack_interval 2 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
    # many pieces per message (a 256 KiB bcast is 4096 of them)
    CHECKS=("${SERVED[@]}" 'ev:every_rank_ready(0; .transport == "shm" and .bcast.window_slots == 64 and .bcast.slot_bytes == 64)')
    run_test "bcast-slot-64-np4" 4 ok --mca coll_rdma_bcast_slot_size 64 "${V[@]}" \
        -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
    CHECKS=("${SERVED[@]}"); run_test "bcast-ack-interval-1-np5" 5 ok \
        --mca coll_rdma_bcast_ack_interval 1 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
    CHECKS=("${SERVED[@]}"); run_test "bcast-ack-interval-16-np4" 4 ok \
        --mca coll_rdma_bcast_ack_interval 16 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
    CHECKS=("${SERVED[@]}"); run_test "bcast-nack-0-np3" 3 ok \
        --mca coll_rdma_bcast_nack 0 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
    # no limit: everything natively, 1 MiB and 64 MiB included (bcast takes
    # the first of repeated options: -B 2 before BC_PARAM's -B)
    CHECKS=("${SERVED[@]}" "$BC_REASON")
    run_test "bcast-max-bytes--1-np4" 4 ok --mca coll_rdma_bcast_max_bytes -1 "${V[@]}" \
        -- bcast -B 2 "${BC_PARAM[@]}" "${BC_E[@]}"
    CHECKS=("${SERVED[@]}" "$BC_REASON")
    run_test "bcast-max-bytes--1-np8" 8 ok --mca coll_rdma_bcast_max_bytes -1 "${V[@]}" \
        -- bcast -n 300 -x 40 -L 50 -B 2 "${BC_E[@]}"
    # 0: every bcast with data that goes through the window to the module
    # underneath, saying why (the empty-datatype ones, 0 bytes, stay with coll
    # rdma, and so do those single copy serves: 16 KiB or more by default,
    # whose limit is coll_rdma_bcast_single_copy_max_bytes); no -E, since
    # the module underneath may make the root wait
    CHECKS=("${SERVED[@]}" 'ev:handed_over("bcast"; .limit_parameter == "coll_rdma_bcast_max_bytes" and .limit == 0)')
    run_test "bcast-max-bytes-0-np3" 3 ok --mca coll_rdma_bcast_max_bytes 0 "${V[@]}" \
        -- bcast "${BC_PARAM[@]}"
    # single copy: receivers read the root's buffer (process_vm_readv) for
    # every bcast of 16 KiB or more, the window below; neither path has a
    # limit, so every call is native: 1 MiB from every root, 64 MiB (-B 2),
    # odd sizes, non-contiguous datatypes (packed around the single copy)
    SC=(--mca coll_rdma_bcast_max_bytes -1 --mca coll_rdma_bcast_single_copy_min_bytes 16384)
    for np in 2 3 4; do
        CHECKS=("${SERVED[@]}" "$BC_REASON"
            'ev:every_rank_ready(0; .bcast.single_copy_min_bytes == 16384)')
        run_test "bcast-single-copy-np$np" "$np" ok "${SC[@]}" "${V[@]}" -- bcast -B 2 "${BC_PARAM[@]}" "${BC_E[@]}"
    done
    # every rank pretends process_vm_readv is refused: all fall back to the
    # window together, with the reason, and results are still right
    CHECKS=("${SERVED[@]}" "$BC_REASON" 
        'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null)')
    run_test "bcast-single-copy-refused-np3" 3 ok "${SC[@]}" --mca coll_rdma_test_pretend_no_cross_memory 1 \
        "${V[@]}" -- bcast -B 2 "${BC_PARAM[@]}" "${BC_E[@]}"
    # the same refusal with every bcast parameter at its default: the window
    # (copy in, copy out) serves every length, 1 MiB from every root and
    # 64 MiB included, and says so; every delivery checked by the program
    for np in 2 4; do
        CHECKS=("${SERVED[@]}" "$BC_REASON" 
            'ev:every_rank_ready(0; .reads_peer_memory == false and .allreduce.parallel_min_bytes == null and .bcast.single_copy_min_bytes == null and .bcast.max_bytes == null)')
        run_test "bcast-refused-default-limits-np$np" "$np" ok --mca coll_rdma_test_pretend_no_cross_memory 1 \
            "${V[@]}" -- bcast -B 2 "${BC_PARAM[@]}" "${BC_E[@]}"
    done
    # more bytes than a C int counts (2 GiB + 4 KiB from 3 ranks, one
    # buffer of about 2.2 GB each, 6.5 GB in all; 8 GiB free asked): contiguous
    # buffers everywhere are served natively, in one copy, through the
    # window and across pretend nodes; a receiver whose datatype is not
    # contiguous (it could not MPI_Pack them) makes every rank hand that
    # call over, naming it; every int checked
    for variant in single-copy window two-level; do
        case $variant in
            single-copy) HUGE=() HUGE_PATH='ev:every_rank_ready(0; .bcast.single_copy_min_bytes == 16384)' ;;
            window) HUGE=(--mca coll_rdma_test_pretend_no_cross_memory 1) HUGE_PATH='ev:every_rank_ready(0; .bcast.single_copy_min_bytes == null)' ;;
            two-level) HUGE=(--mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2)
                HUGE_PATH='ev:hierarchy_of(0; 0) | .nodes == 2 and .two_level.bcast' ;;
        esac
        if [ -n "$TRANSPORT$HOSTS" ]; then
            skip "bcast-above-2gib-$variant-np3" "shared memory on one machine only"
        elif [ "$(free_memory_kib)" -lt $((8 * 1024 * 1024)) ]; then
            skip "bcast-above-2gib-$variant-np3" "needs 8 GiB of free memory, $(($(free_memory_kib) / 1024)) MiB free"
        else
            CHECKS=("$HUGE_PATH" "nowarn:coll:rdma:.*warning"
                'ev:any(events("comm_freed") | on(0) | of_rank(0); .transport == "shm" and .calls.bcast == { "served": 2, "handed_over": 1 })'
                'ev:any(events("handover") | on(0) | of_rank(2); .collective == "bcast" and .category == "pack limit")')
            run_test "bcast-above-2gib-$variant-np3" 3 ok "${HUGE[@]}" "${V[@]}" -- bcast_huge
        fi
    done
    # bad values: the documented warning, then the clamped value or the
    # automatic choice; results still right
    CHECKS=("$SERVED_CHECK"
        "says:coll:rdma: warning: coll_rdma_bcast_window=0 is outside 1..=4096; using 1"
        "says-re:coll:rdma: warning: coll_rdma_bcast_ack_interval=0 is outside 1\.\.=[0-9]+; using 1\$"
        "says:coll:rdma: warning: coll_rdma_bcast_co_roots=-5 is invalid"
        "says:coll:rdma: warning: coll_rdma_bcast_timeout_ms=0 is outside 1..=2147483647; using 1"
        "says:coll:rdma: warning: coll_rdma_bcast_nack=7 is outside 0..=1; using 1"
        "says:coll:rdma: warning: coll_rdma_bcast_fragment_size=1 is outside 64..=1048576; using 64"
        'ev:every_rank_ready(0; .transport == "shm" and .bcast.window_slots == 1 and .bcast.slot_bytes == 4096)')
    run_test "bad-bcast-window-etc-np4" 4 ok --mca coll_rdma_bcast_window 0 \
        --mca coll_rdma_bcast_ack_interval 0 --mca coll_rdma_bcast_co_roots -5 \
        --mca coll_rdma_bcast_timeout_ms 0 --mca coll_rdma_bcast_nack 7 \
        --mca coll_rdma_bcast_fragment_size 1 "${V[@]}" -- bcast "${BC_PARAM[@]}" "${BC_E[@]}"
    # slot size 1 becomes 64 (bcast reads the raw 1 with MPI_T: -s 64 tells
    # it the size used); max_bytes -5 is invalid: the automatic choice, which
    # has no limit on shared memory
    CHECKS=("$SERVED_CHECK"
        "says:coll:rdma: warning: coll_rdma_bcast_slot_size=1 is outside 64..=1048576; using 64"
        "says:coll:rdma: warning: coll_rdma_bcast_max_bytes=-5 is invalid"
        'ev:every_rank_ready(0; .transport == "shm" and .bcast.window_slots == 64 and .bcast.slot_bytes == 64)'
        "$BC_REASON")
    run_test "bad-bcast-slot-size-1-np3" 3 ok --mca coll_rdma_bcast_slot_size 1 \
        --mca coll_rdma_bcast_max_bytes -5 "${V[@]}" -- bcast -s 64 "${BC_PARAM[@]}" "${BC_E[@]}"

    # 13. a setup killed at its worst moment leaks nothing past the next job
    killed_creator_test "shm-killed-creator-reaped-np2"

    # 14. the saved allgather calls back into the communicator during our
    #     setup (basic's allgather is gather + the communicator's bcast, which
    #     is ours; so is tuned's algorithm 1): the nested call must go to the
    #     module underneath, not wait for the setup it is part of. Barriers
    #     are counted exactly; the other counts include the calls the module
    #     underneath makes through the communicator, so only "served" is checked.
    NESTED=('ev:every_rank_served(0; "barrier"; "shm")'
        'ev:all(events("comm_freed") | on(0); .transport == "shm" and .calls.bcast.served > 0)'
        "nowarn:coll:rdma:.*(warning|error)" 'ev:[events("comm_unavailable")] | length == 0')
    for np in 2 3; do
        CHECKS=("${NESTED[@]}"); run_test "nested-setup-coll-basic-np$np" "$np" ok --mca coll rdma,libnbc,basic,self \
            "${V[@]}" -- coll_mix -i 20
    done
    CHECKS=("${NESTED[0]}" "nowarn:coll:rdma:.*(warning|error)"); run_test "nested-setup-barrier-coll-basic-np3" 3 ok \
        --mca coll rdma,libnbc,basic,self "${V[@]}" -- barrier_order -n 2000
    CHECKS=("${NESTED[@]}"); run_test "nested-setup-tuned-allgather-1-np3" 3 ok --mca coll_tuned_use_dynamic_rules 1 \
        --mca coll_tuned_allgather_algorithm 1 "${V[@]}" -- coll_mix -i 20

    # 15. ranks that disagree on a setting the protocols share (set per rank
    #     through the environment, even ranks first): every rank hands over,
    #     results stay right, and rank 0 warns once per communicator, naming it
    mismatch_test() {  # NAME NP PARAM EVEN ODD WARNING-RE PROGRAM ARGS...
        local name=$1 np=$2 param=$3 even=$4 odd=$5 warning=$6
        shift 6
        # (the wording a user must read: rank 0's warning naming the setting)
        CHECKS=("says-re:coll:rdma: warning: comm 0 rank 0: ranks differ in settings the protocols must share: .*$warning.*; collectives fall back to the module underneath"
            'ev:[events("comm_unavailable") | on(0)] | length == $np and all(.[]; .stage == "agreement")'
            'ev:[events("comm_freed") | on(0)] | length == $np and all(.[]; .transport == "no transport" and all(.calls[]; .served == 0))')
        RUN_WRAPPER=("$ROOT/ci/per-rank-mca.sh" "$param" "$even" "$odd")
        run_test "$name" "$np" ok "${V[@]}" -- "$@"
    }
    mismatch_test "mismatch-barrier-radix-np4" 4 coll_rdma_barrier_radix 3 1 \
        "coll_rdma_barrier_radix \(3 at rank 0, 1 at rank 1\)" barrier_order -n 3000
    # (-w: the program sizes its late-receiver phase by the window; it must
    # be the same on every rank)
    mismatch_test "mismatch-bcast-window-np4" 4 coll_rdma_bcast_window 64 65 \
        "coll_rdma_bcast_window \(64 at rank 0, 65 at rank 1\)" bcast -w 64 -n 300 -B 1 -L 50 -x 40
    mismatch_test "mismatch-allreduce-max-bytes-np4" 4 coll_rdma_allreduce_max_bytes 16384 1024 \
        "coll_rdma_allreduce_max_bytes \(16384 at rank 0, 1024 at rank 1\)" reduce_ops "${RO_PARAM[@]}"
    mismatch_test "mismatch-transport-np3" 3 coll_rdma_transport shm auto \
        "coll_rdma_transport \(0 auto, 1 shm, 2 verbs, 3 udp\) \(1 at rank 0, 0 at rank 1\)" coll_mix -i 20
    # (a udp parameter differs: every rank falls back before any udp
    # setup, which would otherwise derive different ports)
    mismatch_test "mismatch-udp-port-range-np3" 3 coll_rdma_udp_port_range 24000-24999 30000-30099 \
        "coll_rdma_udp_port_range \(first\) \(24000 at rank 0, 30000 at rank 1\); coll_rdma_udp_port_range \(ports\) \(1000 at rank 0, 100 at rank 1\)" \
        coll_mix -i 20
    mismatch_test "mismatch-pretend-nodes-np4" 4 coll_rdma_test_pretend_nodes 0 2 \
        "coll_rdma_test_pretend_nodes \(1 at rank 0, 2 at rank 1\)" coll_mix -i 20
    mismatch_test "mismatch-hierarchy-np4" 4 coll_rdma_hierarchy auto flat \
        "coll_rdma_hierarchy \(0 auto, 1 flat\) \(0 at rank 0, 1 at rank 1\)" coll_mix -i 20
    # (radix 3 is also the model's pick for 4 ranks: the flat radices agree,
    #  but a two-level barrier's leaders would choose theirs differently)
    mismatch_test "mismatch-barrier-radix-as-set-np4" 4 coll_rdma_barrier_radix 3 0 \
        "coll_rdma_barrier_radix as set \(0 automatic\), with coll_rdma_hierarchy auto \(3 at rank 0, 0 at rank 1\)" coll_mix -i 20
    # (which pairs of ranks connect across nodes decides which queue
    #  pairs each rank creates: compared wherever the hierarchy is auto)
    mismatch_test "mismatch-hierarchy-queue-pairs-max-np4" 4 coll_rdma_hierarchy_queue_pairs_max 64 0 \
        "coll_rdma_hierarchy_queue_pairs_max \(-1 every pair\), with coll_rdma_hierarchy auto \(64 at rank 0, 0 at rank 1\)" coll_mix -i 20
    # (autotune on at even ranks only: their windows hold more barriers)
    mismatch_test "mismatch-autotune-np4" 4 coll_rdma_autotune 1 0 \
        "coll_rdma_autotune_calls \(0: coll_rdma_autotune off\) \(8 at rank 0, 0 at rank 1\)" barrier_order -n 2000

    # (a rank that does not select coll rdma for a communicator at all, its
    #  coll_rdma_priority -1, cannot take part in the setup exchange: the
    #  others warn at the stall warning and end the job at the fault
    #  timeout, instead of hanging inside the module underneath in silence)
    CHECKS=("says-re:coll:rdma: warning: rank [02] of 3 has waited [0-9.]+ s for every rank of the communicator to join coll rdma's setup exchange"
        "says-re:coll:rdma: error: comm 0 rank [02]: .*gave up after .*the job is ended \(MPI_Abort with status 71\)")
    RUN_WRAPPER=("$ROOT/ci/per-rank-mca.sh" coll_rdma_priority 40 -1)
    run_test "claimed-on-some-ranks-only-np3" 3 refused --mca coll_rdma_stall_warning 1 --mca coll_rdma_fault_timeout_s 4 \
        "${V[@]}" -- coll_mix -i 5

    # 16. a panic inside coll rdma (injected, testing only) and a bcast root
    #     that cannot pack: the call returns an error on every rank
    #     (MPI_ERRORS_RETURN; fault_recovery -e 1 expects exactly one), every
    #     later call goes to the module underneath with the right result, and
    #     the communicator's teardown skips the closing protocol
    FAILED_STATE='ev:any(events("comm_freed") | on(0); .failed)'
    CHECKS=("says:coll:rdma: error: internal error in MPI_Allreduce: coll_rdma_test_panic_at=allreduce:3 (testing only)" "$FAILED_STATE")
    run_test "panic-allreduce-3-np3" 3 ok --mca coll_rdma_test_panic_at allreduce:3 "${V[@]}" -- fault_recovery -i 10 -e 1
    CHECKS=("says:coll:rdma: error: internal error in MPI_Barrier: coll_rdma_test_panic_at=barrier:1 (testing only)" "$FAILED_STATE")
    run_test "panic-barrier-1-np2" 2 ok --mca coll_rdma_test_panic_at barrier:1 "${V[@]}" -- fault_recovery -i 10 -e 1
    CHECKS=("says:coll:rdma: error: internal error in MPI_Bcast: coll_rdma_test_panic_at=bcast:2 (testing only)" "$FAILED_STATE")
    run_test "panic-bcast-2-np3" 3 ok --mca coll_rdma_test_panic_at bcast:2 "${V[@]}" -- fault_recovery -i 10 -e 1
    CHECKS=("says-re:coll:rdma: error: comm 0 rank 0: bcast root could not pack its 400-byte message .*the receivers are told \(sent\)"
        'ev:[events("fault") | on(0) | select(.collective == "bcast" and .rank > 0)] | length > 0' "$FAILED_STATE")
    run_test "pack-failure-np3" 3 ok --mca coll_rdma_test_pack_failure_at 2 "${V[@]}" -- fault_recovery -i 10 -e 1

    # 17. the running Open MPI's structures differ in size from the headers
    #     coll rdma was built against (faked, testing only): it steps aside
    CHECKS=(noserve "says-re:coll:rdma: warning: mca_coll_base_module_t is 4096 bytes in the running Open MPI, [0-9]+ in the headers coll rdma was built against; coll rdma disqualifies itself")
    run_test "module-size-mismatch-np3" 3 ok --mca coll_rdma_test_module_class_size 4096 "${V[@]}" -- coll_mix -i 20

    # 18. MPI_THREAD_MULTIPLE (issue 37): coll rdma serves it, saying so;
    #     4 threads each run every collective on their own communicator at
    #     once (bcast over the window and in one copy, reductions short and
    #     long), one more creates and frees communicators, one polls
    #     MPI_Iprobe/MPI_Test; every result checked by the program, every
    #     worker communicator served natively (its summary line), nothing
    #     handed to the fallback, no warning
    # (the counts from the events, docs/events.md: nothing handed over on
    # any communicator, each collective served on some communicator's rank 0)
    TM_COUNTS='[.[] | select(.event == "comm_freed")] as $freed
        | all($freed[]; .calls | all(.[]; .handed_over == 0))
        and all("barrier", "bcast", "allreduce", "reduce"; . as $coll
            | any($freed[]; .rank == 0 and .calls[$coll].served > 0))'
    TM_SERVED=("says:coll:rdma: serving MPI_THREAD_MULTIPLE"
        "nowarn:coll:rdma:.*(warning|error)" "events-file:$TM_COUNTS")
    for np in 2 3 4; do
        CHECKS=("${TM_SERVED[@]}")
        run_test "thread-multiple-np$np" "$np" ok "${V[@]}" -- thread_multiple -t 4 -i 20 -c 20
    done
    # ... across pretended nodes (two-level schedules and leaders)
    CHECKS=("${TM_SERVED[@]}")
    run_test "thread-multiple-pretend-nodes-np4" 4 ok --mca coll_rdma_transport shm --mca coll_rdma_test_pretend_nodes 2 "${V[@]}" \
        -- thread_multiple -t 4 -i 10 -c 10
    # ... over udp (multicast on the default interface; a 1 MiB reduction
    #     is above the udp limits and handed over for its size, nothing else)
    if [ -n "${OUTSIDE_ADDRESS:-}" ] && [ "$OUTSIDE_ADDRESS" != 127.0.0.1 ]; then
        CHECKS=("says:coll:rdma: serving MPI_THREAD_MULTIPLE" "nowarn:coll:rdma:.*(warning|error)"
            'ev:all(events("handover"); .category == "size limit")'
            'ev:[events("comm_freed") | of_rank(0) | select(.transport == "udp")] as $freed
                | all("barrier", "bcast", "allreduce", "reduce"; . as $coll | any($freed[]; .calls[$coll].served > 0))')
        run_test "thread-multiple-udp-np2" 2 ok --mca coll_rdma_transport udp "${V[@]}" -- thread_multiple -t 4 -i 5 -c 5
    else
        skip "thread-multiple-udp-np2" "no route towards 239.78.0.0/16 beyond loopback here"
    fi
    # ... and the erroneous case: two threads of rank 0 in MPI_Barrier on
    #     one communicator at once (the other ranks never enter it): the job
    #     ends with the error naming the communicator, it does not hang
    CHECKS=("says-re:coll:rdma: error: comm [0-9]+ \"shared by two threads\" rank 0: two threads called collectives on this communicator at the same time")
    run_test "thread-multiple-two-threads-one-comm-np2" 2 refused "${V[@]}" -- thread_multiple -e
    # ... and a thread that dies mid-collective: the first worker of rank 1
    #     to enter its communicator's 3rd barrier stops there for good,
    #     holding it (coll_rdma_test_thread_stop_at), while the process
    #     goes on; that communicator's peers give up after the fault timeout
    #     and the job ends with their diagnostic (a hang fails by the
    #     run's time limit)
    CHECKS=("says-re:coll:rdma: warning: comm [0-9]+ rank 1: coll_rdma_test_thread_stop_at=barrier:3: this thread stops here for good"
        "says-re:coll:rdma: error: comm [0-9]+ rank [0-9]+: barrier failed: .*gave up after [0-9.]+ s without progress waiting for ")
    run_test "thread-multiple-killed-thread-np3" 3 refused --mca coll_rdma_test_thread_stop_at barrier:3 \
        --mca coll_rdma_fault_timeout_s 10 "${V[@]}" -- thread_multiple -t 4 -i 20 -c 0

    # 18a. mpi4py as Python users run it (Debian's python3-mpi4py asks for
    #      MPI_THREAD_MULTIPLE): tests/python/mpi4py_collectives.py checks
    #      every result and that it got that level; from the events, coll
    #      rdma served barrier, bcast, allreduce and reduce on MPI_COMM_WORLD
    #      and on its two Split communicators of 2 ranks or more (all
    #      np ranks in reverse order; at np=3 also ranks 0 and 2), handed
    #      nothing over on any communicator (mpi4py's own duplicates, which
    #      carry its pickled bcasts, included) and freed every one it claimed
    for np in 2 3; do
        if ! /usr/bin/python3 -c 'import mpi4py' 2>/dev/null || ! command -v jq >/dev/null; then
            skip "mpi4py-collectives-np$np" "needs Debian's python3-mpi4py (for /usr/bin/python3) and jq: ci/setup.sh installs both"
            continue
        fi
        # into build/tests/ beside the other programs; by a rename, since
        # instances of ci/mpi-tests-jobs.sh may be running it meanwhile
        if [ "$LIST" = 0 ] && ! cmp -s "$ROOT/tests/python/mpi4py_collectives.py" "$BIN/mpi4py_collectives.py"; then
            install -m 0755 "$ROOT/tests/python/mpi4py_collectives.py" "$BIN/.mpi4py_collectives.py.$$"
            mv -f "$BIN/.mpi4py_collectives.py.$$" "$BIN/mpi4py_collectives.py"
        fi
        MPI4PY_SPLITS=$(( np >= 3 ? np + 2 : np ))
        CHECKS=("says:coll:rdma: serving MPI_THREAD_MULTIPLE" "nowarn:coll:rdma:.*(warning|error)"
            "events-file:[.[] | select(.event == \"comm_freed\")] as \$freed
                | ([.[] | select(.event == \"comm_claimed\")] | length) == (\$freed | length)
                and all(\$freed[]; .calls | all(.[]; .handed_over == 0))
                and ([\$freed[] | select(. as \$f | all(\"barrier\", \"bcast\", \"allreduce\", \"reduce\"; \$f.calls[.].served > 0))
                    | .cid == 0] | (map(select(.)) | length) == $np and (map(select(. | not)) | length) == $MPI4PY_SPLITS)")
        run_test "mpi4py-collectives-np$np" "$np" ok "${V[@]}" -- mpi4py_collectives.py
    done
fi

[ "$LIST" = 1 ] && exit 0

# ------------------------------------------------------------------ summary
LEFT=()
while IFS= read -r e; do
    [ -n "$e" ] || continue
    mapped_by_someone "$e" && continue
    created_by "$e" "$RUN_PIDS_FILE" && LEFT+=("$e")
done < <(new_entries "$SHM_BEFORE_ALL" "$(shm_list 'coll_rdma\.')")
if [ "${#LEFT[@]}" -gt 0 ]; then
    say "FAIL: /dev/shm entries left behind by the test run: ${LEFT[*]}"
    FAILED=$((FAILED + 1))
    FAILED_NAMES+=("dev-shm-clean")
fi
[ -z "$SHM_BEFORE_ALL" ] || say "note: coll_rdma.* entries that existed before the run: $(printf '%s ' $SHM_BEFORE_ALL)"

say "== took $(( $(date +%s) - T_START ))s"
[ "$FAILED" = 0 ] || say "failed: ${FAILED_NAMES[*]}"
if [ "$SKIPPED" -gt 0 ]; then
    say "$PASSED passed, $FAILED failed, $SKIPPED skipped"
else
    say "$PASSED passed, $FAILED failed"
fi
[ "$FAILED" = 0 ]
