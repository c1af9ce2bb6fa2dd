//! Allreduce: coll rdma's degree-k tree (`tuning::TreeLinks`, the tree
//! the component builds, with the degree and exchange threshold of
//! `tuning::choose_allreduce_plan`), the two-level design of issue 14
//! (node tree into the leader, tree among leaders, node tree back down),
//! and Open MPI's recursive doubling as the reference.
//!
//! The tree runs segment by segment: the first segment's way up and down
//! is simulated message by message; each further segment adds the time of
//! the busiest rank's work per segment (the pipeline's bottleneck), as in
//! the component's own cost model.

use tuning::{choose_allreduce_plan, AllreduceModel, AllreducePlan, TreeLinks};

use crate::calibration::Level;
use crate::ranks::{latest, Adapter, Ranks};

/// coll rdma's default segment (`coll_rdma_allreduce_segment_size`).
pub fn component_segment_bytes() -> usize {
    AllreduceModel::SHARED_MEMORY.segment_bytes.unwrap_or(8192)
}

/// What coll rdma picks today for `size` ranks: its default model (the
/// shared-memory constants of the `coll_rdma_reduction_model_*` defaults)
/// whatever the transport.
pub fn component_plan(size: usize) -> AllreducePlan {
    choose_allreduce_plan(size, &AllreduceModel::SHARED_MEMORY, component_segment_bytes())
}

/// The component's reduction model with a level's costs.
pub fn model_of(level: &Level, combine_ns_per_byte: f64) -> AllreduceModel {
    AllreduceModel {
        message_latency_ns: level.latency_ns + 2.0 * level.overhead_ns,
        transfer_ns_per_byte: level.gap_per_byte_ns,
        reduce_ns_per_byte: combine_ns_per_byte,
        put_gap_ns: level.gap_ns.max(level.overhead_ns),
        segment_bytes: Some(component_segment_bytes()),
    }
}

/// One tree's timing over the ranks `members` (tree rank i is
/// `members[i]`), everyone entering at `starts[i]`.
pub struct TreeRun {
    /// When tree rank 0 holds the full reduction of the first segment.
    pub reduced_at: f64,
    /// When each tree rank holds the first segment's result.
    pub result_at: Vec<f64>,
    /// The busiest rank's work per segment, in ns.
    pub bottleneck_ns: f64,
}

/// Runs the degree-`degree` tree over `members` for one segment of
/// `segment` bytes: up (reduce into tree rank 0) and, if `down`, back down.
pub fn tree(ranks: &Ranks, members: &[usize], degree: usize, segment: usize, starts: &[f64], down: bool) -> TreeRun {
    let size = members.len();
    let combine = ranks.calibration.combine_ns_per_byte * segment as f64;
    let links: Vec<TreeLinks> = (0..size).map(|i| TreeLinks::new(i, size, degree)).collect();
    let mut work = vec![0.0f64; size];
    // Children have higher tree ranks than their parent: fold from the top.
    let mut partial_sent = vec![0.0; size];
    for i in (0..size).rev() {
        // The adapter takes partials from other nodes in the order they
        // come; the rank combines them in rank order (canonical order).
        let children = &links[i].children;
        let mut arrivals: Vec<(f64, usize)> = children
            .iter()
            .enumerate()
            .map(|(k, child)| (partial_sent[child.peer] + ranks.hop(members[child.peer], members[i]).arrival_after_ns(segment), k))
            .collect();
        arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut adapter = Adapter::default();
        let mut arrived = vec![0.0; children.len()];
        for (at, k) in arrivals {
            arrived[k] = adapter.pass(&ranks.hop(members[children[k].peer], members[i]), at, segment);
        }
        let mut t = starts[i];
        for (k, child) in children.iter().enumerate() {
            let hop = ranks.hop(members[child.peer], members[i]);
            t = t.max(arrived[k]) + hop.overhead_ns + combine;
            work[i] += hop.overhead_ns + combine;
        }
        if let Some(parent) = links[i].parent {
            let hop = ranks.hop(members[i], members[parent.peer]);
            work[i] += hop.send_busy_ns(segment);
        }
        partial_sent[i] = t;
    }
    let reduced_at = partial_sent[0];
    let mut result_at = vec![reduced_at; size];
    if down {
        for i in 0..size {
            let mut cpu = result_at[i];
            let mut adapter = Adapter::default();
            // The component passes results down farthest child first
            // (the largest subtree), as its `results_to_children` are built.
            for child in links[i].children.iter().rev() {
                let hop = ranks.hop(members[i], members[child.peer]);
                let start = adapter.pass(&hop, cpu, segment);
                result_at[child.peer] = start + hop.arrival_after_ns(segment) + hop.overhead_ns;
                cpu = start + hop.cpu_interval_ns(segment);
                work[i] += hop.send_busy_ns(segment);
                work[child.peer] += hop.overhead_ns;
            }
        }
    }
    TreeRun { reduced_at, result_at, bottleneck_ns: latest(&work) }
}

