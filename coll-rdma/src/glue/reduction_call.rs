//! Turning the raw arguments of MPI_Allreduce / MPI_Reduce into the shape
//! their selectors read and the byte slices the algorithms use. Both
//! collectives share these rules.

use std::ffi::c_void;

use ompi_sys as sys;

use super::datatype::{contiguous_span, op_is_commutative, ContiguousSpan, NotContiguous, OmpiReduction};
use crate::select::{CallShape, DataShape};
use super::saved::ReductionCall;

/// What a reduction's op asks of whoever folds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FoldOrder {
    /// A commutative op: the result MPI defines comes out of any order.
    Any,
    /// A non-commutative op: only the canonical rank order
    /// `r0 op (r1 op (... op r(n-1)))` gives it.
    Canonical,
}

impl FoldOrder {
    pub(super) fn of(op: *mut sys::ompi_op_t) -> Self {
        if op_is_commutative(op) { FoldOrder::Any } else { FoldOrder::Canonical }
    }
}

/// The message of one reduction call as the algorithms see it.
pub(super) struct NativeMessage {
    pub span: ContiguousSpan,
    pub reduction: OmpiReduction,
}

impl NativeMessage {
    pub(super) fn new(call: &ReductionCall, span: ContiguousSpan) -> Self {
        NativeMessage { span, reduction: OmpiReduction::new(call.op, call.dtype, span.element_bytes) }
    }
}

/// The call as the selectors see it (`crate::select`), and its datatype's
/// span for the native paths. Every input is one MPI requires to be
/// identical on all ranks (count, datatype, op, root), so every rank
/// selects alike. A negative count is handed over before the data is
/// read, so its datatype is read for no elements.
pub(super) fn reduction_shape(call: &ReductionCall, root: usize, order: FoldOrder) -> (CallShape, Result<ContiguousSpan, NotContiguous>) {
    let span = contiguous_span(call.dtype, usize::try_from(call.count).unwrap_or(0));
    let data = match span {
        Ok(span) => DataShape::Contiguous { bytes: span.bytes, element_bytes: span.element_bytes },
        Err(why) => DataShape::Unreadable(why),
    };
    (CallShape { count: call.count, data, commutative: order == FoldOrder::Any, root }, span)
}

/// `count` elements at `buffer`, offset by the span's start.
///
/// # Safety
/// `buffer` must be the caller's buffer for `span`, valid for reads (and
/// writes, for the mutable variant) over the span for the whole call.
pub(super) unsafe fn span_bytes<'a>(buffer: *const c_void, span: &ContiguousSpan) -> &'a [u8] {
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts((buffer as *const u8).offset(span.start), span.bytes) }
}

/// # Safety
/// As for `span_bytes`, and nothing else may access the span meanwhile.
pub(super) unsafe fn span_bytes_mut<'a>(buffer: *mut c_void, span: &ContiguousSpan) -> &'a mut [u8] {
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts_mut((buffer as *mut u8).offset(span.start), span.bytes) }
}

/// Whether this rank's contribution is its receive buffer: MPI_IN_PLACE,
/// or (erroneously, but seen in practice) the same buffer passed twice.
/// Either way the contribution must be copied before the result is written.
pub(super) fn contribution_is_in_receive_buffer(call: &ReductionCall, span: &ContiguousSpan) -> bool {
    if std::ptr::eq(call.send, sys::MPI_IN_PLACE) {
        return true;
    }
    let send = call.send as usize;
    let recv = call.recv as usize;
    send < recv + span.bytes && recv < send + span.bytes
}
