//! Barriers: coll rdma's n-way dissemination (its round table is
//! `tuning::round_distances`, the one `DisseminationBarrier` builds), the
//! two-level design of issue 14 (gather on the node, dissemination among
//! leaders, release on the node), and the Bruck-style dissemination Open
//! MPI runs over point-to-point messages.
//!
//! Round by round, which is exact here: in round r a rank posts its
//! notifications one after the other, then takes in the ones addressed to
//! it in the order they arrive, and only then starts round r+1.

use tuning::{choose_barrier_radix, round_distances, BarrierModel};

use crate::ranks::{latest, Nics, Ranks};

/// Bytes of one notification (a flag word).
const FLAG_BYTES: usize = 8;

/// Runs the dissemination rounds `distances` over `ranks`, every rank
/// entering at `starts[rank]`; returns when each rank leaves.
pub fn dissemination(ranks: &Ranks, distances: &[Vec<usize>], starts: &[f64]) -> Vec<f64> {
    let size = ranks.size();
    assert_eq!(starts.len(), size);
    let mut now = starts.to_vec();
    let mut sent = vec![0.0; size];
    let mut nics = Nics::new(ranks.nodes);
    let mut arrivals: Vec<f64> = Vec::new();
    let mut order: Vec<usize> = Vec::new();
    for round in distances {
        let fanout = round.len();
        arrivals.clear();
        arrivals.resize(size * fanout, 0.0);
        for sender in 0..size {
            let mut cpu = now[sender];
            for (i, &distance) in round.iter().enumerate() {
                let target = (sender + distance) % size;
                let hop = ranks.hop(sender, target);
                let start = if hop.crosses_nodes { nics.start(ranks.node_of(sender), cpu, hop.nic_busy_ns(FLAG_BYTES)) } else { cpu };
                cpu = start + hop.cpu_interval_ns(FLAG_BYTES);
                arrivals[target * fanout + i] = start + hop.arrival_after_ns(FLAG_BYTES);
            }
            sent[sender] = cpu;
        }
        for receiver in 0..size {
            let mine = &arrivals[receiver * fanout..(receiver + 1) * fanout];
            order.clear();
            order.extend(0..fanout);
            order.sort_by(|&a, &b| mine[a].total_cmp(&mine[b]));
            let mut t = sent[receiver];
            for &i in &order {
                let from = (receiver + size - round[i] % size) % size;
                t = t.max(mine[i]) + ranks.hop(from, receiver).overhead_ns;
            }
            now[receiver] = t;
        }
    }
    now
}

/// The radix coll rdma picks today: its default model (shared-memory
/// constants, the MCA defaults of `coll_rdma_model_*`) for the whole
/// communicator, whatever the transport.
pub fn component_radix(size: usize) -> usize {
    choose_barrier_radix(size, &BarrierModel::SHARED_MEMORY).radix
}

/// The barrier model with a level's costs: a notification's latency and
/// what each further one in a round adds.
pub fn model_of(level: &crate::calibration::Level) -> BarrierModel {
    BarrierModel { latency_ns: level.latency_ns + 2.0 * level.overhead_ns, put_gap_ns: level.gap_ns.max(level.overhead_ns) }
}

/// The radix the same model picks when given the network's costs.
pub fn network_radix(size: usize, ranks: &Ranks) -> usize {
    choose_barrier_radix(size, &model_of(&ranks.calibration.net)).radix
}

/// coll rdma's flat barrier with radix `radix` over every rank.
pub fn flat(ranks: &Ranks, radix: usize) -> f64 {
    let size = ranks.size();
    latest(&dissemination(ranks, &round_distances(size, radix), &vec![0.0; size]))
}

/// Open MPI's reference: radix-1 dissemination (Bruck) over two-sided
/// messages.
pub fn open_mpi_bruck(ranks: &Ranks) -> f64 {
    let two_sided = ranks.two_sided();
    latest(&dissemination(&two_sided, &round_distances(ranks.size(), 1), &vec![0.0; ranks.size()]))
}

