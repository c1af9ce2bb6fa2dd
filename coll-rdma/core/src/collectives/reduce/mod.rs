//! MPI_Reduce over one-sided puts: a degree-k tree (the allreduce's kind,
//! with a degree of its own) rooted at
//! rank 0, folding in canonical rank order, then, when the root is another
//! rank, rank 0 relays the result to it segment by segment.
//!
//! From the parallel threshold (`ParallelReduction::set_min_bytes`), where
//! every rank reads every other's memory, the parallel reduction serves the
//! call instead (see `large_reduction::parallel`): each rank reduces its own slice
//! of every rank's input, and the root reads the slices.
//!
//! Each tree call is a resumable run (`run`, `Reduce::start`); the
//! blocking call drives that run with blocking waits.
//!
//! The tree stays rooted at rank 0 even for commutative operations: rooting
//! it at the caller's root would give each slot a different writer from one
//! call to the next, and the credits below rely on every slot ring having a
//! single writer. The relay costs one extra hop per segment, pipelined.
//!
//! # When may a sender write a slot again?
//!
//! Within a call, as in the allreduce: a slot is rewritten with segment
//! i+2 only after the receiver's credit for segment i. Across calls:
//!
//! * Partial rings (child c writes into parent p). Unlike the allreduce,
//!   c returns as soon as its partial is put, and nothing in c's next call
//!   depends on p, so a leaf could run several reduces ahead. These
//!   streams therefore use acknowledged reuse (see `patterns::slots`): p
//!   returns a credit for every segment right after reading it, and before
//!   writing segment s into its slot c waits for the credit of s - 2, the
//!   slot's previous occupant, whichever call it belonged to. p reads a
//!   stream in order, so that credit proves every earlier segment read,
//!   and c can run one slot ahead of p across calls.
//! * Relay rings (rank 0 writes into root R's window; each root has its own
//!   ring and credit word). Rank 0 can relay a segment of call e+1 only
//!   after folding that segment, which needs R's partial of e+1, which R
//!   sends only after finishing call e, i.e. after reading every segment
//!   relayed to it before. No acknowledgement is needed across calls.
//!
//! Deadlock: rank 0 relays segment i right after folding it, and the root
//! receives it right after its own upward step for segment i; the relay's
//! credit waits only for segment i-2, which the root has already received.
//! A partial's credit waits for the parent to read an earlier segment of
//! the stream, which depends on nothing the child does later.

mod run;

use std::sync::Arc;

use btl_ibmc::{PeerReads, SideProgress, TransportError};

pub use run::ReduceRun;

/// A reduce call's run: the tree's, or the parallel reduction's.
pub type ReduceStart<'a, R> = OrParallel<'a, ReduceRun<'a, R>, R>;
use run::ReduceCursor;

use crate::collectives::large_reduction::parallel::ParallelReduction;
use crate::collectives::large_reduction::parallel_run::OrParallel;
use crate::collectives::large_reduction::buffers::{Contribution, Gather, ReductionBuffers};
use crate::patterns::meet::{Meet, StallClock, StallLimits};
use crate::patterns::region::{RegionCursor, LINE};
use crate::patterns::scratch;
use crate::patterns::segments::{check_message, Segments};
use crate::patterns::slots::{Reuse, SlotShape, Stream, Turn, CREDIT_BYTES};
use crate::patterns::tree::{TreeLinks, TwoLevelTree};
use crate::patterns::upward::{Upward, UpwardRegion};
use crate::patterns::TreeStreamConfig;
use crate::reduction::Reduction;
use crate::schedule::{built, RunSlot};

/// The reduce region, identical on every rank.
struct ReduceRegion {
    upward: UpwardRegion,
    relay_ring: usize,
    /// One word per possible root, used in rank 0's window only.
    relay_credits: usize,
    parallel: usize,
    end: usize,
}

