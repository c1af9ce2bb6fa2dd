//! One allreduce call as a resumable run (`Schedule`): the exchange or the
//! tree of `super`, cut at every point where the blocking call would wait.
//!
//! # States
//!
//! * `Finished`: nothing left (an empty message, one rank, or done).
//! * `Exchange`: first every put of this rank's contribution (never
//!   waits), then the fold in rank order; `next_sender` is the first
//!   contribution not yet folded, so a missing one stops the fold there and
//!   the next advance resumes with it.
//! * `Tree`: step s works on the upward phase of segment s and then the
//!   downward phase of segment s - `DOWN_LAG`, exactly the blocking order;
//!   `up_steps` and `down_steps` count the sub-steps already taken (a
//!   child's partial folded, the parent's result received, a child sent to),
//!   so a missing flag or credit leaves the run where it stopped.
//!
//! Epoch and sequence numbers are taken when the run is started, in the
//! communicator's post order, which MPI makes the same on every rank. The
//! cross-call slot arguments of `super` hold as long as a tree run starts
//! to touch the window only after the communicator's previous allreduce
//! run finished on this rank, and a short exchange run only after every
//! one the exchange's depth or more before it did (`Schedule::overlap`):
//! `schedule_queue` keeps runs of one collective in post order, and lets
//! short exchange runs advance beside each other only that far.

use btl_ibmc::{TransportError, Windows};

use super::exchange::ExchangeCursor;
use super::{AllreducePlan, DOWN_LAG};
use crate::collectives::large_reduction::buffers::Contribution;
use crate::patterns::meet::{advance_by_polling, Meet, Resumable, StallClock};
use crate::patterns::{transient_scratch, TRANSIENT_SCRATCH_BYTES};
use crate::patterns::segments::Segments;
use crate::patterns::slots::{Reuse, Turn};
use crate::reduction::Reduction;
use crate::schedule::{AwaitedWord, Overlap, Schedule, Step};

pub(super) enum Path {
    Finished,
    Exchange { epoch: u64, cursor: ExchangeCursor },
    Tree(TreeCursor),
}

pub(super) struct TreeCursor {
    pub(super) segments: Segments,
    pub(super) base: u64,
    pub(super) step: usize,
    pub(super) up_done: bool,
    pub(super) up_steps: usize,
    pub(super) down_steps: usize,
}

impl TreeCursor {
    pub(super) fn new(segments: Segments, base: u64) -> Self {
        TreeCursor { segments, base, step: 0, up_done: false, up_steps: 0, down_steps: 0 }
    }
}

/// Where a run leaves its result: the caller's buffer, or a buffer the
/// run owns and drops with it (a reduce's ranks other than the root,
/// where the two-level allreduce carries the reduce: `Allreduce::
/// start_result_dropped`).
pub(super) enum ResultBuffer<'a> {
    Caller(&'a mut [u8]),
    Dropped(Vec<u8>),
}

impl std::ops::Deref for ResultBuffer<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            ResultBuffer::Caller(bytes) => bytes,
            ResultBuffer::Dropped(bytes) => bytes,
        }
    }
}

impl std::ops::DerefMut for ResultBuffer<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            ResultBuffer::Caller(bytes) => bytes,
            ResultBuffer::Dropped(bytes) => bytes,
        }
    }
}

/// One rank's part of one allreduce call; made by `Allreduce::start`.
pub struct AllreduceRun<'a, R> {
    pub(super) plan: std::sync::Arc<AllreducePlan>,
    pub(super) op: R,
    pub(super) send: Contribution<'a>,
    pub(super) recv: ResultBuffer<'a>,
    /// Scratch for segments longer than `TRANSIENT_SCRATCH_BYTES`
    /// (shorter ones are read on the stack: `transient_scratch`).
    pub(super) incoming: Vec<u8>,
    pub(super) path: Path,
    pub(super) stall: StallClock,
}

impl<R> AllreduceRun<'_, R> {
    /// Bytes of scratch the run holds on the heap: none for segments (or
    /// exchanged contributions) of up to `TRANSIENT_SCRATCH_BYTES` (the
    /// tests check that a short run allocates nothing).
    pub fn heap_scratch_bytes(&self) -> usize {
        self.incoming.capacity()
    }
}

