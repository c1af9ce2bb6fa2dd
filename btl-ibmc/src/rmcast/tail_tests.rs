//! The tail repeat end to end (issue 36). The root's first multicast of
//! every piece is lost for every receiver and the collector's timeout is
//! ten minutes, far beyond the test's patience: a bcast completes only if
//! the copy of its last piece arrives and the gap it reveals is NACKed.
//! Before the tail repeat these bcasts waited for the timeout and the
//! test gave up.

use std::time::Duration;

use super::congestion_tests::ScriptedLoss;
use super::tests::{Script, expected_deliveries, run_script, test_config};
use super::{RmcastConfig, RmcastStats, region_len};
use crate::fabric::{Fabric, FabricConfig};

const PIECE: usize = 64;
const NEVER: Duration = Duration::from_secs(600);

/// Every root in turn, one-piece, exact-piece and multi-piece messages
/// (the copy of the last reveals the lost ones before it), and a
/// zero-length one (no piece, nothing to repeat).
fn mixed_script(size: usize) -> Script {
    let lengths = [8, PIECE, 3 * PIECE + 7, 0, 2 * PIECE, 1];
    (0..24).map(|index| (index % size, lengths[index % lengths.len()])).collect()
}

fn run_with_every_original_lost(size: usize, co_roots: usize, tail_repeat: usize) -> (Script, RmcastStats) {
    let config = RmcastConfig { fragment_bytes: PIECE, co_roots, tail_repeat, timeout: NEVER, ..test_config() };
    let script = mixed_script(size);
    let what = format!("size {size}, {co_roots} co-root(s), tail repeat {tail_repeat}, every original lost, timeout {NEVER:?}");
    let transports = Fabric::new(size, region_len(size, &config), FabricConfig::default())
        .into_iter()
        .map(|fabric| ScriptedLoss::new(fabric, 1, 0, u64::MAX, true))
        .collect();
    let stats = RmcastStats::sum(&run_script(transports, config, &script, &what));
    (script, stats)
}

#[test]
fn a_lost_tail_is_repaired_through_its_copy_without_the_collector_timeout() {
    for (size, co_roots, tail_repeat) in [(2, 0, 1), (5, 0, 1), (6, 2, 1), (5, 0, 2)] {
        let (script, total) = run_with_every_original_lost(size, co_roots, tail_repeat);
        let what = format!("size {size}, {co_roots} co-root(s), tail repeat {tail_repeat}");
        assert_eq!(total.pieces_delivered, expected_deliveries(&script, size, PIECE), "{what}");
        assert_eq!(total.overruns, 0, "{what}");
        // One copy per repeated piece, counted from the script.
        let repeated: u64 = script.iter().map(|&(_, len)| len.div_ceil(PIECE).min(tail_repeat) as u64).sum();
        assert_eq!(total.tail_repeats, repeated, "{what}: {total:?}");
        // The pieces before the repeated ones reached the leaves only
        // through NACKs (the timeout never came).
        let unrepeated = script.iter().any(|&(_, len)| len.div_ceil(PIECE) > tail_repeat);
        if unrepeated && size - 1 > co_roots {
            assert!(total.nacks_sent > 0 && total.nacks_served > 0, "{what}: {total:?}");
        }
        println!("{what}: {} copies, {} NACKs, {} retransmissions", total.tail_repeats, total.nacks_sent, total.retransmissions);
    }
}

/// A benchmark, not a test (ignored; run alone, it loads the machine):
/// bcast latency from the root's call until the last receiver has the
/// message, over the lossy fabric with every rank a thread, with and
/// without the tail repeat; every delivery is checked. Between bcasts
/// every rank keeps progressing (serving NACKs and timeouts) until all
/// have the message. Settings from the environment: TAIL_BENCH_RANKS
/// (1024), TAIL_BENCH_BYTES (8), TAIL_BENCH_CALLS (200), TAIL_BENCH_DROP
/// (0.001), TAIL_BENCH_CO_ROOTS (15).
#[test]
#[ignore = "benchmark: loads the machine; run alone with --ignored --nocapture"]
fn bench_bcast_latency_under_loss_with_and_without_the_tail_repeat() {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    use super::ReliableMulticast;
    use crate::test_support::{pattern, run_with};

    let setting = |name: &str, default: f64| std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default);
    let size = setting("TAIL_BENCH_RANKS", 1024.0) as usize;
    let bytes = setting("TAIL_BENCH_BYTES", 8.0) as usize;
    let calls = setting("TAIL_BENCH_CALLS", 200.0) as usize;
    let drop = setting("TAIL_BENCH_DROP", 0.001);
    let co_roots = setting("TAIL_BENCH_CO_ROOTS", 15.0) as usize;
    for tail_repeat in [0, 1] {
        let config = RmcastConfig {
            co_roots,
            tail_repeat,
            timeout: Duration::from_millis(20),
            give_up_after: Some(Duration::from_secs(300)),
            ..test_config()
        };
        let fabric = FabricConfig { multicast_drop: drop, seed: 36, ..FabricConfig::default() };
        let started = Mutex::new(vec![None::<Instant>; calls]);
        let finished = Mutex::new(vec![None::<Instant>; calls]);
        let done: Vec<AtomicUsize> = (0..calls).map(|_| AtomicUsize::new(0)).collect();
        let stats = run_with(Fabric::new(size, region_len(size, &config), fabric), |rank, transport| {
            let mut multicast = ReliableMulticast::new(rank, size, 0, config);
            for call in 0..calls {
                let message = pattern(call as u64, bytes);
                if rank == 0 {
                    started.lock().expect("lock")[call] = Some(Instant::now());
                    multicast.send(&transport, &message).expect("send");
                } else {
                    let mut got = vec![0; bytes];
                    multicast.receive(&transport, 0, &mut got).expect("receive");
                    let at = Instant::now();
                    assert!(got == message, "rank {rank}: bcast {call} wrong");
                    let mut finished = finished.lock().expect("lock");
                    finished[call] = Some(finished[call].map_or(at, |latest| latest.max(at)));
                }
                done[call].fetch_add(1, Ordering::AcqRel);
                while done[call].load(Ordering::Acquire) < size {
                    multicast.progress(&transport).expect("progress");
                    std::thread::yield_now();
                }
            }
            multicast.drain(&transport).expect("drain");
            multicast.stats()
        });
        let (started, finished) = (started.into_inner().expect("lock"), finished.into_inner().expect("lock"));
        let mut latencies: Vec<f64> = (0..calls)
            .map(|call| {
                let (start, end) = (started[call].expect("started"), finished[call].expect("finished"));
                end.saturating_duration_since(start).as_secs_f64() * 1e6
            })
            .collect();
        latencies.sort_by(f64::total_cmp);
        let mean = latencies.iter().sum::<f64>() / calls as f64;
        let at = |q: f64| latencies[((calls as f64 * q) as usize).min(calls - 1)];
        let total = RmcastStats::sum(&stats);
        println!(
            "{size} ranks, {bytes} B, drop {drop}, tail repeat {tail_repeat}: median {:.0} us, mean {mean:.0} us, p99 {:.0} us, max {:.0} us \
             ({calls} bcasts; {} retransmissions, {} NACKs, {} copies)",
            at(0.5),
            at(0.99),
            latencies[calls - 1],
            total.retransmissions,
            total.nacks_sent,
            total.tail_repeats
        );
    }
}
