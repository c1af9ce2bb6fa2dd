//! The scale study: every collective at 2..16384 nodes, flat (coll rdma
//! today), two-level (issue 14's design) and Open MPI's algorithm, and
//! the choices each makes.

use crate::allreduce;
use crate::barrier;
use crate::bcast;
use crate::calibration::{Calibration, RmcastSettings};
use crate::ranks::Ranks;

/// Node counts of the study: powers of two from 2 to 16384.
pub fn node_counts(largest: usize) -> Vec<usize> {
    (1..=14).map(|p| 1usize << p).filter(|&n| n <= largest).collect()
}

/// One collective's latencies (ns) at one node count, by series name.
pub type Series = Vec<(&'static str, f64)>;

pub fn barrier_series(ranks: &Ranks) -> Series {
    let size = ranks.size();
    vec![
        ("coll rdma flat", barrier::flat(ranks, barrier::component_radix(size))),
        ("flat, radix for the network", barrier::flat(ranks, barrier::network_radix(size, ranks))),
        ("two-level", barrier::hierarchical(ranks, barrier::network_radix(ranks.nodes, ranks))),
        ("Open MPI dissemination (Bruck)", barrier::open_mpi_bruck(ranks)),
    ]
}

pub fn allreduce_series(ranks: &Ranks, bytes: usize) -> Series {
    vec![
        ("coll rdma flat", allreduce::flat(ranks, bytes)),
        ("two-level", allreduce::hierarchical(ranks, bytes)),
        ("Open MPI recursive doubling", allreduce::open_mpi_recursive_doubling(ranks, bytes)),
    ]
}

pub fn bcast_series(ranks: &Ranks, bytes: usize) -> Series {
    vec![
        ("coll rdma flat multicast", bcast::flat_multicast(ranks, bytes).lossless_ns),
        ("two-level", bcast::hierarchical(ranks, bytes).lossless_ns),
        ("coll rdma put tree (no multicast)", bcast::put_tree(ranks, bytes)),
        ("Open MPI binomial", bcast::open_mpi_binomial(ranks, bytes)),
    ]
}

/// What each schedule chooses at one size.
pub struct Choices {
    pub nodes: usize,
    pub ranks_per_node: usize,
    pub component_radix: usize,
    pub network_radix_flat: usize,
    pub leader_radix: usize,
    pub component_degree: usize,
    pub component_exchange_bytes: usize,
    pub local_degree: usize,
    pub leader_degree: usize,
    pub flat_co_roots: usize,
    pub leader_co_roots: usize,
}

pub fn choices(ranks: &Ranks) -> Choices {
    let size = ranks.size();
    let plan = allreduce::component_plan(size);
    let (local_degree, leader_degree) = allreduce::hierarchical_degrees(ranks);
    Choices {
        nodes: ranks.nodes,
        ranks_per_node: ranks.ranks_per_node,
        component_radix: barrier::component_radix(size),
        network_radix_flat: barrier::network_radix(size, ranks),
        leader_radix: barrier::network_radix(ranks.nodes, ranks),
        component_degree: plan.degree.degree,
        component_exchange_bytes: plan.exchange.max_bytes,
        local_degree,
        leader_degree,
        flat_co_roots: bcast::component_co_roots(size),
        leader_co_roots: bcast::component_co_roots(ranks.nodes),
    }
}

/// The bcast under loss: flat and two-level at one size and loss rate,
/// as the component does it (`RmcastConfig`'s defaults, tail repeat
/// included) and as it did before the tail repeat (`today_*`).
pub struct LossPoint {
    pub nodes: usize,
    pub ranks_per_node: usize,
    pub loss: f64,
    pub flat: bcast::BcastOutcome,
    pub two_level: bcast::BcastOutcome,
    pub before_flat: bcast::BcastOutcome,
    pub before_two_level: bcast::BcastOutcome,
    pub binomial_ns: f64,
}

pub fn loss_point(calibration: &Calibration, nodes: usize, ranks_per_node: usize, loss: f64, bytes: usize) -> LossPoint {
    let mut lossy = *calibration;
    lossy.multicast.loss = loss;
    let ranks = Ranks::new(nodes, ranks_per_node, &lossy);
    let mut before = lossy;
    TailRepair::Timeout.apply(&mut before.rmcast);
    let before_ranks = Ranks::new(nodes, ranks_per_node, &before);
    LossPoint {
        nodes,
        ranks_per_node,
        loss,
        flat: bcast::flat_multicast(&ranks, bytes),
        two_level: bcast::hierarchical(&ranks, bytes),
        before_flat: bcast::flat_multicast(&before_ranks, bytes),
        before_two_level: bcast::hierarchical(&before_ranks, bytes),
        binomial_ns: bcast::open_mpi_binomial(&ranks, bytes),
    }
}

/// A way to repair a lost tail (the last piece, which no later piece
/// reveals), for the study of issue 36. Only `Repeat` is built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TailRepair {
    /// Before issue 36: the collector's timeout alone.
    Timeout,
    /// The last n pieces multicast twice (`btl_ibmc::rmcast::repair`).
    Repeat(usize),
    /// A "last piece is s" probe k round trips after the last piece.
    Probe(f64),
    /// The collector's timeout set to k round trips.
    RoundTripTimeout(f64),
    /// `Repeat(n)` and `RoundTripTimeout(k)` together.
    RepeatAndRoundTripTimeout(usize, f64),
}

