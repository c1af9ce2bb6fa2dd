//! The allreduce degree autotune over the in-process fabric: threads as
//! ranks, random skew before each call and random delays on puts. Checked:
//!
//! * every rank ends on the same degree with the same table, even when
//!   each rank's own (injected) timings favour another degree, and that
//!   degree is the serial reference from all ranks' samples (largest
//!   median per degree, then the smallest of those, ties to the smaller);
//! * results stay right before, through and after the switch: a
//!   non-commutative 2x2 matrix product at lengths of one to several
//!   segments, against the strict left-to-right fold computed here;
//! * the trial stays within its bound (k·m trial calls, at most k·m + 1
//!   barriers) and one candidate means no trial.

use crate::common;

use common::matrix::MatrixProduct;
use common::XorShift;

use std::time::Duration;

use btl_ibmc::fabric::{run_ranks_watched, Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::NoSideProgress;
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::allreduce::autotune::{degree_candidates, DegreeOutcome, DegreeTrial};
use coll_rdma_core::collectives::barrier::DisseminationBarrier;
use coll_rdma_core::collectives::bcast::BcastConfig;
use coll_rdma_core::layout::WindowLayout;
use coll_rdma_core::patterns::TreeStreamConfig;
use coll_rdma_core::reduction::Reduction;

const WATCHDOG: Duration = Duration::from_secs(120);


fn input(rank: usize, call: usize, bytes: usize) -> Vec<u8> {
    (0..bytes / 8).flat_map(|i| ((rank as u64 + 3) * 0x9E37_79B9 ^ (call * 131 + i) as u64).to_le_bytes()).collect()
}

fn reference(size: usize, call: usize, bytes: usize) -> Vec<u8> {
    let mut folded = input(0, call, bytes);
    for rank in 1..size {
        let mut higher = input(rank, call, bytes);
        MatrixProduct.combine(&folded, &mut higher);
        folded = higher;
    }
    folded
}

/// Lengths around the 256-byte segments of these runs: one element, one
/// segment, several, and one not a multiple of a segment.
const LENGTHS: [usize; 4] = [32, 256, 1024, 1632];

/// What rank `rank` records for its `sample`-th call under candidate
/// `candidate` of `k`: its own favourite (`rank mod k`) fast, the others
/// slow, with rank- and call-dependent jitter.
fn injected(rank: usize, candidate: usize, k: usize, sample: usize) -> u64 {
    let base = if candidate == rank % k { 1_000 } else { 5_000 };
    base + ((rank * 37 + candidate * 101 + sample * 13) % 700) as u64
}

/// The degree the agreement must pick from every rank's injected samples.
fn serial_winner(size: usize, degrees: &[usize], calls: usize) -> usize {
    let k = degrees.len();
    let slowest_median = |candidate: usize| {
        (0..size)
            .map(|rank| {
                let mut samples: Vec<u64> = (0..calls).map(|sample| injected(rank, candidate, k, sample)).collect();
                samples.sort_unstable();
                samples[(samples.len() - 1) / 2]
            })
            .max()
            .expect("ranks")
    };
    let best = (0..k).min_by_key(|&candidate| slowest_median(candidate)).expect("candidates");
    degrees[best]
}

#[derive(Debug)]
struct RankReport {
    outcome: Option<DegreeOutcome>,
    final_degree: usize,
}

fn run(size: usize, pick: usize, calls_per_candidate: usize, put_delay: Duration, seed: u64, inject: bool) -> (Vec<usize>, Vec<RankReport>) {
    let tree = TreeStreamConfig { degree: pick, segment_bytes: 256, ..TreeStreamConfig::default() };
    let config = AllreduceConfig { tree, exchange_max_bytes: 0 };
    let layout = WindowLayout::with_barrier_radices(size, &[1], &config, &config.tree, &BcastConfig::default());
    let reserved = Allreduce::new(0, size, layout.allreduce_offset, config).reserved_rings();
    let degrees = degree_candidates(size, pick, reserved);
    let endpoints = Fabric::new(size, layout.window_len, FabricConfig { put_delay_max: put_delay, seed, ..FabricConfig::default() });
    let shared_degrees = degrees.clone();
    let reports = run_ranks_watched(endpoints, WATCHDOG, move |rank, endpoint: FabricEndpoint| -> Result<RankReport, String> {
        let policy = common::yielding_policy(20);
        let mut barrier = DisseminationBarrier::new(rank, size, 1, layout.barrier_offset, policy);
        let mut allreduce = Allreduce::new(rank, size, layout.allreduce_offset, AllreduceConfig { tree: TreeStreamConfig { policy, ..config.tree }, ..config });
        let mut rng = XorShift::new(seed ^ (rank as u64 + 1));
        let mut call = 0;
        let mut check_calls = |allreduce: &mut Allreduce, rng: &mut XorShift, label: &str| -> Result<(), String> {
            for bytes in LENGTHS {
                rng.skew_arrival();
                let send = input(rank, call, bytes);
                let mut recv = vec![0u8; bytes];
                allreduce.allreduce(&endpoint, &NoSideProgress, &MatrixProduct, &send, &mut recv).map_err(|why| format!("rank {rank} {label}: {why}"))?;
                if recv != reference(size, call, bytes) {
                    return Err(format!("rank {rank} {label}: wrong result at call {call} ({bytes} bytes, degree {})", allreduce.config().tree.degree));
                }
                call += 1;
            }
            Ok(())
        };
        check_calls(&mut allreduce, &mut rng, "before the trial")?;
        let mut outcome = None;
        if shared_degrees.len() > 1 {
            let trial = DegreeTrial::new(size, &shared_degrees, calls_per_candidate);
            let k = shared_degrees.len();
            let mut seen = vec![0usize; k];
            let mut clock = |candidate: usize, measured: u64| {
                seen[candidate] += 1;
                if inject { injected(rank, candidate, k, seen[candidate] - 1) } else { measured }
            };
            let mut sync = || barrier.run(&endpoint, &NoSideProgress);
            let (agreed, _) = trial.run(&mut allreduce, &endpoint, &NoSideProgress, 256, &mut sync, &mut clock).map_err(|why| format!("rank {rank} trial: {why}"))?;
            if allreduce.config().tree.degree != agreed.degree() {
                return Err(format!("rank {rank}: on degree {} after choosing {}", allreduce.config().tree.degree, agreed.degree()));
            }
            outcome = Some(agreed);
        }
        for round in 0..3 {
            check_calls(&mut allreduce, &mut rng, &format!("after the trial, round {round}"))?;
        }
        Ok(RankReport { outcome, final_degree: allreduce.config().tree.degree })
    });
    let reports = reports.into_iter().map(|report| report.unwrap_or_else(|why| panic!("size {size} seed {seed:#x}: {why}"))).collect();
    (degrees, reports)
}

fn check_agreement(size: usize, degrees: &[usize], reports: &[RankReport], calls: usize) -> DegreeOutcome {
    let first = reports[0].outcome.clone().unwrap_or_else(|| panic!("size {size}: rank 0 ran no trial over {degrees:?}"));
    assert_eq!(first.trial_calls(), degrees.len() * calls, "size {size}");
    assert!(first.barriers <= degrees.len() * calls + 1, "size {size}: {} barriers", first.barriers);
    for (rank, report) in reports.iter().enumerate() {
        assert_eq!(report.outcome.as_ref(), Some(&first), "size {size}: rank {rank} holds another table");
        assert_eq!(report.final_degree, first.degree(), "size {size}: rank {rank} ended on another degree");
    }
    first
}

#[test]
fn disagreeing_timings_still_give_every_rank_the_serial_winner() {
    for (size, pick) in [(3, 2), (4, 3), (5, 2), (7, 3), (9, 2), (13, 4)] {
        let calls = 3;
        let (degrees, reports) = run(size, pick, calls, Duration::ZERO, 0xD5_0000 + size as u64, true);
        assert!(degrees.len() > 1, "size {size} pick {pick}: {degrees:?}");
        let outcome = check_agreement(size, &degrees, &reports, calls);
        assert_eq!(outcome.degree(), serial_winner(size, &degrees, calls), "size {size}: {outcome:?}");
    }
}

#[test]
fn measured_timings_and_delayed_puts_keep_results_right_through_the_switches() {
    for (size, pick) in [(4, 3), (6, 2), (9, 3)] {
        let calls = 4;
        let (degrees, reports) = run(size, pick, calls, Duration::from_micros(20), 0xD6_0000 + size as u64, false);
        let outcome = check_agreement(size, &degrees, &reports, calls);
        assert!(degrees.contains(&outcome.degree()));
    }
}

#[test]
fn one_candidate_means_no_trial() {
    let (degrees, reports) = run(2, 1, 8, Duration::ZERO, 0xD7, true);
    assert_eq!(degrees, vec![1]);
    assert!(reports.iter().all(|report| report.outcome.is_none() && report.final_degree == 1), "{reports:?}");
}
