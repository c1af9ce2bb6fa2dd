//! Every collective at the sizes the component exists for: 64, 256 and 1024
//! ranks as threads on the in-process fabric, with the barrier radix,
//! reduction degrees and bcast co-roots the cost models pick for those
//! sizes (as the glue does), lossy, duplicating and reordering multicast
//! (so NACKs and retransmissions run), and one script of barriers,
//! allreduces, reduces and bcasts with changing roots that every rank
//! follows back to back. Between bcasts the other collectives serve the
//! bcast through `BcastProgress::if_needed`, the glue's rule.
//!
//! Every result is checked against a reference computed another way: the
//! reductions against a serial left-to-right fold of every rank's inputs
//! (one operation is not commutative, so any other association fails), the
//! bcasts against the generator of the root's bytes, the barrier against a
//! ledger of entries (no rank may leave barrier k before all entered it).
//!
//! A hang ends the test with a report of who waits for what (see
//! `common::watchdog`); `the_watchdog_names_who_waits_for_what` proves it.
//!
//! `make check` runs the short tests; `make soak` the `#[ignore]`d longer
//! ones (more calls, more loss; `SOAK_ROUNDS=<n>` runs n seeds per size).
//! `SCALE_SEED=<n>` shifts every seed.

use crate::common;

use common::watchdog::{Progress, thread_name};
use common::XorShift;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::{RmcastConfig, RmcastStats, TransportError, WaitPolicy};
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::barrier::DisseminationBarrier;
use coll_rdma_core::collectives::bcast::{Bcast, BcastConfig};
use coll_rdma_core::layout::WindowLayout;
use coll_rdma_core::collectives::reduce::Reduce;
use coll_rdma_core::reduction::Reduction;
use coll_rdma_core::BcastProgress;
use tuning::{AllreduceModel, BarrierModel, CoRootModel};

/// 1024 threads: a small stack each is plenty for the collectives and keeps
/// the address space modest.
const RANK_STACK_BYTES: usize = 512 * 1024;
/// Bcast pieces: small, so that a message of a few pieces stays cheap to
/// deliver to a thousand receivers.
const PIECE: usize = 512;
/// One size's run must end by then, or it is reported as a hang.
const CHECK_DEADLINE: Duration = Duration::from_secs(150);
const SOAK_DEADLINE: Duration = Duration::from_secs(1200);

/// Soak rounds per size (each with its own seed): `SOAK_ROUNDS` or `default`.
fn soak_rounds(default: u64) -> u64 {
    std::env::var("SOAK_ROUNDS").map_or(default, |text| text.parse().expect("SOAK_ROUNDS must be a u64"))
}

fn seed_shift() -> u64 {
    std::env::var("SCALE_SEED").map_or(0, |text| text.parse().expect("SCALE_SEED must be a u64"))
}

/// Ranks are threads, far more than cores: yield at once. (What a wait is
/// for reaches the watchdog's report once it has lasted a second.)
#[allow(clippy::needless_update)] // robust to fields added to WaitPolicy
fn policy() -> WaitPolicy {
    WaitPolicy { spin_polls: 0, stall_warning: Duration::from_secs(10), ..WaitPolicy::default() }
}

/// The reduction operations: a wrapping sum, and composition of affine
/// maps x -> a*x + b modulo 2^64, which is associative but not commutative,
/// so a result folded in any order but rank order is caught.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Sum,
    Affine,
}

fn word(bytes: &[u8], index: usize) -> u64 {
    u64::from_ne_bytes(bytes[index * 8..index * 8 + 8].try_into().expect("8 bytes"))
}

fn set_word(bytes: &mut [u8], index: usize, value: u64) {
    bytes[index * 8..index * 8 + 8].copy_from_slice(&value.to_ne_bytes());
}

impl Reduction for Op {
    fn element_size(&self) -> usize {
        match self {
            Op::Sum => 8,
            Op::Affine => 16,
        }
    }

