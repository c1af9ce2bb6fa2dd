//! MPI_Allreduce's path: nothing to do, the exchange, the degree-k tree
//! (flat or two-level), the parallel reduction, the ring, or the module
//! underneath. The tree and exchange themselves live in
//! `collectives::allreduce`, which dispatches among its variants by the
//! same rules (`Allreduce::tree_serves`).

use super::{count_of, CallShape, Choice, DataShape, Handover, Plan, ReductionPlan};

/// The native allreduce paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllreducePath {
    /// No data: nothing is sent.
    Empty,
    /// One rank: the contribution is the result.
    Alone,
    /// Every rank reduces a slice of everyone's input, read from peers.
    Parallel,
    /// Every rank puts its contribution to all others (short messages).
    Exchange,
    /// Up and down the degree-k tree (two-level where the plan says).
    Tree,
    /// Around the ring (long messages of commutative ops).
    Ring,
}

pub fn select(shape: &CallShape, plan: &Plan) -> Choice<AllreducePath> {
    if shape.count == 0 {
        return Choice::Native(AllreducePath::Empty);
    }
    if let Some(Err(why)) = plan.leaders_only.as_ref().map(|leaders| leaders.allreduce()) {
        return Choice::HandOver(why);
    }
    let (bytes, element_bytes) = match served_length(shape, plan, &plan.allreduce, "allreduce_max_bytes") {
        Ok(length) => length,
        Err(why) => return Choice::HandOver(why),
    };
    let reduction = &plan.allreduce;
    Choice::Native(if reduction.ring_takes(plan.size, bytes, element_bytes, shape.commutative) {
        AllreducePath::Ring
    } else if plan.size == 1 {
        AllreducePath::Alone
    } else if reduction.parallel_takes(plan.size, bytes) {
        AllreducePath::Parallel
    } else if reduction.exchange_max_bytes.is_some_and(|most| bytes <= most) {
        AllreducePath::Exchange
    } else {
        AllreducePath::Tree
    })
}

