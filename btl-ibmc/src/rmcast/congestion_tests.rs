//! Congestion control end to end: bcasts stay correct with it under loss,
//! duplication and reordering; a loss-free fabric sees no timeouts at
//! bcast tails; NACK suppression answers a loss that every receiver
//! shares with fewer NACKs; and over real udp on 127.0.0.1, a 4 MiB bcast
//! on a busy machine is compared with and without it (ignored by default;
//! the counts are printed, not asserted: they depend on the machine's
//! load).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::config::{CongestionConfig, CongestionMode};
use super::tests::{Script, expected_deliveries, run_script, script, tag, test_config};
use super::{ReliableMulticast, RmcastConfig, RmcastStats, region_len};
use crate::fabric::{Fabric, FabricConfig, FabricEndpoint};
use crate::test_support::{PATIENCE, pattern, run_with, test_seed};
use crate::transport::{Datagrams, Endpoint, MulticastKind, ReliableChannel, TransportError, forward};

fn with_congestion(config: RmcastConfig, mode: CongestionMode) -> RmcastConfig {
    RmcastConfig { congestion: CongestionConfig { mode, ..config.congestion }, ..config }
}

/// Under congestion control, NACKs held back up to half the leaf's SRTT
/// (the rule before issue 36, now `nack_holdoff_percent` 50).
fn with_holdoff(config: RmcastConfig) -> RmcastConfig {
    RmcastConfig { congestion: CongestionConfig { nack_holdoff_percent: 50, ..config.congestion }, ..config }
}

#[test]
fn bcasts_with_congestion_control_survive_loss_duplication_and_reordering() {
    const PIECE: usize = 96;
    let seed = test_seed();
    // (size, window, co-roots, M): many receivers, with and without co-roots,
    // a window narrower than M, and one barely wider than M.
    let cases = [(12, 64, 0, 8), (16, 64, 3, 8), (10, 32, 2, 4), (6, 4, 1, 16), (5, 9, 0, 8)];
    for (case, (size, window_slots, co_roots, ack_interval)) in cases.into_iter().enumerate() {
        let what = format!("seed {seed}, congestion on, size {size}, W {window_slots}, C {co_roots}, M {ack_interval}");
        let config = RmcastConfig { window_slots, co_roots, ack_interval, fragment_bytes: PIECE, ..test_config() };
        let config = with_congestion(config, CongestionMode::On);
        let fabric = FabricConfig {
            multicast_drop: 0.05,
            multicast_duplicate: 0.05,
            multicast_reorder: 0.1,
            put_delay_max: Duration::from_micros(30),
            seed: seed ^ (case as u64) << 8,
            ..FabricConfig::default()
        };
        // The usual mix, then long messages so that windows open up.
        let mut script = script(size, PIECE, 28);
        script.extend((0..4).map(|index| (index % size, 300 * PIECE + index)));
        let stats = run_script(Fabric::new(size, region_len(size, &config), fabric), config, &script, &what);
        let total = RmcastStats::sum(&stats);
        assert_eq!(total.overruns, 0, "{what}: a root overran a receive window");
        assert_eq!(total.pieces_delivered, expected_deliveries(&script, size, PIECE), "{what}");
        assert!(
            total.loss_events + total.losses_tolerated + total.timeout_collapses > 0,
            "{what}: 5 % loss never reached a window: {total:?}"
        );
        // Karn's rule and the stall rule skip samples, but not all of them:
        // each root of a long message times some round trips.
        for (rank, one) in stats.iter().enumerate().filter(|&(rank, _)| script.iter().any(|&(root, len)| root == rank && len >= 300 * PIECE)) {
            assert!(one.rtt_samples > 0, "{what}: rank {rank} never timed a round trip: {one:?}");
        }
        println!(
            "{what}: {} retransmissions, {} NACKs ({} suppressed), {} repairs multicast, {} halvings, {} tolerated, {} collapses, {} acker switches, {} RTT samples",
            total.retransmissions,
            total.nacks_sent,
            total.nacks_suppressed,
            total.repairs_multicast,
            total.loss_events,
            total.losses_tolerated,
            total.timeout_collapses,
            total.acker_switches,
            total.rtt_samples
        );
    }
}

