//! The barrier autotune over the in-process fabric: threads as ranks, the
//! trial's agreement through coll rdma's own allreduce, random skew before
//! each barrier and random delays on every flag write. Checked:
//!
//! * the barrier property (no rank leaves barrier k before every rank has
//!   entered it) through the trial, its agreement and after it;
//! * every rank ends with the same radix and the same table, chosen at the
//!   same call, the last of the trial's bound, and agrees exactly once;
//! * the winner is the one computed serially from every rank's samples,
//!   even when each rank's own samples favour another radix;
//! * without the agreement (each rank keeping its own favourite) the
//!   barrier stops working: the agreement is what makes it safe.

use crate::common;

use common::XorShift;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use btl_ibmc::fabric::{run_ranks_watched, Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::{NoSideProgress, TransportError, WaitPolicy};
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::barrier::autotune::{barrier_candidates, RadixTrial, TrialOutcome, TunedBarrier};
use coll_rdma_core::collectives::bcast::BcastConfig;
use coll_rdma_core::layout::WindowLayout;
use coll_rdma_core::word_max::{bytes_to_words, words_to_bytes, U64Max};
use tuning::{choose_barrier_radix, BarrierModel};

/// A run still going by then is taken for a deadlock.
const WATCHDOG: Duration = Duration::from_secs(120);

fn yielding_policy() -> WaitPolicy {
    common::yielding_policy(50)
}

/// Counts, per barrier, how many ranks have entered it.
struct EntryLedger {
    entered: Vec<AtomicUsize>,
}

impl EntryLedger {
    fn new(barriers: usize) -> Self {
        EntryLedger { entered: (0..barriers).map(|_| AtomicUsize::new(0)).collect() }
    }

    fn enter(&self, k: usize) {
        self.entered[k].fetch_add(1, Ordering::SeqCst);
    }

    fn check_leave(&self, k: usize, size: usize) -> Result<(), String> {
        match self.entered[k].load(Ordering::SeqCst) {
            seen if seen == size => Ok(()),
            seen => Err(format!("left barrier {k} when only {seen} of {size} ranks had entered it")),
        }
    }
}

/// What one rank saw: the call (0-based) at which the trial ended and what
/// it chose, how often it agreed, and the radix serving calls at the end.
#[derive(Debug)]
struct RankReport {
    decided_at: Option<(usize, TrialOutcome)>,
    agreements: usize,
    final_radix: usize,
}

struct Setup {
    size: usize,
    candidates: Vec<usize>,
    pick: usize,
    calls_per_candidate: usize,
    barriers: usize,
    put_delay: Duration,
    seed: u64,
    /// `None` for correct runs (the watchdog catches a hang); a bound for
    /// runs that are meant to stall.
    fault_timeout: Option<Duration>,
}

/// Runs `setup.barriers` tuned barriers on `setup.size` threads; each
/// rank agrees through the MAX allreduce, whose result `rig_summary` may
/// then alter (the honest one leaves it).
fn run_tuned(setup: Setup, rig_summary: fn(usize, &mut [u64])) -> Vec<Result<RankReport, String>> {
    let Setup { size, candidates, pick, calls_per_candidate, barriers, put_delay, seed, fault_timeout } = setup;
    let config = AllreduceConfig::default();
    let layout = WindowLayout::with_barrier_radices(size, &candidates, &config, &config.tree, &BcastConfig::default());
    let fabric = FabricConfig { put_delay_max: put_delay, seed, ..FabricConfig::default() };
    let endpoints = Fabric::new(size, layout.window_len, fabric);
    let ledger = Arc::new(EntryLedger::new(barriers));
    run_ranks_watched(endpoints, WATCHDOG, move |rank, endpoint: FabricEndpoint| -> Result<RankReport, String> {
        let policy = WaitPolicy { fault_timeout, ..yielding_policy() };
        let mut barrier = TunedBarrier::new(rank, size, &candidates, pick, calls_per_candidate, layout.barrier_offset, policy);
        let mut allreduce = Allreduce::new(rank, size, layout.allreduce_offset, config);
        let mut rng = XorShift::new(seed ^ (rank as u64 + 1));
        let mut report = RankReport { decided_at: None, agreements: 0, final_radix: 0 };
        // A rank that left early goes on (returning would leave the others
        // waiting for it, and the run would end as a hang, not as this).
        let mut first_violation = None;
        for k in 0..barriers {
            rng.skew_arrival();
            ledger.enter(k);
            let agreements = &mut report.agreements;
            let allreduce = &mut allreduce;
            let endpoint = &endpoint;
            let agree = move |summary: &mut [u64]| -> Result<(), TransportError> {
                *agreements += 1;
                let mut bytes = words_to_bytes(summary);
                allreduce.allreduce_in_place(endpoint, &NoSideProgress, &U64Max, &mut bytes)?;
                summary.copy_from_slice(&bytes_to_words(&bytes));
                rig_summary(rank, summary);
                Ok(())
            };
            let outcome = barrier.run(endpoint, &NoSideProgress, agree).map_err(|why| format!("rank {rank} barrier {k}: {why}"))?;
            if let Err(why) = ledger.check_leave(k, size) {
                first_violation.get_or_insert(format!("rank {rank}: {why}"));
            }
            if let Some(outcome) = outcome {
                if report.decided_at.is_some() {
                    return Err(format!("rank {rank}: a second trial outcome at barrier {k}"));
                }
                report.decided_at = Some((k, outcome));
            }
        }
        report.final_radix = barrier.radix();
        first_violation.map_or(Ok(report), Err)
    })
}

fn honest(_: usize, _: &mut [u64]) {}

fn setup(size: usize, calls_per_candidate: usize, barriers: usize, put_delay: Duration) -> Setup {
    let pick = choose_barrier_radix(size, &BarrierModel::SHARED_MEMORY).radix;
    let candidates = barrier_candidates(size, pick);
    let seed = 0xA070_0000 + (size * 1000 + calls_per_candidate) as u64;
    Setup { size, candidates, pick, calls_per_candidate, barriers, put_delay, seed, fault_timeout: None }
}

fn check_agreed_run(setup: Setup) {
    let (size, calls_per_candidate) = (setup.size, setup.calls_per_candidate);
    let candidates = setup.candidates.clone();
    let bound = candidates.len() * calls_per_candidate;
    let label = format!("size {size} radices {candidates:?} calls {calls_per_candidate} seed {:#x}", setup.seed);
    let reports: Vec<RankReport> = run_tuned(setup, honest).into_iter().map(|r| r.unwrap_or_else(|e| panic!("{label}: {e}"))).collect();
    let (first_call, first_outcome) = reports[0].decided_at.clone().unwrap_or_else(|| panic!("{label}: rank 0 never decided"));
    assert_eq!(first_call, bound - 1, "{label}: the trial must end at its bound");
    assert!(candidates.contains(&first_outcome.radix()), "{label}");
    for (rank, report) in reports.iter().enumerate() {
        let (call, outcome) = report.decided_at.as_ref().unwrap_or_else(|| panic!("{label}: rank {rank} never decided"));
        assert_eq!(*call, first_call, "{label}: rank {rank} switched at another call");
        assert_eq!(outcome, &first_outcome, "{label}: rank {rank} holds another table");
        assert_eq!(report.agreements, 1, "{label}: rank {rank} agreed {} times", report.agreements);
        assert_eq!(report.final_radix, first_outcome.radix(), "{label}: rank {rank} ended on another radix");
    }
}

#[test]
fn every_rank_keeps_the_same_radix_and_the_barrier_holds_throughout() {
    for size in [3, 4, 5, 7, 8, 9, 16] {
        for calls_per_candidate in [1, 3, 8] {
            let candidates = setup(size, calls_per_candidate, 0, Duration::ZERO).candidates.len();
            let barriers = candidates * calls_per_candidate + 300;
            check_agreed_run(setup(size, calls_per_candidate, barriers, Duration::ZERO));
        }
    }
}

#[test]
fn delayed_writes_through_the_trial_and_after() {
    for size in [4, 6, 9, 13] {
        let candidates = setup(size, 4, 0, Duration::ZERO).candidates.len();
        check_agreed_run(setup(size, 4, candidates * 4 + 200, Duration::from_micros(20)));
    }
}

#[test]
fn one_candidate_means_no_trial() {
    let setup = setup(2, 8, 200, Duration::ZERO);
    assert_eq!(setup.candidates, vec![1]);
    for report in run_tuned(setup, honest) {
        let report = report.unwrap();
        assert!(report.decided_at.is_none() && report.agreements == 0 && report.final_radix == 1, "{report:?}");
    }
}

/// Each rank's own samples favour a different radix; the agreed choice is
/// the serial reference from all ranks' samples (largest median per
/// radix, then the smallest of those), and every rank reaches it.
#[test]
fn the_agreement_overrides_each_ranks_own_favourite() {
    let size = 6;
    let radices = [1, 2, 3, 5];
    let calls = 5;
    // rank r's samples of candidate c: its favourite (c = r mod 4) is fast
    let samples = move |rank: usize, candidate: usize, call: usize| -> u64 {
        let base = if candidate == rank % radices.len() { 1_000 } else { 5_000 };
        base + (rank * 37 + candidate * 101 + call * 13) as u64 % 700
    };
    let reference: Vec<u64> = (0..radices.len())
        .map(|c| {
            (0..size)
                .map(|rank| {
                    let mut mine: Vec<u64> = (0..calls).map(|call| samples(rank, c, call)).collect();
                    mine.sort();
                    mine[(calls - 1) / 2]
                })
                .max()
                .unwrap()
        })
        .collect();
    let best = *reference.iter().min().unwrap();
    let expected_radix = radices[reference.iter().position(|&m| m == best).unwrap()];
    let config = AllreduceConfig::default();
    let layout = WindowLayout::with_barrier_radices(size, &radices, &config, &config.tree, &BcastConfig::default());
    let endpoints = Fabric::new(size, layout.window_len, FabricConfig::default());
    let outcomes = run_ranks_watched(endpoints, WATCHDOG, move |rank, endpoint: FabricEndpoint| {
        let mut trial = RadixTrial::new(size, &radices, calls);
        let local_favourite = rank % radices.len();
        for call in 0..trial.total_calls() {
            let candidate = trial.next_candidate();
            trial.record(samples(rank, candidate, call / radices.len()));
        }
        let mut bytes = words_to_bytes(&trial.local_summary());
        let mut allreduce = Allreduce::new(rank, size, layout.allreduce_offset, config);
        allreduce.allreduce_in_place(&endpoint, &NoSideProgress, &U64Max, &mut bytes).expect("allreduce");
        (local_favourite, trial.decide(&bytes_to_words(&bytes)))
    });
    let favourites: Vec<usize> = outcomes.iter().map(|(favourite, _)| radices[*favourite]).collect();
    assert!(favourites.iter().any(|&radix| radix != favourites[0]), "the ranks must disagree locally: {favourites:?}");
    for (rank, (_, outcome)) in outcomes.iter().enumerate() {
        assert_eq!(outcome.radix(), expected_radix, "rank {rank}");
        assert_eq!(outcome.rows.iter().map(|row| row.median_ns).collect::<Vec<_>>(), reference, "rank {rank}");
        assert_eq!(outcome, &outcomes[0].1, "rank {rank}");
    }
}

/// What the agreement prevents: if each rank kept the radix its own
/// figures favour, ranks would wait in different barriers' slots. Every
/// such run must fail (a wait times out) rather than pass.
#[test]
fn rank_local_choices_break_the_barrier() {
    // After the honest MAX, each rank pretends its own favourite won.
    fn own_favourite(rank: usize, summary: &mut [u64]) {
        let k = (summary.len() - 1) / 2;
        for (candidate, median) in summary[..k].iter_mut().enumerate() {
            *median = if candidate == rank % k { 1 } else { 1_000_000 };
        }
    }
    let mut setup = setup(4, 2, 0, Duration::ZERO);
    assert!(setup.candidates.len() >= 2);
    setup.barriers = setup.candidates.len() * setup.calls_per_candidate + 50;
    setup.fault_timeout = Some(Duration::from_secs(3));
    let outcomes = run_tuned(setup, own_favourite);
    let failures = outcomes.iter().filter(|outcome| outcome.is_err()).count();
    assert!(failures > 0, "rank-local radices went unnoticed: {outcomes:?}");
}
