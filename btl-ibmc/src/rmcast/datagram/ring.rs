//! The datagram flavour's slots: W encoded frames indexed by sequence
//! number modulo W. At a root they keep what may have to be resent; at a
//! receiver they hold early arrivals and, at a co-root, what its subgroup
//! may still need. Each slot remembers which piece it holds, so a lookup
//! for a piece whose slot was reused misses instead of answering with the
//! wrong bytes. Buffers grow to the largest frame once and are reused.

use std::cell::Cell;
use std::time::Instant;

struct Slot {
    seq: Option<u64>,
    frame: Vec<u8>,
    /// When the piece was sent (root) or first arrived (receiver).
    stamp: Instant,
    /// Whether a collector resent it: its ACK then times no round trip
    /// (Karn's rule). A cell, because resending only reads the frame.
    resent: Cell<bool>,
    /// Whether the root multicast it again to answer a NACK.
    multicast_again: Cell<bool>,
}

pub(crate) struct PieceRing {
    slots: Vec<Slot>,
}

impl PieceRing {
    pub(crate) fn new(window: u64, now: Instant) -> Self {
        PieceRing { slots: (0..window).map(|_| Slot { seq: None, frame: Vec::new(), stamp: now, resent: Cell::new(false), multicast_again: Cell::new(false) }).collect() }
    }

    fn index(&self, seq: u64) -> usize {
        (seq % self.slots.len() as u64) as usize
    }

    pub(crate) fn holds(&self, seq: u64) -> bool {
        self.slots[self.index(seq)].seq == Some(seq)
    }

    pub(crate) fn frame(&self, seq: u64) -> Option<&[u8]> {
        let slot = &self.slots[self.index(seq)];
        (slot.seq == Some(seq)).then_some(slot.frame.as_slice())
    }

    pub(crate) fn stamp(&self, seq: u64) -> Option<Instant> {
        let slot = &self.slots[self.index(seq)];
        (slot.seq == Some(seq)).then_some(slot.stamp)
    }

    /// Whether piece `seq` is held and was resent.
    pub(crate) fn resent(&self, seq: u64) -> bool {
        let slot = &self.slots[self.index(seq)];
        slot.seq == Some(seq) && slot.resent.get()
    }

    /// Whether any held piece of `pieces` was resent. Only the last W can
    /// be held, so a range stretched by a corrupt ACK word costs no more.
    pub(crate) fn any_resent(&self, pieces: std::ops::Range<u64>) -> bool {
        let from = pieces.start.max(pieces.end.saturating_sub(self.slots.len() as u64));
        (from..pieces.end).any(|seq| self.resent(seq))
    }

    pub(crate) fn mark_resent(&self, seq: u64) {
        let slot = &self.slots[self.index(seq)];
        if slot.seq == Some(seq) {
            slot.resent.set(true);
        }
    }

    /// True the first time it is asked for a held piece `seq`: the root
    /// multicasts a NACKed piece again only once.
    pub(crate) fn first_multicast_again(&self, seq: u64) -> bool {
        let slot = &self.slots[self.index(seq)];
        slot.seq == Some(seq) && !slot.multicast_again.replace(true)
    }

    /// Puts piece `seq` in its slot, replacing whatever was there; `fill`
    /// writes the frame into the (cleared) buffer. The caller has checked
    /// that the previous occupant is no longer needed.
    pub(crate) fn store(&mut self, seq: u64, stamp: Instant, fill: impl FnOnce(&mut Vec<u8>)) -> &[u8] {
        let index = self.index(seq);
        let slot = &mut self.slots[index];
        slot.frame.clear();
        fill(&mut slot.frame);
        slot.seq = Some(seq);
        slot.stamp = stamp;
        slot.resent.set(false);
        slot.multicast_again.set(false);
        &slot.frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_slot_forgets_its_previous_piece() {
        let now = Instant::now();
        let mut ring = PieceRing::new(3, now);
        assert!(!ring.holds(0) && ring.frame(0).is_none());
        ring.store(1, now, |frame| frame.extend_from_slice(b"one"));
        assert_eq!(ring.frame(1), Some(&b"one"[..]));
        assert!(!ring.holds(4) && ring.stamp(4).is_none());
        ring.store(4, now, |frame| frame.extend_from_slice(b"four"));
        assert!(!ring.holds(1), "piece 1 was replaced by piece 4");
        assert_eq!((ring.frame(4), ring.stamp(4)), (Some(&b"four"[..]), Some(now)));

        ring.mark_resent(4);
        ring.mark_resent(7);
        assert!(ring.resent(4) && !ring.resent(7) && !ring.resent(1));
        assert!(ring.first_multicast_again(4) && !ring.first_multicast_again(4) && !ring.first_multicast_again(7));
        ring.store(7, now, |frame| frame.extend_from_slice(b"seven"));
        assert!(!ring.resent(7) && ring.first_multicast_again(7), "a reused slot starts afresh");
    }
}
