//! One call of the parallel reduction (`parallel`) as a state machine that
//! both forms drive: the blocking call resumes it once under `Meet::Block`
//! (every wait waits, the whole slice is folded in one go), the
//! non-blocking and persistent calls as a run (`ParallelRun`, a
//! `Schedule`) by polls from the progress loop.
//!
//! # States (call n, the protocol of `parallel`)
//!
//! * `Announce`: store this rank's buffers and n in its announcement line
//!   (never waits).
//! * `Announcements { next_peer }`: every peer's announcement n, in rank
//!   order; `next_peer` is the first one not seen yet. A rank that owns no
//!   slice skips this (it touches no peer's memory).
//! * `Fold { next }`: the slice from byte `next` on, folded and delivered
//!   chunk by chunk; a poll folds at most `CHUNKS_PER_POLL` chunks, then
//!   returns, so that one progress call is not held for a whole slice.
//!   Then done n goes to every peer (never waits).
//! * `Readers { next_reader }`: every peer's done line in this rank's
//!   window, in rank order, until `Finished`. A call that fails after
//!   `Announce` (a peer out of step or of another length, a failed read
//!   or write) says done and goes through `Readers` too before it returns
//!   its error: until then peers may still read its input and write its
//!   result.
//!
//! A run's call number is taken when it is started, in post order; it
//! touches its announcement line only from the `Announce` state, which a
//! rank reaches only after its previous parallel call (blocking or run)
//! finished: the blocking calls drain the queue first, and the runs of one
//! collective advance one at a time (`schedule_queue`). So the cross-call
//! arguments of `parallel` hold unchanged. The run reads and writes the
//! caller's buffers (its peers do too) until it is `Finished`.
//!
//! A short reduce on 4 ranks or more goes down the read tree instead
//! (`read_tree_run`'s state machine, in the same run and the same lane,
//! numbered among the same calls).

use std::ops::Range;

use btl_ibmc::{Endpoint, PeerReads, TransportError};

use super::buffers::ReductionBuffers;
use super::parallel::{ChunkBuffers, FoldPlan, ParallelRegion, PeerBuffers, FLAG_WORD, INPUT_ADDRESS_WORD, LENGTH_WORD, RESULT_ADDRESS_WORD};
use super::read_tree_run::{TreeRunCall, TreeScratch, TreeStage};
use crate::patterns::in_step::{check_in_step, check_peer_length, PeerStep};
use crate::patterns::meet::{advance_by_polling, Meet, Resumable, StallClock, StallLimits};
use crate::reduction::Reduction;
use crate::schedule::{AwaitedWord, Overlap, Schedule, Step};

/// Chunks a poll folds before it returns. One chunk (`CHUNK_BYTES`, 512
/// KiB of every folded peer's input) costs each owner a cross-memory read
/// per peer, a fold and a write per gathering peer: tens to hundreds of
/// microseconds, against well under a microsecond to return to the
/// progress loop and come back. So returning after each chunk costs the
/// run next to nothing and bounds how long one MPI_Test holds the caller
/// to a chunk's work, whatever the vector's length.
pub const CHUNKS_PER_POLL: usize = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    Announce,
    Announcements { next_peer: usize },
    Fold { next: usize },
    Readers { next_reader: usize },
    Finished,
}

/// Where call n stands, and what every state of it needs.
#[derive(Debug)]
pub(super) struct ParallelCall {
    pub rank: usize,
    pub size: usize,
    pub region: ParallelRegion,
    /// n: the parallel reductions of this instance so far, this one included.
    pub call: u64,
    pub len: usize,
    /// This rank's slice of the vector (empty: it reduces nothing).
    pub mine: Range<usize>,
    pub plan: FoldPlan,
    /// Whether this rank ends with the result.
    pub gathers: bool,
    pub input_address: u64,
    /// 0 where this rank does not gather.
    pub result_address: u64,
    stage: Stage,
    /// Why the call failed after it announced: its peers may still read
    /// and write its buffers, so it says done and waits for their done
    /// lines like a call that succeeded, then returns this.
    failure: Option<TransportError>,
}