/// On a loss-free fabric every timeout is spurious. With the realistic
/// 20 ms timeout a leaf's explicit ACK of a message's tail comes after
/// ack_delay = 5 ms; an RTO below that (it settled at the 2 ms floor
/// before the effective floor of 2 x ack_delay) times out whenever a root
/// keeps progressing that long after a tail, e.g. while it waits for a
/// rank that computes before its own bcast (here the last rank, for
/// 8 ms): a collapse per message and member. A receiver thread
/// descheduled for longer than the RTO still times out genuinely on a
/// loaded machine, so the bound allows one collapse per 8 messages rather
/// than none.
#[test]
fn a_loss_free_fabric_gives_no_timeouts_at_bcast_tails() {
    const SIZE: usize = 5;
    const PIECE: usize = 64;
    const MESSAGES: usize = 100;
    const COMPUTE: Duration = Duration::from_millis(8);
    let config = RmcastConfig { fragment_bytes: PIECE, timeout: Duration::from_millis(20), ..test_config() };
    let config = with_congestion(config, CongestionMode::On);
    // Small and medium messages (1 to 40 pieces) from every root in turn.
    let lengths = [1, PIECE, 3 * PIECE - 5, 9 * PIECE, 40 * PIECE, 2 * PIECE + 1];
    let script: Script = (0..MESSAGES).map(|index| (index % SIZE, lengths[index % lengths.len()])).collect();
    let what = "loss-free, 20 ms timeout";
    let transports = Fabric::new(SIZE, region_len(SIZE, &config), FabricConfig::default());
    let stats = run_with(transports, |rank, transport| {
        let mut multicast = ReliableMulticast::new(rank, SIZE, 0, config);
        for (index, &(root, len)) in script.iter().enumerate() {
            if rank == root {
                if rank == SIZE - 1 {
                    std::thread::sleep(COMPUTE);
                }
                multicast.send(&transport, &pattern(tag(index), len)).unwrap_or_else(|e| panic!("{what}: rank {rank} send {index}: {e}"));
            } else {
                let mut got = vec![0xEE; len];
                multicast.receive(&transport, root, &mut got).unwrap_or_else(|e| panic!("{what}: rank {rank} receive {index}: {e}"));
                assert!(got == pattern(tag(index), len), "{what}: rank {rank} got message {index} wrong");
            }
        }
        multicast.drain(&transport).unwrap_or_else(|e| panic!("{what}: rank {rank} drain: {e}"));
        multicast.stats()
    });
    let total = RmcastStats::sum(&stats);
    assert_eq!(total.pieces_delivered, expected_deliveries(&script, SIZE, PIECE), "{what}");
    println!(
        "{what}: {MESSAGES} bcasts, {} collapses, {} retransmissions, {} explicit ACKs, RTO up to {} us",
        total.timeout_collapses, total.retransmissions, total.explicit_acks, total.rto_micros
    );
    assert!(total.timeout_collapses * 8 <= MESSAGES as u64, "{what}: spurious timeouts at bcast tails: {total:?}");
}

/// A fabric endpoint that loses piece s when s mod `every` = `phase` and
/// s < `last_lost` (so that a later piece reveals every gap), only the
/// first time s passes (repairs go through): at the root's multicast for
/// every receiver alike (as a loss before the switch would), or at one
/// receiver's arrival.
pub(super) struct ScriptedLoss {
    fabric: FabricEndpoint,
    every: u64,
    phase: u64,
    last_lost: u64,
    at_root: bool,
    /// Pieces below this passed before: a copy is a repair.
    fresh_from: Cell<u64>,
}

impl ScriptedLoss {
    pub(super) fn new(fabric: FabricEndpoint, every: u64, phase: u64, last_lost: u64, at_root: bool) -> Self {
        ScriptedLoss { fabric, every, phase, last_lost, at_root, fresh_from: Cell::new(0) }
    }

    /// Whether `frame`, passing for the first time, is to be lost.
    fn loses(&self, frame: &[u8]) -> bool {
        let Some(seq) = frame.get(16..24).map(|bytes| u64::from_le_bytes(bytes.try_into().expect("8 bytes"))) else {
            return false;
        };
        if seq < self.fresh_from.get() {
            return false;
        }
        self.fresh_from.set(seq + 1);
        seq % self.every == self.phase && seq < self.last_lost
    }
}

forward!(Endpoint for ScriptedLoss => fabric);
forward!(Windows for ScriptedLoss => fabric);
forward!(PeerReads for ScriptedLoss => fabric);

