//! The datagram flavour's slots: W encoded frames indexed by sequence
//! number modulo W. At a root they keep what may have to be resent; at a
//! receiver they hold early arrivals and, at a co-root, what its subgroup
//! may still need. Each slot remembers which piece it holds, so a lookup
//! for a piece whose slot was reused misses instead of answering with the
//! wrong bytes. Buffers grow to the largest frame once and are reused.
//!
//! A receiver's ring is lent from a [`RingPool`] while the stream holds
//! pieces someone still needs and given back once it holds none (every
//! piece that arrived is delivered and, at a co-root, acknowledged by its
//! members): a rank that receives from many roots in turn keeps a few
//! rings, not one per root. A ring given back forgets every piece, so
//! a lookup on a detached ring, or on one lent to another root since,
//! always misses. Only the last W pieces can be held, so every walk over
//! a range of sequence numbers (a NACK's, an ACK word's) is clamped to
//! them first: its cost is O(W) whatever range a peer names.

use std::cell::Cell;
use std::ops::Range;
use std::time::Instant;

/// Rings a pool keeps for later loans; more given back are freed.
const SPARE_RINGS: usize = 2;

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

impl Slot {
    fn empty(now: Instant) -> Self {
        Slot { seq: None, frame: Vec::new(), stamp: now, resent: Cell::new(false), multicast_again: Cell::new(false) }
    }
}

pub(crate) struct PieceRing {
    window: u64,
    /// W slots, or none while the ring is detached (it holds nothing).
    slots: Vec<Slot>,
    /// Slot lookups, for tests that bound the work a range costs.
    #[cfg(test)]
    lookups: Cell<u64>,
}

impl PieceRing {
    pub(crate) fn new(window: u64, now: Instant) -> Self {
        let mut ring = PieceRing::detached(window);
        ring.slots = (0..window).map(|_| Slot::empty(now)).collect();
        ring
    }

    /// A ring that holds nothing and has no slots until `attach`.
    pub(crate) fn detached(window: u64) -> Self {
        PieceRing {
            window,
            slots: Vec::new(),
            #[cfg(test)]
            lookups: Cell::new(0),
        }
    }

    /// The slot piece `seq` would occupy, if it holds that piece.
    fn held(&self, seq: u64) -> Option<&Slot> {
        #[cfg(test)]
        self.lookups.set(self.lookups.get() + 1);
        let slot = self.slots.get((seq % self.window) as usize)?;
        (slot.seq == Some(seq)).then_some(slot)
    }

    /// Slot lookups so far.
    #[cfg(test)]
    pub(crate) fn lookups(&self) -> u64 {
        self.lookups.get()
    }

    pub(crate) fn holds(&self, seq: u64) -> bool {
        self.held(seq).is_some()
    }

    pub(crate) fn frame(&self, seq: u64) -> Option<&[u8]> {
        self.held(seq).map(|slot| slot.frame.as_slice())
    }

    pub(crate) fn stamp(&self, seq: u64) -> Option<Instant> {
        self.held(seq).map(|slot| slot.stamp)
    }

    /// Whether piece `seq` is held and was resent.
    pub(crate) fn resent(&self, seq: u64) -> bool {
        self.held(seq).is_some_and(|slot| slot.resent.get())
    }

    /// The part of `pieces` this ring could hold: its last W.
    pub(crate) fn holdable(&self, pieces: Range<u64>) -> Range<u64> {
        pieces.start.max(pieces.end.saturating_sub(self.window))..pieces.end
    }

    /// Whether any held piece of `pieces` was resent.
    pub(crate) fn any_resent(&self, pieces: Range<u64>) -> bool {
        self.holdable(pieces).any(|seq| self.resent(seq))
    }

    pub(crate) fn mark_resent(&self, seq: u64) {
        if let Some(slot) = self.held(seq) {
            slot.resent.set(true);
        }
    }

    /// True the first time it is asked for a held piece `seq`: the root
    /// multicasts a NACKed piece again only once.
    pub(crate) fn first_multicast_again(&self, seq: u64) -> bool {
        self.held(seq).is_some_and(|slot| !slot.multicast_again.replace(true))
    }

