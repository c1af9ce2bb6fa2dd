//! Self-tuning of the allreduce tree degree (issue 14, part 4), the
//! counterpart of `barrier::autotune` for the degree-k tree.
//!
//! Unlike the barrier's, this trial does not time the application's own
//! calls: their lengths vary, and round robin over calls of different
//! lengths would compare the lengths, not the degrees (an application
//! alternating two lengths would give each of two candidates one length).
//! So on the first allreduce that the tree would serve, every rank runs
//! k·m trial allreduces of one length, agreed by construction (it is
//! computed from the call's length, the same on every rank, and the
//! agreed configuration), candidate i mod k at call i, then one allreduce
//! (MAX) gives every rank the slowest rank's median per degree, and every
//! rank keeps the degree with the lowest one (ties to the smaller degree)
//! before serving the application's call.
//!
//! All candidates share the allreduce region: only degrees whose flat
//! tree fits the slot rings the window already holds are tried (what the
//! window holds decides, it is never enlarged for the trial). Between two
//! calls under different degrees every rank quiesces its writes and all
//! pass a barrier (`sync`), so no write of the old tree can land after the
//! new tree's first one (`Allreduce::set_degree`).

use std::time::Instant;

use btl_ibmc::{PeerReads, SideProgress, TransportError};
use tuning::round_fanouts;
use tuning::tree::TreeLinks;

use super::Allreduce;
use crate::collectives::autotune_trial::{candidates_around, median};
use crate::word_max::{bytes_to_words, words_to_bytes, U64Max};

/// Candidates around the model's pick: degree 1 (the binomial tree), the
/// pick and its neighbours, leaving out degrees whose tree is that of a
/// smaller one and those whose flat tree needs more slot rings than the
/// region holds (`reserved_rings`). At most four, ascending; the pick
/// alone when nothing else fits.
pub fn degree_candidates(size: usize, model_pick: usize, reserved_rings: usize) -> Vec<usize> {
    let useful = size.saturating_sub(1).max(1);
    candidates_around(size, model_pick, |degree| degree <= useful && TreeLinks::positions(size, degree) <= reserved_rings)
}

/// Bytes of each trial allreduce for an application call of `call_bytes`
/// that the tree serves: its length, but at most one segment (so that the
/// trial's cost is bounded whatever the application sends), in whole 8-byte
/// words, and above `exchange_max_bytes` so that the tree serves it too.
pub fn trial_bytes(call_bytes: usize, exchange_max_bytes: usize, segment_bytes: usize) -> usize {
    let words = call_bytes.min(segment_bytes) / 8;
    let above_exchange = exchange_max_bytes / 8 + 1;
    words.max(above_exchange).max(1) * 8
}

/// One candidate's line of the agreed table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DegreeRow {
    pub degree: usize,
    /// Steps of the tree (its height).
    pub steps: usize,
    /// The largest of the ranks' median call times.
    pub median_ns: u64,
    /// The longest single call on any rank.
    pub max_ns: u64,
}

/// What the trial found, identical on every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DegreeOutcome {
    pub rows: Vec<DegreeRow>,
    /// Index into `rows` of the degree kept from now on.
    pub winner: usize,
    pub calls_per_candidate: usize,
    pub message_bytes: usize,
    /// The slowest rank's total time in the trial's allreduces (the
    /// barriers between them not included).
    pub trial_ns: u64,
    /// Barriers run to change the degree (the same on every rank).
    pub barriers: usize,
}

impl DegreeOutcome {
    pub fn degree(&self) -> usize {
        self.rows[self.winner].degree
    }

    /// Trial allreduces run in all.
    pub fn trial_calls(&self) -> usize {
        self.rows.len() * self.calls_per_candidate
    }
}

/// The measurement schedule and this rank's samples.
#[derive(Clone, Debug)]
pub struct DegreeTrial {
    degrees: Vec<usize>,
    steps: Vec<usize>,
    calls_per_candidate: usize,
    samples: Vec<Vec<u64>>,
}

impl DegreeTrial {
    pub fn new(size: usize, degrees: &[usize], calls_per_candidate: usize) -> Self {
        assert!(degrees.len() > 1 && calls_per_candidate >= 1, "a trial needs candidates and calls");
        DegreeTrial {
            degrees: degrees.to_vec(),
            steps: degrees.iter().map(|&degree| round_fanouts(size, degree).len()).collect(),
            calls_per_candidate,
            samples: vec![Vec::with_capacity(calls_per_candidate); degrees.len()],
        }
    }

    pub fn degrees(&self) -> &[usize] {
        &self.degrees
    }

    /// Trial allreduces in all: the bound.
    pub fn total_calls(&self) -> usize {
        self.degrees.len() * self.calls_per_candidate
    }

    /// Words of the one agreeing allreduce.
    pub fn summary_words(&self) -> usize {
        2 * self.degrees.len() + 1
    }

    /// Each candidate's median, then each one's maximum, then the total.
    pub fn local_summary(&self) -> Vec<u64> {
        let medians = self.samples.iter().map(|samples| median(samples));
        let maxima = self.samples.iter().map(|samples| samples.iter().copied().max().unwrap_or(0));
        let total = self.samples.iter().flatten().fold(0u64, |sum, &nanos| sum.saturating_add(nanos));
        medians.chain(maxima).chain(std::iter::once(total)).collect()
    }

