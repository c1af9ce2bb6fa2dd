//! The cost model behind the allreduce's degree and its small-message
//! variant, after Gupta 2002 (section 6.4, figure 6.16).
//!
//! The thesis models one reduction step as: every sender pays
//! T_mpi + T_descriptor + T_startup + T_nic, the message crosses the wire,
//! the receiver pays T_nic and a DMA startup per message, and combines.
//! Messages to one receiver serialise: while they are short, each extra one
//! costs a DMA startup (the receiver's gap); once T_transmit exceeds that,
//! each extra one costs its whole transmit time. We keep exactly those two
//! regimes in one expression, `extra = max(gap, transfer)`, and generalise
//! the figure's power-of-two loop to the fan-outs `round_fanouts(size, k)`
//! of any size and degree. Two things the thesis did not model are added
//! because the implementation does them: the result travels back down the
//! same tree (the thesis used a separate binomial broadcast), and long
//! messages are pipelined in segments, so after the pipeline fills, the
//! busiest rank (rank 0, which has the most children) sets the pace.
//!
//! With fan-outs f_s, message m, segment σ = min(m, segment_bytes),
//! n = ⌈m/σ⌉ segments, latency α, per-byte transfer β, per-byte combine γ
//! and gap g:
//!
//! ```text
//! extra      = max(g, β·σ)
//! up(f)      = α + β·σ + (f-1)·extra + f·γ·σ      (receive f partials, combine in rank order)
//! down(f)    = α + β·σ + (f-1)·extra              (put the result to f children)
//! busiest    = Σ_s f_s·(2·extra + γ·σ)            (rank 0's work per segment)
//! tree(k, m) = Σ_s up(f_s) + Σ_s down(f_s) + (n-1)·busiest
//! exchange   = α + β·m + (P-2)·max(g, β·m) + (P-1)·γ·m
//! ```
//!
//! The exchange variant is one step in which every rank puts its whole
//! contribution to all P-1 others and then combines P-1 of them locally: no
//! broadcast, but a fan-out of P-1 that grows with the communicator.
//! Copies into and out of the caller's buffers are the same for every
//! choice, so they are left out.

use crate::dissemination::round_fanouts;

/// Largest degree the model considers: beyond it one step's fan-in exceeds
/// any node-local communicator.
pub const MAX_ALLREDUCE_DEGREE: usize = 64;

/// Cost parameters, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AllreduceModel {
    /// From issuing a small put to the target seeing it: the thesis'
    /// sender-side T_mpi + T_descriptor + T_startup + T_nic plus the
    /// receiver's T_nic + T_startup.
    pub message_latency_ns: f64,
    /// Moving one byte into a peer's window (T_transmit per byte).
    pub transfer_ns_per_byte: f64,
    /// Combining one byte of a partial into the accumulator (T_operation
    /// per byte).
    pub reduce_ns_per_byte: f64,
    /// What each further small message of the same step adds (a DMA
    /// startup in the thesis, issuing one more store stream on a node).
    pub put_gap_ns: f64,
    /// The pipeline unit; `None` sends each message whole, as the thesis did.
    pub segment_bytes: Option<usize>,
}

impl AllreduceModel {
    /// One node, puts are stores into a shared mapping: a cache-line round
    /// trip per message, memcpy-speed transfers, and a combine through the
    /// MPI op callback at a few GB/s.
    pub const SHARED_MEMORY: AllreduceModel = AllreduceModel {
        message_latency_ns: 200.0,
        transfer_ns_per_byte: 0.15,
        reduce_ns_per_byte: 0.25,
        put_gap_ns: 40.0,
        segment_bytes: Some(8192),
    };

    /// The thesis' GigaNet cLAN cluster (section 6.5.3): T_mpi 1.3 µs,
    /// T_descriptor 0.6 µs, T_startup 2 µs, T_nic 1.52 µs, 0.010 µs/byte.
    /// The thesis gives no per-byte operation cost; 5 ns/byte is assumed.
    pub const THESIS_GIGANET: AllreduceModel = AllreduceModel {
        message_latency_ns: 1300.0 + 600.0 + 2000.0 + 1520.0 + 1520.0 + 2000.0,
        transfer_ns_per_byte: 10.0,
        reduce_ns_per_byte: 5.0,
        put_gap_ns: 2000.0,
        segment_bytes: None,
    };