    fn is_commutative(&self) -> bool {
        *self == Op::Sum
    }

    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        match self {
            Op::Sum => {
                for index in 0..higher.len() / 8 {
                    set_word(higher, index, word(lower, index).wrapping_add(word(higher, index)));
                }
            }
            // (lower then higher)(x) = h.a * (l.a * x + l.b) + h.b
            Op::Affine => {
                for element in 0..higher.len() / 16 {
                    let (la, lb) = (word(lower, 2 * element), word(lower, 2 * element + 1));
                    let (ha, hb) = (word(higher, 2 * element), word(higher, 2 * element + 1));
                    set_word(higher, 2 * element, ha.wrapping_mul(la));
                    set_word(higher, 2 * element + 1, ha.wrapping_mul(lb).wrapping_add(hb));
                }
            }
        }
    }
}

/// The reference's own composition of affine maps, written from the maps'
/// meaning rather than through `Reduction::combine`: apply every rank's map
/// in rank order to the basis points 0 and 1 and read off a and b.
fn affine_reference(maps: &[(u64, u64)]) -> (u64, u64) {
    let apply = |x: u64| maps.iter().fold(x, |x, &(a, b)| a.wrapping_mul(x).wrapping_add(b));
    let b = apply(0);
    (apply(1).wrapping_sub(b), b)
}

/// Rank `rank`'s input word `index` of call `call`: a pure function, so the
/// ranks and the reference never share a buffer.
fn input_word(seed: u64, call: usize, rank: usize, index: usize) -> u64 {
    let mut state = XorShift::new(seed ^ ((call as u64) << 40) ^ ((rank as u64) << 20) ^ index as u64);
    state.next();
    state.next()
}

fn input(seed: u64, call: usize, rank: usize, op: Op, count: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; count * op.element_size()];
    for index in 0..bytes.len() / 8 {
        let mut value = input_word(seed, call, rank, index);
        // Odd factors: a product of a thousand even numbers is 0 mod 2^64.
        if op == Op::Affine && index % 2 == 0 {
            value |= 1;
        }
        set_word(&mut bytes, index, value);
    }
    bytes
}

fn reference(seed: u64, call: usize, size: usize, op: Op, count: usize) -> Vec<u8> {
    let inputs: Vec<Vec<u8>> = (0..size).map(|rank| input(seed, call, rank, op, count)).collect();
    let mut result = vec![0u8; count * op.element_size()];
    match op {
        Op::Sum => {
            for index in 0..count {
                let sum = inputs.iter().fold(0u64, |sum, bytes| sum.wrapping_add(word(bytes, index)));
                set_word(&mut result, index, sum);
            }
        }
        Op::Affine => {
            for element in 0..count {
                let maps: Vec<(u64, u64)> =
                    inputs.iter().map(|bytes| (word(bytes, 2 * element), word(bytes, 2 * element + 1))).collect();
                let (a, b) = affine_reference(&maps);
                set_word(&mut result, 2 * element, a);
                set_word(&mut result, 2 * element + 1, b);
            }
        }
    }
    result
}

fn bcast_content(seed: u64, call: usize, len: usize) -> Vec<u8> {
    let mut state = XorShift::new(seed ^ 0x00B0_CA57 ^ ((call as u64) << 24));
    (0..len).map(|_| state.next() as u8).collect()
}

#[derive(Clone, Copy, Debug)]
enum Call {
    Barrier,
    Allreduce { op: Op, count: usize },
    Reduce { root: usize, op: Op, count: usize },
    Bcast { root: usize, len: usize },
}

/// A random script in which every collective recurs; bcast runs come in
/// bursts with changing roots, as applications issue them.
fn script(size: usize, calls: usize, seed: u64) -> Vec<Call> {
    let mut rng = XorShift::new(seed);
    let counts = [1, 3, 17, 100];
    let lengths = [0, 1, PIECE - 1, PIECE, PIECE + 1, 3 * PIECE + 5, 17];
    let ops = [Op::Sum, Op::Affine];
    (0..calls)
        .map(|index| match index % 8 {
            0 => Call::Barrier,
            1 | 5 => Call::Allreduce { op: ops[rng.below(2)], count: counts[rng.below(counts.len())] },
            3 => Call::Reduce { root: rng.below(size), op: ops[rng.below(2)], count: counts[rng.below(counts.len())] },
            _ => Call::Bcast { root: rng.below(size), len: lengths[rng.below(lengths.len())] },
        })
        .collect()
}

