#!/usr/bin/env bash
# Runs a program with one MCA parameter set differently on even and odd
# ranks (through the environment, which Open MPI reads at MPI_Init), for the
# tests of what coll rdma does when ranks disagree.
# usage: ci/per-rank-mca.sh NAME EVEN_VALUE ODD_VALUE PROGRAM [ARGS...]
set -eu
name=$1 even=$2 odd=$3
shift 3
rank=${OMPI_COMM_WORLD_RANK:?not started by Open MPI\'s mpirun}
if [ $((rank % 2)) = 0 ]; then value=$even; else value=$odd; fi
export "OMPI_MCA_$name=$value"
exec "$@"
