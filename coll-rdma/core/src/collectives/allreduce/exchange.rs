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
//! shows a later epoch than the reader expects, by the same argument.

use btl_ibmc::{put_word_padded, wait_at_least, TransportError, Waits, Windows};

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

    /// Runs exchange call `epoch`; `incoming` is scratch of `send.len()`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn allreduce<T: Windows + ?Sized, R: Reduction + ?Sized>(
        &self,
        transport: &T,
        op: &R,
        rank: usize,
        epoch: u64,
        send: &[u8],
        recv: &mut [u8],
        incoming: &mut [u8],
        waits: Waits<'_>,
    ) -> Result<(), TransportError> {
        let mine = self.slot(epoch, rank);
        // Starting after oneself spreads the first writes over all targets.
        for distance in 1..self.size {
            let peer = (rank + distance) % self.size;
            put_word_padded(transport, peer, mine, send, self.shape.flag_offset(mine), epoch)?;
        }
        for sender in 0..self.size {
            let contribution: &mut [u8] = if sender == 0 { &mut *recv } else { &mut *incoming };
            if sender == rank {
                contribution.copy_from_slice(send);
            } else {
                let slot = self.slot(epoch, sender);
                wait_at_least(transport, self.shape.flag_offset(slot), epoch, waits, || {
                    format!("allreduce {epoch} (exchange): contribution of rank {sender}")
                })?;
                transport.read_local(slot, contribution);
            }
            if sender > 0 {
                op.combine(recv, incoming);
                recv.copy_from_slice(incoming);
            }
        }
        Ok(())
    }
}