    fn segment_for(&self, bytes: usize) -> (f64, f64) {
        let segment = match self.segment_bytes {
            Some(limit) if limit > 0 => bytes.min(limit),
            _ => bytes,
        };
        let segments = if segment == 0 { 1 } else { bytes.div_ceil(segment) };
        (segment as f64, segments as f64)
    }

    /// What each message beyond the first costs in one step: the gap while
    /// messages are short, their transfer once that is longer.
    fn extra_message_ns(&self, bytes: f64) -> f64 {
        self.put_gap_ns.max(self.transfer_ns_per_byte * bytes)
    }

    /// Predicted degree-`degree` tree allreduce of `bytes` bytes over `size` ranks.
    pub fn predict_tree_ns(&self, size: usize, degree: usize, bytes: usize) -> f64 {
        let (segment, segments) = self.segment_for(bytes);
        let extra = self.extra_message_ns(segment);
        let first = self.message_latency_ns + self.transfer_ns_per_byte * segment;
        let combine = self.reduce_ns_per_byte * segment;
        let mut fill = 0.0;
        let mut busiest = 0.0;
        for fanout in round_fanouts(size, degree) {
            let f = fanout as f64;
            let up = first + (f - 1.0) * extra + f * combine;
            let down = first + (f - 1.0) * extra;
            fill += up + down;
            busiest += f * (2.0 * extra + combine);
        }
        fill + (segments - 1.0) * busiest
    }

    /// Predicted exchange-variant allreduce of `bytes` bytes over `size` ranks.
    pub fn predict_exchange_ns(&self, size: usize, bytes: usize) -> f64 {
        if size < 2 {
            return 0.0;
        }
        let m = bytes as f64;
        let peers = (size - 1) as f64;
        self.message_latency_ns
            + self.transfer_ns_per_byte * m
            + (peers - 1.0) * self.extra_message_ns(m)
            + peers * self.reduce_ns_per_byte * m
    }
}

/// Longest message [`choose_allreduce_plan`] weighs when it picks the
/// degree; beyond it the pipelined tree's time grows in proportion and the
/// ranking of degrees no longer changes.
pub const RANGE_TOP_BYTES: usize = 1 << 20;

/// Largest exchange threshold [`choose_allreduce_plan`] will pick: every
/// rank reserves two slots of this size per rank of the communicator.
pub const EXCHANGE_LIMIT_BYTES: usize = 4096;

/// What an allreduce communicator is built with when nothing is fixed by
/// the user: the exchange threshold and the one tree degree.
#[derive(Clone, Debug, PartialEq)]
pub struct AllreducePlan {
    pub exchange: ExchangeChoice,
    pub degree: RangeDegreeChoice,
}

/// The plan the model predicts fastest for `size` ranks cut into segments
/// of `segment_bytes`. The window holds one tree, so its degree is the one
/// least slower than the best over every length the tree carries: from just
/// above the exchange threshold to [`RANGE_TOP_BYTES`]. coll rdma's
/// allreduce and reduce (each with its own segment) and the simulator take
/// their choice from here, except a reduce on an oversubscribed node
/// ([`choose_oversubscribed_reduce_degree`]).
pub fn choose_allreduce_plan(size: usize, model: &AllreduceModel, segment_bytes: usize) -> AllreducePlan {
    let exchange = choose_exchange_max_bytes(size, model, EXCHANGE_LIMIT_BYTES.min(segment_bytes));
    let degree = choose_degree_for_range(size, exchange.max_bytes + 1, RANGE_TOP_BYTES, model);
    AllreducePlan { exchange, degree }
}

/// What one step of a tree costs at least where a node runs more ranks
/// than it has cores: the child a parent waits for is often not running,
/// so the wait hands the core over (a yield and a context switch) before
/// the child's store can land. About 2 µs on the 2-core test VM: at np=4
/// there a reduce through the two-step tree took 6 µs from the last rank's
/// entry to the last exit, through the one-step tree 1.5-2.5 µs.
pub const OVERSUBSCRIBED_STEP_LATENCY_NS: f64 = 2000.0;

