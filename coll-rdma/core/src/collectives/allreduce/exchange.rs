//! The small-message allreduce: every rank puts its contribution into its
//! own slot in every other rank's window, then folds all P contributions
//! locally in rank order. One one-way transfer replaces a reduction and a
//! broadcast, and since every rank evaluates the same left-to-right
//! expression r0 ∘ r1 ∘ … ∘ r(P-1), all ranks get bit-identical results.
//!
//! Slots come in two sets chosen by the parity of the call's epoch, and the
//! flag word holds the epoch. Rank q writes its slot in rank r's window for
//! epoch e+2 only after finishing call e+1, which needed r's contribution
//! to e+1, which r sends only after finishing call e, by which time r has
//! read every slot of e's set. So a slot is never overwritten before it is
//! read, without any acknowledgement. Tree calls in between do not matter:
//! they too complete only once every rank has entered them. The flag never
//! shows a later epoch than the reader expects, by the same argument. The
//! argument needs call e finished on a rank before it puts for e+1, which
//! holds for resumable runs too: a communicator's allreduce runs advance
//! one at a time, in post order (`schedule_queue`).

use btl_ibmc::{put_word_padded, TransportError, Windows};

use crate::patterns::meet::Meet;
use crate::patterns::slots::SlotShape;
use crate::reduction::Reduction;

#[derive(Clone, Copy, Debug)]
pub(crate) struct ExchangeSlots {
    start: usize,
    size: usize,
    shape: SlotShape,
}

impl ExchangeSlots {
    /// Window bytes for messages of up to `max_bytes` over `size` ranks.
    pub(crate) fn region_len(size: usize, max_bytes: usize) -> usize {
        if max_bytes == 0 {
            0
        } else {
            2 * size * SlotShape::holding(max_bytes).slot_bytes()
        }
    }

    pub(crate) fn new(start: usize, size: usize, max_bytes: usize) -> Self {
        ExchangeSlots { start, size, shape: SlotShape::holding(max_bytes) }
    }

    fn slot(&self, epoch: u64, sender: usize) -> usize {
        let set = (epoch % 2) as usize;
        self.start + (set * self.size + sender) * self.shape.slot_bytes()
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
        if !cursor.posted {
            let mine = self.slot(epoch, rank);
            // Starting after oneself spreads the first writes over all targets.
            for distance in 1..self.size {
                let peer = (rank + distance) % self.size;
                put_word_padded(transport, peer, mine, send, self.shape.flag_offset(mine), epoch)?;
            }
            cursor.posted = true;
        }
        while cursor.next_sender < self.size {
            let sender = cursor.next_sender;
            let contribution: &mut [u8] = if sender == 0 { &mut *recv } else { &mut *incoming };
            if sender == rank {
                contribution.copy_from_slice(send);
            } else {
                let slot = self.slot(epoch, sender);
                let arrived = meet.local_at_least(transport, self.shape.flag_offset(slot), epoch, || {
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