/// Everything one run needs, shared by all rank threads.
struct Plan {
    size: usize,
    seed: u64,
    calls: Vec<Call>,
    /// Reference results of the reductions, by call index.
    expected: Vec<Option<Vec<u8>>>,
    radix: usize,
    reductions: AllreduceConfig,
    bcast: BcastConfig,
    layout: WindowLayout,
    fabric: FabricConfig,
    /// Per barrier call: how many ranks have entered it.
    barrier_entries: Vec<AtomicUsize>,
    /// A rank that holds back before a call until released: the
    /// watchdog's self-test.
    late: Option<(usize, usize, AtomicBool)>,
}

impl Plan {
    fn new(size: usize, calls: usize, drop: f64, seed: u64) -> Plan {
        let seed = seed.wrapping_add(seed_shift());
        let radix = tuning::choose_barrier_radix(size, &BarrierModel::SHARED_MEMORY).radix;
        let (reductions, _) = AllreduceConfig::from_model(size, &AllreduceModel::SHARED_MEMORY, policy());
        let multicast = RmcastConfig {
            window_slots: 16,
            slot_bytes: PIECE,
            fragment_bytes: PIECE,
            ack_interval: 4,
            nack: true,
            wait: policy(),
            give_up_after: Some(CHECK_DEADLINE.mul_f64(0.8)),
            ..RmcastConfig::default()
        };
        let (bcast, _) = BcastConfig { multicast, ..BcastConfig::default() }.with_modelled_co_roots(size, &CoRootModel::PAPER_2004);
        let layout = WindowLayout::new(size, radix, &reductions, &reductions.tree, &bcast);
        let fabric = FabricConfig {
            multicast_drop: drop,
            multicast_duplicate: drop / 2.0,
            multicast_reorder: 0.1,
            put_delay_max: Duration::from_micros(5),
            seed,
            ..FabricConfig::default()
        };
        let calls = script(size, calls, seed);
        let expected = calls
            .iter()
            .enumerate()
            .map(|(index, call)| match *call {
                Call::Allreduce { op, count } | Call::Reduce { op, count, .. } => Some(reference(seed, index, size, op, count)),
                _ => None,
            })
            .collect();
        let barrier_entries = (0..calls.len()).map(|_| AtomicUsize::new(0)).collect();
        Plan { size, seed, calls, expected, radix, reductions, bcast, layout, fabric, barrier_entries, late: None }
    }

    fn describe(&self) -> String {
        format!(
            "size {} seed {:#x}: barrier radix {}, reduction degree {} (exchange up to {} B, {} B segments), \
             bcast co-roots {}, window {} x {} B, drop {}",
            self.size,
            self.seed,
            self.radix,
            self.reductions.tree.degree,
            self.reductions.exchange_max_bytes,
            self.reductions.tree.segment_bytes,
            self.bcast.multicast.co_roots,
            self.bcast.multicast.window_slots,
            PIECE,
            self.fabric.multicast_drop
        )
    }

    fn describe_call(&self, index: usize) -> String {
        self.calls.get(index).map_or_else(|| "drain".to_string(), |call| format!("{call:?}"))
    }
}

/// One rank's collectives on one communicator, as the glue holds them.
struct RankState {
    barrier: DisseminationBarrier,
    allreduce: Allreduce,
    reduce: Reduce,
    bcast: Bcast,
}

