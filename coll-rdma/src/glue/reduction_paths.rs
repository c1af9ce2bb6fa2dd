//! Serving an allreduce or reduce around the ring, which both collectives
//! do alike once their selector chose it (`crate::select`): the blocking
//! call here, and the non-blocking and persistent calls' run
//! (`ring_run`), posted in the ring's lane, which allreduce and reduce
//! share since they share the ring's streams.

use btl_ibmc::WaitPolicy;

use crate::collectives::large_reduction::buffers::{Gather, ReductionBuffers};
use crate::reduction::Reduction;
use crate::StallLimits;
use crate::schedule_queue::Lane;
use crate::side_progress::BcastProgress;

use super::comm_state::{Collective, Native, ReadyComm, Step};
use super::datatype::ContiguousSpan;
use super::nonblocking_post::Planned;
use super::run_home::RunHome;
use super::reduction_call::{contribution_is_in_receive_buffer, span_bytes, span_bytes_mut, NativeMessage};
use super::saved::ReductionCall;

impl Native<'_> {
    /// Serves `call` around the ring: an allreduce (`Gather::All`) or a
    /// reduce to the root (`Gather::Root`).
    pub(super) fn reduction_around_the_ring(&mut self, call: &ReductionCall, message: &NativeMessage, gather: Gather) -> Step {
        let ready = &mut *self.ready;
        let transport = &ready.transport;
        // SAFETY: the call is under way for as long as the ring uses the
        // buffers (it returns when the ring is done).
        let buffers = unsafe { ring_buffers(call, &message.span, gather, ready.id.rank) };
        let collective = match gather {
            Gather::All => Collective::Allreduce,
            Gather::Root(_) => Collective::Reduce,
        };
        let policy = ready.ring_policy(gather);
        let bcast_progress = BcastProgress::if_needed(transport, &mut ready.bcast);
        let outcome = ready.ring.reduce(transport, policy.serving(&bcast_progress), &message.reduction, gather, buffers);
        self.shared.finish(collective, outcome)
    }

    /// The ring's run for a non-blocking or persistent `call`, its segment
    /// numbers taken now, in post order, placed in `home`.
    pub(super) fn ring_run<R: Reduction + Send + 'static>(
        &mut self,
        call: &ReductionCall,
        span: &ContiguousSpan,
        gather: Gather,
        op: R,
        home: RunHome<'_>,
    ) -> Planned {
        let ready = &mut *self.ready;
        let limits = StallLimits::of(&ready.ring_policy(gather));
        // SAFETY: MPI leaves the buffers to the request until it completes,
        // and the run ends no later.
        let buffers = unsafe { ring_buffers(call, span, gather, ready.id.rank) };
        match ready.ring.start(op, gather, buffers, limits) {
            Ok(run) => Planned::Run(Lane::Ring, home.place(run, ready.pending_runs.spare_boxes())),
            Err(why) => Planned::Failed(why),
        }
    }
}

impl ReadyComm {
    /// How the ring's waits go for a call of the collective `gather` names:
    /// that collective's own policy, whichever path serves it.
    fn ring_policy(&self, gather: Gather) -> WaitPolicy {
        match gather {
            Gather::All => self.allreduce.config().tree.policy,
            Gather::Root(_) => self.reduce.config().policy,
        }
    }
}

/// `call`'s buffers as the ring takes them on `rank`.
///
/// # Safety
/// The buffers must stay valid, and untouched by anyone else, for as long
/// as the result is used: MPI guarantees that while the call is under way.
unsafe fn ring_buffers<'a>(call: &ReductionCall, span: &ContiguousSpan, gather: Gather, rank: usize) -> ReductionBuffers<'a> {
    let gathers = gather == Gather::All || gather == Gather::Root(rank);
    let recv: &mut [u8] = if gathers {
        // SAFETY: where the result lands MPI guarantees recv holds `count`
        // elements of `dtype`, which `span` describes; the caller keeps it
        // to the call. Elsewhere (a reduce's other ranks) recv is not
        // significant and is not touched.
        unsafe { span_bytes_mut(call.recv, span) }
    } else {
        &mut []
    };
    // MPI_IN_PLACE means something only where the result lands.
    if gathers && contribution_is_in_receive_buffer(call, span) {
        ReductionBuffers::InPlace(recv)
    } else {
        // SAFETY: MPI guarantees send holds `count` elements of `dtype`; it
        // is neither MPI_IN_PLACE (taken above where MPI allows it) nor
        // overlapping recv (the same check).
        ReductionBuffers::Separate { send: unsafe { span_bytes(call.send, span) }, recv }
    }
}
