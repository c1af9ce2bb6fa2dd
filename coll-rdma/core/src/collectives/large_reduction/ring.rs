//! Long MPI_Allreduce / MPI_Reduce where no rank can read another's memory
//! (across nodes over verbs or udp, or shared memory with cross-memory
//! attach refused): a ring reduce-scatter, then a ring allgather, over
//! puts to the next rank only (UCC's and tuned's choice for long messages,
//! written here over the window).
//!
//! The vector is cut into P blocks of whole elements (`slice_of`, equal
//! shares). In reduce-scatter step s (0..P-1) rank r sends block r-s (mod
//! P) to rank r+1, and receives block r-s-1 from rank r-1 and folds it into
//! its accumulator; after P-1 steps it holds block r+1 fully reduced. In
//! allgather step s it sends block r+1-s, which it completed (or received)
//! in the step before, and receives block r-s into its result. Each rank
//! moves 2(P-1)/P of the message and folds (P-1)/P of it, against a whole
//! message per child for the busiest rank of the tree; and the only peers
//! are the ring's neighbours, so ranks placed by node cross nodes at the
//! node boundaries alone.
//!
//! The fold order differs from block to block, so only commutative
//! operations go around the ring; the others keep the tree, which folds in
//! rank order. Every rank ends with the same bytes all the same: each block
//! is reduced once, by one rank, and copied to the others.
//!
//! A reduce runs the same ring and keeps the result on the root only; the
//! other ranks reduce into a buffer of their own. Its allgather costs each
//! link what a gather costs the root's, so nothing is lost against a
//! reduce-scatter followed by a gather.
//!
//! One ring per communicator serves both collectives (the glue picks it
//! per call, after the parallel reduction and before the tree), so its
//! slots can be large: with two of `DEFAULT_SEGMENT_BYTES`, a sender has a
//! whole slot to write while its neighbour reads the other, and a message
//! takes few handshakes.
//!
//! # Streams and their reuse
//!
//! Every rank's window holds one slot ring, written by its left neighbour,
//! and one credit word, written by its right neighbour (`patterns::slots`).
//! Segments are numbered over the communicator's life. A rank returns once
//! it received its last segment, which says nothing of whether its right
//! neighbour read what it sent, so every segment is acknowledged
//! (`Reuse::AcknowledgedEachCall`) and a slot is rewritten only once its
//! previous segment was read, in this call or an earlier one.
//!
//! # Why it cannot deadlock
//!
//! Within a step a rank sends segment i and then receives segment i, and a
//! step's blocks differ by at most one element, hence by at most one
//! segment. A send waits only for the right neighbour to have read the
//! segment two before it; every rank has received all but at most one of
//! the segments its left neighbour sent before the one the neighbour is
//! sending, so with two slots some rank can always proceed.
//!
//! The steps are one state machine (`ring_run::RingCall`): the blocking
//! call resumes it once with every wait waiting, a non-blocking or
//! persistent call polls it as a run (`RingRun`).


use btl_ibmc::{TransportError, Waits, Windows};

use super::buffers::{Gather, ReductionBuffers};
use super::ring_run::{operands, Position, RingCall, RingRun};
use crate::patterns::meet::{Meet, StallLimits};
use crate::patterns::region::RegionCursor;
use crate::patterns::segments::check_message;
use crate::patterns::slots::{KnownCredit, SlotShape, Stream, CREDIT_BYTES};
use crate::reduction::Reduction;

/// The lengths a collective sends around the ring (when the parallel
/// reduction does not take them), the same on every rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingLengths {
    /// `None`: the ring is off.
    pub from: Option<usize>,
    /// `None`: no upper bound.
    pub up_to: Option<usize>,
}

/// The ring's window region, identical on every rank.
#[derive(Clone, Copy, Debug)]
struct RingRegion {
    ring: usize,
    credit: usize,
    end: usize,
}

impl RingRegion {
    fn new(start: usize, shape: SlotShape) -> Self {
        let mut cursor = RegionCursor::starting_at(start);
        let ring = cursor.take(shape.ring_bytes());
        let credit = cursor.take(CREDIT_BYTES);
        RingRegion { ring, credit, end: cursor.end() }
    }
}

/// A reduce's accumulator on a rank other than the root is kept for the
/// next call up to this length; a longer one is given back, so that one
/// huge reduce does not pin its memory for the communicator's life.
const KEPT_ACCUMULATOR_BYTES: usize = 1 << 20;

/// One rank's ring state for one communicator.
#[derive(Debug)]
pub struct RingReduction {
    rank: usize,
    size: usize,
    segment_bytes: usize,
    from_left: Stream,
    to_right: Stream,
    /// Segments sent to the right and received from the left by the calls
    /// started so far (a call takes its numbers when it starts).
    sent: u64,
    received: u64,
    calls: u64,
    incoming: Vec<u8>,
    /// A reduce's accumulator on a rank other than the root.
    accumulator: Vec<u8>,
}

impl RingReduction {
    /// Bytes per slot unless set (`coll_rdma_ring_segment_size`). Measured
    /// at np=2 on shared memory with cross-memory attach refused, IMB
    /// Allreduce against stock (which used it): slots of 8 KiB were 1.2-4.2x
    /// stock from 16 KiB to 16 MiB, 64 KiB 0.4-1.02x, 256 KiB 0.4-0.95x
    /// (2026-11-24, one run each, the VM's noise included); 64 KiB keeps
    /// the region at about 128 KiB per communicator.
    pub const DEFAULT_SEGMENT_BYTES: usize = 65536;

