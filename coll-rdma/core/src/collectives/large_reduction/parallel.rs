//! Large MPI_Allreduce / MPI_Reduce where every rank can read and write
//! every other's memory (shared memory with cross-memory attach,
//! `PeerReads::read_peer_memory` / `write_peer_memory`): a reduce-scatter
//! in which each rank reduces its own slice of the vector, reading that
//! slice of every rank's input straight from the peers' user buffers, and
//! delivers each reduced chunk, while it is still in cache, straight into
//! the result buffer of every rank that gathers (all of them for
//! allreduce, the root for reduce). Each byte of input is read once, by
//! the rank that owns its slice, and all ranks work at once (on a node
//! with more ranks than cores, as many as there are cores: `set_workers`;
//! the others announce and wait, as below).
//!
//! Short reduces (below `slices_min_bytes`) are not split: the root owns
//! the whole vector and reads every peer's input itself, straight into its
//! result buffer where the fold order allows, while the others only
//! announce and wait (`Shares::RootAlone`). That is one read per peer and
//! one synchronisation round, against a read, a write and two rounds per
//! rank for slices: below some length the saved system calls and cache-line
//! round trips outweigh reducing on one core instead of all. On 4 ranks or
//! more a short reduce goes down a binomial tree of reads instead
//! (`read_tree`: each parent reads its children's partial results), where
//! the operation allows it (commutative, or rooted at rank 0), so that the
//! root reads about log2(size) vectors rather than size - 1.
//!
//! Slices are whole elements in rank order (`slice_of`). For allreduce
//! they are equal (within an element); for reduce the root, which delivers
//! nothing, owns a larger slice, so that it does not wait idle while the
//! others both reduce and deliver theirs (`ROOT_WEIGHT`). The owner folds
//! its slice chunk by chunk (`CHUNK_BYTES` of a peer's input at a time)
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
//!
//! The steps are one state machine (`parallel_run::ParallelCall`): the
//! blocking call resumes it once with every wait waiting, a non-blocking
//! or persistent call polls it as a run (`ParallelRun`).

use std::ops::Range;

use btl_ibmc::{PeerReads, TransportError, Waits};


use super::buffers::{Gather, ReductionBuffers};
use super::parallel_run::{ParallelCall, ParallelRun};
use super::read_tree::{ReadTree, ReadTreeBuffers};
use super::read_tree_run::TreeRunCall;
use crate::patterns::done_lines::DoneLines;
use crate::patterns::meet::{Meet, StallLimits};
use crate::patterns::region::{RegionCursor, LINE};
use crate::patterns::scratch;
use crate::patterns::segments::check_message;
use crate::reduction::Reduction;

/// Bytes of a peer's input read and folded at a time. A chunk and the
/// accumulator it folds into fit a core's L2 (1 MiB here), and every chunk
/// costs each owner a cross-memory read and write, whose fixed cost
/// (entering the kernel, pinning the peer's pages) weighs more than the
/// cache: at np=2, paired against the same build with other chunks in one
/// run, 128 KiB chunks took 1.04-1.12x the time of 512 KiB ones from 256
/// KiB to 16 MiB (allreduce and reduce), 32 KiB 1.3-1.4x, and 1, 2 and 8
/// MiB chunks were no faster than 512 KiB up to 4 MiB and took 1.00-1.21x
/// its time at 16 MiB, where their accumulator spills out of L2.
pub const CHUNK_BYTES: usize = 512 * 1024;

/// The reduce root's share of the vector against another rank's (halves):
/// the others also deliver what they reduce, which costs about half as
/// much again as reducing it (np=2, 1 MiB: 70 us to read and fold half the
/// vector, 35-42 us to copy that half across processes).
const ROOT_WEIGHT: u64 = 3;
const OTHER_WEIGHT: u64 = 2;

pub(super) const INPUT_ADDRESS_WORD: usize = 0;
pub(super) const RESULT_ADDRESS_WORD: usize = 8;
pub(super) const LENGTH_WORD: usize = 16;
pub(super) const FLAG_WORD: usize = 24;
// Words 32-55 of the line are the read tree's (`read_tree`).

