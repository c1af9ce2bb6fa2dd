# Sourced by ci/fbcast-tests.sh once per mode (MODE, with mode_options
# applied; the helpers are in ci/fbcast-tests.sh and ci/fbcast-lib.sh):
# directory trees: sizes, modes, links left out, a link in an existing DST
# not followed, the umask applied as cp does.

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
