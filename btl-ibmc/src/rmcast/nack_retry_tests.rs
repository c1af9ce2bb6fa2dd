//! A lost NACK is asked again by the leaf (issue 36), end to end. The
//! fabric's reliable channel never loses, so a wrapper drops every second
//! NACK each rank sends, the first kept (it gives the leaf its first round
//! trip sample). Multicast loses 5 % per datagram and receiver, and the
//! collector's timeout is ten minutes: a bcast completes only if every
//! dropped NACK is repeated. Before the leaf repeated NACKs (a range was
//! NACKed once) the first dropped NACK left its gap to the ten-minute
//! timer and the test gave up after its 20 s. A second test drops each
//! range's NACK six times in a row (issue 36's bounded repeats).

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use super::config::{CongestionConfig, CongestionMode};
use super::tests::{Script, expected_deliveries, run_script, test_config};
use super::{RmcastConfig, RmcastStats, region_len};
use crate::fabric::{Fabric, FabricConfig, FabricEndpoint};
use crate::transport::{ReliableChannel, TransportError, forward};

const NEVER: Duration = Duration::from_secs(600);
/// The kind byte of a NACK frame (`wire`).
const NACK_KIND: u8 = 2;

/// Which NACK frames a rank's reliable channel loses: called with each
/// one the rank sends, true drops it.
type NackRule = Box<dyn FnMut(&[u8]) -> bool + Send>;

/// The fabric, with NACKs dropped by `rule`.
struct LosingNacks {
    fabric: FabricEndpoint,
    rule: RefCell<NackRule>,
}

impl LosingNacks {
    fn new(fabric: FabricEndpoint, rule: NackRule) -> Self {
        LosingNacks { fabric, rule: RefCell::new(rule) }
    }
}

forward!(Endpoint for LosingNacks => fabric);
forward!(Windows for LosingNacks => fabric);
forward!(PeerReads for LosingNacks => fabric);
forward!(Datagrams for LosingNacks => fabric);

impl ReliableChannel for LosingNacks {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        if message.first() == Some(&NACK_KIND) && (self.rule.borrow_mut())(message) {
            return Ok(());
        }
        self.fabric.send_reliable(peer, message)
    }
    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        self.fabric.poll_reliable(out)
    }
}

/// Every second NACK, the first kept.
fn every_second() -> NackRule {
    let mut nacks = 0u64;
    Box::new(move |_| {
        nacks += 1;
        nacks % 2 == 0
    })
}

/// Each NACK range (keyed by its first piece) the first `LOST_IN_A_ROW`
/// times it is sent, after the rank's first NACK, which goes through and
/// gives the leaf its round-trip sample.
fn each_range_lost_in_a_row() -> NackRule {
    let (mut first_passed, mut sends) = (false, HashMap::<u64, u32>::new());
    Box::new(move |nack| {
        if !std::mem::replace(&mut first_passed, true) {
            return false;
        }
        let from = u64::from_le_bytes(nack[16..24].try_into().expect("a NACK names its first piece"));
        let times = sends.entry(from).or_insert(0);
        *times += 1;
        *times <= LOST_IN_A_ROW
    })
}

#[test]
fn a_lost_nack_is_asked_again_without_the_collector_timeout() {
    const SIZE: usize = 4;
    const PIECE: usize = 256;
    // 47 pieces, as a 64 KiB bcast in udp's 1,400-byte pieces.
    let script: Script = (0..30).map(|_| (0, 47 * PIECE)).collect();
    for mode in [CongestionMode::Off, CongestionMode::On] {
        let config = RmcastConfig {
            fragment_bytes: PIECE,
            timeout: NEVER,
            congestion: CongestionConfig { mode, ..CongestionConfig::default() },
            ..test_config()
        };
        let what = format!("congestion {mode:?}, every second NACK lost, 5 % multicast loss, collector timeout {NEVER:?}");
        let fabric = FabricConfig { multicast_drop: 0.05, seed: 36, ..FabricConfig::default() };
        let transports = Fabric::new(SIZE, region_len(SIZE, &config), fabric)
            .into_iter()
            .map(|fabric| LosingNacks::new(fabric, every_second()))
            .collect();
        let total = RmcastStats::sum(&run_script(transports, config, &script, &what));
        assert_eq!(total.pieces_delivered, expected_deliveries(&script, SIZE, PIECE), "{what}");
        assert_eq!(total.timeout_resends, 0, "{what}: the collector's timer fired: {total:?}");
        // 5 % of 30 x 47 pieces at 3 receivers: about 200 lost copies.
        assert!(total.nacks_sent > 10 && total.nacks_repeated > 0, "{what}: {total:?}");
        println!(
            "{what}: {} first NACK decisions, {} repeated, {} NACK messages, {} retransmissions, {} repairs multicast",
            total.nack_first_asks, total.nacks_repeated, total.nacks_sent, total.retransmissions, total.repairs_multicast
        );
    }
}

/// How often each range's NACK is lost in a row.
const LOST_IN_A_ROW: u32 = 6;