impl TailRepair {
    /// The candidates the study compares.
    pub const STUDIED: [TailRepair; 6] = [
        TailRepair::Timeout,
        TailRepair::Repeat(1),
        TailRepair::Repeat(2),
        TailRepair::Probe(2.0),
        TailRepair::RoundTripTimeout(4.0),
        TailRepair::RepeatAndRoundTripTimeout(1, 4.0),
    ];

    pub fn name(&self) -> String {
        match *self {
            TailRepair::Timeout => "timeout only (before)".to_string(),
            TailRepair::Repeat(n) => format!("last {n} piece(s) twice"),
            TailRepair::Probe(k) => format!("tail probe after {k} RTT"),
            TailRepair::RoundTripTimeout(k) => format!("timeout {k} RTT"),
            TailRepair::RepeatAndRoundTripTimeout(n, k) => format!("last {n} twice + timeout {k} RTT"),
        }
    }

    /// Sets `settings` to repair tails this way (everything else kept).
    pub fn apply(&self, settings: &mut RmcastSettings) {
        let (repeat, probe, timeout) = match *self {
            TailRepair::Timeout => (0, None, None),
            TailRepair::Repeat(n) => (n, None, None),
            TailRepair::Probe(k) => (0, Some(k), None),
            TailRepair::RoundTripTimeout(k) => (0, None, Some(k)),
            TailRepair::RepeatAndRoundTripTimeout(n, k) => (n, None, Some(k)),
        };
        settings.tail_repeat = repeat;
        settings.tail_probe_round_trips = probe;
        settings.timeout_round_trips = timeout;
    }
}

/// The two-level bcast of `bytes` under `loss` with tails repaired by
/// `repair`.
pub fn two_level_with(calibration: &Calibration, nodes: usize, ranks_per_node: usize, loss: f64, bytes: usize, repair: TailRepair) -> bcast::BcastOutcome {
    let mut lossy = *calibration;
    lossy.multicast.loss = loss;
    repair.apply(&mut lossy.rmcast);
    bcast::hierarchical(&Ranks::new(nodes, ranks_per_node, &lossy), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::Level;

    #[test]
    fn node_counts_are_powers_of_two_up_to_the_limit() {
        assert_eq!(node_counts(16), vec![2, 4, 8, 16]);
        assert_eq!(node_counts(16384).len(), 14);
    }

    #[test]
    fn on_one_rank_per_node_two_levels_are_the_leaders_alone() {
        let level = Level { latency_ns: 1000.0, overhead_ns: 100.0, gap_ns: 50.0, gap_per_byte_ns: 0.5, mpi_overhead_ns: 200.0 };
        let calibration = Calibration { shm: level, net: level, ..Calibration::default() };
        let ranks = Ranks::new(64, 1, &calibration);
        let series = barrier_series(&ranks);
        // Same radix for the network over the same 64 ranks: same barrier.
        assert_eq!(series[1].1, series[2].1);
        let choice = choices(&ranks);
        assert_eq!(choice.network_radix_flat, choice.leader_radix);
        assert_eq!(choice.flat_co_roots, choice.leader_co_roots);
    }
}
