//! Large MPI_Allreduce / MPI_Reduce where every rank can read and write
//! every other's memory (shared memory with cross-memory attach,
//! `PeerReads::read_peer_memory` / `write_peer_memory`): a reduce-scatter
//! in which each rank reduces its own slice of the vector, reading that
//! slice of every rank's input straight from the peers' user buffers, and
//! delivers each reduced chunk, while it is still in cache, straight into
//! the result buffer of every rank that gathers (all of them for
//! allreduce, the root for reduce). Each byte of input is read once, by
//! the rank that owns its slice, and all ranks work at once.
//!
//! Slices are whole elements in rank order (`slice_bounds`). For allreduce
//! they are equal (within an element); for reduce the root, which delivers
//! nothing, owns a larger slice, so that it does not wait idle while the
//! others both reduce and deliver theirs (`ROOT_WEIGHT`). The owner folds
//! its slice chunk by chunk (`STAGING_BYTES` of a peer's input at a time)
//! in the order `FoldPlan` gives: the result is `r0 ∘ (r1 ∘ (... ∘
//! r(P-1)))`, the canonical order, right for non-commutative operations.
//!
//! # The protocol (call n: the n-th parallel reduction of this instance,
//! the same count on every rank)
//!
//! 1. Every rank stores in its announcement line where its input lies,
//!    where its result buffer lies (0 if it does not gather) and the
//!    length, then the line's flag n (release).
//! 2. It waits for every peer's announcement n (acquire), then, chunk by
//!    chunk of its slice, reads that chunk of every peer's input, folds it,
//!    and writes the folded chunk into every gathering peer's result buffer
//!    (and its own, where it gathers).
//! 3. Once it has read and written all it will (all of step 2), it writes
//!    n into its done line in every peer's window; it returns once every
//!    peer's done line in its own window reads n or more: then no peer
//!    reads its input any more, and every slice of its result is written.
//!
//! # Why nothing is overwritten under its reader
//!
//! * User buffers: peers read this rank's input and write its result only
//!   during call n, and it returns (the program may reuse them) only after
//!   every peer said it is done with both.
//! * In place (input and result are one buffer): owner q writes chunk c of
//!   its slice into a peer's buffer only after it read chunk c of that
//!   peer's input, and nobody else reads that part of the buffer (it is
//!   q's slice); a rank overwrites its own slice only through its own fold,
//!   having set its own input aside where the fold order needs it later.
//! * Lines: an announcement is rewritten in call n+1 only after every peer
//!   said it is done with call n, after it read the announcement; the done
//!   words only grow, and waits compare with `>=`.
//!
//! Deadlock: the only waits are for announcements (every rank announces
//! before it waits) and for done lines (every rank says done before it
//! waits), so no wait depends on a step taken after some other wait.

use std::ops::Range;

use btl_ibmc::{wait_for_peer_at_least, PeerReads, TransportError, Waits};

use crate::patterns::done_lines::DoneLines;
use crate::patterns::region::{RegionCursor, LINE};
use crate::patterns::scratch;
use crate::patterns::segments::check_message;
use crate::reduction::Reduction;

/// Bytes of a peer's input read and folded at a time: small enough to
/// stay in cache between the read and the fold.
const STAGING_BYTES: usize = 128 * 1024;

/// The reduce root's share of the vector against another rank's (halves):
/// the others also deliver what they reduce, which costs about half as
/// much again as reducing it (np=2, 1 MiB: 70 us to read and fold half the
/// vector, 35-42 us to copy that half across processes).
const ROOT_WEIGHT: u64 = 3;
const OTHER_WEIGHT: u64 = 2;

const INPUT_ADDRESS_WORD: usize = 0;
const RESULT_ADDRESS_WORD: usize = 8;
const LENGTH_WORD: usize = 16;
const FLAG_WORD: usize = 24;

/// The region, identical on every rank.
#[derive(Debug)]
struct ParallelRegion {
    announcement: usize,
    done: DoneLines,
    end: usize,
}

impl ParallelRegion {
    fn new(start: usize, size: usize) -> Self {
        let mut cursor = RegionCursor::starting_at(start);
        let announcement = cursor.take(LINE);
        let done = DoneLines::take(&mut cursor, size);
        ParallelRegion { announcement, done, end: cursor.end() }
    }
}

