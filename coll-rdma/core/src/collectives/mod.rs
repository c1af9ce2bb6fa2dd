//! The collective algorithms, one folder or file each. They are written
//! against btl-ibmc's capability traits (each names the ones it uses) and
//! know nothing of Open MPI: `glue` calls them (`glue/mpi_<name>.rs` is the
//! MPI_<Name> entry point).

pub mod allreduce;
pub mod allreduce_autotune;
pub mod autotune_trial;
pub mod barrier;
pub mod barrier_autotune;
pub mod barrier_run;
pub mod barrier_two_level;
pub mod bcast;
pub mod parallel_reduction;
pub mod read_tree;
pub mod reduction_buffers;
pub mod reduce;
pub mod ring_reduction;
