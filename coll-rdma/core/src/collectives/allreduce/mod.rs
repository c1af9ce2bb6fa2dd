//! MPI_Allreduce over one-sided puts, for any communicator size, any tree
//! degree k >= 1 and any message length (Gupta 2002, chapter 6, with the
//! result broadcast down the same tree as in chapter 5).
//!
//! Two variants, chosen identically on every rank from the message length:
//!
//! * up to `exchange_max_bytes`, the exchange (see `exchange`): every rank
//!   puts its contribution to all others and folds all P locally;
//! * otherwise the degree-k tree rooted at rank 0 (see `patterns::tree`):
//!   partials flow up, each child writing its own slot ring in its parent's
//!   window, the parent folding them in rank order; the root's result flows
//!   back down the same tree by puts. Every rank ends with the bytes the root
//!   computed, so all ranks agree bit for bit even for floating point.
//!
//! * from the parallel threshold (`ParallelReduction::set_min_bytes`),
//!   where every rank reads every other's memory, the parallel reduction
//!   (see `large_reduction::parallel`): each rank reduces its own slice of every
//!   rank's input, then reads the others'.
//!
//! Each call of the exchange or the tree can also be a resumable run (`run`,
//! `Allreduce::start`, for the non-blocking calls); both forms share the
//! steps (`Meet` says whether a step waits or polls), but the blocking call
//! keeps its own loop: driving a run costs it 1.5-1.7x at 8 B.
//!
//! Messages are cut into segments of at most `segment_bytes` that stream
//! through two-slot rings (see `patterns::slots`), so window space is
//! bounded by the configuration whatever the message length. A rank works on the
//! upward phase of segment i and the downward phase of segment i-1 in
//! turn, so partials and results are in flight together.
//!
//! # When may a sender write a slot again?
//!
//! Flags hold sequence numbers that grow over the communicator's life, so
//! slots never need resetting and a stale flag is always below the one
//! awaited. Within a call, a slot holding segment i is rewritten with
//! segment i+2 only after the receiver's credit says it read segment i.
//! Across calls no message is needed:
//!
//! * Partial rings (child c writes into parent p). Result segment i
//!   exists only after the root folded segment i, which needs every
//!   partial of segment i read out of its slot: a rank sends its partial
//!   only after reading its children's, and passes a result segment down
//!   only after its own upward step for that segment. c finishes call e
//!   only after receiving every result segment of e, so when c writes its
//!   first partial of e+1, p has read all of c's partials of e.
//! * Result rings (p writes into c). p has result segment i of call e+1
//!   only after c's partial of segment i of e+1 reached the tree, which c
//!   sends only after finishing call e, i.e. after reading all its results
//!   of e.
//! * Exchange slots: the slot-set argument in `exchange`.
//!
//! With the downward phase one segment behind and two slots per ring, the
//! data flow alone also keeps a sender from lapping its receiver within a
//! call (a rank sends segment i+2 up only after receiving result i); the
//! credits keep the proof independent of that lag and depth.
//!
//! # Why it cannot deadlock
//!
//! Order a rank's steps by (segment, phase, height in the tree): the upward
//! step of segment i waits for children (lower) on the same segment and for
//! the parent's credit on segment i-2; the downward step of segment i
//! waits for the parent (higher, downward phase) on the same segment and
//! for children's credits on segment i-2, and follows the rank's own upward
//! step of segment i+1 (or i). Every wait is on an earlier step, so some
//! step can always proceed.

pub mod autotune;
mod config;
mod exchange;
mod run;

use std::sync::Arc;

use btl_ibmc::{PeerReads, SideProgress, TransportError, Waits, Windows};

pub use config::{AllreduceConfig, EXCHANGE_LIMIT_BYTES, RANGE_TOP_BYTES};
use exchange::{ExchangeCursor, ExchangeSlots};
pub use run::AllreduceRun;

/// An allreduce call's run: the window's (exchange or tree), or the
/// parallel reduction's.
pub type AllreduceStart<'a, R> = OrParallel<'a, AllreduceRun<'a, R>, R>;
use run::{Path, ResultBuffer, TreeCursor};

