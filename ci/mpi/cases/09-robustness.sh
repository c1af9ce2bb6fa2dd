# Sourced by ci/mpi-tests.sh (see its header and ci/mpi/run.sh for run_test,
# CHECKS and the variables these cases read) before 09-robustness.toml:
# section 13 (component mode), a setup killed at its worst moment, which is
# more than one mpirun (ci/mpi/special.sh); the rest of the theme is the
# table's.

# 13. a setup killed at its worst moment leaks nothing past the next job
killed_creator_test "shm-killed-creator-reaped-np2"