    /// Bytes of window the ring needs on every rank.
    pub fn region_len(segment_bytes: usize) -> usize {
        RingRegion::new(0, SlotShape::holding(segment_bytes)).end
    }

    pub fn new(rank: usize, size: usize, region_offset: usize, segment_bytes: usize) -> Self {
        let shape = SlotShape::holding(segment_bytes);
        let region = RingRegion::new(region_offset, shape);
        let (left, right) = ((rank + size - 1) % size.max(1), (rank + 1) % size.max(1));
        let stream = |sender, receiver| Stream { what: "reduction around the ring", sender, receiver, ring: region.ring, credit: region.credit, shape };
        RingReduction {
            rank,
            size,
            segment_bytes,
            from_left: stream(left, rank),
            to_right: stream(rank, right),
            sent: 0,
            received: 0,
            calls: 0,
            incoming: Vec::new(),
            accumulator: Vec::new(),
        }
    }

    pub fn segment_bytes(&self) -> usize {
        self.segment_bytes
    }

    /// Calls served around the ring so far.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// Whether a `len`-byte reduction of `element_bytes`-byte elements goes
    /// around the ring when it takes `lengths`; the same answer on every
    /// rank, which passes the same arguments. An element longer than a slot
    /// cannot travel (the tree, whose segments may be longer, takes it).
    pub fn applies(&self, len: usize, element_bytes: usize, commutative: bool, lengths: RingLengths) -> bool {
        let within = lengths.from.is_some_and(|from| len >= from) && lengths.up_to.is_none_or(|up_to| len <= up_to);
        commutative && within && len > 0 && self.size > 1 && element_bytes <= self.segment_bytes
    }

    /// Reduces every rank's contribution (a commutative `op`); with
    /// `Gather::All` every rank's buffers receive the result, with
    /// `Gather::Root(r)` rank r's only (the others may pass an empty
    /// `recv`). Every rank passes the same length, op and `gather`. The
    /// same state machine as a run's (`ring_run`), resumed once with every
    /// wait waiting.
    pub fn reduce<T: Windows + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        waits: Waits<'_>,
        op: &R,
        gather: Gather,
        mut buffers: ReductionBuffers<'_>,
    ) -> Result<(), TransportError> {
        let gathers = self.check_call(op, gather, &buffers)?;
        let mut call = self.next_call(op, buffers.len())?;
        let mut accumulator = std::mem::take(&mut self.accumulator);
        let (input, result) = operands(&mut buffers, gathers, &mut accumulator);
        let outcome = call.resume(transport, op, input, result, &mut self.incoming, Meet::Block(waits)).map(drop);
        if accumulator.capacity() <= KEPT_ACCUMULATOR_BYTES {
            self.accumulator = accumulator;
        }
        outcome
    }

    /// Starts one call as a resumable run (`ring_run`): what `reduce` does,
    /// advanced by `Schedule::advance`. Takes the call's segment numbers
    /// now, so runs must be started in the communicator's post order and
    /// advanced one at a time in that order, after every earlier ring call
    /// of either collective (`schedule_queue`'s ring lane). A run stuck
    /// longer than `limits` allow fails (and warns before).
    pub fn start<'a, R: Reduction>(
        &mut self,
        op: R,
        gather: Gather,
        buffers: ReductionBuffers<'a>,
        limits: StallLimits,
    ) -> Result<RingRun<'a, R>, TransportError> {
        let gathers = self.check_call(&op, gather, &buffers)?;
        let call = self.next_call(&op, buffers.len())?;
        Ok(RingRun::new(call, op, buffers, gathers, limits))
    }

    /// Refuses a call the ring cannot serve, identically on every rank,
    /// before anything moves; else whether this rank gathers the result.
    fn check_call<R: Reduction + ?Sized>(&self, op: &R, gather: Gather, buffers: &ReductionBuffers<'_>) -> Result<bool, TransportError> {
        if matches!(gather, Gather::Root(root) if root >= self.size) {
            return Err(TransportError::Failed(format!("reduce root {gather:?} outside a communicator of {}", self.size)));
        }
        if !op.is_commutative() {
            return Err(TransportError::Failed("the ring folds blocks in different orders: commutative operations only".to_string()));
        }
        let gathers = matches!(gather, Gather::All) || gather == Gather::Root(self.rank);
        match buffers {
            ReductionBuffers::Separate { send, recv } => check_message(op, send, gathers.then_some(recv.len()))?,
            ReductionBuffers::InPlace(buffer) => check_message(op, buffer, None)?,
        }
        Ok(gathers)
    }

    /// The next call of `len` bytes, its segment numbers taken on both
    /// streams.
    fn next_call<R: Reduction + ?Sized>(&mut self, op: &R, len: usize) -> Result<RingCall, TransportError> {
        let mut call = RingCall {
            rank: self.rank,
            size: self.size,
            segment_bytes: self.segment_bytes,
            to_right: self.to_right,
            from_left: self.from_left,
            known_credit: KnownCredit::default(),
            sent: self.sent,
            received: self.received,
            call: self.calls,
            position: Position::default(),
        };
        if len == 0 || self.size == 1 {
            return Ok(call);
        }
        let (sending, receiving) = call.segments(len, op.element_size())?;
        self.sent += sending;
        self.received += receiving;
        self.calls += 1;
        call.call = self.calls;
        Ok(call)
    }
}
