//! How many co-roots reliable multicast should use: the throughput model
//! of Liu, Mamidala and Panda (2004), section 7.2.
//!
//! In a stream of back-to-back broadcasts the root is the bottleneck. Per
//! broadcast it copies the message into its window (T_cc), posts the
//! multicast (T_ud), sends the message reliably to the co-roots it heads
//! in the binomial tree, each send costing T_um, and processes one ACK per
//! member of its own subgroup (T_pack each):
//!
//! ```text
//! root(C) = T_cc + T_ud + T_um·⌈log2(C + 1)⌉ + T_pack·⌈n / (C + 1)⌉
//! ```
//!
//! with n ranks split into C + 1 subgroups (the root's and one per
//! co-root). More co-roots shrink the subgroups but lengthen the reliable
//! broadcast; the model picks the C that minimises the sum. The binomial
//! term only steps where C + 1 passes a power of two, and within one step
//! more co-roots never cost more, so the choice is the fewest co-roots
//! that reach the smallest subgroups of the best step. The paper's figure
//! 12 finds 128 subgroups best at 1024 nodes; the `PAPER_2004` constants
//! reproduce that optimum.

/// Cost parameters, in nanoseconds per broadcast.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoRootModel {
    /// T_cc: copying the message into the window.
    pub copy_ns: f64,
    /// T_ud: posting the multicast datagram.
    pub post_multicast_ns: f64,
    /// T_um: copying and posting one reliable message to one co-root.
    pub reliable_send_ns: f64,
    /// T_pack: processing one member's ACK.
    pub ack_ns: f64,
}

impl CoRootModel {
    /// Constants of the order the paper measured on its 2004 cluster
    /// (a few µs to post, a µs per ACK), chosen so that the model's optimum
    /// at 1024 ranks is the paper's 128 subgroups.
    pub const PAPER_2004: CoRootModel = CoRootModel { copy_ns: 1000.0, post_multicast_ns: 2000.0, reliable_send_ns: 5500.0, ack_ns: 1000.0 };

    /// Predicted time the root spends per broadcast with `co_roots`
    /// co-roots among `size` ranks.
    pub fn root_ns(&self, size: usize, co_roots: usize) -> f64 {
        let subgroups = co_roots + 1;
        let reliable_sends = subgroups.next_power_of_two().trailing_zeros();
        let subgroup_size = size.div_ceil(subgroups);
        self.copy_ns + self.post_multicast_ns + self.reliable_send_ns * f64::from(reliable_sends) + self.ack_ns * subgroup_size as f64
    }
}

/// The number of co-roots the model picked, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct CoRootChoice {
    pub co_roots: usize,
    pub predicted_ns: f64,
    pub reason: String,
}

/// Picks the number of co-roots with the lowest predicted root time for
/// `size` ranks; ties go to fewer co-roots, which duplicate fewer copies.
pub fn choose_co_roots(size: usize, model: &CoRootModel) -> CoRootChoice {
    let most = size.saturating_sub(1);
    let mut best = (0, model.root_ns(size, 0));
    for co_roots in 1..=most {
        let predicted = model.root_ns(size, co_roots);
        if predicted < best.1 {
            best = (co_roots, predicted);
        }
    }
    let (co_roots, predicted_ns) = best;
    let reason = if most == 0 {
        format!("no co-roots for {size} rank(s): there is no receiver to delegate to.")
    } else {
        format!(
            "{co_roots} co-root(s) for {size} ranks: subgroups of at most {}, the root predicted at {:.1} µs per broadcast \
             vs {:.1} µs without co-roots (model: reliable send {:.1} µs, ACK {:.1} µs).",
            size.div_ceil(co_roots + 1),
            predicted_ns / 1000.0,
            model.root_ns(size, 0) / 1000.0,
            model.reliable_send_ns / 1000.0,
            model.ack_ns / 1000.0
        )
    };
    CoRootChoice { co_roots, predicted_ns, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paper_constants_find_its_optimum_at_1024_ranks() {
        let choice = choose_co_roots(1024, &CoRootModel::PAPER_2004);
        assert_eq!(choice.co_roots + 1, 128, "{}", choice.reason);
        assert!(choice.reason.contains("subgroups of at most 8"), "{}", choice.reason);
        // Figure 12's shape: too few and too many both cost more.
        let model = CoRootModel::PAPER_2004;
        assert!(model.root_ns(1024, 15) > choice.predicted_ns && model.root_ns(1024, 1023) > choice.predicted_ns);
    }

    #[test]
    fn small_groups_need_no_co_roots_and_larger_ones_need_more() {
        let model = CoRootModel::PAPER_2004;
        for size in 0..=8 {
            assert_eq!(choose_co_roots(size, &model).co_roots, 0, "size {size}");
        }
        assert!(choose_co_roots(1, &model).reason.contains("no receiver"));
        // Ties inside a step may pick fewer co-roots for one more rank, but
        // the binomial step itself never shrinks as the group grows.
        let mut previous_step = 1;
        for size in 1..=4096 {
            let chosen = choose_co_roots(size, &model).co_roots;
            let step = (chosen + 1).next_power_of_two();
            assert!(step >= previous_step, "size {size}: {chosen} co-roots fall back a binomial step");
            previous_step = step;
            let subgroups = chosen + 1;
            let step_end = subgroups.next_power_of_two().min(size);
            assert!(
                size.div_ceil(step_end) == size.div_ceil(subgroups),
                "size {size}: {chosen} co-roots stop short of smaller subgroups in the same binomial step"
            );
        }
    }

    #[test]
    fn the_extremes_follow_the_costs() {
        let free_acks = CoRootModel { ack_ns: 0.0, ..CoRootModel::PAPER_2004 };
        assert_eq!(choose_co_roots(500, &free_acks).co_roots, 0);
        let free_sends = CoRootModel { reliable_send_ns: 0.0, ..CoRootModel::PAPER_2004 };
        assert_eq!(choose_co_roots(500, &free_sends).co_roots, 499);
        let two = choose_co_roots(2, &free_sends);
        assert_eq!(two.co_roots, 1, "{}", two.reason);
    }

    #[test]
    fn the_root_time_counts_binomial_sends_and_subgroup_acks() {
        let unit = CoRootModel { copy_ns: 0.0, post_multicast_ns: 0.0, reliable_send_ns: 1.0, ack_ns: 1000.0 };
        assert_eq!(unit.root_ns(10, 0), 10_000.0);
        assert_eq!(unit.root_ns(10, 1), 1.0 + 5_000.0);
        assert_eq!(unit.root_ns(10, 2), 2.0 + 4_000.0);
        assert_eq!(unit.root_ns(10, 3), 2.0 + 3_000.0);
        assert_eq!(unit.root_ns(10, 4), 3.0 + 2_000.0);
        assert_eq!(unit.root_ns(10, 9), 4.0 + 1_000.0);
    }
}
