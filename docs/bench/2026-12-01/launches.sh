#!/bin/bash
# Old and new coll rdma, one launch each per round (order alternating), so
# that each launch's own luck (where its shared memory, heap and stack
# landed) is a sample, not a constant of the comparison:
#
#   launches.sh ROUNDS COUNT COLL OUT
#
# COUNT floats, COLL as launch_latency (0 reduce, 1 allreduce, 2 barrier,
# 3 bcast); OLD and NEW are component directories (defaults below); each
# launch's figure is launch_latency's 10th percentile over 300 samples of
# 100 calls; OUT gets "old new loadavg" per round (launch-stats.py reads it).
# LAUNCH_LATENCY is the compiled launch_latency.c (mpicc -O2).
rounds=$1 count=$2 coll=$3 out=$4
OLD=${OLD:-/work/wt-before24/build/components} NEW=${NEW:-$PWD/build/components}
BIN=${LAUNCH_LATENCY:-/tmp/launch_latency}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {
    mpirun -np 2 --bind-to core --mca btl self,vader --mca mca_base_component_path "SYS_DEFAULT:$1" \
        --mca coll_rdma_priority 90 "$BIN" 300 100 "$count" "$coll" 2>/dev/null | awk '{print $3}'
}
: >"$out"
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then a=$(run "$OLD"); b=$(run "$NEW"); else b=$(run "$NEW"); a=$(run "$OLD"); fi
    echo "$a $b $(cut -d' ' -f1 /proc/loadavg)" >>"$out"
done