    /// The choice from the summaries reduced with MAX over all ranks.
    pub fn decide(&self, agreed: &[u64], message_bytes: usize) -> DegreeOutcome {
        let k = self.degrees.len();
        assert_eq!(agreed.len(), 2 * k + 1, "the agreed summary has another shape");
        let rows: Vec<DegreeRow> = (0..k)
            .map(|i| DegreeRow { degree: self.degrees[i], steps: self.steps[i], median_ns: agreed[i], max_ns: agreed[k + i] })
            .collect();
        // Ascending degrees: the first minimum is the smaller degree.
        let winner = (0..k).min_by_key(|&i| rows[i].median_ns).expect("at least one candidate");
        DegreeOutcome { rows, winner, calls_per_candidate: self.calls_per_candidate, message_bytes, trial_ns: agreed[2 * k], barriers: 0 }
    }

    /// Runs the trial on `allreduce` (every rank of the communicator calls
    /// this at the same point, with the same `message_bytes`), agrees and
    /// leaves `allreduce` on the winner. `sync` must quiesce this rank's
    /// writes and then run a barrier; it runs before every change of
    /// degree. `clock` turns a measured time of candidate i into the
    /// recorded one (tests inject disagreeing timings; the glue keeps it).
    /// Returns the outcome and how long the agreeing allreduce took here.
    pub fn run<T: PeerReads + ?Sized>(
        mut self,
        allreduce: &mut Allreduce,
        transport: &T,
        side_progress: &dyn SideProgress,
        message_bytes: usize,
        sync: &mut dyn FnMut() -> Result<(), TransportError>,
        clock: &mut dyn FnMut(usize, u64) -> u64,
    ) -> Result<(DegreeOutcome, u64), TransportError> {
        let words: Vec<u64> = (0..message_bytes / 8).map(|i| (transport.rank() as u64 + 1) ^ (i as u64 * 0x9E37_79B9)).collect();
        let send = words_to_bytes(&words);
        let mut recv = vec![0u8; send.len()];
        let mut barriers = 0;
        for call in 0..self.total_calls() {
            let candidate = call % self.degrees.len();
            barriers += self.switch_to(allreduce, self.degrees[candidate], sync)?;
            let started = Instant::now();
            allreduce.allreduce(transport, side_progress, &U64Max, &send, &mut recv)?;
            let measured = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.samples[candidate].push(clock(candidate, measured));
        }
        let mut summary = words_to_bytes(&self.local_summary());
        let started = Instant::now();
        allreduce.allreduce_in_place(transport, side_progress, &U64Max, &mut summary)?;
        let agreement_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut outcome = self.decide(&bytes_to_words(&summary), message_bytes);
        barriers += self.switch_to(allreduce, outcome.degree(), sync)?;
        outcome.barriers = barriers;
        Ok((outcome, agreement_ns))
    }

    /// Puts `allreduce` on `degree`, syncing first if it changes; returns
    /// the barriers run (0 or 1).
    fn switch_to(&self, allreduce: &mut Allreduce, degree: usize, sync: &mut dyn FnMut() -> Result<(), TransportError>) -> Result<usize, TransportError> {
        if allreduce.config().tree.degree == degree {
            return Ok(0);
        }
        sync()?;
        // Candidates were chosen to fit the region, so this cannot fail;
        // an error rather than a panic all the same (the glue reports it).
        allreduce.set_degree(degree).map_err(|why| TransportError::Failed(format!("allreduce autotune: {why}")))?;
        Ok(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_are_distinct_trees_that_fit_the_rings() {
        assert_eq!(degree_candidates(2, 1, 1), vec![1]);
        // 4 ranks: degrees 1 and 2 take two steps, 3 one step to all
        assert_eq!(degree_candidates(4, 3, 3), vec![1, 2, 3]);
        assert_eq!(degree_candidates(4, 3, 2), vec![1], "degree 2 takes 3 rings at 4 ranks (fan-outs 2, 1)");
        for size in 2..=70 {
            for pick in 1..=8 {
                let reserved = TreeLinks::positions(size, pick);
                let candidates = degree_candidates(size, pick, reserved);
                assert!(!candidates.is_empty() && candidates.len() <= 4, "size {size} pick {pick}: {candidates:?}");
                assert!(candidates.windows(2).all(|pair| pair[0] < pair[1]));
                if pick < size {
                    assert!(candidates.contains(&pick), "size {size} pick {pick}: {candidates:?}");
                    assert!(candidates.iter().all(|&degree| TreeLinks::positions(size, degree) <= reserved), "size {size} pick {pick}: {candidates:?}");
                }
            }
        }
    }

    #[test]
    fn trial_messages_take_the_tree_and_stay_within_a_segment() {
        assert_eq!(trial_bytes(100_000, 256, 8192), 8192);
        assert_eq!(trial_bytes(1000, 256, 8192), 1000);
        assert_eq!(trial_bytes(260, 256, 8192), 264);
        assert_eq!(trial_bytes(1001, 0, 8192), 1000);
        assert_eq!(trial_bytes(4, 0, 8192), 8);
    }

    #[test]
    fn the_lowest_agreed_median_wins_and_ties_go_to_the_smaller_degree() {
        let trial = DegreeTrial::new(8, &[1, 2, 3], 2);
        let outcome = trial.decide(&[300, 200, 250, 400, 900, 300, 5000], 64);
        assert_eq!((outcome.degree(), outcome.winner, outcome.trial_calls()), (2, 1, 6));
        assert_eq!(outcome.rows[0], DegreeRow { degree: 1, steps: 3, median_ns: 300, max_ns: 400 });
        assert_eq!(trial.decide(&[200, 200, 200, 1, 1, 1, 3], 64).degree(), 1);
    }
}
