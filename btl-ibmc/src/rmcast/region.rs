//! Where reliable multicast keeps its words in every rank's window. The
//! caller reserves `region_len` bytes at the same offset on every rank;
//! which of the two layouts is used depends on the transport, so the
//! region is as long as the longer of them.
//!
//! ```text
//! shared window (the root's own window holds its messages):
//!   slot j = start + j·stride:  [flag | message length | offset | pad to 64 | payload]
//!                               (a piece of at most 40 bytes sits in the pad instead)
//!   after the W slots:          one 64-byte line per reader rank: pieces it delivered
//! datagram (collectors' windows hold ACKs):
//!   start + (root·A + position)·8: pieces the member at `position` of this
//!   rank's subgroup for `root` delivered (A = Groups::ack_slots_per_root)
//! ```
//! Shared-window ACK lines are a cache line each because every reader
//! writes its own while the root scans them all; datagram ACK words are
//! packed because they are written by RDMA, not by cores sharing lines.

use super::config::RmcastConfig;
use super::groups::Groups;

pub(crate) const LINE: usize = 64;
const WORD: usize = 8;
/// What fits in a slot's first line after the flag, length and offset words.
pub(crate) const INLINE_PAYLOAD: usize = LINE - 3 * WORD;

/// The ring of slots in the root's own window, and the readers' ACK lines.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SharedRegion {
    ring: usize,
    stride: usize,
    window: u64,
    acks: usize,
    pub(crate) end: usize,
}

impl SharedRegion {
    pub(crate) fn new(start: usize, size: usize, config: &RmcastConfig) -> Self {
        let stride = LINE + config.slot_bytes.next_multiple_of(LINE);
        let acks = start + config.window_slots * stride;
        SharedRegion { ring: start, stride, window: config.window(), acks, end: acks + size * LINE }
    }

    fn slot(&self, seq: u64) -> usize {
        self.ring + (seq % self.window) as usize * self.stride
    }

    /// Holds seq + 1 once the slot holds piece `seq` (0: never written).
    pub(crate) fn flag(&self, seq: u64) -> usize {
        self.slot(seq)
    }

    pub(crate) fn message_len_word(&self, seq: u64) -> usize {
        self.slot(seq) + WORD
    }

    pub(crate) fn offset_word(&self, seq: u64) -> usize {
        self.slot(seq) + 2 * WORD
    }

    /// Where a piece of `len` bytes goes. A small piece shares the flag's
    /// line, so a reader fetches one line per message instead of two.
    pub(crate) fn payload(&self, seq: u64, len: usize) -> usize {
        if len <= INLINE_PAYLOAD { self.slot(seq) + 3 * WORD } else { self.slot(seq) + LINE }
    }

    pub(crate) fn ack_line(&self, reader: usize) -> usize {
        self.acks + reader * LINE
    }
}

/// The ACK arrays collectors read in their own windows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DatagramRegion {
    start: usize,
    per_root: usize,
    pub(crate) end: usize,
}

impl DatagramRegion {
    pub(crate) fn new(start: usize, size: usize, config: &RmcastConfig) -> Self {
        let per_root = Groups::ack_slots_per_root(size, config.co_roots_for(size));
        DatagramRegion { start, per_root, end: (start + size * per_root * WORD).next_multiple_of(LINE) }
    }

    pub(crate) fn ack_word(&self, root: usize, position: usize) -> usize {
        debug_assert!(position < self.per_root);
        self.start + (root * self.per_root + position) * WORD
    }
}

/// Bytes of window reliable multicast needs on every rank of a
/// communicator of `size` ranks.
pub fn region_len(size: usize, config: &RmcastConfig) -> usize {
    SharedRegion::new(0, size, config).end.max(DatagramRegion::new(0, size, config).end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_ack_lines_stay_inside_the_region_and_apart() {
        for (window_slots, slot_bytes, size) in [(1, 1, 2), (3, 100, 5), (64, 4096, 33), (7, 64, 1)] {
            let config = RmcastConfig { window_slots, slot_bytes, co_roots: 2, ..RmcastConfig::default() };
            let start = 4096;
            let shared = SharedRegion::new(start, size, &config);
            let datagram = DatagramRegion::new(start, size, &config);
            let end = start + region_len(size, &config);
            assert!(shared.end <= end && datagram.end <= end);
            for seq in 0..2 * window_slots as u64 {
                assert_eq!(shared.flag(seq) % LINE, 0);
                assert!(shared.payload(seq, slot_bytes) + slot_bytes <= shared.flag(seq) + shared.stride);
                assert_eq!(shared.flag(seq), shared.flag(seq + window_slots as u64), "slots are reused after W pieces");
            }
            let last_slot = shared.payload(window_slots as u64 - 1, slot_bytes) + slot_bytes;
            assert!(last_slot <= shared.ack_line(0));
            assert!(shared.ack_line(size - 1) + LINE <= shared.end);
            if let Some(last_position) = Groups::ack_slots_per_root(size, config.co_roots_for(size)).checked_sub(1) {
                let last_word = datagram.ack_word(size - 1, last_position);
                assert!(last_word + WORD <= datagram.end && datagram.ack_word(0, 0) == start);
            }
        }
    }
}
