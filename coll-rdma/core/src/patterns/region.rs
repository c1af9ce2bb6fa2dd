//! Carving a collective's region of the window into cache-line-aligned
//! pieces. Every rank carves the same region the same way, so an offset
//! computed locally names the same bytes in a peer's window.

/// Pieces start on their own cache line so that words with different
/// writers never share a line.
pub(crate) const LINE: usize = 64;

pub(crate) struct RegionCursor {
    next: usize,
}

impl RegionCursor {
    pub(crate) fn starting_at(offset: usize) -> Self {
        RegionCursor { next: offset.next_multiple_of(LINE) }
    }

    /// Reserves `bytes` and returns where they start.
    pub(crate) fn take(&mut self, bytes: usize) -> usize {
        let start = self.next;
        self.next = (start + bytes).next_multiple_of(LINE);
        start
    }

    pub(crate) fn end(&self) -> usize {
        self.next
    }
}
