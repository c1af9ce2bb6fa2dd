//! The small-message allreduce: every rank puts its contribution into its
//! own slot in every other rank's window, then folds all P contributions
//! locally in rank order. One one-way transfer replaces a reduction and a
//! broadcast, and since every rank evaluates the same left-to-right
//! expression r0 ∘ r1 ∘ … ∘ r(P-1), all ranks get bit-identical results.
//!
//! # Slot sets, and when a slot may be written again
//!
//! A call of up to `SHORT_BYTES` (a short call) takes a slot in the short
//! part, of `2 * depth` sets (`depth` >= 1, as many as fit
//! `SHORT_SETS_BUDGET_BYTES`, at most `MAX_SHORT_SETS`); a longer one in
//! the long part, of two sets of slots as long as the exchange's longest
//! message (none where that is short). A contribution of up to
//! `slots::TINY_BYTES` goes with its flag word in one cache line of its
//! slot (`SlotShape::places`). Each part chooses the set by the
//! call's epoch modulo its number of sets, the same on every rank, and the
//! flag word holds the epoch. A rank starts writing (putting its
//! contribution to) a short call e only once every call numbered
//! e - depth or lower finished on it and every call before e that is not
//! a short exchange did; any other call (a long exchange, a tree call)
//! only once every call before it did. The blocking call always waits
//! for all; a resumable run is let go as far as this by its lane
//! (`schedule_queue`, `Schedule::overlap`), so up to `depth` short
//! exchange runs advance at once, and a long one goes alone as before.
//!
//! Then a slot is never overwritten before it is read, without any
//! acknowledgement. Short slots: rank q writes call e + 2·depth (the set
//! of e) into rank r's window only after finishing call e + depth, which
//! needed r to start call e + depth (its contribution, or its part in a
//! tree), which r does only after finishing every call up to e, having
//! read every slot of e. Long slots: q writes long call e + 2 only after
//! finishing call e + 1, which r started only after finishing e (a short
//! call e + 1 waits for the long call e before it; any other waits for
//! every earlier call). The flag never shows a later epoch than the
//! reader expects, by the same argument: only epochs of one residue share
//! a slot. Tree calls in between need nothing more: a tree call is one of
//! the calls the argument steps through. With one part of two sets and
//! every call alone this is the original two-set parity argument.

use btl_ibmc::{put_word_padded, TransportError, Windows};

use crate::patterns::meet::Meet;
use crate::patterns::slots::SlotShape;
use crate::reduction::Reduction;

/// Calls of up to this many bytes are short: their slots come in many
/// sets, so that several such runs advance at once (module header).
const SHORT_BYTES: usize = 256;

/// Window bytes the short part may take where it has more than two sets:
/// 16 sets of 384-byte slots (a line for tiny contributions, 256 bytes and
/// the flag) at np=2 (12 KiB), 12 at np=3, 8 at np=4, 6 at np=5, 4 at
/// np=9, two (as before this part had more) from 10 ranks; the window
/// stays well below a long message, which the tree streams through it.
const SHORT_SETS_BUDGET_BYTES: usize = 14 * 1024;

/// Short sets at most: 8 short runs at once, what `coll_pairs -c
/// iallreduce_8rev` posts.
const MAX_SHORT_SETS: usize = 16;

/// One part's slots: `sets` sets of a slot per sender.
#[derive(Clone, Copy, Debug)]
struct SlotSets {
    start: usize,
    shape: SlotShape,
    /// An even number, at least 2.
    sets: usize,
}

impl SlotSets {
    fn len(&self, size: usize) -> usize {
        self.sets * size * self.shape.slot_bytes()
    }

