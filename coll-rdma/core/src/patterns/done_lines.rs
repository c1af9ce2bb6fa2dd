//! Lines in a rank's window where each peer says it has finished reading
//! that rank's memory (its user buffers, read with cross-memory attach) in
//! call n. A line has one writer, its reader, whose values only grow, and
//! waits compare with `>=`: a value written for a later call still means
//! call n was done, so nothing is reset between calls.

use btl_ibmc::{wait_at_least, PeerReads, TransportError, Waits};

use super::region::{RegionCursor, LINE};

/// One line per rank, identical on every rank.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DoneLines {
    first: usize,
}

impl DoneLines {
    pub(crate) fn take(cursor: &mut RegionCursor, size: usize) -> Self {
        DoneLines { first: cursor.take(size * LINE) }
    }

    /// Where `reader` says it is done, in every rank's window.
    pub(crate) fn line(&self, reader: usize) -> usize {
        self.first + reader * LINE
    }

    /// `reader` tells `owner` it will read nothing more of `owner`'s memory
    /// in call `call` (release: after its reads returned).
    pub(crate) fn say_done<T: PeerReads + ?Sized>(&self, transport: &T, owner: usize, reader: usize, call: u64) -> Result<(), TransportError> {
        transport.put_flag(owner, self.line(reader), call)
    }

    /// Waits until every rank of `size` but `owner` said it is done with
    /// `owner`'s memory in call `call`; `what` names the collective in a
    /// stall report.
    pub(crate) fn await_readers<T: PeerReads + ?Sized>(
        &self,
        transport: &T,
        owner: usize,
        size: usize,
        call: u64,
        waits: Waits<'_>,
        what: &str,
    ) -> Result<(), TransportError> {
        for reader in (0..size).filter(|&reader| reader != owner) {
            wait_at_least(transport, self.line(reader), call, waits, || {
                format!("rank {reader} to finish reading rank {owner}'s memory in {what} {call}")
            })?;
        }
        Ok(())
    }
}
