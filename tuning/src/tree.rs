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

/// The two-level tree across nodes: within each node the degree-k tree
/// over its ranks (by their index on the node) rooted at the node's leader
/// (its lowest rank), and among the leaders the degree-k tree over them
/// (by leader index) rooted at the first leader. Only leaders have a
/// parent or children on other nodes.
///
/// Each rank's partial covers its local subtree; a leader's, after its
/// node's children, the whole node, and after its leader children the
/// nodes of its leader subtree. Where every node holds consecutive ranks
/// and leaders ascend with them, a leader's node children come before its
/// leader children in rank order and every subtree covers consecutive
/// ranks, so folding children in list order keeps the canonical order, as
/// in the flat tree. Otherwise (round-robin placement) it does not; the
/// caller must then keep the flat tree for non-commutative operations.
#[derive(Clone, Copy, Debug)]
pub struct TwoLevelShape<'a> {
    /// The ranks of this rank's node, ascending; the first is the leader.
    pub members: &'a [usize],
    /// Every node's leader, ascending.
    pub leaders: &'a [usize],
    /// Slot rings every rank reserves for its node's children: the most
    /// any node's leader needs, `positions(largest node, degree)`. A
    /// leader's leader children use the positions after these.
    pub node_positions: usize,
}

impl TreeLinks {
    /// `rank`'s links in the two-level tree of `shape`.
    pub fn two_level(rank: usize, shape: &TwoLevelShape, degree: usize) -> Self {
        let members = shape.members;
        let local = members.iter().position(|&member| member == rank).expect("rank is a member of its own node");
        let within = TreeLinks::new(local, members.len(), degree);
        let on_node = |link: Link| Link { peer: members[link.peer], position: link.position };
        let mut links = TreeLinks { parent: within.parent.map(on_node), children: within.children.into_iter().map(on_node).collect() };
        if local == 0 {
            let leaders = shape.leaders;
            let index = leaders.binary_search(&rank).expect("a node's first rank is among the leaders");
            let among = TreeLinks::new(index, leaders.len(), degree);
            let across = |link: Link| Link { peer: leaders[link.peer], position: shape.node_positions + link.position };
            links.parent = among.parent.map(across);
            links.children.extend(among.children.into_iter().map(across));
        }
        links
    }

    /// Slot rings the two-level tree needs on every rank: the largest
    /// node's children, then a leader's children among `leaders` leaders.
    pub fn two_level_positions(largest_node: usize, leaders: usize, degree: usize) -> usize {
        Self::positions(largest_node, degree) + Self::positions(leaders, degree)
    }

