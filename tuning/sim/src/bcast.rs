//! Bcast: coll rdma's reliable multicast as btl-ibmc runs it (pieces of
//! `fragment_bytes`, a window of `window_slots`, lazy ACKs every M pieces,
//! co-roots and their subgroups from `btl_ibmc::rmcast::Groups` with the
//! count of `tuning::choose_co_roots`, NACK on a gap, the collector's
//! timeout for a piece nobody can see missing), its put tree where there is
//! no multicast, the two-level design of issue 14 (multicast among node
//! leaders, then each node's shared window), and Open MPI's binomial tree.
//!
//! Losses are independent per receiver and datagram. With them the
//! broadcast's latency (until the last receiver has the message) is a
//! random variable; its distribution is computed exactly, not sampled: a
//! receiver is done by time x unless it lost a piece whose repair comes
//! after x, so P(done by x) is a product over pieces, and the last of n
//! independent receivers is done by x with that probability to the n.

use btl_ibmc::rmcast::repair::{PIECE_HEADER_BYTES, copies, repeated};
use btl_ibmc::rmcast::{Groups, Role};
use tuning::{choose_co_roots, CoRootModel};

use crate::allreduce::{component_segment_bytes, tree_down};
use crate::calibration::RmcastSettings;
use crate::ranks::{Adapter, Ranks};

/// Bytes of an ACK or NACK message.
const CONTROL_BYTES: usize = 16;

/// The co-roots coll rdma uses for `size` receivers and root: the paper's
/// model (`CoRootModel::PAPER_2004`), as `bcast_config` does by default.
pub fn component_co_roots(size: usize) -> usize {
    choose_co_roots(size, &CoRootModel::PAPER_2004).co_roots
}

/// How long until every receiver has the message.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BcastOutcome {
    /// Without any loss.
    pub lossless_ns: f64,
    /// Expected value under the calibration's loss rate.
    pub mean_ns: f64,
    pub median_ns: f64,
    /// Probability that some receiver loses the message's last piece, which
    /// only the collector's timeout repairs (no later piece shows the gap).
    pub timeout_probability: f64,
}

impl BcastOutcome {
    fn exact(ns: f64) -> Self {
        BcastOutcome { lossless_ns: ns, mean_ns: ns, median_ns: ns, timeout_probability: 0.0 }
    }

    fn shifted(self, by: f64) -> Self {
        BcastOutcome { lossless_ns: self.lossless_ns + by, mean_ns: self.mean_ns + by, median_ns: self.median_ns + by, ..self }
    }
}

fn pieces(bytes: usize, fragment: usize) -> Vec<usize> {
    let fragment = fragment.max(1);
    (0..bytes.div_ceil(fragment)).map(|i| fragment.min(bytes - i * fragment)).collect()
}

