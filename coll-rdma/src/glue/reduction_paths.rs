//! Serving an allreduce or reduce around the ring, which both collectives
//! do alike once their selector chose it (`crate::select`).

use crate::collectives::large_reduction::buffers::{Gather, ReductionBuffers};
use crate::side_progress::BcastProgress;

use super::comm_state::{Collective, Native, Step};
use super::reduction_call::{contribution_is_in_receive_buffer, span_bytes, span_bytes_mut, NativeMessage};
use super::saved::ReductionCall;

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