/// Plays the whole script on one rank. A wrong result is recorded and the
/// rank carries on, so the others are not left waiting for it.
fn play_rank(rank: usize, endpoint: &FabricEndpoint, plan: &Plan, progress: &Progress) -> Result<RmcastStats, String> {
    let (size, layout) = (plan.size, plan.layout);
    let mut state = RankState {
        barrier: DisseminationBarrier::new(rank, size, plan.radix, layout.barrier_offset, policy()),
        allreduce: Allreduce::new(rank, size, layout.allreduce_offset, plan.reductions),
        reduce: Reduce::new(rank, size, layout.reduce_offset, plan.reductions.tree),
        bcast: Bcast::new(rank, size, layout.bcast_offset, plan.bcast),
    };
    let mut rng = XorShift::new(plan.seed ^ (rank as u64 + 1) << 32);
    let mut first_wrong = None;
    for (index, call) in plan.calls.iter().enumerate() {
        progress.enter(rank, index);
        if let Some((late_rank, late_call, released)) = &plan.late
            && (*late_rank, *late_call) == (rank, index)
        {
            while !released.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if rng.below(16) == 0 {
            std::thread::sleep(Duration::from_micros(rng.below(300) as u64));
        }
        let failed = |e: TransportError| format!("rank {rank}, call {index} ({call:?}): {e}");
        let wrong = play_call(rank, endpoint, plan, &mut state, index, *call).map_err(failed)?;
        if let Some(why) = wrong {
            first_wrong.get_or_insert(format!("rank {rank}, call {index} ({call:?}): {why}"));
        }
    }
    progress.enter(rank, plan.calls.len());
    state.bcast.drain(endpoint).map_err(|e| format!("rank {rank}, drain: {e}"))?;
    first_wrong.map_or(Ok(state.bcast.stats()), Err)
}

/// One call; Ok(Some(why)) when its result is wrong.
fn play_call(
    rank: usize,
    endpoint: &FabricEndpoint,
    plan: &Plan,
    state: &mut RankState,
    index: usize,
    call: Call,
) -> Result<Option<String>, TransportError> {
    let RankState { barrier, allreduce, reduce, bcast } = state;
    match call {
        Call::Barrier => {
            plan.barrier_entries[index].fetch_add(1, Ordering::SeqCst);
            barrier.run(endpoint, &BcastProgress::if_needed(endpoint, bcast))?;
            let entered = plan.barrier_entries[index].load(Ordering::SeqCst);
            Ok((entered != plan.size).then(|| format!("left the barrier when only {entered} of {} ranks had entered it", plan.size)))
        }
        Call::Allreduce { op, count } => {
            let send = input(plan.seed, index, rank, op, count);
            let mut recv = vec![0xA5; send.len()];
            allreduce.allreduce(endpoint, &BcastProgress::if_needed(endpoint, bcast), &op, &send, &mut recv)?;
            Ok(difference(&recv, plan.expected[index].as_deref().expect("a reference")))
        }
        Call::Reduce { root, op, count } => {
            let send = input(plan.seed, index, rank, op, count);
            let mut recv = vec![0xA5; send.len()];
            let mine = (rank == root).then_some(&mut recv[..]);
            reduce.reduce(endpoint, &BcastProgress::if_needed(endpoint, bcast), &op, root, &send, mine)?;
            Ok((rank == root).then(|| difference(&recv, plan.expected[index].as_deref().expect("a reference"))).flatten())
        }
        Call::Bcast { root, len } => {
            let content = bcast_content(plan.seed, index, len);
            let mut buf = if rank == root { content.clone() } else { vec![0xEE; len] };
            bcast.bcast(endpoint, root, &mut buf)?;
            Ok(difference(&buf, &content))
        }
    }
}

fn difference(got: &[u8], want: &[u8]) -> Option<String> {
    let at = got.iter().zip(want).position(|(g, w)| g != w)?;
    Some(format!("byte {at} of {} is {:#04x} instead of {:#04x}", want.len(), got[at], want[at]))
}

/// The threads of a run, detached so that a hung run can be reported (a
/// scoped join would wait for it forever).
struct Launched {
    plan: Arc<Plan>,
    progress: Arc<Progress>,
    outcomes: mpsc::Receiver<Result<RmcastStats, String>>,
}

fn launch(plan: Plan) -> Launched {
    let plan = Arc::new(plan);
    let progress = Arc::new(Progress::new(plan.size));
    let endpoints = Fabric::new(plan.size, plan.layout.window_len, plan.fabric.clone());
    let (done, outcomes) = mpsc::channel();
    for (rank, endpoint) in endpoints.into_iter().enumerate() {
        let (plan, progress, done) = (Arc::clone(&plan), Arc::clone(&progress), done.clone());
        std::thread::Builder::new()
            .name(thread_name(rank))
            .stack_size(RANK_STACK_BYTES)
            .spawn(move || {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| play_rank(rank, &endpoint, &plan, &progress)))
                    .unwrap_or_else(|_| Err(format!("rank {rank} panicked")));
                progress.finish(rank);
                let _ = done.send(outcome);
            })
            .unwrap_or_else(|e| panic!("cannot start the thread of rank {rank}: {e}"));
    }
    Launched { plan, progress, outcomes }
}