/// The multicast from rank 0 to every other rank of `ranks`, with
/// `co_roots` co-roots; every rank of a node is its own receiver (the
/// adapter hands the datagram to each rank's queue pair in turn).
pub fn multicast(ranks: &Ranks, bytes: usize, co_roots: usize) -> BcastOutcome {
    let size = ranks.size();
    let calibration = ranks.calibration;
    let settings = &calibration.rmcast;
    let mcast = &calibration.multicast;
    let pieces = pieces(bytes, settings.fragment_bytes);
    if size < 2 || pieces.is_empty() {
        return BcastOutcome::exact(0.0);
    }
    let co_roots = co_roots.min(size - 1);
    let groups = Groups::new(0, size, co_roots);
    let per_node = ranks.ranks_per_node;
    let copy = |b: usize| calibration.copy_ns_per_byte * b as f64;
    let net_receive = calibration.net.overhead_ns;
    let control = ranks.hop(0, size - 1).arrival_after_ns(CONTROL_BYTES) + net_receive;
    let ack_levels = if co_roots > 0 { 2.0 } else { 1.0 };
    let window = settings.window_slots.max(1);
    let interval = settings.ack_interval.clamp(1, window);

    // The co-roots' forwarding order (parents before children) and their
    // CPUs, which forward piece after piece.
    let mut forwarding = vec![0usize];
    let mut next = 0;
    while next < forwarding.len() {
        let from = forwarding[next];
        forwarding.extend(groups.forward_to(from));
        next += 1;
    }
    let mut co_root_cpu = vec![0.0f64; co_roots + 1];
    let mut co_root_done = 0.0f64;

    // Per piece: when the root posts it, when it arrives at replica
    // index c of a node, and when the slowest class has delivered it.
    let mut posted = Vec::with_capacity(pieces.len());
    let mut arrival: Vec<Vec<f64>> = vec![Vec::with_capacity(pieces.len()); per_node];
    let mut delivered: Vec<Vec<f64>> = vec![Vec::with_capacity(pieces.len()); per_node];
    let mut root_cpu = 0.0f64;
    for (j, &b) in pieces.iter().enumerate() {
        if j >= window {
            // Credit for piece j - W: its ACK, lazily sent by the last
            // member with the piece M-1 further on (or after the explicit
            // ACK delay at the tail), through a co-root's word.
            let acked = j - window;
            let slowest = &delivered[per_node - 1];
            let ack_sent = if acked + interval - 1 < j { slowest[acked + interval - 1] } else { slowest[acked] + settings.ack_delay_ns };
            root_cpu = root_cpu.max(ack_sent + ack_levels * control);
        }
        root_cpu += copy(b);
        let post = root_cpu;
        posted.push(post);
        root_cpu += mcast.post_ns + mcast.gap_per_byte_ns * b as f64;
        let on_wire = post + mcast.post_ns + mcast.gap_per_byte_ns * b as f64 + mcast.latency_ns + ranks.extra_network_latency_ns;
        for c in 0..per_node {
            let a = on_wire + c as f64 * mcast.node_replica_ns;
            let previous = delivered[c].last().copied().unwrap_or(0.0);
            arrival[c].push(a);
            delivered[c].push(previous.max(a) + net_receive + copy(b));
        }
        // Reliable forwarding to the co-roots: the root's sends follow its
        // post; each co-root forwards once it has the piece.
        let mut has = vec![f64::INFINITY; co_roots + 1];
        has[0] = root_cpu;
        for &relative in &forwarding {
            let mut cpu = if relative == 0 { root_cpu } else { co_root_cpu[relative].max(has[relative]) };
            for child in groups.forward_to(relative) {
                let hop = ranks.hop(relative, child);
                let reliable = cpu + hop.arrival_after_ns(b) + hop.overhead_ns;
                let by_multicast = on_wire + (child % per_node) as f64 * mcast.node_replica_ns + net_receive;
                has[child] = reliable.min(by_multicast);
                cpu += hop.cpu_interval_ns(b);
            }
            if relative == 0 {
                root_cpu = cpu;
            } else {
                co_root_cpu[relative] = cpu;
                co_root_done = co_root_done.max(has[relative] + copy(b));
            }
        }
    }

    // The second copies of the repeated pieces: multicast after the last
    // piece's forwards, as `Sender::flush` sends them.
    let count = pieces.len();
    let mut copy_on_wire = vec![None; count];
    for (j, &b) in pieces.iter().enumerate().filter(|&(j, _)| repeated(j, count, settings.tail_repeat)) {
        root_cpu += mcast.post_ns + mcast.gap_per_byte_ns * b as f64;
        copy_on_wire[j] = Some(root_cpu + mcast.latency_ns + ranks.extra_network_latency_ns);
    }

    // Leaves by replica index: a co-root receives reliably, never a leaf.
    let mut leaves = vec![0u64; per_node];
    for rank in 1..size {
        if let Role::Leaf { .. } = groups.role(rank) {
            leaves[rank % per_node] += 1;
        }
    }
    let last = count - 1;
    let resend = |j: usize| {
        let hop = ranks.hop(0, size - 1);
        hop.arrival_after_ns(pieces[j]) + hop.overhead_ns + copy(pieces[j])
    };
    let round_trip = 2.0 * control;
    let timeout = settings.timeout_round_trips.map_or(settings.timeout_ns, |k| k * round_trip);
    let loss = calibration.multicast.loss;
    // When a receiver that lost piece j's original has it, per class: a
    // gap seen at the next piece's arrival is NACKed; the last piece (or
    // any, without NACKs) waits for the collector's timeout. A second
    // chance (the copy, or the candidate tail probe) comes earlier and is
    // itself lost with the loss rate.
    let repairs: Vec<Vec<Repair>> = (0..per_node)
        .map(|c| {
            (0..count)
                .map(|j| {
                    let nacked = j < last && settings.nack;
                    let repaired = if nacked { arrival[c][j + 1] + net_receive + control + resend(j) } else { posted[j] + timeout + resend(j) };
                    let by_copy = copy_on_wire[j].map(|on_wire| on_wire + c as f64 * mcast.node_replica_ns + net_receive + copy(pieces[j]));
                    let by_probe = settings
                        .tail_probe_round_trips
                        .filter(|_| j == last && settings.nack)
                        .map(|k| posted[j] + k * round_trip + control + resend(j));
                    let second = [by_copy, by_probe].into_iter().flatten().filter(|&t| t < repaired).reduce(f64::min);
                    Repair { second, repaired }
                })
                .collect()
        })
        .collect();
    let base: Vec<f64> = (0..per_node).map(|c| delivered[c][last]).collect();
    let lossless =
        (0..per_node).filter(|&c| leaves[c] > 0).map(|c| base[c]).fold(co_root_done, f64::max);
    let total_leaves: u64 = leaves.iter().sum();
    // A leaf waits for a timeout when it loses every chance of a piece that
    // no later piece reveals.
    let classes = (0..per_node).find(|&c| leaves[c] > 0).unwrap_or(0);
    let waits = |j: usize| {
        let r = &repairs[classes][j];
        if settings.nack && j < last { 0.0 } else { loss * r.second.map_or(1.0, |_| loss) }
    };
    let keep_all: f64 = (0..count).map(|j| 1.0 - waits(j)).product();
    let timeout_probability = 1.0 - keep_all.powf(total_leaves as f64);
    if loss == 0.0 || total_leaves == 0 {
        return BcastOutcome { timeout_probability, ..BcastOutcome::exact(lossless) };
    }
    let (log_keep, log_keep_twice) = ((1.0 - loss).ln(), (1.0 - loss * loss).ln());
    let log_done_by = |x: f64| -> f64 {
        if x < co_root_done {
            return f64::NEG_INFINITY;
        }
        let mut sum = 0.0;
        for c in (0..per_node).filter(|&c| leaves[c] > 0) {
            if x < base[c] {
                return f64::NEG_INFINITY;
            }
            let pending: f64 = repairs[c]
                .iter()
                .map(|r| match r.second {
                    _ if x >= r.repaired => 0.0,
                    Some(second) if x >= second => log_keep_twice,
                    _ => log_keep,
                })
                .sum();
            sum += leaves[c] as f64 * pending;
        }
        sum
    };
    let mut support: Vec<f64> = repairs
        .iter()
        .flatten()
        .flat_map(|r| [Some(r.repaired), r.second])
        .flatten()
        .chain(base.iter().copied())
        .chain([co_root_done])
        .filter(|&x| x >= lossless)
        .collect();
    support.push(lossless);
    support.sort_by(f64::total_cmp);
    support.dedup();
    let (mut mean, mut median, mut below) = (0.0, f64::NAN, 0.0);
    for &x in &support {
        let done = log_done_by(x).exp();
        mean += x * (done - below);
        if median.is_nan() && done >= 0.5 {
            median = x;
        }
        below = done;
    }
    BcastOutcome { lossless_ns: lossless, mean_ns: mean, median_ns: median, timeout_probability }
}

