#!/usr/bin/env bash
# MPI tests of coll rdma: builds tests/mpi/*.c into build/tests/ and runs them
# under mpirun with the component from build/components/, then checks from
# coll rdma's structured events (docs/events.md) that it served every call
# the programs made and decided as each case expects.
#
# usage: ci/mpi-tests.sh [--stock] [--quick|--emulated] [--only REGEX] [--list]
#                         [--list-deps] [--transport NAME] [--hosts HOSTS] [--nps "N..."]
#                         [--build-only]
#   --stock       run the programs against stock Open MPI (no component needed;
#                 the checks that need the component are skipped)
#   --quick       fewer iterations (a fast smoke test)
#   --emulated    --quick's phases, cases and sizes repeated less again:
#                 barrier_order 250 barriers (not 1000), bcast 100
#                 back to back, 20 mixed and 1 MiB with 3 of its 13 datatype
#                 pairs, reduce_ops 10 interleaved and each predefined
#                 op/type pair at one of its 4 counts (for the Soft-RoCE guests,
#                 where every instruction is emulated; the host runs --quick)
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
        --emulated) QUICK=emulated ;;
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
# --stock means Open MPI as installed: our build directory stays out, or
# the component built there would be selected by its priority.
[ "$MODE" = stock ] && COMPONENT_PATH=SYS_DEFAULT
# Open MPI's version from its wrapper compiler (the same package as the
# library); ompi_info, which opens every component (5 s a run in an
# emulated Soft-RoCE guest), runs once, below, in component mode only.
OMPI_VERSION=$(mpicc --showme:version 2>/dev/null | sed -n 's/.*Open MPI \([0-9][^ ]*\).*/\1/p' | head -1)
OMPI_MAJOR=${OMPI_VERSION%%.*}
[[ $OMPI_MAJOR =~ ^[0-9]+$ ]] || die "cannot read Open MPI's version from mpicc --showme:version (got '$OMPI_VERSION')"
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
    # one ompi_info: Open MPI's own component directory, and whether coll
    # rdma loads from ours
    ompi_info_out=$(OMPI_MCA_mca_base_component_path=$COMPONENT_PATH \
        ompi_info --parsable --path pkglibdir --param coll rdma --level 9 2>&1 || true)
    # Here-strings, not pipes: with pipefail, a reader that stops early
    # (grep -q at its first match) breaks the writer's pipe once the
    # kernel shrinks pipe buffers, and a 60 KB listing then reads as a
    # failure.
    SYSDIR=$(sed -n '/^path:pkglibdir:/{s///p;q}' <<<"$ompi_info_out")
    if [ -n "$SYSDIR" ] && [ -e "$SYSDIR/mca_coll_rdma.so" ]; then
        die "$SYSDIR/mca_coll_rdma.so exists: a copy in Open MPI's own component directory would be loaded next to ours; remove it"
    fi
    if ! grep -q 'coll_rdma_priority' <<<"$ompi_info_out"; then
        head -20 <<<"$ompi_info_out" | sed 's/^/  ompi_info: /'
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
# the runner of the cases described as data (ci/runner, ci/mpi/cases/*.toml;
# --stock runs some too), unless MPI_RUNNER names one: make check's
# profile, whose build of the crates it uses the cargo tests left
if [ -z "${MPI_RUNNER:-}" ]; then
    RUNNER_TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
    [ "$BUILD" = "$ROOT/build" ] || RUNNER_TARGET=${CARGO_TARGET_DIR:-$BUILD/target}
    MPI_RUNNER=$RUNNER_TARGET/release-tests/mpi-runner
    if [ "${MPI_TESTS_NO_BUILD:-0}" != 1 ]; then
        (cd "$ROOT" && CARGO_TARGET_DIR=$RUNNER_TARGET cargo build -q --profile release-tests -p mpi-runner) \
            >"$BUILD/mpi-runner-build.log" 2>&1 ||
            { sed 's/^/  cargo: /' "$BUILD/mpi-runner-build.log" | tail -20 >&2; die "cannot build the case runner (cargo build -p mpi-runner)"; }
    fi
fi
# mpi4py's program, into build/tests/ beside the others; by a rename, since
# instances of ci/mpi-tests-jobs.sh may be running it meanwhile
if [ "$LIST" = 0 ] && ! cmp -s "$ROOT/tests/python/mpi4py_collectives.py" "$BIN/mpi4py_collectives.py"; then
    install -m 0755 "$ROOT/tests/python/mpi4py_collectives.py" "$BIN/.mpi4py_collectives.py.$$"
    mv -f "$BIN/.mpi4py_collectives.py.$$" "$BIN/mpi4py_collectives.py"
