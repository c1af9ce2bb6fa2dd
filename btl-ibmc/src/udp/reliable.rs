//! The reliable channel's per-pair state, free of sockets. A record
//! (a message, or a put into the peer's window) is cut into fragments
//! that each fit a datagram; fragments are numbered per pair from 0 and
//! never wrap. The receiver keeps the fragments that came early, delivers
//! records strictly in order, and acknowledges the next fragment it
//! expects together with which of the 64 after it came early (a
//! selective ACK). The sender keeps every unacknowledged fragment; it
//! sends again at once each one the peer reported three later ones past
//! (a hole), and, when its timer (one per peer, restarted whenever an ACK
//! advances) runs out, a burst of the oldest unreported ones, doubling
//! the timeout (at most `UdpConfig::retransmit_doublings` times) while
//! the peer stays silent. The sender never has more
//! than `window` fragments unacknowledged, so the receiver need not keep
//! more than that many early ones.
//!
//! What a receiver holds from one peer is bounded whatever arrives: a
//! fragment longer than the agreed fragment size is dropped unread, so
//! the early ones take at most `window` fragments, and a record that
//! grows past the agreed record cap breaks the channel from that peer
//! (`Receipt::RecordTooLong`) instead of growing. No sender of this
//! backend does either, so the record cannot be repaired: dropping the
//! fragment would stall the pair (the sender resends it for ever), and
//! skipping to the next record would deliver a record short.
//!
//! The timeout follows each peer's round trips (RFC 6298: SRTT + 4
//! RTTVAR, `crate::rtt`), kept between a floor and a ceiling, doubled at
//! each expiry, at most `UdpConfig::retransmit_doublings` times (2: 4x),
//! and reset by the next fresh sample. The doublings are few because
//! random loss is not congestion: a fragment resent after a lost one is
//! as likely to get through, and six doublings of the 20 ms ceiling made
//! three or four losses in a row cost 0.3 to 0.6 s (issue 36). A sample is the time
//! from a fragment's first sending to the first ACK that reports it, taken
//! only from the newest fragment an ACK reports (the arrival that made
//! the peer send it), only if that fragment went once (Karn's rule) and
//! after the timer last ran out (a sample across an expiry spans a stall
//! of the peer or of this rank, not a round trip). The ceiling defaults
//! to the timeout the channel had before it was estimated (20 ms): on a
//! loaded node a round trip includes the time the peer's rank waits to
//! be scheduled, and an estimate allowed to follow that made a 4 MiB
//! bcast under 5 % loss ten times slower (81 s against 8 s in a quick run
//! here): a late repair costs more than a needless one. The estimate
//! earns its keep below the ceiling, where a quiet network's round trips
//! let a lost fragment go again after a few milliseconds.
//!
//! Why over UDP rather than TCP: the same socket, source check and fault
//! injection as the datagrams, no connection per pair to set up in order
//! (N² connections and file descriptors at scale), and a channel whose
//! traffic tests can lose, duplicate and reorder like the multicast's.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::rtt::{BackedOffTimeout, RttEstimator};

/// No backed-off retransmission timeout exceeds this (or the ceiling).
const LONGEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Fragments resent when the timer expires: the oldest the peer has not
/// reported, a few at a time, so that a peer that was only slow (a
/// descheduled rank) is not flooded with the whole window.
const RESEND_BURST: usize = 8;
/// A fragment is taken as lost, and sent again at once, when the peer
/// reports this many later ones (fast retransmit).
const REPORTED_PAST_LOST: usize = 3;
/// Fragments after the next expected one that an ACK reports, one bit each.
pub(crate) const SACK_SPAN: u64 = 64;

/// What became of a fragment that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Receipt {
    /// New: kept, or delivered with whatever it completed.
    Accepted,
    /// Had arrived before: dropped (the sender missed the ACK; one is due).
    Duplicate,
    /// Beyond what the sender's window allows: not this channel's.
    OutOfWindow,
    /// Longer than the agreed fragment size: dropped unread.
    Oversized,
    /// It would make the record longer than the agreed cap: nothing taken
    /// in, and nothing from this peer can be delivered any more.
    RecordTooLong,
}

