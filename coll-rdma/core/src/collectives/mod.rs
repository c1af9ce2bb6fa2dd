//! The collective algorithms, one folder each: `barrier` (dissemination,
//! two-level, autotune), `allreduce` (exchange and tree, autotune),
//! `reduce`, `bcast` (multicast window, put tree, single copy, two-level),
//! and `large_reduction`, the long-message paths allreduce and reduce share
//! (parallel reduction and its read tree, the ring, their buffers).
//! `autotune_trial` is what the barrier's and the allreduce's autotunes
//! share (candidates, medians). They are written
//! against btl-ibmc's capability traits (each names the ones it uses) and
//! know nothing of Open MPI: `glue` calls them (`glue/mpi_<name>.rs` is the
//! MPI_<Name> entry point).

pub mod allreduce;
pub mod autotune_trial;
pub mod barrier;
pub mod bcast;
pub mod large_reduction;
pub mod reduce;
