//! MPI_Bcast's entry point: reliable multicast through the communicator's
//! window (the root copies in and returns; receivers copy out), single copy
//! from the root's buffer for long messages where the transport reads
//! peers' memory, or the module underneath above a path's limit.
//!
//! The path is `crate::select::bcast`'s choice, from the facts every rank
//! shares (the message's length and root); a rank whose datatype is not
//! contiguous packs (root) or unpacks (receiver) around it. Above 2^31 - 1
//! bytes, which MPI_Pack cannot count, the ranks first agree whether any
//! of them would pack (`rank_that_would_pack`).

use std::ffi::{c_int, c_void};

use btl_ibmc::TransportError;
use ompi_sys as sys;

use super::handover::Handover;
use super::comm_state::{Collective, CommState, Native, ReadyComm, Shared, Step};
use super::datatype::{contiguous_span, signature_bytes, ContiguousSpan, NotContiguous};
use super::ffi_guard::guarded;
use super::module::with_state;
use super::reduction_call::span_bytes_mut;
use super::saved_nonblocking::BcastCall;
use crate::word_max::{bytes_to_words, words_to_bytes, U64Max};
use crate::select::bcast::{select, BcastPath};
use crate::select::{CallShape, Choice, DataShape};
use crate::side_progress::BcastProgress;

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
        let call = BcastCall { buffer, count, dtype, root, comm };
        unsafe { with_state(module, |state| state.bcast(&call), |saved| saved.bcast(buffer, count, dtype, root, comm)()) }
    })
}

impl CommState {
    fn bcast(&mut self, call: &BcastCall) -> Step {
        // First, before any decision between paths: the setup is where the
        // ranks agree on the limits those decisions use.
        let Some(mut native) = self.enter(call.comm) else {
            return self.shared.hand_over_bcast(call, Handover::TransportUnavailable);
        };
        native.bcast(call)
    }
}

impl Native<'_> {
    fn bcast(&mut self, call: &BcastCall) -> Step {
        self.shared.count_call(Collective::Bcast);
        if let Err(why) = self.ready.finish_pending_runs() {
            return self.shared.finish(Collective::Bcast, Err(why));
        }
        let (shape, span) = bcast_shape(call);
        let (bytes, agree_on_packing) = match select(&shape, self.ready.decisions.plan()) {
            Choice::Native(BcastPath::Empty) => return self.shared.finish(Collective::Bcast, Ok(())),
            // The window and single copy are `Bcast::bcast`'s to run (by
            // the rules the selector shares); `packs` is `span.is_err()`.
            Choice::Native(BcastPath::Send { bytes, agree_on_packing, .. }) => (bytes, agree_on_packing),
            Choice::HandOver(why) => return self.shared.hand_over_bcast(call, why),
        };
        let root = call.root as usize;
        let at_root = root == self.ready.id.rank;
        if agree_on_packing {
            match self.ready.rank_that_would_pack(span.is_ok()) {
                Ok(None) => {}
                Ok(Some(rank)) => return self.shared.hand_over_bcast(call, Handover::AbovePackLimit { bytes, rank }),
                Err(why) => return self.shared.finish(Collective::Bcast, Err(why)),
            }
        }
        // A rank whose datatype is not contiguous goes through a packed copy;
        // the root packs before anything is sent.
        let mut packed = Vec::new();
        if span.is_err() {
            packed = vec![0u8; bytes];
            if at_root {
                let packing = if self.shared.injected_pack_failure() { Err(sys::OMPI_ERROR as c_int) } else { pack(call, &mut packed) };
                if let Err(rc) = packing {
                    return self.abandon_bcast_at_root(root, bytes, rc);
                }
            }
        }
        let ready = &mut *self.ready;
        let outcome = match span {
            Ok(span) => {
                // SAFETY: MPI guarantees the buffer holds `count` elements of
                // `dtype`, which `span` describes.
                let message = unsafe { span_bytes_mut(call.buffer, &span) };
                ready.bcast.bcast(&ready.transport, root, message)
            }
            Err(_) => {
                let outcome = ready.bcast.bcast(&ready.transport, root, &mut packed);
                if outcome.is_ok() && !at_root
                    && let Err(rc) = unpack(call, &packed) {
                        return Step::Done(rc);
                    }
                outcome
            }
        };
        self.shared.finish(Collective::Bcast, outcome)
    }

    /// The root could not pack its message, but its receivers (which cannot
    /// know) already wait for it: `abandon_at_root` makes every receiver's
    /// call fail instead. The streams are then out of step, so every rank
    /// hands its later calls over.
    fn abandon_bcast_at_root(&mut self, root: usize, bytes: usize, rc: c_int) -> Step {
        let ready = &mut *self.ready;
        let told = ready.bcast.abandon_at_root(&ready.transport, root, bytes);
        tracing::error!(
            "comm {} rank {}: bcast root could not pack its {bytes}-byte message (error {rc}); the receivers are told \
             ({}) and fail too; later collectives on this communicator go to the module underneath",
            ready.id.cid,
            ready.id.rank,
            match told {
                Ok(()) => "sent".to_string(),
                Err(why) => format!("failed: {why}"),
            }
        );
        self.shared.mark_failed();
        Step::Done(rc)
    }
}

