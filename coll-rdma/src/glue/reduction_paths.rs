//! Which native path serves an allreduce or reduce: the parallel
//! reduction, the ring, or (what neither takes) the tree. Both collectives
//! decide alike, each with its own parallel reduction and ring lengths,
//! and serve the ring alike.

use crate::collectives::parallel_reduction::ParallelReduction;
use crate::collectives::reduction_buffers::{Gather, ReductionBuffers};
use crate::collectives::ring_reduction::{RingLengths, RingReduction};
use crate::side_progress::BcastProgress;
use btl_ibmc::SelectedTransport;

use super::comm_state::{Collective, Native, ReadyComm, Step};
use super::reduction_call::{contribution_is_in_receive_buffer, span_bytes, span_bytes_mut, FoldOrder, NativeMessage};
use super::saved::ReductionCall;

/// One collective's choice between its native paths, on inputs that are
/// the same on every rank (length, op, the limits agreed at setup).
pub(super) struct ReductionPaths<'a> {
    transport: &'a SelectedTransport,
    parallel: &'a ParallelReduction,
    ring: &'a RingReduction,
    ring_lengths: RingLengths,
    commutative: bool,
}

impl ReductionPaths<'_> {
    /// Whether `bytes` of `element_bytes`-byte elements go around the ring.
    pub(super) fn around_the_ring(&self, bytes: usize, element_bytes: usize) -> bool {
        !self.parallel.applies(self.transport, bytes) && self.ring.applies(bytes, element_bytes, self.commutative, self.ring_lengths)
    }

    /// Whether a path other than the tree takes `bytes`, asked before the
    /// datatype is read: an element too long for a ring slot then takes
    /// the tree beyond the size limit (only with a slot shorter than the
    /// tree's segment, which coll_rdma_ring_segment_size allows).
    pub(super) fn parallel_or_ring(&self, bytes: usize) -> bool {
        self.parallel.applies(self.transport, bytes) || self.around_the_ring(bytes, 1)
    }
}

impl ReadyComm {
    /// The paths of allreduce (`Gather::All`) or reduce (`Gather::Root`)
    /// for an op of `order`.
    pub(super) fn reduction_paths(&self, gather: Gather, order: FoldOrder) -> ReductionPaths<'_> {
        let (parallel, ring_lengths) = match gather {
            Gather::All => (self.allreduce.parallel(), self.limits.allreduce_ring),
            Gather::Root(_) => (self.reduce.parallel(), self.limits.reduce_ring),
        };
        ReductionPaths { transport: &self.transport, parallel, ring: &self.ring, ring_lengths, commutative: order == FoldOrder::Any }
    }
}

impl Native<'_> {
    /// Serves `call` around the ring: an allreduce (`Gather::All`) or a
    /// reduce to the root (`Gather::Root`).
    pub(super) fn reduction_around_the_ring(&mut self, call: &ReductionCall, message: &NativeMessage, gather: Gather) -> Step {
        let ready = &mut *self.ready;
        let transport = &ready.transport;
        let span = message.span;
        let gathers = gather == Gather::All || gather == Gather::Root(ready.id.rank);
        let recv: &mut [u8] = if gathers {
            // SAFETY: where the result lands MPI guarantees recv holds
            // `count` elements of `dtype`, which `span` describes; nothing
            // else touches it during the call. Elsewhere (a reduce's other
            // ranks) recv is not significant and is not touched.
            unsafe { span_bytes_mut(call.recv, &span) }
        } else {
            &mut []
        };
        // MPI_IN_PLACE means something only where the result lands.
        let buffers = if gathers && contribution_is_in_receive_buffer(call, &span) {
            ReductionBuffers::InPlace(recv)
        } else {
            // SAFETY: MPI guarantees send holds `count` elements of
            // `dtype`; it is neither MPI_IN_PLACE (taken above where MPI
            // allows it) nor overlapping recv (the same check).
            ReductionBuffers::Separate { send: unsafe { span_bytes(call.send, &span) }, recv }
        };
        let (collective, policy) = match gather {
            Gather::All => (Collective::Allreduce, ready.allreduce.config().tree.policy),
            Gather::Root(_) => (Collective::Reduce, ready.reduce.config().policy),
        };
        let bcast_progress = BcastProgress::if_needed(transport, &mut ready.bcast);
        let outcome = ready.ring.reduce(transport, policy.serving(&bcast_progress), &message.reduction, gather, buffers);
        self.shared.finish(collective, outcome)
    }
}
