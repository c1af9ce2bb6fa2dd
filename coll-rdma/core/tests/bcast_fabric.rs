//! MPI_Bcast over reliable multicast on the in-process fabric: threads as
//! ranks, multicast that drops, duplicates and reorders, delayed ACK
//! writes and ranks that arrive late. The property checked is the
//! broadcast's definition, by a checker that sees only what each rank
//! received: every receiver gets every message exactly once, in order,
//! byte for byte. Beside it, no rank may ever see a piece beyond its
//! receive window (flow control), and every run must finish: each wait is
//! bounded by `give_up_after`, which turns a hang into a failure naming
//! what was awaited.
//!
//! Run with `--nocapture` to see the retransmission counts. Seeds are
//! fixed so a failure replays; `BCAST_SEED=<n>` shifts them all to explore
//! other fault schedules.

use crate::common;

use common::XorShift;

use std::time::{Duration, Instant};

use btl_ibmc::fabric::{Fabric, FabricConfig};
use btl_ibmc::{MulticastKind, RmcastConfig, RmcastStats, WaitPolicy};
use coll_rdma_core::collectives::bcast::{Bcast, BcastConfig};

/// Added to every seed: 0 unless `BCAST_SEED` says otherwise.
fn seed_shift() -> u64 {
    std::env::var("BCAST_SEED").map_or(0, |text| text.parse().expect("BCAST_SEED must be a u64"))
}

/// One broadcast of the script every rank follows.
#[derive(Clone, Copy, Debug)]
struct Op {
    root: usize,
    len: usize,
}

fn content(index: usize, len: usize) -> Vec<u8> {
    let mut state = XorShift::new(0x00B0_CA57 ^ index as u64);
    (0..len).map(|_| state.next() as u8).collect()
}

/// FNV-1a: enough to tell any two test messages apart.
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3))
}

/// What one call of a receiving rank handed back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Delivery {
    root: usize,
    len: usize,
    digest: u64,
}

/// Each rank's deliveries in call order, as the checker sees them.
type Logs = Vec<Vec<Delivery>>;

/// The checker: each rank's deliveries must be exactly the script's
/// messages from other roots, in script order, with their bytes. Says
/// what went wrong at the first divergence.
fn check_deliveries(script: &[Op], logs: &Logs) -> Result<(), String> {
    let expected_digests: Vec<u64> = script.iter().enumerate().map(|(index, op)| digest(&content(index, op.len))).collect();
    let which_message = |delivery: &Delivery| {
        (0..script.len()).find(|&index| script[index].len == delivery.len && expected_digests[index] == delivery.digest)
    };
    for (rank, log) in logs.iter().enumerate() {
        let expected: Vec<usize> = (0..script.len()).filter(|&index| script[index].root != rank).collect();
        for (position, &index) in expected.iter().enumerate() {
            let wanted = Delivery { root: script[index].root, len: script[index].len, digest: expected_digests[index] };
            let Some(got) = log.get(position) else {
                return Err(format!("rank {rank}: message {index} (and {} after it) never delivered", expected.len() - position - 1));
            };
            if *got == wanted {
                continue;
            }
            let why = match which_message(got) {
                Some(other) if other < index && log[..position].iter().any(|earlier| Some(other) == which_message(earlier)) => {
                    format!("a duplicate of message {other}")
                }
                Some(other) if other > index => format!("message {other}: message {index} was lost or overtaken"),
                Some(other) => format!("message {other}, out of order"),
                None => "bytes of no message: damaged".to_string(),
            };
            return Err(format!("rank {rank}: delivery {position} should be message {index} from root {}, it is {why}", wanted.root));
        }
        if log.len() > expected.len() {
            return Err(format!("rank {rank}: {} deliveries beyond the script's {}", log.len() - expected.len(), expected.len()));
        }
    }
    Ok(())
}

/// One run: the communicator, its faults and its configuration.
#[derive(Clone, Debug)]
struct Run {
    size: usize,
    fabric: FabricConfig,
    config: BcastConfig,
    /// Longest random pause a rank takes before a broadcast.
    skew: Duration,
    /// (rank, pause before its first broadcast)
    sleeper: Option<(usize, Duration)>,
}