/// Every rank's counters, or what went wrong: the first wrong result or
/// error, or (past `deadline`) the watchdog's report of who waits for what.
fn finish(launched: &Launched, deadline: Duration) -> Result<Vec<RmcastStats>, String> {
    let plan = &launched.plan;
    let give_up = Instant::now() + deadline;
    let mut stats = Vec::with_capacity(plan.size);
    let mut first_error = None;
    for _ in 0..plan.size {
        match launched.outcomes.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
            Ok(Ok(counters)) => stats.push(counters),
            Ok(Err(why)) => {
                first_error.get_or_insert(why);
            }
            Err(_) => {
                let report = launched.progress.report(|call| plan.describe_call(call));
                return Err(format!("{}: not finished within {deadline:?} (hang?)\n{report}", plan.describe()));
            }
        }
    }
    match first_error {
        Some(why) => Err(format!("{}: {why}", plan.describe())),
        None => Ok(stats),
    }
}

/// The allreduce variant the model picks, or the exchange forced for
/// messages up to this many bytes (the model does not pick it at these
/// sizes, but a parameter can).
#[derive(Clone, Copy, Debug)]
enum Variant {
    Modelled,
    ExchangeUpTo(usize),
}

fn run_and_check(size: usize, variant: Variant, calls: usize, drop: f64, seed: u64, deadline: Duration) {
    let _alone = crate::one_large_run_at_a_time();
    let mut plan = Plan::new(size, calls, drop, seed);
    if let Variant::ExchangeUpTo(bytes) = variant {
        plan.reductions.exchange_max_bytes = bytes;
        plan.layout = WindowLayout::new(size, plan.radix, &plan.reductions, &plan.reductions.tree, &plan.bcast);
    }
    let description = plan.describe();
    let started = Instant::now();
    let stats = finish(&launch(plan), deadline).unwrap_or_else(|why| panic!("{why}"));
    let total = RmcastStats::sum(&stats);
    println!(
        "{description}: {calls} calls in {:.1} s, {} retransmissions, {} NACKs, {} duplicates dropped",
        started.elapsed().as_secs_f64(),
        total.retransmissions,
        total.nacks_sent,
        total.duplicates_dropped
    );
    assert_eq!(total.overruns, 0, "{description}: a root overran a receive window");
    if drop > 0.0 {
        assert!(total.retransmissions > 0, "{description}: loss was injected but nothing was retransmitted: {total:?}");
    }
}

#[test]
fn every_collective_at_64_ranks() {
    run_and_check(64, Variant::Modelled, 320, 0.1, 0x5CA1_E064, CHECK_DEADLINE);
    run_and_check(64, Variant::ExchangeUpTo(4096), 64, 0.1, 0x5CA1_E064, CHECK_DEADLINE);
}

#[test]
fn every_collective_at_256_ranks() {
    run_and_check(256, Variant::Modelled, 96, 0.1, 0x5CA1_E256, CHECK_DEADLINE);
    run_and_check(256, Variant::ExchangeUpTo(1024), 24, 0.1, 0x5CA1_E256, CHECK_DEADLINE);
}

#[test]
fn every_collective_at_1024_ranks() {
    run_and_check(1024, Variant::Modelled, 32, 0.1, 0x5CA1_1024, CHECK_DEADLINE);
}

#[test]
#[ignore = "soak: make soak"]
fn soak_64_ranks() {
    for round in 0..soak_rounds(4) {
        run_and_check(64, Variant::Modelled, 1000, 0.3, 0x50A4_0064 + round, SOAK_DEADLINE);
    }
    run_and_check(64, Variant::ExchangeUpTo(4096), 400, 0.3, 0x50A4_0064, SOAK_DEADLINE);
}

