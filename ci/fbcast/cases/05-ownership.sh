# Sourced by ci/fbcast-tests.sh once per mode (MODE, with mode_options
# applied; the helpers are in ci/fbcast-tests.sh and ci/fbcast-lib.sh):
# other users' files and directories, and planned files replaced before the
# root reads them.

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
