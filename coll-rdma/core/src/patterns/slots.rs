//! Streams of segments from one sender to one receiver through a ring of
//! slots in the receiver's window, with a credit word in the sender's
//! window through which the receiver returns slots.
//!
//! Segments are numbered by a sequence number that only grows over the life
//! of the communicator (64 bits never wrap): segment `seq` goes to slot
//! `(seq - 1) % RING_DEPTH` and its flag word, after the payload, is set to
//! `seq` by the same put, so "flag >= seq" means "segment seq is there".
//! The flag never runs ahead of the reader, because the writer only reuses a
//! slot once its previous segment has been read (see `Reuse`). The receiver
//! reads a segment out of the slot before it uses it, so acknowledging it
//! right after the read lets the sender overwrite the slot at once.

use std::sync::atomic::{AtomicU64, Ordering};

use btl_ibmc::{put_word_padded, TransportError, Waits, Windows};

use super::meet::Meet;
use super::region::LINE;

/// Slots per stream: two let a sender write one segment while the
/// receiver still reads the previous one.
pub(crate) const RING_DEPTH: u64 = 2;

/// A credit word has its own cache line: its writer is the receiver, while
/// the line's owner (the sender) polls it.
pub(crate) const CREDIT_BYTES: usize = LINE;

const FLAG_BYTES: usize = 8;

/// Set in a slot's flag word, beside the segment's number, by a sender that
/// has no data for that segment (a bcast root whose pack failed). Sequence
/// numbers never come near this bit, so the marked flag still satisfies
/// "flag >= seq" and wakes the receiver through its ordinary wait.
const ABANDONED: u64 = 1 << 63;

/// What a receiver found in a slot.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    Segment,
    /// The sender marked the segment abandoned: no payload came.
    Abandoned,
}

/// Payloads of up to this many bytes are tiny: they travel in the slot's
/// first cache line, the flag word right after them (`SlotShape`).
pub(crate) const TINY_BYTES: usize = LINE - FLAG_BYTES;

/// One slot: the payload, then the flag word. A slot for payloads longer
/// than `TINY_BYTES` starts with a line of its own for the tiny ones: the
/// flag after a full capacity sits far from a short payload, and then the
/// writer's put takes two lines from the reader's core and the reader's
/// poll and read take both back, where one line serves a tiny payload.
/// The two places never overlap, so no payload covers the flag word of a
/// payload of another length that a later segment in the slot may poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotShape {
    payload_capacity: usize,
    slot_bytes: usize,
}

impl SlotShape {
    pub(crate) fn holding(payload: usize) -> Self {
        let payload_capacity = payload.next_multiple_of(FLAG_BYTES);
        let tiny_line = if payload_capacity > TINY_BYTES { LINE } else { 0 };
        SlotShape { payload_capacity, slot_bytes: tiny_line + (payload_capacity + FLAG_BYTES).next_multiple_of(LINE) }
    }

    /// Where a payload of `len` bytes and its flag word go in the slot at
    /// `slot`: (payload, flag). Writer and reader agree on `len` (a
    /// segment's length follows from the call's, the same everywhere).
    pub(crate) fn places(&self, slot: usize, len: usize) -> (usize, usize) {
        if self.payload_capacity <= TINY_BYTES {
            (slot, slot + self.payload_capacity)
        } else if len <= TINY_BYTES {
            (slot, slot + TINY_BYTES)
        } else {
            (slot + LINE, slot + LINE + self.payload_capacity)
        }
    }

    pub(crate) fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    pub(crate) fn ring_bytes(&self) -> usize {
        self.slot_bytes * RING_DEPTH as usize
    }
}

/// How a sender knows that the slots it wrote in earlier calls have been
/// read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reuse {
    /// The sender cannot hold a later call's data before the receiver has
    /// read everything of earlier calls (proved where each stream is
    /// built). Only slots reused within a call need credits.
    ImpliedByDataFlow,
    /// Senders may return before their segments are read (reduce), so the
    /// receiver acknowledges every segment as it reads it, and a sender
    /// reuses a slot once its previous occupant is acknowledged, whichever
    /// call it belonged to. A sender can thus run one slot ahead of its
    /// receiver across calls instead of waiting for each call to be read.
    AcknowledgedEachCall,
}

