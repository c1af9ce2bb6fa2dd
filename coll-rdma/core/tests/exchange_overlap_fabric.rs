//! Many allreduce runs outstanding at once over the in-process fabric,
//! posted and advanced as the glue does (`PendingRuns::post`: a run the
//! queue would advance takes its first step at post, `ScheduleQueue::
//! may_advance_now`, and is queued as stepped), so that short exchange
//! runs advance beside each other up to the exchange's depth
//! (`Schedule::overlap`) and write their slot sets round and round.
//! Every rank plays the same script: bursts of short exchanges (up to 256
//! bytes) between stretches of long ones (the exchange's two sets of long
//! slots), tree lengths, zero counts and blocking allreduces, in its own random
//! interleaving of posts and advances with up to `MAX_OUTSTANDING` runs
//! pending (more than the depth, which then holds runs back), while the
//! fabric delays puts at random. Every result is compared with the serial
//! fold of every rank's input, under the wrapping word sum and the 2x2
//! matrix product (not commutative: only the canonical rank order
//! passes). A slot written again before its reader read it, or a flag
//! of a later call taken for the awaited one, folds the wrong
//! contribution.

use crate::common;

use std::time::{Duration, Instant};

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::{NoSideProgress, TransportError, WaitPolicy};
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::patterns::TreeStreamConfig;
use coll_rdma_core::reduction::Reduction;
use coll_rdma_core::schedule::{Schedule, Step};
use coll_rdma_core::schedule_queue::{Lane, Run, ScheduleQueue, Ticket};

use common::matrix::{random_words, serial_fold, MatrixProduct};
use common::{WordSum, XorShift};

const DEADLINE: Duration = Duration::from_secs(120);
/// More than any depth (at most 8), so that the depth holds runs back.
const MAX_OUTSTANDING: usize = 20;

fn config() -> AllreduceConfig {
    let policy = WaitPolicy { fault_timeout: Some(Duration::from_secs(60)), ..common::yielding_policy(20) };
    let tree = TreeStreamConfig { degree: 2, segment_bytes: 256, policy, room_for_two_levels: false };
    // Short exchanges up to 256 bytes, long ones up to 512, trees beyond.
    AllreduceConfig { tree, exchange_max_bytes: 512 }
}

#[derive(Clone, Copy, Debug)]
struct Call {
    matrix: bool,
    len: usize,
    /// A blocking allreduce: the queue is drained first, as before every
    /// blocking collective.
    blocking: bool,
}

impl Call {
    fn reduction(&self) -> &'static (dyn Reduction + Sync) {
        if self.matrix { &MatrixProduct } else { &WordSum }
    }
}

/// Blocks of `BURST` short exchanges (their sets go round twice: the
/// depth holds them back), then `BURST / 3` long ones (which must go one
/// at a time: their two sets would not hold more), then `MIXED` calls of
/// any kind.
const BURST: usize = 36;
const MIXED: usize = 12;

fn script(seed: u64, calls: usize) -> Vec<Call> {
    let mut rng = XorShift::new(seed);
    (0..calls)
        .map(|index| {
            let matrix = rng.below(2) == 0;
            let place = index % (BURST + BURST / 3 + MIXED);
            let burst = place < BURST + BURST / 3;
            let kind = if place < BURST { 1 } else if burst { 7 } else { rng.below(10) };
            // In 32-byte units (a matrix, or four words).
            let units = match kind {
                0 => 0,
                1..=6 => 1 + rng.below(8),
                7 | 8 => 9 + rng.below(8),
                _ => 17 + rng.below(24),
            };
            Call { matrix, len: units * 32, blocking: !burst && rng.below(4) == 0 }
        })
        .collect()
}

fn input(index: usize, rank: usize, call: &Call) -> Vec<u8> {
    let mut rng = XorShift::new(((index as u64) << 20) ^ rank as u64 ^ 0x5EED);
    random_words(&mut rng, call.len, call.matrix)
}

/// A rank's results, call by call, and its runs stepped beside others.
type RankOutcome = Result<(Vec<Vec<u8>>, usize), String>;