impl ParallelCall {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        (rank, size): (usize, usize),
        region: ParallelRegion,
        call: u64,
        mine: Range<usize>,
        plan: FoldPlan,
        gathers: bool,
        buffers: &ReductionBuffers<'_>,
    ) -> Self {
        let result_address = match buffers {
            ReductionBuffers::Separate { recv, .. } if gathers => address(recv),
            ReductionBuffers::InPlace(buffer) if gathers => address(buffer),
            _ => 0,
        };
        let input_address = address(buffers.input());
        let len = buffers.len();
        ParallelCall { rank, size, region, call, len, mine, plan, gathers, input_address, result_address, stage: Stage::Announce, failure: None }
    }

    /// Takes every step `meet` lets it; returns whether the call is over
    /// (always under `Meet::Block`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn resume<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        op: &R,
        buffers: &mut ReductionBuffers<'_>,
        peers: &mut [PeerBuffers],
        chunks: &mut ChunkBuffers,
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        loop {
            match self.stage {
                Stage::Announce => {
                    self.announce(transport);
                    self.stage = if self.mine.is_empty() {
                        // A rank with nothing to reduce touches no peer's
                        // memory, so it needs no peer's addresses: it only
                        // waits until its own input has been read (the
                        // root checks that the ranks are in step).
                        self.say_done(transport)?;
                        Stage::Readers { next_reader: 0 }
                    } else {
                        Stage::Announcements { next_peer: 0 }
                    };
                }
                Stage::Announcements { next_peer } => {
                    let mut failed = None;
                    for peer in (next_peer..self.size).filter(|&peer| peer != self.rank) {
                        match self.peer_announcement(transport, peer, meet) {
                            Ok(Some(buffers)) => peers[peer] = buffers,
                            Ok(None) => {
                                self.stage = Stage::Announcements { next_peer: peer };
                                return Ok(false);
                            }
                            Err(why) => {
                                failed = Some(why);
                                break;
                            }
                        }
                    }
                    match failed {
                        Some(why) => self.fail(transport, why),
                        None => self.stage = Stage::Fold { next: self.mine.start },
                    }
                }
                Stage::Fold { next } => {
                    let chunk_len = chunks.chunk_len(op.element_size());
                    let budget = match meet {
                        Meet::Poll(_) => CHUNKS_PER_POLL.saturating_mul(chunk_len),
                        Meet::Block(_) => usize::MAX,
                    };
                    let end = next.saturating_add(budget).min(self.mine.end);
                    if let Err(why) = chunks.reduce_and_deliver(transport, op, peers, self.rank, &self.plan, &(next..end), self.gathers, buffers) {
                        self.fail(transport, why);
                        continue;
                    }
                    if end < self.mine.end {
                        self.stage = Stage::Fold { next: end };
                        return Ok(false);
                    }
                    self.say_done(transport)?;
                    self.stage = Stage::Readers { next_reader: 0 };
                }
                Stage::Readers { next_reader } => {
                    for reader in (next_reader..self.size).filter(|&reader| reader != self.rank) {
                        let line = self.region.done.line(reader);
                        let (call, owner) = (self.call, self.rank);
                        let describe = || format!("rank {reader} to finish reading rank {owner}'s memory in parallel reduction {call}");
                        if meet.local_at_least(transport, line, call, describe)?.is_none() {
                            self.stage = Stage::Readers { next_reader: reader };
                            return Ok(false);
                        }
                    }
                    self.stage = Stage::Finished;
                    if let Some(why) = self.failure.take() {
                        return Err(why);
                    }
                }
                Stage::Finished => return Ok(true),
            }
        }
    }

    fn announce<T: PeerReads + ?Sized>(&self, transport: &T) {
        let line = self.region.announcement;
        transport.set_local_flag(line + INPUT_ADDRESS_WORD, self.input_address);
        transport.set_local_flag(line + RESULT_ADDRESS_WORD, self.result_address);
        transport.set_local_flag(line + LENGTH_WORD, self.len as u64);
        // Release (every local flag store is): a peer that sees the call
        // number sees the words above, and the buffers as the program
        // wrote them before the call.
        transport.set_local_flag(line + FLAG_WORD, self.call);
    }

    /// `peer`'s announced buffers once its announcement n is there.
    fn peer_announcement<T: PeerReads + ?Sized>(&self, transport: &T, peer: usize, meet: Meet<'_>) -> Result<Option<PeerBuffers>, TransportError> {
        let line = self.region.announcement;
        let step = PeerStep { rank: self.rank, peer, word: line + FLAG_WORD, call: self.call, step: "parallel reduction announcement" };
        let (rank, call) = (self.rank, self.call);
        let describe = || format!("rank {peer}'s parallel reduction announcement {call}, for rank {rank}");
        let Some(seen) = meet.peer_at_least(transport, peer, step.word, call, describe)? else {
            return Ok(None);
        };
        check_in_step(&step, seen)?;
        check_peer_length(transport, self.rank, peer, line + LENGTH_WORD, self.len as u64)?;
        Ok(Some(PeerBuffers {
            input: transport.peer_flag(peer, line + INPUT_ADDRESS_WORD)?,
            result: transport.peer_flag(peer, line + RESULT_ADDRESS_WORD)?,
        }))
    }

    /// The call failed at `why` after announcing: it reads and writes no
    /// peer's memory any more, says so, and waits for its readers before
    /// it returns the error (`Readers`).
    fn fail<T: PeerReads + ?Sized>(&mut self, transport: &T, why: TransportError) {
        // A done line that cannot be written leaves that peer to its fault
        // timeout; the error to return is still `why`.
        let _ = self.say_done(transport);
        self.failure = Some(why);
        self.stage = Stage::Readers { next_reader: 0 };
    }

    /// Tells every peer this rank will read and write nothing more of its
    /// memory in this call.
    fn say_done<T: PeerReads + ?Sized>(&self, transport: &T) -> Result<(), TransportError> {
        for peer in (0..self.size).filter(|&peer| peer != self.rank) {
            self.region.done.say_done(transport, peer, self.rank, self.call)?;
        }
        Ok(())
    }
}