impl ReduceRegion {
    fn new(start: usize, size: usize, config: &TreeStreamConfig) -> Self {
        let shape = SlotShape::holding(config.segment_bytes);
        let mut cursor = RegionCursor::starting_at(start);
        let child_rings = cursor.take(config.ring_positions(size) * shape.ring_bytes());
        let relay_ring = cursor.take(shape.ring_bytes());
        let parent_credit = cursor.take(CREDIT_BYTES);
        let relay_credits = cursor.take(size * CREDIT_BYTES);
        let parallel = cursor.take(ParallelReduction::region_len(size));
        ReduceRegion {
            upward: UpwardRegion { child_rings, parent_credit, shape },
            relay_ring,
            relay_credits,
            parallel,
            end: cursor.end(),
        }
    }

    fn relay(&self, root: usize) -> Stream {
        Stream {
            what: "reduce result relayed from rank 0",
            sender: 0,
            receiver: root,
            ring: self.relay_ring,
            credit: self.relay_credits + root * CREDIT_BYTES,
            shape: self.upward.shape,
        }
    }
}

/// What every run of one communicator's reduce uses and none changes.
#[derive(Debug)]
struct ReducePlan {
    rank: usize,
    upward: Upward,
    /// Indexed by root; used on rank 0 only.
    relays_out: Vec<Stream>,
    relay_in: Stream,
}

/// One rank's reduce schedule and state for one communicator. Independent
/// of `Allreduce`: the two may interleave on one communicator.
#[derive(Debug)]
pub struct Reduce {
    rank: usize,
    size: usize,
    config: TreeStreamConfig,
    region_offset: usize,
    /// Shared with the outstanding runs.
    plan: Arc<ReducePlan>,
    parallel: ParallelReduction,
    last_seq: u64,
    epoch: u64,
    partial: Vec<u8>,
    incoming: Vec<u8>,
}

impl Reduce {
    /// Bytes of window the reduce needs on every rank.
    pub fn region_len(size: usize, config: &TreeStreamConfig) -> usize {
        ReduceRegion::new(0, size, config).end
    }

    /// The schedule of `rank` among `size` ranks; its region starts at
    /// `region_offset` (64-byte aligned) of every rank's window.
    pub fn new(rank: usize, size: usize, region_offset: usize, config: TreeStreamConfig) -> Self {
        if let Err(why) = config.validate() {
            panic!("invalid reduce configuration: {why}");
        }
        assert_eq!(region_offset % LINE, 0, "the reduce region must start on a cache line");
        let region = ReduceRegion::new(region_offset, size, &config);
        let links = TreeLinks::new(rank, size, config.degree);
        let relays_out = if rank == 0 { (0..size).map(|root| region.relay(root)).collect() } else { Vec::new() };
        Reduce {
            rank,
            size,
            config,
            region_offset,
            plan: Arc::new(ReducePlan {
                rank,
                upward: Upward::new("reduce partial", rank, &links, region.upward),
                relays_out,
                relay_in: region.relay(rank),
            }),
            parallel: ParallelReduction::new(rank, size, region.parallel),
            last_seq: 0,
            epoch: 0,
            partial: Vec::new(),
            incoming: Vec::new(),
        }
    }

    /// Switches to the two-level tree across nodes (`two_level_links`: the
    /// links and the slot rings they need) before the first call, or says
    /// why not: the window holds fewer rings (`TreeStreamConfig::
    /// room_for_two_levels` adds some; very uneven nodes may need more).
    /// The tree stays rooted at rank 0, a leader, which relays the result
    /// to the root as before. Every rank must switch, and only where nodes
    /// hold consecutive ranks if non-commutative operations are to keep
    /// the rank order.
    pub fn use_two_level_tree(&mut self, tree: &TwoLevelTree) -> Result<(), String> {
        let (links, needed) = (&tree.links, tree.rings);
        assert_eq!((self.epoch, self.last_seq), (0, 0), "the tree changes only before the first call");
        let reserved = self.config.ring_positions(self.size);
        if needed > reserved {
            return Err(format!("the two-level tree needs {needed} slot ring(s) a rank, the window holds {reserved}"));
        }
        let region = ReduceRegion::new(self.region_offset, self.size, &self.config);
        assert!(links.children.iter().chain(links.parent.iter()).all(|link| link.position < needed), "a link beyond the rings it needs");
        let upward = Upward::new("reduce partial", self.rank, links, region.upward);
        let (relays_out, relay_in) = (self.plan.relays_out.clone(), self.plan.relay_in);
        self.plan = Arc::new(ReducePlan { rank: self.rank, upward, relays_out, relay_in });
        Ok(())
    }

