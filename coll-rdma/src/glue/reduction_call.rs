//! Turning the raw arguments of MPI_Allreduce / MPI_Reduce into byte
//! slices the algorithms can use, or the reason they cannot be served
//! natively. Both collectives share these rules.

use std::ffi::c_void;

use ompi_sys as sys;

use super::handover::Handover;
use super::datatype::{contiguous_span, op_is_commutative, ContiguousSpan, OmpiReduction};
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

/// Checks everything that decides between the native path and the module
/// underneath. Every input is one MPI requires to be identical on all
/// ranks (count, datatype, op), or agreed at setup (the limits, and
/// whether `parallel_or_ring`, the parallel reduction or the ring, takes
/// a length), so every rank
/// decides alike. `max_bytes` applies as `size_limit_exceeded` says.
pub(super) fn native_message(
    call: &ReductionCall,
    order: FoldOrder,
    max_bytes: Option<usize>,
    limit_name: &'static str,
    segment_bytes: usize,
    parallel_or_ring: impl Fn(usize) -> bool,
) -> Result<NativeMessage, Handover> {
    let count = usize::try_from(call.count).map_err(|_| Handover::NegativeCount(call.count))?;
    let span = contiguous_span(call.dtype, count).map_err(Handover::Datatype)?;
    if span.element_bytes > segment_bytes {
        return Err(Handover::ElementTooLarge { element_bytes: span.element_bytes, segment_bytes });
    }
    if let Some(limit) = size_limit_exceeded(order, span.bytes, max_bytes, parallel_or_ring) {
        return Err(Handover::AboveLimit { bytes: span.bytes, parameter: limit_name, limit });
    }
    Ok(NativeMessage { span, reduction: OmpiReduction::new(call.op, call.dtype, span.element_bytes) })
}

/// The size limit `max_bytes` that sends a `bytes`-byte message to the
/// module underneath, if it does. It does not apply to messages reduced in
/// parallel or around the ring: it was set where the window's tree lost to
/// the module underneath. Nor to a non-commutative op: the tree and the parallel
/// reduction fold in rank order at every length, while the module
/// underneath may not (tuned's ring allreduce and chain reduce, which a
/// user may force, fold in another order and get another result), and a
/// right result beats a faster one.
fn size_limit_exceeded(
    order: FoldOrder,
    bytes: usize,
    max_bytes: Option<usize>,
    parallel_or_ring: impl Fn(usize) -> bool,
) -> Option<usize> {
    max_bytes.filter(|&limit| order == FoldOrder::Any && bytes > limit && !parallel_or_ring(bytes))
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

#[cfg(test)]
mod tests {
    use super::*;

    const NEVER_PARALLEL: fn(usize) -> bool = |_| false;

    #[test]
    fn a_commutative_op_above_the_limit_goes_to_the_module_underneath_unless_parallel_or_ring() {
        assert_eq!(size_limit_exceeded(FoldOrder::Any, 8192, Some(8192), NEVER_PARALLEL), None);
        assert_eq!(size_limit_exceeded(FoldOrder::Any, 8193, Some(8192), NEVER_PARALLEL), Some(8192));
        assert_eq!(size_limit_exceeded(FoldOrder::Any, 8193, None, NEVER_PARALLEL), None);
        assert_eq!(size_limit_exceeded(FoldOrder::Any, 1 << 17, Some(8192), |bytes| bytes >= 1 << 17), None);
    }

    #[test]
    fn a_non_commutative_op_is_served_at_every_length() {
        for bytes in [1, 8192, 8193, 65536, (1 << 17) - 1, 1 << 30] {
            assert_eq!(size_limit_exceeded(FoldOrder::Canonical, bytes, Some(8192), NEVER_PARALLEL), None, "{bytes} bytes");
            assert_eq!(size_limit_exceeded(FoldOrder::Canonical, bytes, Some(0), NEVER_PARALLEL), None, "{bytes} bytes");
        }
    }
}