    /// Puts piece `seq` in its slot, replacing whatever was there; `fill`
    /// writes the frame into the (cleared) buffer. The caller has checked
    /// that the previous occupant is no longer needed, and attached a
    /// detached ring (one that was not gets fresh slots, outside any pool).
    pub(crate) fn store(&mut self, seq: u64, stamp: Instant, fill: impl FnOnce(&mut Vec<u8>)) -> &[u8] {
        debug_assert!(self.is_attached(), "piece {seq} stored in a detached ring");
        if !self.is_attached() {
            self.slots = (0..self.window).map(|_| Slot::empty(stamp)).collect();
        }
        let index = (seq % self.window) as usize;
        let slot = &mut self.slots[index];
        slot.frame.clear();
        fill(&mut slot.frame);
        slot.seq = Some(seq);
        slot.stamp = stamp;
        slot.resent.set(false);
        slot.multicast_again.set(false);
        &slot.frame
    }

    pub(crate) fn is_attached(&self) -> bool {
        !self.slots.is_empty()
    }

    /// Borrows slots from `pool` if this ring has none.
    pub(crate) fn attach(&mut self, pool: &mut RingPool, now: Instant) {
        if !self.is_attached() {
            self.slots = pool.lend(self.window, now);
        }
    }

    /// Gives the slots back to `pool`, forgetting every piece.
    pub(crate) fn detach(&mut self, pool: &mut RingPool) {
        if self.is_attached() {
            pool.give_back(std::mem::take(&mut self.slots));
        }
    }
}

/// Slots for receivers' rings, shared by every root's stream at one rank.
#[derive(Default)]
pub(crate) struct RingPool {
    spare: Vec<Vec<Slot>>,
    /// Rings of slots ever made (not lent again from the spares).
    made: usize,
    /// Rings lent and not given back.
    lent: usize,
}

impl RingPool {
    fn lend(&mut self, window: u64, now: Instant) -> Vec<Slot> {
        self.lent += 1;
        if let Some(slots) = self.spare.pop().filter(|slots| slots.len() as u64 == window) {
            return slots;
        }
        self.made += 1;
        (0..window).map(|_| Slot::empty(now)).collect()
    }

    fn give_back(&mut self, mut slots: Vec<Slot>) {
        self.lent = self.lent.saturating_sub(1);
        if self.spare.len() >= SPARE_RINGS {
            return;
        }
        for slot in &mut slots {
            slot.seq = None;
        }
        self.spare.push(slots);
    }

    /// Rings of slots made so far: what receive state has cost in memory
    /// (each up to W frames).
    #[cfg(test)]
    pub(crate) fn made(&self) -> usize {
        self.made
    }

    pub(crate) fn lent(&self) -> usize {
        self.lent
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

    #[test]
    fn a_ring_given_back_forgets_its_pieces_and_is_lent_again() {
        let now = Instant::now();
        let mut pool = RingPool::default();
        let (mut first, mut second) = (PieceRing::detached(4), PieceRing::detached(4));
        assert!(!first.holds(0) && first.frame(0).is_none(), "a detached ring holds nothing");
        first.attach(&mut pool, now);
        first.store(5, now, |frame| frame.extend_from_slice(b"five"));
        first.detach(&mut pool);
        assert!(!first.holds(5), "a detached ring holds nothing");
        second.attach(&mut pool, now);
        assert_eq!(pool.made(), 1, "the slots given back were lent again");
        assert!(!second.holds(5), "another stream's piece 5 is not this one's");
        // Spares beyond the pool's few are freed, not kept.
        let mut rings: Vec<PieceRing> = (0..SPARE_RINGS + 3).map(|_| PieceRing::detached(4)).collect();
        for ring in &mut rings {
            ring.attach(&mut pool, now);
        }
        for ring in &mut rings {
            ring.detach(&mut pool);
        }
        assert_eq!((pool.made(), pool.spare.len(), pool.lent()), (1 + SPARE_RINGS + 3, SPARE_RINGS, 1));
    }

    #[test]
    fn a_range_of_any_length_costs_at_most_the_window_in_lookups() {
        let now = Instant::now();
        let mut ring = PieceRing::new(8, now);
        let high = 1u64 << 36;
        for seq in high - 8..high {
            ring.store(seq, now, |frame| frame.push(seq as u8));
        }
        ring.mark_resent(high - 3);
        assert!(ring.any_resent(0..high));
        assert_eq!(ring.holdable(0..u64::MAX), u64::MAX - 8..u64::MAX);
        assert!(ring.lookups.get() <= 8 + 1, "{} lookups", ring.lookups.get());
    }
}
