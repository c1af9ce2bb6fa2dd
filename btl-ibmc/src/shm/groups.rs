//! Which ranks of a communicator share a node. Each group has a leader,
//! its lowest rank, which creates the group's segment; every rank computes
//! the same groups from the same exchanged keys.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeGroups {
    /// The leader of each rank's group, indexed by rank.
    leader_of: Vec<usize>,
}

impl NodeGroups {
    /// All `size` ranks on one node.
    pub fn single(size: usize) -> Self {
        NodeGroups { leader_of: vec![0; size] }
    }

    /// Ranks whose keys are equal share a node.
    pub fn from_keys<K: PartialEq>(keys: &[K]) -> Self {
        let leader_of = keys.iter().map(|key| keys.iter().position(|other| other == key).unwrap_or(0)).collect();
        NodeGroups { leader_of }
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
        self.members(rank).take_while(|&other| other < rank).count()
    }

    /// How many ranks share `rank`'s node.
    pub fn local_count(&self, rank: usize) -> usize {
        self.members(rank).count()
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
        let single = NodeGroups::single(4);
        assert_eq!((single.count(), single.local_index(3), single.local_count(0)), (1, 3, 4));
    }
}