pub(super) fn address(bytes: &[u8]) -> u64 {
    bytes.as_ptr() as usize as u64
}

/// Which protocol a run follows: slices, or (a short reduce on 4 ranks or
/// more) the read tree, both numbered among the parallel reduction's calls.
#[derive(Debug)]
pub(super) enum RunCall {
    Slices(ParallelCall),
    Tree(TreeRunCall),
}

/// Where a run stands, to tell a poll that moved from one that did not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunPosition {
    Slices(Stage),
    Tree(TreeStage),
}

/// One rank's part of one parallel reduction call, resumable; made by
/// `ParallelReduction::start`. It owns its fold buffers, so that a call
/// queued behind others needs nothing of the instance's.
pub struct ParallelRun<'a, R> {
    call: RunCall,
    op: R,
    buffers: ReductionBuffers<'a>,
    peers: Vec<PeerBuffers>,
    chunks: ChunkBuffers,
    /// The read tree's partial (an inner node's; its address is published,
    /// so it is sized once, at `Publish`) and staging buffers.
    tree_partial: Vec<u8>,
    tree_staging: Vec<u8>,
    stall: StallClock,
}

impl<'a, R> ParallelRun<'a, R> {
    pub(super) fn new(call: ParallelCall, op: R, buffers: ReductionBuffers<'a>, chunk_bytes: usize, limits: StallLimits) -> Self {
        let peers = vec![PeerBuffers::default(); call.size];
        Self::with(RunCall::Slices(call), op, buffers, peers, chunk_bytes, limits)
    }

    pub(super) fn down_the_tree(call: TreeRunCall, op: R, buffers: ReductionBuffers<'a>, limits: StallLimits) -> Self {
        let chunk_bytes = call.chunk_bytes;
        Self::with(RunCall::Tree(call), op, buffers, Vec::new(), chunk_bytes, limits)
    }

    fn with(call: RunCall, op: R, buffers: ReductionBuffers<'a>, peers: Vec<PeerBuffers>, chunk_bytes: usize, limits: StallLimits) -> Self {
        let chunks = ChunkBuffers::new(chunk_bytes);
        let stall = StallClock::new(limits);
        ParallelRun { call, op, buffers, peers, chunks, tree_partial: Vec::new(), tree_staging: Vec::new(), stall }
    }
}

impl<T: PeerReads + ?Sized, R: Reduction> Resumable<T> for ParallelRun<'_, R> {
    type Position = RunPosition;

    fn resume(&mut self, transport: &T, meet: Meet<'_>) -> Result<bool, TransportError> {
        match &mut self.call {
            RunCall::Slices(call) => call.resume(transport, &self.op, &mut self.buffers, &mut self.peers, &mut self.chunks, meet),
            RunCall::Tree(call) => {
                let scratch = TreeScratch { partial: &mut self.tree_partial, staging: &mut self.tree_staging };
                call.resume(transport, &self.op, &mut self.buffers, scratch, meet)
            }
        }
    }

    fn position(&self) -> RunPosition {
        match &self.call {
            RunCall::Slices(call) => RunPosition::Slices(call.stage),
            RunCall::Tree(call) => RunPosition::Tree(call.stage),
        }
    }

    fn stall_clock(&mut self) -> &mut StallClock {
        &mut self.stall
    }

    fn describe(&self) -> String {
        match &self.call {
            RunCall::Slices(call) => format!("parallel reduction {} of rank {} at {:?}", call.call, call.rank, call.stage),
            RunCall::Tree(call) => format!("parallel reduction {} (read tree) of rank {} at {:?}", call.call, call.tree.rank(), call.stage),
        }
    }
}

impl<T: PeerReads + ?Sized, R: Reduction> Schedule<T> for ParallelRun<'_, R> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        advance_by_polling(self, &*transport)
    }
}

/// A collective's run: its window path's (`W`), or the parallel
/// reduction's, as the call's length chose. The parallel run is boxed: it
/// is nearly twice the window run's size, and inline it made every short
/// call's run that large, moved three times on its way into the queue;
/// its own calls are long enough for an allocation not to count.
pub enum OrParallel<'a, W, R> {
    Window(W),
    Parallel(Box<ParallelRun<'a, R>>),
}

impl<T, W, R> Schedule<T> for OrParallel<'_, W, R>
where
    T: PeerReads + Endpoint + ?Sized,
    W: Schedule<T, Error = TransportError>,
    R: Reduction,
{
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        match self {
            OrParallel::Window(run) => run.advance(transport),
            OrParallel::Parallel(run) => run.advance(transport),
        }
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        match self {
            OrParallel::Window(run) => run.awaited(),
            OrParallel::Parallel(_) => None,
        }
    }

    fn overlap(&self) -> Option<Overlap> {
        match self {
            OrParallel::Window(run) => run.overlap(),
            OrParallel::Parallel(_) => None,
        }
    }

    fn reuse_storage_of(&mut self, finished: &mut Self) {
        if let (OrParallel::Window(run), OrParallel::Window(earlier)) = (self, finished) {
            run.reuse_storage_of(earlier);
        }
    }
}