/// The two-level barrier: every rank of a node writes its flag into the
/// leader's slots, the leaders run a dissemination of radix
/// `leader_radix`, and each leader releases its node with one flag the
/// others poll.
pub fn hierarchical(ranks: &Ranks, leader_radix: usize) -> f64 {
    let calibration = ranks.calibration;
    let shm = &calibration.shm;
    let members = ranks.ranks_per_node - 1;
    let flag_visible = shm.overhead_ns + shm.gap_per_byte_ns * FLAG_BYTES as f64 + shm.latency_ns;
    // Every member's flag arrives at once; the leader takes them in one by one.
    let gathered = if members == 0 { 0.0 } else { flag_visible + members as f64 * shm.overhead_ns };
    let leaders = ranks.leaders();
    let starts = vec![gathered; ranks.nodes];
    let disseminated = latest(&dissemination(&leaders, &round_distances(ranks.nodes, leader_radix), &starts));
    if members == 0 {
        return disseminated;
    }
    let last_reader = (members - 1) as f64 * calibration.shm_flag_reader_ns;
    disseminated + flag_visible + last_reader + shm.overhead_ns
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::{Calibration, Level};

    fn network_only(latency_ns: f64) -> Calibration {
        let level = Level { latency_ns, ..Level::default() };
        Calibration { shm: level, net: level, ..Calibration::default() }
    }

    #[test]
    fn a_zero_overhead_dissemination_costs_rounds_times_latency() {
        let calibration = network_only(1000.0);
        for (nodes, per_node) in [(2, 1), (7, 1), (64, 1), (1000, 1), (16, 8), (3, 5)] {
            let ranks = Ranks::new(nodes, per_node, &calibration);
            let size = ranks.size();
            for radix in [1, 2, 3, 7] {
                let rounds = round_distances(size, radix).len() as f64;
                assert_eq!(flat(&ranks, radix), rounds * 1000.0, "{nodes}x{per_node} radix {radix}");
            }
        }
    }

    #[test]
    fn overheads_and_gaps_add_per_notification_as_logp_says() {
        // One level, L=1000, o=100, g=300: a round of f notifications ends
        // when the last one, posted at (f-1)·max(g, o) after the first,
        // arrives (o + L later) and is taken in; the receiver takes in the
        // others before it, each o, but they arrived earlier.
        let level = Level { latency_ns: 1000.0, overhead_ns: 100.0, gap_ns: 300.0, ..Level::default() };
        let calibration = Calibration { shm: level, net: level, ..Calibration::default() };
        let ranks = Ranks::new(1, 9, &calibration);
        // 9 ranks, radix 2: two rounds of two notifications.
        let round = 300.0 + 100.0 + 1000.0 + 100.0;
        assert_eq!(flat(&ranks, 2), 2.0 * round);
        // Radix 1 over 9 ranks: four rounds of one.
        assert_eq!(flat(&ranks, 1), 4.0 * (100.0 + 1000.0 + 100.0));
    }

    #[test]
    fn the_nic_gap_serialises_a_node_s_outgoing_notifications() {
        // Two nodes of 4 ranks, radix 1: round 2 (distance 4) sends every
        // notification off the node; the NIC takes them 500 ns apart.
        let calibration = Calibration {
            shm: Level { latency_ns: 100.0, ..Level::default() },
            net: Level { latency_ns: 1000.0, gap_ns: 500.0, ..Level::default() },
            ..Calibration::default()
        };
        let ranks = Ranks::new(2, 4, &calibration);
        // Rounds 0 and 1 (distances 1, 2) cost 100 for ranks whose target
        // is on the node and 1000 (+ NIC queueing) for the rest; the last
        // round queues four sends per NIC: the fourth leaves 3·500 late.
        let result = flat(&ranks, 1);
        assert!(result >= 100.0 + 1000.0 + 3.0 * 500.0 + 1000.0, "{result}");
        let leaders = Ranks::new(2, 1, &calibration);
        assert_eq!(flat(&leaders, 1), 1000.0);
    }

    #[test]
    fn the_two_level_barrier_is_gather_plus_leaders_plus_release() {
        let calibration = Calibration {
            shm: Level { latency_ns: 100.0, overhead_ns: 10.0, ..Level::default() },
            net: Level { latency_ns: 1000.0, ..Level::default() },
            shm_flag_reader_ns: 5.0,
            ..Calibration::default()
        };
        let ranks = Ranks::new(8, 4, &calibration);
        let gather = 10.0 + 100.0 + 3.0 * 10.0;
        let leaders = 3.0 * 1000.0; // radix 1 over 8 leaders, o = 0 on the network
        let release = 10.0 + 100.0 + 2.0 * 5.0 + 10.0;
        assert!((hierarchical(&ranks, 1) - (gather + leaders + release)).abs() < 1e-9);
        // One rank per node: the leaders' dissemination alone.
        assert_eq!(hierarchical(&Ranks::new(8, 1, &calibration), 1), leaders);
    }

    #[test]
    fn the_reference_pays_the_mpi_overhead_at_both_ends_of_every_round() {
        let mut calibration = network_only(1000.0);
        calibration.net.mpi_overhead_ns = 250.0;
        calibration.shm.mpi_overhead_ns = 250.0;
        let ranks = Ranks::new(16, 1, &calibration);
        assert_eq!(open_mpi_bruck(&ranks), 4.0 * (1000.0 + 2.0 * 250.0));
    }
}
