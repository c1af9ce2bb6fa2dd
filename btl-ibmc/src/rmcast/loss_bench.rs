//! A benchmark, not a test (ignored; run alone, it loads the machine): bcast
//! latency over the lossy in-process fabric, every rank a thread, against the
//! loss-free median of the same setting (issue 36's criterion: a mean at
//! most 3x the loss-free median). Every delivery is checked.
//!
//! A bcast's latency runs from the root's call until the last receiver has
//! the message. Between bcasts every rank keeps progressing (serving NACKs
//! and timeouts) until all have the message, so one bcast's repair does not
//! leak into the next one. With more threads than cores, a rank waits for
//! the scheduler as well as for the network; the loss-free reference run
//! carries the same scheduling, so the ratio isolates what loss adds, as
//! long as the loss-free run itself is not full of spurious timeouts (its
//! retransmission count says so: without loss every retransmission is
//! spurious).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::config::{CongestionConfig, CongestionMode};
use super::tests::test_config;
use super::{ReliableMulticast, RmcastConfig, RmcastStats, region_len};
use crate::fabric::{Fabric, FabricConfig};
use crate::test_support::{pattern, run_with};

/// What one run measures; from the environment (see `settings`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Setting {
    pub(super) ranks: usize,
    pub(super) bytes: usize,
    pub(super) calls: usize,
    pub(super) co_roots: usize,
    pub(super) timeout: Duration,
    /// How a rank that already has the message waits for the others:
    /// `None` yields between progress calls, `Some(d)` sleeps `d`, which
    /// leaves the cores to the ranks still working.
    pub(super) idle_sleep: Option<Duration>,
}

/// One run's latencies in microseconds, sorted, and the ranks' summed counters.
pub(super) struct Run {
    pub(super) latencies: Vec<f64>,
    pub(super) stats: RmcastStats,
    /// The root's own counters (its window gauge among them).
    pub(super) root: RmcastStats,
}

impl Run {
    pub(super) fn quantile(&self, q: f64) -> f64 {
        self.latencies[((self.latencies.len() as f64 * q) as usize).min(self.latencies.len() - 1)]
    }

    pub(super) fn mean(&self) -> f64 {
        self.latencies.iter().sum::<f64>() / self.latencies.len() as f64
    }
}

