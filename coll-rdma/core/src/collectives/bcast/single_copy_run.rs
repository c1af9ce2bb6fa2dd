//! One single-copy bcast as a resumable run (`Schedule`): `single_copy`'s
//! protocol cut at every point where the blocking call would wait. The
//! words, lines and their invariants are `single_copy`'s; the run only
//! orders the same steps as states.
//!
//! # States
//!
//! * `Begin`: the run's first advance, which comes only once the
//!   communicator's earlier bcast runs finished on this rank (the queue's
//!   lane), so the lines of the previous call are no longer read. The
//!   root announces its buffer; a receiver offers its own (for the root's
//!   share).
//! * Root: `Shares` writes the root's share into each receiver as soon as
//!   that receiver's offer is there (a late receiver holds up no other),
//!   then `AwaitReaders` until every receiver said done: only then may the
//!   application touch the buffer again, even where writing a share
//!   failed (the run then fails, but only once the receivers are done).
//! * Receiver: `AwaitAnnouncement` until the root's flag reads this call,
//!   then copies all but the root's share at once; `AwaitShare` until the
//!   root says whether it wrote the share (reading it itself if not), then
//!   says done. A receiver says done before it fails (another length, a
//!   failed copy), so the root is never held by a receiver that gave up.
//!
//! The call number is taken when the run is started, in post order, which
//! MPI makes the same on every rank.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use btl_ibmc::{PeerReads, TransportError};

use super::single_copy::{length_mismatch, offer_buffer, write_share, SingleCopyRegion, ABANDONED, ADDRESS_WORD, FLAG_WORD, LENGTH_WORD};
use crate::patterns::in_step::{check_in_step, PeerStep};
use crate::patterns::meet::{advance_by_polling, Meet, Resumable, StallClock};
use crate::schedule::{Schedule, Step};

#[derive(Debug)]
pub(super) enum RunState {
    Begin,
    Shares { pending: Vec<usize> },
    /// `failure`: the root's call failed (writing a share), but receivers
    /// may still be reading its buffer, so it waits for them all the same.
    AwaitReaders { failure: Option<TransportError> },
    AwaitAnnouncement,
    AwaitShare { address: u64, copied: Result<(), TransportError> },
    /// A root that will not provide its message (`abandon_at_root`):
    /// announces the abandoned length, which every receiver refuses, and
    /// fails without waiting (as `SingleCopyBcast::abandon_at_root`).
    Abandoning,
    Finished,
}

impl RunState {
    /// A number per state, for the stall clock's "did it move".
    fn ordinal(&self) -> (u8, usize) {
        match self {
            RunState::Begin => (0, 0),
            RunState::Shares { pending } => (1, pending.len()),
            RunState::AwaitReaders { .. } => (2, 0),
            RunState::AwaitAnnouncement => (3, 0),
            RunState::AwaitShare { .. } => (4, 0),
            RunState::Abandoning => (5, 0),
            RunState::Finished => (6, 0),
        }
    }
}

/// One rank's part of one single-copy bcast; made by `SingleCopyBcast::start`.
pub struct SingleCopyRun<'a> {
    pub(super) rank: usize,
    pub(super) size: usize,
    pub(super) root: usize,
    pub(super) call: u64,
    pub(super) region: SingleCopyRegion,
    /// Bytes at the end of the message the root writes into each receiver.
    pub(super) share: usize,
    pub(super) buf: &'a mut [u8],
    pub(super) state: RunState,
    pub(super) root_share_bytes: Arc<AtomicU64>,
    pub(super) stall: StallClock,
}

