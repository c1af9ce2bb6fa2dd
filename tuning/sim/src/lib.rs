//! coll-rdma-sim: runs coll rdma's own collective schedules (the round,
//! tree and co-root tables of `tuning` and `btl_ibmc::rmcast`, and the
//! choices the component makes from its models) over a LogGP network with
//! a shared-memory level inside each node and a lossy multicast, from 2 to
//! 16384 nodes of 1 to 128 ranks; next to the two-level schedules of
//! issue 14 and Open MPI's algorithms. `make sim` writes `docs/scale/`.

pub mod allreduce;
pub mod barrier;
pub mod bcast;
pub mod calibration;
pub mod measured_calibration;
pub mod measured_pairs;
pub mod ranks;
pub mod scale;
pub mod sources;
pub mod validation;

pub use calibration::Calibration;
pub use ranks::Ranks;