/// The region, identical on every rank.
#[derive(Clone, Copy, Debug)]
pub(super) struct ParallelRegion {
    pub announcement: usize,
    pub done: DoneLines,
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

/// How the vector is split among the ranks' slices. `workers` ranks at
/// most hold a slice (`ParallelReduction::set_workers`); the others only
/// announce their buffers and wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shares {
    /// Allreduce: equal slices, for ranks 0 to `workers - 1`.
    Equal { workers: usize },
    /// Reduce: the root's slice `ROOT_WEIGHT / OTHER_WEIGHT` times
    /// another's, since the others also deliver theirs; the root and the
    /// `workers - 1` ranks after it (cyclically) hold one.
    RootWeighted { root: usize, workers: usize },
    /// Reduce of a short vector: the root reduces all of it.
    RootAlone(usize),
}

impl Shares {
    /// Equal slices for every rank.
    pub const EVERY_RANK_EQUAL: Shares = Shares::Equal { workers: usize::MAX };

    fn weight(self, rank: usize, size: usize) -> u64 {
        match self {
            Shares::Equal { workers } => u64::from(rank < workers.max(1)),
            Shares::RootWeighted { root, .. } if root == rank => ROOT_WEIGHT,
            Shares::RootWeighted { root, workers } if (rank + size - root) % size < workers => OTHER_WEIGHT,
            Shares::RootWeighted { .. } => 0,
            Shares::RootAlone(root) => u64::from(root == rank),
        }
    }
}

/// `rank`'s slice of `len` bytes of `element_size`-byte elements among
/// `size` ranks: the slices are in rank order, in whole elements, and in
/// proportion to `shares`. Computed alone, without the other slices, so
/// that a call allocates nothing.
pub fn slice_of(rank: usize, size: usize, len: usize, element_size: usize, shares: Shares) -> Range<usize> {
    let total: u128 = (0..size).map(|other| u128::from(shares.weight(other, size))).sum();
    let before: u128 = (0..rank).map(|other| u128::from(shares.weight(other, size))).sum();
    let count = (len / element_size) as u128;
    let boundary = |weight_before: u128| (count * weight_before / total) as usize * element_size;
    boundary(before)..boundary(before + u128::from(shares.weight(rank, size)))
}

/// Where a peer's input lies and where its result goes (0: it does not
/// gather), as it announced them.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PeerBuffers {
    pub input: u64,
    pub result: u64,
}

/// Buffers reused from call to call, each at most a chunk long.
#[derive(Debug)]
pub(super) struct ChunkBuffers {
    /// Bytes folded at a time (`CHUNK_BYTES` unless set).
    chunk_bytes: usize,
    /// A peer's input chunk on its way into the fold.
    staging: Vec<u8>,
    /// In place: this rank's own input chunk, copied aside before the
    /// result overwrites it.
    own_input: Vec<u8>,
    /// A rank that does not gather (reduce, not the root): the accumulator
    /// of the chunk it folds, then writes into the root's result buffer.
    outgoing: Vec<u8>,
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
    /// Reduces (`Gather::Root`) of at least this many bytes are split into
    /// slices among the ranks; shorter ones the root reduces alone
    /// (`Shares::RootAlone`). The same on every rank; allreduce ignores it.
    slices_min_bytes: usize,
    /// Ranks that hold a slice at most (at least 1): on a node with more
    /// ranks than cores, as many as there are cores, since more only take
    /// turns on them (np=4 on 2 cores, reduce of 256 KiB and 1 MiB: 0.70
    /// and 0.68 of the time with all four, allreduce of 64 KiB 0.67). The
    /// same on every rank.
    workers: usize,
    /// Calls the root reduced alone so far.
    root_alone_calls: u64,
    /// Short reduces gathered down the read tree instead (4 ranks or more).
    read_tree_calls: u64,
    /// Indexed by rank; this rank's entry is unused.
    peers: Vec<PeerBuffers>,
    chunks: ChunkBuffers,
    tree_buffers: ReadTreeBuffers,
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
            slices_min_bytes: 0,
            workers: usize::MAX,
            root_alone_calls: 0,
            read_tree_calls: 0,
            peers: vec![PeerBuffers::default(); size],
            chunks: ChunkBuffers::new(CHUNK_BYTES),
            tree_buffers: ReadTreeBuffers::default(),
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

