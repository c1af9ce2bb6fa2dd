//! MPI_Bcast in one copy where every rank can read every other's memory
//! (shared memory with cross-memory attach, `PeerReads::read_peer_memory`):
//! the root announces where its message lies in its own address space,
//! every receiver copies it straight from the root's buffer into its own
//! (the transport reads in bounded chunks, and the receivers read at the
//! same time), and the root returns once every receiver has its bytes: its
//! buffer is theirs to read until then.
//!
//! # The protocol (call n: the n-th single-copy bcast on the communicator,
//! the same count on every rank)
//!
//! * Root: stores the address and the length of its message in its own
//!   announcement line, then the line's flag n (release); waits until every
//!   receiver's done line in its window reads n or more.
//! * Receiver: waits until the root's flag reads n (acquire: the address
//!   and length words are then the root's for call n), checks the length,
//!   copies, then writes n into its done line in the root's window
//!   (release, after the copy has returned; at once when the length
//!   differs, and the call fails).
//!
//! # The root's share (messages of [`ROOT_SHARE_MIN_BYTES`] or more)
//!
//! The root would otherwise only wait, so it copies part of the message
//! itself: the last [`root_share`] bytes (about 1/size of the message),
//! written straight into each receiver's buffer with `write_peer_memory`,
//! while the receiver reads the rest. At np=2 each side copies half.
//!
//! * Receiver, first (in every single-copy call): stores its buffer's
//!   address and length in its own receiver line, then the line's flag n
//!   (release).
//! * Root, after announcing: for each receiver, waits for that flag, and if
//!   the receiver's length is the root's, writes the share into the
//!   receiver's buffer; then puts 2n + 1 into the receiver's share word
//!   (2n if it did not write: lengths differ, or the write failed).
//! * Receiver, after reading the rest: waits until its share word reads 2n
//!   or more, and reads the share itself if it holds 2n. Only then does it
//!   say done and return: before that, the root may still be writing into
//!   its buffer. A receiver whose length differs says done and returns at
//!   once; the root, seeing the length in the receiver line, writes nothing
//!   into it.
//!
//! # Why a line is never rewritten under its reader
//!
//! The root's announcement line has one writer, the root, which rewrites it
//! only in a later call it roots; it returns from call n only after every
//! receiver's done line shows n, i.e. after every receiver read the line and
//! finished copying. A done line in root R's window has one writer, its
//! receiver, whose values only grow; R's waits compare with `>=`, so a value
//! written for a later call (R rooting again) still means call n was done.
//! Nothing in either line is reset across calls.
//!
//! # A root without a message
//!
//! A root whose pack failed announces a length no receiver expects
//! ([`ABANDONED`]); every receiver fails its call, and the root does not
//! wait. The ranks are then out of step: the caller stops using the state.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use btl_ibmc::{wait_at_least, wait_for_any_peer_at_least, PeerReads, TransportError, WaitPolicy};

use crate::patterns::done_lines::DoneLines;
use crate::patterns::in_step::{await_peer_step, PeerStep};
use crate::patterns::meet::{StallClock, StallLimits};
use crate::patterns::region::{RegionCursor, LINE};

use super::single_copy_run::{RunState, SingleCopyRun};

/// The announced length of a call whose root has no message.
pub(super) const ABANDONED: u64 = u64::MAX;

/// In an announcement line (the root's) and a receiver line (a receiver's).
pub(super) const ADDRESS_WORD: usize = 0;
pub(super) const LENGTH_WORD: usize = 8;
pub(super) const FLAG_WORD: usize = 16;

/// Shortest message of which the root copies a share. Below it, a second
/// synchronisation per receiver costs more than the copy it splits.
pub const ROOT_SHARE_MIN_BYTES: usize = 256 * 1024;

/// Bytes at the end of a `len`-byte message that the root writes into each
/// of `size - 1` receivers: a page-aligned 1/size of the message, so that
/// the root and each receiver copy about the same; 0 below
/// [`ROOT_SHARE_MIN_BYTES`].
pub fn root_share(len: usize, size: usize) -> usize {
    if len < ROOT_SHARE_MIN_BYTES || size < 2 {
        return 0;
    }
    (len / size) & !4095
}