fn segments(bytes: usize, segment_bytes: usize) -> (usize, f64) {
    let segment = bytes.min(segment_bytes.max(1));
    let count = if segment == 0 { 1 } else { bytes.div_ceil(segment) };
    (segment, (count - 1) as f64)
}

/// coll rdma's flat allreduce as it is configured today: the exchange for
/// messages up to the plan's threshold, else the plan's tree.
pub fn flat(ranks: &Ranks, bytes: usize) -> f64 {
    let size = ranks.size();
    let plan = component_plan(size);
    if bytes <= plan.exchange.max_bytes {
        return exchange(ranks, bytes);
    }
    flat_tree(ranks, plan.degree.degree, bytes)
}

/// The flat tree of degree `degree` over every rank.
pub fn flat_tree(ranks: &Ranks, degree: usize, bytes: usize) -> f64 {
    let size = ranks.size();
    let members: Vec<usize> = (0..size).collect();
    let (segment, further) = segments(bytes, component_segment_bytes());
    let run = tree(ranks, &members, degree, segment, &vec![0.0; size], true);
    latest(&run.result_at) + further * run.bottleneck_ns
}

/// The exchange variant: every rank puts its contribution to every other,
/// then combines them all.
pub fn exchange(ranks: &Ranks, bytes: usize) -> f64 {
    let size = ranks.size();
    let combine = ranks.calibration.combine_ns_per_byte * bytes as f64;
    let mut finish: f64 = 0.0;
    for receiver in 0..size {
        let mut arrivals: Vec<(f64, f64)> = Vec::with_capacity(size - 1);
        for sender in (0..size).filter(|&s| s != receiver) {
            // Each sender posts to its peers in rank order after itself.
            let position = (receiver + size - sender) % size - 1;
            let hop = ranks.hop(sender, receiver);
            let start = position as f64 * hop.cpu_interval_ns(bytes);
            arrivals.push((start + hop.arrival_after_ns(bytes), hop.overhead_ns));
        }
        arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
        let own_sends: f64 = (0..size).filter(|&q| q != receiver).map(|q| ranks.hop(receiver, q).cpu_interval_ns(bytes)).sum();
        let mut t = own_sends;
        for (arrival, overhead) in arrivals {
            t = t.max(arrival) + overhead + combine;
        }
        finish = finish.max(t);
    }
    finish
}

/// The plans the two-level design would use: the component's model fed
/// with the node's costs for the node tree and the network's for the
/// leaders (whose plan may pick the exchange for small messages).
pub fn hierarchical_plans(ranks: &Ranks) -> (AllreducePlan, AllreducePlan) {
    let calibration = ranks.calibration;
    let segment = component_segment_bytes();
    let local = choose_allreduce_plan(ranks.ranks_per_node, &model_of(&calibration.shm, calibration.combine_ns_per_byte), segment);
    let leaders = choose_allreduce_plan(ranks.nodes, &model_of(&calibration.net, calibration.combine_ns_per_byte), segment);
    (local, leaders)
}

/// The tree degrees of [`hierarchical_plans`] (node, leaders).
pub fn hierarchical_degrees(ranks: &Ranks) -> (usize, usize) {
    let (local, leaders) = hierarchical_plans(ranks);
    (local.degree.degree, leaders.degree.degree)
}

