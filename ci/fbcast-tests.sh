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
#   directory; a fresh mktemp name each run, so that two runs can share it).
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
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
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

WORKDIR=${FBCAST_TESTS_WORKDIR:-$BUILD}
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
MOUNTS=()
TEST_USER=
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
    WHY=
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

    # ---- 64 MiB to 4 ranks, checked with sha256sum and cmp
    TEST=big-file-np4-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR"; hosts_dirs 4
        run 4 "$FBCAST" --progress "$BIG" "$TDIR/hosts/r%r/data.bin"
        WHYS=()
        [ "$RC" = 0 ] || WHYS+=("mpirun exited with $RC after ${SECS}s")
        grep -qE '100\.0% 64\.0 MiB / 64\.0 MiB [0-9.]+ [KMG]?i?B/s' "$LOG" || WHYS+=("no final progress line '100.0% 64.0 MiB / 64.0 MiB <rate>/s'")
        all_codes 4 0 || WHYS+=("$WHY")
        [ ! -e "$TDIR/hosts/r0/data.bin" ] || WHYS+=("the root wrote a copy")
        for r in 1 2 3; do
            f=$TDIR/hosts/r$r/data.bin
            if [ ! -f "$f" ]; then WHYS+=("rank $r: no $f"); continue; fi
            [ "$(sha256sum < "$f" | cut -d' ' -f1)" = "$BIG_SUM" ] || WHYS+=("rank $r: sha256 differs")
            cmp -s "$BIG" "$f" || WHYS+=("rank $r: cmp differs")
            [ "$(stat -c '%a %Y' "$f")" = "$(stat -c '%a %Y' "$BIG")" ] || WHYS+=("rank $r: mode/mtime $(stat -c '%a %Y' "$f"), source $(stat -c '%a %Y' "$BIG")")
        done
        [ -z "$(temps "$TDIR/hosts")" ] || WHYS+=("temporaries left: $(temps "$TDIR/hosts" | tr '\n' ' ')")
        grep -qE ': ranks 1,2,3: written 1 file \(64\.0 MiB\)' "$LOG" || WHYS+=("no per-host summary line 'ranks 1,2,3: written 1 file (64.0 MiB)'")
        served_check 4 17 || WHYS+=("$WHY")
        if [ ${#WHYS[@]} = 0 ]; then HOLD_TDIR=1 pass "sha256 and cmp equal on ranks 1-3, ${SECS}s"; else fail "${WHYS[*]}"; fi

        # ---- the same again: identical files are kept (inode, mtime), one changed file is rewritten
        TEST=identical-skip-np4-$MODE
        if [ ${#WHYS[@]} != 0 ]; then skip "needs the copies of big-file-np4-$MODE"
        else
            stamp() { stat -c '%i %y' "$TDIR/hosts/r$1/data.bin"; }
            before1=$(stamp 1) before3=$(stamp 3)
            printf 'changed' | dd of="$TDIR/hosts/r2/data.bin" bs=1 seek=1000 conv=notrunc status=none
            run 4 "$FBCAST" "$BIG" "$TDIR/hosts/r%r/data.bin"
            WHYS=()
            [ "$RC" = 0 ] || WHYS+=("mpirun exited with $RC")
            all_codes 4 0 || WHYS+=("$WHY")
            [ "$(stamp 1)" = "$before1" ] || WHYS+=("rank 1: inode/mtime changed ($before1 -> $(stamp 1))")
            [ "$(stamp 3)" = "$before3" ] || WHYS+=("rank 3: inode/mtime changed ($before3 -> $(stamp 3))")
            cmp -s "$BIG" "$TDIR/hosts/r2/data.bin" || WHYS+=("rank 2: the changed copy was not repaired")
            grep -qE ': ranks 1,3: skipped as identical 1 file' "$LOG" || WHYS+=("no summary line 'ranks 1,3: skipped as identical 1 file'")
            grep -qE ': rank 2: written 1 file' "$LOG" || WHYS+=("no summary line 'rank 2: written 1 file'")
            if [ ${#WHYS[@]} = 0 ]; then
                # all identical now: nothing is sent at all
                run 4 "$FBCAST" "$BIG" "$TDIR/hosts/r%r/data.bin"
                [ "$RC" = 0 ] || WHYS+=("third run: mpirun exited with $RC")
                grep -q 'root, sent 0 files (0 B)' "$LOG" || WHYS+=("third run: the root sent data although every copy was identical")
            fi
            if [ ${#WHYS[@]} = 0 ]; then pass "ranks 1,3 untouched, rank 2 repaired, then nothing sent"; else fail "${WHYS[*]}"; fi
        fi
    fi

    # ---- policy never over a different file on one rank
    TEST=never-over-different-np4-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR"; hosts_dirs 4
        echo "rank 2's own file" > "$TDIR/hosts/r2/data.bin"
        sum_before=$(sha256sum < "$TDIR/hosts/r2/data.bin")
        run 4 "$FBCAST" --overwrite never "$SMALL" "$TDIR/hosts/r%r/data.bin"
        WHYS=()
        [ "$RC" != 124 ] || WHYS+=("timed out")
        all_codes 4 3 || WHYS+=("$WHY")
        [ "$(sha256sum < "$TDIR/hosts/r2/data.bin")" = "$sum_before" ] || WHYS+=("rank 2's file changed")
        for r in 1 3; do [ ! -e "$TDIR/hosts/r$r/data.bin" ] || WHYS+=("rank $r has a file although the transfer was refused"); done
        [ -z "$(temps "$TDIR/hosts")" ] || WHYS+=("temporaries left: $(temps "$TDIR/hosts" | tr '\n' ' ')")
        grep -q 'rank 2: FAILED: .*exists with other contents (policy never)' "$LOG" || WHYS+=("the summary does not name rank 2's refusal")
        if [ ${#WHYS[@]} = 0 ]; then pass "code 3 on all ranks, rank 2's file unchanged"; else fail "${WHYS[*]}"; fi
    fi

    # ---- missing source: the same error everywhere, quickly
    TEST=missing-source-np4-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR"; hosts_dirs 4
        run 4 "$FBCAST" "$WORK/no-such-file" "$TDIR/hosts/r%r/data.bin"
        WHYS=()
        [ "$RC" != 124 ] || WHYS+=("timed out")
        # quick: a third of the (load-scaled) limit
        quick=$(($(scaled_timeout) / 3))
        [ "$SECS" -le "$quick" ] || WHYS+=("took ${SECS}s, more than ${quick}s")
        all_codes 4 2 || WHYS+=("$WHY")
        [ -z "$(find "$TDIR/hosts" -type f)" ] || WHYS+=("files appeared: $(find "$TDIR/hosts" -type f | tr '\n' ' ')")
        grep -q 'rank 0: FAILED: cannot read .*no-such-file' "$LOG" || WHYS+=("the summary does not give the root's reason")
        if [ ${#WHYS[@]} = 0 ]; then pass "code 2 on all ranks in ${SECS}s"; else fail "${WHYS[*]}"; fi
    fi

    # ---- read-only destination on one rank only
    TEST=read-only-dest-one-rank-np4-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR"; hosts_dirs 4
        if ! make_read_only "$TDIR/hosts/r2"; then skip "cannot make a directory read-only here (no tmpfs mount, no chattr)"
        else
            run 4 "$FBCAST" "$SMALL" "$TDIR/hosts/r%r/data.bin"
            WHYS=()
            [ "$RC" != 124 ] || WHYS+=("timed out")
            all_codes 4 4 || WHYS+=("$WHY")
            for r in 1 2 3; do [ ! -e "$TDIR/hosts/r$r/data.bin" ] || WHYS+=("rank $r: a file under the final name"); done
            [ -z "$(temps "$TDIR/hosts")" ] || WHYS+=("temporaries left: $(temps "$TDIR/hosts" | tr '\n' ' ')")
            grep -q 'rank 2: FAILED: cannot create a temporary file in' "$LOG" || WHYS+=("the summary does not name rank 2's failure")
            undo_mount "$TDIR/hosts/r2"
            if [ ${#WHYS[@]} = 0 ]; then pass "code 4 on all ranks, no file and no temporary anywhere"; else fail "${WHYS[*]}"; fi
        fi
    fi

    # ---- full disk on one rank (a 1 MiB tmpfs)
    TEST=full-disk-one-rank-np4-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR"; hosts_dirs 4
        if ! mount -t tmpfs -o size=1m fbcast-test-full "$TDIR/hosts/r3" 2>/dev/null; then skip "cannot mount a small tmpfs (not root?)"
        else
            MOUNTS+=("$TDIR/hosts/r3")
            run 4 "$FBCAST" "$SMALL" "$TDIR/hosts/r%r/data.bin"
            WHYS=()
            [ "$RC" != 124 ] || WHYS+=("timed out")
            all_codes 4 5 || WHYS+=("$WHY")
            for r in 1 2 3; do [ ! -e "$TDIR/hosts/r$r/data.bin" ] || WHYS+=("rank $r: a file under the final name"); done
            [ -z "$(temps "$TDIR/hosts")" ] || WHYS+=("temporaries left: $(temps "$TDIR/hosts" | tr '\n' ' ')")
            grep -q 'rank 3: FAILED: .*No space left on device' "$LOG" || WHYS+=("the summary does not name rank 3's full disk")
            undo_mount "$TDIR/hosts/r3"
            if [ ${#WHYS[@]} = 0 ]; then pass "code 5 on all ranks, no file and no temporary anywhere"; else fail "${WHYS[*]}"; fi
        fi
    fi

    # ---- kill -9 the root, then a receiver, in the middle of a large file
    for victim in 0 2; do
        TEST=killed-rank$victim-mid-transfer-np4-$MODE
        want "$TEST" || continue
        TDIR=$WORK/$TEST; mkdir -p "$TDIR"; hosts_dirs 4
        mkdir -p "$TDIR/pids"
        limit=$(scaled_timeout)
        LOG=$TDIR/mpirun.log
        t0=$SECONDS
        # ORTE sends the survivors SIGTERM, then SIGKILL odls_base_sigkill_timeout
        # seconds later (default 1): on a loaded machine (these tests run at
        # nice 19 beside other jobs) a rank may not run at all in that second
        # and could not remove its temporary
        # (Open MPI 5's PRRTE has no such setting: see below)
        grace=()
        [ "$OMPI_MAJOR" -ge 5 ] || grace=(--mca odls_base_sigkill_timeout 5)
        timeout -k 10 "$limit" mpirun -np 4 --oversubscribe "${MPI_OPTS[@]}" "${grace[@]}" "${RANK_ENV[@]}" \
            bash -c 'echo $$ > "'"$TDIR"'/pids/${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-x}}"; exec "$@"' fbcast-rank \
            "$FBCAST" --chunk 4K "$HUGE" "$TDIR/hosts/r%r/data.bin" </dev/null >"$LOG" 2>&1 &
        job=$!
        # wait until rank 1 has written part of its temporary (its file
        # offset, from /proc/PID/fdinfo; the temporaries are preallocated,
        # so their size says nothing)
        kill_mid_transfer "$job" "$victim"
        wait "$job"; RC=$?; SECS=$((SECONDS - t0))
        WHYS=()
        if [ -z "$killed" ]; then
            undisturbed_transfer "the transfer completed (in ${SECS}s) before rank 1 had written 64 KiB of its temporary: nothing to kill" \
                "rank 1 never wrote 64 KiB of its temporary; mpirun ended with status $RC after ${SECS}s"
            continue
        fi
        # (137 is also mpirun passing on the killed rank's status)
        [ "$RC" != 124 ] && [ "$SECS" -lt "$limit" ] || WHYS+=("mpirun did not end by itself (status $RC after ${SECS}s, limit ${limit}s)")
        [ "$RC" != 0 ] || WHYS+=("mpirun reported success")
        for r in 1 2 3; do [ ! -e "$TDIR/hosts/r$r/data.bin" ] || WHYS+=("rank $r: a file under the final name"); done
        left=$(temps "$TDIR/hosts")
        # the killed rank cannot remove its temporary; the others remove
        # theirs when mpirun sends them SIGTERM
        others_left=$(grep -v "/r$victim/" <<<"$left" || true)
        # PRRTE (Open MPI 5) has no setting for the delay between its
        # SIGTERM and SIGKILL, and survivors were seen SIGKILLed before they
        # removed their temporary: noted there, not a failure
        if [ -n "$others_left" ] && [ "$OMPI_MAJOR" -ge 5 ]; then
            survivors_note="; $(wc -l <<<"$others_left") surviving rank(s) SIGKILLed by PRRTE before removing their temporary (Open MPI 5: no grace setting)"
        else
            survivors_note=
            [ -z "$others_left" ] || WHYS+=("temporaries of surviving ranks left: $(tr '\n' ' ' <<<"$others_left")")
        fi
        note="killed when rank 1 had written $((written >> 20)) of $((HUGE_BYTES >> 20)) MiB; mpirun ended with status $RC ${SECS}s after the start"
        [ -n "$left" ] && [ "$victim" != 0 ] && note+="; the killed rank's temporary remains (SIGKILL), as documented"
        note+=$survivors_note
        if [ ${#WHYS[@]} = 0 ]; then pass "$note"; else fail "${WHYS[*]} ($note)"; fi
    done

    # ---- the source changes while it is sent: SOURCE (2) on every rank, no file
    TEST=source-changed-mid-transfer-np4-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR/pids"; hosts_dirs 4
        src=$TDIR/src.bin
        cp --sparse=always "$HUGE" "$src"
        CODES=$TDIR/codes; mkdir -p "$CODES"
        LOG=$TDIR/mpirun.log
        t0=$SECONDS
        # each rank records its fbcast's pid and exit status
        timeout -k 10 "$(scaled_timeout)" mpirun -np 4 --oversubscribe "${MPI_OPTS[@]}" "${ALL_STATUSES[@]}" "${RANK_ENV[@]}" \
            bash -c 'r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-x}}; "$@" & echo $! > "'"$TDIR"'/pids/$r"; wait $!; rc=$?; echo $rc > "'"$CODES"'/code.$r"; '"$RANK_EXIT" \
            fbcast-rank "$FBCAST" --chunk 4K "$src" "$TDIR/hosts/r%r/data.bin" </dev/null >"$LOG" 2>&1 &
        job=$!
        # once rank 1 has 64 KiB, stop the root, change the source's last 4
        # KiB (beyond what the root has read: the offset of its open source),
        # let it go on
        changed= written= read_at=
        while kill -0 "$job" 2>/dev/null; do # (bounded by timeout)
            written=$(temp_offset "$TDIR/pids/1")
            if [ "${written:-0}" -gt $((64 << 10)) ] && [ -f "$TDIR/pids/0" ]; then
                root=$(cat "$TDIR/pids/0")
                kill -STOP "$root" || break
                for fd in /proc/"$root"/fd/*; do
                    [ "$(readlink "$fd" 2>/dev/null)" = "$src" ] && read_at=$(awk '/^pos:/ {print $2}' "/proc/$root/fdinfo/${fd##*/}")
                done
                if [ -n "$read_at" ] && [ "$read_at" -lt $((HUGE_BYTES - 4096)) ]; then
                    head -c 4096 /dev/urandom | dd of="$src" bs=4096 seek=$((HUGE_BYTES / 4096 - 1)) conv=notrunc status=none && changed=yes
                fi
                kill -CONT "$root"
                break
            fi
            sleep 0.05
        done
        wait "$job"; RC=$?; SECS=$((SECONDS - t0))
        WHYS=()
        if [ -z "$changed" ]; then
            undisturbed_transfer "the root had read the whole source (offset ${read_at:-?}) when rank 1 had 64 KiB: nothing left to change" \
                "the source was not changed (rank 1 wrote ${written:-nothing}, the root had read ${read_at:-?} bytes); mpirun ended with status $RC after ${SECS}s"
        else
            [ "$RC" != 124 ] || WHYS+=("timed out")
            all_codes 4 2 || WHYS+=("$WHY")
            for r in 1 2 3; do [ ! -e "$TDIR/hosts/r$r/data.bin" ] || WHYS+=("rank $r: a file under the final name"); done
            [ -z "$(temps "$TDIR/hosts")" ] || WHYS+=("temporaries left: $(temps "$TDIR/hosts" | tr '\n' ' ')")
            grep -q 'rank 0: FAILED: .*changed while it was sent' "$LOG" || WHYS+=("the summary does not say the root's source changed")
            ! grep -q 'do not match the content hash' "$LOG" || WHYS+=("a receiver reports a corrupt copy instead of the changed source")
            if [ ${#WHYS[@]} = 0 ]; then pass "code 2 on all ranks, changed when rank 1 had $((written >> 10)) KiB, no file, ${SECS}s"; else fail "${WHYS[*]}"; fi
        fi
    fi

    # ---- a directory tree: files of several sizes, modes, an empty directory, a link left out
    TEST=tree-np3-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR"; hosts_dirs 3
        run 3 "$FBCAST" --chunk 1M "$TREE" "$TDIR/hosts/r%r/copy"
        WHYS=()
        [ "$RC" = 0 ] || WHYS+=("mpirun exited with $RC")
        all_codes 3 0 || WHYS+=("$WHY")
        want_list=$(tree_listing "$TREE")
        for r in 1 2; do
            got=$(tree_listing "$TDIR/hosts/r$r/copy" 2>/dev/null)
            [ "$got" = "$want_list" ] || WHYS+=("rank $r: tree differs: $(diff <(echo "$want_list") <(echo "$got") | grep '^[<>]' | head -3 | tr '\n' ' ')")
            [ ! -e "$TDIR/hosts/r$r/copy/a-link" ] || WHYS+=("rank $r: the symbolic link was copied")
            [ "$(stat -c %a "$TDIR/hosts/r$r/copy")" = "$(stat -c %a "$TREE")" ] || WHYS+=("rank $r: top directory mode differs")
        done
        grep -q '1 not regular files left out' "$LOG" || WHYS+=("the root does not report the link left out")
        grep -qE ': ranks 1,2: written 5 files' "$LOG" || WHYS+=("no summary line 'ranks 1,2: written 5 files'")
        if [ ${#WHYS[@]} = 0 ]; then
            run 3 "$FBCAST" "$TREE" "$TDIR/hosts/r%r/copy"
            [ "$RC" = 0 ] || WHYS+=("second run: mpirun exited with $RC")
            grep -qE ': ranks 1,2: skipped as identical 5 files' "$LOG" || WHYS+=("second run: not every file skipped as identical")
        fi
        [ -z "$(temps "$TDIR/hosts")" ] || WHYS+=("temporaries left")
        if [ ${#WHYS[@]} = 0 ]; then pass "types, modes and sha256 of every entry equal; second run skipped all 5 files"; else fail "${WHYS[*]}"; fi
    fi

    # ---- a link inside an existing tree DST is not followed
    TEST=tree-link-in-dest-np3-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR/outside"; hosts_dirs 3
        mkdir -p "$TDIR/hosts/r1/copy" "$TDIR/hosts/r2/copy"
        ln -s "$TDIR/outside" "$TDIR/hosts/r2/copy/sub"
        run 3 "$FBCAST" "$TREE" "$TDIR/hosts/r%r/copy"
        WHYS=()
        [ "$RC" != 124 ] || WHYS+=("timed out")
        all_codes 3 4 || WHYS+=("$WHY")
        [ -z "$(ls -A "$TDIR/outside")" ] || WHYS+=("files written through the link: $(ls -A "$TDIR/outside" | tr '\n' ' ')")
        [ -L "$TDIR/hosts/r2/copy/sub" ] || WHYS+=("the link was replaced")
        grep -q 'rank 2: FAILED: .*sub is a symbolic link where a directory is expected' "$LOG" || WHYS+=("the summary does not name rank 2's link")
        [ -z "$(temps "$TDIR/hosts")" ] || WHYS+=("temporaries left")
        if [ ${#WHYS[@]} = 0 ]; then pass "code 4 on all ranks, nothing written through the link"; else fail "${WHYS[*]}"; fi
    fi

    # ---- umask 077: a 0666 file and 0777 directories arrive 0600 and 0700,
    # as cp without -p gives them
    TEST=umask-077-np3-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR/src/open-dir"; hosts_dirs 3
        printf 'shared\n' > "$TDIR/src/open-dir/f"; printf 'single\n' > "$TDIR/single"
        chmod 666 "$TDIR/src/open-dir/f" "$TDIR/single"; chmod 777 "$TDIR/src" "$TDIR/src/open-dir"
        old_umask=$(umask); umask 077
        run 3 "$FBCAST" "$TDIR/src" "$TDIR/hosts/r%r/copy"; RC1=$RC
        run 3 "$FBCAST" "$TDIR/single" "$TDIR/hosts/r%r/single"
        umask "$old_umask"
        WHYS=()
        [ "$RC1" = 0 ] && [ "$RC" = 0 ] || WHYS+=("mpirun exited with $RC1 (tree), $RC (file)")
        for r in 1 2; do
            got=$(cd "$TDIR/hosts/r$r" && stat -c '%n %a' copy copy/open-dir copy/open-dir/f single 2>&1 | tr '\n' ' ')
            [ "$got" = "copy 700 copy/open-dir 700 copy/open-dir/f 600 single 600 " ] || WHYS+=("rank $r: $got")
            cmp -s "$TDIR/single" "$TDIR/hosts/r$r/single" || WHYS+=("rank $r: contents differ")
        done
        if [ ${#WHYS[@]} = 0 ]; then pass "0600 files and 0700 directories on ranks 1 and 2"; else fail "${WHYS[*]}"; fi
    fi

    # ---- a destination another user owns: fbcast, run as a non-root user,
    # refuses it on every rank and writes nothing anywhere (rank 2's
    # directory is another user's and world-writable; then a tree's DST
    # pre-created by another user, sticky)
    TEST=foreign-owned-dest-np3-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR"; hosts_dirs 3
        if ! as_test_user; then skip "$WHY"
        else
            mkdir -p "$TDIR/codes" "$TDIR/home" "$TDIR/hosts/r1/tree-dst" "$TDIR/src/sub"
            printf 'tree file\n' > "$TDIR/src/sub/f"
            chown -R "$TEST_UID:$TEST_GID" "$TDIR/codes" "$TDIR/home" "$TDIR/hosts"
            chmod 755 "$TDIR"
            chown nobody "$TDIR/hosts/r2"; chmod 777 "$TDIR/hosts/r2"
            LAUNCHER=(setpriv --reuid="$TEST_UID" --regid="$TEST_GID" --clear-groups env HOME="$TDIR/home")
            run 3 "$FBCAST" "$SMALL" "$TDIR/hosts/r%r/data.bin"; RC1=$RC; LOG1=$TDIR/file.log; mv "$LOG" "$LOG1"
            WHYS=()
            [ "$RC1" != 124 ] || WHYS+=("file: timed out")
            all_codes 3 4 || WHYS+=("file: $WHY")
            grep -q 'rank 2: FAILED: .*r2 belongs to uid 65534, not to you' "$LOG1" || WHYS+=("file: the summary does not give rank 2's reason")
            rm -f "$TDIR"/codes/*
            mkdir "$TDIR/hosts/r2/tree-dst"; chown nobody "$TDIR/hosts/r2/tree-dst"; chmod 1777 "$TDIR/hosts/r2/tree-dst"
            chown "$TEST_UID:$TEST_GID" "$TDIR/hosts/r2"; chmod 755 "$TDIR/hosts/r2"
            run 3 "$FBCAST" "$TDIR/src" "$TDIR/hosts/r%r/tree-dst"
            LAUNCHER=()
            [ "$RC" != 124 ] || WHYS+=("tree: timed out")
            all_codes 3 4 || WHYS+=("tree: $WHY")
            grep -q 'rank 2: FAILED: .*tree-dst belongs to uid 65534, not to you' "$LOG" || WHYS+=("tree: the summary does not give rank 2's reason")
            for r in 1 2; do
                left=$(find "$TDIR/hosts/r$r" -mindepth 1 ! -path "$TDIR/hosts/r$r/tree-dst" | tr '\n' ' ')
                [ -z "$left" ] || WHYS+=("rank $r wrote: $left")
            done
            if [ ${#WHYS[@]} = 0 ]; then pass "run as uid $TEST_UID: code 4 on every rank, nothing written, twice"; else cat "$LOG1" >> "$LOG"; fail "${WHYS[*]}"; fi
        fi
    fi

    # ---- directories of another user's above DST (a project leader's
    # /proj/pi holding /proj/pi/you, or root's, which show as uid 65534 in
    # a rootless user namespace): fbcast, run as a non-root user, writes
    # into its own directories below them
    TEST=foreign-ancestor-np3-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR"; hosts_dirs 3
        if ! as_test_user; then skip "$WHY"
        else
            mkdir -p "$TDIR/codes" "$TDIR/home"
            chown -R "$TEST_UID:$TEST_GID" "$TDIR/codes" "$TDIR/home" "$TDIR/hosts"
            chmod 755 "$TDIR"
            chown nobody "$TDIR/hosts"; chmod 2775 "$TDIR/hosts"
            LAUNCHER=(setpriv --reuid="$TEST_UID" --regid="$TEST_GID" --clear-groups env HOME="$TDIR/home")
            run 3 "$FBCAST" "$SMALL" "$TDIR/hosts/r%r/data.bin"
            LAUNCHER=()
            WHYS=()
            [ "$RC" != 124 ] || WHYS+=("timed out")
            all_codes 3 0 || WHYS+=("$WHY")
            for r in 1 2; do
                cmp -s "$SMALL" "$TDIR/hosts/r$r/data.bin" || WHYS+=("rank $r: contents differ")
                owner=$(stat -c %u "$TDIR/hosts/r$r/data.bin" 2>&1)
                [ "$owner" = "$TEST_UID" ] || WHYS+=("rank $r: data.bin owned by $owner")
            done
            if [ ${#WHYS[@]} = 0 ]; then pass "run as uid $TEST_UID below a directory of uid $(id -u nobody)'s: code 0, files written"; else fail "${WHYS[*]}"; fi
        fi
    fi

    # ---- planned files replaced before the root reads them (the test
    # hook pauses the root after planning): a FIFO, then a link to a file
    # outside the tree; every rank fails with the same code, no hang, and
    # nothing from outside the tree arrives
    for swapped in fifo link; do
        TEST=$swapped-swapped-after-plan-np3-$MODE
        want "$TEST" || continue
        TDIR=$WORK/$TEST; mkdir -p "$TDIR/src" "$TDIR/pause"; hosts_dirs 3
        printf 'first\n' > "$TDIR/src/a"; printf 'planned\n' > "$TDIR/src/b"; echo outside-secret > "$TDIR/secret"
        (   # bounded: the root's pause ends after two minutes anyway
            for ((i = 0; i < 1200; i++)); do [ -e "$TDIR/pause/planned" ] && break; sleep 0.1; done
            rm -f "$TDIR/src/b"
            if [ "$swapped" = fifo ]; then mkfifo "$TDIR/src/b"; else ln -s "$TDIR/secret" "$TDIR/src/b"; fi
            touch "$TDIR/pause/go"
        ) &
        swapper=$!
        run 3 env COLL_RDMA_FBCAST_TEST_PAUSE_AFTER_PLAN="$TDIR/pause" "$FBCAST" "$TDIR/src" "$TDIR/hosts/r%r/copy"
        wait "$swapper"
        WHYS=()
        [ -e "$TDIR/pause/planned" ] || WHYS+=("the root did not pause after planning (test hook)")
        [ "$RC" != 124 ] || WHYS+=("timed out")
        all_codes 3 2 || WHYS+=("$WHY")
        grep -qE "rank 0: FAILED: .*src/b( |:)" "$LOG" || WHYS+=("the summary does not give the root's reason")
        ! grep -rqs outside-secret "$TDIR/hosts" || WHYS+=("the file outside the tree was sent")
        for r in 1 2; do [ ! -e "$TDIR/hosts/r$r/copy/b" ] || WHYS+=("rank $r holds b"); done
        [ -z "$(temps "$TDIR/hosts")" ] || WHYS+=("temporaries left")
        if [ ${#WHYS[@]} = 0 ]; then pass "code 2 on every rank in ${SECS}s, nothing from outside the tree"; else fail "${WHYS[*]}"; fi
    done

    # ---- a file sent to existing directories goes inside them, as with cp
    TEST=file-into-directory-np3-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR"; hosts_dirs 3
        run 3 "$FBCAST" "$SMALL" "$TDIR/hosts/r%r"
        WHYS=()
        [ "$RC" = 0 ] || WHYS+=("mpirun exited with $RC")
        all_codes 3 0 || WHYS+=("$WHY")
        for r in 1 2; do cmp -s "$SMALL" "$TDIR/hosts/r$r/small.bin" || WHYS+=("rank $r: no identical $TDIR/hosts/r$r/small.bin"); done
        if [ ${#WHYS[@]} = 0 ]; then pass "DST/small.bin on ranks 1 and 2"; else fail "${WHYS[*]}"; fi
    fi

    # ---- ranks naming one file on one machine: the lowest writes it
    TEST=shared-destination-np4-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR/shared"
        run 4 "$FBCAST" "$SMALL" "$TDIR/shared/data.bin"
        WHYS=()
        [ "$RC" = 0 ] || WHYS+=("mpirun exited with $RC")
        cmp -s "$SMALL" "$TDIR/shared/data.bin" || WHYS+=("the shared copy differs")
        grep -qE ': ranks 2,3: same destination file as rank 1' "$LOG" || WHYS+=("no summary line 'ranks 2,3: same destination file as rank 1'")
        grep -qE ': rank 1: written 1 file' "$LOG" || WHYS+=("rank 1 did not write it")
        [ -z "$(temps "$TDIR/shared")" ] || WHYS+=("temporaries left")
        if [ ${#WHYS[@]} = 0 ]; then pass "written once by rank 1"; else fail "${WHYS[*]}"; fi
    fi

    # ---- hosts sharing a file system, policy never: every receiver is a
    # "machine" of its own (the test hook), so all three write the same
    # path; the first rename wins, the others find its identical copy
    TEST=shared-file-system-never-np4-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR/shared"
        run 4 bash -c 'COLL_RDMA_FBCAST_TEST_MACHINE=m${OMPI_COMM_WORLD_RANK:-$PMIX_RANK} exec "$@"' as-host \
            "$FBCAST" --overwrite never "$SMALL" "$TDIR/shared/data.bin"
        WHYS=()
        [ "$RC" = 0 ] || WHYS+=("mpirun exited with $RC")
        all_codes 4 0 || WHYS+=("$WHY")
        cmp -s "$SMALL" "$TDIR/shared/data.bin" || WHYS+=("the shared copy differs")
        ! grep -q 'same destination file as' "$LOG" || WHYS+=("ranks were taken for one machine (the test hook did not work)")
        [ "$(grep -cE ': ranks? [0-9,]+: written 1 file' "$LOG")" = 1 ] || WHYS+=("not exactly one rank wrote the file")
        grep -qE ': ranks [0-9],[0-9]: skipped as identical 1 file' "$LOG" || WHYS+=("no summary line 'ranks A,B: skipped as identical 1 file'")
        [ -z "$(temps "$TDIR/shared")" ] || WHYS+=("temporaries left")
        if [ ${#WHYS[@]} = 0 ]; then pass "code 0 everywhere: one rank wrote, two found its identical copy"; else fail "${WHYS[*]}"; fi
    fi

    # ---- the C API (libcoll_rdma_fbcast.so, coll_rdma_fbcast.h)
    TEST=c-api-np3-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR/work"
        prog=$WORK/bcast_file_api
        if [ ! -x "$prog" ] && ! mpicc -O2 -Wall -Werror -I"$BUILD/include" "$ROOT/coll-rdma/fbcast/tests/c/bcast_file_api.c" \
                -L"$BUILD/lib" -Wl,-rpath,"$BUILD/lib" -lcoll_rdma_fbcast -o "$prog" >"$TDIR/mpicc.log" 2>&1; then
            fail "mpicc failed: $(head -5 "$TDIR/mpicc.log" | tr '\n' ' ')"
        else
            run 3 "$prog" "$TDIR/work"
            WHYS=()
            [ "$RC" = 0 ] || WHYS+=("mpirun exited with $RC")
            cases=$(grep -c '^PASS c-api-' "$LOG")
            grep '^FAIL c-api-' "$LOG" | sed 's/^/    /'
            [ "$cases" = 8 ] || WHYS+=("$cases of 8 cases passed")
            [ -z "$(temps "$TDIR/work")" ] || WHYS+=("temporaries left")
            if [ ${#WHYS[@]} = 0 ]; then pass "8 cases: codes identical on every rank, contents checked"; else fail "${WHYS[*]}"; fi
        fi
    fi

    # ---- fbcast starting mpirun itself (--hosts localhost,localhost), also
    # from an environment that looks like a rank's (a script under Slurm)
    TEST=launcher-hosts-localhost-$MODE
    if want "$TEST"; then
        TDIR=$WORK/$TEST; mkdir -p "$TDIR"
        margs=()
        for a in --oversubscribe "${MPI_OPTS[@]}"; do margs+=("--mpirun-arg=$a"); done
        LOG=$TDIR/run.log
        t0=$SECONDS
        env PMI_RANK=5 "${RANK_ENV[@]}" timeout -k 10 "$(scaled_timeout)" "$FBCAST" --hosts localhost,localhost "${margs[@]}" \
            "$SMALL" "$TDIR/r%r.bin" </dev/null >"$LOG" 2>&1
        RC=$?
        WHYS=()
        [ "$RC" = 0 ] || WHYS+=("fbcast exited with $RC")
        cmp -s "$SMALL" "$TDIR/r1.bin" || WHYS+=("the second rank's copy differs or is missing")
        [ ! -e "$TDIR/r0.bin" ] || WHYS+=("the root wrote a copy")
        if [ ${#WHYS[@]} = 0 ]; then pass "two ranks, the second wrote DST, $((SECONDS - t0))s"; else fail "${WHYS[*]}"; fi
    fi
done

say "$PASSED passed, $FAILED failed$([ "$SKIPPED" = 0 ] || echo ", $SKIPPED skipped")"
[ "$FAILED" = 0 ]