impl SingleCopyRun<'_> {
    /// See `FlatBcastRun::abandon_at_root`.
    pub(super) fn abandon_at_root(&mut self) {
        debug_assert_eq!(self.rank, self.root, "only a root abandons its message");
        if matches!(self.state, RunState::Begin) {
            self.state = RunState::Abandoning;
        }
    }

    fn begin<T: PeerReads + ?Sized>(&mut self, transport: &T) -> RunState {
        if self.rank == self.root {
            super::single_copy::announce(transport, &self.region, self.call, self.buf.as_ptr() as usize as u64, self.buf.len() as u64);
            if self.share > 0 {
                RunState::Shares { pending: (0..self.size).filter(|&receiver| receiver != self.rank).collect() }
            } else {
                RunState::AwaitReaders { failure: None }
            }
        } else {
            offer_buffer(transport, &self.region, self.call, self.buf);
            RunState::AwaitAnnouncement
        }
    }

    /// Writes the share into every receiver whose offer is there; the
    /// receivers still to serve.
    fn write_shares<T: PeerReads + ?Sized>(&self, transport: &T, pending: Vec<usize>) -> Result<Vec<usize>, TransportError> {
        let len = self.buf.len();
        let share = &self.buf[len - self.share..];
        let mut still = Vec::with_capacity(pending.len());
        for receiver in pending {
            if transport.peer_flag(receiver, self.region.receiver + FLAG_WORD)? >= self.call {
                write_share(transport, &self.region, self.call, receiver, len, share, &self.root_share_bytes)?;
            } else {
                still.push(receiver);
            }
        }
        Ok(still)
    }

    fn readers_done<T: PeerReads + ?Sized>(&self, transport: &T) -> bool {
        (0..self.size).filter(|&reader| reader != self.rank).all(|reader| transport.local_flag(self.region.done.line(reader)) >= self.call)
    }

    /// The receiver's copy once the root announced this call: `None` while
    /// it has not.
    fn copy_announced<T: PeerReads + ?Sized>(&mut self, transport: &T) -> Result<Option<RunState>, TransportError> {
        let (root, call) = (self.root, self.call);
        let announcement = self.region.announcement;
        let seen = transport.peer_flag(root, announcement + FLAG_WORD)?;
        if seen < call {
            return Ok(None);
        }
        let step = PeerStep { rank: self.rank, peer: root, word: announcement + FLAG_WORD, call, step: "single-copy bcast announcement" };
        if let Err(out_of_step) = check_in_step(&step, seen) {
            // Said all the same, so that the root does not wait for this
            // rank's reads until its fault timeout.
            self.region.done.say_done(transport, root, self.rank, call)?;
            return Err(out_of_step);
        }
        let address = transport.peer_flag(root, announcement + ADDRESS_WORD)?;
        let length = transport.peer_flag(root, announcement + LENGTH_WORD)?;
        if length != self.buf.len() as u64 {
            // The root writes nothing into a buffer of another length, and
            // waits for this rank's done line before it returns.
            self.region.done.say_done(transport, root, self.rank, call)?;
            return Err(length_mismatch(self.rank, root, length, self.buf.len()));
        }
        let rest = self.buf.len() - self.share;
        let copied = transport.read_peer_memory(root, address, &mut self.buf[..rest]);
        Ok(Some(RunState::AwaitShare { address, copied }))
    }

    /// Whether the root has said whether it wrote its share (always,
    /// without a share).
    fn share_settled<T: PeerReads + ?Sized>(&self, transport: &T) -> bool {
        self.share == 0 || transport.local_flag(self.region.share) >= 2 * self.call
    }

    /// The receiver's end once `share_settled`: reads the share itself if
    /// the root did not write it, then says done.
    fn finish_receiving<T: PeerReads + ?Sized>(&mut self, transport: &T, address: u64, copied: Result<(), TransportError>) -> Result<(), TransportError> {
        let mut copied = copied;
        if self.share > 0 && transport.local_flag(self.region.share) == 2 * self.call {
            let rest = self.buf.len() - self.share;
            copied = copied.and_then(|()| transport.read_peer_memory(self.root, address + rest as u64, &mut self.buf[rest..]));
        }
        // Release, after the copies returned: the root may reuse its buffer
        // once it sees this; said even when a copy failed (see the header).
        self.region.done.say_done(transport, self.root, self.rank, self.call)?;
        copied
    }
}

impl<T: PeerReads + ?Sized> Resumable<T> for SingleCopyRun<'_> {
    type Position = (u8, usize);

    fn resume(&mut self, transport: &T, _meet: Meet<'_>) -> Result<bool, TransportError> {
        loop {
            let state = std::mem::replace(&mut self.state, RunState::Finished);
            self.state = match state {
                RunState::Finished => return Ok(true),
                RunState::Begin => self.begin(transport),
                RunState::Abandoning => {
                    super::single_copy::announce(transport, &self.region, self.call, 0, ABANDONED);
                    return Err(TransportError::Failed(format!(
                        "single-copy bcast {} from root {}: abandoned at the root (its receivers were told)",
                        self.call, self.root
                    )));
                }
                RunState::Shares { pending } => match self.write_shares(transport, pending) {
                    Ok(pending) if !pending.is_empty() => {
                        self.state = RunState::Shares { pending };
                        return Ok(false);
                    }
                    Ok(_) => RunState::AwaitReaders { failure: None },
                    Err(why) => RunState::AwaitReaders { failure: Some(why) },
                },
                RunState::AwaitReaders { failure } => {
                    if !self.readers_done(transport) {
                        self.state = RunState::AwaitReaders { failure };
                        return Ok(false);
                    }
                    if let Some(why) = failure {
                        return Err(why);
                    }
                    RunState::Finished
                }
                RunState::AwaitAnnouncement => match self.copy_announced(transport)? {
                    Some(next) => next,
                    None => {
                        self.state = RunState::AwaitAnnouncement;
                        return Ok(false);
                    }
                },
                RunState::AwaitShare { address, copied } => {
                    if !self.share_settled(transport) {
                        self.state = RunState::AwaitShare { address, copied };
                        return Ok(false);
                    }
                    self.finish_receiving(transport, address, copied)?;
                    RunState::Finished
                }
            };
        }
    }

    fn position(&self) -> (u8, usize) {
        self.state.ordinal()
    }

    fn stall_clock(&mut self) -> &mut StallClock {
        &mut self.stall
    }

    fn describe(&self) -> String {
        format!("single-copy bcast {} from root {} at {:?}", self.call, self.root, self.state)
    }
}

impl<T: PeerReads + ?Sized> Schedule<T> for SingleCopyRun<'_> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        advance_by_polling(self, &*transport)
    }
}