/// The two-level allreduce: reduce on each node into its leader, allreduce
/// among the leaders (their plan's exchange for small messages, else their
/// tree), broadcast down each node's tree.
pub fn hierarchical(ranks: &Ranks, bytes: usize) -> f64 {
    let (local_plan, leader_plan) = hierarchical_plans(ranks);
    let (local_degree, leader_degree) = (local_plan.degree.degree, leader_plan.degree.degree);
    let per_node = ranks.ranks_per_node;
    let (segment, further) = segments(bytes, component_segment_bytes());
    let node0: Vec<usize> = (0..per_node).collect();
    // Every node is alike up to the leaders' level: simulate node 0's tree
    // (all on shared memory) once.
    let up = tree(ranks, &node0, local_degree, segment, &vec![0.0; per_node], false);
    let leader_ranks = ranks.leaders();
    let (latest_leader, leaders_bottleneck) = if bytes <= leader_plan.exchange.max_bytes {
        let exchanged = up.reduced_at + exchange(&leader_ranks, bytes);
        (exchanged, exchanged - up.reduced_at)
    } else {
        let leaders: Vec<usize> = (0..ranks.nodes).collect();
        let across = tree(&leader_ranks, &leaders, leader_degree, segment, &vec![up.reduced_at; ranks.nodes], true);
        (latest(&across.result_at), across.bottleneck_ns)
    };
    let down = tree_down(ranks, &node0, local_degree, segment, latest_leader);
    let bottleneck = up.bottleneck_ns.max(leaders_bottleneck) + down.1;
    down.0 + further * bottleneck
}

/// The degree-`degree` tree over `members` passing one segment of
/// `segment` bytes down from tree rank 0, which has it at `from`: when the
/// last member has it, and the busiest member's work per segment.
pub fn tree_down(ranks: &Ranks, members: &[usize], degree: usize, segment: usize, from: f64) -> (f64, f64) {
    let size = members.len();
    let links: Vec<TreeLinks> = (0..size).map(|i| TreeLinks::new(i, size, degree)).collect();
    let mut have = vec![from; size];
    let mut work = vec![0.0f64; size];
    for i in 0..size {
        let mut cpu = have[i];
        let mut adapter = Adapter::default();
        // Farthest child (largest subtree) first, as the component does.
        for child in links[i].children.iter().rev() {
            let hop = ranks.hop(members[i], members[child.peer]);
            let start = adapter.pass(&hop, cpu, segment);
            have[child.peer] = start + hop.arrival_after_ns(segment) + hop.overhead_ns;
            cpu = start + hop.cpu_interval_ns(segment);
            work[i] += hop.send_busy_ns(segment);
            work[child.peer] += hop.overhead_ns;
        }
    }
    (latest(&have), latest(&work))
}