use crate::collectives::large_reduction::parallel::ParallelReduction;
use crate::collectives::large_reduction::parallel_run::OrParallel;
use crate::collectives::large_reduction::buffers::{Contribution, Gather, ReductionBuffers};
use crate::patterns::meet::{Meet, StallClock, StallLimits};
use crate::patterns::region::{RegionCursor, LINE};
use crate::patterns::segments::{check_message, Segments};
use crate::patterns::scratch;
use crate::patterns::slots::{Reuse, SlotShape, Stream, Turn, CREDIT_BYTES};
use crate::patterns::tree::{TreeLinks, TwoLevelTree};
use crate::patterns::upward::{Upward, UpwardRegion};
use crate::reduction::Reduction;
use crate::schedule::{built, RunSlot};

/// Segments by which the downward phase trails the upward one: one lets a
/// result travel down while the next partial travels up.
const DOWN_LAG: usize = 1;

/// The allreduce region, identical on every rank.
struct AllreduceRegion {
    upward: UpwardRegion,
    result_ring: usize,
    result_credits: usize,
    exchange: usize,
    parallel: usize,
    end: usize,
}

impl AllreduceRegion {
    fn new(start: usize, size: usize, config: &AllreduceConfig) -> Self {
        let shape = SlotShape::holding(config.tree.segment_bytes);
        let positions = config.tree.ring_positions(size);
        let mut cursor = RegionCursor::starting_at(start);
        let child_rings = cursor.take(positions * shape.ring_bytes());
        let result_ring = cursor.take(shape.ring_bytes());
        let parent_credit = cursor.take(CREDIT_BYTES);
        let result_credits = cursor.take(positions * CREDIT_BYTES);
        let exchange = cursor.take(ExchangeSlots::region_len(size, config.exchange_max_bytes));
        let parallel = cursor.take(ParallelReduction::region_len(size));
        AllreduceRegion {
            upward: UpwardRegion { child_rings, parent_credit, shape },
            result_ring,
            result_credits,
            exchange,
            parallel,
            end: cursor.end(),
        }
    }

    fn result_credit(&self, position: usize) -> usize {
        self.result_credits + position * CREDIT_BYTES
    }
}

/// What every run of one communicator's allreduce uses and none changes:
/// this rank's streams and slots.
#[derive(Debug)]
struct AllreducePlan {
    rank: usize,
    upward: Upward,
    result_from_parent: Option<Stream>,
    /// Descending rank order: the child with the largest subtree first.
    results_to_children: Vec<Stream>,
    exchange: ExchangeSlots,
}

impl AllreducePlan {
    /// Receives result segment `turn` from the parent (the root already
    /// holds it) and forwards it to the children. Resumable like
    /// `Upward::resume_segment`: step 0 is the parent's segment, step c the
    /// send to child c.
    fn resume_result_down<T: Windows + ?Sized>(
        &self,
        transport: &T,
        turn: Turn,
        result: &mut [u8],
        done: &mut usize,
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        if *done == 0 {
            if let Some(parent) = &self.result_from_parent {
                if !parent.try_receive(transport, turn.seq, result, meet)? {
                    return Ok(false);
                }
                if turn.must_acknowledge() {
                    parent.acknowledge(transport, turn.seq)?;
                }
            }
            debug_assert!(self.result_from_parent.is_some() != self.upward.is_root());
            *done = 1;
        }
        while let Some(child) = self.results_to_children.get(*done - 1) {
            if !child.try_send(transport, turn.seq, result, turn.credit_needed(), &Default::default(), meet)? {
                return Ok(false);
            }
            *done += 1;
        }
        Ok(true)
    }
}

/// One rank's allreduce schedule and state for one communicator.
#[derive(Debug)]
pub struct Allreduce {
    rank: usize,
    size: usize,
    config: AllreduceConfig,
    /// The configuration the region was laid out for: the degree may change
    /// later (`set_degree`), the region never does.
    layout_config: AllreduceConfig,
    region_offset: usize,
    /// Shared with the outstanding runs, which may outlive a later change
    /// of tree (`set_degree` requires them finished anyway).
    plan: Arc<AllreducePlan>,
    /// The two-level tree serves every message (no exchange).
    two_level: bool,
    parallel: ParallelReduction,
    epoch: u64,
    last_seq: u64,
    incoming: Vec<u8>,
}

