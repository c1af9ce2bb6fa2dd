# Sourced by ci/fbcast-tests.sh once per mode (MODE, with mode_options
# applied; the helpers are in ci/fbcast-tests.sh and ci/fbcast-lib.sh): a
# destination that fails on one rank only (read-only, full): the same code
# on every rank, no file and no temporary anywhere.

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
