# The installed coll-rdma-selfcheck as a user runs it, for the Open MPI 5
# checks of `make install` (ci/ompi5/user-tests.sh, ci/ompi5/source-build.sh;
# sourced). The caller defines pass NAME and fail NAME WHY, and TIMEOUT
# (seconds for one self-check).

# selfcheck_run HOME SELFCHECK LOG [ENV_FILE]: SELFCHECK with HOME as the
# user's home, ENV_FILE (make install's environment file) sourced first
# when given; its output in LOG, its exit status in SELFCHECK_STATUS
selfcheck_run() {
    if [ $# -ge 4 ]; then
        HOME=$1 timeout -k 5 "$TIMEOUT" bash -c '. "$1" && "$2"' _ "$4" "$2" >"$3" 2>&1
    else
        HOME=$1 timeout -k 5 "$TIMEOUT" "$2" >"$3" 2>&1
    fi
    SELFCHECK_STATUS=$?
}

# check_selfcheck_not_served HOME SELFCHECK LOG: without the environment
# file, where mpirun replaces the ranks' component path, the self-check
# must say "not served" (exit 3) and that the path leaves the install
# directory out (test selfcheck-without-env)
check_selfcheck_not_served() {
    selfcheck_run "$@"
    if [ "$SELFCHECK_STATUS" = 3 ] && grep -q 'leaves out' "$3"; then
        pass selfcheck-without-env
    else
        fail selfcheck-without-env "expected exit 3 (not served) naming the component path mpirun sets (got $SELFCHECK_STATUS)"
    fi
}

# check_selfcheck_ok NAME HOME SELFCHECK LOG [ENV_FILE]: the self-check
# (after ENV_FILE, when given) must say OK, coll rdma served (test NAME)
check_selfcheck_ok() {
    local name=$1
    shift
    selfcheck_run "$@"
    if [ "$SELFCHECK_STATUS" = 0 ] && grep -q 'coll-rdma-selfcheck: OK' "$3"; then
        pass "$name"
    else
        fail "$name" "expected OK under plain mpirun${4:+ after sourcing $4} (got exit $SELFCHECK_STATUS)"
    fi
}
