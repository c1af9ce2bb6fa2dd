//! MPI_Bcast's entry point: reliable multicast through the communicator's
//! window (the root copies in and returns; receivers copy out), single copy
//! from the root's buffer for long messages where the transport reads
//! peers' memory, or the module underneath above a path's limit.
//!
//! MPI lets ranks describe the same bytes with different datatypes, so the
//! only facts every rank shares are the message's length and root. Every
//! decision between paths rests on those; a rank whose datatype is not
//! contiguous packs (root) or unpacks (receiver) around the multicast.
//! Above 2^31 - 1 bytes, which MPI_Pack cannot count, the ranks first
//! agree whether any of them would pack (`rank_that_would_pack`).

use std::ffi::{c_int, c_void};

use btl_ibmc::TransportError;
use ompi_sys as sys;

use super::handover::Handover;
use super::comm_state::{Collective, CommState, Native, ReadyComm, Shared, Step};
use super::datatype::{contiguous_span, signature_bytes};
use super::ffi_guard::guarded;
use super::module::with_state;
use super::reduction_call::span_bytes_mut;
use crate::word_max::{bytes_to_words, words_to_bytes, U64Max};
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

struct BcastCall {
    buffer: *mut c_void,
    count: c_int,
    dtype: *mut sys::ompi_datatype_t,
    root: c_int,
    comm: *mut sys::ompi_communicator_t,
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
        let Ok(count) = usize::try_from(call.count) else {
            return self.shared.hand_over_bcast(call, Handover::NegativeCount(call.count));
        };
        let bytes = match signature_bytes(call.dtype, count) {
            Ok(bytes) => bytes,
            Err(why) => return self.shared.hand_over_bcast(call, Handover::Datatype(why)),
        };
        if bytes == 0 {
            return self.shared.finish(Collective::Bcast, Ok(()));
        }
        if let Some(Err(why)) = self.ready.leader_links.as_ref().map(|links| links.bcast()) {
            return self.shared.hand_over_bcast(call, why);
        }
        let single_copy = self.ready.bcast.uses_single_copy(&self.ready.transport, bytes);
        let limits = BcastLimits { window: self.ready.limits.bcast_max_bytes, single_copy: self.ready.limits.bcast_single_copy_max_bytes };
        if let Err(why) = native_route(bytes, limits, single_copy, self.ready.bcast.serves(bytes)) {
            return self.shared.hand_over_bcast(call, why);
        }
        let root = call.root as usize;
        let at_root = root == self.ready.id.rank;
        let span = contiguous_span(call.dtype, count);
        if above_pack_counts(bytes) {
            if let Some(Err(_)) = self.ready.leader_links.as_ref().map(|links| links.allreduce()) {
                return self.shared.hand_over_bcast(call, Handover::OnlyLeadersConnected(AGREEMENT_RUNS_FLAT));
            }
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

/// The hand-over limits of the two native bcast paths.
#[derive(Clone, Copy)]
struct BcastLimits {
    /// `coll_rdma_bcast_max_bytes`: copy in and out of the window.
    window: Option<usize>,
    /// `coll_rdma_bcast_single_copy_max_bytes`: receivers read the root's buffer.
    single_copy: Option<usize>,
}

/// Whether a `bytes`-byte bcast (with data) takes the native path; every
/// input is the same on every rank (MPI requires the same signature
/// everywhere, the limits and whether single copy is possible are agreed
/// at setup), whatever datatype each rank uses, so every rank decides
/// alike before any of them commits.
fn native_route(bytes: usize, limits: BcastLimits, single_copy: bool, window_serves: bool) -> Result<(), Handover> {
    // Each path has its own limit: the window's comes from the model for
    // the transport in use (or the user), single copy's from the user only.
    let (limit, parameter) =
        if single_copy { (limits.single_copy, "bcast_single_copy_max_bytes") } else { (limits.window, "bcast_max_bytes") };
    if let Some(limit) = limit.filter(|&limit| bytes > limit) {
        return Err(Handover::AboveLimit { bytes, parameter, limit });
    }
    if !single_copy && !window_serves {
        return Err(Handover::AboveWindow { bytes });
    }
    Ok(())
}

/// Whether a rank with a datatype that is not contiguous could not pack or
/// unpack the message: MPI_Pack and MPI_Unpack count bytes in a C int. Any
/// rank may be such a rank and none can tell from its own arguments, so
/// above this the ranks first tell each other (`rank_that_would_pack`):
/// contiguous buffers on every rank are served natively at any length.
fn above_pack_counts(bytes: usize) -> bool {
    bytes > c_int::MAX as usize
}

/// Why a bcast above `above_pack_counts` is handed over where the
/// allreduce the ranks would agree through is not served natively.
const AGREEMENT_RUNS_FLAT: &str =
    "a bcast of more than 2^31 - 1 bytes needs the ranks to agree through the allreduce, which runs flat on this communicator";

/// This rank's word for the agreement: the maximum over the ranks names the
/// lowest rank that would pack (size - rank, so that lower ranks weigh
/// more), 0 if none would.
fn packing_word(size: usize, rank: usize, contiguous: bool) -> u64 {
    if contiguous { 0 } else { (size - rank) as u64 }
}

fn lowest_packing_rank(size: usize, agreed: u64) -> Option<usize> {
    (agreed > 0).then(|| size.saturating_sub(agreed as usize))
}

fn pack(call: &BcastCall, packed: &mut [u8]) -> Result<(), c_int> {
    let Ok(packed_len) = c_int::try_from(packed.len()) else { return Err(sys::OMPI_ERROR as c_int) };
    let mut position: c_int = 0;
    // SAFETY: MPI_Pack reads `count` elements of `dtype` from the caller's
    // buffer and writes at most `packed.len()` bytes, the signature size.
    let rc = unsafe {
        sys::MPI_Pack(call.buffer, call.count, call.dtype, packed.as_mut_ptr().cast(), packed_len, &mut position, call.comm)
    };
    if rc == 0 { Ok(()) } else { Err(rc) }
}

fn unpack(call: &BcastCall, packed: &[u8]) -> Result<(), c_int> {
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

    fn window_limit(window: Option<usize>) -> BcastLimits {
        BcastLimits { window, single_copy: None }
    }

    #[test]
    fn above_a_c_int_of_bytes_the_ranks_ask_each_other_and_the_route_stays_native() {
        let limit = c_int::MAX as usize;
        assert!(!above_pack_counts(limit));
        assert!(above_pack_counts(limit + 1));
        // on either path, with no limit set
        assert!(native_route(limit + 1, window_limit(None), false, true).is_ok());
        assert!(native_route(8 << 30, window_limit(None), true, true).is_ok());
        let why = Handover::AbovePackLimit { bytes: limit + 1, rank: 3 };
        let agreed = |ranks: &[bool]| ranks.iter().enumerate().map(|(rank, &contiguous)| packing_word(ranks.len(), rank, contiguous)).max().unwrap();
        assert_eq!(lowest_packing_rank(4, agreed(&[true; 4])), None);
        assert_eq!(lowest_packing_rank(4, agreed(&[true, false, true, false])), Some(1));
        assert_eq!(lowest_packing_rank(4, agreed(&[false, true, true, false])), Some(0));
        assert_eq!(lowest_packing_rank(4, agreed(&[true, true, true, false])), Some(3));
        assert!(why.to_string().contains("2147483648 bytes") && why.to_string().contains("rank 3"), "{why}");
    }

    #[test]
    fn the_limits_and_the_window_decide_below_it() {
        assert!(native_route(100, window_limit(Some(100)), false, true).is_ok());
        assert!(matches!(native_route(101, window_limit(Some(100)), false, true), Err(Handover::AboveLimit { bytes: 101, limit: 100, .. })));
        assert!(matches!(native_route(100, window_limit(None), false, false), Err(Handover::AboveWindow { bytes: 100 })));
    }

    #[test]
    fn single_copy_has_its_own_limit_in_place_of_the_windows() {
        let limits = BcastLimits { window: Some(16384), single_copy: None };
        assert!(native_route(64 << 20, limits, true, true).is_ok(), "the window's limit must not apply to single copy");
        assert!(native_route(64 << 20, limits, true, false).is_ok(), "single copy does not need the window");
        let limits = BcastLimits { window: None, single_copy: Some(1 << 20) };
        let why = native_route((1 << 20) + 1, limits, true, true).unwrap_err();
        assert!(matches!(why, Handover::AboveLimit { parameter: "bcast_single_copy_max_bytes", limit: 1048576, .. }), "{why}");
        assert!(native_route((1 << 20) + 1, limits, false, true).is_ok(), "the window path keeps its own limit");
    }
}