    pub fn config(&self) -> &TreeStreamConfig {
        &self.config
    }

    /// The parallel path and its threshold.
    pub fn parallel(&self) -> &ParallelReduction {
        &self.parallel
    }

    pub fn parallel_mut(&mut self) -> &mut ParallelReduction {
        &mut self.parallel
    }

    /// MPI_Reduce with MPI_IN_PLACE, at the root only (the other ranks call
    /// `reduce`): `buffer` holds the root's contribution and receives the
    /// result. The parallel reduction works in the buffer itself; the tree
    /// on a copy of the contribution.
    pub fn reduce_in_place_at_root<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        side_progress: &dyn SideProgress,
        op: &R,
        root: usize,
        buffer: &mut [u8],
    ) -> Result<(), TransportError> {
        if root != self.rank {
            return Err(TransportError::Failed(format!("rank {} is not the root {root} of an in-place reduce", self.rank)));
        }
        check_message(op, buffer, None)?;
        if self.parallel.applies(transport, buffer.len()) {
            let waits = self.config.policy.serving(side_progress);
            return self.parallel.reduce(transport, waits, op, Gather::Root(root), ReductionBuffers::InPlace(buffer));
        }
        let contribution = buffer.to_vec();
        self.reduce(transport, side_progress, op, root, &contribution, Some(buffer))
    }

    /// Reduce calls that used the window so far.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Reduces `send` of every rank in rank order into `recv` on `root`;
    /// `recv` is only given (and required) there. Other ranks may return
    /// before the root has the result. Its waits serve `side_progress`
    /// whenever they yield.
    pub fn reduce<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        side_progress: &dyn SideProgress,
        op: &R,
        root: usize,
        send: &[u8],
        recv: Option<&mut [u8]>,
    ) -> Result<(), TransportError> {
        let result = self.result_buffer(root, recv)?;
        check_message(op, send, result.as_ref().map(|buffer| buffer.len()))?;
        if self.parallel.applies(transport, send.len()) {
            let waits = self.config.policy.serving(side_progress);
            let recv = result.unwrap_or_default();
            return self.parallel.reduce(transport, waits, op, Gather::Root(root), ReductionBuffers::Separate { send, recv });
        }
        let mut result = result;
        if send.is_empty() {
            return Ok(());
        }
        if self.size == 1 {
            if let Some(buffer) = result {
                buffer.copy_from_slice(send);
            }
            return Ok(());
        }
        // The blocking call keeps its own loop over the steps a run takes
        // (`run`): driving a run costs it 1.5-1.7x at 8 B.
        let segments = Segments::new(send.len(), op.element_size(), self.config.segment_bytes)?;
        self.epoch += 1;
        let base = self.last_seq;
        let count = segments.count();
        let waits = self.config.policy.serving(side_progress);
        scratch(&mut self.partial, segments.full_len());
        scratch(&mut self.incoming, segments.full_len());
        let plan = &*self.plan;
        for index in 0..count {
            let turn = Turn::new(index, count, base, Reuse::AcknowledgedEachCall);
            let relay_turn = Turn::new(index, count, base, Reuse::ImpliedByDataFlow);
            let range = segments.range(index);
            let incoming = &mut self.incoming[..range.len()];
            let folds_into_result = self.rank == 0 && root == 0;
            let partial = match result.as_deref_mut() {
                Some(buffer) if folds_into_result => &mut buffer[range.clone()],
                _ => &mut self.partial[..range.len()],
            };
            partial.copy_from_slice(&send[range.clone()]);
            plan.upward.resume_segment(transport, op, turn, partial, incoming, &mut 0, Meet::Block(waits))?;
            if self.rank == 0 && root != 0 {
                let credit = relay_turn.credit_needed();
                plan.relays_out[root].send(transport, relay_turn.seq, partial, credit, waits)?;
            }
            if let Some(buffer) = result.as_deref_mut().filter(|_| root != 0) {
                plan.relay_in.receive(transport, relay_turn.seq, &mut buffer[range], waits)?;
                if relay_turn.must_acknowledge() {
                    plan.relay_in.acknowledge(transport, relay_turn.seq)?;
                }
            }
        }
        self.last_seq = base + count as u64;
        Ok(())
    }

    /// Starts one reduce call as a resumable run (see `run`): what `reduce`
    /// does, advanced by `Schedule::advance`. Takes the call's sequence
    /// numbers now, so runs must be started in the communicator's post
    /// order and advanced one at a time in that order (`schedule_queue`).
    /// A length the parallel reduction serves starts its run, which reads
    /// and writes the buffers themselves (the read tree's short reduces
    /// are refused: `ParallelReduction::takes_read_tree`).
    pub fn start<'a, T: PeerReads + ?Sized, R: Reduction>(
        &mut self,
        transport: &T,
        op: R,
        root: usize,
        send: &'a [u8],
        recv: Option<&'a mut [u8]>,
    ) -> Result<ReduceStart<'a, R>, TransportError> {
        built(|slot| self.start_into(transport, op, root, Some(send), recv, slot))
    }

    /// `start` for MPI_IN_PLACE at the root: `buffer` holds the root's
    /// contribution (copied now) and receives the result.
    pub fn start_in_place_at_root<'a, T: PeerReads + ?Sized, R: Reduction>(
        &mut self,
        transport: &T,
        op: R,
        root: usize,
        buffer: &'a mut [u8],
    ) -> Result<ReduceStart<'a, R>, TransportError> {
        built(|slot| self.start_into(transport, op, root, None, Some(buffer), slot))
    }

    /// `start` and `start_in_place_at_root` (`contribution` `None`: in
    /// place in the root's `recv`), building the run in `slot`
    /// (`RunSlot`); the run, there.
    #[inline(always)]
    pub fn start_into<'a, 's, T: PeerReads + ?Sized, R: Reduction>(
        &mut self,
        transport: &T,
        op: R,
        root: usize,
        contribution: Option<&'a [u8]>,
        recv: Option<&'a mut [u8]>,
        slot: impl RunSlot<'s, ReduceStart<'a, R>>,
    ) -> Result<&'s mut ReduceStart<'a, R>, TransportError>
    where
        'a: 's,
    {
        let Some(send) = contribution else {
            let Some(buffer) = recv.filter(|_| root == self.rank) else {
                return Err(TransportError::Failed(format!("rank {} is not the root {root} of an in-place reduce", self.rank)));
            };
            check_message(&op, buffer, None)?;
            if self.parallel.applies(transport, buffer.len()) {
                return Ok(slot.fill(self.start_parallel(op, root, ReductionBuffers::InPlace(buffer))?));
            }
            let contribution = Contribution::Copied(buffer.to_vec());
            return Ok(slot.fill(OrParallel::Window(self.start_window(op, root, contribution, Some(buffer))?)));
        };
        let result = self.result_buffer(root, recv)?;
        check_message(&op, send, result.as_ref().map(|buffer| buffer.len()))?;
        if self.parallel.applies(transport, send.len()) {
            let buffers = ReductionBuffers::Separate { send, recv: result.unwrap_or_default() };
            return Ok(slot.fill(self.start_parallel(op, root, buffers)?));
        }
        Ok(slot.fill(OrParallel::Window(self.start_window(op, root, Contribution::Borrowed(send), result)?)))
    }

    /// The root's buffer (required there), `None` elsewhere.
    #[inline]
    fn result_buffer<'a>(&self, root: usize, recv: Option<&'a mut [u8]>) -> Result<Option<&'a mut [u8]>, TransportError> {
        if root >= self.size {
            return Err(self.root_outside(root));
        }
        if self.rank != root {
            return Ok(None);
        }
        match recv {
            Some(buffer) => Ok(Some(buffer)),
            None => Err(TransportError::Failed("the reduce root needs a receive buffer".to_string())),
        }
    }

    #[cold]
    fn root_outside(&self, root: usize) -> TransportError {
        TransportError::Failed(format!("reduce root {root} outside a communicator of {}", self.size))
    }

    fn start_parallel<'a, R: Reduction>(&mut self, op: R, root: usize, buffers: ReductionBuffers<'a>) -> Result<ReduceStart<'a, R>, TransportError> {
        self.parallel.start(op, Gather::Root(root), buffers, StallLimits::of(&self.config.policy)).map(|run| OrParallel::Parallel(Box::new(run)))
    }

    /// Makes `finished`, an earlier window run of this reduce that is over
    /// (a persistent request's last: the same buffers, root and op), the
    /// run `start` would make now, in place, as `Allreduce::restart` does;
    /// false, with `finished` left as it was, where `start` would make
    /// another run (a parallel reduction, a run of an earlier plan, or one
    /// not over).
    pub fn restart<T: PeerReads + ?Sized, R: Reduction>(&mut self, transport: &T, finished: &mut ReduceStart<'_, R>) -> Result<bool, TransportError> {
        let OrParallel::Window(run) = finished else { return Ok(false) };
        if run.cursor.is_some() || !Arc::ptr_eq(&run.plan, &self.plan) || self.parallel.applies(transport, run.send.len()) {
            return Ok(false);
        }
        if let (Contribution::Copied(contribution), Some(buffer)) = (&mut run.send, &run.result) {
            contribution.copy_from_slice(buffer);
        }
        run.cursor = self.next_cursor(&run.op, &run.send, run.result.as_deref_mut())?;
        run.stall = StallClock::new(StallLimits::of(&self.config.policy));
        Ok(true)
    }

    /// The resumable run of a call the tree serves, its numbers taken.
    #[inline(always)]
    fn start_window<'a, R: Reduction>(
        &mut self,
        op: R,
        root: usize,
        send: Contribution<'a>,
        mut result: Option<&'a mut [u8]>,
    ) -> Result<ReduceRun<'a, R>, TransportError> {
        let cursor = self.next_cursor(&op, &send, result.as_deref_mut())?;
        let (plan, stall) = (Arc::clone(&self.plan), StallClock::new(StallLimits::of(&self.config.policy)));
        Ok(ReduceRun { plan, op, root, send, result, partial: Vec::new(), incoming: Vec::new(), cursor, stall })
    }

    /// Where the next call starts (taking its sequence numbers), or `None`
    /// for a call with nothing to send.
    fn next_cursor<R: Reduction + ?Sized>(&mut self, op: &R, send: &[u8], result: Option<&mut [u8]>) -> Result<Option<ReduceCursor>, TransportError> {
        if send.is_empty() {
            return Ok(None);
        }
        if self.size == 1 {
            if let Some(buffer) = result {
                buffer.copy_from_slice(send);
            }
            return Ok(None);
        }
        let segments = Segments::new(send.len(), op.element_size(), self.config.segment_bytes)?;
        self.epoch += 1;
        let base = self.last_seq;
        self.last_seq = base + segments.count() as u64;
        Ok(Some(ReduceCursor::new(segments, base)))
    }
}