impl<T: Windows + ?Sized, R: Reduction> Resumable<T> for AllreduceRun<'_, R> {
    type Position = (usize, usize, usize, bool);

    fn resume(&mut self, transport: &T, meet: Meet<'_>) -> Result<bool, TransportError> {
        let finished = match &mut self.path {
            Path::Finished => true,
            Path::Exchange { epoch, cursor } => {
                let mut stack = [0; TRANSIENT_SCRATCH_BYTES];
                let incoming = transient_scratch(&mut stack, &mut self.incoming, self.send.len());
                self.plan.exchange.resume(transport, &self.op, self.plan.rank, *epoch, &self.send, &mut self.recv, incoming, cursor, meet)?
            }
            Path::Tree(cursor) => {
                resume_tree(&self.plan, transport, &self.op, &self.send, &mut self.recv, &mut self.incoming, cursor, meet)?
            }
        };
        if finished {
            self.path = Path::Finished;
        }
        Ok(finished)
    }

    fn position(&self) -> (usize, usize, usize, bool) {
        match &self.path {
            Path::Finished => (usize::MAX, 0, 0, true),
            Path::Exchange { cursor, .. } => (cursor.next_sender, 0, 0, cursor.posted),
            Path::Tree(cursor) => (cursor.step, cursor.up_steps, cursor.down_steps, cursor.up_done),
        }
    }

    fn stall_clock(&mut self) -> &mut StallClock {
        &mut self.stall
    }

    fn describe(&self) -> String {
        match &self.path {
            Path::Finished => "allreduce".to_string(),
            Path::Exchange { epoch, cursor } => format!("allreduce {epoch} (exchange), waiting for rank {}", cursor.next_sender),
            Path::Tree(cursor) => format!("allreduce tree, segment sequence {}", cursor.base + cursor.step as u64),
        }
    }
}

impl<T: Windows + ?Sized, R: Reduction> Schedule<T> for AllreduceRun<'_, R> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        advance_by_polling(self, &*transport)
    }
    fn awaited(&self) -> Option<AwaitedWord> {
        self.stall.awaited()
    }

    /// A short exchange call advances beside the short ones before it, up
    /// to the short slot sets' depth (`exchange`); a long exchange and a
    /// tree call wait for every earlier call, as their slots and rings
    /// need.
    fn overlap(&self) -> Option<Overlap> {
        match &self.path {
            Path::Exchange { epoch, .. } => {
                self.plan.exchange.depth(self.send.len()).map(|depth| Overlap { number: *epoch, depth })
            }
            Path::Finished | Path::Tree(_) => None,
        }
    }

    fn reuse_storage_of(&mut self, finished: &mut Self) {
        if self.incoming.capacity() < finished.incoming.capacity() {
            self.incoming = std::mem::take(&mut finished.incoming);
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn resume_tree<T: Windows + ?Sized, R: Reduction + ?Sized>(
    plan: &AllreducePlan,
    transport: &T,
    op: &R,
    send: &[u8],
    recv: &mut [u8],
    incoming: &mut Vec<u8>,
    cursor: &mut TreeCursor,
    meet: Meet<'_>,
) -> Result<bool, TransportError> {
    let count = cursor.segments.count();
    let mut stack = [0; TRANSIENT_SCRATCH_BYTES];
    let incoming = transient_scratch(&mut stack, incoming, cursor.segments.full_len());
    while cursor.step < count + DOWN_LAG {
        if cursor.step < count && !cursor.up_done {
            let turn = Turn::new(cursor.step, count, cursor.base, Reuse::ImpliedByDataFlow);
            let range = cursor.segments.range(cursor.step);
            let partial = &mut recv[range.clone()];
            if cursor.up_steps == 0 {
                // Nothing folded yet: (re)start from this rank's own part.
                partial.copy_from_slice(&send[range.clone()]);
            }
            let incoming = &mut incoming[..range.len()];
            if !plan.upward.resume_segment(transport, op, turn, partial, incoming, &mut cursor.up_steps, meet)? {
                return Ok(false);
            }
            cursor.up_done = true;
        }
        if let Some(index) = cursor.step.checked_sub(DOWN_LAG) {
            let turn = Turn::new(index, count, cursor.base, Reuse::ImpliedByDataFlow);
            let result = &mut recv[cursor.segments.range(index)];
            if !plan.resume_result_down(transport, turn, result, &mut cursor.down_steps, meet)? {
                return Ok(false);
            }
        }
        cursor.step += 1;
        cursor.up_done = false;
        cursor.up_steps = 0;
        cursor.down_steps = 0;
    }
    Ok(true)
}