/// The checks allreduce and reduce share: the message's bytes and element
/// size, or why the module underneath takes it. `limit_name` names
/// `reduction.max_bytes`'s parameter. The size limit does not apply to
/// lengths reduced in parallel or around the ring (it was set where the
/// window's tree lost to the module underneath), nor to a non-commutative
/// op: the tree and the parallel reduction fold in rank order at every
/// length, while the module underneath may not (tuned's ring allreduce and
/// chain reduce, which a user may force, fold in another order and get
/// another result), and a right result beats a faster one.
pub(super) fn served_length(shape: &CallShape, plan: &Plan, reduction: &ReductionPlan, limit_name: &'static str) -> Result<(usize, usize), Handover> {
    count_of(shape)?;
    let (bytes, element_bytes) = match shape.data {
        DataShape::Contiguous { bytes, element_bytes } => (bytes, element_bytes),
        DataShape::Packable { why, .. } | DataShape::Unreadable(why) => return Err(Handover::Datatype(why)),
    };
    let segment_bytes = reduction.segment_bytes;
    if element_bytes > segment_bytes {
        return Err(Handover::ElementTooLarge { element_bytes, segment_bytes });
    }
    // Asked before the element size is known to fit a ring slot: an element
    // too long for one then takes the tree beyond the limit (only with a
    // slot shorter than the tree's segment).
    let parallel_or_ring = reduction.parallel_takes(plan.size, bytes) || reduction.ring_takes(plan.size, bytes, 1, shape.commutative);
    if let Some(limit) = reduction.max_bytes.filter(|&limit| shape.commutative && bytes > limit && !parallel_or_ring) {
        return Err(Handover::AboveLimit { bytes, parameter: limit_name, limit });
    }
    Ok((bytes, element_bytes))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{contiguous, plan, shape};
    use super::super::{FlatSchedules, LeadersOnly, NotContiguous};
    use super::*;
    use btl_ibmc::shm::NodeGroups;

    use AllreducePath::*;

    // The test plan (see `select::tests::plan`): 4 ranks, allreduce limit
    // 8192 bytes, tree segment 4096 bytes, exchange up to 1024 bytes,
    // parallel reduction from 1 MiB, ring from 64 KiB in 512-byte slots.
    #[test]
    fn each_row_takes_the_path_written_beside_it() {
        let commutative = true;
        let rows: Vec<(&str, CallShape, Choice<AllreducePath>)> = vec![
            ("no data", shape(0, contiguous(0, 8), commutative), Choice::Native(Empty)),
            ("short", shape(4, contiguous(32, 8), commutative), Choice::Native(Exchange)),
            ("exchange's last byte", shape(128, contiguous(1024, 8), commutative), Choice::Native(Exchange)),
            ("past the exchange", shape(129, contiguous(1032, 8), commutative), Choice::Native(Tree)),
            ("at the limit", shape(1024, contiguous(8192, 8), commutative), Choice::Native(Tree)),
            (
                "above the limit",
                shape(1025, contiguous(8200, 8), commutative),
                Choice::HandOver(Handover::AboveLimit { bytes: 8200, parameter: "allreduce_max_bytes", limit: 8192 }),
            ),
            ("above the limit, non-commutative", shape(1025, contiguous(8200, 8), false), Choice::Native(Tree)),
            ("the ring's first byte", shape(8192, contiguous(65536, 8), commutative), Choice::Native(Ring)),
            ("the ring, non-commutative", shape(8192, contiguous(65536, 8), false), Choice::Native(Tree)),
            ("the parallel reduction", shape(1 << 17, contiguous(1 << 20, 8), commutative), Choice::Native(Parallel)),
            ("the parallel reduction, non-commutative", shape(1 << 17, contiguous(1 << 20, 8), false), Choice::Native(Parallel)),
            ("negative count", shape(-3, contiguous(0, 8), commutative), Choice::HandOver(Handover::NegativeCount(-3))),
            (
                "gaps",
                shape(4, DataShape::Packable { bytes: 32, why: NotContiguous::Gaps }, commutative),
                Choice::HandOver(Handover::Datatype(NotContiguous::Gaps)),
            ),
            (
                "unreadable",
                shape(4, DataShape::Unreadable(NotContiguous::Query(-5)), commutative),
                Choice::HandOver(Handover::Datatype(NotContiguous::Query(-5))),
            ),
            (
                "an element longer than a segment",
                shape(1, contiguous(8192, 8192), commutative),
                Choice::HandOver(Handover::ElementTooLarge { element_bytes: 8192, segment_bytes: 4096 }),
            ),
            // Longer than a ring slot but within a segment: the limit is
            // judged before the element is read, so the ring's length
            // lifts it, and the tree takes what the ring cannot carry.
            ("an element longer than a ring slot", shape(32, contiguous(65536, 2048), commutative), Choice::Native(Tree)),
        ];
        for (name, shape, expected) in rows {
            assert_eq!(select(&shape, &plan()), expected, "{name}");
        }
    }

    #[test]
    fn one_rank_keeps_its_contribution_and_a_two_level_tree_has_no_exchange() {
        let alone = Plan { size: 1, ..plan() };
        assert_eq!(select(&shape(4, contiguous(32, 8), true), &alone), Choice::Native(Alone));
        let mut two_level = plan();
        two_level.allreduce.exchange_max_bytes = None;
        assert_eq!(select(&shape(4, contiguous(32, 8), true), &two_level), Choice::Native(Tree));
        let mut no_peer_reads = plan();
        no_peer_reads.allreduce.parallel_from = None;
        assert_eq!(
            select(&shape(1 << 17, contiguous(1 << 20, 8), false), &no_peer_reads),
            Choice::Native(Tree),
            "a non-commutative op without the parallel reduction takes the tree at every length"
        );
    }

    #[test]
    fn a_flat_allreduce_where_only_leaders_connect_is_handed_over_before_anything_else() {
        let mut leaders = plan();
        leaders.leaders_only = Some(LeadersOnly { nodes: NodeGroups::from_keys(&[0, 0, 1, 1]), flat: FlatSchedules { allreduce: true, ..Default::default() } });
        let why = Handover::OnlyLeadersConnected("allreduce runs flat on this communicator");
        assert_eq!(select(&shape(-1, contiguous(0, 8), true), &leaders), Choice::HandOver(why));
        assert_eq!(select(&shape(0, contiguous(0, 8), true), &leaders), Choice::Native(Empty), "nothing to send crosses no node");
        leaders.leaders_only.as_mut().unwrap().flat.allreduce = false;
        assert_eq!(select(&shape(4, contiguous(32, 8), true), &leaders), Choice::Native(Exchange));
    }
}