/// How a receiver that lost a piece's original gets it: by `second` (the
/// repeated copy or a tail probe's NACK; None if there is none before the
/// repair), itself lost like the original, else by `repaired`.
#[derive(Clone, Copy, Debug)]
struct Repair {
    second: Option<f64>,
    repaired: f64,
}

/// Bytes the root multicasts per byte delivered, loss-free, for a message
/// of `bytes` with `settings`'s pieces and repeats (headers included).
pub fn wire_bytes_per_byte(settings: &RmcastSettings, bytes: usize) -> f64 {
    let pieces = pieces(bytes, settings.fragment_bytes);
    let count = pieces.len();
    let on_wire: usize = pieces
        .iter()
        .enumerate()
        .map(|(j, &b)| copies(j, count, settings.tail_repeat) as usize * (b + PIECE_HEADER_BYTES))
        .sum();
    on_wire as f64 / bytes.max(1) as f64
}

/// coll rdma's flat bcast across nodes today: one multicast to every rank,
/// with the co-roots the component picks for the communicator's size.
pub fn flat_multicast(ranks: &Ranks, bytes: usize) -> BcastOutcome {
    multicast(ranks, bytes, component_co_roots(ranks.size()))
}

/// The two-level bcast: multicast among the node leaders (co-roots among
/// leaders), then each leader writes every piece into its node's shared
/// window and the node's other ranks copy it out. The node stage keeps up
/// with the network, so only the last piece's way through it adds.
pub fn hierarchical(ranks: &Ranks, bytes: usize) -> BcastOutcome {
    let leaders = ranks.leaders();
    let across = if ranks.nodes > 1 { multicast(&leaders, bytes, component_co_roots(ranks.nodes)) } else { BcastOutcome::exact(0.0) };
    let members = ranks.ranks_per_node - 1;
    if members == 0 || bytes == 0 {
        return across;
    }
    let calibration = ranks.calibration;
    let shm = &calibration.shm;
    let last_piece = bytes - (bytes - 1) / calibration.rmcast.fragment_bytes.max(1) * calibration.rmcast.fragment_bytes.max(1);
    let copy = calibration.copy_ns_per_byte * last_piece as f64;
    let flag = shm.overhead_ns + shm.gap_per_byte_ns * 8.0 + shm.latency_ns;
    let readers = (members - 1) as f64 * calibration.shm_flag_reader_ns;
    across.shifted(copy + flag + readers + shm.overhead_ns + copy)
}

