//! MPI_Reduce's path: nothing to do, the degree-k tree in rank order (flat
//! or two-level, with rank 0's relay to the root), the parallel reduction,
//! the ring, the two-level allreduce kept by the root alone, or the module
//! underneath.

use super::allreduce::served_length;
use super::{CallShape, Choice, Handover, LeadersOnly, Plan};

/// The native reduce paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReducePath {
    Empty,
    /// One rank: the contribution is the result.
    Alone,
    Parallel,
    /// Up the degree-k tree into rank 0, relayed to the root.
    Tree,
    Ring,
    /// A root only the two-level allreduce reaches (`LeadersOnly::reduce`):
    /// every rank runs that allreduce, the root keeps the result.
    ThroughAllreduce,
}

/// How a reduce reaches its root where only leaders connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceRoute {
    /// The reduce tree and rank 0's relay.
    Tree,
    /// The two-level allreduce, kept by the root alone.
    ThroughAllreduce,
}

impl LeadersOnly {
    /// The two-level reduce folds into rank 0, which hands the result to
    /// the root: over a leaders' queue pair only if the root leads its
    /// node, through shared memory only on rank 0's node. Any other root
    /// takes the result of the two-level allreduce, which brings it down
    /// the tree through the root's leader (the same fold, so the same
    /// bits; the other ranks drop their copy).
    pub fn reduce(&self, root: usize) -> Result<ReduceRoute, Handover> {
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
}

pub fn select(shape: &CallShape, plan: &Plan) -> Choice<ReducePath> {
    if shape.count == 0 {
        return Choice::Native(ReducePath::Empty);
    }
    let route = match plan.leaders_only.as_ref().map(|leaders| leaders.reduce(shape.root)) {
        Some(Err(why)) => return Choice::HandOver(why),
        Some(Ok(route)) => route,
        None => ReduceRoute::Tree,
    };
    let reduction = &plan.reduce;
    let (bytes, element_bytes) = match served_length(shape, plan, reduction, "reduce_max_bytes") {
        Ok(length) => length,
        Err(why) => return Choice::HandOver(why),
    };
    if reduction.ring_takes(plan.size, bytes, element_bytes, shape.commutative) {
        return Choice::Native(ReducePath::Ring);
    }
    if route == ReduceRoute::ThroughAllreduce {
        let segment_bytes = plan.allreduce.segment_bytes;
        if element_bytes > segment_bytes {
            return Choice::HandOver(Handover::ElementTooLarge { element_bytes, segment_bytes });
        }
        return Choice::Native(ReducePath::ThroughAllreduce);
    }
    Choice::Native(if plan.size == 1 {
        ReducePath::Alone
    } else if reduction.parallel_takes(plan.size, bytes) {
        ReducePath::Parallel
    } else {
        ReducePath::Tree
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{contiguous, plan, shape};
    use super::super::{DataShape, FlatSchedules, NotContiguous};
    use super::*;
    use btl_ibmc::shm::NodeGroups;

    use ReducePath::*;

    fn rooted(root: usize, mut call: CallShape) -> CallShape {
        call.root = root;
        call
    }

    // The test plan (see `select::tests::plan`): 4 ranks, reduce limit
    // 16384 bytes, tree segment 2048 bytes, parallel reduction from 256 KiB,
    // ring from 128 KiB up to 2 MiB in 512-byte slots.
    #[test]
    fn each_row_takes_the_path_written_beside_it() {
        let rows: Vec<(&str, CallShape, Choice<ReducePath>)> = vec![
            ("no data", shape(0, contiguous(0, 4), true), Choice::Native(Empty)),
            ("short", shape(4, contiguous(16, 4), true), Choice::Native(Tree)),
            ("short, to rank 3", rooted(3, shape(4, contiguous(16, 4), true)), Choice::Native(Tree)),
            ("at the limit", shape(4096, contiguous(16384, 4), true), Choice::Native(Tree)),
            (
                "above the limit",
                shape(4097, contiguous(16388, 4), true),
                Choice::HandOver(Handover::AboveLimit { bytes: 16388, parameter: "reduce_max_bytes", limit: 16384 }),
            ),
            ("above the limit, non-commutative", shape(4097, contiguous(16388, 4), false), Choice::Native(Tree)),
            ("the ring", shape(1 << 15, contiguous(1 << 17, 4), true), Choice::Native(Ring)),
            ("the parallel reduction", shape(1 << 16, contiguous(1 << 18, 4), true), Choice::Native(Parallel)),
            ("beyond the ring's bound", shape(1 << 20, contiguous(1 << 22, 4), true), Choice::Native(Parallel)),
            ("negative count", shape(-1, contiguous(0, 4), true), Choice::HandOver(Handover::NegativeCount(-1))),
            (
                "gaps",
                shape(2, DataShape::Packable { bytes: 8, why: NotContiguous::Gaps }, true),
                Choice::HandOver(Handover::Datatype(NotContiguous::Gaps)),
            ),
            (
                "an element longer than a segment",
                shape(1, contiguous(4096, 4096), false),
                Choice::HandOver(Handover::ElementTooLarge { element_bytes: 4096, segment_bytes: 2048 }),
            ),
        ];
        for (name, shape, expected) in rows {
            assert_eq!(select(&shape, &plan()), expected, "{name}");
        }
        // Without the parallel reduction, the ring's upper bound (udp's)
        // leaves long messages to the limit.
        let mut no_peer_reads = plan();
        no_peer_reads.reduce.parallel_from = None;
        assert_eq!(
            select(&shape(1 << 20, contiguous(1 << 22, 4), true), &no_peer_reads),
            Choice::HandOver(Handover::AboveLimit { bytes: 1 << 22, parameter: "reduce_max_bytes", limit: 16384 })
        );
        assert_eq!(select(&shape(4, contiguous(16, 4), true), &Plan { size: 1, ..plan() }), Choice::Native(Alone));
    }

    #[test]
    fn where_only_leaders_connect_a_root_off_rank_0s_node_that_leads_nothing_takes_the_allreduce() {
        // Nodes {0, 1, 2}, {3, 4}, {5}: rank 4 is neither a leader nor on rank 0's node.
        let nodes = NodeGroups::from_keys(&[0, 0, 0, 1, 1, 2]);
        let mut leaders = Plan { size: 6, ..plan() };
        leaders.leaders_only = Some(LeadersOnly { nodes, flat: FlatSchedules::default() });
        let short = shape(4, contiguous(16, 4), true);
        let paths: Vec<_> = (0..6).map(|root| select(&rooted(root, short), &leaders)).collect();
        let expected = [Tree, Tree, Tree, Tree, ThroughAllreduce, Tree].map(Choice::Native);
        assert_eq!(paths, expected);
        assert_eq!(select(&rooted(6, short), &leaders), Choice::Native(Tree), "a root out of range is left to the path that serves it");
        // The allreduce's segment (4096) holds a 3000-byte element, and a
        // reduce segment (2048) would not: the reduce check comes first.
        let element = shape(1, contiguous(3000, 3000), false);
        assert_eq!(
            select(&rooted(4, element), &leaders),
            Choice::HandOver(Handover::ElementTooLarge { element_bytes: 3000, segment_bytes: 2048 })
        );
        let mut wide_reduce = leaders.clone();
        wide_reduce.reduce.segment_bytes = 8192;
        let element = shape(1, contiguous(6000, 6000), false);
        assert_eq!(
            select(&rooted(4, element), &wide_reduce),
            Choice::HandOver(Handover::ElementTooLarge { element_bytes: 6000, segment_bytes: 4096 }),
            "through the allreduce an element must fit the allreduce's segment"
        );

        let flat_allreduce = LeadersOnly { nodes: NodeGroups::from_keys(&[0, 0, 0, 1, 1, 2]), flat: FlatSchedules { allreduce: true, ..Default::default() } };
        leaders.leaders_only = Some(flat_allreduce);
        assert_eq!(select(&rooted(3, short), &leaders), Choice::Native(Tree));
        let Choice::HandOver(why) = select(&rooted(4, short), &leaders) else { panic!("rank 4 needs the allreduce, which runs flat") };
        assert!(why.to_string().contains("is not its node's leader"), "{why}");
        leaders.leaders_only.as_mut().unwrap().flat.reduce = true;
        for root in 0..6 {
            let Choice::HandOver(why) = select(&rooted(root, short), &leaders) else { panic!("root {root}: the reduce runs flat") };
            let why = why.to_string();
            assert!(why.contains("coll_rdma_hierarchy_queue_pairs_max") && why.contains("reduce runs flat"), "{why}");
        }
    }
}