/// What every rank agreed a peer may send: fragments of at most
/// `fragment` bytes, records of at most `record`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordLimits {
    pub(crate) fragment: usize,
    pub(crate) record: usize,
}

/// One fragment sent and not yet acknowledged.
struct Unacked {
    seq: u64,
    /// The encoded frame, sent again unchanged.
    frame: Vec<u8>,
    /// The peer reported it (selective ACK): never resent.
    reported: bool,
    /// Sent again as a hole since the timer last resent it.
    fast_resent: bool,
    /// When it first went, and whether it went again since (then its
    /// ACK cannot tell which copy arrived: Karn's rule).
    first_sent: Instant,
    resent: bool,
}

/// How a peer's retransmission timeout is set: `initial` until the first
/// round trip is measured, then the estimate within `floor..=ceiling`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RetransmitTiming {
    pub(crate) initial: Duration,
    pub(crate) floor: Duration,
    pub(crate) ceiling: Duration,
    /// The most times the timeout doubles while no fresh sample comes.
    pub(crate) most_doublings: u32,
}

/// What an ACK did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AckTaken {
    /// It acknowledged fragments never sent: nothing changed.
    Refused,
    /// Taken in; `sampled`: it gave a round-trip sample.
    Taken { sampled: bool },
}

/// This rank's sending side towards one peer. One timer per peer, as in
/// TCP: started when a fragment goes out with none outstanding, restarted
/// whenever an ACK advances, and on expiry a burst of the oldest
/// unreported fragments goes again and the timeout doubles until a fresh
/// round-trip sample.
pub(crate) struct Outgoing {
    next_seq: u64,
    unacked: VecDeque<Unacked>,
    timeout: BackedOffTimeout,
    timer: Option<Instant>,
    /// When the timer last ran out: fragments first sent before it give
    /// no samples.
    last_expiry: Option<Instant>,
    /// Whether the engine's list of peers owing ACKs holds this peer.
    pub(crate) listed: bool,
}

impl Outgoing {
    pub(crate) fn new(timing: RetransmitTiming) -> Self {
        let estimate = RttEstimator::new(timing.initial, timing.floor, timing.ceiling);
        Outgoing {
            next_seq: 0,
            unacked: VecDeque::new(),
            timeout: BackedOffTimeout::new(estimate, timing.most_doublings, LONGEST_TIMEOUT),
            timer: None,
            last_expiry: None,
            listed: false,
        }
    }

