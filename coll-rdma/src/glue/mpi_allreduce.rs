//! MPI_Allreduce's entry point: the degree-k tree (or the small-message
//! exchange) over the communicator's transport, or the module underneath.

use std::ffi::{c_int, c_void};

use btl_ibmc::TransportError;
use ompi_sys as sys;

use crate::collectives::allreduce::autotune::trial_bytes;
use crate::collectives::large_reduction::buffers::Gather;

use crate::side_progress::BcastProgress;
use super::comm_state::{Collective, CommState, Native, ReadyComm, Shared, Step};
use super::ffi_guard::guarded;
use super::module::with_state;
use super::handover::Handover;
use super::reduction_call::{contribution_is_in_receive_buffer, reduction_shape, span_bytes, span_bytes_mut, FoldOrder, NativeMessage};
use super::saved::ReductionCall;
use crate::select::allreduce::AllreducePath;
use crate::select::Choice;

pub(super) unsafe extern "C" fn allreduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dtype: *mut sys::ompi_datatype_t,
    op: *mut sys::ompi_op_t,
    comm: *mut sys::ompi_communicator_t,
    module: *mut sys::mca_coll_base_module_t,
) -> c_int {
    guarded("MPI_Allreduce", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI calls us with the module it enabled for `comm`.
        let call = ReductionCall { send, recv, count, dtype, op, comm };
        unsafe { with_state(module, |state| state.allreduce(&call), |saved| saved.allreduce(call)()) }
    })
}

impl CommState {
    fn allreduce(&mut self, call: &ReductionCall) -> Step {
        let order = FoldOrder::of(call.op);
        // First, before any decision between paths: the setup is where the
        // ranks agree on the limits those decisions use.
        let Some(mut native) = self.enter(call.comm) else {
            return self.shared.hand_over_allreduce(call, Handover::TransportUnavailable, order);
        };
        native.allreduce(call, order)
    }
}

impl Native<'_> {
    fn allreduce(&mut self, call: &ReductionCall, order: FoldOrder) -> Step {
        self.shared.count_call(Collective::Allreduce);
        if let Err(why) = self.ready.finish_pending_runs() {
            return self.shared.finish(Collective::Allreduce, Err(why));
        }
        let (shape, span) = reduction_shape(call, 0, order);
        let path = match self.ready.decisions.allreduce(&shape) {
            Choice::Native(path) => path,
            Choice::HandOver(why) => return self.shared.hand_over_allreduce(call, why, order),
        };
        let message = match (path, span) {
            (AllreducePath::Empty, _) => return self.shared.finish(Collective::Allreduce, Ok(())),
            (_, Ok(span)) => NativeMessage::new(call, span),
            // The selector hands every datatype without a span over.
            (_, Err(why)) => return self.shared.hand_over_allreduce(call, Handover::Datatype(why), order),
        };
        if path == AllreducePath::Ring {
            return self.reduction_around_the_ring(call, &message, Gather::All);
        }
        // The tree, exchange, parallel reduction and the one-rank copy are
        // `Allreduce::allreduce`'s to run (by the rules the selector shares).
        if let Err(why) = self.ready.tune_degree_before(message.span.bytes) {
            return self.shared.finish(Collective::Allreduce, Err(why));
        }
        // SAFETY: MPI guarantees recv holds `count` elements of `dtype`,
        // which `message.span` describes; nothing else touches it during
        // the call.
        let recv = unsafe { span_bytes_mut(call.recv, &message.span) };
        let in_place = contribution_is_in_receive_buffer(call, &message.span);
        let outcome = self.ready.allreduce_into(call, &message, recv, in_place);
        self.shared.finish(Collective::Allreduce, outcome)
    }
}

impl ReadyComm {
    /// Runs the allreduce tree (or the path it picks) with `call`'s
    /// contribution, or with `recv`'s where `in_place`, leaving the result
    /// in `recv`: MPI_Allreduce's own, or a reduce that only the two-level
    /// allreduce reaches (`LeadersOnly::reduce`).
    pub(super) fn allreduce_into(&mut self, call: &ReductionCall, message: &NativeMessage, recv: &mut [u8], in_place: bool) -> Result<(), TransportError> {
        let transport = &self.transport;
        let bcast_progress = BcastProgress::if_needed(transport, &mut self.bcast);
        if in_place {
            return self.allreduce.allreduce_in_place(transport, &bcast_progress, &message.reduction, recv);
        }
        // SAFETY: MPI guarantees send holds `count` elements of `dtype`; it
        // is neither MPI_IN_PLACE nor overlapping recv (`in_place` says so).
        let contribution = unsafe { span_bytes(call.send, &message.span) };
        self.allreduce.allreduce(transport, &bcast_progress, &message.reduction, contribution, recv)
    }

    /// Runs the autotune's degree trial before the first call of
    /// `call_bytes` that the tree serves (every rank takes the same
    /// decision: the length and the paths' limits are the same on all).
    #[inline]
    pub(super) fn tune_degree_before(&mut self, call_bytes: usize) -> Result<(), TransportError> {
        // Every call after the trial's: one load, before any arithmetic.
        if self.allreduce_trial.is_none() {
            return Ok(());
        }
        self.run_degree_trial_before(call_bytes)
    }

    #[cold]
    #[inline(never)]
    fn run_degree_trial_before(&mut self, call_bytes: usize) -> Result<(), TransportError> {
        let transport = &self.transport;
        let config = self.allreduce.config();
        let bytes = trial_bytes(call_bytes, config.exchange_max_bytes, config.tree.segment_bytes);
        let tree_serves = |bytes: usize| self.allreduce.tree_serves(transport, bytes);
        if self.allreduce_trial.is_none() || !tree_serves(call_bytes) || !tree_serves(bytes) {
            return Ok(());
        }
        let Some(trial) = self.allreduce_trial.take() else { return Ok(()) };
        let bcast_progress = BcastProgress::if_needed(transport, &mut self.bcast);
        let (barrier, two_level_barrier) = (&mut self.barrier, &mut self.two_level_barrier);
        // No write of one degree's tree may land after the next one's
        // first (Allreduce::set_degree).
        let mut sync = || -> Result<(), TransportError> {
            transport.quiesce_before_teardown()?;
            match two_level_barrier.as_mut() {
                Some(two_level) => two_level.run(transport, &bcast_progress),
                None => barrier.run_untimed(transport, &bcast_progress),
            }
        };
        let keep_measured = &mut |_: usize, nanos: u64| nanos;
        let (outcome, agreement_ns) = trial.run(&mut self.allreduce, transport, &bcast_progress, bytes, &mut sync, keep_measured)?;
        self.report_allreduce_trial(&outcome, agreement_ns);
        // The degree changes no input of the selectors, but an answer
        // given before the trial is not worth keeping past it.
        self.decisions.forget();
        Ok(())
    }
}

impl Shared {
    fn hand_over_allreduce(&mut self, call: &ReductionCall, why: Handover, order: FoldOrder) -> Step {
        let fallback = self.saved.allreduce(*call);
        self.hand_over_reduction(Collective::Allreduce, why, order, fallback)
    }
}