/// The reduce tree's degree where the node runs more ranks than cores:
/// the model with each step costing at least
/// [`OVERSUBSCRIBED_STEP_LATENCY_NS`], over every length from one byte
/// (a reduce has no exchange variant, so its tree carries the short
/// messages too) to [`RANGE_TOP_BYTES`]. Fewer steps win there: a flatter
/// tree has fewer ranks waiting for a descheduled child.
pub fn choose_oversubscribed_reduce_degree(size: usize, model: &AllreduceModel) -> RangeDegreeChoice {
    let model = AllreduceModel { message_latency_ns: model.message_latency_ns.max(OVERSUBSCRIBED_STEP_LATENCY_NS), ..*model };
    choose_degree_for_range(size, 1, RANGE_TOP_BYTES, &model)
}

/// The degree the model picked, what it predicted and why.
#[derive(Clone, Debug, PartialEq)]
pub struct DegreeChoice {
    pub degree: usize,
    pub predicted_ns: f64,
    pub reason: String,
}

/// Degrees worth comparing: from size-1 on, every degree is one flat step.
fn candidate_degrees(size: usize) -> std::ops::RangeInclusive<usize> {
    1..=MAX_ALLREDUCE_DEGREE.min(size.saturating_sub(1).max(1))
}

/// Picks the tree degree with the lowest predicted time for `bytes` bytes
/// over `size` ranks; ties go to the smaller degree, which needs fewer
/// slots in every window.
pub fn choose_allreduce_degree(size: usize, bytes: usize, model: &AllreduceModel) -> DegreeChoice {
    let mut ranked: Vec<(usize, f64)> =
        candidate_degrees(size).map(|degree| (degree, model.predict_tree_ns(size, degree, bytes))).collect();
    // Stable sort keeps ascending degree among equal predictions.
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (degree, predicted_ns) = ranked[0];
    let fanouts = round_fanouts(size, degree);
    let widest = fanouts.iter().copied().max().unwrap_or(0);
    let (segment, _) = model.segment_for(bytes);
    let against = match ranked.get(1) {
        Some(&(runner_up, runner_up_ns)) => format!("against {runner_up_ns:.0} ns for the runner-up k={runner_up}"),
        None => "with no other degree possible".to_string(),
    };
    let reason = format!(
        "k={degree} because {} step(s) of at most {widest} sender(s) best balance the {:.0} ns latency of each step \
         against the {:.0} ns each further sender adds for {bytes} bytes over {size} ranks, \
         predicted {predicted_ns:.0} ns {against}.",
        fanouts.len(),
        model.message_latency_ns,
        model.extra_message_ns(segment) + model.reduce_ns_per_byte * segment,
    );
    DegreeChoice { degree, predicted_ns, reason }
}

/// One degree for every message a communicator's tree will carry.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeDegreeChoice {
    pub degree: usize,
    /// Largest predicted time relative to the best degree for that size
    /// (1.0: never slower than the best).
    pub worst_slowdown: f64,
    pub reason: String,
}

/// Sizes on a doubling grid from `smallest` to `largest`, both included.
fn doubling_grid(smallest: usize, largest: usize) -> Vec<usize> {
    let mut grid = Vec::new();
    let mut bytes = smallest.max(1);
    while bytes < largest {
        grid.push(bytes);
        bytes = bytes.saturating_mul(2);
    }
    grid.push(largest.max(smallest).max(1));
    grid
}

