//! The n-way dissemination barrier's round structure and the LoP-style cost
//! model (Hoefler et al. 2006) used to pick n automatically.
//!
//! In round r a rank notifies the ranks at distances i·(n+1)^r, i = 1..=n.
//! After round r it has heard, directly or transitively, from the
//! (n+1)^(r+1) - 1 ranks before it. The last round therefore needs only as
//! many peers as still close the gap to `size`: using more would send to a
//! rank twice or to itself when `size` is not a power of n+1.

/// Largest radix accepted from users: beyond it a round's fan-out exceeds
/// any communicator we can reach on one node, and the model stops being
/// meaningful.
pub const MAX_BARRIER_RADIX: usize = 64;

/// Number of peers each round notifies, for `size` ranks and radix `n`.
/// Empty for a single rank.
pub fn round_fanouts(size: usize, radix: usize) -> Vec<usize> {
    assert!(radix >= 1, "the dissemination radix is at least 1");
    let mut fanouts = Vec::new();
    let mut reach: usize = 1; // (n+1)^r: ranks known after round r-1, self included
    while reach < size {
        let needed = size.div_ceil(reach) - 1;
        fanouts.push(needed.min(radix));
        reach = reach.saturating_mul(radix + 1);
    }
    fanouts
}

/// The distances each round notifies: i·(n+1)^r for i = 1..=fanout of
/// round r. Rank p notifies p + d and awaits p - d (mod `size`) for every
/// distance d of a round; the barrier and the simulator both build their
/// rounds from this table.
pub fn round_distances(size: usize, radix: usize) -> Vec<Vec<usize>> {
    let mut stride = 1usize;
    round_fanouts(size, radix)
        .into_iter()
        .map(|fanout| {
            let distances = (1..=fanout).map(|i| i * stride).collect();
            stride = stride.saturating_mul(radix + 1);
            distances
        })
        .collect()
}

/// Parameters of the cost model, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BarrierModel {
    /// Time for one notification to become visible at its target.
    pub latency_ns: f64,
    /// Extra time per additional notification issued in the same round
    /// (the LoP observation: back-to-back writes overlap, costing a gap,
    /// not a whole latency).
    pub put_gap_ns: f64,
}

impl BarrierModel {
    /// Defaults for shared memory on one node: a cache-line transfer between
    /// cores and the cost of issuing one more store to another line.
    pub const SHARED_MEMORY: BarrierModel = BarrierModel { latency_ns: 150.0, put_gap_ns: 40.0 };

    /// Predicted barrier time for `size` ranks with radix `radix`.
    pub fn predict_ns(&self, size: usize, radix: usize) -> f64 {
        round_fanouts(size, radix)
            .iter()
            .map(|&peers| self.latency_ns + self.put_gap_ns * (peers.saturating_sub(1)) as f64)
            .sum()
    }
}

/// The radix the model picked, with what it predicted and why.
#[derive(Clone, Debug, PartialEq)]
pub struct RadixChoice {
    pub radix: usize,
    pub rounds: usize,
    pub predicted_ns: f64,
    pub reason: String,
}

/// Picks the radix with the lowest predicted time; ties go to the smaller
/// radix, which touches fewer cache lines per round.
pub fn choose_barrier_radix(size: usize, model: &BarrierModel) -> RadixChoice {
    let candidates = MAX_BARRIER_RADIX.min(size.saturating_sub(1).max(1));
    let mut best = (1, model.predict_ns(size, 1));
    for radix in 2..=candidates {
        let predicted = model.predict_ns(size, radix);
        if predicted < best.1 {
            best = (radix, predicted);
        }
    }
    let (radix, predicted_ns) = best;
    let rounds = round_fanouts(size, radix).len();
    let one_way = model.predict_ns(size, 1);
    let reason = format!(
        "{rounds} round(s) for {size} ranks, predicted {predicted_ns:.0} ns vs {one_way:.0} ns for radix 1 \
         (model: latency {:.0} ns, gap per extra put {:.0} ns)",
        model.latency_ns, model.put_gap_ns
    );
    RadixChoice { radix, rounds, predicted_ns, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which ranks p hears from after all rounds, computed by brute force
    /// from the schedule: must be everyone.
    fn knowledge_is_complete(size: usize, radix: usize) -> bool {
        let mut known: Vec<Vec<bool>> = (0..size).map(|p| (0..size).map(|q| q == p).collect()).collect();
        let mut stride = 1;
        for peers in round_fanouts(size, radix) {
            let before = known.clone();
            for (sender, sender_knows) in before.iter().enumerate() {
                for i in 1..=peers {
                    let target = (sender + i * stride) % size;
                    for (q, &knows) in sender_knows.iter().enumerate() {
                        known[target][q] |= knows;
                    }
                }
            }
            stride *= radix + 1;
        }
        known.iter().all(|row| row.iter().all(|&k| k))
    }

    #[test]
    fn every_rank_learns_of_every_other() {
        for size in 1..=70 {
            for radix in 1..=9 {
                assert!(knowledge_is_complete(size, radix), "size {size} radix {radix}");
            }
        }
    }

    #[test]
    fn round_count_is_the_ceiling_log() {
        for size in 2..=200usize {
            for radix in 1..=8usize {
                let mut expected = 0;
                let mut reach = 1;
                while reach < size {
                    reach *= radix + 1;
                    expected += 1;
                }
                assert_eq!(round_fanouts(size, radix).len(), expected);
            }
        }
        assert!(round_fanouts(1, 3).is_empty());
    }

    #[test]
    fn no_round_sends_to_self_or_twice() {
        for size in 2..=70 {
            for radix in 1..=9 {
                let mut stride = 1;
                for peers in round_fanouts(size, radix) {
                    let distances: Vec<usize> = (1..=peers).map(|i| i * stride).collect();
                    assert!(distances.iter().all(|&d| d % size != 0), "self-send size {size} radix {radix}");
                    stride *= radix + 1;
                }
            }
        }
    }

    #[test]
    fn distances_follow_the_fanouts_in_powers_of_n_plus_one() {
        assert_eq!(round_distances(9, 2), vec![vec![1, 2], vec![3, 6]]);
        assert_eq!(round_distances(10, 2), vec![vec![1, 2], vec![3, 6], vec![9]]);
        assert!(round_distances(1, 4).is_empty());
        for size in 1..=70 {
            for radix in 1..=9 {
                let lengths: Vec<usize> = round_distances(size, radix).iter().map(Vec::len).collect();
                assert_eq!(lengths, round_fanouts(size, radix), "size {size} radix {radix}");
            }
        }
    }

    #[test]
    fn model_prefers_one_round_when_gaps_are_cheap() {
        let cheap_gap = BarrierModel { latency_ns: 1000.0, put_gap_ns: 10.0 };
        assert_eq!(choose_barrier_radix(8, &cheap_gap).radix, 7);
        let costly_gap = BarrierModel { latency_ns: 100.0, put_gap_ns: 100.0 };
        assert_eq!(choose_barrier_radix(8, &costly_gap).radix, 1);
        let two = choose_barrier_radix(2, &BarrierModel::SHARED_MEMORY);
        assert_eq!((two.radix, two.rounds), (1, 1));
    }
}