/// coll rdma's put tree (no multicast): the degree-1 tree of `TreeLinks`,
/// pipelined in the tree's segments.
pub fn put_tree(ranks: &Ranks, bytes: usize) -> f64 {
    let members: Vec<usize> = (0..ranks.size()).collect();
    let segment = bytes.min(component_segment_bytes());
    let further = if segment == 0 { 0.0 } else { (bytes.div_ceil(segment) - 1) as f64 };
    let (last, bottleneck) = tree_down(ranks, &members, 1, segment, 0.0);
    last + further * bottleneck
}

/// Open MPI's binomial bcast over two-sided messages, unsegmented: each
/// rank that has the message sends it to its children, the largest
/// subtree first.
pub fn open_mpi_binomial(ranks: &Ranks, bytes: usize) -> f64 {
    let ranks = ranks.two_sided();
    let size = ranks.size();
    let mut have = vec![0.0; size];
    let mut last: f64 = 0.0;
    for v in 0..size {
        let mut cpu = have[v];
        // v's children are v + 2^k for every 2^k above v's highest bit;
        // the nearest heads the largest subtree.
        let lowest = if v == 0 { 1 } else { (v + 1).next_power_of_two() };
        let mut children = Vec::new();
        let mut step = lowest;
        while v + step < size {
            children.push(v + step);
            step <<= 1;
        }
        let mut adapter = Adapter::default();
        for &child in &children {
            let hop = ranks.hop(v, child);
            let start = adapter.pass(&hop, cpu, bytes);
            have[child] = start + hop.arrival_after_ns(bytes) + hop.overhead_ns;
            cpu = start + hop.cpu_interval_ns(bytes);
        }
        last = last.max(have[v]);
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::{Calibration, Level, Multicast, RmcastSettings};

    fn calibration() -> Calibration {
        let level = Level { latency_ns: 1000.0, ..Level::default() };
        Calibration {
            shm: level,
            net: level,
            multicast: Multicast { latency_ns: 2000.0, ..Multicast::default() },
            ..Calibration::default()
        }
    }

    #[test]
    fn binomial_is_log2_hops() {
        // Without overheads every rank sends to all its children at once,
        // so the time is the tree's depth: the most bits set in a rank
        // below P, floor(log2 P) (= log2 P on powers of two).
        let calibration = calibration();
        for size in [2usize, 3, 4, 5, 8, 9, 100, 1024, 1025] {
            let ranks = Ranks::new(size, 1, &calibration);
            let hops = (size as f64).log2().floor();
            let most_bits = (0..size).map(|v| v.count_ones()).max().unwrap_or(0) as f64;
            assert_eq!(hops, most_bits);
            assert_eq!(open_mpi_binomial(&ranks, 8), hops * 1000.0, "size {size}");
        }
        // With overheads: the root posts its children's messages o apart,
        // the largest subtree first. 4 ranks: 0 sends to 1 then 2, 1 to 3.
        let mut costly = calibration;
        costly.net.mpi_overhead_ns = 100.0;
        costly.shm.mpi_overhead_ns = 100.0;
        let ranks = Ranks::new(4, 1, &costly);
        let hop = 100.0 + 1000.0 + 100.0;
        assert_eq!(open_mpi_binomial(&ranks, 8), 2.0 * hop);
        assert_eq!(open_mpi_binomial(&Ranks::new(3, 1, &costly), 8), 100.0 + hop);
    }

    #[test]
    fn the_put_tree_is_its_depth_in_latencies_without_the_mpi_layer() {
        let mut calibration = calibration();
        calibration.net.mpi_overhead_ns = 100.0;
        calibration.shm.mpi_overhead_ns = 100.0;
        for size in [2usize, 7, 64, 1000] {
            let ranks = Ranks::new(size, 1, &calibration);
            let depth = crate::allreduce::tests::depth(size, 1) as f64;
            assert_eq!(put_tree(&ranks, 8), depth * 1000.0, "size {size}");
        }
        assert_eq!(crate::allreduce::tests::depth(64, 1), 6);
    }

    #[test]
    fn a_lossless_multicast_is_post_plus_flight_plus_copies_whatever_the_size() {
        let mut calibration = calibration();
        calibration.multicast.post_ns = 300.0;
        calibration.copy_ns_per_byte = 0.5;
        for size in [2usize, 8, 1024, 16384] {
            let ranks = Ranks::new(size, 1, &calibration);
            // Copy in (4 ns), post (300), flight (2000), copy out (4): the
            // co-roots get it by multicast too, no later than that.
            let outcome = multicast(&ranks, 8, component_co_roots(size));
            assert_eq!(outcome.lossless_ns, 4.0 + 300.0 + 2000.0 + 4.0, "size {size}");
            assert_eq!(outcome.mean_ns, outcome.lossless_ns);
        }
    }

    #[test]
    fn a_lost_single_piece_waits_for_the_timeout_with_the_probability_of_any_loss() {
        let mut calibration = calibration();
        calibration.rmcast.tail_repeat = 0;
        calibration.multicast.loss = 0.001;
        let ranks = Ranks::new(1000, 1, &calibration);
        let outcome = multicast(&ranks, 8, 0);
        let leaves = 999.0;
        let any_loss = 1.0 - (1.0f64 - 0.001).powf(leaves);
        assert!((outcome.timeout_probability - any_loss).abs() < 1e-12);
        let repaired = calibration.rmcast.timeout_ns + 1000.0; // resend over the network
        let expected = (1.0 - any_loss) * outcome.lossless_ns + any_loss * repaired;
        assert!((outcome.mean_ns - expected).abs() < 1e-6 * expected, "{} vs {expected}", outcome.mean_ns);
        assert_eq!(outcome.median_ns, if any_loss > 0.5 { repaired } else { outcome.lossless_ns });
    }

    #[test]
    fn a_lost_inner_piece_is_nacked_at_the_next_arrival() {
        let mut calibration = calibration();
        calibration.rmcast.tail_repeat = 0;
        calibration.multicast.loss = 0.5;
        calibration.rmcast.fragment_bytes = 4;
        let ranks = Ranks::new(2, 1, &calibration);
        // Two pieces, one receiver: each lost with probability 1/2.
        let outcome = multicast(&ranks, 8, 0);
        let lossless = 2000.0;
        let nacked = 2000.0 + 1000.0 + 1000.0; // next arrival, NACK, resend
        let timed_out = calibration.rmcast.timeout_ns + 1000.0;
        // Done at the timeout unless the last piece arrived (1/2); then at
        // the NACK repair if the first was lost (1/4), else lossless (1/4).
        let expected = 0.5 * timed_out + 0.25 * nacked + 0.25 * lossless;
        assert!((outcome.mean_ns - expected).abs() < 1e-6, "{} vs {expected}", outcome.mean_ns);
    }

    /// One piece to 999 receivers, multicast twice: a receiver has it at
    /// the original's arrival (1 - p), else at the copy's (p (1 - p)),
    /// else at the timeout (p^2); the bcast ends with the last of 999
    /// independent receivers.
    #[test]
    fn a_repeated_single_piece_waits_for_the_timeout_only_when_both_copies_are_lost() {
        let mut calibration = calibration();
        calibration.rmcast.tail_repeat = 1;
        calibration.multicast.post_ns = 300.0;
        let p: f64 = 0.01;
        calibration.multicast.loss = p;
        let ranks = Ranks::new(1000, 1, &calibration);
        let outcome = multicast(&ranks, 8, 0);
        // Post 300 then flight 2000; the copy is posted after the original.
        let (original, copy) = (300.0 + 2000.0, 600.0 + 2000.0);
        let repaired = calibration.rmcast.timeout_ns + 1000.0;
        let receivers = 999.0;
        let by_original = (1.0 - p).powf(receivers);
        let by_copy = (1.0 - p * p).powf(receivers);
        let expected = original * by_original + copy * (by_copy - by_original) + repaired * (1.0 - by_copy);
        assert_eq!(outcome.lossless_ns, original);
        assert!((outcome.mean_ns - expected).abs() < 1e-6 * expected, "{} vs {expected}", outcome.mean_ns);
        assert!((outcome.timeout_probability - (1.0 - by_copy)).abs() < 1e-12);
        // P(done at the original) = 0.99^999 is tiny; by the copy, 0.905.
        assert_eq!(outcome.median_ns, copy);
    }

    /// The candidates not built: a probe k round trips after the last piece
    /// lets a receiver that lost it NACK (itself lost with p), and a
    /// timeout of k round trips replaces the configured one.
    #[test]
    fn a_tail_probe_and_a_round_trip_timeout_repair_at_their_times() {
        let mut calibration = calibration();
        calibration.rmcast.tail_repeat = 0;
        let p: f64 = 0.5;
        calibration.multicast.loss = p;
        let timeout_only = multicast(&Ranks::new(2, 1, &calibration), 8, 0).mean_ns;
        // Round trip 2 x 1000; the NACK 1000 and the resend 1000.
        calibration.rmcast.tail_probe_round_trips = Some(3.0);
        let probed = multicast(&Ranks::new(2, 1, &calibration), 8, 0);
        let (lossless, by_probe, by_timeout) = (2000.0, 3.0 * 2000.0 + 1000.0 + 1000.0, calibration.rmcast.timeout_ns + 1000.0);
        let expected = (1.0 - p) * lossless + p * (1.0 - p) * by_probe + p * p * by_timeout;
        assert!((probed.mean_ns - expected).abs() < 1e-6 * expected, "{} vs {expected}", probed.mean_ns);
        calibration.rmcast.tail_probe_round_trips = None;
        calibration.rmcast.timeout_round_trips = Some(4.0);
        let quick = multicast(&Ranks::new(2, 1, &calibration), 8, 0);
        let expected = (1.0 - p) * lossless + p * (4.0 * 2000.0 + 1000.0);
        assert!((quick.mean_ns - expected).abs() < 1e-6 * expected, "{} vs {expected}", quick.mean_ns);
        assert_eq!(timeout_only, (1.0 - p) * lossless + p * by_timeout);
    }

    #[test]
    fn repeats_cost_one_piece_per_message_on_the_wire() {
        let mut settings = RmcastSettings { fragment_bytes: 4096, tail_repeat: 0, ..RmcastSettings::default() };
        let once = |bytes: usize, settings: &RmcastSettings| wire_bytes_per_byte(settings, bytes);
        assert_eq!(once(8, &settings), 48.0 / 8.0);
        assert_eq!(once(65536, &settings), 16.0 * 4136.0 / 65536.0);
        settings.tail_repeat = 1;
        assert_eq!(once(8, &settings), 96.0 / 8.0);
        assert_eq!(once(65536, &settings), 17.0 * 4136.0 / 65536.0);
        assert!(once(65536, &settings) / once(65536, &RmcastSettings { tail_repeat: 0, ..settings }) <= 1.1);
    }

    #[test]
    fn a_full_window_waits_for_credit() {
        let mut calibration = calibration();
        calibration.rmcast.fragment_bytes = 1;
        calibration.rmcast.window_slots = 4;
        calibration.rmcast.ack_interval = 1;
        calibration.multicast.post_ns = 10.0;
        let ranks = Ranks::new(2, 1, &calibration);
        // Pieces 0..3 go 10 ns apart; piece 4 waits for piece 0's ACK:
        // delivered at 10 + 2000, acknowledged 1000 later.
        let four = multicast(&ranks, 4, 0).lossless_ns;
        let five = multicast(&ranks, 5, 0).lossless_ns;
        assert_eq!(four, 40.0 + 2000.0);
        assert_eq!(five, (10.0 + 2000.0 + 1000.0) + 10.0 + 2000.0);
    }

    #[test]
    fn two_levels_add_the_node_stage_of_the_last_piece() {
        let mut calibration = calibration();
        calibration.shm = Level { latency_ns: 100.0, overhead_ns: 10.0, ..Level::default() };
        calibration.shm_flag_reader_ns = 5.0;
        calibration.copy_ns_per_byte = 1.0;
        let ranks = Ranks::new(16, 4, &calibration);
        let leaders = multicast(&Ranks::new(16, 1, &calibration), 8, component_co_roots(16));
        let node = 8.0 + (10.0 + 100.0) + 2.0 * 5.0 + 10.0 + 8.0;
        assert_eq!(hierarchical(&ranks, 8).lossless_ns, leaders.lossless_ns + node);
    }
}
