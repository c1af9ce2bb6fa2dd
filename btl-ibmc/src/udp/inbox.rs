//! Multicast datagrams taken in but not yet polled. A caller that does
//! not poll must not make the endpoint hold an unbounded amount, so the
//! queue is bounded by bytes (not entries, which may each be 64 KiB once
//! `datagram_bytes` is raised); beyond it new datagrams are dropped, as
//! a full socket buffer would drop them.

use std::collections::VecDeque;

/// Bytes of multicast payload one endpoint keeps for its caller.
pub(crate) const MOST_QUEUED_MULTICAST_BYTES: usize = 64 << 20;
/// What an entry costs besides its payload, so that a flood of empty
/// datagrams is bounded too.
const ENTRY_OVERHEAD: usize = 64;

pub(crate) struct MulticastInbox {
    queue: VecDeque<(usize, Vec<u8>)>,
    bytes: usize,
    limit: usize,
}

impl MulticastInbox {
    pub(crate) fn new(limit: usize) -> Self {
        MulticastInbox { queue: VecDeque::new(), bytes: 0, limit }
    }

    /// Queues `payload` from `sender` (in a buffer of its own, so that it
    /// is not copied); false, with nothing queued, when it would pass the
    /// limit.
    pub(crate) fn push(&mut self, sender: usize, payload: Vec<u8>) -> bool {
        let cost = payload.len() + ENTRY_OVERHEAD;
        if self.bytes + cost > self.limit {
            return false;
        }
        self.bytes += cost;
        self.queue.push_back((sender, payload));
        true
    }

    pub(crate) fn pop(&mut self) -> Option<(usize, Vec<u8>)> {
        let (sender, payload) = self.queue.pop_front()?;
        self.bytes -= payload.len() + ENTRY_OVERHEAD;
        Some((sender, payload))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_bounded_by_bytes_and_popping_makes_room() {
        let mut inbox = MulticastInbox::new(3 * (1000 + ENTRY_OVERHEAD));
        for sender in 0..3 {
            assert!(inbox.push(sender, vec![sender as u8; 1000]));
        }
        assert!(!inbox.push(9, vec![9; 1000]), "a fourth 1000-byte datagram fits a limit of three");
        assert!(!inbox.push(9, Vec::new()), "even an empty one costs its entry");
        assert_eq!(inbox.pop(), Some((0, vec![0; 1000])));
        assert!(inbox.push(3, vec![3; 1000]));
        let rest: Vec<usize> = std::iter::from_fn(|| inbox.pop()).map(|(sender, payload)| {
            assert_eq!(payload, vec![sender as u8; 1000]);
            sender
        }).collect();
        assert_eq!(rest, [1, 2, 3]);
        assert!(inbox.is_empty() && inbox.bytes == 0);
        // Small datagrams: the limit is on bytes, not on a count.
        let mut small = MulticastInbox::new(MOST_QUEUED_MULTICAST_BYTES);
        let fitted = std::iter::repeat_with(|| small.push(0, vec![1; 8])).take_while(|&fitted| fitted).count();
        assert_eq!(fitted, MOST_QUEUED_MULTICAST_BYTES / (8 + ENTRY_OVERHEAD));
    }
}
