//! coll rdma's core: the collectives, the patterns they share and the window
//! layout, written against btl-ibmc's transport traits. Nothing here knows Open
//! MPI: the crate builds and its tests run (on btl-ibmc's in-process fabric)
//! without Open MPI, mpicc, libibverbs or libclang. Its dependency tree holds
//! neither ompi-sys nor rdma-sys; `make check` fails if one creeps in
//! (ci/core-deps-check.sh). The component, coll-rdma's cdylib, re-exports
//! these modules and adds the Open MPI adapter (`glue`).
//!
//! * `collectives`: one algorithm per MPI collective;
//! * `patterns`: the put streams, trees and window carving they share;
//! * `layout`: where each collective's region sits in the window;
//! * `reduction`: the operation a reduction applies, as the collectives see it;
//! * `schedule`: the resumable form of a collective (`Schedule`), and
//!   `schedule_queue` the order in which a communicator's runs advance;
//! * `select`: which path a call takes (one pure selector per collective);
//! * `side_progress`: serving a bcast's background work from another
//!   collective's waits;
//! * `word_max`: agreeing on u64 words through one allreduce (their maximum).

pub mod collectives;
pub mod layout;
pub mod patterns;
pub mod reduction;
pub mod schedule;
pub mod schedule_queue;
pub mod select;
pub mod side_progress;
pub mod word_max;

pub use patterns::meet::{StallClock, StallLimits, Stuck};
pub use side_progress::BcastProgress;