/// This rank's contribution and where its result goes.
pub enum ReductionBuffers<'a> {
    /// Input and result are distinct buffers.
    Separate { send: &'a [u8], recv: &'a mut [u8] },
    /// MPI_IN_PLACE: the buffer holds the input and receives the result.
    InPlace(&'a mut [u8]),
}

impl ReductionBuffers<'_> {
    fn len(&self) -> usize {
        match self {
            ReductionBuffers::Separate { send, .. } => send.len(),
            ReductionBuffers::InPlace(buffer) => buffer.len(),
        }
    }
}

/// Who ends with the whole result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gather {
    /// Allreduce: every rank.
    All,
    /// Reduce: this root only.
    Root(usize),
}

/// Every rank's slice of `len` bytes of `element_size`-byte elements among
/// `size` ranks, in rank order: equal shares for `Gather::All`, the root's
/// share `ROOT_WEIGHT / OTHER_WEIGHT` times another's for `Gather::Root`.
pub fn slice_bounds(size: usize, len: usize, element_size: usize, gather: Gather) -> Vec<Range<usize>> {
    let weight = |rank: usize| match gather {
        Gather::Root(root) if root == rank => ROOT_WEIGHT,
        Gather::Root(_) => OTHER_WEIGHT,
        Gather::All => 1,
    };
    let total: u128 = (0..size).map(|rank| u128::from(weight(rank))).sum();
    let count = (len / element_size) as u128;
    let mut before: u128 = 0;
    let mut first = 0usize;
    (0..size)
        .map(|rank| {
            before += u128::from(weight(rank));
            let end = (count * before / total) as usize;
            let slice = first * element_size..end * element_size;
            first = end;
            slice
        })
        .collect()
}

/// One rank's parallel-reduction state for one communicator.
#[derive(Debug)]
pub struct ParallelReduction {
    rank: usize,
    size: usize,
    region: ParallelRegion,
    /// Parallel reductions so far, on every rank alike.
    calls: u64,
    /// Messages of at least this many bytes are reduced in parallel where
    /// the transport reads peers' memory; `usize::MAX` never. The same on
    /// every rank.
    min_bytes: usize,
    /// A peer's input chunk on its way into the fold.
    staging: Vec<u8>,
    /// In place: this rank's own input chunk, copied aside before the
    /// result overwrites it.
    own_input: Vec<u8>,
    /// A rank that does not gather (reduce, not the root): the chunk it
    /// folds, then delivers.
    slice_result: Vec<u8>,
}

impl ParallelReduction {
    /// Bytes of window the state needs on every rank.
    pub fn region_len(size: usize) -> usize {
        ParallelRegion::new(0, size).end
    }

    pub fn new(rank: usize, size: usize, region_offset: usize) -> Self {
        ParallelReduction {
            rank,
            size,
            region: ParallelRegion::new(region_offset, size),
            calls: 0,
            min_bytes: usize::MAX,
            staging: Vec::new(),
            own_input: Vec::new(),
            slice_result: Vec::new(),
        }
    }

