//! MPI_Reduce's entry point: the degree-k tree in canonical rank order
//! over the communicator's transport, or the module underneath.

use std::ffi::{c_int, c_void};

use ompi_sys as sys;

use crate::collectives::reduction_buffers::Gather;
use crate::side_progress::BcastProgress;
use super::comm_state::{Collective, CommState, Native, Shared, Step};
use super::ffi_guard::guarded;
use super::module::with_state;
use super::handover::Handover;
use super::leader_links::ReduceRoute;
use super::reduction_call::{contribution_is_in_receive_buffer, native_message, span_bytes, span_bytes_mut, FoldOrder, NativeMessage};
use super::saved::ReductionCall;

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
        if call.count == 0 {
            return self.shared.finish(Collective::Reduce, Ok(()));
        }
        let route = match self.ready.leader_links.as_ref().map(|links| links.reduce(root as usize)) {
            Some(Err(why)) => return self.shared.hand_over_reduce(call, root, why, order),
            Some(Ok(route)) => route,
            None => ReduceRoute::Tree,
        };
        let segment_bytes = self.ready.reduce.config().segment_bytes;
        let gather = Gather::Root(root as usize);
        let paths = self.ready.reduction_paths(gather, order);
        let max_bytes = self.ready.limits.reduce_max_bytes;
        let message = match native_message(call, order, max_bytes, "reduce_max_bytes", segment_bytes, |bytes| paths.parallel_or_ring(bytes)) {
            Ok(message) => message,
            Err(unserved) => return self.shared.hand_over_reduce(call, root, unserved, order),
        };
        if paths.around_the_ring(message.span.bytes, message.span.element_bytes) {
            return self.reduction_around_the_ring(call, &message, gather);
        }
        let root = root as usize;
        if route == ReduceRoute::ThroughAllreduce {
            return self.reduce_through_allreduce(call, &message, root, order);
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
    /// `LeaderLinks::reduce`): every rank runs that allreduce, the root
    /// into its receive buffer, the others into scratch they drop.
    fn reduce_through_allreduce(&mut self, call: &ReductionCall, message: &NativeMessage, root: usize, order: FoldOrder) -> Step {
        let span = message.span;
        let segment_bytes = self.ready.allreduce.config().tree.segment_bytes;
        if span.element_bytes > segment_bytes {
            let why = Handover::ElementTooLarge { element_bytes: span.element_bytes, segment_bytes };
            return self.shared.hand_over_reduce(call, root as c_int, why, order);
        }
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
