//! MPI_Bcast's entry point: reliable multicast through the communicator's
//! window (the root copies in and returns; receivers copy out), or the
//! module underneath.
//!
//! MPI lets ranks describe the same bytes with different datatypes, so the
//! only facts every rank shares are the message's length and root. Every
//! decision between paths rests on those; a rank whose datatype is not
//! contiguous packs (root) or unpacks (receiver) around the multicast.

use std::ffi::{c_int, c_void};

use btl_ibmc::{MulticastKind, Transport};
use ompi_sys as sys;

use super::handover::Handover;
use super::comm_state::{Collective, CommState, Link, Step};
use super::datatype::{contiguous_span, signature_bytes};
use super::ffi_guard::guarded;
use super::module::with_state;
use super::reduction_call::span_bytes_mut;

pub(super) unsafe extern "C" fn bcast(
    buffer: *mut c_void,
    count: c_int,
    dtype: *mut sys::ompi_datatype_t,
    root: c_int,
    comm: *mut sys::ompi_communicator_t,
    module: *mut sys::mca_coll_base_module_t,
) -> c_int {
    guarded("MPI_Bcast", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI calls us with the module it enabled for `comm`.
        unsafe { with_state(module, |state| state.bcast(&BcastCall { buffer, count, dtype, root, comm })) }
    })
}

struct BcastCall {
    buffer: *mut c_void,
    count: c_int,
    dtype: *mut sys::ompi_datatype_t,
    root: c_int,
    comm: *mut sys::ompi_communicator_t,
}

impl CommState {
    fn bcast(&mut self, call: &BcastCall) -> Step {
        let Ok(count) = usize::try_from(call.count) else {
            return self.hand_over_bcast(call, Handover::NegativeCount(call.count));
        };
        let bytes = match signature_bytes(call.dtype, count) {
            Ok(bytes) => bytes,
            Err(why) => return self.hand_over_bcast(call, Handover::Datatype(why)),
        };
        if bytes == 0 {
            return self.finish(Collective::Bcast, Ok(()));
        }
        if let Some(limit) = self.bcast_max_bytes.filter(|&limit| bytes > limit) {
            return self.hand_over_bcast(call, Handover::AboveLimit { bytes, parameter: "bcast_max_bytes", limit });
        }
        if !self.bcast.serves(bytes) {
            return self.hand_over_bcast(call, Handover::AboveWindow { bytes });
        }
        if !self.ensure_link(call.comm) {
            return self.hand_over_bcast(call, Handover::TransportUnavailable);
        }
        let Link::Ready(transport) = &self.link else { unreachable!("ensure_link said the transport is ready") };
        let root = call.root as usize;
        let outcome = match contiguous_span(call.dtype, count) {
            Ok(span) => {
                // SAFETY: MPI guarantees the buffer holds `count` elements of
                // `dtype`, which `span` describes.
                let message = unsafe { span_bytes_mut(call.buffer, &span) };
                self.bcast.bcast(transport, root, message)
            }
            Err(_) => {
                let mut packed = vec![0u8; bytes];
                let at_root = root == self.rank;
                if at_root
                    && let Err(rc) = pack(call, &mut packed) {
                        return Step::Done(rc);
                    }
                let outcome = self.bcast.bcast(transport, root, &mut packed);
                if outcome.is_ok() && !at_root
                    && let Err(rc) = unpack(call, &packed) {
                        return Step::Done(rc);
                    }
                outcome
            }
        };
        self.finish(Collective::Bcast, outcome)
    }

    fn hand_over_bcast(&mut self, call: &BcastCall, why: Handover) -> Step {
        let fallback = self.saved.bcast(call.buffer, call.count, call.dtype, call.root, call.comm);
        self.hand_over(Collective::Bcast, why, fallback)
    }

    /// Whether a root still has messages its receivers have not
    /// acknowledged (or a receiver owes an acknowledgement).
    ///
    /// Only datagram transports need it: on a shared window nothing is
    /// retransmitted, a reader's lazy ACK is only needed by a root whose
    /// window is full, and that root reads the ACK lines itself while it
    /// waits. Keeping the callback idle there keeps it off the progress
    /// loop of every later MPI call.
    pub(super) fn has_background_work(&self) -> bool {
        match &self.link {
            Link::Ready(transport) => transport.multicast_kind() == MulticastKind::Datagram && !self.bcast.is_idle(),
            _ => false,
        }
    }

    /// Whether another collective's waits must also serve the bcast: it
    /// left work behind on a datagram transport (see `side_progress`).
    pub(super) fn bcast_needs_side_progress(&self) -> bool {
        self.has_background_work()
    }

    /// Serves ACKs, NACKs and retransmissions outside a collective call.
    pub(super) fn progress_background_work(&mut self) {
        if let Link::Ready(transport) = &self.link
            && let Err(why) = self.bcast.progress(transport) {
                tracing::warn!("comm {} rank {}: bcast progress failed: {why}", self.cid, self.rank);
            }
    }
}

fn pack(call: &BcastCall, packed: &mut [u8]) -> Result<(), c_int> {
    let mut position: c_int = 0;
    // SAFETY: MPI_Pack reads `count` elements of `dtype` from the caller's
    // buffer and writes at most `packed.len()` bytes, the signature size.
    let rc = unsafe {
        sys::MPI_Pack(call.buffer, call.count, call.dtype, packed.as_mut_ptr().cast(), packed.len() as c_int, &mut position, call.comm)
    };
    if rc == 0 { Ok(()) } else { Err(rc) }
}

fn unpack(call: &BcastCall, packed: &[u8]) -> Result<(), c_int> {
    let mut position: c_int = 0;
    // SAFETY: MPI_Unpack reads the packed bytes and writes `count` elements
    // of `dtype` into the caller's buffer.
    let rc = unsafe {
        sys::MPI_Unpack(packed.as_ptr().cast(), packed.len() as c_int, &mut position, call.buffer, call.count, call.dtype, call.comm)
    };
    if rc == 0 { Ok(()) } else { Err(rc) }
}
