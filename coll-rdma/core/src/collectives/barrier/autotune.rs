//! Self-tuning of the barrier radix on a communicator's first barriers
//! (Hoefler et al. 2006, section 4: "different n parameters are
//! benchmarked during communicator initialization and the best one is
//! chosen").
//!
//! Each candidate radix has its own dissemination barrier with its own
//! slots in the window, so every slot keeps exactly one writer for the
//! communicator's life. Sharing one region between radices would not be
//! safe: a slow rank's last write under the old radix may land after a
//! faster rank's first write under the new one into the same slot, and
//! the slot would go back to an older epoch that its reader then waits
//! past for ever. With separate regions, each candidate is an ordinary
//! barrier that simply skips the calls the others serve; since every rank
//! runs the same candidate at the same call (the schedule depends only on
//! the call count), the interleaving is a barrier too.
//!
//! Call i of the trial runs candidate i mod k (round robin, so that slow
//! phases of the application weigh on every candidate alike) and times it.
//! After k·m calls each rank reduces its own samples to a median and a
//! maximum per candidate, and one allreduce (MAX) gives every rank the
//! slowest rank's figures; the candidate with the lowest slowest-rank
//! median wins, ties to the smaller radix. Every rank computes that choice
//! from the same reduced numbers, so all switch to the same radix after
//! the same call.

use std::time::Instant;

use btl_ibmc::{SideProgress, TransportError, Windows};
use btl_ibmc::WaitPolicy;
use tuning::{round_fanouts, MAX_BARRIER_RADIX};

use crate::collectives::autotune_trial::{candidates_around, median};
use super::run::BarrierRun;
use super::DisseminationBarrier;

/// The radices worth measuring around the model's pick: radix 1 (the
/// classic dissemination barrier), the pick and its neighbours, leaving out
/// radices that give the same rounds as a smaller one (beyond size - 1
/// every radix is one round to everyone). At most four, ascending.
pub fn barrier_candidates(size: usize, model_pick: usize) -> Vec<usize> {
    let useful = MAX_BARRIER_RADIX.min(size.saturating_sub(1)).max(1);
    candidates_around(size, model_pick, |radix| radix <= useful)
}

/// One candidate's line of the agreed table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrialRow {
    pub radix: usize,
    pub rounds: usize,
    /// The largest of the ranks' median call times.
    pub median_ns: u64,
    /// The longest single call on any rank.
    pub max_ns: u64,
}

/// What the trial found, identical on every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrialOutcome {
    pub rows: Vec<TrialRow>,
    /// Index into `rows` of the radix kept from now on.
    pub winner: usize,
    pub calls_per_candidate: usize,
    /// The slowest rank's total time in the trial's calls.
    pub trial_ns: u64,
}

impl TrialOutcome {
    pub fn radix(&self) -> usize {
        self.rows[self.winner].radix
    }

    /// What the trial cost beyond running the winner throughout, from the
    /// agreed medians: each losing candidate's calls at its excess.
    pub fn excess_ns(&self) -> u64 {
        let best = self.rows[self.winner].median_ns;
        self.rows.iter().map(|row| row.median_ns.saturating_sub(best) * self.calls_per_candidate as u64).sum()
    }
}

/// The measurement schedule and this rank's samples.
#[derive(Clone, Debug)]
pub struct RadixTrial {
    radices: Vec<usize>,
    rounds: Vec<usize>,
    calls_per_candidate: usize,
    samples: Vec<Vec<u64>>,
    calls: usize,
}

impl RadixTrial {
    pub fn new(size: usize, radices: &[usize], calls_per_candidate: usize) -> Self {
        assert!(!radices.is_empty() && calls_per_candidate >= 1, "a trial needs candidates and calls");
        RadixTrial {
            radices: radices.to_vec(),
            rounds: radices.iter().map(|&radix| round_fanouts(size, radix).len()).collect(),
            calls_per_candidate,
            samples: vec![Vec::with_capacity(calls_per_candidate); radices.len()],
            calls: 0,
        }
    }

    /// Calls the trial takes in all: its bound.
    pub fn total_calls(&self) -> usize {
        self.radices.len() * self.calls_per_candidate
    }

    pub fn calls_made(&self) -> usize {
        self.calls
    }

    /// Which candidate the next call runs.
    pub fn next_candidate(&self) -> usize {
        self.calls % self.radices.len()
    }

    /// Records the time of the call `next_candidate` named.
    pub fn record(&mut self, nanos: u64) {
        assert!(!self.is_complete(), "the trial has all its samples");
        let candidate = self.next_candidate();
        self.samples[candidate].push(nanos);
        self.calls += 1;
    }