fi
[ -x "$MPI_RUNNER" ] || die "$MPI_RUNNER is missing (MPI_TESTS_NO_BUILD=1: run 'ci/mpi-tests.sh --build-only' first)"
[ "$BUILD_ONLY" = 1 ] && { say "mpi-tests: programs in $BIN are up to date"; exit 0; }

# The address udp's multicast leaves by (the source address of the route
# towards the group range; where there is no `ip`, as in the Open MPI 5
# chroot, the first address that `hostname -I` lists): the udp cases need
# one beyond loopback; exported for the tables' skip_unless
if command -v ip >/dev/null; then
    OUTSIDE_ADDRESS=$(ip -4 route get 239.78.0.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1 || true)
else
    OUTSIDE_ADDRESS=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+(\.[0-9]+){3}$' | grep -v '^127\.' | head -1 || true)
fi
export OUTSIDE_ADDRESS
# why verbs cannot be set up here, forced or across pretended nodes, as the
# ranks' comm_unavailable says: no device, or (the Open MPI 5 chroot's
# build, docs/ompi5-port.md) no verbs in this build (the component links
# libibverbs exactly when it has the verbs transport)
if grep -qa 'libibverbs\.so' "$COMPDIR/mca_coll_rdma.so" 2>/dev/null; then
    NO_DEVICE_WHY="no RDMA device found" NO_DEVICE_ACROSS_WHY="verbs between the nodes failed: no RDMA device found"
else
    NO_DEVICE_WHY="this build of coll rdma has no verbs support" NO_DEVICE_ACROSS_WHY=$NO_DEVICE_WHY
fi

# ------------------------------------------------------------------ helpers
. "$ROOT/ci/mpi/run.sh"

# ------------------------------------------------------------------- tests
rm -rf "$LOGROOT"
mkdir -p "$LOGROOT"

if [ "$QUICK" != 0 ]; then
    BO_N=1000; CL_L=100; CM_I=30; NPS="1 2 3 4"; RO=(-m 1000 -x 40); RO_PARAM=(-m 1000 -x 20)
    BC=(-n 300 -B 1 -L 50 -x 60); BC_PARAM=(-n 300 -B 1 -L 50 -x 40)
    NB_R=60; NR_R=60; NF_R=5; NBC_R=30
else
    BO_N=20000; CL_L=1000; CM_I=300; NPS="1 2 3 4 5 8"; RO=(-x 150); RO_PARAM=(-m 1000 -x 60)
    BC=(-n 3000); BC_PARAM=(-n 1000 -B 1 -L 100 -x 100)
    NB_R=200; NR_R=200; NF_R=20; NBC_R=120
fi
if [ "$QUICK" = emulated ]; then
    BO_N=250; RO=(-m 1000 -x 10 -k 4); BC=(-n 100 -B 1 -L 50 -x 20 -D 6)
fi
[ -n "$NPS_SET" ] && NPS=$NPS_SET

if [ "$LIST" = 0 ]; then
    say "== coll rdma MPI tests ($MODE mode, Open MPI $OMPI_VERSION, $(nproc) core(s), timeout ${TIMEOUT}s per run, times the load per core up to ${TIMEOUT_MAX_FACTOR}x)"
    say "   component path: $COMPONENT_PATH"
    [ "$MODE" = component ] && say "   component: $COMPDIR/mca_coll_rdma.so ($(stat -c '%s bytes, %y' "$COMPDIR/mca_coll_rdma.so" | cut -d. -f1))"
fi