impl Datagrams for ScriptedLoss {
    fn multicast_kind(&self) -> MulticastKind {
        self.fabric.multicast_kind()
    }
    fn max_datagram(&self) -> usize {
        self.fabric.max_datagram()
    }
    fn multicast(&self, datagram: &[u8]) -> Result<(), TransportError> {
        if self.at_root && self.loses(datagram) {
            return Ok(());
        }
        self.fabric.multicast(datagram)
    }
    fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize> {
        loop {
            let sender = self.fabric.poll_multicast(out)?;
            if self.at_root || !self.loses(out) {
                return Some(sender);
            }
        }
    }
    fn multicast_nonce(&self) -> u64 {
        self.fabric.multicast_nonce()
    }
}

impl ReliableChannel for ScriptedLoss {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        self.fabric.send_reliable(peer, message)
    }
    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        self.fabric.poll_reliable(out)
    }
}

/// A loss every receiver shares, with and without the NACK holdoff: every
/// piece delivered, each receiver's first NACK of a lost piece sent at
/// most once, and under congestion control each lost piece multicast
/// again. How many NACKs the holdoff saves depends on how the receivers'
/// threads are scheduled against their short SRTT (measured 133 against
/// 48 to 62 on an idle machine, none saved on a loaded one), so it is
/// printed, not asserted: `nack.rs`'s tests hold the suppression itself
/// (a gap filled before the holdoff ends is never NACKed).
#[test]
fn a_shared_loss_is_nacked_at_most_once_per_receiver_and_repaired_by_multicast() {
    const SIZE: usize = 8;
    const PIECE: usize = 64;
    const PIECES: usize = 400;
    const EVERY: u64 = 20;
    let lost = (0..PIECES as u64 - 10).filter(|seq| seq % EVERY == EVERY / 2).count() as u64;
    // A timeout far above any NACK's wait, so that only NACKs repair.
    let base = RmcastConfig { fragment_bytes: PIECE, timeout: Duration::from_millis(40), nack: true, ..test_config() };
    let script: Script = vec![(0, PIECES * PIECE)];
    for mode in [CongestionMode::Off, CongestionMode::On] {
        let config = with_holdoff(with_congestion(base, mode));
        let what = format!("shared loss of {lost} pieces, congestion {mode:?}");
        let transports = Fabric::new(SIZE, region_len(SIZE, &config), FabricConfig::default())
            .into_iter()
            .map(|fabric| ScriptedLoss::new(fabric, EVERY, EVERY / 2, PIECES as u64 - 10, true))
            .collect();
        let total = RmcastStats::sum(&run_script(transports, config, &script, &what));
        assert_eq!(total.pieces_delivered, (PIECES * (SIZE - 1)) as u64, "{what}");
        // Every receiver asks for every lost piece once at most, and for
        // nothing else: lost x 7 first NACKs, fewer where the holdoff or a
        // receiver descheduled for 40 ms let a repair or the timeout fill
        // a gap first. A repeat (the repair late on a loaded machine) is
        // counted apart.
        let first = total.nacks_sent - total.nacks_repeated;
        assert!(first > 0 && first <= lost * (SIZE as u64 - 1), "{what}: {total:?}");
        if mode == CongestionMode::Off {
            assert_eq!(total.nacks_suppressed, 0, "{what}: no holdoff, nothing suppressed");
        } else {
            assert!(total.repairs_multicast >= lost, "{what}: each lost piece is multicast again: {total:?}");
        }
        println!("{what}: {} NACKs sent, {} suppressed, {} retransmissions, {} repairs multicast", total.nacks_sent, total.nacks_suppressed, total.retransmissions, total.repairs_multicast);
    }
}