    pub fn is_complete(&self) -> bool {
        self.calls >= self.total_calls()
    }

    /// What this rank contributes to the agreement: each candidate's median,
    /// then each candidate's maximum, then its total, in nanoseconds.
    pub fn local_summary(&self) -> Vec<u64> {
        let medians = self.samples.iter().map(|samples| median(samples));
        let maxima = self.samples.iter().map(|samples| samples.iter().copied().max().unwrap_or(0));
        let total = self.samples.iter().flatten().fold(0u64, |sum, &nanos| sum.saturating_add(nanos));
        medians.chain(maxima).chain(std::iter::once(total)).collect()
    }

    /// The choice from the summaries reduced with MAX over all ranks.
    pub fn decide(&self, agreed: &[u64]) -> TrialOutcome {
        let k = self.radices.len();
        assert_eq!(agreed.len(), 2 * k + 1, "the agreed summary has another shape");
        let rows: Vec<TrialRow> = (0..k)
            .map(|i| TrialRow { radix: self.radices[i], rounds: self.rounds[i], median_ns: agreed[i], max_ns: agreed[k + i] })
            .collect();
        // Ascending radices: the first minimum is the smaller radix.
        let winner = (0..k).min_by_key(|&i| rows[i].median_ns).expect("at least one candidate");
        TrialOutcome { rows, winner, calls_per_candidate: self.calls_per_candidate, trial_ns: agreed[2 * k] }
    }
}

/// The communicator's barrier: one radix, or the trial of several until it
/// has chosen one.
#[derive(Clone, Debug)]
pub struct TunedBarrier {
    /// One per candidate, ascending radix, each with its own slots.
    barriers: Vec<DisseminationBarrier>,
    /// The barrier calls run while no trial is under way.
    active: usize,
    trial: Option<RadixTrial>,
}

impl TunedBarrier {
    /// Bytes of window the candidates need together, on every rank.
    pub fn region_len(size: usize, radices: &[usize]) -> usize {
        radices.iter().map(|&radix| DisseminationBarrier::region_len(size, radix)).sum()
    }

    /// A barrier with `radices` one after another from `region_offset`,
    /// trying each for `calls_per_candidate` calls when there are several;
    /// until the trial ends (and if it never does, for the closing barrier)
    /// `first` is the one reported.
    pub fn new(rank: usize, size: usize, radices: &[usize], first: usize, calls_per_candidate: usize, region_offset: usize, policy: WaitPolicy) -> Self {
        assert!(!radices.is_empty(), "a barrier needs a radix");
        let mut offset = region_offset;
        let barriers: Vec<DisseminationBarrier> = radices
            .iter()
            .map(|&radix| {
                let barrier = DisseminationBarrier::new(rank, size, radix, offset, policy);
                offset += DisseminationBarrier::region_len(size, radix);
                barrier
            })
            .collect();
        let active = radices.iter().position(|&radix| radix == first).unwrap_or(0);
        let trial = (radices.len() > 1).then(|| RadixTrial::new(size, radices, calls_per_candidate));
        TunedBarrier { barriers, active, trial }
    }

    /// One radix, no trial.
    pub fn fixed(rank: usize, size: usize, radix: usize, region_offset: usize, policy: WaitPolicy) -> Self {
        Self::new(rank, size, &[radix], radix, 1, region_offset, policy)
    }

    /// Sets how stall warnings name the communicator (e.g. "comm 3").
    pub fn with_context(mut self, context: impl Into<String> + Clone) -> Self {
        self.barriers = self.barriers.into_iter().map(|barrier| barrier.with_context(context.clone())).collect();
        self
    }

    /// The radix serving calls outside the trial (the model's pick while
    /// the trial runs, its winner afterwards).
    pub fn radix(&self) -> usize {
        self.barriers[self.active].radix()
    }

    pub fn rounds(&self) -> usize {
        self.barriers[self.active].rounds()
    }

    pub fn candidates(&self) -> Vec<usize> {
        self.barriers.iter().map(DisseminationBarrier::radix).collect()
    }

    /// The trial still under way, if any.
    pub fn trial(&self) -> Option<&RadixTrial> {
        self.trial.as_ref()
    }