/// Segment `index` of a call of `count` segments, numbered `seq`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Turn {
    pub index: usize,
    pub count: usize,
    pub seq: u64,
    pub reuse: Reuse,
}

impl Turn {
    pub(crate) fn new(index: usize, count: usize, base: u64, reuse: Reuse) -> Self {
        Turn { index, count, seq: base + index as u64 + 1, reuse }
    }

    /// The credit the sender needs before writing this segment; 0 needs
    /// none. The slot last held segment `seq - RING_DEPTH`. Within a call
    /// the receiver acknowledges it (see `must_acknowledge`); across calls
    /// the data flow proves it read, or, for acknowledged reuse, the
    /// receiver acknowledged it like every other segment.
    pub(crate) fn credit_needed(&self) -> u64 {
        match self.reuse {
            Reuse::AcknowledgedEachCall => self.seq.saturating_sub(RING_DEPTH),
            Reuse::ImpliedByDataFlow if self.index as u64 >= RING_DEPTH => self.seq - RING_DEPTH,
            Reuse::ImpliedByDataFlow => 0,
        }
    }

    /// Whether the receiver acknowledges this segment: exactly the ones a
    /// sender may wait for under `credit_needed`.
    pub(crate) fn must_acknowledge(&self) -> bool {
        let reused_in_call = (self.index as u64 + RING_DEPTH) < self.count as u64;
        reused_in_call || self.reuse == Reuse::AcknowledgedEachCall
    }
}

/// The highest credit a sender has read from one stream's credit word.
/// Credits only grow, so a segment whose credit was already seen needs no
/// read: the word's cache line stays with the receiver that writes it, and
/// the sender saves a cache miss per call where the receiver keeps up (a
/// reduce's child, which waits on nothing else from its parent).
/// Relaxed atomic rather than a `Cell` so that a plan holding it can be
/// shared (`Arc`) by a communicator's outstanding runs; only the run at the
/// head of the stream's queue touches it, so no ordering is needed.
#[derive(Debug, Default)]
pub(crate) struct KnownCredit(AtomicU64);

impl KnownCredit {
    #[inline]
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    #[inline]
    fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed)
    }
}

impl Clone for KnownCredit {
    fn clone(&self) -> Self {
        KnownCredit(AtomicU64::new(self.get()))
    }
}

/// One directed stream. `ring` is an offset in the receiver's window,
/// `credit` one in the sender's; each has exactly one writer (the sender
/// for the ring, the receiver for the credit).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stream {
    pub what: &'static str,
    pub sender: usize,
    pub receiver: usize,
    pub ring: usize,
    pub credit: usize,
    pub shape: SlotShape,
}

impl Stream {
    fn slot(&self, seq: u64) -> usize {
        self.ring + ((seq - 1) % RING_DEPTH) as usize * self.shape.slot_bytes
    }

    /// Where segment `seq`, of `len` bytes, and its flag word go
    /// (`SlotShape::places`): (payload, flag).
    fn places(&self, seq: u64, len: usize) -> (usize, usize) {
        self.shape.places(self.slot(seq), len)
    }

    /// Sender side: waits for `credit_needed`, then puts the segment.
    pub(crate) fn send<T: Windows + ?Sized>(
        &self,
        transport: &T,
        seq: u64,
        data: &[u8],
        credit_needed: u64,
        waits: Waits<'_>,
    ) -> Result<(), TransportError> {
        self.send_knowing(transport, seq, data, credit_needed, &KnownCredit::default(), waits)
    }

    /// As `send`, for a sender that keeps the stream's `known` credit from
    /// one call to the next: a credit it has already seen is not read again.
    pub(crate) fn send_knowing<T: Windows + ?Sized>(
        &self,
        transport: &T,
        seq: u64,
        data: &[u8],
        credit_needed: u64,
        known: &KnownCredit,
        waits: Waits<'_>,
    ) -> Result<(), TransportError> {
        let sent = self.try_send(transport, seq, data, credit_needed, known, Meet::Block(waits))?;
        debug_assert!(sent, "a blocking send returns once sent");
        Ok(())
    }

