//! One call of the ring reduction (`ring`) as a state machine that both
//! forms drive: the blocking call resumes it once under `Meet::Block`
//! (every wait waits), the non-blocking and persistent calls as a run
//! (`RingRun`, a `Schedule`) by polls from the progress loop.
//!
//! # States (the protocol of `ring`)
//!
//! The call is 2(P-1) steps (reduce-scatter, then allgather); step s moves
//! its blocks segment by segment, and segment i of a step is: put segment i
//! of the outgoing block to the right neighbour (waits for the credit of
//! the slot's previous occupant), then take segment i of the arriving block
//! from the left neighbour (waits for its flag), acknowledge it and fold or
//! copy it. `Position { step, index, sent }` names the next of those two
//! waits; each is taken whole or not at all, so a poll that finds a credit
//! or a flag missing leaves the position as it was. A poll moves at most
//! `SEGMENTS_PER_POLL` segments, then returns, so that one MPI_Test does
//! not hold the caller for a whole message.
//!
//! # Numbers and buffers
//!
//! Segments are numbered over the communicator's life on each stream. A
//! call's segments are counted when it starts (`RingReduction::start`,
//! from its length alone, the same on every rank), so the next call's
//! numbers are known before this one moved anything, and the runs of the
//! ring lane (allreduce's and reduce's alike: one ring serves both) take
//! them in post order. Only the oldest run of the lane advances
//! (`schedule_queue`), and the blocking calls drain the queue first, so
//! the streams see one call at a time, in the order of `ring`'s argument.
//!
//! The result buffer (or a reduce's accumulator on a rank that does not
//! gather) is not seeded with this rank's contribution up front: step 0
//! sends its own block straight from the input, and every block folded in
//! the reduce-scatter is first copied from the input, segment by segment,
//! just before its fold. Every block but the one sent at step 0 is folded
//! exactly once (blocks r-1 .. r-P+1 for rank r), and that one is
//! overwritten by the allgather, so the result is what a copy up front
//! would give, without a whole-message copy at post.

use std::ops::Range;

use btl_ibmc::{TransportError, Windows};

use super::buffers::ReductionBuffers;
use super::parallel::{slice_of, Shares};
use crate::patterns::meet::{advance_by_polling, Meet, Resumable, StallClock, StallLimits};
use crate::patterns::scratch;
use crate::patterns::segments::Segments;
use crate::patterns::slots::{KnownCredit, Reuse, Stream, Turn};
use crate::reduction::Reduction;
use crate::schedule::{Schedule, Step};

/// Segments a poll moves before it returns: at the default 64 KiB slots,
/// 256 KiB of puts and folds, tens of microseconds, against well under a
/// microsecond to return to the progress loop and come back.
pub const SEGMENTS_PER_POLL: usize = 4;

/// Where a call stands: the next segment's send (`sent` false) or receive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    pub step: usize,
    pub index: usize,
    pub sent: bool,
}

/// What becomes of a segment from the left neighbour.
#[derive(Clone, Copy, Debug)]
enum Arriving {
    /// Reduce-scatter: folded into this rank's partial of its block.
    Folded,
    /// Allgather: a reduced block's bytes, copied into the result.
    Copied,
}

/// One rank's part of one ring call, its segment numbers taken.
#[derive(Debug)]
pub(super) struct RingCall {
    pub rank: usize,
    pub size: usize,
    pub segment_bytes: usize,
    pub to_right: Stream,
    pub from_left: Stream,
    /// The highest credit seen on `to_right` in this call.
    pub known_credit: KnownCredit,
    /// The last segment sent to the right and received from the left
    /// (numbers over the communicator's life).
    pub sent: u64,
    pub received: u64,
    /// This call's number among the ring's calls, for stall messages.
    pub call: u64,
    pub position: Position,
}

impl RingCall {
    fn steps(&self) -> usize {
        2 * (self.size - 1)
    }