/// The region, identical on every rank: one announcement line (written by
/// this rank as root), one receiver line (written by this rank as a
/// receiver), one share word (written by the root of the call into this
/// rank as its receiver) and one done line per rank (written by that rank
/// as this rank's receiver).
#[derive(Clone, Copy, Debug)]
pub(super) struct SingleCopyRegion {
    pub(super) announcement: usize,
    pub(super) receiver: usize,
    pub(super) share: usize,
    pub(super) done: DoneLines,
    end: usize,
}

impl SingleCopyRegion {
    fn new(start: usize, size: usize) -> Self {
        let mut cursor = RegionCursor::starting_at(start);
        let announcement = cursor.take(LINE);
        let receiver = cursor.take(LINE);
        let share = cursor.take(LINE);
        let done = DoneLines::take(&mut cursor, size);
        SingleCopyRegion { announcement, receiver, share, done, end: cursor.end() }
    }
}

/// One rank's single-copy bcast state for one communicator.
#[derive(Debug)]
pub struct SingleCopyBcast {
    rank: usize,
    size: usize,
    region: SingleCopyRegion,
    policy: WaitPolicy,
    /// Single-copy calls so far, on every rank alike (runs included,
    /// counted when started).
    calls: u64,
    /// Shared with the runs, which write shares too.
    root_share_bytes: Arc<AtomicU64>,
}

impl SingleCopyBcast {
    /// Bytes of window the state needs on every rank.
    pub fn region_len(size: usize) -> usize {
        SingleCopyRegion::new(0, size).end
    }

    pub fn new(rank: usize, size: usize, region_offset: usize, policy: WaitPolicy) -> Self {
        SingleCopyBcast { rank, size, region: SingleCopyRegion::new(region_offset, size), policy, calls: 0, root_share_bytes: Arc::default() }
    }

    /// MPI_Bcast of `buf` from `root` in one copy. Every rank passes the
    /// same root and length, and the transport reads peer memory on every
    /// rank (`reads_peer_memory`, agreed at setup).
    pub fn bcast<T: PeerReads + ?Sized>(&mut self, transport: &T, root: usize, buf: &mut [u8]) -> Result<(), TransportError> {
        if root >= self.size {
            return Err(TransportError::OutOfRange { peer: root, offset: 0, len: buf.len() });
        }
        self.calls += 1;
        if self.size == 1 {
            return Ok(());
        }
        let share = root_share(buf.len(), self.size);
        if root == self.rank {
            self.announce(transport, buf.as_ptr() as usize as u64, buf.len() as u64);
            if share > 0 {
                self.write_shares(transport, buf.len(), &buf[buf.len() - share..])?;
            }
            self.await_receivers(transport)
        } else {
            // Offered whatever this rank's length: a root whose length
            // differs (an erroneous program) then finds the offer, sees the
            // difference and writes nothing, instead of waiting for ever.
            self.offer_buffer(transport, buf);
            self.receive(transport, root, buf, share)
        }
    }

    /// Bytes the root wrote into receivers' buffers so far (its share of
    /// every call it rooted).
    pub fn root_share_bytes(&self) -> u64 {
        self.root_share_bytes.load(Ordering::Relaxed)
    }

