//! Which path one collective call takes: for each collective a pure
//! selector (`allreduce::select`, `reduce::select`, `bcast::select`,
//! `barrier::select`) from the call's shape and the communicator's plan to
//! a `Choice`: a native path (and its variant) or the module underneath,
//! with the reason.
//!
//! Invariant: every input a selector reads is the same on every rank of
//! the call (MPI requires the same count, datatype signature, op and root
//! everywhere; the plan is agreed at setup), so every rank makes the same
//! choice before any of them commits. The one exception is whether this
//! rank's own datatype is contiguous (`DataShape::Packable`), which only
//! decides whether this rank packs, never the path.
//!
//! The Open MPI adapter builds the shape from the call's arguments and the
//! plan once per communicator, runs what the choice names, and reports the
//! same choice (its verbose words come from `Handover`'s `Display`).
//!
//! `policy` holds the choices made once per communicator that the plan
//! rests on (configurations, radix, autotune candidates). `memo`'s
//! `Decisions` owns a communicator's plan and remembers the allreduce's
//! and reduce's last answer, so that a loop of calls of one shape asks
//! the selector once; any change of the plan forgets it.

pub mod allreduce;
pub mod barrier;
pub mod bcast;
mod handover;
mod memo;
pub mod policy;
pub mod reduce;

use std::ffi::c_int;

use btl_ibmc::shm::NodeGroups;

pub use handover::{Handover, NotContiguous};
pub use memo::Decisions;

use crate::collectives::large_reduction::ring::RingLengths;

/// The collectives coll rdma serves, for counting and for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    Barrier,
    Allreduce,
    Reduce,
    Bcast,
    Ibarrier,
    /// Starts of persistent barriers (MPI_Barrier_init, MPIX_Barrier_init).
    BarrierInit,
    Ibcast,
    Iallreduce,
    Ireduce,
    BcastInit,
    AllreduceInit,
    ReduceInit,
}

impl Collective {
    pub const ALL: [Collective; 12] = [
        Collective::Barrier,
        Collective::Allreduce,
        Collective::Reduce,
        Collective::Bcast,
        Collective::Ibarrier,
        Collective::BarrierInit,
        Collective::Ibcast,
        Collective::Iallreduce,
        Collective::Ireduce,
        Collective::BcastInit,
        Collective::AllreduceInit,
        Collective::ReduceInit,
    ];

    /// The non-blocking and persistent forms, reported only when called.
    pub fn is_blocking(self) -> bool {
        matches!(self, Collective::Barrier | Collective::Allreduce | Collective::Reduce | Collective::Bcast)
    }

    pub fn name(self) -> &'static str {
        match self {
            Collective::Barrier => "barrier",
            Collective::Allreduce => "allreduce",
            Collective::Reduce => "reduce",
            Collective::Bcast => "bcast",
            Collective::Ibarrier => "ibarrier",
            Collective::BarrierInit => "barrier_init",
            Collective::Ibcast => "ibcast",
            Collective::Iallreduce => "iallreduce",
            Collective::Ireduce => "ireduce",
            Collective::BcastInit => "bcast_init",
            Collective::AllreduceInit => "allreduce_init",
            Collective::ReduceInit => "reduce_init",
        }
    }
}

/// One collective call as the selectors see it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CallShape {
    /// The count as the caller passed it (negative is handed over).
    pub count: c_int,
    pub data: DataShape,
    /// The op is commutative (reductions only; ignored elsewhere).
    pub commutative: bool,
    /// The root (reduce and bcast only; ignored elsewhere).
    pub root: usize,
}

/// What `count` elements of the call's datatype are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DataShape {
    /// One gap-free byte range of `bytes`, elements of `element_bytes`.
    Contiguous { bytes: usize, element_bytes: usize },
    /// `bytes` of data (the signature's size) that this rank must pack:
    /// served by bcast only; a reduction hands it over with `why`.
    Packable { bytes: usize, why: NotContiguous },
    /// Neither span nor signature could be read.
    Unreadable(NotContiguous),
}

/// What a selector decided: a native path, or the module underneath.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Choice<Path> {
    Native(Path),
    HandOver(Handover),
}

/// The communicator's agreed plan: everything the selectors read besides
/// the call, built once when the communicator is ready (the same on every
/// rank).
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub size: usize,
    pub allreduce: ReductionPlan,
    pub reduce: ReductionPlan,
    pub bcast: BcastPlan,
    /// The two-level barrier serves (the communicator spans nodes).
    pub two_level_barrier: bool,
    /// Set when only the nodes' leaders hold queue pairs across nodes.
    pub leaders_only: Option<LeadersOnly>,
}