/// The degree to build a tree with when it must serve every message from
/// `smallest` to `largest` bytes (the window is laid out for one degree):
/// the one whose predicted time is least slower than the best degree's, at
/// its worst point of a doubling grid over the range.
pub fn choose_degree_for_range(
    size: usize,
    smallest: usize,
    largest: usize,
    model: &AllreduceModel,
) -> RangeDegreeChoice {
    let grid = doubling_grid(smallest, largest);
    let best: Vec<f64> = grid.iter().map(|&bytes| choose_allreduce_degree(size, bytes, model).predicted_ns).collect();
    let slowdown_of = |degree: usize| -> (f64, usize) {
        grid.iter()
            .zip(&best)
            .map(|(&bytes, &best_ns)| {
                let ratio = if best_ns > 0.0 { model.predict_tree_ns(size, degree, bytes) / best_ns } else { 1.0 };
                (ratio, bytes)
            })
            .fold((1.0, grid[0]), |worst, point| if point.0 > worst.0 { point } else { worst })
    };
    let mut ranked: Vec<(usize, (f64, usize))> =
        candidate_degrees(size).map(|degree| (degree, slowdown_of(degree))).collect();
    ranked.sort_by(|a, b| a.1 .0.total_cmp(&b.1 .0));
    let (degree, (worst_slowdown, worst_at)) = ranked[0];
    let against = match ranked.get(1) {
        Some(&(other, (other_slowdown, other_at))) => format!(
            "while the runner-up k={other} is up to {:.0}% slower at {other_at} bytes",
            (other_slowdown - 1.0) * 100.0
        ),
        None => "with no other degree possible".to_string(),
    };
    let reason = format!(
        "k={degree} because from {} to {} bytes over {size} ranks it is never more than {:.0}% slower than the best \
         degree for each size (worst at {worst_at} bytes), {against}.",
        grid[0],
        grid[grid.len() - 1],
        (worst_slowdown - 1.0) * 100.0
    );
    RangeDegreeChoice { degree, worst_slowdown, reason }
}

/// The largest message the exchange variant should carry, with why.
#[derive(Clone, Debug, PartialEq)]
pub struct ExchangeChoice {
    pub max_bytes: usize,
    pub reason: String,
}

