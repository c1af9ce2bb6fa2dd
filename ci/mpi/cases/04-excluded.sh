# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read): section 3, coll rdma excluded:
# no trace of it, results still right.

# 3. excluded: no trace of coll rdma, results still right
CHECKS=(quiet); run_test "excluded-coll-^rdma" 3 ok --mca coll '^rdma' --mca coll_rdma_verbose 1 -- coll_mix -i "$CM_I"
