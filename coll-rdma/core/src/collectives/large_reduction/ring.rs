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

use std::ops::Range;

use btl_ibmc::{TransportError, Waits, Windows};

use super::parallel::{slice_of, Shares};
use super::buffers::{Gather, ReductionBuffers};
use crate::patterns::region::RegionCursor;
use crate::patterns::scratch;
use crate::patterns::segments::{check_message, Segments};
use crate::patterns::slots::{Reuse, SlotShape, Stream, Turn, CREDIT_BYTES};
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
    /// Segments sent to the right and received from the left so far.
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
    /// `recv`). Every rank passes the same length, op and `gather`.
    pub fn reduce<T: Windows + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        waits: Waits<'_>,
        op: &R,
        gather: Gather,
        buffers: ReductionBuffers<'_>,
    ) -> Result<(), TransportError> {
        if matches!(gather, Gather::Root(root) if root >= self.size) {
            return Err(TransportError::Failed(format!("reduce root {gather:?} outside a communicator of {}", self.size)));
        }
        if !op.is_commutative() {
            return Err(TransportError::Failed("the ring folds blocks in different orders: commutative operations only".to_string()));
        }
        let gathers = matches!(gather, Gather::All) || gather == Gather::Root(self.rank);
        // Where this rank's input comes from (none: it is already where
        // the reduction runs) and where the reduction runs (none: in this
        // rank's accumulator, since it receives no result).
        let (input, result): (Option<&[u8]>, Option<&mut [u8]>) = match buffers {
            ReductionBuffers::Separate { send, recv } => {
                check_message(op, send, gathers.then_some(recv.len()))?;
                (Some(send), gathers.then_some(recv))
            }
            ReductionBuffers::InPlace(buffer) => {
                check_message(op, buffer, None)?;
                if gathers { (None, Some(buffer)) } else { (Some(&*buffer), None) }
            }
        };
        let mut accumulator = std::mem::take(&mut self.accumulator);
        let result = match result {
            Some(result) => result,
            None => scratch(&mut accumulator, input.map_or(0, <[u8]>::len)),
        };
        if let Some(input) = input {
            result.copy_from_slice(input);
        }
        let outcome = self.around_the_ring(transport, waits, op, result);
        if accumulator.capacity() <= KEPT_ACCUMULATOR_BYTES {
            self.accumulator = accumulator;
        }
        outcome
    }

    /// `result` holds this rank's contribution and ends with the reduction
    /// of every rank's.
    fn around_the_ring<T: Windows + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        waits: Waits<'_>,
        op: &R,
        result: &mut [u8],
    ) -> Result<(), TransportError> {
        if result.is_empty() || self.size == 1 {
            return Ok(());
        }
        self.calls += 1;
        let (rank, size, len) = (self.rank, self.size, result.len());
        let block = |index: usize| slice_of(index % size, size, len, op.element_size(), Shares::EVERY_RANK_EQUAL);
        // Reduce-scatter: what rank r sends in step s it folded in step s-1
        // (its own input at s = 0), so each block gathers one more rank's
        // contribution per hop and is whole at its P-1-th.
        for step in 0..size - 1 {
            self.step(transport, waits, op, result, block(rank + size - step), block(rank + 2 * size - step - 1), Arriving::Folded)?;
        }
        // Allgather: rank r starts with block r+1 whole and forwards each
        // block the step after it arrives, so every block reaches all.
        for step in 0..size - 1 {
            self.step(transport, waits, op, result, block(rank + 1 + size - step), block(rank + size - step), Arriving::Copied)?;
        }
        Ok(())
    }

    /// One step of either phase: puts `outgoing` of `result` to the right
    /// neighbour segment by segment, taking `arriving` from the left one
    /// segment behind each put.
    #[allow(clippy::too_many_arguments)] // one step's whole context
    fn step<T: Windows + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        waits: Waits<'_>,
        op: &R,
        result: &mut [u8],
        outgoing: Range<usize>,
        arriving: Range<usize>,
        how: Arriving,
    ) -> Result<(), TransportError> {
        let out_segments = Segments::new(outgoing.len(), op.element_size(), self.segment_bytes)?;
        let in_segments = Segments::new(arriving.len(), op.element_size(), self.segment_bytes)?;
        let incoming = match how {
            Arriving::Folded => scratch(&mut self.incoming, in_segments.full_len()),
            Arriving::Copied => &mut [],
        };
        for index in 0..out_segments.count().max(in_segments.count()) {
            if index < out_segments.count() {
                let range = out_segments.range(index);
                send(&self.to_right, transport, waits, &mut self.sent, &result[outgoing.start + range.start..outgoing.start + range.end])?;
            }
            if index < in_segments.count() {
                let range = in_segments.range(index);
                let target = &mut result[arriving.start + range.start..arriving.start + range.end];
                match how {
                    Arriving::Folded => {
                        let incoming = &mut incoming[..range.len()];
                        receive(&self.from_left, transport, waits, &mut self.received, incoming)?;
                        op.combine(incoming, target);
                    }
                    Arriving::Copied => receive(&self.from_left, transport, waits, &mut self.received, target)?,
                }
            }
        }
        Ok(())
    }
}

/// What becomes of a segment from the left neighbour.
#[derive(Clone, Copy, Debug)]
enum Arriving {
    /// Reduce-scatter: folded into this rank's partial of its block.
    Folded,
    /// Allgather: a reduced block's bytes, copied into the result.
    Copied,
}

/// Puts the next segment to the right neighbour once its slot is free.
fn send<T: Windows + ?Sized>(stream: &Stream, transport: &T, waits: Waits<'_>, sent: &mut u64, data: &[u8]) -> Result<(), TransportError> {
    // The stream numbers segments across calls, not per call, so every
    // segment is the next one of a one-segment turn: `Turn` then gives its
    // number and the credit that frees its slot (its occupant's, two back).
    let turn = Turn::new(0, 1, *sent, Reuse::AcknowledgedEachCall);
    stream.send(transport, turn.seq, data, turn.credit_needed(), waits)?;
    *sent = turn.seq;
    Ok(())
}

/// Takes the next segment from the left neighbour and frees its slot.
fn receive<T: Windows + ?Sized>(stream: &Stream, transport: &T, waits: Waits<'_>, received: &mut u64, out: &mut [u8]) -> Result<(), TransportError> {
    let seq = *received + 1;
    stream.receive(transport, seq, out, waits)?;
    stream.acknowledge(transport, seq)?;
    *received = seq;
    Ok(())
}
