//! The shape of the binomial tree in which a short parallel reduce
//! (`parallel`, below the slices threshold) gathers partial
//! results: each parent reads its children's partials straight from their
//! memory and folds them, instead of the root reading every rank's input
//! itself. On 4 ranks the root then reads two vectors instead of three,
//! while another rank reads and folds the third at the same time; on 8,
//! three instead of seven.
//!
//! Ranks are placed by their distance from the root (`virtual = (rank -
//! root) mod size`), so only a commutative operation may use a root other
//! than rank 0 ([`ReadTree::serves`]). Each node covers the consecutive
//! virtual ranks `virtual..virtual + span`; its children cover consecutive
//! ranges after its own rank, nearest first, so folding them in that order
//! into an accumulator that starts as its own input (`acc = acc op
//! partial(child)`) keeps every operand in rank order: `((r(v) op P(c0)) op
//! P(c1)) op ...`. Nearest first also means the children that are ready
//! first (leaves) are read while the farther ones still fold.

//!
//! # The protocol (call n, counted with the parallel reduction's calls)
//!
//! Words 32-55 of the parallel reduction's announcement line are the
//! tree's: where this rank's partial lies, its length, and a ready word.
//!
//! * Leaf: stores its input's address and the length, then ready = n
//!   (release); waits until its parent's done line in its window reads n.
//! * Inner node: stores the address of its partial buffer and the length;
//!   for each child waits for its ready word (== n, else the ranks are out
//!   of step; acquire: the child's partial is complete), checks the length,
//!   folds the child's partial chunk by chunk, and writes n into the child's
//!   done line (release, after its reads returned); then, unless it is the
//!   root, ready = n and waits for its parent's done line.
//!
//! A partial is read only between its ready word and its reader's done
//! line, and its owner rewrites it (or returns, freeing the input) only
//! after that done line: nothing is overwritten under its reader. A ready
//! word is rewritten in call n+1 only after the parent's done line of call
//! n, which the parent writes after reading the word. Every wait is for a
//! step that depends only on the waiter's descendants (ready) or on its
//! ancestors having read it (done), so there is no cycle.
//!
//! The steps are one state machine (`read_tree_run::TreeRunCall`): the
//! blocking reduce resumes it once with every wait waiting, a non-blocking
//! or persistent reduce polls it inside the parallel reduction's run.

use btl_ibmc::{PeerReads, TransportError, Waits};

use super::buffers::ReductionBuffers;
use super::read_tree_run::{TreeRunCall, TreeScratch};
use crate::patterns::meet::Meet;
use crate::reduction::Reduction;

/// In the announcement line (see the module's protocol).
pub(super) const PARTIAL_ADDRESS_WORD: usize = 32;
pub(super) const LENGTH_WORD: usize = 40;
pub(super) const READY_WORD: usize = 48;

/// An inner node keeps its partial buffer between calls up to this length.
const KEPT_PARTIAL_BYTES: usize = 4 << 20;

/// Buffers reused from call to call.
#[derive(Debug, Default)]
pub(crate) struct ReadTreeBuffers {
    /// An inner node's partial (not the root's: it folds into its result).
    partial: Vec<u8>,
    /// A child's partial chunk on its way into the fold.
    staging: Vec<u8>,
}

impl ReadTreeBuffers {
    /// This rank's part of the reduce `call`: `buffers` as
    /// `ParallelReduction::reduce` takes them. The same state machine as a
    /// run's (`read_tree_run`), resumed once with every wait waiting.
    pub(crate) fn reduce<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        waits: Waits<'_>,
        op: &R,
        mut call: TreeRunCall,
        mut buffers: ReductionBuffers<'_>,
    ) -> Result<(), TransportError> {
        let scratch = TreeScratch { partial: &mut self.partial, staging: &mut self.staging };
        let outcome = call.resume(transport, op, &mut buffers, scratch, Meet::Block(waits)).map(drop);
        if self.partial.len() > KEPT_PARTIAL_BYTES {
            // Read by now; a whole vector's worth is not kept after a
            // long reduce (unsplit only where slices are turned off).
            self.partial = Vec::new();
        }
        outcome
    }
}

