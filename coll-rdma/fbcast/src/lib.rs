//! File distribution over MPI_Bcast: the root sends a file or a directory
//! tree to every other rank of a communicator, each writing it to its own
//! destination path. Safe against partial files and with one outcome on
//! every rank; see include/coll_rdma_fbcast.h (the C API) and
//! docs/fbcast.md.
//!
//! A library of its own, apart from the coll rdma component (which Open MPI
//! dlopens and applications must not link): it calls only the public MPI
//! API, so whatever serves MPI_Bcast (coll rdma or the stock components)
//! carries the data.

pub mod capi;
pub mod cleanup;
mod dest;
pub mod error;
pub mod host;
pub mod mpi;
mod modes;
pub mod policy;
mod read_ahead;
pub mod record;
mod source;
pub mod staging;
pub mod transfer;
mod trusted_dir;
mod write_behind;

pub use error::{ErrorCode, Failure};
pub use mpi::Comm;
pub use policy::Policy;
pub use transfer::{DEFAULT_CHUNK_BYTES, LocalReport, Options, Progress, Report, bcast_path};