/// The exchange-variant threshold for `size` ranks: the largest size on a
/// doubling grid from 8 bytes up to `limit` below which the exchange is
/// predicted to beat the best tree at every grid point (0 if it never
/// does). `limit` bounds the window space the exchange slots take.
pub fn choose_exchange_max_bytes(size: usize, model: &AllreduceModel, limit: usize) -> ExchangeChoice {
    let mut max_bytes = 0;
    let mut bytes = 8;
    while bytes <= limit {
        let exchange = model.predict_exchange_ns(size, bytes);
        let tree = choose_allreduce_degree(size, bytes, model).predicted_ns;
        if exchange > tree {
            break;
        }
        max_bytes = bytes;
        bytes *= 2;
    }
    let reason = if max_bytes == 0 {
        format!(
            "the exchange is never used over {size} ranks because even 8 bytes cost {:.0} ns against {:.0} ns for the best tree.",
            model.predict_exchange_ns(size, 8),
            choose_allreduce_degree(size, 8, model).predicted_ns
        )
    } else {
        format!(
            "the exchange carries up to {max_bytes} bytes over {size} ranks because up to there one step of {} put(s) \
             per rank is predicted faster than reducing and broadcasting through the best tree (limit {limit} bytes).",
            size.saturating_sub(1)
        )
    };
    ExchangeChoice { max_bytes, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODELS: [AllreduceModel; 2] = [AllreduceModel::SHARED_MEMORY, AllreduceModel::THESIS_GIGANET];

    /// The thesis could only build degrees 2^j - 1 below the node count.
    fn best_thesis_degree(size: usize, bytes: usize, model: &AllreduceModel) -> usize {
        let buildable = (1..).map(|j| (1usize << j) - 1).take_while(|&k| k < size);
        let predicted = |k: &usize| model.predict_tree_ns(size, *k, bytes);
        buildable.min_by(|a, b| predicted(a).total_cmp(&predicted(b))).unwrap_or(1)
    }

    #[test]
    fn the_thesis_parameters_reproduce_its_measured_winners() {
        // Section 6.5.2: on 16 nodes degree 3 wins up to about 1 KiB and
        // degree 1 beyond; on 8 nodes degree 7 wins for the smallest
        // messages, degree 3 from 512 bytes, degree 1 for the largest.
        let model = AllreduceModel::THESIS_GIGANET;
        assert_eq!(best_thesis_degree(16, 4, &model), 3);
        assert_eq!(best_thesis_degree(16, 512, &model), 3);
        assert_eq!(best_thesis_degree(16, 4096, &model), 1);
        assert_eq!(best_thesis_degree(8, 4, &model), 7);
        assert_eq!(best_thesis_degree(8, 512, &model), 3);
        assert_eq!(best_thesis_degree(8, 4096, &model), 1);
        // Free to use any degree, the model still goes wide for small
        // messages and narrow for large ones.
        assert!(choose_allreduce_degree(16, 4, &model).degree >= 3);
        assert_eq!(choose_allreduce_degree(16, 4096, &model).degree, 1);
    }

    #[test]
    fn predictions_grow_with_the_message() {
        for model in MODELS {
            for size in [2, 3, 7, 16, 33] {
                for degree in 1..=9 {
                    let mut previous = 0.0;
                    for bytes in (0..70_000).step_by(37) {
                        let predicted = model.predict_tree_ns(size, degree, bytes);
                        assert!(predicted >= previous, "size {size} k {degree} bytes {bytes}");
                        previous = predicted;
                    }
                }
                let mut previous = 0.0;
                for bytes in (0..70_000).step_by(37) {
                    let predicted = model.predict_exchange_ns(size, bytes);
                    assert!(predicted >= previous, "exchange size {size} bytes {bytes}");
                    previous = predicted;
                }
            }
        }
    }

    #[test]
    fn predictions_grow_with_the_communicator() {
        for model in MODELS {
            for bytes in [8, 1000, 100_000] {
                for degree in 1..=9 {
                    let mut previous = 0.0;
                    for size in 1..=100 {
                        let predicted = model.predict_tree_ns(size, degree, bytes);
                        assert!(predicted >= previous, "k {degree} bytes {bytes} size {size}");
                        previous = predicted;
                    }
                }
                let mut previous = 0.0;
                for size in 1..=100 {
                    let predicted = model.predict_exchange_ns(size, bytes);
                    assert!(predicted >= previous, "exchange bytes {bytes} size {size}");
                    previous = predicted;
                }
            }
        }
    }

    #[test]
    fn the_choice_is_the_argmin_and_ties_go_to_the_smaller_degree() {
        for model in MODELS {
            for size in 1..=40 {
                for bytes in [1, 64, 1024, 16_384, 1 << 20] {
                    let choice = choose_allreduce_degree(size, bytes, &model);
                    for degree in candidate_degrees(size) {
                        let other = model.predict_tree_ns(size, degree, bytes);
                        assert!(choice.predicted_ns <= other, "size {size} bytes {bytes}: k {degree} is cheaper");
                        if other == choice.predicted_ns {
                            assert!(choice.degree <= degree, "tie not broken towards the smaller degree");
                        }
                    }
                }
            }
        }
        // Every degree from size-1 on is the same single flat step.
        let model = AllreduceModel::SHARED_MEMORY;
        assert_eq!(model.predict_tree_ns(5, 4, 64), model.predict_tree_ns(5, 9, 64));
    }

    #[test]
    fn explanations_name_the_choice_in_one_sentence() {
        for model in MODELS {
            for size in [1, 2, 5, 16, 64] {
                for bytes in [8, 4096, 1 << 20] {
                    let choice = choose_allreduce_degree(size, bytes, &model);
                    let prefix = format!("k={} because ", choice.degree);
                    assert!(choice.reason.starts_with(&prefix), "{}", choice.reason);
                    assert!(choice.reason.ends_with('.'), "{}", choice.reason);
                    assert_eq!(choice.reason.matches(". ").count(), 0, "{}", choice.reason);
                    assert!(choice.reason.contains(&format!("over {size} ranks")), "{}", choice.reason);
                }
            }
        }
        let two = choose_allreduce_degree(2, 8, &AllreduceModel::SHARED_MEMORY);
        assert_eq!(two.degree, 1);
        assert!(two.reason.contains("no other degree"), "{}", two.reason);
    }

    #[test]
    fn pipelined_large_messages_prefer_narrow_trees() {
        let model = AllreduceModel::SHARED_MEMORY;
        for size in [4, 8, 16, 32] {
            assert_eq!(choose_allreduce_degree(size, 1 << 22, &model).degree, 1, "size {size}");
        }
        // Small messages on a node favour wide steps: a step's latency
        // outweighs several extra stores.
        assert!(choose_allreduce_degree(16, 8, &model).degree > 1);
    }

    #[test]
    fn the_exchange_wins_only_for_small_messages_on_small_communicators() {
        let model = AllreduceModel::SHARED_MEMORY;
        let few = choose_exchange_max_bytes(4, &model, 1 << 16);
        assert!(few.max_bytes >= 64, "{}", few.reason);
        assert!(few.max_bytes < 1 << 16, "{}", few.reason);
        let many = choose_exchange_max_bytes(64, &model, 1 << 16);
        assert_eq!(many.max_bytes, 0, "{}", many.reason);
        assert!(many.reason.contains("never"));
        assert!(model.predict_exchange_ns(4, 8) < choose_allreduce_degree(4, 8, &model).predicted_ns);
        // The limit caps the threshold.
        assert!(choose_exchange_max_bytes(2, &model, 64).max_bytes <= 64);
    }

    #[test]
    fn one_degree_for_a_range_is_never_far_from_the_best() {
        for model in MODELS {
            for size in [2, 5, 16, 40] {
                let choice = choose_degree_for_range(size, 100, 1 << 20, &model);
                assert!(choice.worst_slowdown >= 1.0);
                assert!(choice.reason.starts_with(&format!("k={} because ", choice.degree)), "{}", choice.reason);
                for degree in candidate_degrees(size) {
                    let other = choose_degree_for_range_with(size, degree, &model);
                    assert!(choice.worst_slowdown <= other + 1e-12, "size {size}: k={degree} has a smaller worst case");
                }
            }
        }
        // A one-point range is the per-size choice.
        let model = AllreduceModel::SHARED_MEMORY;
        assert_eq!(
            choose_degree_for_range(16, 256, 256, &model).degree,
            choose_allreduce_degree(16, 256, &model).degree
        );
        assert_eq!(choose_degree_for_range(16, 256, 256, &model).worst_slowdown, 1.0);
    }

    /// Worst slowdown of a given degree over the same range, computed directly.
    fn choose_degree_for_range_with(size: usize, degree: usize, model: &AllreduceModel) -> f64 {
        doubling_grid(100, 1 << 20)
            .into_iter()
            .map(|bytes| {
                model.predict_tree_ns(size, degree, bytes) / choose_allreduce_degree(size, bytes, model).predicted_ns
            })
            .fold(1.0, f64::max)
    }

    #[test]
    fn the_plan_takes_the_degree_over_the_lengths_above_the_exchange() {
        let model = AllreduceModel::SHARED_MEMORY;
        for size in [2, 4, 16, 64, 1000] {
            let plan = choose_allreduce_plan(size, &model, 8192);
            let exchange = choose_exchange_max_bytes(size, &model, EXCHANGE_LIMIT_BYTES);
            assert_eq!(plan.exchange, exchange, "size {size}");
            assert_eq!(plan.degree, choose_degree_for_range(size, exchange.max_bytes + 1, RANGE_TOP_BYTES, &model));
        }
        // A segment shorter than the exchange limit caps the threshold.
        assert!(choose_allreduce_plan(2, &model, 64).exchange.max_bytes <= 64);
    }

    #[test]
    fn an_oversubscribed_node_gets_a_flatter_reduce_tree() {
        let model = AllreduceModel::SHARED_MEMORY;
        // np=4 on 2 cores: one step of three senders, not two steps.
        let four = choose_oversubscribed_reduce_degree(4, &model);
        assert_eq!(four.degree, 3, "{}", four.reason);
        assert_eq!(choose_allreduce_plan(4, &model, 8192).degree.degree, 1);
        for size in [2, 3, 8, 16, 64] {
            let oversubscribed = choose_oversubscribed_reduce_degree(size, &model).degree;
            let usual = choose_allreduce_plan(size, &model, 8192).degree.degree;
            assert!(oversubscribed >= usual, "size {size}: {oversubscribed} < {usual}");
            assert!((1..=MAX_ALLREDUCE_DEGREE).contains(&oversubscribed), "size {size}: {oversubscribed}");
        }
        // A model whose steps already cost more is left as it is.
        let slow = AllreduceModel { message_latency_ns: 50_000.0, ..model };
        assert_eq!(choose_oversubscribed_reduce_degree(16, &slow), choose_degree_for_range(16, 1, RANGE_TOP_BYTES, &slow));
    }

    #[test]
    fn a_single_rank_costs_nothing() {
        let model = AllreduceModel::SHARED_MEMORY;
        assert_eq!(model.predict_tree_ns(1, 3, 4096), 0.0);
        assert_eq!(model.predict_exchange_ns(1, 4096), 0.0);
        assert_eq!(choose_allreduce_degree(1, 4096, &model).degree, 1);
    }
}
