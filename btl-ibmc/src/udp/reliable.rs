//! The reliable channel's per-pair state, free of sockets. A record
//! (a message, or a put into the peer's window) is cut into fragments
//! that each fit a datagram; fragments are numbered per pair from 0 and
//! never wrap. The receiver keeps the fragments that came early, delivers
//! records strictly in order, and acknowledges cumulatively (the next
//! fragment it expects); the sender keeps every unacknowledged fragment
//! and sends it again when it has waited a retransmission timeout, which
//! doubles while the peer stays silent. The sender never has more than
//! `window` fragments unacknowledged, so the receiver need not keep more
//! than that many early ones.
//!
//! Why over UDP rather than TCP: the same socket, source check and fault
//! injection as the datagrams, no connection per pair to set up in order
//! (N² connections and file descriptors at scale), and a channel whose
//! traffic tests can lose, duplicate and reorder like the multicast's.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// Retransmission timeouts double up to this many times the configured one.
const BACKOFF_LIMIT: u32 = 6;

/// What became of a fragment that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Receipt {
    /// New: kept, or delivered with whatever it completed.
    Accepted,
    /// Had arrived before: dropped (the sender missed the ACK; one is due).
    Duplicate,
    /// Beyond what the sender's window allows: not this channel's.
    OutOfWindow,
}

/// One fragment sent and not yet acknowledged.
struct Unacked {
    seq: u64,
    /// The encoded frame, sent again unchanged.
    frame: Vec<u8>,
    sent_at: Instant,
}

/// This rank's sending side towards one peer.
pub(crate) struct Outgoing {
    next_seq: u64,
    unacked: VecDeque<Unacked>,
    backoff: u32,
    /// Whether the engine's list of peers owing ACKs holds this peer.
    pub(crate) listed: bool,
}

impl Outgoing {
    pub(crate) fn new() -> Self {
        Outgoing { next_seq: 0, unacked: VecDeque::new(), backoff: 0, listed: false }
    }

    pub(crate) fn has_room(&self, window: usize) -> bool {
        self.unacked.len() < window
    }

    pub(crate) fn unacknowledged(&self) -> usize {
        self.unacked.len()
    }

    /// The number the next fragment gets.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Keeps `frame`, numbered `next_seq`, until it is acknowledged.
    pub(crate) fn sent(&mut self, frame: Vec<u8>, now: Instant) {
        self.unacked.push_back(Unacked { seq: self.next_seq, frame, sent_at: now });
        self.next_seq += 1;
    }

    /// The peer has every fragment below `next`. ACKs for fragments never
    /// sent are ignored (the caller counts them).
    pub(crate) fn acknowledged(&mut self, next: u64) -> bool {
        if next > self.next_seq {
            return false;
        }
        let mut progressed = false;
        while self.unacked.front().is_some_and(|fragment| fragment.seq < next) {
            self.unacked.pop_front();
            progressed = true;
        }
        if progressed {
            self.backoff = 0;
        }
        true
    }

    /// Calls `resend` with every fragment that has waited the current
    /// timeout, oldest first, and restarts their clocks.
    pub(crate) fn resend_due<E>(&mut self, now: Instant, timeout: Duration, mut resend: impl FnMut(&[u8]) -> Result<(), E>) -> Result<usize, E> {
        let due_after = timeout.saturating_mul(1 << self.backoff);
        let mut resent = 0;
        for fragment in self.unacked.iter_mut() {
            if now.saturating_duration_since(fragment.sent_at) >= due_after {
                resend(&fragment.frame)?;
                fragment.sent_at = now;
                resent += 1;
            }
        }
        if resent > 0 {
            self.backoff = (self.backoff + 1).min(BACKOFF_LIMIT);
        }
        Ok(resent)
    }
}

/// This rank's receiving side from one peer.
pub(crate) struct Incoming {
    expected: u64,
    early: BTreeMap<u64, (bool, Vec<u8>)>,
    /// The record being assembled from in-order fragments.
    partial: Vec<u8>,
    ack_due: bool,
}

impl Incoming {
    pub(crate) fn new() -> Self {
        Incoming { expected: 0, early: BTreeMap::new(), partial: Vec::new(), ack_due: false }
    }

    /// What to acknowledge: every fragment below this has arrived.
    pub(crate) fn next_expected(&self) -> u64 {
        self.expected
    }