    /// Starts one bcast of `buf` from `root` as a resumable run
    /// (`single_copy_run`), taking its call number now: runs must be
    /// started in the communicator's post order and advanced one at a
    /// time in that order, a blocking call only once they are finished
    /// (`schedule_queue`).
    pub fn start<'a>(&mut self, root: usize, buf: &'a mut [u8]) -> Result<SingleCopyRun<'a>, TransportError> {
        if root >= self.size {
            return Err(TransportError::OutOfRange { peer: root, offset: 0, len: buf.len() });
        }
        self.calls += 1;
        let state = if self.size == 1 { RunState::Finished } else { RunState::Begin };
        Ok(SingleCopyRun {
            rank: self.rank,
            size: self.size,
            root,
            call: self.calls,
            region: self.region,
            share: root_share(buf.len(), self.size),
            buf,
            state,
            root_share_bytes: Arc::clone(&self.root_share_bytes),
            stall: StallClock::new(StallLimits::of(&self.policy)),
        })
    }

    /// The root's side of a call whose message it cannot provide: every
    /// receiver's call fails. The caller must not use this state again.
    pub fn abandon_at_root<T: PeerReads + ?Sized>(&mut self, transport: &T, root: usize, len: usize) -> Result<(), TransportError> {
        if root != self.rank {
            return Err(TransportError::OutOfRange { peer: root, offset: 0, len });
        }
        self.calls += 1;
        self.announce(transport, 0, ABANDONED);
        Ok(())
    }

    fn announce<T: PeerReads + ?Sized>(&self, transport: &T, address: u64, length: u64) {
        announce(transport, &self.region, self.calls, address, length);
    }

    /// The receiver's side of the root's share: where the root may write.
    fn offer_buffer<T: PeerReads + ?Sized>(&self, transport: &T, buf: &mut [u8]) {
        offer_buffer(transport, &self.region, self.calls, buf);
    }

    /// The root writes `share` (its message's tail) into every receiver
    /// that offered a buffer of the message's length, and tells each
    /// whether it did. A failed write is the receiver's to make up (it then
    /// reads the share itself), not an error of this call.
    fn write_shares<T: PeerReads + ?Sized>(&mut self, transport: &T, len: usize, share: &[u8]) -> Result<(), TransportError> {
        let call = self.calls;
        let policy = self.policy;
        let waits = policy.without_side_progress();
        let line = self.region.receiver;
        // Served in the order they offer: a late receiver holds up no
        // other receiver's share.
        let mut pending: Vec<usize> = (0..self.size).filter(|&receiver| receiver != self.rank).collect();
        while !pending.is_empty() {
            let mut ready = Vec::with_capacity(pending.len());
            for &receiver in &pending {
                if transport.peer_flag(receiver, line + FLAG_WORD)? >= call {
                    ready.push(receiver);
                }
            }
            if ready.is_empty() {
                wait_for_any_peer_at_least(transport, &pending, line + FLAG_WORD, call, waits, || {
                    format!("a receiver to offer its buffer for single-copy bcast {call} from rank {}", self.rank)
                })?;
                continue;
            }
            for &receiver in &ready {
                self.write_share(transport, receiver, len, share)?;
            }
            pending.retain(|receiver| !ready.contains(receiver));
        }
        Ok(())
    }

    fn write_share<T: PeerReads + ?Sized>(&mut self, transport: &T, receiver: usize, len: usize, share: &[u8]) -> Result<(), TransportError> {
        write_share(transport, &self.region, self.calls, receiver, len, share, &self.root_share_bytes)
    }

    fn await_receivers<T: PeerReads + ?Sized>(&self, transport: &T) -> Result<(), TransportError> {
        let waits = self.policy.without_side_progress();
        self.region.done.await_readers(transport, self.rank, self.size, self.calls, waits, "single-copy bcast")
    }

    fn receive<T: PeerReads + ?Sized>(&self, transport: &T, root: usize, buf: &mut [u8], share: usize) -> Result<(), TransportError> {
        let region = &self.region;
        let call = self.calls;
        let step = PeerStep { rank: self.rank, peer: root, word: region.announcement + FLAG_WORD, call, step: "single-copy bcast announcement" };
        await_peer_step(transport, self.policy.without_side_progress(), &step)?;
        let address = transport.peer_flag(root, region.announcement + ADDRESS_WORD)?;
        let length = transport.peer_flag(root, region.announcement + LENGTH_WORD)?;
        if length != buf.len() as u64 {
            // The root writes nothing into a buffer of another length, and
            // waits for this line before it returns.
            region.done.say_done(transport, root, self.rank, call)?;
            return Err(length_mismatch(self.rank, root, length, buf.len()));
        }
        let (rest, tail) = buf.split_at_mut(buf.len() - share);
        let mut copied = transport.read_peer_memory(root, address, rest);
        if share > 0 {
            // Whatever the copy above did, the root may be writing into
            // `tail` until this word says otherwise.
            let word = wait_at_least(transport, region.share, 2 * call, self.policy.without_side_progress(), || {
                format!("rank {root} to write its share of single-copy bcast {call} into rank {}", self.rank)
            })?;
            if word == 2 * call {
                copied = copied.and_then(|()| transport.read_peer_memory(root, address + rest.len() as u64, tail));
            }
        }
        // Release, after the copies returned: the root may reuse its buffer
        // once it sees this. Said even when a copy failed: only this rank
        // lacks the data and it returns the error, so the root and the other
        // receivers need not wait for the fault timeout.
        region.done.say_done(transport, root, self.rank, call)?;
        copied
    }
}

