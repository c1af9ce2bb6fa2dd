#!/usr/bin/env bash
# Runs a program as if on a node of its own: rank r acts on node
# r / RANKS_PER_NODE, with that node's host name (a UTS namespace) and that
# node's table of barrier counters (CRTEST_SHM). One machine then exercises
# the test library's across-node barrier check, which real multi-node runs
# (the Soft-RoCE guests) rely on. Needs root (unshare --uts).
# usage: ci/fake-node.sh RANKS_PER_NODE PROGRAM [ARGS...]
set -eu
per=$1
shift
rank=${OMPI_COMM_WORLD_RANK:?not started by Open MPI\'s mpirun}
node=$((rank / per))
export CRTEST_SHM="/crtest.${PMIX_NAMESPACE:-job}.${CRTEST_RUN:-}.node$node"
exec unshare --uts sh -c 'hostname "$0" && exec "$@"' "crtest-node$node" "$@"