    fn slot(&self, size: usize, epoch: u64, sender: usize) -> usize {
        let set = (epoch % self.sets as u64) as usize;
        self.start + (set * size + sender) * self.shape.slot_bytes()
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct ExchangeSlots {
    size: usize,
    /// Calls of up to `SHORT_BYTES` (all of them if the exchange goes no
    /// further): `2 * depth` sets.
    short: SlotSets,
    /// Longer calls: two sets; `None` where the exchange stops at
    /// `SHORT_BYTES` or below.
    long: Option<SlotSets>,
    /// Where the parts end.
    end: usize,
}

impl ExchangeSlots {
    /// Window bytes for messages of up to `max_bytes` over `size` ranks.
    pub(crate) fn region_len(size: usize, max_bytes: usize) -> usize {
        Self::new(0, size, max_bytes).end
    }

    pub(crate) fn new(start: usize, size: usize, max_bytes: usize) -> Self {
        let short_shape = SlotShape::holding(max_bytes.min(SHORT_BYTES));
        let fit = SHORT_SETS_BUDGET_BYTES / (size.max(1) * short_shape.slot_bytes());
        let short = SlotSets { start, shape: short_shape, sets: fit.clamp(2, MAX_SHORT_SETS) & !1 };
        let mut end = start + if max_bytes == 0 { 0 } else { short.len(size) };
        let long = (max_bytes > SHORT_BYTES).then(|| {
            let long = SlotSets { start: end, shape: SlotShape::holding(max_bytes), sets: 2 };
            end += long.len(size);
            long
        });
        ExchangeSlots { size, short, long, end }
    }

    /// How many exchange calls of `len` bytes a rank may have under way
    /// at once (module header): `depth` for a short call, which starts
    /// once every call up to e - depth and every earlier call other than
    /// a short exchange finished; `None` for a long one, which waits for
    /// every earlier call.
    pub(crate) fn depth(&self, len: usize) -> Option<u64> {
        (len <= SHORT_BYTES).then_some((self.short.sets / 2) as u64)
    }

    fn part(&self, len: usize) -> &SlotSets {
        match &self.long {
            Some(long) if len > SHORT_BYTES => long,
            _ => &self.short,
        }
    }

    /// Runs exchange call `epoch` as far as `meet` lets it; `incoming` is
    /// scratch of `send.len()` and `cursor` where an earlier advance of
    /// this call stopped. Returns whether the call is finished.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn resume<T: Windows + ?Sized, R: Reduction + ?Sized>(
        &self,
        transport: &T,
        op: &R,
        rank: usize,
        epoch: u64,
        send: &[u8],
        recv: &mut [u8],
        incoming: &mut [u8],
        cursor: &mut ExchangeCursor,
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        let part = self.part(send.len());
        if !cursor.posted {
            let (mine, flag) = part.shape.places(part.slot(self.size, epoch, rank), send.len());
            // Starting after oneself spreads the first writes over all targets.
            for distance in 1..self.size {
                let peer = (rank + distance) % self.size;
                put_word_padded(transport, peer, mine, send, flag, epoch)?;
            }
            cursor.posted = true;
            self.prepare_next_puts(transport, part, rank, epoch + 1, send.len());
            if let Meet::Poll(_) = meet {
                // A resumable run looks for contributions from its next
                // advance on, not at its post: the peers are most often
                // posting this very call now, and a look before a peer's
                // put takes that slot's line from the peer's core just
                // before the put takes it back, a transfer more for both
                // (paired, np=2, 8 B: 8 outstanding MPI_Iallreduce 0.92x
                // the time with the look; docs/nonblocking.md).
                let first = if rank == cursor.next_sender { cursor.next_sender + 1 } else { cursor.next_sender };
                debug_assert!(first < self.size, "the exchange serves communicators of two ranks or more");
                let (_, flag) = part.shape.places(part.slot(self.size, epoch, first), send.len());
                meet.await_local(flag, epoch);
                return Ok(false);
            }
        }
        while cursor.next_sender < self.size {
            let sender = cursor.next_sender;
            let contribution: &mut [u8] = if sender == 0 { &mut *recv } else { &mut *incoming };
            if sender == rank {
                contribution.copy_from_slice(send);
            } else {
                let (payload, flag) = part.shape.places(part.slot(self.size, epoch, sender), send.len());
                let arrived = meet.local_at_least(transport, flag, epoch, || {
                    format!("allreduce {epoch} (exchange): contribution of rank {sender}")
                })?;
                if arrived.is_none() {
                    return Ok(false);
                }
                transport.read_local(payload, contribution);
            }
            if sender > 0 {
                op.combine(recv, incoming);
                recv.copy_from_slice(incoming);
            }
            cursor.next_sender += 1;
        }
        Ok(true)
    }

    /// Hints the lines this rank's next call of `len` bytes, `epoch`, will
    /// put into (`Windows::prepare_put`): taking them now, while this call
    /// folds and the caller works, spares that call's post the wait for
    /// each line (docs/design.md, "Write hints"). The first
    /// `HINTED_PEERS` peers it writes only: each hint holds one of the
    /// core's few outstanding-miss buffers until its line arrives.
    fn prepare_next_puts<T: Windows + ?Sized>(&self, transport: &T, part: &SlotSets, rank: usize, epoch: u64, len: usize) {
        let (next, _) = part.shape.places(part.slot(self.size, epoch, rank), len);
        for distance in 1..self.size.min(HINTED_PEERS + 1) {
            transport.prepare_put((rank + distance) % self.size, next);
        }
    }
}

/// Peers an exchange call hints its next puts to (`prepare_next_puts`).
const HINTED_PEERS: usize = 4;

/// How far one exchange call got: its puts, then the contributions folded.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ExchangeCursor {
    pub(crate) posted: bool,
    pub(crate) next_sender: usize,
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