    /// Parallel reductions served so far.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    pub fn set_min_bytes(&mut self, min_bytes: usize) {
        self.min_bytes = min_bytes;
    }

    /// The threshold; `usize::MAX` never.
    pub fn min_bytes(&self) -> usize {
        self.min_bytes
    }

    /// Whether a `len`-byte reduction is done in parallel; the same answer
    /// on every rank (reading peers' memory is agreed at setup).
    pub fn applies<T: PeerReads + ?Sized>(&self, transport: &T, len: usize) -> bool {
        len >= self.min_bytes && len > 0 && self.size > 1 && transport.reads_peer_memory()
    }

    /// Reduces every rank's contribution in rank order; with `Gather::All`
    /// every rank's `buffers` receive the result, with `Gather::Root(r)`
    /// only rank r's (the other ranks pass `recv` for their contribution
    /// only, and may pass an empty one). Every rank passes the same length
    /// (a multiple of the element size), operation and `gather`, and the
    /// transport reads peer memory on every rank (agreed at setup).
    pub fn reduce<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        waits: Waits<'_>,
        op: &R,
        gather: Gather,
        mut buffers: ReductionBuffers<'_>,
    ) -> Result<(), TransportError> {
        let len = buffers.len();
        if matches!(gather, Gather::Root(root) if root >= self.size) {
            return Err(TransportError::Failed(format!("reduce root {gather:?} outside a communicator of {}", self.size)));
        }
        let gathers = match gather {
            Gather::All => true,
            Gather::Root(root) => root == self.rank,
        };
        match &buffers {
            ReductionBuffers::Separate { send, recv } if gathers => check_message(op, send, Some(recv.len()))?,
            ReductionBuffers::Separate { send, .. } => check_message(op, send, None)?,
            ReductionBuffers::InPlace(buffer) => check_message(op, buffer, None)?,
        }
        self.calls += 1;
        let mine = slice_bounds(self.size, len, op.element_size(), gather).swap_remove(self.rank);
        let (input_address, result_address) = match &buffers {
            ReductionBuffers::Separate { send, recv } => (address(send), if gathers { address(recv) } else { 0 }),
            ReductionBuffers::InPlace(buffer) => (address(buffer), if gathers { address(buffer) } else { 0 }),
        };
        self.announce(transport, input_address, result_address, len as u64);
        let peers = self.await_announcements(transport, waits, len as u64)?;
        self.reduce_and_deliver(transport, op, &peers, &mine, gathers, &mut buffers)?;
        self.say_done(transport)?;
        self.await_readers(transport, waits)
    }

    fn announce<T: PeerReads + ?Sized>(&self, transport: &T, input: u64, result: u64, len: u64) {
        let line = self.region.announcement;
        transport.set_local_flag(line + INPUT_ADDRESS_WORD, input);
        transport.set_local_flag(line + RESULT_ADDRESS_WORD, result);
        transport.set_local_flag(line + LENGTH_WORD, len);
        // Release (every local flag store is): a peer that sees the call
        // number sees the words above, and the buffers as the program
        // wrote them before the call.
        transport.set_local_flag(line + FLAG_WORD, self.calls);
    }

    /// Every rank's (input address, result buffer address or 0); this
    /// rank's entry is unused.
    fn await_announcements<T: PeerReads + ?Sized>(&self, transport: &T, waits: Waits<'_>, len: u64) -> Result<Vec<(u64, u64)>, TransportError> {
        let line = self.region.announcement;
        let call = self.calls;
        let mut peers = vec![(0, 0); self.size];
        for peer in (0..self.size).filter(|&peer| peer != self.rank) {
            let flag = wait_for_peer_at_least(transport, peer, line + FLAG_WORD, call, waits, || {
                format!("rank {peer} to announce parallel reduction {call} to rank {}", self.rank)
            })?;
            if flag != call {
                return Err(TransportError::Failed(format!(
                    "rank {}: rank {peer} announced parallel reduction {flag} while this rank is in {call}; the ranks are out of step",
                    self.rank
                )));
            }
            let theirs = transport.peer_flag(peer, line + LENGTH_WORD)?;
            if theirs != len {
                return Err(TransportError::Failed(format!(
                    "rank {}: rank {peer} reduces {theirs} bytes, this rank {len} bytes",
                    self.rank
                )));
            }
            peers[peer] = (transport.peer_flag(peer, line + INPUT_ADDRESS_WORD)?, transport.peer_flag(peer, line + RESULT_ADDRESS_WORD)?);
        }
        Ok(peers)
    }

    /// Folds this rank's slice of every rank's input, chunk by chunk, in
    /// the order `FoldPlan` gives, and writes each folded chunk into every
    /// gathering rank's result buffer.
    fn reduce_and_deliver<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        op: &R,
        peers: &[(u64, u64)],
        mine: &Range<usize>,
        gathers: bool,
        buffers: &mut ReductionBuffers<'_>,
    ) -> Result<(), TransportError> {
        let element_size = op.element_size();
        let chunk_len = (STAGING_BYTES / element_size).max(1) * element_size;
        let staged_len = chunk_len.min(mine.len());
        scratch(&mut self.staging, staged_len);
        // Where this rank's result goes: its own buffer when it gathers
        // (in place: the buffer that also holds its input).
        let folds_in_place = gathers && matches!(buffers, ReductionBuffers::InPlace(_));
        let plan = FoldPlan::new(self.rank, self.size, op.is_commutative(), folds_in_place);
        if plan.own_set_aside {
            scratch(&mut self.own_input, staged_len);
        }
        if !gathers {
            scratch(&mut self.slice_result, staged_len);
        }
        let receivers: Vec<(usize, u64)> =
            (0..self.size).filter(|&peer| peer != self.rank && peers[peer].1 != 0).map(|peer| (peer, peers[peer].1)).collect();
        let mut start = mine.start;
        while start < mine.end {
            let chunk = start..(start + chunk_len).min(mine.end);
            let n = chunk.len();
            let (own, acc): (&[u8], &mut [u8]) = match buffers {
                ReductionBuffers::Separate { send, recv } if gathers => (&send[chunk.clone()], &mut recv[chunk.clone()]),
                ReductionBuffers::Separate { send, .. } => (&send[chunk.clone()], &mut self.slice_result[..n]),
                ReductionBuffers::InPlace(buffer) if !gathers => (&buffer[chunk.clone()], &mut self.slice_result[..n]),
                ReductionBuffers::InPlace(buffer) => {
                    if plan.own_set_aside {
                        self.own_input[..n].copy_from_slice(&buffer[chunk.clone()]);
                    }
                    // Without setting aside, `own` is never read: the
                    // accumulator starts as this rank's input (`Seed::Own`).
                    (&self.own_input[..if plan.own_set_aside { n } else { 0 }], &mut buffer[chunk.clone()])
                }
            };
            match plan.seed {
                Seed::Own if folds_in_place => {}
                Seed::Own => acc.copy_from_slice(own),
                Seed::Peer(rank) => transport.read_peer_memory(rank, peers[rank].0 + chunk.start as u64, acc)?,
            }
            for &rank in &plan.folds {
                if rank == self.rank {
                    op.combine(own, acc);
                } else {
                    let staged = &mut self.staging[..n];
                    transport.read_peer_memory(rank, peers[rank].0 + chunk.start as u64, staged)?;
                    op.combine(staged, acc);
                }
            }
            for &(peer, result) in &receivers {
                transport.write_peer_memory(peer, result + chunk.start as u64, acc)?;
            }
            start = chunk.end;
        }
        Ok(())
    }

    /// Tells every peer this rank will read and write nothing more of its
    /// memory in this call.
    fn say_done<T: PeerReads + ?Sized>(&self, transport: &T) -> Result<(), TransportError> {
        for peer in (0..self.size).filter(|&peer| peer != self.rank) {
            self.region.done.say_done(transport, peer, self.rank, self.calls)?;
        }
        Ok(())
    }

    fn await_readers<T: PeerReads + ?Sized>(&self, transport: &T, waits: Waits<'_>) -> Result<(), TransportError> {
        self.region.done.await_readers(transport, self.rank, self.size, self.calls, waits, "parallel reduction")
    }
}