    /// Reduces shorter than `slices_min_bytes` are reduced by the root
    /// alone; 0 splits every one, `usize::MAX` none.
    pub fn set_slices_min_bytes(&mut self, slices_min_bytes: usize) {
        self.slices_min_bytes = slices_min_bytes;
    }

    pub fn slices_min_bytes(&self) -> usize {
        self.slices_min_bytes
    }

    /// At most `workers` ranks reduce a slice; `usize::MAX` all of them.
    pub fn set_workers(&mut self, workers: usize) {
        self.workers = workers.max(1);
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Folds go `chunk_bytes` at a time (rounded down to whole elements,
    /// at least one), instead of `CHUNK_BYTES`: tests cross chunk
    /// boundaries with short messages this way.
    pub fn set_chunk_bytes(&mut self, chunk_bytes: usize) {
        self.chunks = ChunkBuffers::new(chunk_bytes.max(1));
    }

    /// Reduces of `calls` that the root reduced alone.
    pub fn root_alone_calls(&self) -> u64 {
        self.root_alone_calls
    }

    /// Reduces of `calls` gathered down the read tree.
    pub fn read_tree_calls(&self) -> u64 {
        self.read_tree_calls
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
    /// transport reads peer memory on every rank (agreed at setup). The
    /// same state machine as a run's (`parallel_run`), resumed once with
    /// every wait waiting.
    pub fn reduce<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        waits: Waits<'_>,
        op: &R,
        gather: Gather,
        mut buffers: ReductionBuffers<'_>,
    ) -> Result<(), TransportError> {
        self.check_call(op, gather, &buffers)?;
        if let Some(tree) = self.read_tree_for(buffers.len(), gather, op.is_commutative()) {
            let call = self.next_tree_call(tree);
            return self.tree_buffers.reduce(transport, waits, op, call, buffers);
        }
        let mut call = self.next_call(op, gather, &buffers);
        call.resume(transport, op, &mut buffers, &mut self.peers, &mut self.chunks, Meet::Block(waits)).map(drop)
    }

    /// Starts one call as a resumable run (`parallel_run`): what `reduce`
    /// does, advanced by `Schedule::advance`. Takes the call's number now,
    /// so runs must be started in the communicator's post order and
    /// advanced one at a time in that order, after every earlier call
    /// (`schedule_queue`). A short reduce that the read tree gathers runs
    /// down it (`read_tree_run`). A run stuck longer than `limits` allow
    /// fails (and warns before).
    pub fn start<'a, R: Reduction>(
        &mut self,
        op: R,
        gather: Gather,
        buffers: ReductionBuffers<'a>,
        limits: StallLimits,
    ) -> Result<ParallelRun<'a, R>, TransportError> {
        self.check_call(&op, gather, &buffers)?;
        if let Some(tree) = self.read_tree_for(buffers.len(), gather, op.is_commutative()) {
            return Ok(ParallelRun::down_the_tree(self.next_tree_call(tree), op, buffers, limits));
        }
        let call = self.next_call(&op, gather, &buffers);
        Ok(ParallelRun::new(call, op, buffers, self.chunks.chunk_bytes, limits))
    }

    /// The next call, down the read tree: numbered among this reduction's
    /// calls, its words in the same announcement line.
    fn next_tree_call(&mut self, tree: ReadTree) -> TreeRunCall {
        self.calls += 1;
        self.read_tree_calls += 1;
        TreeRunCall::new(tree, self.calls, self.region.announcement, self.region.done, self.chunks.chunk_bytes)
    }

    /// Whether a `len`-byte call that `applies` goes down the read tree.
    /// The same answer on every rank.
    pub fn takes_read_tree(&self, len: usize, gather: Gather, commutative: bool) -> bool {
        self.read_tree_for(len, gather, commutative).is_some()
    }

    fn read_tree_for(&self, len: usize, gather: Gather, commutative: bool) -> Option<ReadTree> {
        match self.shares(len, gather) {
            Shares::RootAlone(root) if ReadTree::serves(self.size, root, commutative) => Some(ReadTree::new(self.rank, self.size, root)),
            _ => None,
        }
    }