    /// Marks an ACK as due; true if it was not already (the engine then
    /// lists this peer among those owed one).
    pub(crate) fn mark_ack_due(&mut self) -> bool {
        !std::mem::replace(&mut self.ack_due, true)
    }

    /// Whether an ACK should go out, clearing the mark.
    pub(crate) fn take_ack_due(&mut self) -> bool {
        std::mem::take(&mut self.ack_due)
    }

    /// Takes in fragment `seq` and hands every record it completes, in
    /// order, to `deliver`. Accepted fragments and duplicates (whose
    /// sender missed an ACK) both call for an ACK: the caller marks it.
    pub(crate) fn accept(&mut self, seq: u64, last: bool, fragment: &[u8], window: usize, mut deliver: impl FnMut(Vec<u8>)) -> Receipt {
        if seq < self.expected || self.early.contains_key(&seq) {
            return Receipt::Duplicate;
        }
        if seq - self.expected >= window as u64 {
            return Receipt::OutOfWindow;
        }
        if seq > self.expected {
            self.early.insert(seq, (last, fragment.to_vec()));
            return Receipt::Accepted;
        }
        self.take_in_order(last, fragment, &mut deliver);
        while let Some((last, fragment)) = self.early.remove(&self.expected) {
            self.take_in_order(last, &fragment, &mut deliver);
        }
        Receipt::Accepted
    }

    fn take_in_order(&mut self, last: bool, fragment: &[u8], deliver: &mut impl FnMut(Vec<u8>)) {
        self.expected += 1;
        self.partial.extend_from_slice(fragment);
        if last {
            deliver(std::mem::take(&mut self.partial));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_in_any_order_with_duplicates_deliver_each_record_once_in_order() {
        let mut incoming = Incoming::new();
        let mut records = Vec::new();
        // Records "ab" (0, 1), "c" (2), "de" (3, 4); 1 and 4 come early, 0 twice.
        let arrivals: [(u64, bool, &[u8]); 7] =
            [(1, true, b"b"), (4, true, b"e"), (0, false, b"a"), (0, false, b"a"), (3, false, b"d"), (2, true, b"c"), (4, true, b"e")];
        let receipts: Vec<Receipt> =
            arrivals.iter().map(|&(seq, last, fragment)| incoming.accept(seq, last, fragment, 8, |record| records.push(record))).collect();
        use Receipt::{Accepted, Duplicate};
        assert_eq!(receipts, [Accepted, Accepted, Accepted, Duplicate, Accepted, Accepted, Duplicate]);
        assert_eq!(records, [b"ab".to_vec(), b"c".to_vec(), b"de".to_vec()]);
        assert_eq!(incoming.next_expected(), 5);
        assert!(incoming.mark_ack_due() && !incoming.mark_ack_due());
        assert!(incoming.take_ack_due() && !incoming.take_ack_due());
        assert_eq!(incoming.accept(5 + 8, true, b"z", 8, |_| unreachable!()), Receipt::OutOfWindow);
    }

    #[test]
    fn the_sender_resends_what_waited_its_timeout_and_forgets_what_was_acknowledged() {
        let start = Instant::now();
        let timeout = Duration::from_millis(10);
        let mut outgoing = Outgoing::new();
        for seq in 0..3u8 {
            outgoing.sent(vec![seq], start);
        }
        assert!(!outgoing.has_room(3) && outgoing.has_room(4));
        let mut resent = Vec::new();
        let count = outgoing.resend_due(start + timeout / 2, timeout, |frame| {
            resent.push(frame[0]);
            Ok::<_, ()>(())
        });
        assert_eq!((count, resent.len()), (Ok(0), 0));
        assert!(outgoing.acknowledged(1));
        let count = outgoing.resend_due(start + timeout, timeout, |frame| {
            resent.push(frame[0]);
            Ok::<_, ()>(())
        });
        assert_eq!((count, &resent[..]), (Ok(2), &[1, 2][..]));
        // Backed off: the doubled timeout has not passed since the resend.
        let later = start + timeout + timeout * 3 / 2;
        assert_eq!(outgoing.resend_due(later, timeout, |_| Ok::<_, ()>(())), Ok(0));
        assert!(!outgoing.acknowledged(9), "an ACK of fragments never sent");
        assert!(outgoing.acknowledged(3));
        assert_eq!(outgoing.unacknowledged(), 0);
    }
}
