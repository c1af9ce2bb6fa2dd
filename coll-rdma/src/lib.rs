//! coll rdma: an Open MPI collective component. The collectives live in
//! coll-rdma-core (coll-rdma/core), written against btl-ibmc's transport
//! traits, knowing nothing of Open MPI; this crate adds `glue`, the only place
//! that touches Open MPI's structures. The core's modules are re-exported
//! under their old paths, so `crate::collectives::...` reads the same here.
//!
//! * `collectives`, `patterns`, `layout`, `reduction`, `side_progress`,
//!   `word_max`: from coll-rdma-core (its crate docs say what each holds);
//! * `glue`: the Open MPI component, its parameters and entry points.

pub use coll_rdma_core::{collectives, layout, patterns, reduction, schedule, schedule_queue, select, side_progress, word_max, BcastProgress, StallClock, StallLimits, Stuck};

mod glue;