    /// Slot rings to reserve so that the two-level tree fits where it most
    /// likely will: the flat tree's plus one more step of `degree`, or,
    /// where less, what the worst placement of `size` ranks needs (a node
    /// of m ranks and one of a single rank for every other: positions(m) +
    /// positions(size + 1 - m)). Nodes of equal size always fit (m·N ranks
    /// need positions(m) + positions(N), at most one step more than
    /// positions(m·N)); very uneven ones may need more (nodes of 2, 1, 7,
    /// 1 and 2 ranks at degree 1: 6 rings, 5 reserved), and then the
    /// caller keeps the flat tree. Reserving for every placement would
    /// almost double the rings of large communicators.
    pub fn two_level_reserve(size: usize, degree: usize) -> usize {
        let every_placement = (1..=size.max(1))
            .map(|largest| Self::two_level_positions(largest, size + 1 - largest, degree))
            .max()
            .unwrap_or(0);
        (Self::positions(size, degree) + degree).min(every_placement)
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

    /// Node keys per rank -> (members of each rank's node, leaders,
    /// node positions), as the component derives them.
    fn two_level_trees(node_of: &[usize], degree: usize) -> Vec<TreeLinks> {
        let size = node_of.len();
        let members_of = |rank: usize| (0..size).filter(|&other| node_of[other] == node_of[rank]).collect::<Vec<_>>();
        let leaders: Vec<usize> = (0..size).filter(|&rank| members_of(rank)[0] == rank).collect();
        let largest = (0..size).map(|rank| members_of(rank).len()).max().unwrap_or(1);
        let node_positions = TreeLinks::positions(largest, degree);
        (0..size)
            .map(|rank| {
                let members = members_of(rank);
                TreeLinks::two_level(rank, &TwoLevelShape { members: &members, leaders: &leaders, node_positions }, degree)
            })
            .collect()
    }

    fn blocks(sizes: &[usize]) -> Vec<usize> {
        sizes.iter().enumerate().flat_map(|(node, &count)| std::iter::repeat_n(node, count)).collect()
    }

    #[test]
    fn the_two_level_tree_on_consecutive_nodes_folds_in_rank_order_and_crosses_only_between_leaders() {
        let placements = [blocks(&[1, 2, 7]), blocks(&[7, 2, 1]), blocks(&[2, 1, 7, 1, 2]), blocks(&[5]), blocks(&[1, 1, 1, 1]), blocks(&[3, 3, 3, 3, 3])];
        for node_of in &placements {
            let size = node_of.len();
            for degree in 1..=4 {
                let trees = two_level_trees(node_of, degree);
                assert_eq!(covered(&trees, 0), (0..size).collect::<Vec<_>>(), "{node_of:?} k {degree}");
                let largest = (0..size).map(|rank| node_of.iter().filter(|&&node| node == node_of[rank]).count()).max().unwrap_or(1);
                let leaders = (0..size).filter(|&rank| node_of.iter().position(|&node| node == node_of[rank]) == Some(rank)).count();
                let bound = TreeLinks::two_level_positions(largest, leaders, degree);
                for (rank, tree) in trees.iter().enumerate() {
                    let mut seen = std::collections::HashSet::new();
                    for child in &tree.children {
                        assert!(child.position < bound, "{node_of:?} k {degree}: position {} beyond {bound}", child.position);
                        assert!(seen.insert(child.position), "position reused at rank {rank}");
                        assert_eq!(trees[child.peer].parent, Some(Link { peer: rank, position: child.position }));
                        if node_of[child.peer] != node_of[rank] {
                            let is_leader = |r: usize| node_of.iter().position(|&n| n == node_of[r]) == Some(r);
                            assert!(is_leader(rank) && is_leader(child.peer), "{node_of:?}: {rank} -> {} crosses", child.peer);
                        }
                    }
                    assert_eq!(tree.parent.is_none(), rank == 0);
                }
            }
        }
    }

    #[test]
    fn round_robin_placement_breaks_the_rank_order() {
        let node_of: Vec<usize> = (0..9).map(|rank| rank % 3).collect();
        let trees = two_level_trees(&node_of, 2);
        let mut order = covered(&trees, 0);
        assert_ne!(order, (0..9).collect::<Vec<_>>(), "round robin happened to fold in rank order");
        order.sort_unstable();
        assert_eq!(order, (0..9).collect::<Vec<_>>(), "every rank is still folded once");
    }

    #[test]
    fn equal_nodes_fit_the_reserve_and_uneven_ones_may_not() {
        for ranks_per_node in 1..=40 {
            for nodes in 1..=40 {
                for degree in 1..=6 {
                    let needed = TreeLinks::two_level_positions(ranks_per_node, nodes, degree);
                    let reserve = TreeLinks::two_level_reserve(ranks_per_node * nodes, degree);
                    assert!(needed <= reserve, "{nodes} nodes of {ranks_per_node}, k {degree}: {needed} > {reserve}");
                }
            }
        }
        // Nodes of 2, 1, 7, 1 and 2 ranks at degree 1: 3 rings for the
        // node of 7, 3 among the 5 leaders; 4 + 1 reserved.
        assert_eq!((TreeLinks::two_level_positions(7, 5, 1), TreeLinks::two_level_reserve(13, 1)), (6, 5));
        // Small communicators fit every placement in the flat tree's rings
        // (4 ranks at degree 2: 3), large ones get one step more (64: 8 + 2).
        assert_eq!((TreeLinks::positions(4, 2), TreeLinks::two_level_reserve(4, 2)), (3, 3));
        assert_eq!((TreeLinks::positions(64, 2), TreeLinks::two_level_reserve(64, 2)), (8, 10));
        // The flat tree must always fit in the reserve (a communicator whose
        // placement is refused falls back to it in the same window), and
        // the reserve never costs more than one step of k over it.
        for size in 1..=80 {
            for degree in 1..=5 {
                let (flat, reserve) = (TreeLinks::positions(size, degree), TreeLinks::two_level_reserve(size, degree));
                assert!(flat <= reserve && reserve <= flat + degree, "size {size} k {degree}: flat {flat}, reserve {reserve}");
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