/// `setting`'s bcasts at loss `drop` per datagram and receiver, with
/// `base` for everything `setting` does not set.
pub(super) fn measure(setting: Setting, drop: f64, tail_repeat: usize, base: RmcastConfig) -> Run {
    let Setting { ranks, bytes, calls, co_roots, timeout, idle_sleep } = setting;
    let config = RmcastConfig { co_roots, tail_repeat, timeout, give_up_after: Some(Duration::from_secs(300)), ..base };
    let fabric = FabricConfig { multicast_drop: drop, seed: 36, ..FabricConfig::default() };
    let started = Mutex::new(vec![None::<Instant>; calls]);
    let finished = Mutex::new(vec![None::<Instant>; calls]);
    let done: Vec<AtomicUsize> = (0..calls).map(|_| AtomicUsize::new(0)).collect();
    let stats = run_with(Fabric::new(ranks, region_len(ranks, &config), fabric), |rank, transport| {
        let mut multicast = ReliableMulticast::new(rank, ranks, 0, config);
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
            while done[call].load(Ordering::Acquire) < ranks {
                multicast.progress(&transport).expect("progress");
                match idle_sleep {
                    Some(pause) => std::thread::sleep(pause),
                    None => std::thread::yield_now(),
                }
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
    Run { latencies, stats: RmcastStats::sum(&stats), root: stats[0] }
}

/// Settings from the environment: TAIL_BENCH_RANKS (1024), TAIL_BENCH_BYTES
/// (8), TAIL_BENCH_CALLS (200), TAIL_BENCH_DROP (0.001, per datagram and
/// receiver), TAIL_BENCH_CO_ROOTS (15), TAIL_BENCH_TIMEOUT_MS (20, the
/// collector's timeout), TAIL_BENCH_IDLE_US (0: a rank that has the message
/// yields while it waits for the others; N: it sleeps N us) and
/// TAIL_BENCH_REPEATS (the tail repeats to compare, "0 1"). Three more set
/// the base configuration (`base_config`).
fn settings() -> (Setting, f64, Vec<usize>) {
    let number = |name: &str, default: f64| std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default);
    let idle_us = number("TAIL_BENCH_IDLE_US", 0.0);
    let setting = Setting {
        ranks: number("TAIL_BENCH_RANKS", 1024.0) as usize,
        bytes: number("TAIL_BENCH_BYTES", 8.0) as usize,
        calls: (number("TAIL_BENCH_CALLS", 200.0) as usize).max(1),
        co_roots: number("TAIL_BENCH_CO_ROOTS", 15.0) as usize,
        timeout: Duration::from_secs_f64(number("TAIL_BENCH_TIMEOUT_MS", 20.0) / 1e3),
        idle_sleep: (idle_us > 0.0).then(|| Duration::from_secs_f64(idle_us / 1e6)),
    };
    let repeats = std::env::var("TAIL_BENCH_REPEATS")
        .unwrap_or_else(|_| "0 1".into())
        .split_whitespace()
        .map(|word| word.parse().expect("TAIL_BENCH_REPEATS: whole numbers"))
        .collect();
    (setting, number("TAIL_BENCH_DROP", 0.001), repeats)
}

/// TAIL_BENCH_PIECE (bytes per piece; unset: 4096, 1400 is udp's),
/// TAIL_BENCH_CONGESTION (`on`, `off`; unset: auto, which is off on the
/// fabric) and TAIL_BENCH_NACK (`before`: the NACK rule before issue 36's
/// repair change, a holdoff of up to half the SRTT under congestion
/// control and no repeated NACKs; unset: the defaults).
fn base_config() -> RmcastConfig {
    let base = test_config();
    let mode = match std::env::var("TAIL_BENCH_CONGESTION").as_deref() {
        Ok("on") => CongestionMode::On,
        Ok("off") => CongestionMode::Off,
        _ => base.congestion.mode,
    };
    let mut config = RmcastConfig { congestion: CongestionConfig { mode, ..base.congestion }, ..base };
    if let Some(piece) = std::env::var("TAIL_BENCH_PIECE").ok().and_then(|value| value.parse().ok()) {
        config.fragment_bytes = piece;
    }
    if std::env::var("TAIL_BENCH_NACK").as_deref() == Ok("before") {
        config.congestion.nack_holdoff_percent = 50;
        config.nack_retry_floor = None;
    }
    config
}

#[test]
#[ignore = "benchmark: loads the machine; run alone with --ignored --nocapture"]
fn bench_bcast_latency_under_loss_against_the_loss_free_median() {
    let (setting, drop, repeats) = settings();
    println!("{setting:?}, loss {drop} per datagram and receiver, {:?}", base_config());
    for tail_repeat in repeats {
        let reference = measure(setting, 0.0, tail_repeat, base_config());
        let lossy = measure(setting, drop, tail_repeat, base_config());
        let median_free = reference.quantile(0.5);
        for (loss, run) in [(0.0, &reference), (drop, &lossy)] {
            let beyond_timeout = run.latencies.iter().filter(|&&us| us >= setting.timeout.as_secs_f64() * 1e6).count();
            println!(
                "tail repeat {tail_repeat}, loss {loss}: median {:.0} us, mean {:.0} us, p99 {:.0} us, max {:.0} us, \
                 mean/loss-free median {:.2}; {beyond_timeout} of {} bcasts took the timeout or longer; \
                 {} retransmissions, {} NACKs ({} repeats; waits before the first NACKs {:.2} SRTT on average), \
                 {} timeout bursts, {} copies",
                run.quantile(0.5),
                run.mean(),
                run.quantile(0.99),
                run.latencies[run.latencies.len() - 1],
                run.mean() / median_free,
                run.latencies.len(),
                run.stats.retransmissions,
                run.stats.nacks_sent,
                run.stats.nacks_repeated,
                run.stats.nack_wait_rtt_percent as f64 / 100.0 / run.stats.nack_first_asks.max(1) as f64,
                run.stats.timeout_resends,
                run.stats.tail_repeats
            );
        }
    }
}