/// Issue 36: a range whose NACK random loss takes several times in a
/// row is still asked for by the leaf, with the collector's timer out of
/// the way (ten minutes): every bcast arrives whole, the timer never
/// fires, and the leaves repeated what was dropped. The
/// repeats' spacing (at most 4x the leaf's RTO by default, where it
/// doubled up to a second before) is `nack::tests`' to check, against a
/// hand-made clock; here the longest wait is printed.
#[test]
fn a_range_lost_several_times_in_a_row_is_asked_for_until_it_comes() {
    const SIZE: usize = 4;
    const PIECE: usize = 256;
    let script: Script = (0..12).map(|_| (0, 47 * PIECE)).collect();
    let config = RmcastConfig {
        fragment_bytes: PIECE,
        timeout: NEVER,
        congestion: CongestionConfig { mode: CongestionMode::On, ..CongestionConfig::default() },
        ..test_config()
    };
    let what = format!("each NACK range lost {LOST_IN_A_ROW} times in a row, 5 % multicast loss, collector timeout {NEVER:?}");
    let fabric = FabricConfig { multicast_drop: 0.05, seed: 37, ..FabricConfig::default() };
    let transports: Vec<_> = Fabric::new(SIZE, region_len(SIZE, &config), fabric)
        .into_iter()
        .map(|fabric| LosingNacks::new(fabric, each_range_lost_in_a_row()))
        .collect();
    let total = RmcastStats::sum(&run_script(transports, config, &script, &what));
    assert_eq!(total.pieces_delivered, expected_deliveries(&script, SIZE, PIECE), "{what}");
    assert_eq!(total.timeout_resends, 0, "{what}: the collector's timer fired: {total:?}");
    // A range is repeated until its seventh sending gets through, unless
    // the root's multicast repair for another leaf's NACK fills it first.
    assert!(total.nack_first_asks > SIZE as u64 - 1, "{what}: no range was lost after the first: {total:?}");
    assert!(total.nacks_repeated >= u64::from(LOST_IN_A_ROW), "{what}: {total:?}");
    println!(
        "{what}: {} first NACK decisions, {} repeated, the longest wait before a repeat {} us",
        total.nack_first_asks, total.nacks_repeated, total.longest_nack_repeat_micros
    );
}

/// The fabric, with the reliable channel to the collector full once
/// `full` is set (the collector away from MPI, its channel never drained):
/// `has_room_for` says so, and a NACK sent to it anyway is counted, as a
/// send that would have waited for room inside the leaf's progress pass.
struct CollectorAway {
    fabric: FabricEndpoint,
    collector: usize,
    full: std::cell::Cell<bool>,
    nacks_into_full_channel: std::cell::Cell<u64>,
}

forward!(Endpoint for CollectorAway => fabric);
forward!(Windows for CollectorAway => fabric);
forward!(PeerReads for CollectorAway => fabric);
forward!(Datagrams for CollectorAway => fabric);

impl ReliableChannel for CollectorAway {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        if peer == self.collector && self.full.get() {
            self.nacks_into_full_channel.set(self.nacks_into_full_channel.get() + 1);
            return Ok(());
        }
        self.fabric.send_reliable(peer, message)
    }
    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        self.fabric.poll_reliable(out)
    }
    fn has_room_for(&self, peer: usize, _len: usize) -> bool {
        peer != self.collector || !self.full.get()
    }
}

/// A root that posts a bcast and computes (away from MPI) leaves the
/// channel from its leaves full of their NACKs: a leaf that goes on
/// polling its receive (MPI_Test of an ibcast) must leave its repeats out
/// rather than wait for room inside the pass, and still get every piece
/// once the root is back. Before, the repeats went into the full channel
/// (over udp: MPI_Test held 10.8 s of a root's 12 s away).
#[test]
fn a_leaf_leaves_nack_repeats_out_of_a_full_channel_to_an_away_collector() {
    const PIECE: usize = 256;
    const PIECES: usize = 47;
    let config = RmcastConfig {
        fragment_bytes: PIECE,
        timeout: NEVER,
        congestion: CongestionConfig { mode: CongestionMode::Off, ..CongestionConfig::default() },
        tail_repeat: 0,
        parity_percent: 0,
        co_roots: 0,
        ..test_config()
    };
    let fabric = FabricConfig { multicast_drop: 0.3, seed: 38, ..FabricConfig::default() };
    let [root_transport, leaf_transport]: [CollectorAway; 2] = Fabric::new(2, region_len(2, &config), fabric)
        .into_iter()
        .map(|fabric| CollectorAway { fabric, collector: 0, full: false.into(), nacks_into_full_channel: 0.into() })
        .collect::<Vec<_>>()
        .try_into()
        .unwrap_or_else(|_| panic!("two ranks"));
    let (mut root, mut leaf) = (super::ReliableMulticast::new(0, 2, 0, config), super::ReliableMulticast::new(1, 2, 0, config));
    let message: Vec<u8> = (0..PIECES * PIECE).map(|index| (index * 5 + 1) as u8).collect();
    root.send(&root_transport, &message).expect("the root's send (the window holds the message)");
    // The root is away from here on. The leaf polls; once it has NACKed,
    // the channel to the root counts as full.
    let mut got = vec![0u8; message.len()];
    let mut transfer = leaf.start_receive(0, message.len()).expect("a receive");
    let started = std::time::Instant::now();
    while leaf.stats().nack_repeats_held_back == 0 && started.elapsed() < Duration::from_secs(20) {
        assert!(!leaf.step_receive(&leaf_transport, &mut transfer, &mut got).expect("a pass"), "done without the root: no piece was lost");
        if leaf.stats().nacks_sent > 0 {
            leaf_transport.full.set(true);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let away = leaf.stats();
    assert!(away.nack_repeats_held_back > 0, "no repeat came due in 20 s: {away:?}");
    assert_eq!(leaf_transport.nacks_into_full_channel.get(), 0, "NACKs sent into the full channel: {away:?}");
    // The root is back: the channel drains, and the leaf's next repeat
    // reaches it.
    leaf_transport.full.set(false);
    let started = std::time::Instant::now();
    while !leaf.step_receive(&leaf_transport, &mut transfer, &mut got).expect("a pass") {
        assert!(started.elapsed() < Duration::from_secs(20), "the message never completed: {:?}", leaf.stats());
        root.progress(&root_transport).expect("the root's progress");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(got == message, "the leaf got the message wrong");
}