impl Allreduce {
    /// Bytes of window the allreduce needs on every rank.
    pub fn region_len(size: usize, config: &AllreduceConfig) -> usize {
        AllreduceRegion::new(0, size, config).end
    }

    /// The schedule of `rank` among `size` ranks; its region starts at
    /// `region_offset` (64-byte aligned) of every rank's window.
    pub fn new(rank: usize, size: usize, region_offset: usize, config: AllreduceConfig) -> Self {
        if let Err(why) = config.validate() {
            panic!("invalid allreduce configuration: {why}");
        }
        assert_eq!(region_offset % LINE, 0, "the allreduce region must start on a cache line");
        let region = AllreduceRegion::new(region_offset, size, &config);
        let links = TreeLinks::new(rank, size, config.tree.degree);
        let exchange = ExchangeSlots::new(region.exchange, size, config.exchange_max_bytes);
        Allreduce {
            rank,
            size,
            config,
            layout_config: config,
            region_offset,
            plan: Arc::new(Self::plan(rank, &links, &region, exchange)),
            two_level: false,
            parallel: ParallelReduction::new(rank, size, region.parallel),
            epoch: 0,
            last_seq: 0,
            incoming: Vec::new(),
        }
    }

    fn plan(rank: usize, links: &TreeLinks, region: &AllreduceRegion, exchange: ExchangeSlots) -> AllreducePlan {
        let shape = region.upward.shape;
        let result_from_parent = links.parent.map(|parent| Stream {
            what: "allreduce result",
            sender: parent.peer,
            receiver: rank,
            ring: region.result_ring,
            credit: region.result_credit(parent.position),
            shape,
        });
        let results_to_children = links
            .children
            .iter()
            .rev()
            .map(|child| Stream {
                what: "allreduce result",
                sender: rank,
                receiver: child.peer,
                ring: region.result_ring,
                credit: region.result_credit(child.position),
                shape,
            })
            .collect();
        let upward = Upward::new("allreduce partial", rank, links, region.upward);
        AllreducePlan { rank, upward, result_from_parent, results_to_children, exchange }
    }

    /// Switches to the two-level tree across nodes (`two_level_links`: the
    /// links and the slot rings they need) before the first call, or says
    /// why not: the window holds fewer rings (`TreeStreamConfig::
    /// room_for_two_levels` adds some; very uneven nodes may need more).
    /// Every message then goes up and down that tree: the exchange, where
    /// every rank writes to every other, would cross nodes from every rank.
    /// Every rank must switch, and only where nodes hold consecutive ranks
    /// if non-commutative operations are to keep the rank order.
    pub fn use_two_level_tree(&mut self, tree: &TwoLevelTree) -> Result<(), String> {
        let (links, needed) = (&tree.links, tree.rings);
        assert_eq!((self.epoch, self.last_seq), (0, 0), "the tree changes only before the first call");
        let reserved = self.reserved_rings();
        if needed > reserved {
            return Err(format!("the two-level tree needs {needed} slot ring(s) a rank, the window holds {reserved}"));
        }
        let region = AllreduceRegion::new(self.region_offset, self.size, &self.layout_config);
        assert!(links.children.iter().chain(links.parent.iter()).all(|link| link.position < needed), "a link beyond the rings it needs");
        self.plan = Arc::new(Self::plan(self.rank, links, &region, self.plan.exchange));
        self.two_level = true;
        Ok(())
    }

    /// Incoming slot rings the region holds per rank: a flat tree of any
    /// degree whose `TreeLinks::positions` fit may serve.
    pub fn reserved_rings(&self) -> usize {
        self.layout_config.tree.ring_positions(self.size)
    }

