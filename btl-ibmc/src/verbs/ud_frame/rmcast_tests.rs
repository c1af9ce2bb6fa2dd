//! Reliable multicast over sealed UD datagrams, in process: the test
//! fabric's lossy multicast carries `UdSeal`'s datagrams as verbs' group
//! does (every send sealed under a fresh counter, every arrival opened and
//! its counter taken into the sender's replay window before rmcast sees
//! the body), under each protection, with loss, duplication and
//! reordering. Every message is checked byte for byte at every receiver,
//! and every run is bounded (`give_up_after`): a piece never repaired
//! fails the test instead of hanging it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{DATAGRAM_HEADER, Dropped, UdSeal, claimed, max_body};
use crate::fabric::{Fabric, FabricConfig, FabricEndpoint};
use crate::poison::lock;
use crate::rmcast::{CongestionConfig, CongestionMode, ReliableMulticast, RmcastConfig, RmcastStats, region_len};
use crate::seal::{KEY_BYTES, Protection, ReplayWindow};
use crate::test_support::{pattern, run_with, test_seed};
use crate::transport::{Datagrams, Endpoint, MulticastKind, PeerReads, ReliableChannel, TransportError, Windows};
use crate::wait::WaitPolicy;

const COMMUNICATOR: u32 = 0x0C0D_0E0F;
/// Soft-RoCE's path MTU at a 1500-byte Ethernet is 1024; a smaller one
/// cuts the messages into more pieces, hence more losses to repair.
const MTU: usize = 256;

/// One rank's view of the group: the fabric's multicast carries sealed
/// datagrams; the reliable channel and windows are the fabric's own (RC
/// queue pairs and RDMA writes are not sealed).
struct SealedGroup {
    fabric: FabricEndpoint,
    seal: UdSeal,
    /// Indexed by rank, as `UdMulticast`'s.
    replay: Mutex<Vec<ReplayWindow>>,
    unauthenticated: AtomicU64,
    replayed: AtomicU64,
}

impl SealedGroup {
    fn over(fabric: Vec<FabricEndpoint>, protection: Protection, job_nonce: u64) -> Vec<SealedGroup> {
        let key = [0x5A; KEY_BYTES];
        let size = fabric.len();
        fabric
            .into_iter()
            .enumerate()
            .map(|(rank, fabric)| SealedGroup {
                fabric,
                seal: UdSeal::new(protection, &key, COMMUNICATOR, rank as u32, job_nonce),
                replay: Mutex::new((0..size).map(|_| ReplayWindow::new()).collect()),
                unauthenticated: AtomicU64::new(0),
                replayed: AtomicU64::new(0),
            })
            .collect()
    }
}

impl Endpoint for SealedGroup {
    fn name(&self) -> &'static str {
        // What rmcast keys its defaults on (no congestion control).
        "verbs"
    }

    fn rank(&self) -> usize {
        self.fabric.rank()
    }

    fn size(&self) -> usize {
        self.fabric.size()
    }

    fn progress(&self) {}
}

impl Windows for SealedGroup {
    fn window_len(&self) -> usize {
        self.fabric.window_len()
    }

    fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError> {
        self.fabric.put(peer, offset, data, flag_offset, flag)
    }

    fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), TransportError> {
        self.fabric.put_flag(peer, flag_offset, value)
    }

    fn local_flag(&self, flag_offset: usize) -> u64 {
        self.fabric.local_flag(flag_offset)
    }

    fn set_local_flag(&self, flag_offset: usize, value: u64) {
        self.fabric.set_local_flag(flag_offset, value)
    }

    fn read_local(&self, offset: usize, out: &mut [u8]) {
        self.fabric.read_local(offset, out)
    }
}

impl Datagrams for SealedGroup {
    fn multicast_kind(&self) -> MulticastKind {
        MulticastKind::Datagram
    }

    fn max_datagram(&self) -> usize {
        max_body(self.seal.protection(), MTU)
    }

    fn multicast(&self, body: &[u8]) -> Result<(), TransportError> {
        let max = self.max_datagram();
        if body.len() > max {
            return Err(TransportError::TooLarge { len: body.len(), max });
        }
        let mut datagram = Vec::with_capacity(MTU);
        self.seal.encode(body, &mut datagram);
        self.fabric.multicast(&datagram)
    }

    /// As `UdMulticast::take_datagram`, the fabric standing in for the
    /// adapter's view of the source.
    fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize> {
        loop {
            let sender = self.fabric.poll_multicast(out)?;
            assert!(out.len() <= MTU && out.len() >= DATAGRAM_HEADER, "a {}-byte datagram on a {MTU}-byte MTU", out.len());
            assert_eq!(claimed(out), Some((COMMUNICATOR, sender as u32)), "the fabric vouches for the sender the header names");
            let counted = match self.seal.take_body(out, &mut lock(&self.replay)[sender]) {
                Ok(()) => return Some(sender),
                Err(Dropped::Replayed) => &self.replayed,
                Err(Dropped::Unauthenticated | Dropped::WrongJob) => &self.unauthenticated,
            };
            counted.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn multicast_nonce(&self) -> u64 {
        self.fabric.multicast_nonce()
    }
}

impl ReliableChannel for SealedGroup {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        self.fabric.send_reliable(peer, message)
    }

    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        self.fabric.poll_reliable(out)
    }
}

impl PeerReads for SealedGroup {}

/// What a run counted, summed over the ranks.
struct Outcome {
    stats: RmcastStats,
    unauthenticated: u64,
    replayed: u64,
    /// Copies the fabric delivered twice, by the time the last rank ended.
    duplicated: u64,
}