    /// Step `step`'s outgoing and arriving blocks of a `len`-byte vector.
    fn blocks(&self, step: usize, len: usize, element: usize) -> (Range<usize>, Range<usize>, Arriving) {
        let (rank, size) = (self.rank, self.size);
        let block = |index: usize| slice_of(index % size, size, len, element, Shares::EVERY_RANK_EQUAL);
        if step < size - 1 {
            // Reduce-scatter: what rank r sends in step s it folded in
            // step s-1 (its own input at s = 0), so each block gathers one
            // more rank's contribution per hop and is whole at its P-1-th.
            (block(rank + size - step), block(rank + 2 * size - step - 1), Arriving::Folded)
        } else {
            // Allgather: rank r starts with block r+1 whole and forwards
            // each block the step after it arrives, so every block reaches
            // all.
            let step = step - (size - 1);
            (block(rank + 1 + size - step), block(rank + size - step), Arriving::Copied)
        }
    }

    /// Segments a `len`-byte call sends and receives, counted from its
    /// length alone, as every rank counts them.
    pub(super) fn segments(&self, len: usize, element: usize) -> Result<(u64, u64), TransportError> {
        let (mut out, mut arriving) = (0, 0);
        for step in 0..self.steps() {
            let (outgoing, incoming, _) = self.blocks(step, len, element);
            out += Segments::new(outgoing.len(), element, self.segment_bytes)?.count() as u64;
            arriving += Segments::new(incoming.len(), element, self.segment_bytes)?.count() as u64;
        }
        Ok((out, arriving))
    }

    /// Takes every step `meet` lets it; returns whether the call is over
    /// (always under `Meet::Block`). `input` is this rank's contribution
    /// where it is not already in `result` (in place), `incoming` a
    /// scratch buffer for folded segments.
    pub(super) fn resume<T: Windows + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        op: &R,
        input: Option<&[u8]>,
        result: &mut [u8],
        incoming: &mut Vec<u8>,
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        if self.size == 1 {
            if let Some(input) = input {
                result.copy_from_slice(input);
            }
            return Ok(true);
        }
        let (len, element) = (result.len(), op.element_size());
        let mut budget = match meet {
            Meet::Poll(_) => SEGMENTS_PER_POLL,
            Meet::Block(_) => usize::MAX,
        };
        while self.position.step < self.steps() {
            let step = self.position.step;
            let (outgoing, arriving, how) = self.blocks(step, len, element);
            let out_segments = Segments::new(outgoing.len(), element, self.segment_bytes)?;
            let in_segments = Segments::new(arriving.len(), element, self.segment_bytes)?;
            while self.position.index < out_segments.count().max(in_segments.count()) {
                if budget == 0 {
                    return Ok(false);
                }
                let index = self.position.index;
                if !self.position.sent && index < out_segments.count() {
                    let range = within(&outgoing, out_segments.range(index));
                    // Step 0 sends this rank's own block, which the result
                    // holds only in place (see the header).
                    let source: &[u8] = match input {
                        Some(input) if step == 0 => input,
                        _ => &*result,
                    };
                    // Every segment is the next one of a one-segment turn:
                    // `Turn` gives its number and the credit that frees its
                    // slot (its occupant's, two back, whichever call).
                    let turn = Turn::new(0, 1, self.sent, Reuse::AcknowledgedEachCall);
                    if !self.to_right.try_send(transport, turn.seq, &source[range], turn.credit_needed(), &self.known_credit, meet)? {
                        return Ok(false);
                    }
                    self.sent = turn.seq;
                }
                self.position.sent = true;
                if index < in_segments.count() {
                    let range = within(&arriving, in_segments.range(index));
                    if !self.take_arriving(transport, op, input, &mut result[range.clone()], range, incoming, how, meet)? {
                        return Ok(false);
                    }
                }
                self.position = Position { step, index: index + 1, sent: false };
                budget -= 1;
            }
            self.position = Position { step: step + 1, index: 0, sent: false };
        }
        Ok(true)
    }

    /// Takes the next segment from the left into `target` (`range` of the
    /// vector), folded or copied; `false` while it has not arrived.
    #[allow(clippy::too_many_arguments)] // one segment's whole context
    fn take_arriving<T: Windows + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        op: &R,
        input: Option<&[u8]>,
        target: &mut [u8],
        range: Range<usize>,
        incoming: &mut Vec<u8>,
        how: Arriving,
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        let seq = self.received + 1;
        match how {
            Arriving::Folded => {
                let incoming = scratch(incoming, range.len());
                if !self.from_left.try_receive(transport, seq, incoming, meet)? {
                    return Ok(false);
                }
                self.from_left.acknowledge(transport, seq)?;
                if let Some(input) = input {
                    target.copy_from_slice(&input[range]);
                }
                op.combine(incoming, target);
            }
            Arriving::Copied => {
                if !self.from_left.try_receive(transport, seq, target, meet)? {
                    return Ok(false);
                }
                self.from_left.acknowledge(transport, seq)?;
            }
        }
        self.received = seq;
        Ok(true)
    }
}