    /// Runs one barrier. During the trial it times the candidate whose turn
    /// it is; the call that completes the trial then calls `agree` with
    /// this rank's summary, which must replace it in place by the
    /// elementwise MAX over all ranks (every rank calls it in the same
    /// barrier call), and returns what was chosen.
    #[inline]
    pub fn run<T, A>(&mut self, transport: &T, side_progress: &dyn SideProgress, agree: A) -> Result<Option<TrialOutcome>, TransportError>
    where
        T: Windows + ?Sized,
        A: FnOnce(&mut [u64]) -> Result<(), TransportError>,
    {
        let Some(trial) = self.trial.as_mut() else {
            return self.barriers[self.active].run(transport, side_progress).map(|()| None);
        };
        let candidate = trial.next_candidate();
        let started = Instant::now();
        self.barriers[candidate].run(transport, side_progress)?;
        trial.record(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
        if !trial.is_complete() {
            return Ok(None);
        }
        let mut summary = trial.local_summary();
        agree(&mut summary)?;
        let outcome = trial.decide(&summary);
        self.active = outcome.winner;
        self.trial = None;
        Ok(Some(outcome))
    }

    /// How the barrier's waits go: the communicator's policy, the same
    /// for every candidate.
    pub fn wait_policy(&self) -> WaitPolicy {
        self.barriers[self.active].policy()
    }

    /// Starts a non-blocking barrier, outside the trial's count (untimed,
    /// like `run_untimed`): every rank starts the same candidate, as every
    /// rank makes the same calls in the same order.
    pub fn start(&mut self) -> BarrierRun {
        let index = self.trial.as_ref().map_or(self.active, RadixTrial::next_candidate);
        self.barriers[index].start()
    }

    /// `DisseminationBarrier::restart` by the candidate whose turn it is:
    /// false for a run of another candidate (the caller then `start`s).
    pub fn restart(&mut self, finished: &mut BarrierRun) -> bool {
        let index = self.trial.as_ref().map_or(self.active, RadixTrial::next_candidate);
        self.barriers[index].restart(finished)
    }

    /// A barrier outside the trial's count (the closing barrier at
    /// teardown): the candidate whose turn it is, untimed.
    pub fn run_untimed<T: Windows + ?Sized>(&mut self, transport: &T, side_progress: &dyn SideProgress) -> Result<(), TransportError> {
        let index = self.trial.as_ref().map_or(self.active, RadixTrial::next_candidate);
        self.barriers[index].run(transport, side_progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_surround_the_pick_with_distinct_rounds() {
        assert_eq!(barrier_candidates(2, 1), vec![1]);
        // 4 ranks: radix 3 is one round to all; 4 and up repeat it
        assert_eq!(barrier_candidates(4, 3), vec![1, 2, 3]);
        assert_eq!(barrier_candidates(8, 7), vec![1, 6, 7]);
        assert_eq!(barrier_candidates(64, 3), vec![1, 2, 3, 4]);
        assert_eq!(barrier_candidates(64, 1), vec![1, 2]);
        for size in 2..=70 {
            for pick in 1..=MAX_BARRIER_RADIX {
                let candidates = barrier_candidates(size, pick);
                assert!(!candidates.is_empty() && candidates.len() <= 4, "size {size} pick {pick}: {candidates:?}");
                assert!(candidates.windows(2).all(|pair| pair[0] < pair[1]));
                assert!(candidates.iter().all(|&radix| radix >= 1 && radix < size.max(2)));
            }
        }
    }

    #[test]
    fn the_trial_goes_round_robin_and_stops_at_its_bound() {
        let mut trial = RadixTrial::new(9, &[1, 2, 3], 4);
        assert_eq!(trial.total_calls(), 12);
        let mut order = Vec::new();
        while !trial.is_complete() {
            order.push(trial.next_candidate());
            trial.record(100);
        }
        assert_eq!(order, vec![0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2]);
        assert_eq!(trial.calls_made(), 12);
    }

    #[test]
    fn the_summary_is_medians_maxima_and_total() {
        let mut trial = RadixTrial::new(9, &[1, 2], 3);
        for nanos in [50, 7, 10, 9, 900, 8] {
            trial.record(nanos);
        }
        // radix 1 got 50, 10, 900; radix 2 got 7, 9, 8
        assert_eq!(trial.local_summary(), vec![50, 8, 900, 9, 984]);
    }

    #[test]
    fn the_lowest_agreed_median_wins_and_ties_go_to_the_smaller_radix() {
        let trial = RadixTrial::new(16, &[1, 2, 3], 2);
        let outcome = trial.decide(&[300, 200, 250, 400, 900, 300, 5000]);
        assert_eq!((outcome.radix(), outcome.winner), (2, 1));
        assert_eq!(outcome.rows[0], TrialRow { radix: 1, rounds: 4, median_ns: 300, max_ns: 400 });
        assert_eq!(outcome.excess_ns(), (100 + 50) * 2);
        let tie = trial.decide(&[200, 200, 200, 1, 1, 1, 3]);
        assert_eq!(tie.radix(), 1);
    }
}
