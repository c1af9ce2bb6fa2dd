//! A single-producer single-consumer ring of fixed-size slots inside the
//! segment, carrying one ordered pair's reliable messages. It holds no
//! pointers, only counters and bytes, so it works at any mapping address.
//! Producers and consumers within one process serialise themselves
//! (see `ShmTransport`); across processes the pair has one of each.
//!
//! ```text
//! [0, 128)     tail: messages published (written by the producer)
//! [128, 256)   head: messages consumed (written by the consumer)
//! 256 + i*SLOT_STRIDE: slot i = [length word, padding to 64 | payload]
//! ```
//! Head and tail sit 128 bytes apart so adjacent-line prefetch does not
//! make producer and consumer fight over one line pair.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::words;

const SLOTS: u64 = 16;
const CONTROL_BYTES: usize = 256;
const TAIL_WORD: usize = 0;
const HEAD_WORD: usize = 128 / 8;
const SLOT_HEADER_BYTES: usize = 64;
/// Largest message one slot carries.
pub const SLOT_PAYLOAD: usize = 4096;
const SLOT_STRIDE: usize = SLOT_HEADER_BYTES + SLOT_PAYLOAD;
pub(crate) const RING_BYTES: usize = CONTROL_BYTES + SLOTS as usize * SLOT_STRIDE;

/// A view of one ring's words.
#[derive(Clone, Copy)]
pub(crate) struct Ring<'a> {
    words: &'a [AtomicU64],
}

impl<'a> Ring<'a> {
    /// `words` must be exactly the ring's `RING_BYTES / 8` words.
    #[inline]
    pub(crate) fn new(words: &'a [AtomicU64]) -> Self {
        debug_assert_eq!(words.len() * 8, RING_BYTES);
        Ring { words }
    }

    /// Publishes `message` unless the ring is full. The caller is the only
    /// producer and has checked `message.len() <= SLOT_PAYLOAD`.
    #[inline]
    pub(crate) fn try_push(&self, message: &[u8]) -> bool {
        debug_assert!(message.len() <= SLOT_PAYLOAD);
        let tail = self.words[TAIL_WORD].load(Ordering::Relaxed);
        // Acquire: the consumer has finished reading the slot it released.
        let head = self.words[HEAD_WORD].load(Ordering::Acquire);
        if tail.wrapping_sub(head) >= SLOTS {
            return false;
        }
        let slot = slot_offset(tail);
        self.words[slot / 8].store(message.len() as u64, Ordering::Relaxed);
        words::copy_in(self.words, slot + SLOT_HEADER_BYTES, message);
        // Release: the consumer's acquire of this tail orders the length
        // word and the plain payload copy above before its own reads.
        self.words[TAIL_WORD].store(tail.wrapping_add(1), Ordering::Release);
        true
    }

    /// Takes the oldest message into `out` if there is one. The caller is
    /// the only consumer.
    #[inline]
    pub(crate) fn try_pop(&self, out: &mut Vec<u8>) -> bool {
        let head = self.words[HEAD_WORD].load(Ordering::Relaxed);
        // Acquire: the producer's slot bytes are visible once its tail is.
        let tail = self.words[TAIL_WORD].load(Ordering::Acquire);
        if head == tail {
            return false;
        }
        let slot = slot_offset(head);
        // The length comes from another process; never trust it past the slot.
        let len = usize::try_from(self.words[slot / 8].load(Ordering::Relaxed)).unwrap_or(usize::MAX).min(SLOT_PAYLOAD);
        out.clear();
        out.resize(len, 0);
        words::copy_out(self.words, slot + SLOT_HEADER_BYTES, out);
        // Release: the producer's acquire of this head orders the plain copy
        // out above before it rewrites the slot.
        self.words[HEAD_WORD].store(head.wrapping_add(1), Ordering::Release);
        true
    }
}

#[inline]
fn slot_offset(counter: u64) -> usize {
    CONTROL_BYTES + (counter % SLOTS) as usize * SLOT_STRIDE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_to_capacity_then_drains_in_order_across_wraparound() {
        let backing: Vec<AtomicU64> = (0..RING_BYTES / 8).map(|_| AtomicU64::new(0)).collect();
        let ring = Ring::new(&backing);
        let mut out = Vec::new();
        let mut next_to_send = 0u32;
        let mut next_to_receive = 0u32;
        for _round in 0..5 {
            while ring.try_push(&message(next_to_send)) {
                next_to_send += 1;
            }
            assert_eq!(next_to_send - next_to_receive, SLOTS as u32, "ring should hold exactly {SLOTS}");
            for _ in 0..11 {
                assert!(ring.try_pop(&mut out));
                assert_eq!(out, message(next_to_receive));
                next_to_receive += 1;
            }
        }
        while ring.try_pop(&mut out) {
            assert_eq!(out, message(next_to_receive));
            next_to_receive += 1;
        }
        assert_eq!(next_to_receive, next_to_send);
        assert!(!ring.try_pop(&mut out));
    }

    fn message(index: u32) -> Vec<u8> {
        let len = (index as usize * 613) % (SLOT_PAYLOAD + 1);
        (0..len).map(|i| (i as u32 ^ index) as u8).collect()
    }
}