/// Where an owner's accumulator starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seed {
    /// This rank's own input (in place: the buffer already holds it).
    Own,
    /// A peer's input, read straight into the accumulator.
    Peer(usize),
}

/// The order in which an owner folds every rank's slice: the accumulator
/// starts as `seed`, then each rank of `folds` is combined in as the lower
/// operand (`acc = input(rank) ∘ acc`).
///
/// The canonical order is `acc = r(P-1)`, then `r(P-2)` down to `r0`. Two
/// deviations save a whole copy of this rank's slice, which the other
/// ranks would otherwise wait for (measured at np=2: the last rank spent a
/// sixth of a 1 MiB allreduce in that memcpy while rank 0 spun):
/// * in place, the last rank's buffer already holds r(P-1): no copy;
/// * for a commutative operation, the innermost pair r(P-2), r(P-1) may
///   start from either member. `a ∘ b == b ∘ a` holds exactly for the
///   predefined operations (IEEE addition and multiplication included), and
///   the association of every other operand is unchanged, so the result is
///   bit for bit the canonical one.
/// When this rank's input is folded after the accumulator was overwritten
/// in place, it must be set aside first (`own_set_aside`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct FoldPlan {
    seed: Seed,
    folds: Vec<usize>,
    own_set_aside: bool,
}

impl FoldPlan {
    fn new(rank: usize, size: usize, commutative: bool, in_place: bool) -> Self {
        let last = size - 1;
        let below_pair = (0..last.saturating_sub(1)).rev();
        let (seed, mut folds) = if size == 1 {
            (Seed::Own, Vec::new())
        } else if rank == last && in_place {
            (Seed::Own, vec![last - 1])
        } else if rank == last - 1 && in_place && commutative {
            (Seed::Own, vec![last])
        } else if rank == last && commutative {
            (Seed::Peer(last - 1), vec![last])
        } else if rank == last {
            (Seed::Own, vec![last - 1])
        } else {
            (Seed::Peer(last), vec![last - 1])
        };
        folds.extend(below_pair);
        let own_set_aside = in_place && folds.contains(&rank);
        FoldPlan { seed, folds, own_set_aside }
    }
}

