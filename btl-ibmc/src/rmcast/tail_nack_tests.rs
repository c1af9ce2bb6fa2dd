//! The tail NACK end to end (issue 36). Every receiver loses every
//! multicast of the last pieces of every message (the originals, the
//! copies of the tail repeat and the multicast repairs): nothing a
//! receiver gets by multicast after them reveals the hole. Only what comes
//! over the reliable channel (forwards to co-roots, repairs) gets through.
//! The last message of the script has no message after it at all, so its
//! receivers have either the tail NACK or their collector's timeout.
//!
//! With the tail NACK and a collector timeout of ten minutes, every
//! message arrives whole and the collector's timer never fires; without
//! it (the rule before), the same script completes only through the
//! collector's timer, and with the ten-minute timeout it gives up after
//! the test's 20 s.

use std::time::Duration;

use super::config::{CongestionConfig, CongestionMode};
use super::tests::{Script, expected_deliveries, run_script, test_config};
use super::{RmcastConfig, RmcastStats, region_len};
use crate::fabric::{Fabric, FabricConfig, FabricEndpoint};
use crate::transport::{Datagrams, MulticastKind, ReliableChannel, TransportError, forward};

const PIECE: usize = 64;
const NEVER: Duration = Duration::from_secs(600);
/// The kind byte of a piece frame, and where its header's message length
/// and offset sit (`wire`).
const PIECE_KIND: u8 = 1;
const MESSAGE_LEN_AT: usize = 24;
const OFFSET_AT: usize = 32;

/// A receiver that loses every multicast of the last `lost_tail` pieces
/// of every message.
struct TailLost {
    fabric: FabricEndpoint,
    lost_tail: u64,
}

impl TailLost {
    fn is_lost_tail(&self, frame: &[u8]) -> bool {
        let word = |at: usize| frame.get(at..at + 8).map(|bytes| u64::from_le_bytes(bytes.try_into().expect("8 bytes")));
        match (frame.first(), word(MESSAGE_LEN_AT), word(OFFSET_AT)) {
            (Some(&PIECE_KIND), Some(len), Some(offset)) => len - offset <= self.lost_tail * PIECE as u64,
            _ => false,
        }
    }
}

forward!(Endpoint for TailLost => fabric);
forward!(Windows for TailLost => fabric);
forward!(PeerReads for TailLost => fabric);

impl Datagrams for TailLost {
    fn multicast_kind(&self) -> MulticastKind {
        self.fabric.multicast_kind()
    }
    fn max_datagram(&self) -> usize {
        self.fabric.max_datagram()
    }
    fn multicast(&self, datagram: &[u8]) -> Result<(), TransportError> {
        self.fabric.multicast(datagram)
    }
    fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize> {
        loop {
            let sender = self.fabric.poll_multicast(out)?;
            if !self.is_lost_tail(out) {
                return Some(sender);
            }
        }
    }
    fn multicast_nonce(&self) -> u64 {
        self.fabric.multicast_nonce()
    }
}

impl ReliableChannel for TailLost {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        self.fabric.send_reliable(peer, message)
    }
    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        self.fabric.poll_reliable(out)
    }
}

/// Roots taking turns, every message longer than the lost tail (a
/// message lost whole shows a leaf nothing of it, and the tail NACK waits
/// for a piece: that case is the collector's).
fn script(size: usize, lost_tail: usize) -> Script {
    let lengths = [(lost_tail + 1) * PIECE, (lost_tail + 3) * PIECE + 7, (lost_tail + 1) * PIECE + 1];
    (0..9).map(|index| (index % size, lengths[index % lengths.len()])).collect()
}

fn run(size: usize, co_roots: usize, lost_tail: usize, mode: CongestionMode, tail_nack: bool, timeout: Duration) -> (Script, RmcastStats) {
    let config = RmcastConfig {
        fragment_bytes: PIECE,
        co_roots,
        tail_nack,
        timeout,
        // The leaf's RTO before its first NACK sample is the explicit-ACK
        // delay (a quarter of the timeout); its tail NACK waits at most
        // this ceiling.
        congestion: CongestionConfig { mode, rto_ceiling: Duration::from_millis(10), ..CongestionConfig::default() },
        ..test_config()
    };
    let script = script(size, lost_tail);
    let what = format!(
        "size {size}, {co_roots} co-root(s), last {lost_tail} piece(s) lost, congestion {mode:?}, tail NACK {tail_nack}, timeout {timeout:?}"
    );
    let transports = Fabric::new(size, region_len(size, &config), FabricConfig::default())
        .into_iter()
        .map(|fabric| TailLost { fabric, lost_tail: lost_tail as u64 })
        .collect();
    let total = RmcastStats::sum(&run_script(transports, config, &script, &what));
    assert_eq!(total.pieces_delivered, expected_deliveries(&script, size, PIECE), "{what}");
    assert_eq!(total.overruns, 0, "{what}");
    println!(
        "{what}: {} tail NACKs, {} first NACKs, {} repeated, {} timer bursts, {} retransmissions",
        total.tail_nacks, total.nack_first_asks, total.nacks_repeated, total.timeout_resends, total.retransmissions
    );
    (script, total)
}

#[test]
fn a_tail_lost_with_its_copy_is_nacked_by_the_leaf_not_left_to_the_timeout() {
    for (size, co_roots, lost_tail) in [(2, 0, 1), (3, 0, 2), (5, 0, 1), (6, 2, 2)] {
        for mode in [CongestionMode::Off, CongestionMode::On] {
            let (script, total) = run(size, co_roots, lost_tail, mode, true, NEVER);
            let what = format!("size {size}, {co_roots} co-root(s), last {lost_tail} lost, congestion {mode:?}");
            assert_eq!(total.timeout_resends, 0, "{what}: the collector's timer fired: {total:?}");
            // The last message's tail is revealed by nothing: each of its
            // root's leaves NACKed it as a tail.
            let leaves = (size - 1 - co_roots) as u64;
            assert!(total.tail_nacks >= leaves, "{what}: {} tail NACKs for {leaves} leaves: {total:?}", total.tail_nacks);
            assert!(total.tail_nacks <= script.len() as u64 * leaves, "{what}: more than one tail NACK per message and leaf: {total:?}");
        }
    }
}

/// The same losses with the tail NACK off: only the collector's timer
/// (here its 4 ms) repairs the tails, which is what a lost tail and copy
/// waited for before.
#[test]
fn without_the_tail_nack_the_same_tails_wait_for_the_collectors_timer() {
    let (_, total) = run(3, 0, 2, CongestionMode::Off, false, test_config().timeout);
    assert_eq!(total.tail_nacks, 0, "{total:?}");
    assert!(total.timeout_resends > 0, "{total:?}");
}