    /// Switches the flat tree to `degree` between calls, or says why not
    /// (the two-level tree serves, or the region holds too few rings).
    ///
    /// The caller must make sure that no write of an earlier call is still
    /// on its way to any rank's window: every rank quiesces its writes and
    /// then all pass a barrier before any switches. Then every slot, flag
    /// and credit holds a sequence number of an earlier call, below every
    /// one the new tree waits for (sequence numbers keep growing across the
    /// switch, identically on every rank), so the new tree's first call
    /// finds the window as after any call of its own. Every rank must switch
    /// to the same degree before the same call.
    pub fn set_degree(&mut self, degree: usize) -> Result<(), String> {
        if self.two_level {
            return Err("the two-level tree serves this communicator".to_string());
        }
        if degree == 0 {
            return Err("the allreduce degree must be at least 1".to_string());
        }
        let needed = TreeLinks::positions(self.size, degree);
        let reserved = self.reserved_rings();
        if needed > reserved {
            return Err(format!("degree {degree} needs {needed} slot ring(s) a rank, the window holds {reserved}"));
        }
        let region = AllreduceRegion::new(self.region_offset, self.size, &self.layout_config);
        let links = TreeLinks::new(self.rank, self.size, degree);
        self.plan = Arc::new(Self::plan(self.rank, &links, &region, self.plan.exchange));
        self.config.tree.degree = degree;
        Ok(())
    }

    /// Whether the two-level tree serves this communicator.
    pub fn is_two_level(&self) -> bool {
        self.two_level
    }

    pub fn config(&self) -> &AllreduceConfig {
        &self.config
    }

    /// The parallel path and its threshold.
    pub fn parallel(&self) -> &ParallelReduction {
        &self.parallel
    }

    pub fn parallel_mut(&mut self) -> &mut ParallelReduction {
        &mut self.parallel
    }

