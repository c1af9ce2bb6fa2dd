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
//!   (release, after the copy has returned).
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

use btl_ibmc::{wait_for_peer_at_least, PeerReads, TransportError, WaitPolicy};

use crate::patterns::done_lines::DoneLines;
use crate::patterns::region::{RegionCursor, LINE};

/// The announced length of a call whose root has no message.
const ABANDONED: u64 = u64::MAX;

const ADDRESS_WORD: usize = 0;
const LENGTH_WORD: usize = 8;
const FLAG_WORD: usize = 16;

/// The region, identical on every rank: one announcement line (written by
/// this rank as root) and one done line per rank (written by that rank as
/// this rank's receiver).
#[derive(Debug)]
struct SingleCopyRegion {
    announcement: usize,
    done: DoneLines,
    end: usize,
}

impl SingleCopyRegion {
    fn new(start: usize, size: usize) -> Self {
        let mut cursor = RegionCursor::starting_at(start);
        let announcement = cursor.take(LINE);
        let done = DoneLines::take(&mut cursor, size);
        SingleCopyRegion { announcement, done, end: cursor.end() }
    }
}

/// One rank's single-copy bcast state for one communicator.
#[derive(Debug)]
pub struct SingleCopyBcast {
    rank: usize,
    size: usize,
    region: SingleCopyRegion,
    policy: WaitPolicy,
    /// Single-copy calls so far, on every rank alike.
    calls: u64,
}

impl SingleCopyBcast {
    /// Bytes of window the state needs on every rank.
    pub fn region_len(size: usize) -> usize {
        SingleCopyRegion::new(0, size).end
    }

    pub fn new(rank: usize, size: usize, region_offset: usize, policy: WaitPolicy) -> Self {
        SingleCopyBcast { rank, size, region: SingleCopyRegion::new(region_offset, size), policy, calls: 0 }
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
        if root == self.rank {
            self.announce(transport, buf.as_ptr() as usize as u64, buf.len() as u64);
            self.await_receivers(transport)
        } else {
            self.receive(transport, root, buf)
        }
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
        let line = self.region.announcement;
        transport.set_local_flag(line + ADDRESS_WORD, address);
        transport.set_local_flag(line + LENGTH_WORD, length);
        // Release (every local flag store is): a receiver that sees the
        // call number sees the address and length above, and the root's
        // buffer as the program wrote it before MPI_Bcast.
        transport.set_local_flag(line + FLAG_WORD, self.calls);
    }

    fn await_receivers<T: PeerReads + ?Sized>(&self, transport: &T) -> Result<(), TransportError> {
        let waits = self.policy.without_side_progress();
        self.region.done.await_readers(transport, self.rank, self.size, self.calls, waits, "single-copy bcast")
    }

    fn receive<T: PeerReads + ?Sized>(&self, transport: &T, root: usize, buf: &mut [u8]) -> Result<(), TransportError> {
        let region = &self.region;
        let call = self.calls;
        let flag = wait_for_peer_at_least(transport, root, region.announcement + FLAG_WORD, call, self.policy.without_side_progress(), || {
            format!("rank {root} to announce single-copy bcast {call} to rank {}", self.rank)
        })?;
        if flag != call {
            return Err(TransportError::Failed(format!(
                "rank {}: root {root} announced single-copy bcast {flag} while this rank waits for {call}; the ranks are out of step",
                self.rank
            )));
        }
        let address = transport.peer_flag(root, region.announcement + ADDRESS_WORD)?;
        let length = transport.peer_flag(root, region.announcement + LENGTH_WORD)?;
        if length != buf.len() as u64 {
            let theirs = if length == ABANDONED { "no message (it could not pack it)".to_string() } else { format!("{length} bytes") };
            return Err(TransportError::Failed(format!(
                "rank {}: bcast root {root} has {theirs}, this rank expects {} bytes",
                self.rank,
                buf.len()
            )));
        }
        let copied = transport.read_peer_memory(root, address, buf);
        // Release, after the copy returned: the root may reuse its buffer
        // once it sees this. Said even when the copy failed: only this rank
        // lacks the data and it returns the error, so the root and the other
        // receivers need not wait for the fault timeout.
        region.done.say_done(transport, root, self.rank, call)?;
        copied
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_gives_every_line_its_own_cache_line() {
        let region = SingleCopyRegion::new(100, 3);
        assert_eq!(region.announcement, 128);
        assert_eq!(region.done.line(0), 192);
        assert_eq!(region.done.line(2), 320);
        assert_eq!(region.end, 384);
        assert_eq!(SingleCopyBcast::region_len(3), 256);
    }
}
