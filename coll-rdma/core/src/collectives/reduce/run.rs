//! One reduce call as a resumable run (`Schedule`): the tree of `super`,
//! cut at every point where the blocking call would wait.
//!
//! # States
//!
//! `cursor` is `None` once nothing is left (an empty message, one rank, or
//! done). Otherwise segment `index` goes through, in the blocking order:
//! the upward step (`up_steps` counts the children folded and the send to
//! the parent, as `Upward::resume_segment` takes them), then on rank 0 for
//! a root other than 0 the relay to the root (`relayed`), then on such a
//! root the relayed result. A missing flag or credit leaves the run where
//! it stopped.
//!
//! Sequence numbers are taken when the run is started, in post order; the
//! cross-call arguments of `super` hold because a communicator's reduce
//! runs advance one at a time in that order (`schedule_queue`).

use btl_ibmc::{TransportError, Windows};

use super::ReducePlan;
use crate::collectives::large_reduction::buffers::Contribution;
use crate::patterns::meet::{advance_by_polling, Meet, Resumable, StallClock};
use crate::patterns::{scratch, transient_scratch, TRANSIENT_SCRATCH_BYTES};
use crate::patterns::segments::Segments;
use crate::patterns::slots::{Reuse, Turn};
use crate::reduction::Reduction;
use crate::schedule::{AwaitedWord, Schedule, Step};

pub(super) struct ReduceCursor {
    segments: Segments,
    base: u64,
    index: usize,
    up_steps: usize,
    up_done: bool,
    relayed: bool,
}

impl ReduceCursor {
    pub(super) fn new(segments: Segments, base: u64) -> Self {
        ReduceCursor { segments, base, index: 0, up_steps: 0, up_done: false, relayed: false }
    }
}

/// One rank's part of one reduce call; made by `Reduce::start`.
pub struct ReduceRun<'a, R> {
    pub(super) plan: std::sync::Arc<ReducePlan>,
    pub(super) op: R,
    pub(super) root: usize,
    pub(super) send: Contribution<'a>,
    /// The root's result buffer; `None` on every other rank.
    pub(super) result: Option<&'a mut [u8]>,
    /// Scratch where the stack's does not do (see `resume`).
    pub(super) partial: Vec<u8>,
    pub(super) incoming: Vec<u8>,
    pub(super) cursor: Option<ReduceCursor>,
    pub(super) stall: StallClock,
}

impl<R> ReduceRun<'_, R> {
    /// Bytes of scratch the run holds on the heap: none at a leaf (it
    /// sends from its send buffer), none for segments of up to
    /// `TRANSIENT_SCRATCH_BYTES` at rank 0 of a reduce to 0 (the tests
    /// check that a short run allocates nothing).
    pub fn heap_scratch_bytes(&self) -> usize {
        self.partial.capacity() + self.incoming.capacity()
    }
}

impl<T: Windows + ?Sized, R: Reduction> Resumable<T> for ReduceRun<'_, R> {
    type Position = Option<(usize, usize, bool, bool)>;

    fn resume(&mut self, transport: &T, meet: Meet<'_>) -> Result<bool, TransportError> {
        let Some(cursor) = self.cursor.as_mut() else {
            return Ok(true);
        };
        let (plan, root) = (&*self.plan, self.root);
        let count = cursor.segments.count();
        let full = cursor.segments.full_len();
        let folds_into_result = plan.rank == 0 && root == 0;
        // A leaf sends its own part straight from the send buffer: it
        // folds nothing, and is never rank 0, which relays. Rank 0 of a
        // reduce to 0 folds into the result. Elsewhere the partial holds
        // children's folds across advances, and the incoming segment is
        // read, folded and forgotten within one advance: scratch on the
        // stack up to `TRANSIENT_SCRATCH_BYTES`.
        let leaf = plan.upward.is_leaf() && plan.rank != 0;
        let mut stack = [0; TRANSIENT_SCRATCH_BYTES];
        let partial_scratch: &mut [u8] = if folds_into_result || leaf { &mut [] } else { scratch(&mut self.partial, full) };
        let incoming: &mut [u8] = if leaf { &mut [] } else { transient_scratch(&mut stack, &mut self.incoming, full) };
        while cursor.index < count {
            let turn = Turn::new(cursor.index, count, cursor.base, Reuse::AcknowledgedEachCall);
            let relay_turn = Turn::new(cursor.index, count, cursor.base, Reuse::ImpliedByDataFlow);
            let range = cursor.segments.range(cursor.index);
            // A leaf's is empty (it has none, and relays nothing).
            let partial = match self.result.as_deref_mut() {
                Some(buffer) if folds_into_result => &mut buffer[range.clone()],
                _ if leaf => &mut [],
                _ => &mut partial_scratch[..range.len()],
            };
            if !cursor.up_done {
                let own = &self.send[range.clone()];
                let sent = if leaf {
                    plan.upward.resume_leaf_segment(transport, turn, own, &mut cursor.up_steps, meet)?
                } else {
                    if cursor.up_steps == 0 {
                        // Nothing folded yet: (re)start from this rank's own part.
                        partial.copy_from_slice(own);
                    }
                    let incoming = &mut incoming[..range.len()];
                    plan.upward.resume_segment(transport, &self.op, turn, partial, incoming, &mut cursor.up_steps, meet)?
                };
                if !sent {
                    return Ok(false);
                }
                cursor.up_done = true;
            }
            if plan.rank == 0 && root != 0 && !cursor.relayed {
                let credit = relay_turn.credit_needed();
                if !plan.relays_out[root].try_send(transport, relay_turn.seq, partial, credit, &Default::default(), meet)? {
                    return Ok(false);
                }
                cursor.relayed = true;
            }
            if let Some(buffer) = self.result.as_deref_mut().filter(|_| root != 0) {
                if !plan.relay_in.try_receive(transport, relay_turn.seq, &mut buffer[range], meet)? {
                    return Ok(false);
                }
                if relay_turn.must_acknowledge() {
                    plan.relay_in.acknowledge(transport, relay_turn.seq)?;
                }
            }
            cursor.index += 1;
            cursor.up_steps = 0;
            cursor.up_done = false;
            cursor.relayed = false;
        }
        self.cursor = None;
        Ok(true)
    }

    fn position(&self) -> Option<(usize, usize, bool, bool)> {
        self.cursor.as_ref().map(|cursor| (cursor.index, cursor.up_steps, cursor.up_done, cursor.relayed))
    }

    fn stall_clock(&mut self) -> &mut StallClock {
        &mut self.stall
    }

    fn describe(&self) -> String {
        format!("reduce to root {} at (segment, step) {:?}", self.root, Resumable::<T>::position(self))
    }
}

impl<T: Windows + ?Sized, R: Reduction> Schedule<T> for ReduceRun<'_, R> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        advance_by_polling(self, &*transport)
    }
    fn awaited(&self) -> Option<AwaitedWord> {
        self.stall.awaited()
    }

    fn reuse_storage_of(&mut self, finished: &mut Self) {
        for (mine, earlier) in [(&mut self.partial, &mut finished.partial), (&mut self.incoming, &mut finished.incoming)] {
            if mine.capacity() < earlier.capacity() {
                *mine = std::mem::take(earlier);
            }
        }
    }
}