/// (root, length) of each bcast, the same on every rank: roots in turn
/// and runs from one root, lengths around the piece and a few windows.
fn script(size: usize, piece: usize, window: usize) -> Vec<(usize, usize)> {
    let lengths = [1, piece - 1, piece, piece + 1, 3 * piece + 7, 2 * window * piece + 5, 17];
    (0..42).map(|index| ((index / 2 + index * 3) % size, lengths[index % lengths.len()])).collect()
}

/// Runs `script` over `groups`; panics naming `what` on a wrong byte, an
/// error or a wait that gives up.
fn run(groups: Vec<SealedGroup>, config: RmcastConfig, script: &[(usize, usize)], what: &str) -> Outcome {
    let size = groups.len();
    let per_rank = run_with(groups, |rank, group| {
        let mut multicast = ReliableMulticast::new(rank, size, 0, config);
        for (index, &(root, len)) in script.iter().enumerate() {
            let tag = 0xB0_0000 + index as u64;
            if rank == root {
                multicast.send(&group, &pattern(tag, len)).unwrap_or_else(|e| panic!("{what}: rank {rank}, bcast {index}: {e}"));
            } else {
                let mut got = vec![0xEE; len];
                multicast.receive(&group, root, &mut got).unwrap_or_else(|e| panic!("{what}: rank {rank}, bcast {index} from {root}: {e}"));
                assert!(got == pattern(tag, len), "{what}: rank {rank} got bcast {index} from root {root} wrong");
            }
        }
        multicast.drain(&group).unwrap_or_else(|e| panic!("{what}: rank {rank} drain: {e}"));
        let counted = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        (multicast.stats(), counted(&group.unauthenticated), counted(&group.replayed), group.fabric.stats().duplicated)
    });
    let stats = RmcastStats::sum(&per_rank.iter().map(|(stats, ..)| *stats).collect::<Vec<_>>());
    Outcome {
        stats,
        unauthenticated: per_rank.iter().map(|r| r.1).sum(),
        replayed: per_rank.iter().map(|r| r.2).sum(),
        duplicated: per_rank.iter().map(|r| r.3).max().unwrap_or(0),
    }
}

#[test]
fn bcasts_over_sealed_lossy_datagrams_arrive_whole_under_every_protection() {
    let seed = test_seed();
    // (ranks, co-roots, window, congestion control): a root alone with
    // its leaf, a co-root and leaves, two co-roots; verbs runs without
    // congestion control, with it a root multicasts the NACKed pieces again.
    let shapes = [(2, 0, 16, CongestionMode::Auto), (4, 1, 8, CongestionMode::Auto), (6, 2, 32, CongestionMode::Auto), (5, 0, 16, CongestionMode::On)];
    for protection in Protection::ALL {
        for (case, &(size, co_roots, window_slots, mode)) in shapes.iter().enumerate() {
            let what = format!("seed {seed}, {protection:?}, {size} ranks, {co_roots} co-roots, W {window_slots}, congestion {mode:?}");
            let config = RmcastConfig {
                window_slots,
                co_roots,
                ack_interval: 4,
                timeout: Duration::from_millis(4),
                wait: WaitPolicy { spin_polls: 0, kernel_spin_polls: 0, stall_warning: Duration::from_secs(5), fault_timeout: None },
                give_up_after: Some(Duration::from_secs(30)),
                congestion: CongestionConfig { mode, ..CongestionConfig::default() },
                ..RmcastConfig::default()
            };
            let fabric = FabricConfig {
                multicast_drop: 0.15,
                multicast_duplicate: 0.1,
                multicast_reorder: 0.2,
                max_datagram: MTU,
                put_delay_max: Duration::from_micros(30),
                reliable_delay_max: Duration::from_micros(200),
                seed: seed ^ case as u64,
                ..FabricConfig::default()
            };
            let endpoints = Fabric::new(size, region_len(size, &config), fabric);
            let nonce = endpoints[0].multicast_nonce();
            let groups = SealedGroup::over(endpoints, protection, nonce);
            let piece = groups[0].max_datagram() - crate::rmcast::repair::PIECE_HEADER_BYTES;
            let script = script(size, piece, window_slots);
            let outcome = run(groups, config, &script, &what);
            let expected: u64 = script.iter().map(|&(_, len)| len.div_ceil(piece) as u64 * (size as u64 - 1)).sum();
            assert_eq!(outcome.stats.pieces_delivered, expected, "{what}");
            assert_eq!(outcome.stats.overruns, 0, "{what}");
            assert_eq!(outcome.unauthenticated, 0, "{what}: genuine datagrams failed to open");
            // The fabric's duplicates carry the counter of their original,
            // and are the only datagrams that do (some may be left unread).
            let duplicated = outcome.duplicated;
            assert_eq!(outcome.replayed > 0, protection != Protection::None, "{what}: {} replays dropped", outcome.replayed);
            assert!(outcome.replayed <= duplicated, "{what}: {} replays dropped, the fabric duplicated {duplicated}", outcome.replayed);
            assert!(outcome.stats.retransmissions + outcome.stats.nacks_sent > 0, "{what}: 15 % loss never repaired?");
            println!(
                "{what}: {} pieces delivered, {} NACKs, {} retransmissions, {} replays dropped",
                outcome.stats.pieces_delivered, outcome.stats.nacks_sent, outcome.stats.retransmissions, outcome.replayed
            );
        }
    }
}
