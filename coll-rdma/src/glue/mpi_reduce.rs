//! MPI_Reduce's entry point: the degree-k tree in canonical rank order
//! over the communicator's transport, or the module underneath.

use std::ffi::{c_int, c_void};

use ompi_sys as sys;

use crate::collectives::large_reduction::buffers::Gather;
use crate::side_progress::BcastProgress;
use super::comm_state::{Collective, CommState, Native, Shared, Step};
use super::ffi_guard::guarded;
use super::module::with_state;
use super::handover::Handover;
use super::reduction_call::{contribution_is_in_receive_buffer, reduction_shape, span_bytes, span_bytes_mut, FoldOrder, NativeMessage};
use super::saved::ReductionCall;
use crate::select::reduce::ReducePath;
use crate::select::Choice;

#[allow(clippy::too_many_arguments)] // Open MPI's reduce signature
pub(super) unsafe extern "C" fn reduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dtype: *mut sys::ompi_datatype_t,
    op: *mut sys::ompi_op_t,
    root: c_int,
    comm: *mut sys::ompi_communicator_t,
    module: *mut sys::mca_coll_base_module_t,
) -> c_int {
    guarded("MPI_Reduce", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI calls us with the module it enabled for `comm`.
        let call = ReductionCall { send, recv, count, dtype, op, comm };
        unsafe { with_state(module, |state| state.reduce(&call, root), |saved| saved.reduce(call, root)()) }
    })
}

impl CommState {
    fn reduce(&mut self, call: &ReductionCall, root: c_int) -> Step {
        let order = FoldOrder::of(call.op);
        // First, before any decision between paths (see allreduce).
        let Some(mut native) = self.enter(call.comm) else {
            return self.shared.hand_over_reduce(call, root, Handover::TransportUnavailable, order);
        };
        native.reduce(call, root, order)
    }
}

impl Native<'_> {
    fn reduce(&mut self, call: &ReductionCall, root: c_int, order: FoldOrder) -> Step {
        self.shared.count_call(Collective::Reduce);
        if let Err(why) = self.ready.finish_pending_runs() {
            return self.shared.finish(Collective::Reduce, Err(why));
        }
        // A negative root is left to the tree, which refuses it; MPI
        // checks roots before calling us.
        let (shape, span) = reduction_shape(call, usize::try_from(root).unwrap_or(usize::MAX), order);
        let path = match self.ready.decisions.reduce(&shape) {
            Choice::Native(path) => path,
            Choice::HandOver(why) => return self.shared.hand_over_reduce(call, root, why, order),
        };
        let message = match (path, span) {
            (ReducePath::Empty, _) => return self.shared.finish(Collective::Reduce, Ok(())),
            (_, Ok(span)) => NativeMessage::new(call, span),
            // The selector hands every datatype without a span over.
            (_, Err(why)) => return self.shared.hand_over_reduce(call, root, Handover::Datatype(why), order),
        };
        let root = root as usize;
        match path {
            ReducePath::Ring => return self.reduction_around_the_ring(call, &message, Gather::Root(root)),
            ReducePath::ThroughAllreduce => return self.reduce_through_allreduce(call, &message, root),
            // The tree, the parallel reduction and the one-rank copy are
            // `Reduce::reduce`'s to run (by the rules the selector shares).
            ReducePath::Empty | ReducePath::Alone | ReducePath::Parallel | ReducePath::Tree => {}
        }
        let ready = &mut *self.ready;
        let transport = &ready.transport;
        let span = message.span;
        let at_root = root == ready.id.rank;
        // The receive buffer is significant only at the root; MPI_IN_PLACE
        // likewise only means something there.
        let in_place = at_root && contribution_is_in_receive_buffer(call, &span);
        // SAFETY: at the root MPI guarantees recv holds `count` elements of
        // `dtype`; elsewhere it is not touched.
        let recv = at_root.then(|| unsafe { span_bytes_mut(call.recv, &span) });
        let bcast_progress = BcastProgress::if_needed(transport, &mut ready.bcast);
        let outcome = match recv {
            Some(buffer) if in_place => ready.reduce.reduce_in_place_at_root(transport, &bcast_progress, &message.reduction, root, buffer),
            recv => {
                // SAFETY: MPI guarantees send holds `count` elements of
                // `dtype` (it is not MPI_IN_PLACE: that is only allowed at
                // the root, handled above).
                let contribution = unsafe { span_bytes(call.send, &span) };
                ready.reduce.reduce(transport, &bcast_progress, &message.reduction, root, contribution, recv)
            }
        };
        self.shared.finish(Collective::Reduce, outcome)
    }

    /// A reduce whose root only the two-level allreduce reaches (see
    /// `LeadersOnly::reduce`): every rank runs that allreduce, the root
    /// into its receive buffer, the others into scratch they drop.
    fn reduce_through_allreduce(&mut self, call: &ReductionCall, message: &NativeMessage, root: usize) -> Step {
        let span = message.span;
        let at_root = root == self.ready.id.rank;
        // MPI_IN_PLACE means something only at the root.
        let in_place = at_root && contribution_is_in_receive_buffer(call, &span);
        let mut scratch = Vec::new();
        let recv: &mut [u8] = if at_root {
            // SAFETY: at the root MPI guarantees recv holds `count` elements
            // of `dtype`, which `span` describes; nothing else touches it.
            unsafe { span_bytes_mut(call.recv, &span) }
        } else {
            scratch.resize(span.bytes, 0);
            &mut scratch
        };
        let outcome = self.ready.allreduce_into(call, message, recv, in_place);
        self.shared.finish(Collective::Reduce, outcome)
    }
}

impl Shared {
    fn hand_over_reduce(&mut self, call: &ReductionCall, root: c_int, why: Handover, order: FoldOrder) -> Step {
        let fallback = self.saved.reduce(*call, root);
        self.hand_over_reduction(Collective::Reduce, why, order, fallback)
    }
}
