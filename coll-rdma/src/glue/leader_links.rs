//! What a communicator cannot serve natively once only the nodes' leaders
//! hold queue pairs across nodes (`coll_rdma_hierarchy_queue_pairs_max`):
//! every path on which a rank that is not its node's leader writes to, or
//! sends to, a rank on another node. The decisions rest on the node groups
//! and on which schedules went two-level, both the same on every rank, and
//! on a call's root, which MPI makes the same on every rank, so every rank
//! hands the same calls over.

use btl_ibmc::shm::NodeGroups;

use super::handover::Handover;

pub(super) struct LeaderLinks {
    nodes: NodeGroups,
    flat: FlatSchedules,
}

/// Which collectives stayed flat on a communicator that spans nodes: the
/// reductions where nodes are placed round robin or the window lacks the
/// two-level tree's rings, bcast where it lacks room for the stages.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FlatSchedules {
    pub allreduce: bool,
    pub reduce: bool,
    pub bcast: bool,
}

/// How a reduce reaches its root where only leaders connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ReduceRoute {
    /// The reduce tree and rank 0's relay.
    Tree,
    /// The two-level allreduce, kept by the root alone.
    ThroughAllreduce,
}

impl LeaderLinks {
    pub(super) fn new(nodes: NodeGroups, flat: FlatSchedules) -> Self {
        LeaderLinks { nodes, flat }
    }

    pub(super) fn allreduce(&self) -> Result<(), Handover> {
        if self.flat.allreduce {
            return Err(Handover::OnlyLeadersConnected("allreduce runs flat on this communicator"));
        }
        Ok(())
    }

    /// The two-level reduce folds into rank 0, which hands the result to
    /// the root: over a leaders' queue pair only if the root leads its
    /// node, through shared memory only on rank 0's node. Any other root
    /// takes the result of the two-level allreduce, which brings it down
    /// the tree through the root's leader (the same fold, so the same
    /// bits; the other ranks drop their copy).
    pub(super) fn reduce(&self, root: usize) -> Result<ReduceRoute, Handover> {
        if self.flat.reduce {
            return Err(Handover::OnlyLeadersConnected("reduce runs flat on this communicator"));
        }
        // A root out of range is not this check's to judge.
        let crosses = root < self.nodes.size() && self.nodes.leader_of(root) != root && !self.nodes.same_node(root, 0);
        match (crosses, self.flat.allreduce) {
            (false, _) => Ok(ReduceRoute::Tree),
            (true, false) => Ok(ReduceRoute::ThroughAllreduce),
            (true, true) => Err(Handover::OnlyLeadersConnected(
                "the root, which rank 0 hands the result to, is not its node's leader (and allreduce runs flat)",
            )),
        }
    }

    pub(super) fn bcast(&self) -> Result<(), Handover> {
        if self.flat.bcast {
            return Err(Handover::OnlyLeadersConnected("bcast runs flat on this communicator"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_that_cross_nodes_from_a_non_leader_are_handed_over() {
        // Nodes {0, 1, 2}, {3, 4}, {5}.
        let nodes = NodeGroups::from_keys(&[0, 0, 0, 1, 1, 2]);
        let two_level = LeaderLinks::new(nodes.clone(), FlatSchedules::default());
        assert!(two_level.allreduce().is_ok() && two_level.bcast().is_ok());
        let routes: Vec<_> = (0..6).map(|root| two_level.reduce(root).unwrap()).collect();
        let through_allreduce: Vec<_> = (0..6).filter(|&root| routes[root] == ReduceRoute::ThroughAllreduce).collect();
        assert_eq!(through_allreduce, [4], "rank 4 is neither a leader nor on rank 0's node");
        assert!(matches!(two_level.reduce(6), Ok(ReduceRoute::Tree)), "a root out of range is left to the path that serves it");
        let allreduce_flat = LeaderLinks::new(NodeGroups::from_keys(&[0, 0, 0, 1, 1, 2]), FlatSchedules { allreduce: true, ..FlatSchedules::default() });
        assert!(matches!(allreduce_flat.reduce(3), Ok(ReduceRoute::Tree)));
        assert!(allreduce_flat.reduce(4).is_err());

        let flat = LeaderLinks::new(nodes, FlatSchedules { allreduce: true, reduce: true, bcast: true });
        assert!(flat.allreduce().is_err() && flat.bcast().is_err());
        assert!((0..6).all(|root| flat.reduce(root).is_err()));
        let why = flat.reduce(0).unwrap_err().to_string();
        assert!(why.contains("coll_rdma_hierarchy_queue_pairs_max") && why.contains("reduce runs flat"), "{why}");
    }
}