impl Run {
    fn describe(&self) -> String {
        let multicast = &self.config.multicast;
        format!(
            "size {} {:?} W {} C {} M {} NACK {} drop {} seed {:#x}",
            self.size,
            self.fabric.multicast_kind,
            multicast.window_slots,
            multicast.co_roots,
            multicast.ack_interval,
            if multicast.nack { "on" } else { "off" },
            self.fabric.multicast_drop,
            self.fabric.seed
        )
    }
}

/// Rank behaviour the checker must catch: a delivery left out of or
/// repeated in one rank's log.
#[derive(Clone, Copy, Debug)]
enum Sabotage {
    None,
    Lose { rank: usize, call: usize },
    Duplicate { rank: usize, call: usize },
}

struct Outcome {
    logs: Logs,
    stats: Vec<RmcastStats>,
    elapsed: Duration,
}

fn test_multicast_config() -> RmcastConfig {
    RmcastConfig {
        timeout: Duration::from_millis(4),
        // Ranks are threads on a couple of cores: never spin.
        wait: WaitPolicy { spin_polls: 0, kernel_spin_polls: 0, stall_warning: Duration::from_secs(10), fault_timeout: None },
        give_up_after: Some(Duration::from_secs(25)),
        ..RmcastConfig::default()
    }
}