/// Open MPI's recursive doubling over two-sided messages: the ranks above
/// the largest power of two first hand their data to a partner and get the
/// result back at the end.
pub fn open_mpi_recursive_doubling(ranks: &Ranks, bytes: usize) -> f64 {
    let ranks = ranks.two_sided();
    let size = ranks.size();
    if size == 1 {
        return 0.0;
    }
    let combine = ranks.calibration.combine_ns_per_byte * bytes as f64;
    let core = 1usize << (usize::BITS - 1 - size.leading_zeros());
    let mut now = vec![0.0; size];
    for extra in core..size {
        let partner = extra - core;
        let hop = ranks.hop(extra, partner);
        now[partner] = hop.arrival_after_ns(bytes) + hop.overhead_ns + combine;
    }
    let mut mask = 1;
    while mask < core {
        let before = now.clone();
        for rank in 0..core {
            let partner = rank ^ mask;
            let hop = ranks.hop(partner, rank);
            let sent = before[rank] + hop.send_busy_ns(bytes);
            now[rank] = sent.max(before[partner] + hop.arrival_after_ns(bytes)) + hop.overhead_ns + combine;
        }
        mask <<= 1;
    }
    for extra in core..size {
        let partner = extra - core;
        let hop = ranks.hop(partner, extra);
        now[extra] = now[partner] + hop.arrival_after_ns(bytes) + hop.overhead_ns;
    }
    latest(&now)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::calibration::{Calibration, Level};

    fn uniform(level: Level) -> Calibration {
        Calibration { shm: level, net: level, ..Calibration::default() }
    }

    /// The longest chain of parent links from any rank to rank 0.
    pub(crate) fn depth(size: usize, degree: usize) -> usize {
        let links: Vec<TreeLinks> = (0..size).map(|rank| TreeLinks::new(rank, size, degree)).collect();
        (0..size)
            .map(|mut rank| {
                let mut hops = 0;
                while let Some(parent) = links[rank].parent {
                    rank = parent.peer;
                    hops += 1;
                }
                hops
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn a_zero_overhead_tree_is_twice_its_depth_in_latencies() {
        let calibration = uniform(Level { latency_ns: 1000.0, ..Level::default() });
        for size in [2usize, 3, 8, 9, 27, 100, 1000] {
            for degree in [1, 2, 3, 7] {
                let ranks = Ranks::new(size, 1, &calibration);
                let expected = 2.0 * depth(size, degree) as f64 * 1000.0;
                assert_eq!(flat_tree(&ranks, degree, 8), expected, "size {size} k {degree}");
            }
        }
        // On (k+1)^r ranks the depth is the r rounds of the table.
        assert_eq!(depth(27, 2), 3);
        assert_eq!(depth(1024, 1), 10);
    }

    #[test]
    fn a_flat_step_pays_one_overhead_and_one_combine_per_child() {
        // Degree 7 over 8 ranks: one step up, one down. Up: all seven
        // partials arrive at o + L; the root takes them in one by one
        // (o + combine each). Down: seven puts, o apart; the last child
        // has the result 6·o + o + L + o after the reduction.
        let level = Level { latency_ns: 1000.0, overhead_ns: 100.0, ..Level::default() };
        let mut calibration = uniform(level);
        calibration.combine_ns_per_byte = 10.0;
        let ranks = Ranks::new(8, 1, &calibration);
        let reduced = 100.0 + 1000.0 + 7.0 * (100.0 + 80.0);
        let down = 6.0 * 100.0 + 100.0 + 1000.0 + 100.0;
        assert!((flat_tree(&ranks, 7, 8) - (reduced + down)).abs() < 1e-9);
    }

    #[test]
    fn segments_beyond_the_first_add_the_bottleneck_each() {
        let calibration = uniform(Level { latency_ns: 1000.0, gap_per_byte_ns: 0.01, ..Level::default() });
        let ranks = Ranks::new(4, 1, &calibration);
        let segment = component_segment_bytes();
        let one = flat_tree(&ranks, 1, segment);
        let four = flat_tree(&ranks, 1, 4 * segment);
        let members: Vec<usize> = (0..4).collect();
        let run = tree(&ranks, &members, 1, segment, &[0.0; 4], true);
        assert!((four - one - 3.0 * run.bottleneck_ns).abs() < 1e-9);
        assert!(run.bottleneck_ns > 0.0);
    }

    #[test]
    fn recursive_doubling_is_log2_rounds_of_exchange() {
        let mut calibration = uniform(Level { latency_ns: 1000.0, ..Level::default() });
        calibration.net.mpi_overhead_ns = 50.0;
        calibration.shm.mpi_overhead_ns = 50.0;
        let round = 50.0 + 1000.0 + 50.0;
        for (size, rounds) in [(2, 1.0), (8, 3.0), (1024, 10.0)] {
            let ranks = Ranks::new(size, 1, &calibration);
            assert_eq!(open_mpi_recursive_doubling(&ranks, 8), rounds * round, "size {size}");
        }
        // 6 ranks: 0 and 1 take in 4's and 5's data (one round, 1100),
        // exchange with each other (2200), then with 2 and 3, whose data
        // arrived long before (2200 + o + o = 2300); 4 and 5 get the
        // result one round later.
        assert_eq!(open_mpi_recursive_doubling(&Ranks::new(6, 1, &calibration), 8), 2300.0 + round);
    }

    #[test]
    fn the_exchange_is_one_step_of_p_minus_1_puts() {
        let calibration = uniform(Level { latency_ns: 1000.0, overhead_ns: 10.0, ..Level::default() });
        let ranks = Ranks::new(4, 1, &calibration);
        // Each rank posts 3 puts (10 each); the last one it receives was
        // posted third by its sender: 20 + 10 + 1000, then three takes-in
        // of 10, the last after that arrival.
        assert_eq!(exchange(&ranks, 8), 20.0 + 10.0 + 1000.0 + 10.0);
    }

    #[test]
    fn the_two_level_tree_on_one_rank_per_node_is_the_leaders_tree() {
        let calibration = uniform(Level { latency_ns: 1000.0, ..Level::default() });
        let ranks = Ranks::new(16, 1, &calibration);
        let (_, leader_degree) = hierarchical_degrees(&ranks);
        // 64 KiB: above any exchange threshold.
        assert_eq!(hierarchical(&ranks, 65536), flat_tree(&ranks, leader_degree, 65536));
        let (_, leader_plan) = hierarchical_plans(&Ranks::new(2, 1, &calibration));
        assert!(leader_plan.exchange.max_bytes >= 8, "two leaders exchange small messages");
        assert_eq!(hierarchical(&Ranks::new(2, 1, &calibration), 8), exchange(&Ranks::new(2, 1, &calibration), 8));
    }
}