fn address(bytes: &[u8]) -> u64 {
    bytes.as_ptr() as usize as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_vector_in_rank_order_in_whole_elements_in_proportion_to_their_weights() {
        for size in 1..=9 {
            for count in [0, 1, 2, 7, 8, 9, 100, 101, 1 << 20] {
                for element_size in [1, 4, 8, 12] {
                    let len = count * element_size;
                    let gathers = std::iter::once(Gather::All).chain((0..size).map(Gather::Root));
                    for gather in gathers {
                        let slices = slice_bounds(size, len, element_size, gather);
                        let weight = |rank| match gather {
                            Gather::Root(root) if root == rank => ROOT_WEIGHT as f64,
                            Gather::Root(_) => OTHER_WEIGHT as f64,
                            Gather::All => 1.0,
                        };
                        let total: f64 = (0..size).map(weight).sum();
                        let mut next = 0;
                        for (rank, slice) in slices.iter().enumerate() {
                            let case = format!("size {size} count {count} element {element_size} {gather:?} rank {rank}");
                            assert_eq!(slice.start, next, "{case}");
                            assert_eq!(slice.len() % element_size, 0, "{case}");
                            let elements = (slice.len() / element_size) as f64;
                            let share = count as f64 * weight(rank) / total;
                            assert!((elements - share).abs() < 1.0 + 1e-9, "{case}: {elements} elements for a share of {share}");
                            next = slice.end;
                        }
                        assert_eq!(next, len, "size {size} count {count} {gather:?}");
                    }
                }
            }
        }
    }

    /// The expression a plan computes, as nested (lower, higher) pairs.
    #[derive(Clone, Debug, PartialEq)]
    enum Expr {
        Input(usize),
        Combine(Box<Expr>, Box<Expr>),
    }

    fn evaluate(plan: &FoldPlan, rank: usize) -> Expr {
        let mut acc = match plan.seed {
            Seed::Own => Expr::Input(rank),
            Seed::Peer(peer) => Expr::Input(peer),
        };
        for &lower in &plan.folds {
            acc = Expr::Combine(Box::new(Expr::Input(lower)), Box::new(acc));
        }
        acc
    }

    /// r0 ∘ (r1 ∘ (... ∘ r(P-1))), with the innermost pair swapped if asked.
    fn canonical(size: usize, innermost_swapped: bool) -> Expr {
        let mut acc = Expr::Input(size - 1);
        for lower in (0..size - 1).rev() {
            acc = if lower == size - 2 && innermost_swapped {
                Expr::Combine(Box::new(acc), Box::new(Expr::Input(lower)))
            } else {
                Expr::Combine(Box::new(Expr::Input(lower)), Box::new(acc))
            };
        }
        acc
    }

    #[test]
    fn every_fold_plan_computes_the_canonical_order_up_to_the_innermost_pair_of_a_commutative_op() {
        for size in 1..=9 {
            for rank in 0..size {
                for commutative in [false, true] {
                    for in_place in [false, true] {
                        let plan = FoldPlan::new(rank, size, commutative, in_place);
                        let got = evaluate(&plan, rank);
                        let case = format!("size {size} rank {rank} commutative {commutative} in place {in_place}: {plan:?}");
                        if commutative && size > 1 {
                            assert!(got == canonical(size, false) || got == canonical(size, true), "{case}");
                        } else {
                            assert_eq!(got, canonical(size, false), "{case}");
                        }
                        // Set aside exactly when the accumulator, being the
                        // buffer, loses this rank's input before it is folded.
                        let overwritten_first = in_place && plan.seed != Seed::Own;
                        assert_eq!(plan.own_set_aside, overwritten_first && plan.folds.contains(&rank), "{case}");
                    }
                }
            }
        }
    }

    #[test]
    fn at_two_ranks_a_commutative_op_copies_no_rank_s_own_slice() {
        for rank in 0..2 {
            for in_place in [false, true] {
                let plan = FoldPlan::new(rank, 2, true, in_place);
                let copies_own = plan.seed == Seed::Own && !in_place;
                assert!(!copies_own && !plan.own_set_aside, "rank {rank} in place {in_place}: {plan:?}");
            }
        }
    }

    #[test]
    fn the_region_gives_every_line_its_own_cache_line() {
        let region = ParallelRegion::new(0, 3);
        assert_eq!((region.announcement, region.done.line(2), region.end), (0, 192, 256));
    }
}
