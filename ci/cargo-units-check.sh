#!/usr/bin/env bash
# make check's cargo builds must not compile a unit twice: cargo resolves
# features over the packages one invocation names, so an invocation naming
# other packages than the one before it may get a shared dependency with
# other features, which is a new unit (another hash), compiled again.
# Until issue 34, `-p coll-rdma-fbcast` after `-p coll-rdma` compiled 8
# units again (bindgen, regex, ...), and the Soft-RoCE stage's
# `-p btl-ibmc --test verbs_device` 16 (btl-ibmc itself, rdma-sys, ...).
#
# For each later invocation below, no unit it would build (cargo's unit
# graph: package, target, mode, profile, features and, recursively, the
# same of its dependencies, which is what cargo's artefact hash covers)
# may be an earlier invocation's package, target, mode and profile with
# other features or dependencies. Crates no earlier invocation builds
# (fbcast's own dependencies) are new, not built twice. The unit graph is an
# unstable cargo option: RUSTC_BOOTSTRAP=1 lets the stable cargo print it;
# nothing is compiled.
#
# The invocations are make check's, in its order (keep them in step with
# the Makefile's build, build-fbcast and test-rust, ci/tune.sh,
# ci/mpi-tests.sh's case runner and ci/rxe-tests.sh's device test).
#
# usage: ci/cargo-units-check.sh   (last line: "cargo units: N passed, N failed")
set -u
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
# python3 comes with ci/setup.sh (make check installs it): without it the
# check fails rather than pass unchecked.
command -v python3 >/dev/null || { echo "cargo units: 0 passed, 1 failed (no python3: run ci/setup.sh)"; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
passed=0 failed=0

graph() { # NAME CARGO-ARGS...: the unit graph of one invocation into $scratch/NAME.json
    local name=$1; shift
    RUSTC_BOOTSTRAP=1 "$CARGO" "$@" -Z unstable-options --unit-graph >"$scratch/$name.json" 2>"$scratch/$name.err" ||
        { echo "FAILED: cargo $* --unit-graph: $(tail -n 3 "$scratch/$name.err" | tr '\n' ' ')"; return 1; }
}

# units of LATER that an earlier invocation builds differently: the same
# package, target, mode and profile, another key (features, or a
# dependency's). A crate the earlier ones do not build at all (fbcast's
# own dependencies) is new, not built twice.
new_units() { # LATER EARLIER... (names given to graph)
    local name paths=()
    for name in "$@"; do paths+=("$scratch/$name.json"); done
    python3 - "${paths[@]}" <<'PY'
import json, sys
def units(path):
    us = json.load(open(path))["units"]
    memo = {}
    def key(i):
        if i not in memo:
            u, p = us[i], us[i]["profile"]
            memo[i] = (u["pkg_id"], u["target"]["name"], tuple(u["target"]["kind"]), u["mode"],
                       tuple(sorted((k, str(v)) for k, v in p.items())), tuple(u["features"]),
                       tuple(sorted(key(d["index"]) for d in u["dependencies"])))
        return memo[i]
    return {key(i): us[i] for i in range(len(us))}
later = units(sys.argv[1])
earlier = set()
for path in sys.argv[2:]:
    earlier |= set(units(path))
built = {k[:5] for k in earlier}
for k, u in sorted(later.items(), key=lambda kv: kv[0][:4]):
    if k not in earlier and k[:5] in built:
        # "registry+...#regex@1.13.1", "path+file:///.../btl-ibmc#0.1.0"
        source, _, version = u["pkg_id"].partition("#")
        name = version.split("@")[0] if "@" in version else source.rstrip("/").split("/")[-1]
        print(f"{name} {u['target']['name']} ({u['mode']})")
PY
}

expect_no_new() { # WHAT LATER EARLIER...
    local what=$1 out; shift
    out=$(new_units "$@") || { failed=$((failed + 1)); echo "FAILED: $what: the comparison failed"; return; }
    if [ -z "$out" ]; then passed=$((passed + 1)); echo "ok: $what"
    else failed=$((failed + 1)); echo "FAILED: $what compiles again: $(paste -sd, <<<"$out")"; fi
}

graph component build --release -p coll-rdma &&
graph fbcast build --release -p coll-rdma -p coll-rdma-fbcast &&
graph tuner build --release -p tuning --bin coll-rdma-tune &&
graph runner build --profile release-tests -p mpi-runner &&
graph tests test --profile release-tests --workspace --no-run &&
graph device test --profile release-tests --workspace --test verbs_device --no-run || {
    echo "cargo units: $passed passed, 1 failed"; exit 1; }

expect_no_new "make build-fbcast reuses the component's units" fbcast component
expect_no_new "ci/tune.sh reuses make build's units" tuner component fbcast
expect_no_new "make test-rust reuses the case runner's units" tests runner
expect_no_new "ci/rxe-tests.sh's device test reuses make test-rust's units" device runner tests
# the check can fail: fbcast's package alone, as make build-fbcast built it
if ! graph fbcast-alone build --release -p coll-rdma-fbcast; then
    failed=$((failed + 1))
elif [ -n "$(new_units fbcast-alone component)" ]; then
    passed=$((passed + 1)); echo "ok: the check sees that -p coll-rdma-fbcast alone compiles units again"
else
    failed=$((failed + 1)); echo "FAILED: -p coll-rdma-fbcast alone compiles nothing again: this check no longer reads the unit graph right"
fi
echo "cargo units: $passed passed, $failed failed"
[ "$failed" = 0 ]