    fn shares(&self, len: usize, gather: Gather) -> Shares {
        match gather {
            Gather::All => Shares::Equal { workers: self.workers },
            Gather::Root(root) if len < self.slices_min_bytes => Shares::RootAlone(root),
            Gather::Root(root) => Shares::RootWeighted { root, workers: self.workers },
        }
    }

    fn check_call<R: Reduction + ?Sized>(&self, op: &R, gather: Gather, buffers: &ReductionBuffers<'_>) -> Result<(), TransportError> {
        if matches!(gather, Gather::Root(root) if root >= self.size) {
            return Err(TransportError::Failed(format!("reduce root {gather:?} outside a communicator of {}", self.size)));
        }
        match buffers {
            ReductionBuffers::Separate { send, recv } if gathers(gather, self.rank) => check_message(op, send, Some(recv.len())),
            ReductionBuffers::Separate { send, .. } => check_message(op, send, None),
            ReductionBuffers::InPlace(buffer) => check_message(op, buffer, None),
        }
    }

    /// The next call in slices (the read tree's calls aside), its number
    /// taken.
    fn next_call<R: Reduction + ?Sized>(&mut self, op: &R, gather: Gather, buffers: &ReductionBuffers<'_>) -> ParallelCall {
        self.calls += 1;
        let len = buffers.len();
        let shares = self.shares(len, gather);
        if let Shares::RootAlone(_) = shares {
            self.root_alone_calls += 1;
        }
        let mine = slice_of(self.rank, self.size, len, op.element_size(), shares);
        let gathers = gathers(gather, self.rank);
        let in_place = gathers && matches!(buffers, ReductionBuffers::InPlace(_));
        let plan = FoldPlan::new(self.rank, self.size, op.is_commutative(), in_place);
        ParallelCall::new((self.rank, self.size), self.region, self.calls, mine, plan, gathers, buffers)
    }
}

/// Whether `rank` ends with the result.
fn gathers(gather: Gather, rank: usize) -> bool {
    match gather {
        Gather::All => true,
        Gather::Root(root) => root == rank,
    }
}

impl ChunkBuffers {
    pub(super) fn new(chunk_bytes: usize) -> Self {
        ChunkBuffers { chunk_bytes, staging: Vec::new(), own_input: Vec::new(), outgoing: Vec::new() }
    }

    /// Bytes folded at a time for `element_size`-byte elements.
    pub(super) fn chunk_len(&self, element_size: usize) -> usize {
        (self.chunk_bytes / element_size).max(1) * element_size
    }

    /// Folds the part `mine` of `rank`'s slice of every rank's input, chunk by chunk,
    /// in the order `plan` gives, and writes each folded chunk into every
    /// gathering peer's result buffer (and into its own when `gathers`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reduce_and_deliver<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        op: &R,
        peers: &[PeerBuffers],
        rank: usize,
        plan: &FoldPlan,
        mine: &Range<usize>,
        gathers: bool,
        buffers: &mut ReductionBuffers<'_>,
    ) -> Result<(), TransportError> {
        let chunk_len = self.chunk_len(op.element_size());
        let staged_len = chunk_len.min(mine.len());
        // Where this rank's result goes: its own buffer when it gathers
        // (in place: the buffer that also holds its input).
        let folds_in_place = gathers && matches!(buffers, ReductionBuffers::InPlace(_));
        if plan.own_set_aside {
            scratch(&mut self.own_input, staged_len);
        }
        if !gathers {
            scratch(&mut self.outgoing, staged_len);
        }
        let mut start = mine.start;
        while start < mine.end {
            let chunk = start..(start + chunk_len).min(mine.end);
            let n = chunk.len();
            let (own, acc): (&[u8], &mut [u8]) = match buffers {
                ReductionBuffers::Separate { send, recv } if gathers => (&send[chunk.clone()], &mut recv[chunk.clone()]),
                ReductionBuffers::Separate { send, .. } => (&send[chunk.clone()], &mut self.outgoing[..n]),
                ReductionBuffers::InPlace(buffer) if !gathers => (&buffer[chunk.clone()], &mut self.outgoing[..n]),
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
                Seed::Peer(peer) => transport.read_peer_memory(peer, peers[peer].input + chunk.start as u64, acc)?,
            }
            for lower in plan.folds() {
                if lower == rank {
                    op.combine(own, acc);
                } else {
                    // Grown on first use: at np=2 a commutative fold never
                    // stages (it reads its peer straight into the result).
                    let staged = scratch(&mut self.staging, n);
                    transport.read_peer_memory(lower, peers[lower].input + chunk.start as u64, staged)?;
                    op.combine(staged, acc);
                }
            }
            let receivers = peers.iter().enumerate().filter(|&(peer, buffers)| peer != rank && buffers.result != 0);
            for (peer, buffers) in receivers {
                transport.write_peer_memory(peer, buffers.result + chunk.start as u64, acc)?;
            }
            start = chunk.end;
        }
        Ok(())
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
/// starts as `seed`, then each rank of `folds()` is combined in as the
/// lower operand (`acc = input(rank) ∘ acc`).
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
///
/// When this rank's input is folded after the accumulator was overwritten
/// in place, it must be set aside first (`own_set_aside`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FoldPlan {
    seed: Seed,
    /// The other member of the innermost pair, folded first (none for a
    /// single rank); then every rank below the pair, downwards.
    pair_fold: Option<usize>,
    below_pair: Range<usize>,
    own_set_aside: bool,
}