/// One rank's place in the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadTree {
    rank: usize,
    size: usize,
    root: usize,
}

impl ReadTree {
    /// Fewest ranks for which the tree differs from the root reading every
    /// input itself (at 2 and 3 the root's children are every other rank).
    pub const MIN_RANKS: usize = 4;

    /// Whether a reduce to `root` on `size` ranks goes down the tree: the
    /// same answer on every rank, since it depends only on arguments every
    /// rank passes alike.
    pub fn serves(size: usize, root: usize, commutative: bool) -> bool {
        size >= Self::MIN_RANKS && (commutative || root == 0)
    }

    pub fn new(rank: usize, size: usize, root: usize) -> Self {
        assert!(rank < size && root < size, "rank {rank} and root {root} among {size}");
        ReadTree { rank, size, root }
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    fn virtual_rank(&self) -> usize {
        (self.rank + self.size - self.root) % self.size
    }

    fn actual(&self, virtual_rank: usize) -> usize {
        (virtual_rank + self.root) % self.size
    }

    /// The rank that reads this rank's partial; none at the root.
    pub fn parent(&self) -> Option<usize> {
        let v = self.virtual_rank();
        (v != 0).then(|| self.actual(v - (1 << v.trailing_zeros())))
    }

    /// The ranks whose partials this rank folds, nearest (in rank order
    /// after this one) first.
    pub fn children(&self) -> impl DoubleEndedIterator<Item = usize> + '_ {
        let v = self.virtual_rank();
        // The root's children reach every distance up to the size; another
        // node's only those below its lowest set bit.
        let levels = if v == 0 { usize::BITS - (self.size - 1).leading_zeros() } else { v.trailing_zeros() };
        (0..levels).map(move |level| v + (1 << level)).filter(move |&child| child < self.size).map(move |child| self.actual(child))
    }

    pub fn is_leaf(&self) -> bool {
        self.children().next().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The virtual ranks a node's partial covers, walked through its
    /// children: must be exactly `v..v + span` in order.
    fn covered(tree: &ReadTree, trees: &[ReadTree]) -> Vec<usize> {
        let mut ranks = vec![tree.virtual_rank()];
        for child in tree.children() {
            ranks.extend(covered(&trees[child], trees));
        }
        ranks
    }

    #[test]
    fn every_rank_is_read_once_and_the_root_folds_every_rank_in_order() {
        for size in 1..=33 {
            for root in 0..size {
                let trees: Vec<ReadTree> = (0..size).map(|rank| ReadTree::new(rank, size, root)).collect();
                assert_eq!(covered(&trees[root], &trees), (0..size).collect::<Vec<_>>(), "size {size} root {root}");
                for tree in &trees {
                    for child in tree.children() {
                        assert_eq!(trees[child].parent(), Some(tree.rank), "size {size} root {root}");
                    }
                    assert_eq!(tree.parent().is_none(), tree.rank == root);
                }
            }
        }
    }

    #[test]
    fn the_root_reads_about_log2_partials() {
        let reads = |size: usize| ReadTree::new(0, size, 0).children().count();
        assert_eq!([reads(2), reads(3), reads(4), reads(5), reads(8), reads(9), reads(64)], [1, 2, 2, 3, 3, 4, 6]);
        assert!(ReadTree::new(3, 8, 0).is_leaf());
        assert_eq!(ReadTree::new(4, 8, 0).children().collect::<Vec<_>>(), vec![5, 6]);
        // Rotated: root 5 of 8, virtual rank 4 is rank 1.
        assert_eq!(ReadTree::new(1, 8, 5).children().collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(ReadTree::new(1, 8, 5).parent(), Some(5));
    }

    #[test]
    fn only_commutative_ops_root_the_tree_away_from_rank_0_and_small_groups_keep_the_root_reading_alone() {
        assert!(ReadTree::serves(4, 0, false));
        assert!(!ReadTree::serves(4, 1, false));
        assert!(ReadTree::serves(4, 3, true));
        assert!(!ReadTree::serves(3, 0, true));
    }
}