HAN=() HAN_VERBOSE=()
# Section 1a (01-programs.toml) runs at the counts above 1, and only over
# the transport or hosts asked for: THREAD_NPS, empty otherwise; TM_OVER
# is the transports its served calls may report, as a JSON array
THREAD_NPS=()
TM_OVER=$(printf '"%s",' ${EXPECT_TRANSPORT:-${TRANSPORT:-shm}})
TM_OVER="[${TM_OVER%,}]"
# Over udp (--transport udp) every rank's comm_ready on MPI_COMM_WORLD
# reports the protection its frames run with: coll_rdma_udp_protection
# as --mca gave it, else the default, encrypt; with none, rank 0 warns so
# (section 1's checks at more than one rank).
UDP_PROTECTED=()
if [ "$MODE" = component ]; then
    if [ -n "$TRANSPORT$HOSTS" ]; then
        for np in $NPS; do [ "$np" -le 1 ] || THREAD_NPS+=("$np"); done
    fi
    if [ "$TRANSPORT" = udp ]; then
        udp_protection=encrypt
        for ((i = 1; i + 1 < ${#EXTRA_MCA[@]}; i += 3)); do
            [ "${EXTRA_MCA[i]}" != coll_rdma_udp_protection ] || udp_protection=${EXTRA_MCA[i + 1]}
        done
        UDP_PROTECTED=("ev:every_rank_ready(0; .transport == \"udp\" and .protection == \"$udp_protection\")")
        [ "$udp_protection" != none ] ||
            UDP_PROTECTED+=("says-re:coll:rdma: comm 0: warning: udp frames unprotected \\(coll_rdma_udp_protection=none\\)")
    fi

    # verbose 1, unless the caller's --mca sets the level (one value:
    # Open MPI joins a parameter given twice with a comma)
    V=(--mca coll_rdma_verbose 1)
    [[ " ${EXTRA_MCA[*]} " != *" coll_rdma_verbose "* ]] || V=()
    [ -n "$TRANSPORT" ] && V+=(--mca coll_rdma_transport "$TRANSPORT")
    V+=("${EXTRA_MCA[@]}")
    # the checks read coll rdma's events (docs/events.md) with jq
    command -v jq >/dev/null || die "jq not found (run ci/setup.sh): the checks read coll rdma's events with it"
    SERVED_CHECK=events
    SERVED=("$SERVED_CHECK" "nowarn:coll:rdma:.*warning")
    # bcast: coll rdma's root returns at once while its messages fit in the
    # window, even with a receiver asleep (stock Open MPI's tuned does not)
    BC_E=(-E)
    # ... checked without a clock (the late rank enters only once the root
    # is done, meeting it on the node's shared table), so only where all
    # ranks share one machine, and only without --transport or --hosts
    # (never tried over the emulated verbs)
    [ -n "$TRANSPORT$HOSTS" ] && BC_E=()
    # every size is served natively by default (issue 12): single copy on
    # shared memory from 8 KiB, or from 512 KiB where the job's ranks
    # outnumber the node's online cores (comm 0's shm ranks are the job's
    # here), the window below it and on verbs, with no limit below 64 MiB;
    # comm_ready says which path serves which lengths
    BC_REASON='ev:handed_over("bcast"; true) | not'
    BC_PATHS="ev:rank0_ready(0; if .reads_peer_memory then .bcast.single_copy_min_bytes == (if .memory.shm_ranks > $(getconf _NPROCESSORS_ONLN) then 524288 else 8192 end) else .bcast.single_copy_min_bytes == null end)"
    # coll han (priority 35 in Open MPI 5.0, above tuned; 0 in 4.1) steps
    # aside on every communicator of one node: Open MPI 5 says so at
    # coll_base_verbose 10, which the han cases check (05-selection.toml)
    if [ "$OMPI_MAJOR" -ge 5 ]; then
        HAN=("re:coll:han:comm_query \(0/MPI_COMM_WORLD\): comm has only local processes; disqualifying myself")
        HAN_VERBOSE=(--mca coll_base_verbose 10)
    fi
else
    V=()
    SERVED=()
    BC_E=()
    BC_REASON=
    BC_PATHS=
fi

# The cases, in the order they run (and --list prints them), one file per
# theme in ci/mpi/cases/: those that run without the component, then
# (component mode) those that need it, each a table the runner runs
# (run_table). With --transport, --hosts or --mca only section 1's cases
# run (np<N>-...): then every table goes to one run of the runner
# after the last (case_table), in the same order, rather than one run each,
# whose start costs over a second in an emulated Soft-RoCE guest.
DEFERRED_TABLES=()
case_table() {
    if [ "$LIST" = 0 ] && { [ -n "$TRANSPORT$HOSTS" ] || [ "${#EXTRA_MCA[@]}" -gt 0 ]; }; then
        DEFERRED_TABLES+=("$1")
    else
        run_table "$1"
    fi
}
for CASE_FILE in 01-programs 02-nonblocking 03-selftests 04-excluded; do
    case_table "$ROOT/ci/mpi/cases/$CASE_FILE.toml"
done

# Sections 4 on are about the component itself: under --stock every case
# of theirs says SKIP.
COMPONENT_TABLES=()
for CASE_FILE in 05-selection 06-parameters 07-reductions 08-bcast 09-robustness 10-threads; do
    COMPONENT_TABLES+=("$ROOT/ci/mpi/cases/$CASE_FILE.toml")
done
if [ "$MODE" = stock ]; then
    skip_tables "needs the component" "${COMPONENT_TABLES[@]}"
else
    for table in "${COMPONENT_TABLES[@]}"; do case_table "$table"; done
fi
[ "${#DEFERRED_TABLES[@]}" = 0 ] || run_table "${DEFERRED_TABLES[@]}"

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