    use btl_ibmc::{Endpoint, TransportError, Windows};

    use super::*;
    use crate::patterns::meet::Meet;
    use crate::reduction::Reduction;
    use crate::schedule::AwaitedWord;

    /// Rank `rank` of `size`, whose peers' contributions have all arrived:
    /// records where each put lands and which lines were hinted.
    struct Recorder {
        rank: usize,
        size: usize,
        puts: RefCell<Vec<(usize, usize)>>,
        hints: RefCell<Vec<(usize, usize)>>,
        epoch: Cell<u64>,
        flag_reads: Cell<usize>,
    }

    impl Endpoint for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn rank(&self) -> usize {
            self.rank
        }
        fn size(&self) -> usize {
            self.size
        }
        fn progress(&self) {}
    }

    impl Windows for Recorder {
        fn window_len(&self) -> usize {
            1 << 20
        }
        fn put(&self, peer: usize, offset: usize, _: &[u8], _: usize, _: u64) -> Result<(), TransportError> {
            self.puts.borrow_mut().push((peer, offset));
            Ok(())
        }
        fn put_flag(&self, _: usize, _: usize, _: u64) -> Result<(), TransportError> {
            unreachable!("the exchange puts its contribution with its flag")
        }
        fn local_flag(&self, _: usize) -> u64 {
            self.flag_reads.set(self.flag_reads.get() + 1);
            self.epoch.get()
        }
        fn set_local_flag(&self, _: usize, _: u64) {}
        fn read_local(&self, _: usize, out: &mut [u8]) {
            out.fill(0);
        }
        fn prepare_put(&self, peer: usize, offset: usize) {
            self.hints.borrow_mut().push((peer, offset));
        }
    }

    struct Xor;

    impl Reduction for Xor {
        fn element_size(&self) -> usize {
            1
        }
        fn is_commutative(&self) -> bool {
            true
        }
        fn combine(&self, acc: &[u8], incoming: &mut [u8]) {
            for (byte, &a) in incoming.iter_mut().zip(acc) {
                *byte ^= a;
            }
        }
    }

    const LINE: usize = 64;

    fn part_flag(slots: &ExchangeSlots, size: usize, epoch: u64, sender: usize, len: usize) -> usize {
        let part = slots.part(len);
        part.shape.places(part.slot(size, epoch, sender), len).1
    }

    #[test]
    fn a_run_looks_after_its_post_and_hints_the_lines_of_its_next_puts() {
        for (size, len) in [(2, 8), (3, 4), (5, 200), (9, 8), (3, 1000)] {
            let slots = ExchangeSlots::new(4096, size, 1024);
            let recorder = Recorder { rank: 1, size, puts: RefCell::default(), hints: RefCell::default(), epoch: Cell::new(0), flag_reads: Cell::new(0) };
            let send = vec![7u8; len];
            let (mut recv, mut incoming) = (vec![0u8; len], vec![0u8; len]);
            let mut hinted_before: Vec<(usize, usize)> = Vec::new();
            for epoch in 1..=40 {
                recorder.epoch.set(epoch);
                let awaited = Cell::new(None);
                let mut cursor = ExchangeCursor::default();
                let mut resume = |awaited: &Cell<Option<AwaitedWord>>| {
                    slots.resume(&recorder, &Xor, 1, epoch, &send, &mut recv, &mut incoming, &mut cursor, Meet::Poll(awaited)).unwrap()
                };
                assert!(!resume(&awaited), "a run does not look at its post");
                assert_eq!(recorder.flag_reads.take(), 0, "a run does not look at its post");
                let first_flag = part_flag(&slots, size, epoch, 0, len);
                assert_eq!(awaited.get(), Some(AwaitedWord { offset: first_flag, at_least: epoch }), "rank 0's contribution is awaited first");
                assert!(resume(&Cell::new(None)), "every contribution had arrived");
                assert_eq!(recorder.flag_reads.take(), size - 1);
                let puts = recorder.puts.take();
                assert_eq!(puts.len(), size - 1);
                if epoch > 1 {
                    let hinted_first = puts.iter().take(HINTED_PEERS).all(|&(peer, offset)| {
                        hinted_before.iter().any(|&(hinted, line)| hinted == peer && line / LINE == offset / LINE)
                    });
                    assert!(hinted_first, "np {size}, {len} B, call {epoch}: puts {puts:?}, hinted {hinted_before:?}");
                }
                hinted_before = recorder.hints.take();
                assert_eq!(hinted_before.len(), (size - 1).min(HINTED_PEERS));
                assert!(hinted_before.iter().all(|&(peer, _)| peer != 1 && peer < size));
            }
        }
    }
}