/// Runs `script` on every rank, then drains; returns what each rank
/// delivered and counted, or the first rank's error.
fn execute(run: &Run, script: &[Op], sabotage: Sabotage) -> Result<Outcome, String> {
    let window_len = Bcast::region_len(run.size, &run.config);
    let endpoints = Fabric::new(run.size, window_len, run.fabric.clone());
    let started = Instant::now();
    let results: Vec<Result<(Vec<Delivery>, RmcastStats), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = endpoints
            .into_iter()
            .enumerate()
            .map(|(rank, endpoint)| {
                scope.spawn(move || {
                    let mut bcast = Bcast::new(rank, run.size, 0, run.config);
                    let mut rng = XorShift::new(run.fabric.seed ^ (rank as u64 + 1) << 32);
                    let mut log = Vec::new();
                    if let Some((_, pause)) = run.sleeper.filter(|&(sleeper, _)| sleeper == rank) {
                        std::thread::sleep(pause);
                    }
                    for (index, op) in script.iter().enumerate() {
                        if !run.skew.is_zero() && rng.below(8) == 0 {
                            std::thread::sleep(run.skew.mul_f64(rng.below(1000) as f64 / 1000.0));
                        }
                        let mut buf = if op.root == rank { content(index, op.len) } else { vec![0xEE; op.len] };
                        bcast.bcast(&endpoint, op.root, &mut buf).map_err(|e| format!("rank {rank}, call {index}: {e}"))?;
                        if op.root != rank {
                            let delivery = Delivery { root: op.root, len: op.len, digest: digest(&buf) };
                            match sabotage {
                                Sabotage::Lose { rank: r, call } if r == rank && call == index => {}
                                Sabotage::Duplicate { rank: r, call } if r == rank && call == index => {
                                    log.push(delivery);
                                    log.push(delivery);
                                }
                                _ => log.push(delivery),
                            }
                        }
                    }
                    bcast.drain(&endpoint).map_err(|e| format!("rank {rank}, drain: {e}"))?;
                    Ok((log, bcast.stats()))
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    let elapsed = started.elapsed();
    let mut logs = Vec::new();
    let mut stats = Vec::new();
    for result in results {
        let (log, counters) = result.map_err(|e| format!("{}: {e}", run.describe()))?;
        logs.push(log);
        stats.push(counters);
    }
    Ok(Outcome { logs, stats, elapsed })
}

/// Runs and checks everything the tests promise; returns the total counters.
fn run_and_check(run: &Run, script: &[Op]) -> RmcastStats {
    let outcome = execute(run, script, Sabotage::None).unwrap_or_else(|e| panic!("{e}"));
    if let Err(why) = check_deliveries(script, &outcome.logs) {
        panic!("{}: {why}", run.describe());
    }
    let total = RmcastStats::sum(&outcome.stats);
    assert_eq!(total.overruns, 0, "{}: a root overran a receive window", run.describe());
    println!(
        "{}: {} broadcasts in {:.2} s, {} retransmissions, {} NACKs, {} duplicates dropped, {} window-full stalls",
        run.describe(),
        script.len(),
        outcome.elapsed.as_secs_f64(),
        total.retransmissions,
        total.nacks_sent,
        total.duplicates_dropped,
        total.window_full_stalls
    );
    total
}

/// Roots drawn at random (so every rank is root now and then, often several
/// times in a row), lengths from empty to several pieces.
fn random_script(size: usize, piece: usize, count: usize, rng: &mut XorShift) -> Vec<Op> {
    let lengths = [0, 1, piece - 1, piece, piece + 1, 3 * piece + 5, 17];
    (0..count).map(|_| Op { root: rng.below(size), len: lengths[rng.below(lengths.len())] }).collect()
}

fn lossy_run(size: usize, seed: u64, multicast: RmcastConfig, drop: f64) -> Run {
    let fabric = FabricConfig {
        multicast_drop: drop,
        multicast_duplicate: 0.05,
        multicast_reorder: 0.1,
        put_delay_max: Duration::from_micros(20),
        seed,
        ..FabricConfig::default()
    };
    let config = BcastConfig { multicast, ..BcastConfig::default() };
    Run { size, fabric, config, skew: Duration::from_micros(300), sleeper: None }
}

/// The parameters of the `variant`-th run at `size`. Variant 0 deals them
/// from short cycles, so that each dimension's extremes (W 1 and 64, no
/// co-roots and size/2, M 1 and 16, no loss and 30 %, NACK off and on)
/// recur at small and large sizes alike; variant 1 draws them from the
/// whole ranges.
fn sampled_parameters(size: usize, variant: usize, rng: &mut XorShift) -> (RmcastConfig, f64) {
    const WINDOWS: [usize; 9] = [1, 64, 4, 2, 16, 64, 1, 8, 32];
    const INTERVALS: [usize; 7] = [16, 1, 4, 16, 7, 1, 12];
    const DROPS: [f64; 5] = [0.3, 0.0, 0.1, 0.3, 0.2];
    let (window_slots, co_roots, ack_interval, nack, drop) = if variant == 0 {
        let co_roots = [0, size / 2, 1, size / 4][size % 4];
        (WINDOWS[size % WINDOWS.len()], co_roots, INTERVALS[size % INTERVALS.len()], [false, true, true][size % 3], DROPS[size % DROPS.len()])
    } else {
        (1 + rng.below(64), rng.below(size / 2 + 1), 1 + rng.below(16), rng.below(2) == 0, rng.below(31) as f64 / 100.0)
    };
    let config = RmcastConfig { window_slots, co_roots, ack_interval, nack, fragment_bytes: SWEEP_PIECE, ..test_multicast_config() };
    (config, drop)
}

const SWEEP_PIECE: usize = 120;

/// Every size from 2 to 33, twice, with many roots and lengths from empty
/// to several pieces.
#[test]
fn lossy_multicast_broadcasts_reach_every_rank_of_every_size() {
    let mut total = RmcastStats::default();
    let started = Instant::now();
    let mut covered = (false, false, false, false, false, false);
    for size in 2..=33 {
        for variant in 0..2 {
            let seed = (0xBCA5_7000 + (size * 2 + variant) as u64).wrapping_add(seed_shift());
            let mut rng = XorShift::new(seed);
            let (multicast, drop) = sampled_parameters(size, variant, &mut rng);
            covered.0 |= multicast.window_slots == 1;
            covered.1 |= multicast.window_slots == 64;
            covered.2 |= multicast.co_roots == size / 2 && size > 3;
            covered.3 |= multicast.ack_interval == 16;
            covered.4 |= drop == 0.3;
            covered.5 |= drop == 0.0;
            let run = lossy_run(size, seed, multicast, drop);
            let calls = match size {
                2..=8 => 150,
                9..=17 => 80,
                _ => 45,
            };
            let script = random_script(size, SWEEP_PIECE, calls, &mut rng);
            let counters = run_and_check(&run, &script);
            total = RmcastStats::sum([&total, &counters]);
        }
    }
    println!(
        "sizes 2..=33: {} retransmissions, {} NACKs, {} pieces delivered in {:.1} s",
        total.retransmissions,
        total.nacks_sent,
        total.pieces_delivered,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(covered, (true, true, true, true, true, true), "(W 1, W 64, C size/2, M 16, drop 30 %, no drop) not all sampled");
    assert!(total.retransmissions > 0 && total.nacks_served > 0, "the loss paths were never exercised: {total:?}");
}

/// Message lengths from nothing to a mebibyte, cut into many pieces that
/// wrap the window several times within one message.
#[test]
fn lengths_from_zero_to_a_mebibyte_over_lossy_datagrams() {
    let multicast = RmcastConfig { window_slots: 64, co_roots: 1, ack_interval: 8, ..test_multicast_config() };
    let run = lossy_run(4, 0x1E_4675 + seed_shift(), multicast, 0.05);
    let piece = 4096 - 32;
    let lengths = [0, 1, piece - 1, piece, piece + 1, 65_536, 1 << 20, 3];
    let script: Vec<Op> = lengths.iter().enumerate().map(|(index, &len)| Op { root: index % 4, len }).collect();
    let total = run_and_check(&run, &script);
    assert!(total.window_full_stalls > 0, "a mebibyte should fill a 64-piece window");
}

/// The shared-memory flavour, imitated by the fabric: back-to-back
/// broadcasts whose root changes at every call, windows from 1 to 64.
#[test]
fn shared_windows_serve_back_to_back_changing_roots() {
    const SLOT: usize = 256;
    for (size, window_slots, ack_interval) in [(2, 1, 16), (3, 64, 1), (5, 2, 4), (8, 8, 16), (13, 3, 2), (33, 64, 8)] {
        let seed = (0x5AED_0000 + size as u64).wrapping_add(seed_shift());
        let multicast = RmcastConfig { window_slots, ack_interval, slot_bytes: SLOT, ..test_multicast_config() };
        let fabric = FabricConfig {
            multicast_kind: MulticastKind::SharedWindow,
            put_delay_max: Duration::from_micros(10),
            seed,
            ..FabricConfig::default()
        };
        let config = BcastConfig { multicast, ..BcastConfig::default() };
        let run = Run { size, fabric, config, skew: Duration::from_micros(200), sleeper: None };
        let calls = if size > 10 { 30 } else { 80 };
        let mut rng = XorShift::new(seed);
        let lengths = [0, 1, SLOT - 1, SLOT, SLOT + 1, 5 * SLOT + 3];
        let mut root = 0;
        let script: Vec<Op> = (0..calls)
            .map(|_| {
                root = (root + 1 + rng.below(size - 1)) % size;
                Op { root, len: lengths[rng.below(lengths.len())] }
            })
            .collect();
        assert!(script.windows(2).all(|pair| pair[0].root != pair[1].root), "the root must change at every call");
        let total = run_and_check(&run, &script);
        assert_eq!((total.retransmissions, total.nacks_sent, total.duplicates_dropped), (0, 0, 0), "{}", run.describe());
    }
}

/// One receiver sleeps while the root broadcasts ten windows' worth: the
/// root fills its window, keeps serving (retransmitting to the sleeper)
/// instead of blocking, and everyone finishes once the sleeper wakes.
#[test]
fn a_receiver_that_stalls_fills_the_window_and_then_recovers() {
    const SIZE: usize = 5;
    const WINDOW: usize = 4;
    const SLEEPER: usize = 3;
    for kind in [MulticastKind::Datagram, MulticastKind::SharedWindow] {
        let multicast = RmcastConfig { window_slots: WINDOW, co_roots: 1, ack_interval: 16, fragment_bytes: 200, slot_bytes: 200, ..test_multicast_config() };
        let mut run = lossy_run(SIZE, 0x57A1_1000 + seed_shift(), multicast, if kind == MulticastKind::Datagram { 0.2 } else { 0.0 });
        run.fabric.multicast_kind = kind;
        run.sleeper = Some((SLEEPER, Duration::from_millis(300)));
        let script: Vec<Op> = (0..10 * WINDOW).map(|_| Op { root: 0, len: 150 }).collect();
        let outcome = execute(&run, &script, Sabotage::None).unwrap_or_else(|e| panic!("{e}"));
        check_deliveries(&script, &outcome.logs).unwrap_or_else(|why| panic!("{}: {why}", run.describe()));
        let root = outcome.stats[0];
        assert!(root.window_full_stalls >= 1, "{}: the root never found its window full: {root:?}", run.describe());
        assert!(outcome.elapsed >= Duration::from_millis(300), "the run cannot end before the sleeper wakes");
        let total = RmcastStats::sum(&outcome.stats);
        assert_eq!(total.overruns, 0);
        println!(
            "{} with rank {SLEEPER} asleep 300 ms: {} stalls at the root, {} retransmissions, finished in {:.2} s",
            run.describe(),
            root.window_full_stalls,
            total.retransmissions,
            outcome.elapsed.as_secs_f64()
        );
    }
}

/// The checker must catch a delivery lost or repeated on one rank, or the
/// tests above could not fail.
#[test]
fn the_checker_catches_lost_and_duplicated_deliveries() {
    let multicast = RmcastConfig { window_slots: 4, co_roots: 1, fragment_bytes: 64, ..test_multicast_config() };
    let run = lossy_run(4, 0xC4EC_0000 + seed_shift(), multicast, 0.2);
    let script = random_script(4, 64, 24, &mut XorShift::new(7));
    let call = (0..script.len()).find(|&call| script[call].root != 2 && script[call].len > 0 && call > 3).expect("a receive on rank 2");

    let clean = execute(&run, &script, Sabotage::None).unwrap();
    check_deliveries(&script, &clean.logs).expect("an honest run passes");

    let lost = execute(&run, &script, Sabotage::Lose { rank: 2, call }).unwrap();
    let verdict = check_deliveries(&script, &lost.logs).expect_err("a lost delivery went unnoticed");
    assert!(verdict.contains("rank 2") && verdict.contains("lost"), "{verdict}");

    let duplicated = execute(&run, &script, Sabotage::Duplicate { rank: 2, call }).unwrap();
    let verdict = check_deliveries(&script, &duplicated.logs).expect_err("a duplicated delivery went unnoticed");
    assert!(verdict.contains("rank 2") && verdict.contains("duplicate"), "{verdict}");

    // Damaged bytes and a missing tail, straight on the logs.
    let mut damaged = clean.logs.clone();
    damaged[1][0].digest ^= 1;
    assert!(check_deliveries(&script, &damaged).unwrap_err().contains("damaged"));
    let mut short = clean.logs.clone();
    short[3].pop();
    assert!(check_deliveries(&script, &short).unwrap_err().contains("never delivered"));
}

#[test]
fn a_root_outside_the_communicator_is_refused_and_one_rank_needs_no_one() {
    let config = BcastConfig { multicast: test_multicast_config(), ..BcastConfig::default() };
    let endpoints = Fabric::new(2, Bcast::region_len(2, &config), FabricConfig::default());
    let mut bcast = Bcast::new(0, 2, 0, config);
    assert!(bcast.bcast(&endpoints[0], 2, &mut [1, 2]).is_err());
    assert!(bcast.serves(usize::MAX));

    let alone = Fabric::new(1, Bcast::region_len(1, &config), FabricConfig::default());
    let mut bcast = Bcast::new(0, 1, 0, config);
    let mut buf = [9u8; 10];
    bcast.bcast(&alone[0], 0, &mut buf).unwrap();
    bcast.drain(&alone[0]).unwrap();
    assert_eq!((buf, bcast.calls(), bcast.is_idle()), ([9; 10], 1, true));

    let (modelled, reason) = config.with_modelled_co_roots(1024, &tuning::CoRootModel::PAPER_2004);
    assert_eq!(modelled.multicast.co_roots, 127, "{reason}");
}

/// A transport without multicast (a verbs fabric whose join failed):
/// every broadcast goes down the put tree, cut into many segments, with
/// roots changing from call to call and ranks arriving late.
#[test]
fn without_multicast_broadcasts_go_down_the_put_tree_for_every_size() {
    for size in 1..=17 {
        let seed = (0x7EE0_0000 + size as u64).wrapping_add(seed_shift());
        let mut rng = XorShift::new(seed);
        let fabric = FabricConfig {
            multicast_kind: MulticastKind::None,
            put_delay_max: Duration::from_micros(20),
            seed,
            ..FabricConfig::default()
        };
        let piece = 64;
        let multicast = RmcastConfig { slot_bytes: piece, ..test_multicast_config() };
        let config = BcastConfig { multicast, ..BcastConfig::default() };
        let run = Run { size, fabric, config, skew: Duration::from_micros(300), sleeper: (size > 2).then(|| (size - 1, Duration::from_millis(30))) };
        let script = random_script(size, piece, if size <= 8 { 120 } else { 60 }, &mut rng);
        let counters = run_and_check(&run, &script);
        assert_eq!(counters.pieces_sent, 0, "size {size}: the multicast substrate was used without multicast");
    }
}

#[test]
fn the_put_tree_is_used_exactly_when_the_transport_has_no_multicast() {
    for (kind, expected) in [(MulticastKind::None, true), (MulticastKind::Datagram, false), (MulticastKind::SharedWindow, false)] {
        let fabric = FabricConfig { multicast_kind: kind, ..FabricConfig::default() };
        let endpoints = Fabric::new(2, 4096, fabric);
        assert_eq!(Bcast::uses_put_tree(&endpoints[0]), expected, "{kind:?}");
    }
}

/// How long the ranks of one abandoned call may take before the test calls
/// it a hang: far beyond any scheduling delay on a loaded machine, far
/// below forever.
const ABANDON_WATCHDOG: Duration = Duration::from_secs(90);

/// A root that cannot provide its message (its pack failed) abandons the
/// call: every other rank's call must fail rather than wait, on every kind
/// of transport, whichever rank is root. A few broadcasts first put the
/// streams mid-sequence (slots reused, credits owed across calls), and the
/// message spans several segments; over the put tree also a tiny message,
/// whose mark must land on the flag in the payload's line
/// (`SlotShape::places`).
#[test]
fn a_root_that_abandons_its_message_fails_every_receiver() {
    let cases: Vec<(MulticastKind, usize)> = [2, 3, 5, 8, 13]
        .into_iter()
        .map(|size| (MulticastKind::None, size))
        .chain([3, 8].into_iter().flat_map(|size| [(MulticastKind::Datagram, size), (MulticastKind::SharedWindow, size)]))
        .collect();
    for (kind, size) in cases {
        let mut roots = vec![0, size - 1, 1];
        roots.dedup();
        let tiny = if kind == MulticastKind::None { Some(5) } else { None };
        for abandoning_root in roots {
            for len in [ABANDONED_LEN].into_iter().chain(tiny) {
                abandon_once(kind, size, abandoning_root, len);
            }
        }
    }
}

/// The multicast's piece in `abandon_once`, and the abandoned message's
/// usual length: several pieces.
const ABANDON_PIECE: usize = 64;
const ABANDONED_LEN: usize = 3 * ABANDON_PIECE + 5;

fn abandon_once(kind: MulticastKind, size: usize, abandoning_root: usize, len: usize) {
    const PIECE: usize = ABANDON_PIECE;
    let what = format!("{kind:?} size {size}, root {abandoning_root} abandons {len} bytes");
    let fabric = FabricConfig {
        multicast_kind: kind,
        put_delay_max: Duration::from_micros(20),
        seed: 0xAB4D_0000 + size as u64 + seed_shift(),
        ..FabricConfig::default()
    };
    let multicast = RmcastConfig { slot_bytes: PIECE, fragment_bytes: PIECE, ..test_multicast_config() };
    let config = BcastConfig { multicast, ..BcastConfig::default() };
    let endpoints = Fabric::new(size, Bcast::region_len(size, &config), fabric);
    let before: Vec<Op> = (0..3).map(|index| Op { root: (abandoning_root + index + 1) % size, len: ABANDONED_LEN }).collect();
    let (results, outcomes) = std::sync::mpsc::channel();
    // Detached threads: a rank that waits forever must fail the test, not
    // hang it.
    for (rank, endpoint) in endpoints.into_iter().enumerate() {
        let results = results.clone();
        let before = before.clone();
        std::thread::spawn(move || {
            let mut bcast = Bcast::new(rank, size, 0, config);
            let outcome = (|| {
                for (index, op) in before.iter().enumerate() {
                    let mut buf = if op.root == rank { content(index, op.len) } else { vec![0xEE; op.len] };
                    bcast.bcast(&endpoint, op.root, &mut buf).map_err(|e| format!("call {index} before the abandoned one: {e}"))?;
                    if buf != content(index, op.len) {
                        return Err(format!("call {index} before the abandoned one delivered wrong bytes"));
                    }
                }
                if rank == abandoning_root {
                    bcast.abandon_at_root(&endpoint, rank, len).map_err(|e| format!("abandoning: {e}"))?;
                    return Ok(None);
                }
                let mut buf = vec![0xEE; len];
                match bcast.bcast(&endpoint, abandoning_root, &mut buf) {
                    Ok(()) => Err("the abandoned call returned success".to_string()),
                    Err(error) => Ok(Some(error.to_string())),
                }
            })();
            let _ = results.send((rank, outcome));
        });
    }
    drop(results);
    let deadline = Instant::now() + ABANDON_WATCHDOG;
    let mut reported = vec![false; size];
    for _ in 0..size {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((rank, outcome)) = outcomes.recv_timeout(left) else {
            let waiting: Vec<usize> = (0..size).filter(|&rank| !reported[rank]).collect();
            panic!("{what}: ranks {waiting:?} still wait after {ABANDON_WATCHDOG:?}: they were never told");
        };
        reported[rank] = true;
        match outcome {
            Err(why) => panic!("{what}: rank {rank}: {why}"),
            Ok(None) => assert_eq!(rank, abandoning_root, "{what}: only the root returns without an error"),
            Ok(Some(error)) => {
                let expected = if kind == MulticastKind::None { "could not provide" } else { "disagrees on the message" };
                assert!(error.contains(expected), "{what}: rank {rank} failed for another reason: {error}");
            }
        }
    }
}

/// Large messages (16 and 64 MiB, issue 12) from every root through a
/// small window (8 pieces) that each message wraps thousands of times:
/// over lossy multicast with a co-root, over the put tree, and over the
/// shared-window flavour. The checker compares every delivery with the
/// script's content, generated apart from the broadcast.
#[test]
fn sixteen_and_sixty_four_mebibytes_from_every_root_through_a_small_window() {
    const MIB: usize = 1 << 20;
    let piece = 32 * 1024;
    let lossy = RmcastConfig {
        window_slots: 8,
        co_roots: 1,
        ack_interval: 4,
        fragment_bytes: piece,
        slot_bytes: piece,
        ..test_multicast_config()
    };
    for (kind, size, drop) in [(MulticastKind::Datagram, 4, 0.02), (MulticastKind::None, 5, 0.0), (MulticastKind::SharedWindow, 3, 0.0)] {
        let seed = 0x00B1_6000 + size as u64 + seed_shift();
        let mut run = lossy_run(size, seed, lossy, drop);
        run.fabric.multicast_kind = kind;
        run.fabric.max_datagram = piece + 64;
        run.fabric.multicast_duplicate = if kind == MulticastKind::Datagram { 0.01 } else { 0.0 };
        run.skew = Duration::ZERO;
        let mut script: Vec<Op> = (0..size).map(|root| Op { root, len: 16 * MIB + root }).collect();
        script.push(Op { root: size - 1, len: 64 * MIB });
        script.push(Op { root: 0, len: 3 });
        let counters = run_and_check(&run, &script);
        match kind {
            MulticastKind::None => assert_eq!(counters.pieces_sent, 0, "{kind:?}: the put tree must carry these"),
            _ => assert!(counters.window_full_stalls > 0, "{kind:?}: 16 MiB should fill an 8-piece window"),
        }
        if kind == MulticastKind::Datagram {
            assert!(counters.retransmissions + counters.nacks_sent > 0, "no loss was recovered: {counters:?}");
        }
    }
}