/// `part` of a block, as a range of the whole vector.
fn within(block: &Range<usize>, part: Range<usize>) -> Range<usize> {
    block.start + part.start..block.start + part.end
}

/// This rank's contribution where the result does not hold it already,
/// and where the reduction runs: the result buffer where this rank
/// gathers, else `accumulator` grown to the message's length.
pub(super) fn operands<'b>(
    buffers: &'b mut ReductionBuffers<'_>,
    gathers: bool,
    accumulator: &'b mut Vec<u8>,
) -> (Option<&'b [u8]>, &'b mut [u8]) {
    match buffers {
        ReductionBuffers::Separate { send, recv } if gathers => (Some(*send), &mut **recv),
        ReductionBuffers::Separate { send, .. } => (Some(*send), scratch(accumulator, send.len())),
        ReductionBuffers::InPlace(buffer) => {
            if gathers {
                (None, &mut **buffer)
            } else {
                (Some(&**buffer), scratch(accumulator, buffer.len()))
            }
        }
    }
}

/// One rank's part of one ring call, resumable; made by
/// `RingReduction::start`. It owns its scratch buffers, so that a call
/// queued behind others needs nothing of the instance's; it reads and
/// writes the caller's buffers until it is finished.
pub struct RingRun<'a, R> {
    call: RingCall,
    op: R,
    buffers: ReductionBuffers<'a>,
    gathers: bool,
    /// A reduce's accumulator on a rank that does not gather.
    accumulator: Vec<u8>,
    incoming: Vec<u8>,
    stall: StallClock,
}

impl<'a, R> RingRun<'a, R> {
    pub(super) fn new(call: RingCall, op: R, buffers: ReductionBuffers<'a>, gathers: bool, limits: StallLimits) -> Self {
        RingRun { call, op, buffers, gathers, accumulator: Vec::new(), incoming: Vec::new(), stall: StallClock::new(limits) }
    }
}

impl<T: Windows + ?Sized, R: Reduction> Resumable<T> for RingRun<'_, R> {
    type Position = Position;

    fn resume(&mut self, transport: &T, meet: Meet<'_>) -> Result<bool, TransportError> {
        let (input, result) = operands(&mut self.buffers, self.gathers, &mut self.accumulator);
        self.call.resume(transport, &self.op, input, result, &mut self.incoming, meet)
    }

    fn position(&self) -> Position {
        self.call.position
    }

    fn stall_clock(&mut self) -> &mut StallClock {
        &mut self.stall
    }

    fn describe(&self) -> String {
        let RingCall { call, rank, position, sent, received, .. } = &self.call;
        format!("ring reduction {call} of rank {rank} at {position:?} (segments sent {sent}, received {received})")
    }
}

impl<T: Windows + ?Sized, R: Reduction> Schedule<T> for RingRun<'_, R> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        advance_by_polling(self, &*transport)
    }
}
