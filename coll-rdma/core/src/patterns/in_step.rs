//! Waiting for a peer to reach this rank's call of a protocol that counts
//! its calls alike on every rank (the cross-memory collectives: the
//! parallel reduction, its read tree, the single-copy bcast). A peer's word
//! holding a later call than this rank's means the ranks no longer run the
//! same sequence of collectives; the call fails with both numbers rather
//! than reading memory announced for another call.

use btl_ibmc::{wait_for_peer_at_least, PeerReads, TransportError, Waits};

/// One rank's wait for a peer's step word.
pub(crate) struct PeerStep<'a> {
    /// This rank, named in the messages.
    pub rank: usize,
    pub peer: usize,
    /// The peer's word (an offset in its window) that holds the number of
    /// the last call in which it took the step.
    pub word: usize,
    pub call: u64,
    /// The step, as the messages name it ("parallel reduction
    /// announcement", ...).
    pub step: &'a str,
}

/// Waits until `at.peer`'s step word reads `at.call` (acquire: what the
/// peer wrote before it is visible); an error if it reads more.
pub(crate) fn await_peer_step<T: PeerReads + ?Sized>(transport: &T, waits: Waits<'_>, at: &PeerStep<'_>) -> Result<(), TransportError> {
    let PeerStep { rank, peer, word, call, step } = *at;
    let seen = wait_for_peer_at_least(transport, peer, word, call, waits, || format!("rank {peer}'s {step} {call}, for rank {rank}"))?;
    check_in_step(at, seen)
}

/// A peer's step word `seen` at least `at.call` must be `at.call`.
pub(crate) fn check_in_step(at: &PeerStep<'_>, seen: u64) -> Result<(), TransportError> {
    let PeerStep { rank, peer, call, step, .. } = *at;
    if seen != call {
        return Err(TransportError::Failed(format!(
            "rank {rank}: rank {peer} is at {step} {seen} while this rank is at {call}; the ranks are out of step"
        )));
    }
    Ok(())
}

/// After `await_peer_step`: the length the peer announced at `word` must
/// be this rank's.
pub(crate) fn check_peer_length<T: PeerReads + ?Sized>(transport: &T, rank: usize, peer: usize, word: usize, len: u64) -> Result<(), TransportError> {
    let theirs = transport.peer_flag(peer, word)?;
    if theirs != len {
        return Err(TransportError::Failed(format!("rank {rank}: rank {peer} announced {theirs} bytes, this rank {len} bytes")));
    }
    Ok(())
}
