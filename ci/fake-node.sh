#!/usr/bin/env bash
# Runs a program as if on a node of its own: rank r acts on node
# r / RANKS_PER_NODE (or, with --round-robin N, on node r % N, as
# `--map-by node` places ranks on real nodes), with that node's host name
# (a UTS namespace) and that node's table of barrier counters (CRTEST_SHM).
# One machine then exercises the test library's across-node checks, which
# real multi-node runs (the Soft-RoCE guests) rely on. Needs root
# (unshare --uts).
# usage: ci/fake-node.sh RANKS_PER_NODE PROGRAM [ARGS...]
#        ci/fake-node.sh --round-robin NODES PROGRAM [ARGS...]
set -eu
rank=${OMPI_COMM_WORLD_RANK:?not started by Open MPI\'s mpirun}
if [ "$1" = --round-robin ]; then
    node=$((rank % $2))
    shift 2
else
    node=$((rank / $1))
    shift
fi
export CRTEST_SHM="/crtest.${PMIX_NAMESPACE:-job}.${CRTEST_RUN:-}.node$node"
exec unshare --uts sh -c 'hostname "$0" && exec "$@"' "crtest-node$node" "$@"