impl FoldPlan {
    pub(super) fn new(rank: usize, size: usize, commutative: bool, in_place: bool) -> Self {
        let last = size - 1;
        let below_pair = 0..last.saturating_sub(1);
        let (seed, pair_fold) = if size == 1 {
            (Seed::Own, None)
        } else if rank == last && in_place {
            (Seed::Own, Some(last - 1))
        } else if rank == last - 1 && in_place && commutative {
            (Seed::Own, Some(last))
        } else if rank == last && commutative {
            (Seed::Peer(last - 1), Some(last))
        } else if rank == last {
            (Seed::Own, Some(last - 1))
        } else {
            (Seed::Peer(last), Some(last - 1))
        };
        let mut plan = FoldPlan { seed, pair_fold, below_pair, own_set_aside: false };
        plan.own_set_aside = in_place && plan.folds().any(|folded| folded == rank);
        plan
    }

    /// The ranks combined into the accumulator, in order.
    fn folds(&self) -> impl Iterator<Item = usize> + '_ {
        self.pair_fold.into_iter().chain(self.below_pair.clone().rev())
    }
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
                    let workers = [1, 2, size, usize::MAX];
                    let every_shares = workers
                        .iter()
                        .map(|&workers| Shares::Equal { workers })
                        .chain((0..size).flat_map(|root| workers.iter().map(move |&workers| Shares::RootWeighted { root, workers })))
                        .chain((0..size).map(Shares::RootAlone));
                    for shares in every_shares {
                        let slices: Vec<_> = (0..size).map(|rank| slice_of(rank, size, len, element_size, shares)).collect();
                        let weight = |rank: usize| match shares {
                            Shares::RootWeighted { root, .. } if root == rank => ROOT_WEIGHT as f64,
                            Shares::RootWeighted { root, workers } if (rank + size - root) % size < workers => OTHER_WEIGHT as f64,
                            Shares::RootWeighted { .. } => 0.0,
                            Shares::RootAlone(root) if root == rank => 1.0,
                            Shares::RootAlone(_) => 0.0,
                            Shares::Equal { workers } if rank < workers => 1.0,
                            Shares::Equal { .. } => 0.0,
                        };
                        let total: f64 = (0..size).map(weight).sum();
                        let mut next = 0;
                        for (rank, slice) in slices.iter().enumerate() {
                            let case = format!("size {size} count {count} element {element_size} {shares:?} rank {rank}");
                            assert_eq!(slice.start, next, "{case}");
                            assert_eq!(slice.len() % element_size, 0, "{case}");
                            let elements = (slice.len() / element_size) as f64;
                            let share = count as f64 * weight(rank) / total;
                            assert!((elements - share).abs() < 1.0 + 1e-9, "{case}: {elements} elements for a share of {share}");
                            next = slice.end;
                        }
                        assert_eq!(next, len, "size {size} count {count} {shares:?}");
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
        for lower in plan.folds() {
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
                        assert_eq!(plan.own_set_aside, overwritten_first && plan.folds().any(|folded| folded == rank), "{case}");
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
