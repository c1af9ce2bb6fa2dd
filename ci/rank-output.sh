#!/bin/sh
# usage: ci/rank-output.sh DIR PROGRAM [ARGS...]
# Sends this rank's stdout and stderr to DIR/1/rank.<N>/stdout and .../stderr
# (N: its rank in MPI_COMM_WORLD), then becomes PROGRAM: the layout that
# Open MPI 4's `mpirun --output-filename DIR:nocopy` makes, for Open MPI 5,
# whose `mpirun --output dir=DIR:nocopy` loses output here (PMIx 5.0.7:
# every stream after the first of a rank fails with PMIX_ERR_EXISTS, since
# the rank's directory exists by then; docs/ompi5-port.md).
dir=$1
shift
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:?neither OMPI_COMM_WORLD_RANK nor PMIX_RANK is set}}
mkdir -p "$dir/1/rank.$rank" || exit 1
exec >"$dir/1/rank.$rank/stdout" 2>"$dir/1/rank.$rank/stderr"
exec "$@"
