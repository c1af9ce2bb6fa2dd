//! The small-message allreduce: every rank puts its contribution into its
//! own slot in every other rank's window, then folds all P contributions
//! locally in rank order. One one-way transfer replaces a reduction and a
//! broadcast, and since every rank evaluates the same left-to-right
//! expression r0 ∘ r1 ∘ … ∘ r(P-1), all ranks get bit-identical results.
//!
//! # Slot sets, and when a slot may be written again
//!
//! A call of up to `SHORT_BYTES` (a short call) takes a slot in the short
//! part, or for up to `TINY_BYTES` in the tiny part, each of `2 * depth`
//! sets (`depth` >= 1, as many as fit `SHORT_SETS_BUDGET_BYTES`, at most
//! `MAX_SHORT_SETS`); a longer one in the long part, of two sets of slots
//! as long as the exchange's longest message (none where that is short).
//! The parts never overlap, so a slot only ever holds calls of its part,
//! and its flag word is never another call's payload. Each part chooses the set by the
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
//! acknowledgement. Short and tiny slots (the same argument in each part): rank q writes call e + 2·depth (the set
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
use crate::patterns::region::LINE;
use crate::patterns::slots::SlotShape;
use crate::reduction::Reduction;

/// Calls of up to this many bytes are short: their slots come in many
/// sets, so that several such runs advance at once (module header).
const SHORT_BYTES: usize = 256;

/// Short calls of up to this many bytes are tiny: their slots, a cache
/// line each, hold the flag in the payload's line, so a contribution
/// crosses between cores as one line instead of two (the writer's put and
/// the reader's poll and read each touched the payload's line and the
/// flag's, 256 bytes apart in a short slot). Their own part of the
/// window: a short call's payload would cover a tiny slot's flag word,
/// which a later tiny call could then take for its flag.
const TINY_BYTES: usize = LINE - 8;

/// Window bytes the short and tiny parts may take where they have more
/// than two sets: 16 sets of 256-byte and 56-byte slots at np=2 (12 KiB),
/// 12 at np=3, 8 at np=4, 6 at np=5, 4 at np=9, two (as before these
/// parts had more) from 10 ranks; the window stays well below a long
/// message, which the tree streams through it.
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
    /// Calls of up to `TINY_BYTES`: as many sets as `short`, one line a
    /// slot.
    tiny: SlotSets,
    /// Calls of up to `SHORT_BYTES` (all of them if the exchange goes no
    /// further) but tiny ones: `2 * depth` sets.
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
        let tiny_shape = SlotShape::holding(max_bytes.min(TINY_BYTES));
        let short_shape = SlotShape::holding(max_bytes.min(SHORT_BYTES));
        let fit = SHORT_SETS_BUDGET_BYTES / (size.max(1) * (tiny_shape.slot_bytes() + short_shape.slot_bytes()));
        let sets = fit.clamp(2, MAX_SHORT_SETS) & !1;
        let tiny = SlotSets { start, shape: tiny_shape, sets };
        let mut end = start + if max_bytes == 0 { 0 } else { tiny.len(size) };
        let short = SlotSets { start: end, shape: short_shape, sets };
        if max_bytes > TINY_BYTES {
            end += short.len(size);
        }
        let long = (max_bytes > SHORT_BYTES).then(|| {
            let long = SlotSets { start: end, shape: SlotShape::holding(max_bytes), sets: 2 };
            end += long.len(size);
            long
        });
        ExchangeSlots { size, tiny, short, long, end }
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
            _ if len > TINY_BYTES => &self.short,
            _ => &self.tiny,
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
            let mine = part.slot(self.size, epoch, rank);
            // Starting after oneself spreads the first writes over all targets.
            for distance in 1..self.size {
                let peer = (rank + distance) % self.size;
                put_word_padded(transport, peer, mine, send, part.shape.flag_offset(mine), epoch)?;
            }
            cursor.posted = true;
        }
        while cursor.next_sender < self.size {
            let sender = cursor.next_sender;
            let contribution: &mut [u8] = if sender == 0 { &mut *recv } else { &mut *incoming };
            if sender == rank {
                contribution.copy_from_slice(send);
            } else {
                let slot = part.slot(self.size, epoch, sender);
                let arrived = meet.local_at_least(transport, part.shape.flag_offset(slot), epoch, || {
                    format!("allreduce {epoch} (exchange): contribution of rank {sender}")
                })?;
                if arrived.is_none() {
                    return Ok(false);
                }
                transport.read_local(slot, contribution);
            }
            if sender > 0 {
                op.combine(recv, incoming);
                recv.copy_from_slice(incoming);
            }
            cursor.next_sender += 1;
        }
        Ok(true)
    }
}

/// How far one exchange call got: its puts, then the contributions folded.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ExchangeCursor {
    pub(crate) posted: bool,
    pub(crate) next_sender: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every slot a call of `len` bytes may take, as (payload start, flag
    /// word), over one cycle of its part's sets.
    fn slots_of(slots: &ExchangeSlots, len: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        let part = slots.part(len);
        (0..part.sets as u64).flat_map(move |epoch| {
            (0..slots.size).map(move |sender| {
                let slot = part.slot(slots.size, epoch, sender);
                (slot, part.shape.flag_offset(slot))
            })
        })
    }

    #[test]
    fn a_tiny_call_crosses_as_one_line_and_no_part_covers_another_parts_flags() {
        for size in [2, 3, 5, 9, 40] {
            let slots = ExchangeSlots::new(3 * LINE, size, 4096);
            for len in 1..=TINY_BYTES {
                for (slot, flag) in slots_of(&slots, len) {
                    assert_eq!(slot / LINE, flag / LINE, "size {size}, {len} bytes: payload at {slot}, flag at {flag}");
                    assert!(slot + len <= flag, "size {size}, {len} bytes: the payload covers its own flag");
                }
            }
            // Each length class's payloads and flags lie in its own part.
            let mut spans: Vec<(usize, usize)> = Vec::new();
            for len in [TINY_BYTES, SHORT_BYTES, 4096] {
                let (low, high) = slots_of(&slots, len).fold((usize::MAX, 0), |(low, high), (slot, flag)| (low.min(slot), high.max(flag + 8)));
                assert!(spans.iter().all(|&(other_low, other_high)| high <= other_low || other_high <= low), "size {size}: part of {len} bytes overlaps another");
                spans.push((low, high));
            }
            assert!(spans.iter().all(|&(_, high)| high <= slots.end), "size {size}: a part runs past the region");
        }
    }
}
