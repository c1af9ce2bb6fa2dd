# Sourced by ci/fbcast-tests.sh once per mode (MODE, with mode_options
# applied; the helpers are in ci/fbcast-tests.sh and ci/fbcast-lib.sh): the
# C API, and fbcast starting mpirun itself.

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