    /// MPI_Allreduce with MPI_IN_PLACE: `buffer` holds this rank's
    /// contribution and receives the result. The parallel reduction works
    /// in the buffer itself; the other variants on a copy of the
    /// contribution.
    pub fn allreduce_in_place<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        side_progress: &dyn SideProgress,
        op: &R,
        buffer: &mut [u8],
    ) -> Result<(), TransportError> {
        check_message(op, buffer, None)?;
        if self.parallel.applies(transport, buffer.len()) {
            let waits = self.config.tree.policy.serving(side_progress);
            return self.parallel.reduce(transport, waits, op, Gather::All, ReductionBuffers::InPlace(buffer));
        }
        let contribution = buffer.to_vec();
        self.allreduce(transport, side_progress, op, &contribution, buffer)
    }

    /// Whether a `len`-byte call (not empty, more than one rank) goes down
    /// the tree: neither the parallel reduction nor the exchange takes it.
    /// The same answer on every rank.
    pub fn tree_serves<T: PeerReads + ?Sized>(&self, transport: &T, len: usize) -> bool {
        !self.parallel.applies(transport, len) && !self.uses_exchange(len)
    }

    fn uses_exchange(&self, len: usize) -> bool {
        len <= self.config.exchange_max_bytes && !self.two_level
    }

    /// Allreduce calls that used the window so far.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Reduces `send` of every rank in rank order and leaves the result in
    /// `recv` on every rank. `send` and `recv` must not alias and have the
    /// same length, a multiple of the element size. Its waits serve
    /// `side_progress` whenever they yield. Not a run of `start`: the
    /// blocking call keeps its own loop, which costs less per call.
    pub fn allreduce<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        side_progress: &dyn SideProgress,
        op: &R,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<(), TransportError> {
        check_message(op, send, Some(recv.len()))?;
        let policy = self.config.tree.policy;
        let waits = policy.serving(side_progress);
        if self.parallel.applies(transport, send.len()) {
            return self.parallel.reduce(transport, waits, op, Gather::All, ReductionBuffers::Separate { send, recv });
        }
        if send.is_empty() {
            return Ok(());
        }
        if self.size == 1 {
            recv.copy_from_slice(send);
            return Ok(());
        }
        if self.uses_exchange(send.len()) {
            self.epoch += 1;
            let incoming = scratch(&mut self.incoming, send.len());
            let mut cursor = ExchangeCursor::default();
            let plan = &*self.plan;
            plan.exchange.resume(transport, op, self.rank, self.epoch, send, recv, incoming, &mut cursor, Meet::Block(waits))?;
            return Ok(());
        }
        let segments = Segments::new(send.len(), op.element_size(), self.config.tree.segment_bytes)?;
        self.epoch += 1;
        self.tree(transport, waits, op, &segments, send, recv)
    }

    /// The blocking tree: the same steps as a run's (`run::resume_tree`),
    /// in one pass, without the run's bookkeeping (measured:
    /// docs/nonblocking.md).
    fn tree<T: Windows + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        waits: Waits<'_>,
        op: &R,
        segments: &Segments,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<(), TransportError> {
        let base = self.last_seq;
        let count = segments.count();
        scratch(&mut self.incoming, segments.full_len());
        let plan = &*self.plan;
        for step in 0..count + DOWN_LAG {
            if step < count {
                let turn = Turn::new(step, count, base, Reuse::ImpliedByDataFlow);
                let range = segments.range(step);
                let partial = &mut recv[range.clone()];
                partial.copy_from_slice(&send[range.clone()]);
                let incoming = &mut self.incoming[..range.len()];
                plan.upward.resume_segment(transport, op, turn, partial, incoming, &mut 0, Meet::Block(waits))?;
            }
            if let Some(index) = step.checked_sub(DOWN_LAG) {
                let turn = Turn::new(index, count, base, Reuse::ImpliedByDataFlow);
                plan.resume_result_down(transport, turn, &mut recv[segments.range(index)], &mut 0, Meet::Block(waits))?;
            }
        }
        self.last_seq = base + count as u64;
        Ok(())
    }

    /// Starts one allreduce call as a resumable run (see `run`): what
    /// `allreduce` does, advanced by `Schedule::advance`. Takes the call's
    /// epoch and sequence numbers now, so runs must be started in the
    /// communicator's post order and advanced in that order, one at a
    /// time but for exchange runs within the exchange's depth of each
    /// other (`schedule_queue`, `Schedule::overlap`). A length the parallel reduction serves starts
    /// its run, which reads and writes the buffers themselves.
    pub fn start<'a, T: PeerReads + ?Sized, R: Reduction>(
        &mut self,
        transport: &T,
        op: R,
        send: &'a [u8],
        recv: &'a mut [u8],
    ) -> Result<AllreduceStart<'a, R>, TransportError> {
        built(|slot| self.start_into(transport, op, Some(send), recv, slot))
    }

    /// `start` for a rank that contributes `send` and drops the result: a
    /// reduce's rank other than the root where the reduce goes through
    /// this allreduce (`select::reduce::ReducePath::ThroughAllreduce`).
    /// The run reduces into a buffer of its own, numbered and ordered as
    /// any other allreduce run, so the root's run of the same call (a
    /// plain `start`) meets it. Not for lengths the parallel reduction
    /// takes: its peers write into the result buffer through its address,
    /// which a reduce's rank need not have (none where that path exists:
    /// only a transport that connects just the nodes' leaders sends a
    /// reduce through the allreduce, and none of those reads peers'
    /// memory); such a length is refused.
    pub fn start_result_dropped<'a, T: PeerReads + ?Sized, R: Reduction>(
        &mut self,
        transport: &T,
        op: R,
        send: &'a [u8],
    ) -> Result<AllreduceRun<'a, R>, TransportError> {
        check_message(&op, send, None)?;
        if self.parallel.applies(transport, send.len()) {
            return Err(TransportError::Failed(format!(
                "an allreduce of {} bytes whose result this rank drops: the parallel reduction needs a result buffer",
                send.len()
            )));
        }
        self.start_window(op, Contribution::Borrowed(send), ResultBuffer::Dropped(vec![0; send.len()]))
    }

    /// `start` for MPI_IN_PLACE: `buffer` holds this rank's contribution
    /// (copied now for the window's paths; the parallel reduction works in
    /// the buffer itself) and receives the result.
    pub fn start_in_place<'a, T: PeerReads + ?Sized, R: Reduction>(
        &mut self,
        transport: &T,
        op: R,
        buffer: &'a mut [u8],
    ) -> Result<AllreduceStart<'a, R>, TransportError> {
        built(|slot| self.start_into(transport, op, None, buffer, slot))
    }

    /// `start` and `start_in_place` (`contribution` `None`: in place in
    /// `recv`), building the run in `slot` (`RunSlot`); the run, there.
    #[inline(always)]
    pub fn start_into<'a, 's, T: PeerReads + ?Sized, R: Reduction>(
        &mut self,
        transport: &T,
        op: R,
        contribution: Option<&'a [u8]>,
        recv: &'a mut [u8],
        slot: impl RunSlot<'s, AllreduceStart<'a, R>>,
    ) -> Result<&'s mut AllreduceStart<'a, R>, TransportError>
    where
        'a: 's,
    {
        let len = contribution.map_or(recv.len(), <[u8]>::len);
        check_message(&op, contribution.unwrap_or(recv), contribution.map(|_| recv.len()))?;
        if self.parallel.applies(transport, len) {
            let buffers = match contribution {
                Some(send) => ReductionBuffers::Separate { send, recv },
                None => ReductionBuffers::InPlace(recv),
            };
            return Ok(slot.fill(self.start_parallel(op, buffers)?));
        }
        let send = match contribution {
            Some(send) => Contribution::Borrowed(send),
            None => Contribution::Copied(recv.to_vec()),
        };
        Ok(slot.fill(OrParallel::Window(self.start_window(op, send, ResultBuffer::Caller(recv))?)))
    }

    fn start_parallel<'a, R: Reduction>(&mut self, op: R, buffers: ReductionBuffers<'a>) -> Result<AllreduceStart<'a, R>, TransportError> {
        self.parallel.start(op, Gather::All, buffers, StallLimits::of(&self.config.tree.policy)).map(|run| OrParallel::Parallel(Box::new(run)))
    }

    /// Makes `finished`, an earlier window run of this allreduce that is
    /// over (a persistent request's last: the same buffers and op), the
    /// run `start` would make now, in place: the contribution copied again
    /// where the call is in place, the next call's numbers taken, nothing
    /// built or moved (making the run and moving it into the request cost
    /// a persistent start about 560 instructions, a third of it). False,
    /// with `finished` left as it was, where `start` would make another
    /// run: a parallel reduction, a run of an earlier plan (the degree
    /// moved), or one not over; the caller then `start`s.
    pub fn restart<T: PeerReads + ?Sized, R: Reduction>(&mut self, transport: &T, finished: &mut AllreduceStart<'_, R>) -> Result<bool, TransportError> {
        let OrParallel::Window(run) = finished else { return Ok(false) };
        if !matches!(run.path, Path::Finished) || !Arc::ptr_eq(&run.plan, &self.plan) || self.parallel.applies(transport, run.send.len()) {
            return Ok(false);
        }
        if let (Contribution::Copied(contribution), ResultBuffer::Caller(buffer)) = (&mut run.send, &run.recv) {
            contribution.copy_from_slice(buffer);
        }
        run.path = self.next_path(&run.op, &run.send, &mut run.recv)?;
        run.stall = StallClock::new(StallLimits::of(&self.config.tree.policy));
        Ok(true)
    }

    /// The resumable run of a call the window serves (exchange or tree),
    /// its numbers taken.
    #[inline(always)]
    fn start_window<'a, R: Reduction>(
        &mut self,
        op: R,
        send: Contribution<'a>,
        mut recv: ResultBuffer<'a>,
    ) -> Result<AllreduceRun<'a, R>, TransportError> {
        let path = self.next_path(&op, &send, &mut recv)?;
        let plan = Arc::clone(&self.plan);
        let stall = StallClock::new(StallLimits::of(&self.config.tree.policy));
        Ok(AllreduceRun { plan, op, send, recv, incoming: Vec::new(), path, stall })
    }

    /// Where the next call starts (taking its epoch and sequence numbers),
    /// or `Finished` for a call with nothing to exchange.
    fn next_path<R: Reduction + ?Sized>(&mut self, op: &R, send: &[u8], recv: &mut [u8]) -> Result<Path, TransportError> {
        Ok(if send.is_empty() {
            Path::Finished
        } else if self.size == 1 {
            recv.copy_from_slice(send);
            Path::Finished
        } else if self.uses_exchange(send.len()) {
            self.epoch += 1;
            Path::Exchange { epoch: self.epoch, cursor: ExchangeCursor::default() }
        } else {
            let segments = Segments::new(send.len(), op.element_size(), self.config.tree.segment_bytes)?;
            self.epoch += 1;
            let base = self.last_seq;
            self.last_seq = base + segments.count() as u64;
            Path::Tree(TreeCursor::new(segments, base))
        })
    }
}
