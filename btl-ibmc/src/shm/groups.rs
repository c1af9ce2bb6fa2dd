//! Which ranks of a communicator share a node. Each group has a leader,
//! its lowest rank, which creates the group's segment; every rank computes
//! the same groups from the same exchanged keys.

use std::collections::HashMap;
use std::hash::Hash;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeGroups {
    /// The leader of each rank's group, indexed by rank.
    leader_of: Vec<usize>,
    /// Each rank's position among the ranks of its node.
    local_index: Vec<usize>,
    /// How many ranks each rank's node holds, indexed by rank.
    local_count: Vec<usize>,
}

impl NodeGroups {
    /// All `size` ranks on one node.
    pub fn single(size: usize) -> Self {
        NodeGroups { leader_of: vec![0; size], local_index: (0..size).collect(), local_count: vec![size; size] }
    }

    /// `size` ranks split into `nodes` blocks of consecutive ranks, rank r
    /// in block r·nodes/size: what `coll_rdma_test_pretend_nodes` makes of
    /// one host's ranks (the hybrid's node keys use the same blocks).
    pub fn blocks(size: usize, nodes: usize) -> Self {
        let nodes = nodes.max(1);
        Self::from_keys(&(0..size).map(|rank| rank * nodes / size).collect::<Vec<_>>())
    }

    /// Ranks whose keys are equal share a node. One pass, so that setting
    /// up a large communicator stays linear in its size.
    pub fn from_keys<K: Hash + Eq>(keys: &[K]) -> Self {
        // key -> (leader, ranks seen so far)
        let mut nodes: HashMap<&K, (usize, usize)> = HashMap::with_capacity(keys.len());
        let mut leader_of = Vec::with_capacity(keys.len());
        let mut local_index = Vec::with_capacity(keys.len());
        for (rank, key) in keys.iter().enumerate() {
            let node = nodes.entry(key).or_insert((rank, 0));
            leader_of.push(node.0);
            local_index.push(node.1);
            node.1 += 1;
        }
        let local_count = keys.iter().map(|key| nodes[key].1).collect();
        NodeGroups { leader_of, local_index, local_count }
    }

    /// Ranks in the communicator.
    pub fn size(&self) -> usize {
        self.leader_of.len()
    }

    /// Number of nodes.
    pub fn count(&self) -> usize {
        self.leader_of.iter().enumerate().filter(|&(rank, &leader)| rank == leader).count()
    }

    pub fn leader_of(&self, rank: usize) -> usize {
        self.leader_of[rank]
    }

    pub fn same_node(&self, a: usize, b: usize) -> bool {
        self.leader_of[a] == self.leader_of[b]
    }

    /// The ranks on `rank`'s node, in rank order.
    pub fn members(&self, rank: usize) -> impl Iterator<Item = usize> + '_ {
        let leader = self.leader_of[rank];
        (0..self.size()).filter(move |&other| self.leader_of[other] == leader)
    }

    /// `rank`'s position among the ranks of its node.
    pub fn local_index(&self, rank: usize) -> usize {
        self.local_index[rank]
    }

    /// How many ranks share `rank`'s node.
    pub fn local_count(&self, rank: usize) -> usize {
        self.local_count[rank]
    }

    /// The most ranks any rank has on other nodes: the queue pairs the
    /// busiest rank would hold if every pair across nodes connected.
    pub fn most_ranks_elsewhere(&self) -> usize {
        self.local_count.iter().map(|&local| self.size() - local).max().unwrap_or(0)
    }

    /// Each node's leader (its lowest rank), in rank order.
    pub fn leaders(&self) -> Vec<usize> {
        self.leader_of.iter().enumerate().filter(|&(rank, &leader)| rank == leader).map(|(rank, _)| rank).collect()
    }

    /// Whether every node holds an unbroken run of consecutive ranks (the
    /// default by-slot mapping), so that folding each node first and the
    /// nodes in leader order still combines the ranks in rank order.
    pub fn nodes_are_contiguous(&self) -> bool {
        // Runs are unbroken exactly when a rank's node differs from the
        // previous rank's only where a new node starts.
        (1..self.size()).all(|rank| self.leader_of[rank] == self.leader_of[rank - 1] || self.leader_of[rank] == rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_follow_equal_keys_and_index_members_in_rank_order() {
        let groups = NodeGroups::from_keys(&["b", "a", "b", "c", "a", "b"]);
        assert_eq!(groups.count(), 3);
        assert_eq!(groups.members(2).collect::<Vec<_>>(), [0, 2, 5]);
        assert_eq!(groups.members(4).collect::<Vec<_>>(), [1, 4]);
        assert_eq!((groups.leader_of(5), groups.local_index(5), groups.local_count(5)), (0, 2, 3));
        assert_eq!((groups.leader_of(3), groups.local_index(3), groups.local_count(3)), (3, 0, 1));
        assert!(groups.same_node(1, 4) && !groups.same_node(0, 1));
        assert_eq!(groups.leaders(), [0, 1, 3]);
        assert!(!groups.nodes_are_contiguous());
        assert!(NodeGroups::from_keys(&["x", "x", "y", "z", "z", "z"]).nodes_are_contiguous());
        assert!(!NodeGroups::from_keys(&["x", "y", "y", "x"]).nodes_are_contiguous());
        let pretended = NodeGroups::blocks(5, 2);
        assert_eq!((pretended.count(), pretended.members(0).collect::<Vec<_>>()), (2, vec![0, 1, 2]));
        assert_eq!(NodeGroups::blocks(3, 8).count(), 3);
        let single = NodeGroups::single(4);
        assert!(single.nodes_are_contiguous());
        assert_eq!((single.count(), single.local_index(3), single.local_count(0)), (1, 3, 4));
    }
}