/// pgmcc's acker between two receivers that take turns losing, end to
/// end: receiver 1 loses every 40th piece, receiver 2 the piece 20 after
/// each of those. Their loss intervals are equal, so the damping must keep
/// the first acker; flapping would be one switch per loss. A timeout
/// reports loss too, and a receiver descheduled past the RTO on a loaded
/// machine is one: a 40 ms timeout (RTO at least 20 ms) makes them rare,
/// and each may cost up to two switches (away and back), so those are
/// allowed for.
#[test]
fn the_acker_does_not_flap_between_two_receivers_alternating_losses() {
    const PIECES: usize = 2000;
    const EVERY: u64 = 40;
    let config = RmcastConfig { fragment_bytes: 64, timeout: Duration::from_millis(40), ..test_config() };
    let config = with_congestion(config, CongestionMode::On);
    let transports = Fabric::new(3, region_len(3, &config), FabricConfig::default())
        .into_iter()
        .enumerate()
        .map(|(rank, fabric)| ScriptedLoss::new(fabric, EVERY, 5 + 20 * (rank as u64 % 2), PIECES as u64 - 10, rank == 0))
        .collect();
    let script: Script = vec![(0, PIECES * 64)];
    let stats = run_script(transports, config, &script, "alternating losses");
    let losses = 2 * (PIECES as u64 - 10).div_ceil(EVERY);
    let root = stats[0];
    println!(
        "alternating losses: {losses} pieces lost, root: {} NACKs served, {} halvings, {} collapses, {} acker switches",
        root.nacks_served, root.loss_events, root.timeout_collapses, root.acker_switches
    );
    assert!(root.nacks_served > 0, "{root:?}");
    assert!(
        root.acker_switches * 10 < losses + 20 * root.timeout_collapses,
        "the acker flapped: {} switches for {losses} losses and {} timeouts",
        root.acker_switches,
        root.timeout_collapses
    );
}

