//! coll rdma: an Open MPI collective component. The collectives are written
//! against btl-ibmc's transport traits and know nothing of Open MPI; `glue` is
//! the only place that touches Open MPI's structures.

pub mod allreduce;
pub mod barrier;
pub mod bcast;
pub mod bcast_tree;
pub mod layout;
pub mod reduce;
pub mod reduction;
pub mod side_progress;

mod glue;

pub use side_progress::BcastProgress;