    /// The resumable send: `false` when `meet` polls and the credit is not
    /// there yet (nothing was written).
    ///
    /// Always inlined, with the credit test: a blocking caller passes a
    /// constant `Meet::Block`, under which the compiler drops the poll
    /// branches and the `bool` result, so one implementation serves the
    /// blocking calls as cheaply as a send written for them alone. Out of
    /// line (this function, and the credit read beside it), the blocking
    /// reduce's non-root paid about 60 instructions a call more than the
    /// blocking send it replaced (issue 35, `docs/bench/2026-11-30`).
    #[inline(always)]
    pub(crate) fn try_send<T: Windows + ?Sized>(
        &self,
        transport: &T,
        seq: u64,
        data: &[u8],
        credit_needed: u64,
        known: &KnownCredit,
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        if !self.try_credit(transport, seq, credit_needed, known, meet)? {
            return Ok(false);
        }
        let (payload, flag) = self.places(seq, data.len());
        put_word_padded(transport, self.receiver, payload, data, flag, seq)?;
        Ok(true)
    }

    /// Whether the credit for `seq` is there: known already (one load), or
    /// read from the credit word as `meet` lets it, and then kept.
    #[inline(always)]
    fn try_credit<T: Windows + ?Sized>(
        &self,
        transport: &T,
        seq: u64,
        credit_needed: u64,
        known: &KnownCredit,
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        if credit_needed <= known.get() {
            return Ok(true);
        }
        let seen = meet.local_at_least(transport, self.credit, credit_needed, || {
            format!("{}: rank {} to free a slot for segment {seq}", self.what, self.receiver)
        })?;
        match seen {
            Some(seen) => {
                known.set(seen);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Sender side, instead of `send`: tells the receiver that segment `seq`,
    /// of `len` bytes, will not come. Waits for the same credit as `send`,
    /// so that the mark cannot land on a slot whose previous segment is
    /// still unread.
    pub(crate) fn send_abandoned<T: Windows + ?Sized>(
        &self,
        transport: &T,
        seq: u64,
        len: usize,
        credit_needed: u64,
        waits: Waits<'_>,
    ) -> Result<(), TransportError> {
        let sent = self.try_send_abandoned(transport, seq, len, credit_needed, Meet::Block(waits))?;
        debug_assert!(sent, "a blocking send returns once sent");
        Ok(())
    }

    /// The resumable `send_abandoned`: `false` while the credit is missing.
    pub(crate) fn try_send_abandoned<T: Windows + ?Sized>(
        &self,
        transport: &T,
        seq: u64,
        len: usize,
        credit_needed: u64,
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        if !self.try_credit(transport, seq, credit_needed, &KnownCredit::default(), meet)? {
            return Ok(false);
        }
        let (_, flag) = self.places(seq, len);
        transport.put_flag(self.receiver, flag, seq | ABANDONED)?;
        Ok(true)
    }

    /// Receiver side: waits for segment `seq` and copies it into `out`.
    pub(crate) fn receive<T: Windows + ?Sized>(
        &self,
        transport: &T,
        seq: u64,
        out: &mut [u8],
        waits: Waits<'_>,
    ) -> Result<(), TransportError> {
        let arrived = self.try_receive(transport, seq, out, Meet::Block(waits))?;
        debug_assert!(arrived, "a blocking receive returns once received");
        Ok(())
    }

    /// The resumable `receive`: `false` while segment `seq` is not there
    /// (`out` untouched).
    pub(crate) fn try_receive<T: Windows + ?Sized>(
        &self,
        transport: &T,
        seq: u64,
        out: &mut [u8],
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        let (payload, flag) = self.places(seq, out.len());
        if self.await_flag(transport, seq, flag, meet)?.is_none() {
            return Ok(false);
        }
        transport.read_local(payload, out);
        Ok(true)
    }

    /// The resumable receive for streams whose sender may abandon a
    /// segment: `None` while segment `seq` is not there, else what came
    /// (for `Abandoned`, `out` is untouched).
    pub(crate) fn try_receive_unless_abandoned<T: Windows + ?Sized>(
        &self,
        transport: &T,
        seq: u64,
        out: &mut [u8],
        meet: Meet<'_>,
    ) -> Result<Option<Arrival>, TransportError> {
        let (payload, flag) = self.places(seq, out.len());
        match self.await_flag(transport, seq, flag, meet)? {
            None => Ok(None),
            Some(flag) if flag == seq | ABANDONED => Ok(Some(Arrival::Abandoned)),
            Some(_) => {
                transport.read_local(payload, out);
                Ok(Some(Arrival::Segment))
            }
        }
    }

    fn await_flag<T: Windows + ?Sized>(&self, transport: &T, seq: u64, flag: usize, meet: Meet<'_>) -> Result<Option<u64>, TransportError> {
        meet.local_at_least(transport, flag, seq, || {
            format!("{}: segment {seq} from rank {}", self.what, self.sender)
        })
    }

    /// Receiver side, after `receive`: returns the slot to the sender.
    pub(crate) fn acknowledge<T: Windows + ?Sized>(&self, transport: &T, seq: u64) -> Result<(), TransportError> {
        transport.put_flag(self.sender, self.credit, seq)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn every_credit_a_sender_waits_for_is_acknowledged() {
        for reuse in [Reuse::ImpliedByDataFlow, Reuse::AcknowledgedEachCall] {
            for counts in [vec![1, 1, 1], vec![5, 1, 2, 7], vec![2, 3]] {
                let mut base = 0;
                let mut acknowledged = Vec::new();
                for &count in &counts {
                    for index in 0..count {
                        let turn = Turn::new(index, count, base, reuse);
                        let needed = turn.credit_needed();
                        assert!(
                            needed == 0 || acknowledged.contains(&needed),
                            "{reuse:?} {counts:?}: waits for {needed}"
                        );
                        // The slot's previous segment is at most what was waited for.
                        if turn.seq > RING_DEPTH && reuse == Reuse::AcknowledgedEachCall {
                            assert!(needed >= turn.seq - RING_DEPTH);
                        }
                        if turn.must_acknowledge() {
                            acknowledged.push(turn.seq);
                        }
                    }
                    base += count as u64;
                }
            }
        }
    }

    /// A sender's side of one stream: its own window holds only the credit
    /// word, and every read of it is counted.
    #[derive(Default)]
    struct CreditWord {
        credit: Cell<u64>,
        reads: Cell<usize>,
        puts: Cell<usize>,
    }

    impl btl_ibmc::Endpoint for CreditWord {
        fn name(&self) -> &'static str {
            "credit word"
        }
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            2
        }
        fn progress(&self) {}
    }

    impl Windows for CreditWord {
        fn window_len(&self) -> usize {
            LINE
        }
        fn put(&self, _: usize, _: usize, _: &[u8], _: usize, _: u64) -> Result<(), TransportError> {
            self.puts.set(self.puts.get() + 1);
            Ok(())
        }
        fn put_flag(&self, _: usize, _: usize, _: u64) -> Result<(), TransportError> {
            self.puts.set(self.puts.get() + 1);
            Ok(())
        }
        fn local_flag(&self, _: usize) -> u64 {
            self.reads.set(self.reads.get() + 1);
            self.credit.get()
        }
        fn set_local_flag(&self, _: usize, value: u64) {
            self.credit.set(value)
        }
        fn read_local(&self, _: usize, _: &mut [u8]) {}
    }

    #[test]
    fn a_credit_already_seen_is_not_read_again() {
        let shape = SlotShape::holding(8);
        let stream = Stream { what: "test", sender: 0, receiver: 1, ring: 0, credit: 0, shape };
        let (transport, known, policy) = (CreditWord::default(), KnownCredit::default(), btl_ibmc::WaitPolicy::default());
        let waits = policy.without_side_progress();
        transport.credit.set(4);
        stream.send_knowing(&transport, 5, &[1; 8], 3, &known, waits).unwrap();
        assert_eq!((transport.reads.get(), transport.puts.get()), (1, 1), "the first credit is read");
        for (seq, needed) in [(6, 4), (7, 0), (8, 2)] {
            stream.send_knowing(&transport, seq, &[1; 8], needed, &known, waits).unwrap();
        }
        assert_eq!((transport.reads.get(), transport.puts.get()), (1, 4), "credit 4 was seen with the first read");
        transport.credit.set(6);
        stream.send_knowing(&transport, 9, &[1; 8], 5, &known, waits).unwrap();
        assert_eq!((transport.reads.get(), known.get()), (2, 6), "a higher credit is read, and kept");
        stream.send_knowing(&transport, 10, &[1; 8], 6, &known, waits).unwrap();
        stream.send(&transport, 11, &[1; 8], 6, waits).unwrap();
        assert_eq!(transport.reads.get(), 3, "send alone keeps nothing between calls");
    }

    #[test]
    fn a_polled_send_without_its_credit_writes_nothing_until_the_credit_comes() {
        let shape = SlotShape::holding(8);
        let stream = Stream { what: "test", sender: 0, receiver: 1, ring: 0, credit: 0, shape };
        let (transport, known) = (CreditWord::default(), KnownCredit::default());
        let awaited = std::cell::Cell::new(None);
        transport.credit.set(2);
        assert!(!stream.try_send(&transport, 5, &[1; 8], 3, &known, Meet::Poll(&awaited)).unwrap());
        assert_eq!((transport.puts.get(), known.get()), (0, 0), "no put, and a credit below the need is not kept");
        transport.credit.set(3);
        assert!(stream.try_send(&transport, 5, &[1; 8], 3, &known, Meet::Poll(&awaited)).unwrap());
        assert_eq!((transport.puts.get(), known.get()), (1, 3));
        assert!(!stream.try_send_abandoned(&transport, 6, 8, 4, Meet::Poll(&awaited)).unwrap());
        assert_eq!(transport.puts.get(), 1, "an abandoned mark waits for its credit too");
        transport.credit.set(4);
        assert!(stream.try_send_abandoned(&transport, 6, 8, 4, Meet::Poll(&awaited)).unwrap());
        assert_eq!(transport.puts.get(), 2, "the abandoned mark goes once its credit comes");
    }

    #[test]
    fn flags_follow_their_payload_inside_the_slot() {
        for capacity in [1, 8, 9, 56, 57, 64, 256, 8192] {
            let shape = SlotShape::holding(capacity);
            assert_eq!(shape.slot_bytes() % LINE, 0);
            for len in 1..=capacity {
                let (payload, flag) = shape.places(LINE, len);
                assert!(payload + len <= flag, "capacity {capacity}, {len} bytes: the payload covers its flag");
                assert!(flag + FLAG_BYTES <= LINE + shape.slot_bytes(), "capacity {capacity}, {len} bytes: outside the slot");
                assert_eq!(flag % 8, 0);
            }
        }
    }

    #[test]
    fn a_tiny_payload_shares_its_flags_line_and_no_payload_covers_another_lengths_flag() {
        for capacity in [8, 56, 57, 256, 8192] {
            let shape = SlotShape::holding(capacity);
            let slot = 3 * LINE;
            for len in 1..=capacity.min(TINY_BYTES) {
                let (payload, flag) = shape.places(slot, len);
                assert_eq!(payload / LINE, flag / LINE, "capacity {capacity}, {len} bytes: payload at {payload}, flag at {flag}");
            }
            // A later segment in the slot may be of another length: the
            // bytes any payload writes never hold another length's flag.
            for len in 1..=capacity {
                let (payload, _) = shape.places(slot, len);
                // A put writes whole words (`put_word_padded`).
                let written = len.next_multiple_of(FLAG_BYTES);
                for other in 1..=capacity {
                    let (_, flag) = shape.places(slot, other);
                    let covers = payload < flag + FLAG_BYTES && flag < payload + written;
                    assert!(!covers, "capacity {capacity}: a payload of {len} bytes covers the flag of {other}");
                }
            }
        }
    }
}