/// Two threads that spin while the measured run goes on: a busy machine.
struct Busy {
    stop: std::sync::Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start(threads: usize) -> Self {
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                    }
                })
            })
            .collect();
        Busy { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The measurement: 4 MiB bcasts over real udp on 127.0.0.1 with
/// two spinning threads beside the four ranks, with the fixed 20 ms
/// timeout (congestion off) and with congestion control, in turns. Correctness is
/// asserted; the retransmission counts are printed for the report, since
/// how much they differ depends on how busy the machine already is.
///
/// Ignored by default: its two spinning threads and ~12 udp runs would
/// slow the timing-sensitive tests that run beside it in this binary. Run
/// it alone: `cargo test --release -p btl-ibmc --lib four_mib_bcasts -- --ignored --nocapture`.
#[test]
#[ignore = "loads the machine; run alone with --ignored (see the comment)"]
fn four_mib_bcasts_over_udp_with_and_without_congestion_control_under_load() {
    use crate::udp::{UdpConfig, UdpFaults, establish};
    const SIZE: usize = 4;
    const MESSAGE: usize = 4 << 20;
    const MESSAGES: usize = 2;
    const ROUNDS: usize = 3;
    let seed = test_seed();
    let mixed = crate::rng::splitmix64(seed ^ 0xCC);
    // Retransmissions with the fixed timeout and with congestion control,
    // the two alternating so that both see the same spells of load.
    let mut results = [0u64; 2];
    for (run, mode) in (0..ROUNDS).flat_map(|_| [CongestionMode::Off, CongestionMode::On]).enumerate() {
        let udp = UdpConfig {
            interface: Some(std::net::Ipv4Addr::LOCALHOST),
            multicast_id: (mixed as u32) ^ run as u32,
            retransmit_after: Duration::from_millis(5),
            faults: UdpFaults { seed, ..UdpFaults::default() },
            ..UdpConfig::default()
        };
        let rmcast = RmcastConfig {
            timeout: Duration::from_millis(20),
            wait: crate::wait::WaitPolicy { spin_polls: 0, kernel_spin_polls: 0, stall_warning: Duration::from_secs(5), fault_timeout: None },
            give_up_after: Some(PATIENCE * 3),
            ..RmcastConfig::default()
        };
        let rmcast = with_congestion(rmcast, mode);
        let exchanges = Fabric::new(SIZE, 8, FabricConfig::default());
        let transports = run_with(exchanges, |rank, exchange| establish(&exchange, rank, SIZE, region_len(SIZE, &rmcast), &udp).map_err(|e| format!("rank {rank}: {e}")));
        let transports = match transports.into_iter().collect::<Result<Vec<_>, _>>() {
            Ok(transports) => transports,
            Err(why) => {
                println!("SKIPPED four_mib_bcasts_over_udp_with_and_without_congestion_control_under_load: udp on 127.0.0.1 unavailable ({why})");
                return;
            }
        };
        let busy = Busy::start(2);
        let done = AtomicUsize::new(0);
        let started = Instant::now();
        let stats = run_with(transports, |rank, transport| {
            let mut multicast = ReliableMulticast::new(rank, SIZE, 0, rmcast);
            for index in 0..MESSAGES {
                let payload = pattern(tag(index), MESSAGE);
                if rank == 0 {
                    multicast.send(&transport, &payload).unwrap_or_else(|e| panic!("seed {seed} {mode:?}: root bcast {index}: {e}"));
                } else {
                    let mut got = vec![0xEE; MESSAGE];
                    multicast.receive(&transport, 0, &mut got).unwrap_or_else(|e| panic!("seed {seed} {mode:?}: rank {rank} bcast {index}: {e}"));
                    assert!(got == payload, "seed {seed} {mode:?}: rank {rank} got bcast {index} wrong");
                }
            }
            multicast.drain(&transport).unwrap_or_else(|e| panic!("seed {seed} {mode:?}: rank {rank} drain: {e}"));
            transport.flush().unwrap_or_else(|e| panic!("rank {rank}: flush: {e}"));
            done.fetch_add(1, Ordering::AcqRel);
            while done.load(Ordering::Acquire) < SIZE {
                transport.progress();
                std::thread::yield_now();
            }
            multicast.stats()
        });
        let elapsed = started.elapsed();
        drop(busy);
        let total = RmcastStats::sum(&stats);
        assert_eq!(total.pieces_delivered, stats[0].pieces_sent * (SIZE as u64 - 1), "{mode:?}");
        println!(
            "udp, {MESSAGES} x 4 MiB, 4 ranks + 2 busy threads, congestion {mode:?}: {} pieces sent, {} retransmissions, {} NACKs \
             ({} suppressed), {} halvings, {} collapses, final cwnd {}, RTO {} us, {:.2} s (sanity timing on a loaded machine)",
            stats[0].pieces_sent,
            total.retransmissions,
            total.nacks_sent,
            total.nacks_suppressed,
            total.loss_events,
            total.timeout_collapses,
            stats[0].cwnd,
            stats[0].rto_micros,
            elapsed.as_secs_f64()
        );
        results[usize::from(mode == CongestionMode::On)] += total.retransmissions;
    }
    let per_message = (ROUNDS * MESSAGES) as f64;
    println!(
        "retransmissions per 4 MiB over {ROUNDS} rounds: fixed 20 ms timeout {:.1}, congestion control {:.1}",
        results[0] as f64 / per_message,
        results[1] as f64 / per_message
    );
}

/// A receiver that leaves MPI between messages (fbcast hashes and writes
/// each 4 MiB chunk) stops acknowledging while the root goes on sending
/// the next message: its silence outlasts the RTO without anything having
/// been lost. On a loss-free fabric, 2 ranks, the receiver away 30 ms
/// after each of 12 messages of 300 pieces: the window must not be
/// collapsed for it, or every message after the first runs in a window
/// of M pieces per round trip.
#[test]
fn a_receiver_away_between_messages_does_not_collapse_the_window() {
    const PIECE: usize = 256;
    const MESSAGES: usize = 12;
    const AWAY: Duration = Duration::from_millis(30);
    let config = RmcastConfig { fragment_bytes: PIECE, timeout: Duration::from_millis(20), ..test_config() };
    let config = with_congestion(config, CongestionMode::On);
    let len = 300 * PIECE;
    let transports = Fabric::new(2, region_len(2, &config), FabricConfig::default());
    let stats = run_with(transports, |rank, transport| {
        let mut multicast = ReliableMulticast::new(rank, 2, 0, config);
        for index in 0..MESSAGES {
            if rank == 0 {
                multicast.send(&transport, &pattern(tag(index), len)).unwrap_or_else(|e| panic!("send {index}: {e}"));
            } else {
                let mut got = vec![0xEE; len];
                multicast.receive(&transport, 0, &mut got).unwrap_or_else(|e| panic!("receive {index}: {e}"));
                assert!(got == pattern(tag(index), len), "message {index} wrong");
                std::thread::sleep(AWAY);
            }
        }
        multicast.drain(&transport).unwrap_or_else(|e| panic!("rank {rank} drain: {e}"));
        multicast.stats()
    });
    let root = stats[0];
    println!(
        "receiver away {AWAY:?} after each of {MESSAGES} messages: {} collapses, {} halvings, {} retransmissions, window {} at the end",
        root.timeout_collapses, root.loss_events, root.retransmissions, root.cwnd
    );
    assert_eq!((root.timeout_collapses, root.loss_events), (0, 0), "a receiver outside MPI was taken for congestion: {root:?}");
}
