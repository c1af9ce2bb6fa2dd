//! What `bench/coll_pairs.c` prints, read back: one job per setting (job 0
//! the baseline, which also measures the machine's floor), samples taken in
//! turns, and per message size the comparison of a candidate job with the
//! baseline from the per-pair ratios.
//!
//! The pairing and the floor-drift rule are those of `ci/bench-pairs.sh`:
//! a pair whose floor (cache-line round trip) before and after differ by
//! more than a factor is left out, as long as half the pairs remain,
//! because on this kind of VM the host moves the virtual CPUs between
//! placements that differ 4x in speed (docs: benchmarking-on-this-vm).

use std::collections::BTreeMap;

use tuning::bench_log::PairsLine;

use crate::stats::{median, Spread};

/// `sample JOB COLL SIZE ROUND US ITERS` and `floor SIZE K RT_US MEMCPY_US`
/// lines, keyed for lookup.
#[derive(Debug, Default)]
pub struct Samples {
    /// (job, size, round) -> microseconds per call (the slowest rank's mean)
    pub calls: BTreeMap<(usize, u64, usize), f64>,
    /// (size, k) -> cache-line round trip in us, measured before round k
    pub floors: BTreeMap<(u64, usize), f64>,
}

impl Samples {
    #[cfg(test)]
    pub fn parse(text: &str) -> Samples {
        let mut samples = Samples::default();
        samples.add(text);
        samples
    }

    /// Reads every `sample` and `floor` line of `text`; comments (`#`) and
    /// anything else (Open MPI's own messages) are skipped.
    pub fn add(&mut self, text: &str) {
        for line in text.lines() {
            match PairsLine::parse(line) {
                Some(PairsLine::Sample { job, size, round, us }) => {
                    self.calls.insert((job, size, round), us);
                }
                Some(PairsLine::Floor { size, k, round_trip_us, .. }) => {
                    self.floors.insert((size, k), round_trip_us);
                }
                None => {}
            }
        }
    }

    fn job_calls(&self, job: usize, size: u64) -> Vec<f64> {
        self.calls.iter().filter(|((j, s, _), _)| *j == job && *s == size).map(|(_, us)| *us).collect()
    }

    /// Job `candidate` against job `baseline` at `size`; `None` without a
    /// single pair.
    pub fn compare(&self, baseline: usize, candidate: usize, size: u64, floor_drift: f64) -> Option<Comparison> {
        let mut every = Vec::new();
        let mut steady = Vec::new();
        for ((job, s, round), base_us) in &self.calls {
            if *job != baseline || *s != size || !(*base_us > 0.0) {
                continue;
            }
            let Some(cand_us) = self.calls.get(&(candidate, size, *round)) else { continue };
            let ratio = cand_us / base_us;
            every.push(ratio);
            let before = self.floors.get(&(size, *round));
            let after = self.floors.get(&(size, round + 1));
            if let (Some(&f0), Some(&f1)) = (before, after)
                && f0 > 0.0
                && f1 > 0.0
                && f0 / f1 <= floor_drift
                && f1 / f0 <= floor_drift
            {
                steady.push(ratio);
            }
        }
        let pairs_taken = every.len();
        let used = if steady.len() * 2 >= every.len() { steady } else { every };
        let floors: Vec<f64> = self.floors.iter().filter(|((s, _), _)| *s == size).map(|(_, rt)| *rt).collect();
        Some(Comparison {
            ratio: Spread::of(&used)?,
            pairs_used: used.len(),
            pairs_taken,
            baseline_us: median(&self.job_calls(baseline, size))?,
            candidate_us: median(&self.job_calls(candidate, size))?,
            floor_us: median(&floors),
        })
    }
}

/// A candidate against the baseline at one message size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// candidate / baseline per pair: median and quartiles
    pub ratio: Spread,
    pub pairs_used: usize,
    pub pairs_taken: usize,
    /// medians of all samples of each side, in us per call
    pub baseline_us: f64,
    pub candidate_us: f64,
    /// median cache-line round trip between ranks 0 and 1 during the sweep
    pub floor_us: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bench-pairs.sh --self-test's made-up samples, worked out by hand
    /// there: the same answers must come out here.
    fn self_test_samples() -> Samples {
        let mut text = String::new();
        let rdma = [5.0, 6.0, 7.0, 8.0, 100.0];
        let near = [10.0, 10.5, 9.5, 10.0, 10.2];
        for k in 0..5 {
            for (size, r) in [(64, rdma[k]), (256, rdma[k]), (1024, near[k])] {
                text += &format!("sample 0 allreduce {size} {k} 10 1\nsample 1 allreduce {size} {k} {r} 1\n");
            }
        }
        for k in 0..6 {
            text += &format!("floor 64 {k} 1 0.5\nfloor 256 {k} {} 0.5\nfloor 1024 {k} 1 3\n", if k >= 4 { 5 } else { 1 });
        }
        text += "# a comment\n[host:1234] some Open MPI warning\n";
        Samples::parse(&text)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn every_pair_counts_when_the_floor_holds() {
        let c = self_test_samples().compare(0, 1, 64, 1.5).unwrap();
        assert!(close(c.ratio.median, 0.7) && close(c.ratio.q1, 0.6) && close(c.ratio.q3, 0.8), "{c:?}");
        assert_eq!((c.pairs_used, c.pairs_taken), (5, 5));
        assert!(close(c.baseline_us, 10.0) && close(c.candidate_us, 7.0));
        assert_eq!(c.floor_us, Some(1.0));
    }

    #[test]
    fn a_pair_across_a_floor_jump_is_left_out() {
        // the floor goes 1 -> 5 between rounds 3 and 4: pair 3 is dropped
        let c = self_test_samples().compare(0, 1, 256, 1.5).unwrap();
        assert_eq!((c.pairs_used, c.pairs_taken), (4, 5));
        assert!(close(c.ratio.median, 0.65) && close(c.ratio.q3, 3.025), "{c:?}");
    }

    #[test]
    fn every_pair_counts_again_when_most_crossed_a_jump() {
        let mut s = self_test_samples();
        for k in 0..6 {
            s.floors.insert((1024, k), if k % 2 == 0 { 1.0 } else { 4.0 });
        }
        let c = s.compare(0, 1, 1024, 1.5).unwrap();
        assert_eq!((c.pairs_used, c.pairs_taken), (5, 5));
        assert!(close(c.ratio.median, 1.0));
    }

    #[test]
    fn missing_jobs_and_sizes_compare_to_nothing() {
        let s = self_test_samples();
        assert!(s.compare(0, 2, 64, 1.5).is_none());
        assert!(s.compare(0, 1, 4096, 1.5).is_none());
    }
}