/// The paths of one reduction collective and their limits.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReductionPlan {
    /// `coll_rdma_<collective>_max_bytes`: above it a commutative op goes
    /// to the module underneath unless the parallel reduction or the ring
    /// takes the length.
    pub max_bytes: Option<usize>,
    /// The tree's segment: a longer element cannot travel down it.
    pub segment_bytes: usize,
    /// The parallel reduction's threshold; `None` where ranks cannot read
    /// each other's memory.
    pub parallel_from: Option<usize>,
    pub ring: RingLengths,
    /// The ring's slot: a longer element cannot go around.
    pub ring_slot_bytes: usize,
    /// The exchange's largest length (allreduce on a flat tree only).
    pub exchange_max_bytes: Option<usize>,
}

impl ReductionPlan {
    /// Whether a `bytes`-byte call is reduced in parallel.
    pub fn parallel_takes(&self, size: usize, bytes: usize) -> bool {
        self.parallel_from.is_some_and(|from| bytes >= from) && bytes > 0 && size > 1
    }

    /// Whether a `bytes`-byte call of `element_bytes` elements goes around
    /// the ring (where the parallel reduction does not take it).
    pub fn ring_takes(&self, size: usize, bytes: usize, element_bytes: usize, commutative: bool) -> bool {
        let within = self.ring.from.is_some_and(|from| bytes >= from) && self.ring.up_to.is_none_or(|up_to| bytes <= up_to);
        !self.parallel_takes(size, bytes) && commutative && within && bytes > 0 && size > 1 && element_bytes <= self.ring_slot_bytes
    }
}

/// The bcast's paths and their limits.
#[derive(Clone, Copy, Debug, Default)]
pub struct BcastPlan {
    /// `coll_rdma_bcast_max_bytes` as agreed for the transport.
    pub window_max_bytes: Option<usize>,
    /// `coll_rdma_bcast_single_copy_max_bytes`.
    pub single_copy_max_bytes: Option<usize>,
    /// Single copy's threshold; `None` where ranks cannot read each
    /// other's memory.
    pub single_copy_from: Option<usize>,
    /// The longest message the window's protocol can carry.
    pub window_serves_up_to: usize,
}

/// Where only the nodes' leaders connect across nodes: the nodes, and
/// which schedules stayed flat (and so would cross from a non-leader).
#[derive(Clone, Debug)]
pub struct LeadersOnly {
    pub nodes: NodeGroups,
    pub flat: FlatSchedules,
}

/// Which collectives stayed flat on a communicator that spans nodes: the
/// reductions where nodes are placed round robin or the window lacks the
/// two-level tree's rings, bcast where it lacks room for the stages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlatSchedules {
    pub allreduce: bool,
    pub reduce: bool,
    pub bcast: bool,
}

impl LeadersOnly {
    /// Why an allreduce cannot run, if it cannot.
    pub fn allreduce(&self) -> Result<(), Handover> {
        if self.flat.allreduce {
            return Err(Handover::OnlyLeadersConnected("allreduce runs flat on this communicator"));
        }
        Ok(())
    }

    pub fn bcast(&self) -> Result<(), Handover> {
        if self.flat.bcast {
            return Err(Handover::OnlyLeadersConnected("bcast runs flat on this communicator"));
        }
        Ok(())
    }
}

/// The count as a length, or the hand-over a negative one gets.
fn count_of(shape: &CallShape) -> Result<usize, Handover> {
    usize::try_from(shape.count).map_err(|_| Handover::NegativeCount(shape.count))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The plan every selector's table starts from; each table names the
    /// values it relies on, so that a row's expected path can be checked by
    /// hand.
    pub(crate) fn plan() -> Plan {
        Plan {
            size: 4,
            allreduce: ReductionPlan {
                max_bytes: Some(8192),
                segment_bytes: 4096,
                parallel_from: Some(1 << 20),
                ring: RingLengths { from: Some(65536), up_to: None },
                ring_slot_bytes: 512,
                exchange_max_bytes: Some(1024),
            },
            reduce: ReductionPlan {
                max_bytes: Some(16384),
                segment_bytes: 2048,
                parallel_from: Some(1 << 18),
                ring: RingLengths { from: Some(1 << 17), up_to: Some(1 << 21) },
                ring_slot_bytes: 512,
                exchange_max_bytes: None,
            },
            bcast: BcastPlan {
                window_max_bytes: Some(65536),
                single_copy_max_bytes: None,
                single_copy_from: Some(1 << 18),
                window_serves_up_to: 1 << 20,
            },
            two_level_barrier: false,
            leaders_only: None,
        }
    }

    pub(crate) fn shape(count: c_int, data: DataShape, commutative: bool) -> CallShape {
        CallShape { count, data, commutative, root: 0 }
    }

    pub(crate) fn contiguous(bytes: usize, element_bytes: usize) -> DataShape {
        DataShape::Contiguous { bytes, element_bytes }
    }
}