impl ReadyComm {
    /// The lowest rank whose datatype is not contiguous, agreed through
    /// this communicator's own allreduce (one word, next to a message of
    /// more than 2 GiB). Its waits keep serving the bcast's background
    /// work; the module underneath's collectives would not, and over
    /// datagram multicast a co-root still forwarding the previous bcast
    /// into this rank's channel would wait for this rank while this rank
    /// waited for it.
    fn rank_that_would_pack(&mut self, contiguous: bool) -> Result<Option<usize>, TransportError> {
        let transport = &self.transport;
        let bcast_progress = BcastProgress::if_needed(transport, &mut self.bcast);
        let mut agreed = words_to_bytes(&[packing_word(self.id.size, self.id.rank, contiguous)]);
        self.allreduce.allreduce_in_place(transport, &bcast_progress, &U64Max, &mut agreed)?;
        Ok(lowest_packing_rank(self.id.size, bytes_to_words(&agreed)[0]))
    }
}

impl Shared {
    fn hand_over_bcast(&mut self, call: &BcastCall, why: Handover) -> Step {
        let fallback = self.saved.bcast(call.buffer, call.count, call.dtype, call.root, call.comm);
        self.hand_over(Collective::Bcast, why, fallback)
    }
}

/// The call as the selector sees it (`crate::select::bcast`), and this
/// rank's span where its datatype is contiguous. The length is the
/// signature's size, which MPI makes the same on every rank whatever
/// datatype each uses. A negative count is handed over before the data is
/// read, so its datatype is read for no elements.
pub(super) fn bcast_shape(call: &BcastCall) -> (CallShape, Result<ContiguousSpan, NotContiguous>) {
    let count = usize::try_from(call.count).unwrap_or(0);
    let span = contiguous_span(call.dtype, count);
    let data = match (signature_bytes(call.dtype, count), span) {
        (Err(why), _) => DataShape::Unreadable(why),
        (Ok(bytes), Ok(span)) => DataShape::Contiguous { bytes, element_bytes: span.element_bytes },
        (Ok(bytes), Err(why)) => DataShape::Packable { bytes, why },
    };
    (CallShape { count: call.count, data, commutative: false, root: call.root as usize }, span)
}

/// This rank's word for the agreement: the maximum over the ranks names the
/// lowest rank that would pack (size - rank, so that lower ranks weigh
/// more), 0 if none would.
fn packing_word(size: usize, rank: usize, contiguous: bool) -> u64 {
    if contiguous { 0 } else { (size - rank) as u64 }
}

fn lowest_packing_rank(size: usize, agreed: u64) -> Option<usize> {
    (agreed > 0).then(|| size.saturating_sub(agreed as usize))
}

pub(super) fn pack(call: &BcastCall, packed: &mut [u8]) -> Result<(), c_int> {
    let Ok(packed_len) = c_int::try_from(packed.len()) else { return Err(sys::OMPI_ERROR as c_int) };
    let mut position: c_int = 0;
    // SAFETY: MPI_Pack reads `count` elements of `dtype` from the caller's
    // buffer and writes at most `packed.len()` bytes, the signature size.
    let rc = unsafe {
        sys::MPI_Pack(call.buffer, call.count, call.dtype, packed.as_mut_ptr().cast(), packed_len, &mut position, call.comm)
    };
    if rc == 0 { Ok(()) } else { Err(rc) }
}

pub(super) fn unpack(call: &BcastCall, packed: &[u8]) -> Result<(), c_int> {
    let Ok(packed_len) = c_int::try_from(packed.len()) else { return Err(sys::OMPI_ERROR as c_int) };
    let mut position: c_int = 0;
    // SAFETY: MPI_Unpack reads the packed bytes and writes `count` elements
    // of `dtype` into the caller's buffer.
    let rc = unsafe {
        sys::MPI_Unpack(packed.as_ptr().cast(), packed_len, &mut position, call.buffer, call.count, call.dtype, call.comm)
    };
    if rc == 0 { Ok(()) } else { Err(rc) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agreed_word_names_the_lowest_rank_that_would_pack() {
        let agreed = |ranks: &[bool]| ranks.iter().enumerate().map(|(rank, &contiguous)| packing_word(ranks.len(), rank, contiguous)).max().unwrap();
        assert_eq!(lowest_packing_rank(4, agreed(&[true; 4])), None);
        assert_eq!(lowest_packing_rank(4, agreed(&[true, false, true, false])), Some(1));
        assert_eq!(lowest_packing_rank(4, agreed(&[false, true, true, false])), Some(0));
        assert_eq!(lowest_packing_rank(4, agreed(&[true, true, true, false])), Some(3));
        let why = Handover::AbovePackLimit { bytes: c_int::MAX as usize + 1, rank: 3 };
        assert!(why.to_string().contains("2147483648 bytes") && why.to_string().contains("rank 3"), "{why}");
    }
}