/// The root stores where its message lies and its length for call `call`.
pub(super) fn announce<T: PeerReads + ?Sized>(transport: &T, region: &SingleCopyRegion, call: u64, address: u64, length: u64) {
    let line = region.announcement;
    transport.set_local_flag(line + ADDRESS_WORD, address);
    transport.set_local_flag(line + LENGTH_WORD, length);
    // Release (every local flag store is): a receiver that sees the call
    // number sees the address and length above, and the root's buffer as
    // the program wrote it before the call.
    transport.set_local_flag(line + FLAG_WORD, call);
}

/// The receiver's side of the root's share: where the root may write.
pub(super) fn offer_buffer<T: PeerReads + ?Sized>(transport: &T, region: &SingleCopyRegion, call: u64, buf: &mut [u8]) {
    let line = region.receiver;
    transport.set_local_flag(line + ADDRESS_WORD, buf.as_mut_ptr() as usize as u64);
    transport.set_local_flag(line + LENGTH_WORD, buf.len() as u64);
    // Release: a root that sees the call number sees the two words above.
    transport.set_local_flag(line + FLAG_WORD, call);
}

/// The root writes `share` (its message's tail) into `receiver`, which
/// has offered its buffer for call `call`, if its length is the message's,
/// and says whether it did.
pub(super) fn write_share<T: PeerReads + ?Sized>(
    transport: &T,
    region: &SingleCopyRegion,
    call: u64,
    receiver: usize,
    len: usize,
    share: &[u8],
    written_bytes: &AtomicU64,
) -> Result<(), TransportError> {
    let line = region.receiver;
    let address = transport.peer_flag(receiver, line + ADDRESS_WORD)?;
    let length = transport.peer_flag(receiver, line + LENGTH_WORD)?;
    // A receiver whose length differs returns without waiting for its
    // share word: nothing may be written into it.
    let written = length == len as u64 && transport.write_peer_memory(receiver, address + (len - share.len()) as u64, share).is_ok();
    if written {
        written_bytes.fetch_add(share.len() as u64, Ordering::Relaxed);
    }
    transport.put_flag(receiver, region.share, 2 * call + u64::from(written))
}

/// A receiver's error for a root whose announced length is not its own.
pub(super) fn length_mismatch(rank: usize, root: usize, announced: u64, expected: usize) -> TransportError {
    let theirs = if announced == ABANDONED { "no message (it could not pack it)".to_string() } else { format!("{announced} bytes") };
    TransportError::Failed(format!("rank {rank}: bcast root {root} has {theirs}, this rank expects {expected} bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_gives_every_line_its_own_cache_line() {
        let region = SingleCopyRegion::new(100, 3);
        assert_eq!(region.announcement, 128);
        assert_eq!(region.receiver, 192);
        assert_eq!(region.share, 256);
        assert_eq!(region.done.line(0), 320);
        assert_eq!(region.done.line(2), 448);
        assert_eq!(region.end, 512);
        assert_eq!(SingleCopyBcast::region_len(3), 384);
    }
}