#[test]
#[ignore = "soak: make soak"]
fn soak_256_ranks() {
    for round in 0..soak_rounds(2) {
        run_and_check(256, Variant::Modelled, 400, 0.3, 0x50A4_0256 + round, SOAK_DEADLINE);
    }
    run_and_check(256, Variant::ExchangeUpTo(1024), 120, 0.3, 0x50A4_0256, SOAK_DEADLINE);
}

#[test]
#[ignore = "soak: make soak"]
fn soak_1024_ranks() {
    for round in 0..soak_rounds(1) {
        run_and_check(1024, Variant::Modelled, 200, 0.3, 0x50A4_1024 + round, SOAK_DEADLINE);
    }
}

/// The references must be able to fail, or the runs above prove nothing:
/// the affine fold tells rank order apart and a damaged byte is caught.
#[test]
fn the_references_tell_orders_and_damage_apart() {
    let maps = [(3, 1), (5, 7), (9, 2)];
    let forward = affine_reference(&maps);
    let mut reversed = maps;
    reversed.reverse();
    assert_ne!(forward, affine_reference(&reversed), "the affine reference does not depend on rank order");
    // combine agrees with the reference for the rank-order fold only.
    let bytes = |(a, b): (u64, u64)| [a.to_ne_bytes(), b.to_ne_bytes()].concat();
    let mut folded = bytes(maps[0]);
    for &map in &maps[1..] {
        let mut next = bytes(map);
        Op::Affine.combine(&folded, &mut next);
        folded = next;
    }
    assert_eq!(folded, bytes(forward));
    let mut swapped = bytes(maps[1]);
    Op::Affine.combine(&bytes(maps[2]), &mut swapped);
    let mut in_order = bytes(maps[2]);
    Op::Affine.combine(&bytes(maps[1]), &mut in_order);
    assert_ne!(swapped, in_order);

    let want = reference(7, 3, 5, Op::Sum, 4);
    let mut got = want.clone();
    assert_eq!(difference(&got, &want), None);
    got[9] ^= 1;
    assert!(difference(&got, &want).unwrap().starts_with("byte 9 "));
}

/// A rank that does not arrive: the run must end at the deadline with a
/// report naming the ranks still waiting, the call they are in and what
/// their waits say they wait for. The late rank is then released so that
/// the threads finish instead of spinning on in the background.
#[test]
fn the_watchdog_names_who_waits_for_what() {
    let _alone = crate::one_large_run_at_a_time();
    let mut plan = Plan::new(16, 4, 0.0, 0x0DD_BA11);
    plan.calls = vec![Call::Bcast { root: 0, len: 10 }, Call::Barrier, Call::Allreduce { op: Op::Sum, count: 2 }, Call::Barrier];
    plan.expected = vec![None, None, Some(reference(plan.seed, 2, 16, Op::Sum, 2)), None];
    plan.barrier_entries = (0..4).map(|_| AtomicUsize::new(0)).collect();
    const LATE: usize = 11;
    plan.late = Some((LATE, 1, AtomicBool::new(false)));
    let launched = launch(plan);
    // Long enough for the waits to note themselves (after a second of
    // yielding); on a loaded machine they may take longer.
    let mut report = finish(&launched, Duration::from_secs(3)).expect_err("a run with a missing rank finished");
    let patience = Instant::now() + Duration::from_secs(60);
    while !report.contains("rank 3: rank 3 of 16 waits for") && Instant::now() < patience {
        report = finish(&launched, Duration::from_secs(1)).expect_err("a run with a missing rank finished");
    }
    if let Some((_, _, released)) = &launched.plan.late {
        released.store(true, Ordering::Release);
    }
    let stats = finish(&launched, CHECK_DEADLINE);
    println!("{report}");
    assert!(report.contains("16 of 16 ranks still running"), "{report}");
    assert!(report.contains("in call 1 (Barrier): 16 rank(s) 0-15"), "{report}");
    assert!(report.contains("rank 3: rank 3 of 16 waits for"), "the waits' own descriptions are missing: {report}");
    assert!(stats.is_ok(), "after the release the run should finish: {stats:?}");
}
