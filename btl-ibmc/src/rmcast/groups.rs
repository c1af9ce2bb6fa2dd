//! Who does what for one root's messages: the co-root scheme.
//!
//! Ranks are numbered relative to the root (v = 0 is the root). Relative
//! ranks 1..=C are the co-roots, the rest are leaves. The root and the
//! co-roots are the C+1 *collectors*; leaf v belongs to collector
//! (v - C - 1) mod (C + 1), dealt round-robin so subgroups differ in size
//! by at most one. A collector watches one ACK word per member:
//!
//! * the root's members are the co-roots (positions 0..C, their words
//!   carry their subgroup's progress, see `receiver`) and then its leaves;
//! * a co-root's members are its leaves.
//!
//! Positions are dense per collector, so every collector's ACK array for
//! one root fits in `ack_slots_per_root` words, and each word has exactly
//! one writer: the member it belongs to.
//!
//! The root reaches the co-roots reliably along a binomial tree over
//! relative ranks 0..=C: node j forwards to j + 2^k for every 2^k > j.
//!
//! Public so that the simulator (`coll-rdma-sim`) runs the same groups.

/// One member of a collector's subgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    pub rank: usize,
    pub position: usize,
    /// Co-roots receive every piece reliably, so they are never sent
    /// retransmissions; their word only carries flow control.
    pub is_co_root: bool,
}

/// What one rank does for one root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Root,
    /// Acknowledges to the root at `position`, and collects for its own
    /// subgroup.
    CoRoot { position: usize },
    Leaf { collector: usize, position: usize },
}

#[derive(Clone, Copy, Debug)]
pub struct Groups {
    root: usize,
    size: usize,
    co_roots: usize,
}

impl Groups {
    /// `co_roots` is at most `size - 1`.
    pub fn new(root: usize, size: usize, co_roots: usize) -> Self {
        assert!(root < size && co_roots < size.max(1), "root {root} or {co_roots} co-roots outside {size} ranks");
        Groups { root, size, co_roots }
    }

    /// Words of ACK array one collector needs per root, for any root: the
    /// root's array is the longest (its co-roots plus the largest share of
    /// leaves).
    pub fn ack_slots_per_root(size: usize, co_roots: usize) -> usize {
        let leaves = size.saturating_sub(1 + co_roots);
        co_roots + leaves.div_ceil(co_roots + 1)
    }

    fn relative(&self, rank: usize) -> usize {
        (rank + self.size - self.root) % self.size
    }

    fn absolute(&self, relative: usize) -> usize {
        (relative + self.root) % self.size
    }

    fn collectors(&self) -> usize {
        self.co_roots + 1
    }

    pub fn role(&self, rank: usize) -> Role {
        let v = self.relative(rank);
        if v == 0 {
            Role::Root
        } else if v <= self.co_roots {
            Role::CoRoot { position: v - 1 }
        } else {
            let leaf = v - self.co_roots - 1;
            let collector = leaf % self.collectors();
            let share_index = leaf / self.collectors();
            let position = if collector == 0 { self.co_roots + share_index } else { share_index };
            Role::Leaf { collector: self.absolute(collector), position }
        }
    }

    /// The subgroup `collector` watches, by position (empty for a leaf).
    pub fn members(&self, collector: usize) -> Vec<Member> {
        let c = self.relative(collector);
        if c > self.co_roots {
            return Vec::new();
        }
        let mut members = Vec::new();
        if c == 0 {
            members.extend((1..=self.co_roots).map(|v| Member { rank: self.absolute(v), position: v - 1, is_co_root: true }));
        }
        let first_leaf = self.co_roots + 1;
        let leaves = (first_leaf + c..self.size).step_by(self.collectors());
        let first_position = members.len();
        members.extend(leaves.enumerate().map(|(k, v)| Member { rank: self.absolute(v), position: first_position + k, is_co_root: false }));
        members
    }

    /// The rank that passes each piece on to co-root `rank` (the inverse of
    /// `forward_to`); None for the root and the leaves.
    pub fn forwarded_by(&self, rank: usize) -> Option<usize> {
        let j = self.relative(rank);
        if j == 0 || j > self.co_roots {
            return None;
        }
        let highest_bit = 1usize << (usize::BITS - 1 - j.leading_zeros());
        Some(self.absolute(j - highest_bit))
    }

    /// The co-roots `rank` passes each piece to over the reliable channel.
    pub fn forward_to(&self, rank: usize) -> Vec<usize> {
        let j = self.relative(rank);
        if j > self.co_roots {
            return Vec::new();
        }
        let mut children = Vec::new();
        let mut step = 1usize;
        while j + step <= self.co_roots {
            if step > j {
                children.push(self.absolute(j + step));
            }
            step *= 2;
        }
        children
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_receiver_has_one_collector_and_positions_are_dense() {
        for size in 1..=40 {
            for co_roots in 0..size {
                for root in [0, size / 2, size - 1] {
                    let groups = Groups::new(root, size, co_roots);
                    let per_root = Groups::ack_slots_per_root(size, co_roots);
                    let mut watched_by = vec![Vec::new(); size];
                    for collector in 0..size {
                        let members = groups.members(collector);
                        assert!(members.len() <= per_root, "size {size} C {co_roots}: array too short");
                        for (index, member) in members.iter().enumerate() {
                            assert_eq!(member.position, index, "positions must be dense");
                            watched_by[member.rank].push((collector, member.position, member.is_co_root));
                        }
                    }
                    assert!(watched_by[root].is_empty(), "the root is nobody's member");
                    for rank in (0..size).filter(|&r| r != root) {
                        let [(collector, position, is_co_root)] = watched_by[rank][..] else {
                            panic!("size {size} C {co_roots} root {root}: rank {rank} watched by {:?}", watched_by[rank]);
                        };
                        let expected = match groups.role(rank) {
                            Role::CoRoot { position } => (root, position, true),
                            Role::Leaf { collector, position } => (collector, position, false),
                            Role::Root => unreachable!(),
                        };
                        assert_eq!((collector, position, is_co_root), expected, "size {size} C {co_roots} rank {rank}");
                    }
                    let sizes: Vec<usize> = (0..=co_roots).map(|v| groups.members((root + v) % size).iter().filter(|m| !m.is_co_root).count()).collect();
                    let (least, most) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
                    assert!(most - least <= 1, "subgroups unbalanced: {sizes:?}");
                }
            }
        }
    }

    #[test]
    fn the_binomial_forwarding_reaches_each_co_root_exactly_once() {
        for size in 1..=40 {
            for co_roots in 0..size {
                let root = size / 3;
                let groups = Groups::new(root, size, co_roots);
                let mut reached = vec![0; size];
                let mut frontier = vec![root];
                let mut depth = 0;
                while let Some(next) = frontier.pop() {
                    for child in groups.forward_to(next) {
                        reached[child] += 1;
                        assert_eq!(groups.forwarded_by(child), Some(next), "size {size} C {co_roots}: who forwards to {child}");
                        frontier.push(child);
                    }
                    depth += 1;
                    assert!(depth <= size, "forwarding loops");
                }
                for v in 0..size {
                    let rank = (root + v) % size;
                    let expected = usize::from((1..=co_roots).contains(&v));
                    assert_eq!(reached[rank], expected, "size {size} C {co_roots}: relative rank {v}");
                }
                assert!((0..size).all(|rank| (reached[rank] == 1) == groups.forwarded_by(rank).is_some()));
                let fanout = groups.forward_to(root).len();
                assert!(co_roots == 0 || fanout == (usize::BITS - co_roots.leading_zeros()) as usize, "root fan-out {fanout}");
            }
        }
    }
}
