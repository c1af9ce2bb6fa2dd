#!/usr/bin/env bash
# make check's test of coll-rdma-tune (make test-tune): the tuner in its
# quickest mode (--smoke) writes a parameter file; Open MPI must read every
# value in it from that file, and MPI test jobs must pass with it.
#
# --accept-best makes the tuner set its best candidate even where the rule
# keeps the default (the file says so), so that the file has values to
# check whatever the machine's timings; the rule itself ("clearly better,
# nowhere slower") is tested by cargo test (tuning/src/bin/coll-rdma-tune/
# rule.rs), which make check runs too.
#
# Open MPI 4.1 reads the files listed in the MCA parameter
# mca_base_param_files (default: $HOME/.openmpi/mca-params.conf, then
# <prefix>/etc/openmpi-mca-params.conf); in the environment that is
# OMPI_MCA_mca_base_param_files, which mpirun passes on to the ranks.
# Last line: "N passed, N failed"; exit status non-zero on a failure.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
OUT=$BUILD/tune-test
CONF=$OUT/mca-params.conf
COMPONENT_PATH=SYS_DEFAULT:$BUILD/components

if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
unset OMPI_MCA_mca_base_param_files
rm -rf "$OUT"
mkdir -p "$OUT"
PASSED=0 FAILED=0
result() {  # result NAME STATUS [DETAIL]
    if [ "$2" = 0 ]; then PASSED=$((PASSED + 1)); printf '%-44s ok\n' "$1"
    else FAILED=$((FAILED + 1)); printf '%-44s FAIL  %s\n' "$1" "${3:-}"; fi
}

# 1. the tuner, quickest mode
t0=$SECONDS
rc=0
bash "$ROOT/ci/tune.sh" --smoke --accept-best --output "$CONF" --log-dir "$OUT/logs" >"$OUT/tune.log" 2>&1 || rc=$?
values=$(grep -E '^coll_rdma_[a-z_]+ = -?[0-9]+$' "$CONF" 2>/dev/null || true)
if [ "$rc" != 0 ]; then
    result tune-smoke-writes-file 1 "exit status $rc after $((SECONDS - t0))s (see $OUT/tune.log)"
elif [ -z "$values" ]; then
    result tune-smoke-writes-file 1 "no 'coll_rdma_NAME = VALUE' line in $CONF"
else
    result tune-smoke-writes-file 0
    echo "   $((SECONDS - t0))s; $CONF sets: $(printf '%s\n' "$values" | sed 's/ = /=/' | tr '\n' ' ')"
fi

# 2. ompi_info reads each value from the file (and without the file, the
# same parameter shows its default: the check can fail)
if [ -n "$values" ]; then
    with=$(OMPI_MCA_mca_base_component_path=$COMPONENT_PATH OMPI_MCA_mca_base_param_files=$CONF \
        ompi_info --param coll rdma --level 9 --parsable 2>&1)
    without=$(OMPI_MCA_mca_base_component_path=$COMPONENT_PATH OMPI_MCA_mca_base_param_files=/dev/null \
        ompi_info --param coll rdma --level 9 --parsable 2>&1)
    printf '%s\n' "$with" >"$OUT/ompi_info-with-file.txt"
    bad=
    while read -r name _ value; do
        grep -qx "mca:coll:rdma:param:$name:value:$value" <<<"$with" || bad="$bad $name: value not $value;"
        grep -q "^mca:coll:rdma:param:$name:source:file (\?$CONF" <<<"$with" ||
            bad="$bad $name: source not $CONF ($(grep "^mca:coll:rdma:param:$name:source:" <<<"$with"));"
        grep -qx "mca:coll:rdma:param:$name:source:default" <<<"$without" ||
            bad="$bad $name: not from its default without the file;"
    done <<<"$values"
    result ompi_info-shows-file-values "$([ -z "$bad" ] && echo 0 || echo 1)" "$bad (see $OUT/ompi_info-with-file.txt)"
else
    result ompi_info-shows-file-values 1 "no values to check"
fi

# 3. MPI test jobs with the file in force: ci/mpi-tests.sh's coll_mix (every
# collective coll rdma serves, results checked, on three communicators) and
# reduce_ops (every op and type against a reference). Not its np2-bcast: that
# test also expects the default single-copy threshold in the verbose output
rc=0
OMPI_MCA_mca_base_param_files=$CONF MPI_TESTS_LOGDIR=$OUT/mpi-tests \
    bash "$ROOT/ci/mpi-tests.sh" --quick --only '^np2-(coll_mix|reduce_ops)$' >"$OUT/mpi-tests.log" 2>&1 || rc=$?
ran=$(tail -n1 "$OUT/mpi-tests.log" | sed -n 's/^\([0-9]*\) passed.*/\1/p')
[ "${ran:-0}" = 2 ] || [ "$rc" != 0 ] || rc="expected 2 tests to pass"
result mpi-tests-with-the-file "$([ "$rc" = 0 ] && echo 0 || echo 1)" "$rc: $(tail -n1 "$OUT/mpi-tests.log") (see $OUT/mpi-tests.log)"
tail -n1 "$OUT/mpi-tests.log" | sed 's/^/   mpi-tests: /'

# 4. the bcast test program (every delivery checked, 1 byte to 1 MiB) with
# the file; where the file sets the single-copy threshold, every rank's
# comm_ready event (docs/events.md) must show that value: the ranks, not
# only ompi_info, read the file
rc=0
rm -rf "$OUT/bcast-events"
mkdir -p "$OUT/bcast-events"
OMPI_MCA_mca_base_param_files=$CONF timeout -k 5 120 mpirun -np 2 --mca btl self,vader \
    --mca mca_base_component_path "$COMPONENT_PATH" --mca coll_rdma_verbose 1 \
    --mca coll_rdma_events_file "$OUT/bcast-events/rank-%r.jsonl" \
    "$BUILD/tests/bcast" -n 300 -B 1 -L 50 -x 60 >"$OUT/bcast.log" 2>&1 || rc=$?
why=
[ "$rc" = 0 ] || why="exit status $rc"
threshold=$(sed -n 's/^coll_rdma_bcast_single_copy_min_bytes = //p' "$CONF")
if [ -z "$why" ] && [ -n "$threshold" ] &&
    ! cat "$OUT"/bcast-events/rank-*.jsonl 2>/dev/null | jq -e -s --argjson want "$threshold" \
        '[.[] | select(.event == "comm_ready" and .cid == 0)] | length == 2 and all(.[]; .bcast.single_copy_min_bytes == $want)' >/dev/null; then
    why="the ranks' comm_ready events on comm 0 do not say single copy from $threshold bytes (see $OUT/bcast-events)"
fi
result bcast-with-the-file "$([ -z "$why" ] && echo 0 || echo 1)" "$why (see $OUT/bcast.log)"
[ -z "$threshold" ] || [ -n "$why" ] || echo "   the ranks report single copy from $threshold bytes, as the file says"

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
