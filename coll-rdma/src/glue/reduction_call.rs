//! Turning the raw arguments of MPI_Allreduce / MPI_Reduce into byte
//! slices the algorithms can use, or the reason they cannot be served
//! natively. Both collectives share these rules.

use std::ffi::c_void;

use ompi_sys as sys;

use super::handover::Handover;
use super::datatype::{contiguous_span, ContiguousSpan, OmpiReduction};
use super::saved::ReductionCall;

/// The message of one reduction call as the algorithms see it.
pub(super) struct NativeMessage {
    pub span: ContiguousSpan,
    pub reduction: OmpiReduction,
}

/// Why a call goes to the module underneath: a category (reported once per
/// communicator) and the particulars of this call.

/// Checks everything that decides between the native path and the module
/// underneath. Every input is one MPI requires to be identical on all
/// ranks (count, datatype, op), or agreed at setup (the limits, and
/// whether `reduced_in_parallel` says yes for a length), so every rank
/// decides alike. `max_bytes` does not apply to messages reduced in
/// parallel: it was set where the window's tree lost to the module
/// underneath.
pub(super) fn native_message(
    call: &ReductionCall,
    max_bytes: Option<usize>,
    limit_name: &'static str,
    segment_bytes: usize,
    reduced_in_parallel: impl Fn(usize) -> bool,
) -> Result<NativeMessage, Handover> {
    let count = usize::try_from(call.count).map_err(|_| Handover::NegativeCount(call.count))?;
    let span = contiguous_span(call.dtype, count).map_err(Handover::Datatype)?;
    if span.element_bytes > segment_bytes {
        return Err(Handover::ElementTooLarge { element_bytes: span.element_bytes, segment_bytes });
    }
    if let Some(limit) = max_bytes.filter(|&limit| span.bytes > limit && !reduced_in_parallel(span.bytes)) {
        return Err(Handover::AboveLimit { bytes: span.bytes, parameter: limit_name, limit });
    }
    Ok(NativeMessage { span, reduction: OmpiReduction::new(call.op, call.dtype, span.element_bytes) })
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
