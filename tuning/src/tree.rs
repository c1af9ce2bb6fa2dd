//! The degree-k reduction tree rooted at rank 0 (Gupta 2002, section 6.2),
//! for any communicator size.
//!
//! In step s the ranks that are multiples of (k+1)^(s+1) receive from the
//! ranks at distances j·(k+1)^s, j = 1..=k, that exist. A rank sends once,
//! in the first step where it is not such a multiple, and then holds the
//! partial of the ranks [r, r + (k+1)^s) ∩ [0, P). A receiver's children,
//! in ascending rank order, therefore hold consecutive rank ranges that
//! follow its own, so folding them in that order yields the canonical
//! r0 ∘ r1 ∘ … ∘ r(P-1) with only associativity assumed.
//!
//! Each child has a fixed *position* among its parent's incoming slots:
//! the step's offset among all steps' fan-outs plus j-1. Positions depend
//! only on (size, k), so every rank agrees on them.
//!
//! The table lives here, apart from the windows it is laid out in, so that
//! the simulator (`coll-rdma-sim`) runs exactly the tree the component
//! builds.

use crate::dissemination::round_fanouts;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub peer: usize,
    /// Which of the parent's incoming slot rings the child writes.
    pub position: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeLinks {
    pub parent: Option<Link>,
    /// Ascending rank order, which is also ascending step order.
    pub children: Vec<Link>,
}

impl TreeLinks {
    /// Incoming slot rings every rank reserves: rank 0's child count, the
    /// largest of any rank.
    pub fn positions(size: usize, degree: usize) -> usize {
        round_fanouts(size, degree).iter().sum()
    }

    pub fn new(rank: usize, size: usize, degree: usize) -> Self {
        assert!(rank < size, "rank {rank} outside a communicator of {size}");
        assert!(degree >= 1, "the tree degree is at least 1");
        let base = degree + 1;
        let mut parent = None;
        let mut children = Vec::new();
        let mut stride = 1usize;
        let mut first_position = 0;
        for fanout in round_fanouts(size, degree) {
            let block = stride.saturating_mul(base);
            let offset = rank % block;
            if offset != 0 {
                let j = offset / stride;
                parent = Some(Link { peer: rank - offset, position: first_position + j - 1 });
                break;
            }
            for j in 1..=fanout {
                let child = rank + j * stride;
                if child < size {
                    children.push(Link { peer: child, position: first_position + j - 1 });
                }
            }
            first_position += fanout;
            stride = block;
        }
        TreeLinks { parent, children }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranks whose contributions `rank`'s partial holds once its
    /// children are folded in, from the links alone.
    fn covered(trees: &[TreeLinks], rank: usize) -> Vec<usize> {
        let mut ranks = vec![rank];
        for child in &trees[rank].children {
            ranks.extend(covered(trees, child.peer));
        }
        ranks
    }

    #[test]
    fn the_tree_folds_every_rank_once_in_rank_order() {
        for size in 1..=80 {
            for degree in 1..=9 {
                let trees: Vec<TreeLinks> = (0..size).map(|rank| TreeLinks::new(rank, size, degree)).collect();
                assert_eq!(covered(&trees, 0), (0..size).collect::<Vec<_>>(), "size {size} k {degree}");
                assert!(trees[0].parent.is_none());
                let positions = TreeLinks::positions(size, degree);
                for (rank, tree) in trees.iter().enumerate() {
                    let mut seen = std::collections::HashSet::new();
                    for child in &tree.children {
                        assert!(child.position < positions);
                        assert!(seen.insert(child.position), "position reused at rank {rank}");
                        let back = trees[child.peer].parent.expect("a child has a parent");
                        assert_eq!(back, Link { peer: rank, position: child.position });
                    }
                    assert!(tree.children.len() <= positions);
                    if rank != 0 {
                        assert!(tree.parent.is_some(), "rank {rank} of {size} has no parent");
                    }
                }
            }
        }
    }

    #[test]
    fn a_step_never_has_more_than_k_senders() {
        for size in 2..=80 {
            for degree in 1..=9 {
                let trees: Vec<TreeLinks> = (0..size).map(|rank| TreeLinks::new(rank, size, degree)).collect();
                for (rank, tree) in trees.iter().enumerate() {
                    let mut per_step = std::collections::HashMap::new();
                    for child in &tree.children {
                        let distance = child.peer - rank;
                        let mut stride = 1;
                        while distance % (stride * (degree + 1)) == 0 {
                            stride *= degree + 1;
                        }
                        assert!(distance / stride <= degree);
                        *per_step.entry(stride).or_insert(0) += 1;
                    }
                    assert!(per_step.values().all(|&n| n <= degree));
                }
            }
        }
    }
}
