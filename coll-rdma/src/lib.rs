//! coll rdma: an Open MPI collective component. The collectives are written
//! against btl-ibmc's transport traits and know nothing of Open MPI; `glue` is
//! the only place that touches Open MPI's structures.
//!
//! * `collectives`: one algorithm per MPI collective;
//! * `patterns`: the put streams, trees and window carving they share;
//! * `layout`: where each collective's region sits in the window;
//! * `glue`: the Open MPI component, its parameters and entry points.

pub mod collectives;
pub mod layout;
pub mod patterns;
pub mod reduction;
pub mod side_progress;

mod glue;

pub use side_progress::BcastProgress;