/// Rank `rank`'s part: posts, advances and blocking calls in an order
/// drawn from `seed`; its results, call by call, and how many runs took
/// their first step at post beside earlier runs still queued.
fn play(rank: usize, size: usize, seed: u64, script: &[Call], endpoint: &mut FabricEndpoint) -> RankOutcome {
    let sends: Vec<Vec<u8>> = script.iter().enumerate().map(|(index, call)| input(index, rank, call)).collect();
    let mut recvs: Vec<Vec<u8>> = script.iter().map(|call| vec![0xEE; call.len]).collect();
    let mut allreduce = Allreduce::new(rank, size, 0, config());
    let mut rng = XorShift::new(seed ^ (rank as u64 + 1).wrapping_mul(0x9E37_79B9));
    let started = Instant::now();
    let mut beside = 0;
    {
        let mut queue: ScheduleQueue<'_, FabricEndpoint> = ScheduleQueue::default();
        let mut unposted = sends.iter().zip(recvs.iter_mut()).zip(script).enumerate();
        let mut finished = 0;
        let mut failure = None;
        while finished < script.len() {
            if started.elapsed() > DEADLINE {
                return Err(format!("rank {rank}: {finished} of {} calls finished after {DEADLINE:?}: deadlock", script.len()));
            }
            let post = queue.len() < MAX_OUTSTANDING && rng.below(2) == 0;
            let next = if post { unposted.next() } else { None };
            let Some((index, ((send, recv), call))) = next else {
                queue.advance(endpoint, |ticket, outcome| {
                    finished += 1;
                    if let Err(why) = outcome {
                        failure.get_or_insert(format!("rank {rank} call {}: {why}", ticket.0));
                    }
                });
                if let Some(why) = failure.take() {
                    return Err(why);
                }
                // Ranks drift apart now and then, so that one posts far
                // ahead of a peer that has not read its slots yet.
                rng.skew_arrival();
                continue;
            };
            let fail = |why: TransportError| format!("rank {rank} call {index} {call:?}: {why}");
            if call.blocking {
                let counted = &mut finished;
                queue.drain(endpoint, |_| Ok(()), |_, outcome| {
                    *counted += 1;
                    if let Err(why) = outcome {
                        failure.get_or_insert(why.to_string());
                    }
                }).map_err(fail)?;
                allreduce.allreduce(&*endpoint, &NoSideProgress, call.reduction(), send, recv).map_err(fail)?;
                finished += 1;
                continue;
            }
            let mut run: Run<'_, FabricEndpoint> = Box::new(allreduce.start(&*endpoint, call.reduction(), send, recv).map_err(fail)?);
            let ticket = Ticket(index as u64);
            if !queue.may_advance_now(Lane::Allreduce, run.overlap()) {
                queue.post_tagged(Lane::Allreduce, run, ticket);
                continue;
            }
            beside += usize::from(!queue.is_empty());
            if run.advance(endpoint).map_err(fail)? == Step::Pending {
                queue.post_stepped(Lane::Allreduce, run, ticket);
            } else {
                finished += 1;
            }
        }
    }
    Ok((recvs, beside))
}

fn run(size: usize, calls: usize, seed: u64) {
    let script = script(seed, calls);
    let window_len = Allreduce::region_len(size, &config()).next_multiple_of(64);
    let config = FabricConfig { put_delay_max: Duration::from_micros(20), seed, ..FabricConfig::default() };
    let endpoints = Fabric::new(size, window_len, config);
    let outcomes: Vec<RankOutcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = endpoints
            .into_iter()
            .enumerate()
            .map(|(rank, mut endpoint)| {
                let script = &script;
                scope.spawn(move || play(rank, size, seed, script, &mut endpoint))
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or_else(|_| Err("a rank panicked".to_string()))).collect()
    });
    let mut beside = 0;
    for (rank, outcome) in outcomes.into_iter().enumerate() {
        let (results, stepped_beside) = outcome.unwrap_or_else(|why| panic!("size {size}, seed {seed}: {why}"));
        beside += stepped_beside;
        for (index, (call, got)) in script.iter().zip(results).enumerate() {
            let expected = serial_fold(call.matrix, (0..size).map(|peer| input(index, peer, call)));
            assert_eq!(got, expected, "size {size}, seed {seed}, rank {rank}, call {index} {call:?}");
        }
    }
    assert!(beside > 0, "size {size}, seed {seed}: no run ever stepped beside an earlier one");
}

#[test]
fn many_outstanding_exchanges_fold_every_call_in_rank_order() {
    for seed in [1, 2, 3] {
        for size in [2, 3, 5] {
            run(size, 192, seed);
        }
    }
}

/// 9 ranks leave room for 4 short sets (depth 2), against 16 at 2 ranks,
/// 12 at 3 and 6 at 5: the sets go round at another pace.
#[test]
fn nine_ranks_run_their_exchanges_round_four_sets() {
    run(9, 144, 7);
}
