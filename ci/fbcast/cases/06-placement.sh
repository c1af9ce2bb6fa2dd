# Sourced by ci/fbcast-tests.sh once per mode (MODE, with mode_options
# applied; the helpers are in ci/fbcast-tests.sh and ci/fbcast-lib.sh):
# where a file lands: inside existing directories, once per machine, once on
# a file system hosts share.

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
