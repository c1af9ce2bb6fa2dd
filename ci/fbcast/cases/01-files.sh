# Sourced by ci/fbcast-tests.sh once per mode (MODE, with mode_options
# applied; the helpers are in ci/fbcast-tests.sh and ci/fbcast-lib.sh): one
# file to every rank: 64 MiB checked end to end, policy never over a
# different file, a missing source (the same error everywhere).

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