    /// The timeout the timer runs now (backed off if it ran out).
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout.current()
    }

    /// The smoothed round trip, once one was measured.
    #[cfg(test)]
    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.timeout.estimate().srtt()
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
        self.unacked.push_back(Unacked { seq: self.next_seq, frame, reported: false, fast_resent: false, first_sent: now, resent: false });
        self.next_seq += 1;
        self.timer.get_or_insert(now);
    }

    /// The peer has every fragment below `next`, and fragment
    /// `next + 1 + i` for every bit i of `reported`. An ACK of fragments
    /// never sent changes nothing (the caller counts it).
    pub(crate) fn acknowledged(&mut self, next: u64, reported: u64, now: Instant) -> AckTaken {
        if next > self.next_seq {
            return AckTaken::Refused;
        }
        // The newest fragment the ACK reports: the peer sent it after
        // that fragment arrived, so it alone can time a round trip.
        let newest = if reported == 0 { next.checked_sub(1) } else { Some(next + SACK_SPAN - u64::from(reported.leading_zeros())) };
        let mut sample_from = None;
        let last_expiry = self.last_expiry;
        let mut note_if_newest = |fragment: &Unacked| {
            let fresh = !fragment.resent && last_expiry.is_none_or(|expiry| fragment.first_sent > expiry);
            if Some(fragment.seq) == newest && !fragment.reported && fresh {
                sample_from = Some(fragment.first_sent);
            }
        };
        let mut advanced = false;
        while let Some(fragment) = self.unacked.front().filter(|fragment| fragment.seq < next) {
            note_if_newest(fragment);
            self.unacked.pop_front();
            advanced = true;
        }
        // A late ACK may be older than one that advanced further: its
        // bits are placed by sequence number, never by position.
        if let Some(front) = self.unacked.front().map(|fragment| fragment.seq) {
            for bit in (0..SACK_SPAN).filter(|bit| reported >> bit & 1 == 1) {
                let seq = next + 1 + bit;
                if let Some(fragment) = seq.checked_sub(front).and_then(|index| self.unacked.get_mut(index as usize)) {
                    note_if_newest(fragment);
                    fragment.reported = true;
                }
            }
        }
        if let Some(first_sent) = sample_from {
            self.timeout.sample(now.saturating_duration_since(first_sent));
        }
        if advanced {
            self.timer = (!self.unacked.is_empty()).then_some(now);
        }
        AckTaken::Taken { sampled: sample_from.is_some() }
    }

    /// Sends again at once, oldest first, every fragment the peer has
    /// reported `REPORTED_PAST_LOST` later ones past (a hole, taken as
    /// lost, as TCP's SACK recovery does), each once until the timer
    /// resends it; returns how many went.
    pub(crate) fn fast_resend<E>(&mut self, mut resend: impl FnMut(&[u8]) -> Result<(), E>) -> Result<usize, E> {
        let span = self.unacked.len().min(1 + SACK_SPAN as usize);
        let mut reported_after = 0;
        let mut holes = Vec::new();
        for (index, fragment) in self.unacked.iter().take(span).enumerate().rev() {
            if fragment.reported {
                reported_after += 1;
            } else if reported_after >= REPORTED_PAST_LOST && !fragment.fast_resent {
                holes.push(index);
            }
        }
        for &index in holes.iter().rev() {
            let fragment = &mut self.unacked[index];
            resend(&fragment.frame)?;
            fragment.fast_resent = true;
            fragment.resent = true;
        }
        Ok(holes.len())
    }

    /// When the timer has run the current timeout: calls `resend` with
    /// the oldest unreported fragments (a burst), backs the timeout off
    /// and restarts the timer. Returns how many went again.
    pub(crate) fn resend_due<E>(&mut self, now: Instant, mut resend: impl FnMut(&[u8]) -> Result<(), E>) -> Result<usize, E> {
        let Some(started) = self.timer else { return Ok(0) };
        if now.saturating_duration_since(started) < self.timeout.current() {
            return Ok(0);
        }
        let mut resent = 0;
        for fragment in self.unacked.iter_mut().filter(|fragment| !fragment.reported).take(RESEND_BURST) {
            resend(&fragment.frame)?;
            fragment.fast_resent = false;
            fragment.resent = true;
            resent += 1;
        }
        self.timeout.expired();
        self.last_expiry = Some(now);
        self.timer = (!self.unacked.is_empty()).then_some(now);
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

    /// Which of the `SACK_SPAN` fragments after the next expected one
    /// have arrived early, one bit each (bit i: fragment next + 1 + i).
    pub(crate) fn reported_early(&self) -> u64 {
        let first = self.expected + 1;
        self.early.range(first..first + SACK_SPAN).fold(0, |bits, (&seq, _)| bits | 1 << (seq - first))
    }

    /// Whether an ACK should go out, clearing the mark.
    pub(crate) fn take_ack_due(&mut self) -> bool {
        std::mem::take(&mut self.ack_due)
    }

    /// Takes in fragment `seq` and hands every record it completes, in
    /// order, to `deliver`. Accepted fragments and duplicates (whose
    /// sender missed an ACK) both call for an ACK: the caller marks it.
    pub(crate) fn accept(&mut self, seq: u64, last: bool, fragment: &[u8], window: usize, limits: RecordLimits, mut deliver: impl FnMut(Vec<u8>)) -> Receipt {
        if fragment.len() > limits.fragment {
            return Receipt::Oversized;
        }
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
        if !self.take_in_order(last, fragment, limits, &mut deliver) {
            return Receipt::RecordTooLong;
        }
        while let Some((last, fragment)) = self.early.remove(&self.expected) {
            if !self.take_in_order(last, &fragment, limits, &mut deliver) {
                return Receipt::RecordTooLong;
            }
        }
        Receipt::Accepted
    }

    /// Bytes held for this peer: the record being assembled and the
    /// fragments that came early.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> usize {
        self.partial.len() + self.early.values().map(|(_, fragment)| fragment.len()).sum::<usize>()
    }

    /// False, taking nothing in, if `fragment` would make the record
    /// longer than `limits.record`.
    fn take_in_order(&mut self, last: bool, fragment: &[u8], limits: RecordLimits, deliver: &mut impl FnMut(Vec<u8>)) -> bool {
        if self.partial.len() + fragment.len() > limits.record {
            return false;
        }
        self.expected += 1;
        self.partial.extend_from_slice(fragment);
        if last {
            deliver(std::mem::take(&mut self.partial));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOMY: RecordLimits = RecordLimits { fragment: 1024, record: 1 << 20 };

    /// Issue 33, item 2: in-order fragments that never end a record. The
    /// record stops at the cap (the fragment that would pass it is
    /// refused, and the channel is broken from then on), the early ones
    /// stay within the window, and a fragment longer than agreed is
    /// dropped without a trace. Before, 10 000 fragments held 1 MB.
    #[test]
    fn a_fragment_stream_without_the_last_flag_stays_within_the_record_cap() {
        const FRAGMENT: usize = 100;
        let limits = RecordLimits { fragment: FRAGMENT, record: 1000 };
        let mut incoming = Incoming::new();
        let fragment = [7u8; FRAGMENT];
        assert_eq!(incoming.accept(0, false, &[0; FRAGMENT + 1], 8, limits, |_| unreachable!()), Receipt::Oversized);
        assert_eq!((incoming.next_expected(), incoming.held_bytes()), (0, 0), "an oversized fragment changed the state");
        let receipts: Vec<Receipt> = (0..10_000).map(|seq| incoming.accept(seq, false, &fragment, 8, limits, |_| unreachable!())).collect();
        let accepted = receipts.iter().take_while(|&&receipt| receipt == Receipt::Accepted).count();
        assert_eq!(accepted, 10, "1000 bytes are 10 fragments of 100");
        assert_eq!(receipts[accepted], Receipt::RecordTooLong);
        assert_eq!(incoming.next_expected(), 10, "the fragment past the cap was taken in");
        let bound = limits.record + 7 * FRAGMENT;
        assert!(incoming.held_bytes() <= bound, "{} bytes held, {bound} at most", incoming.held_bytes());
        // Early fragments are bounded by the window; one that completes a
        // record past the cap when the hole fills is refused too.
        let mut incoming = Incoming::new();
        for seq in 1..8 {
            assert_eq!(incoming.accept(seq, false, &fragment, 8, RecordLimits { record: 500, ..limits }, |_| unreachable!()), Receipt::Accepted);
        }
        assert_eq!(incoming.accept(8, false, &fragment, 8, limits, |_| unreachable!()), Receipt::OutOfWindow);
        assert_eq!(incoming.held_bytes(), 7 * FRAGMENT);
        assert_eq!(incoming.accept(0, false, &fragment, 8, RecordLimits { record: 500, ..limits }, |_| unreachable!()), Receipt::RecordTooLong);
        assert!(incoming.held_bytes() <= 500 + 7 * FRAGMENT);
    }

    #[test]
    fn fragments_in_any_order_with_duplicates_deliver_each_record_once_in_order() {
        let mut incoming = Incoming::new();
        let mut records = Vec::new();
        // Records "ab" (0, 1), "c" (2), "de" (3, 4); 1 and 4 come early, 0 twice.
        let arrivals: [(u64, bool, &[u8]); 7] =
            [(1, true, b"b"), (4, true, b"e"), (0, false, b"a"), (0, false, b"a"), (3, false, b"d"), (2, true, b"c"), (4, true, b"e")];
        let receipts: Vec<Receipt> =
            arrivals.iter().map(|&(seq, last, fragment)| incoming.accept(seq, last, fragment, 8, ROOMY, |record| records.push(record))).collect();
        use Receipt::{Accepted, Duplicate};
        assert_eq!(receipts, [Accepted, Accepted, Accepted, Duplicate, Accepted, Accepted, Duplicate]);
        assert_eq!(records, [b"ab".to_vec(), b"c".to_vec(), b"de".to_vec()]);
        assert_eq!(incoming.next_expected(), 5);
        assert!(incoming.mark_ack_due() && !incoming.mark_ack_due());
        assert!(incoming.take_ack_due() && !incoming.take_ack_due());
        assert_eq!(incoming.accept(5 + 8, true, b"z", 8, ROOMY, |_| unreachable!()), Receipt::OutOfWindow);
    }

    /// Runs `resend_due` at `at`, returning the first bytes of what it resent.
    fn resend_at(outgoing: &mut Outgoing, at: Instant) -> Vec<u8> {
        let mut resent = Vec::new();
        let count = outgoing.resend_due(at, |frame| {
            resent.push(frame[0]);
            Ok::<_, ()>(())
        });
        assert_eq!(count, Ok(resent.len()));
        resent
    }

    const MS: Duration = Duration::from_millis(1);

    fn timing(initial: u32, floor: u32, ceiling: u32) -> RetransmitTiming {
        // Six doublings, the rule before issue 36, so that the backoff shows.
        RetransmitTiming { initial: initial * MS, floor: floor * MS, ceiling: ceiling * MS, most_doublings: 6 }
    }

    fn taken(sampled: bool) -> AckTaken {
        AckTaken::Taken { sampled }
    }

    #[test]
    fn the_timer_resends_a_burst_of_the_oldest_and_backs_off_and_acks_restart_it() {
        let start = Instant::now();
        // Ceiling 10 ms: the one sample below (4 ms, RTO 12 ms) leaves it there.
        let mut outgoing = Outgoing::new(timing(10, 1, 10));
        for seq in 0..20u8 {
            outgoing.sent(vec![seq], start);
        }
        assert!(!outgoing.has_room(20) && outgoing.has_room(21));
        assert!(resend_at(&mut outgoing, start + 5 * MS).is_empty());
        // Fragments 0 and 1 acknowledged after 4 ms: the timer starts again.
        assert_eq!(outgoing.acknowledged(2, 0, start + 4 * MS), taken(true));
        assert_eq!(outgoing.timeout(), 10 * MS);
        assert!(resend_at(&mut outgoing, start + 13 * MS).is_empty());
        assert_eq!(resend_at(&mut outgoing, start + 14 * MS), (2..10).collect::<Vec<u8>>(), "a burst of the oldest 8");
        // Backed off to 20 ms from the resend.
        assert!(resend_at(&mut outgoing, start + 33 * MS).is_empty());
        assert_eq!(resend_at(&mut outgoing, start + 34 * MS).len(), 8);
        assert_eq!(outgoing.timeout(), 40 * MS);
        assert_eq!(outgoing.acknowledged(99, 0, start + 35 * MS), AckTaken::Refused, "an ACK of fragments never sent");
        assert_eq!(outgoing.unacknowledged(), 18);
        // An ACK of resent fragments restarts the timer but, by Karn's
        // rule, gives no sample, so the backoff stays: 40 ms.
        assert_eq!(outgoing.acknowledged(10, 0, start + 40 * MS), taken(false));
        assert!(resend_at(&mut outgoing, start + 79 * MS).is_empty());
        assert_eq!(resend_at(&mut outgoing, start + 80 * MS), (10..18).collect::<Vec<u8>>());
        // 18 and 19 went once, but before the timer last ran out: no sample.
        assert_eq!(outgoing.acknowledged(20, 0, start + 81 * MS), taken(false));
        assert_eq!((outgoing.unacknowledged(), outgoing.timeout()), (0, 80 * MS));
        assert!(resend_at(&mut outgoing, start + 10_000 * MS).is_empty(), "the timer runs with nothing outstanding");
        // A fragment sent after the expiry and acknowledged 3 ms later is
        // a fresh sample: the backoff ends.
        outgoing.sent(vec![20], start + 100 * MS);
        assert_eq!(outgoing.acknowledged(21, 0, start + 103 * MS), taken(true));
        assert!(outgoing.timeout() <= 10 * MS, "{:?}", outgoing.timeout());
    }

    /// Issue 36: a fragment lost k times in a row (or its ACKs) under the
    /// default bound of two doublings. The timer resends it after 10 ms,
    /// then 20, then 40 and 40 again: never more than 4x the estimate
    /// apart. With six doublings (the rule before) the waits went on 80,
    /// 160, 320, 640 ms, so four failures in a row, a few in 100,000 at 5 %
    /// loss on the fragment and 5 % on its ACK, cost 0.3 s where they now
    /// cost 0.11 s.
    #[test]
    fn a_fragment_lost_again_and_again_is_resent_at_most_four_timeouts_apart() {
        let start = Instant::now();
        let defaults = crate::udp::UdpConfig { retransmit_after: 10 * MS, retransmit_floor: MS, retransmit_ceiling: 10 * MS, ..Default::default() };
        let mut outgoing = Outgoing::new(defaults.retransmit_timing());
        outgoing.sent(vec![0], start);
        let mut waits = Vec::new();
        let (mut last, mut at) = (start, start);
        while waits.len() < 6 {
            at += MS;
            match resend_at(&mut outgoing, at).as_slice() {
                [] => {}
                [0] => {
                    waits.push((at - last).as_millis());
                    last = at;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(waits, [10, 20, 40, 40, 40, 40], "in ms");
        // The fragment's ACK at last: resent, so no sample and the backoff stays
        // until a fragment sent once is timed.
        assert_eq!(outgoing.acknowledged(1, 0, at + MS), taken(false));
        assert_eq!(outgoing.timeout(), 40 * MS);
        outgoing.sent(vec![1], at + 2 * MS);
        assert_eq!(outgoing.acknowledged(2, 0, at + 3 * MS), taken(true));
        assert!(outgoing.timeout() <= 10 * MS, "{:?}", outgoing.timeout());
    }

    /// The same samples as `rtt`'s hand-computed test, through ACKs: the
    /// timeout the timer runs is the RFC 6298 RTO of this peer's round trips.
    #[test]
    fn round_trips_set_the_timeout_and_only_fragments_sent_once_are_timed() {
        let start = Instant::now();
        let mut outgoing = Outgoing::new(timing(20, 1, 100));
        assert_eq!((outgoing.timeout(), outgoing.srtt()), (20 * MS, None));
        // 8 ms: SRTT 8, RTTVAR 4, RTO 24.
        outgoing.sent(vec![0], start);
        assert_eq!(outgoing.acknowledged(1, 0, start + 8 * MS), taken(true));
        assert_eq!((outgoing.timeout(), outgoing.srtt()), (24 * MS, Some(8 * MS)));
        // 16 ms: SRTT 9, RTTVAR 5, RTO 29.
        outgoing.sent(vec![1], start + 10 * MS);
        assert_eq!(outgoing.acknowledged(2, 0, start + 26 * MS), taken(true));
        assert_eq!(outgoing.timeout(), 29 * MS);
        // Fragment 2 is lost and goes again after 29 ms; the ACK of the
        // repair gives no sample (which copy arrived?), so the timeout
        // stays backed off at 58 ms.
        outgoing.sent(vec![2], start + 30 * MS);
        assert!(resend_at(&mut outgoing, start + 58 * MS).is_empty());
        assert_eq!(resend_at(&mut outgoing, start + 59 * MS), [2]);
        assert_eq!(outgoing.acknowledged(3, 0, start + 60 * MS), taken(false));
        assert_eq!(outgoing.timeout(), 58 * MS);
        // 1 ms on a fragment sent once: SRTT 8, RTTVAR 5.75, RTO 31; the
        // backoff ends.
        outgoing.sent(vec![3], start + 61 * MS);
        assert_eq!(outgoing.acknowledged(4, 0, start + 62 * MS), taken(true));
        assert_eq!((outgoing.timeout(), outgoing.srtt()), (31 * MS, Some(8 * MS)));
    }

    #[test]
    fn the_newest_fragment_an_ack_reports_is_timed_once_and_only_if_it_is_new() {
        let start = Instant::now();
        let mut outgoing = Outgoing::new(timing(20, 1, 100));
        for seq in 0..4u8 {
            outgoing.sent(vec![seq], start + u32::from(seq) * MS);
        }
        // Fragment 0 lost: the ACK reports 2 (sent at 2 ms) as the newest,
        // 6 ms later. SRTT 6.
        assert_eq!(outgoing.acknowledged(0, 0b10, start + 8 * MS), taken(true));
        assert_eq!(outgoing.srtt(), Some(6 * MS));
        // The same report again (a duplicate's ACK): nothing new to time.
        assert_eq!(outgoing.acknowledged(0, 0b10, start + 30 * MS), taken(false));
        // The ACK that advances past 2 (0 and 1 came late) reports 2 as
        // its newest, and 2 was reported already: no sample.
        assert_eq!(outgoing.acknowledged(3, 0, start + 31 * MS), taken(false));
        assert_eq!(outgoing.srtt(), Some(6 * MS));
        // 3, sent at 3 ms, first reported at 40 ms by an ACK whose newest
        // it is: a 37 ms sample (SRTT 6 * 7/8 + 37/8 = 9.875).
        assert_eq!(outgoing.acknowledged(4, 0, start + 40 * MS), taken(true));
        assert_eq!(outgoing.srtt(), Some(Duration::from_micros(9875)));
    }

    #[test]
    fn reported_fragments_are_never_resent_and_holes_before_three_reports_are_resent_at_once() {
        let start = Instant::now();
        let mut incoming = Incoming::new();
        for seq in [2, 3, 5] {
            assert_eq!(incoming.accept(seq, true, b"x", 64, ROOMY, |_| unreachable!()), Receipt::Accepted);
        }
        let reported = incoming.reported_early();
        assert_eq!((incoming.next_expected(), reported), (0, 0b10110), "fragments 2, 3 and 5 are bits 1, 2 and 4 after 0");

        let mut outgoing = Outgoing::new(timing(10, 10, 10));
        for seq in 0..10u8 {
            outgoing.sent(vec![seq], start);
        }
        assert_eq!(outgoing.acknowledged(0, 0b0010, start), taken(true));
        let resend = |outgoing: &mut Outgoing| {
            let mut resent = Vec::new();
            let count = outgoing.fast_resend(|frame| {
                resent.push(frame[0]);
                Ok::<_, ()>(())
            });
            assert_eq!(count, Ok(resent.len()));
            resent
        };
        assert_eq!(resend(&mut outgoing), [], "one report past the oldest is reordering, not loss");
        assert_eq!(outgoing.acknowledged(0, reported, start), taken(true));
        assert_eq!(resend(&mut outgoing), [0, 1], "the holes before three reported fragments");
        assert_eq!(resend(&mut outgoing), [], "fast retransmit sends a hole again only once");
        // An ACK that advanced past 2, then a late one from before it: the
        // late one's bits still name fragments 2 and 6, not 4 and 8.
        assert_eq!(outgoing.acknowledged(2, 0, start), taken(false));
        assert_eq!(outgoing.acknowledged(0, 0b10_0010, start), taken(true), "6 is new, and the newest");
        assert_eq!(resend_at(&mut outgoing, start + 10 * MS), [4, 7, 8, 9], "reported fragments went again");
    }
}
