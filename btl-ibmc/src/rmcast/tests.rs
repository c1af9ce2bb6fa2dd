//! Reliable multicast between threads over the test fabric (both of the
//! backends it imitates) and over real shared memory. Every run checks the
//! definition: each receiver gets every message of every root exactly once,
//! in order, byte for byte, and no piece ever lands beyond a receive
//! window. Randomised runs print their seed; rerun with `BTL_IBMC_SEED`.

use std::time::Duration;

use super::wire::{PieceHeader, encode_nack, encode_piece};
use super::{ReliableMulticast, RmcastConfig, RmcastStats, region_len};
use crate::fabric::{Fabric, FabricConfig};
use crate::shm::establish;
use crate::test_support::{pattern, run_with, test_seed};
use crate::transport::{Datagrams, MulticastKind, Transport, TransportError};
use crate::wait::WaitPolicy;

/// Bounded waits, and no spinning: ranks are threads on a small machine.
pub(super) fn test_config() -> RmcastConfig {
    RmcastConfig {
        timeout: Duration::from_millis(4),
        wait: WaitPolicy { spin_polls: 0, kernel_spin_polls: 0, stall_warning: Duration::from_secs(5), fault_timeout: None },
        give_up_after: Some(Duration::from_secs(20)),
        ..RmcastConfig::default()
    }
}

/// (root, length) of each message, in the order every rank calls them.
pub(super) type Script = Vec<(usize, usize)>;

/// Lengths around the piece size, and roots that keep changing, with runs
/// from the same root so windows fill.
pub(super) fn script(size: usize, piece: usize, messages: usize) -> Script {
    let lengths = [1, piece - 1, piece, piece + 1, 0, 3 * piece + 7, 2];
    (0..messages).map(|index| ((index / 3 + index * index) % size, lengths[index % lengths.len()])).collect()
}

pub(super) fn tag(index: usize) -> u64 {
    0x5EED_0000 + index as u64
}

/// Runs `script` on every rank of `transports` and returns each rank's
/// counters; panics naming `what` if any delivery is wrong.
pub(super) fn run_script<T: Transport + Send>(transports: Vec<T>, config: RmcastConfig, script: &Script, what: &str) -> Vec<RmcastStats> {
    let size = transports.len();
    run_with(transports, |rank, transport| play_script(rank, size, &transport, config, script, what))
}

/// One rank's part of `script`: sends its messages, checks every message
/// it receives, drains, and returns its counters; panics naming `what`.
fn play_script<T: Transport>(rank: usize, size: usize, transport: &T, config: RmcastConfig, script: &Script, what: &str) -> RmcastStats {
    let mut multicast = ReliableMulticast::new(rank, size, 0, config);
    for (index, &(root, len)) in script.iter().enumerate() {
        if rank == root {
            multicast.send(transport, &pattern(tag(index), len)).unwrap_or_else(|e| panic!("{what}: rank {rank} send {index}: {e}"));
        } else {
            let mut got = vec![0xEE; len];
            multicast.receive(transport, root, &mut got).unwrap_or_else(|e| panic!("{what}: rank {rank} receive {index}: {e}"));
            assert!(got == pattern(tag(index), len), "{what}: rank {rank} got message {index} from root {root} wrong");
        }
    }
    multicast.drain(transport).unwrap_or_else(|e| panic!("{what}: rank {rank} drain: {e}"));
    assert!(multicast.is_idle());
    multicast.stats()
}

pub(super) fn expected_deliveries(script: &Script, size: usize, piece: usize) -> u64 {
    script.iter().map(|&(_, len)| len.div_ceil(piece) as u64 * (size as u64 - 1)).sum()
}

#[test]
fn lossy_datagrams_deliver_every_message_once_in_order() {
    const PIECE: usize = 96;
    let seed = test_seed();
    // (size, window, co-roots, M, NACK, drop): each dimension's extremes.
    let cases = [
        (2, 1, 0, 1, false, 0.3),
        (2, 3, 1, 16, true, 0.3),
        (3, 4, 1, 16, true, 0.3),
        (5, 64, 2, 3, true, 0.2),
        (7, 2, 3, 16, false, 0.1),
        (6, 8, 0, 5, true, 0.3),
        (4, 16, 0, 1, true, 0.0),
    ];
    for (case, (size, window_slots, co_roots, ack_interval, nack, drop)) in cases.into_iter().enumerate() {
        let what = format!("seed {seed}, size {size}, W {window_slots}, C {co_roots}, M {ack_interval}, NACK {nack}, drop {drop}");
        let config = RmcastConfig { window_slots, co_roots, ack_interval, nack, fragment_bytes: PIECE, ..test_config() };
        let fabric = FabricConfig {
            multicast_drop: drop,
            multicast_duplicate: 0.1,
            multicast_reorder: 0.2,
            put_delay_max: Duration::from_micros(30),
            seed: seed ^ case as u64,
            ..FabricConfig::default()
        };
        let script = script(size, PIECE, 40);
        let stats = run_script(Fabric::new(size, region_len(size, &config), fabric), config, &script, &what);
        let total = RmcastStats::sum(&stats);
        assert_eq!(total.overruns, 0, "{what}: a root overran a receive window");
        assert_eq!(total.pieces_delivered, expected_deliveries(&script, size, PIECE), "{what}");
        let non_empty = script.iter().filter(|&&(_, len)| len > 0).count() as u64;
        assert_eq!((total.messages_sent, total.messages_received), (non_empty, non_empty * (size as u64 - 1)), "{what}");
        let has_leaves = size - 1 > co_roots;
        if drop >= 0.1 && has_leaves {
            assert!(total.retransmissions > 0, "{what}: losses were never repaired by retransmission?");
        }
        if nack && drop >= 0.2 && has_leaves {
            assert!(total.nacks_sent > 0 && total.nacks_served > 0, "{what}: gaps never NACKed: {total:?}");
        }
        if !nack {
            assert_eq!(total.nacks_sent, 0, "{what}");
        }
        if co_roots > 0 {
            assert!(total.forwarded > 0, "{what}: co-roots never reached reliably");
        }
        println!("{what}: {} retransmissions, {} NACKs, {} duplicates dropped", total.retransmissions, total.nacks_sent, total.duplicates_dropped);
    }
}

#[test]
fn shared_windows_carry_back_to_back_roots_without_retransmission() {
    const SLOT: usize = 200;
    let seed = test_seed();
    for (size, window_slots, ack_interval) in [(2, 1, 1), (3, 2, 16), (5, 4, 3), (8, 64, 8)] {
        let what = format!("seed {seed}, shared window, size {size}, W {window_slots}, M {ack_interval}");
        let config = RmcastConfig { window_slots, ack_interval, slot_bytes: SLOT, ..test_config() };
        let fabric = FabricConfig {
            multicast_kind: MulticastKind::SharedWindow,
            put_delay_max: Duration::from_micros(20),
            seed,
            ..FabricConfig::default()
        };
        let script = script(size, SLOT, 60);
        let stats = run_script(Fabric::new(size, region_len(size, &config), fabric), config, &script, &what);
        let total = RmcastStats::sum(&stats);
        assert_eq!((total.overruns, total.retransmissions, total.nacks_sent), (0, 0, 0), "{what}");
        assert_eq!(total.pieces_delivered, expected_deliveries(&script, size, SLOT), "{what}");
    }
}

#[test]
fn real_shared_memory_carries_the_shared_window_flavour() {
    const SIZE: usize = 4;
    let config = RmcastConfig { window_slots: 3, slot_bytes: 512, ack_interval: 2, ..test_config() };
    let len = region_len(SIZE, &config);
    let exchanges = Fabric::new(SIZE, 0, FabricConfig::default());
    let transports = run_with(exchanges, |rank, exchange| establish(&exchange, rank, SIZE, len).expect("shm"));
    assert_eq!(transports[0].multicast_kind(), MulticastKind::SharedWindow);
    let script = script(SIZE, 512, 80);
    let stats = run_script(transports, config, &script, "shm");
    assert_eq!(RmcastStats::sum(&stats).pieces_delivered, expected_deliveries(&script, SIZE, 512));
}

/// Payload moves with plain copies under the flag protocol: a copy that
/// ran after its flag, or a slot rewritten under its reader, would show
/// here as a stale piece of the previous message (every message has its
/// own pattern) or a torn one. Large messages back to back from changing
/// roots through a two-slot window reuse every slot hundreds of times.
#[test]
fn back_to_back_large_messages_over_real_shared_memory_arrive_whole_and_fresh() {
    const SIZE: usize = 3;
    const SLOT: usize = 4096;
    let config = RmcastConfig { window_slots: 2, slot_bytes: SLOT, ack_interval: 1, ..test_config() };
    let len = region_len(SIZE, &config);
    let exchanges = Fabric::new(SIZE, 0, FabricConfig::default());
    let transports = run_with(exchanges, |rank, exchange| establish(&exchange, rank, SIZE, len).expect("shm"));
    let lengths = [256 * 1024, 256 * 1024 + 5, 3 * SLOT - 1, 128 * 1024 + 4091];
    let script: Script = (0..24).map(|index| ((index / 2) % SIZE, lengths[index % lengths.len()])).collect();
    let stats = run_script(transports, config, &script, "back-to-back large over shm");
    let total = RmcastStats::sum(&stats);
    assert_eq!(total.overruns, 0);
    assert_eq!(total.pieces_delivered, expected_deliveries(&script, SIZE, SLOT));
}

/// One receiver sleeps while the root sends five windows' worth: the root
/// must stall on its full window, keep serving, and finish once the
/// sleeper wakes.
#[test]
fn a_stalled_receiver_fills_the_window_then_everyone_recovers() {
    const SIZE: usize = 4;
    const WINDOW: usize = 4;
    const SLEEPER: usize = 2;
    const STALL: Duration = Duration::from_millis(150);
    let seed = test_seed();
    for kind in [MulticastKind::Datagram, MulticastKind::SharedWindow] {
        let what = format!("seed {seed}, {kind:?}");
        let config = RmcastConfig { window_slots: WINDOW, ack_interval: 3, co_roots: 1, ..test_config() };
        let fabric = FabricConfig { multicast_kind: kind, multicast_drop: 0.1, seed, ..FabricConfig::default() };
        let messages = 5 * WINDOW;
        let stats = run_with(Fabric::new(SIZE, region_len(SIZE, &config), fabric), |rank, transport| {
            let mut multicast = ReliableMulticast::new(rank, SIZE, 0, config);
            if rank == SLEEPER {
                std::thread::sleep(STALL);
            }
            for index in 0..messages {
                if rank == 0 {
                    multicast.send(&transport, &pattern(tag(index), 100)).unwrap();
                } else {
                    let mut got = vec![0; 100];
                    multicast.receive(&transport, 0, &mut got).unwrap_or_else(|e| panic!("{what}: rank {rank}: {e}"));
                    assert!(got == pattern(tag(index), 100), "{what}: rank {rank} message {index}");
                }
            }
            multicast.drain(&transport).unwrap();
            multicast.stats()
        });
        assert!(stats[0].window_full_stalls >= 1, "{what}: the root never found its window full: {:?}", stats[0]);
        assert_eq!(RmcastStats::sum(&stats).overruns, 0, "{what}");
        if kind == MulticastKind::Datagram {
            // The sleeper's collector resent to it while it slept.
            assert!(RmcastStats::sum(&stats).retransmissions > 0, "{what}");
        }
    }
}

#[test]
fn a_root_that_gives_up_settling_or_draining_names_the_receiver_that_never_acknowledged() {
    const SIZE: usize = 3;
    const SILENT: usize = 2;
    for kind in [MulticastKind::Datagram, MulticastKind::SharedWindow] {
        let config = RmcastConfig { give_up_after: Some(Duration::from_millis(300)), ..test_config() };
        let fabric = FabricConfig { multicast_kind: kind, ..FabricConfig::default() };
        // The root settles only once rank 1's ACK is written, so that on a
        // busy machine rank 1 cannot be among the missing.
        let acknowledged = std::sync::Barrier::new(2);
        let errors = run_with(Fabric::new(SIZE, region_len(SIZE, &config), fabric), |rank, transport| {
            let mut multicast = ReliableMulticast::new(rank, SIZE, 0, config);
            match rank {
                0 => {
                    multicast.send(&transport, &[7; 10]).unwrap();
                    acknowledged.wait();
                    Some([multicast.settle(&transport, true).unwrap_err(), multicast.drain(&transport).unwrap_err()])
                }
                SILENT => None,
                _ => {
                    let mut got = [0; 10];
                    multicast.receive(&transport, 0, &mut got).unwrap();
                    multicast.settle(&transport, false).unwrap();
                    acknowledged.wait();
                    None
                }
            }
        });
        for error in errors[0].clone().unwrap() {
            assert!(error.to_string().contains(&format!("below: [({SILENT}, 0)]")), "{kind:?}: {error}");
        }
    }
}

#[test]
fn unusable_transports_and_mismatched_messages_are_errors() {
    let config = test_config();
    let none = FabricConfig { multicast_kind: MulticastKind::None, ..FabricConfig::default() };
    let endpoints = Fabric::new(2, region_len(2, &config), none);
    assert!(!ReliableMulticast::supported_by(&endpoints[0]));
    let mut multicast = ReliableMulticast::new(0, 2, 0, config);
    assert!(matches!(multicast.send(&endpoints[0], b"x"), Err(TransportError::Unsupported(_))));

    let endpoints = Fabric::new(2, region_len(2, &config) - 8, FabricConfig::default());
    let mut multicast = ReliableMulticast::new(0, 2, 0, config);
    assert!(matches!(multicast.send(&endpoints[0], b"x"), Err(TransportError::OutOfRange { .. })));
    let mut wrong_rank = ReliableMulticast::new(1, 2, 0, config);
    assert!(matches!(wrong_rank.progress(&endpoints[0]), Err(TransportError::Failed(_))));
    assert!(matches!(multicast.receive(&endpoints[0], 0, &mut [0]), Err(TransportError::Failed(_))), "from itself");
    assert!(matches!(multicast.receive(&endpoints[0], 2, &mut [0]), Err(TransportError::Failed(_))), "from beyond");

    let tiny = FabricConfig { max_datagram: 32, ..FabricConfig::default() };
    let endpoints = Fabric::new(2, region_len(2, &config), tiny);
    assert!(matches!(ReliableMulticast::new(0, 2, 0, config).send(&endpoints[0], b"x"), Err(TransportError::TooLarge { .. })));

    for kind in [MulticastKind::Datagram, MulticastKind::SharedWindow] {
        let fabric = FabricConfig { multicast_kind: kind, ..FabricConfig::default() };
        let errors = run_with(Fabric::new(2, region_len(2, &config), fabric), |rank, transport| {
            let mut multicast = ReliableMulticast::new(rank, 2, 0, config);
            if rank == 0 {
                multicast.send(&transport, &[1; 10]).unwrap();
                None
            } else {
                Some(multicast.receive(&transport, 0, &mut [0; 9]).unwrap_err())
            }
        });
        let error = errors[1].clone().unwrap();
        assert!(error.to_string().contains("disagrees on the message"), "{kind:?}: {error}");
    }
}

#[test]
fn a_piece_beyond_the_receive_window_is_counted_as_an_overrun() {
    let config = RmcastConfig { window_slots: 4, ..test_config() };
    let endpoints = Fabric::new(2, region_len(2, &config), FabricConfig::default());
    let nonce = endpoints[0].multicast_nonce();
    let mut forged = Vec::new();
    for seq in [4, 9, 3] {
        encode_piece(PieceHeader { root: 0, nonce, seq, message_len: 1, offset: 0 }, &[7], &mut forged);
        endpoints[0].multicast(&forged).unwrap();
    }
    let mut receiver = ReliableMulticast::new(1, 2, 0, config);
    receiver.progress(&endpoints[1]).unwrap();
    assert_eq!(receiver.stats().overruns, 2, "pieces 4 and 9 lie beyond [0, 4)");
    assert_eq!(receiver.stats().duplicates_dropped, 0);
    assert_eq!(receiver.stats().frames_rejected, 0, "genuine pieces, only misplaced");
}

/// A copy of a piece already delivered, or one far beyond the window,
/// is dropped on the stream's counts before it can touch the slots:
/// neither may make another root's stream give its slots back. Rank 5
/// hears one piece from each of roots 0-4 (one more than `KEPT_RINGS`, so
/// root 0's drained stream gave its slots to root 4's), then a copy of
/// root 0's piece and a piece of root 0 beyond its window arrive.
#[test]
fn a_duplicate_or_stale_piece_takes_no_slots_from_another_stream() {
    const SIZE: usize = 6;
    const ME: usize = SIZE - 1;
    let config = RmcastConfig { window_slots: 4, co_roots: 0, ..test_config() };
    let endpoints = Fabric::new(SIZE, region_len(SIZE, &config), FabricConfig::default());
    let nonce = endpoints[0].multicast_nonce();
    let piece = |root: usize, seq: u64| {
        let mut frame = Vec::new();
        encode_piece(PieceHeader { root, nonce, seq, message_len: 1, offset: 0 }, &[root as u8], &mut frame);
        frame
    };
    let mut receiver = ReliableMulticast::new(ME, SIZE, 0, config);
    for root in 0..ME {
        endpoints[root].multicast(&piece(root, 0)).unwrap();
        let mut got = [0xEE];
        receiver.receive(&endpoints[ME], root, &mut got).unwrap();
        assert_eq!(got, [root as u8]);
    }
    let kept = super::datagram::KEPT_RINGS;
    assert_eq!(receiver.streams_holding_slots(), kept, "roots 1-4 hold slots, root 0 gave its back");
    endpoints[0].multicast(&piece(0, 0)).unwrap();
    endpoints[0].multicast(&piece(0, 1_000)).unwrap();
    receiver.progress(&endpoints[ME]).unwrap();
    let stats = receiver.stats();
    assert_eq!((stats.duplicates_dropped, stats.overruns), (1, 1), "{stats:?}");
    assert_eq!(receiver.streams_holding_slots(), kept, "a dropped piece made a stream give its slots back");
    assert_eq!(receiver.receive_rings_made(), kept);
}

/// Traffic that reaches a rank but is not its communicator's: another
/// job's or user's frames on the same group (their own nonce), frames put
/// on the group or passed on by a rank that does not carry them, broken
/// bytes, control frames where none may travel. Every receiver finds them
/// queued before the root's genuine pieces, so a forged piece 0 arrives
/// first. Each must be dropped and counted, none may fail a call, and
/// every receiver must get the root's bytes.
#[test]
fn forged_foreign_and_malformed_frames_are_dropped_counted_and_never_delivered() {
    const PIECE: usize = 64;
    const SIZE: usize = 4;
    // One co-root: rank 1, fed by the root; leaf 2 is the root's, leaf 3 rank 1's.
    let config = RmcastConfig { co_roots: 1, fragment_bytes: PIECE, nack: true, ..test_config() };
    let endpoints = Fabric::new(SIZE, region_len(SIZE, &config), FabricConfig::default());
    let nonce = endpoints[0].multicast_nonce();
    let genuine = pattern(tag(1), 3 * PIECE);
    let forged_bytes = vec![0xF0; PIECE];
    let piece = |root: usize, nonce: u64, seq: u64| {
        let mut frame = Vec::new();
        encode_piece(PieceHeader { root, nonce, seq, message_len: genuine.len() as u64, offset: seq * PIECE as u64 }, &forged_bytes, &mut frame);
        frame
    };
    let stranger = nonce ^ 0x5A5A;
    let non_carrier = [usize::MAX, 2, 3, 2];
    let mut expected_rejections = [0u64; SIZE];
    for receiver in 1..SIZE {
        let impostor = if receiver == 2 { 3 } else { 2 };
        let datagrams: Vec<(usize, Vec<u8>)> = vec![
            (0, piece(0, stranger, 0)),                            // another communicator's piece 0, first in line
            (0, piece(0, stranger, 1_000_000)),                    // and one far beyond the window
            (impostor, piece(0, nonce, 0)),                        // root 0's piece multicast by another rank
            (0, piece(0, nonce, 0)[..20].to_vec()),                // truncated
            (0, vec![0xA5; 64]),                                   // garbage
            (0, Vec::new()),                                       // empty
            (0, piece(receiver, nonce, 0)),                        // claims this rank as its root
            (0, piece(SIZE + 3, nonce, 0)),                        // claims a root beyond the communicator
            (0, encode_nack(0, nonce, 0, 2).to_vec()),             // a NACK by datagram
        ];
        for (sender, datagram) in &datagrams {
            endpoints[0].inject_datagram(receiver, *sender, datagram);
        }
        // Over the reliable channel, root 0's piece from a rank that does not carry it here.
        endpoints[0].inject_reliable(receiver, non_carrier[receiver], &piece(0, nonce, 0));
        expected_rejections[receiver] = datagrams.len() as u64 + 1;
    }
    // At the root: a NACK from a rank that is not its member (leaf 3 is
    // rank 1's), and one with another nonce.
    endpoints[0].inject_reliable(0, 3, &encode_nack(0, nonce, 0, 3));
    endpoints[0].inject_reliable(0, 2, &encode_nack(0, stranger, 0, 3));
    expected_rejections[0] = 2;

    let results = run_with(endpoints, |rank, transport| {
        let mut multicast = ReliableMulticast::new(rank, SIZE, 0, config);
        let mut got = genuine.clone();
        let outcome = if rank == 0 {
            multicast.send(&transport, &genuine)
        } else {
            got.fill(0xEE);
            multicast.receive(&transport, 0, &mut got)
        };
        let drained = multicast.drain(&transport);
        (outcome, drained, got, multicast.stats())
    });
    for (rank, (outcome, drained, got, _)) in results.iter().enumerate() {
        assert!(*got == genuine, "rank {rank}: delivered bytes that are not the root's");
        assert_eq!(*outcome, Ok(()), "rank {rank}: a forged frame failed the call");
        assert_eq!(*drained, Ok(()), "rank {rank}: drain");
    }
    for (rank, (_, _, _, stats)) in results.into_iter().enumerate() {
        assert_eq!(stats.frames_rejected, expected_rejections[rank], "rank {rank}: {stats:?}");
        assert_eq!(stats.overruns, 0, "rank {rank}: a stranger's piece counted as an overrun");
        if rank != 0 {
            assert_eq!(stats.pieces_delivered, 3, "rank {rank}: {stats:?}");
        }
    }
}

#[test]
fn progress_alone_serves_a_root_that_has_returned() {
    // The root sends and never calls again except `progress`, as from
    // Open MPI's progress engine; the receivers lose half the multicast.
    let config = RmcastConfig { window_slots: 64, ack_interval: 4, nack: false, fragment_bytes: 64, ..test_config() };
    let fabric = FabricConfig { multicast_drop: 0.5, seed: test_seed(), ..FabricConfig::default() };
    let messages = 30;
    let stats = run_with(Fabric::new(3, region_len(3, &config), fabric), |rank, transport| {
        let mut multicast = ReliableMulticast::new(rank, 3, 0, config);
        if rank == 0 {
            for index in 0..messages {
                multicast.send(&transport, &pattern(tag(index), 64)).unwrap();
            }
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while !multicast.is_idle() {
                assert!(std::time::Instant::now() < deadline, "receivers never acknowledged");
                multicast.progress(&transport).unwrap();
                std::thread::yield_now();
            }
        } else {
            for index in 0..messages {
                let mut got = vec![0; 64];
                multicast.receive(&transport, 0, &mut got).unwrap();
                assert!(got == pattern(tag(index), 64));
            }
            multicast.drain(&transport).unwrap();
        }
        multicast.stats()
    });
    assert!(stats[0].retransmissions > 0 && stats[0].window_full_stalls == 0, "{:?}", stats[0]);
}

/// Issue 9, item 1: every non-root is a co-root and all share one node,
/// so a piece reaching co-root A is forwarded over A's shared-memory ring
/// to co-root B while B forwards to A. With bounded rings and senders that
/// only wait for room, both block for good and the roots with them; a
/// sender facing a full ring must take in its own arrivals meanwhile.
#[test]
fn co_roots_on_one_node_forward_to_each_other_over_full_rings() {
    use crate::fabric::{FabricWithNodeRings, run_ranks_watched};
    use crate::shm::NodeGroups;

    const SIZE: usize = 4;
    const PIECE: usize = 256;
    let seed = test_seed();
    let config = RmcastConfig { window_slots: 64, co_roots: 3, ack_interval: 8, fragment_bytes: PIECE, ..test_config() };
    let fabric = FabricConfig { multicast_drop: 0.05, multicast_reorder: 0.1, seed, ..FabricConfig::default() };
    let endpoints = Fabric::new(SIZE, region_len(SIZE, &config), fabric);
    let groups = NodeGroups::single(SIZE);
    let transports = run_with(endpoints, |rank, endpoint| {
        FabricWithNodeRings::establish(endpoint, &groups).unwrap_or_else(|e| panic!("rank {rank}: {e}"))
    });
    // Roots alternate between 0 and 2, each message many pieces long, so
    // forwards pile up faster than a ring of 16 slots holds them.
    let script: Script = (0..40).map(|index| (if index % 2 == 0 { 0 } else { 2 }, 24 * PIECE + index)).collect();
    let what = format!("seed {seed}, 4 ranks on one node, 3 co-roots, roots alternating 0 and 2");
    let stats = run_ranks_watched(transports, Duration::from_secs(60), move |rank, transport| {
        play_script(rank, SIZE, &transport, config, &script, &what)
    });
    let total = RmcastStats::sum(&stats);
    assert!(total.forwarded > 0, "co-roots never reached reliably: {total:?}");
    assert_eq!(total.overruns, 0);
}

/// Issue 33, item 5: each of 64 roots bcasts in turn, twice over (the
/// second round finds every root's stream where the first left it, its
/// slots lent to others meanwhile), over a lossy fabric and through
/// co-roots. Every rank drains and meets the others between bcasts, so
/// no stream is in flight when the next starts; each rank's receive
/// slots (up to W frames a ring) then stay `KEPT_RINGS` rings: before,
/// every root heard cost one for good.
#[test]
fn receive_memory_stays_bounded_when_64_roots_bcast_in_turn() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const SIZE: usize = 65;
    const PIECE: usize = 64;
    let seed = test_seed();
    let config = RmcastConfig { co_roots: 2, nack: true, fragment_bytes: PIECE, ..test_config() };
    let fabric = FabricConfig { multicast_drop: 0.05, seed, ..FabricConfig::default() };
    let lengths = [3 * PIECE + 5, PIECE - 1];
    let script: Script = (0..2 * SIZE).map(|index| (index % SIZE, lengths[index / SIZE])).collect();
    let arrived = AtomicUsize::new(0);
    let rings = run_with(Fabric::new(SIZE, region_len(SIZE, &config), fabric), |rank, transport| {
        let mut multicast = ReliableMulticast::new(rank, SIZE, 0, config);
        for (index, &(root, len)) in script.iter().enumerate() {
            if rank == root {
                multicast.send(&transport, &pattern(tag(index), len)).unwrap_or_else(|e| panic!("seed {seed}: rank {rank} send {index}: {e}"));
            } else {
                let mut got = vec![0xEE; len];
                multicast.receive(&transport, root, &mut got).unwrap_or_else(|e| panic!("seed {seed}: rank {rank} receive {index}: {e}"));
                assert!(got == pattern(tag(index), len), "seed {seed}: rank {rank} got message {index} from root {root} wrong");
            }
            multicast.drain(&transport).unwrap_or_else(|e| panic!("seed {seed}: rank {rank} drain {index}: {e}"));
            // Meet the others, serving them meanwhile (a late rank may still need this one).
            arrived.fetch_add(1, Ordering::AcqRel);
            while arrived.load(Ordering::Acquire) < (index + 1) * SIZE {
                multicast.progress(&transport).unwrap_or_else(|e| panic!("seed {seed}: rank {rank} progress {index}: {e}"));
                std::thread::yield_now();
            }
        }
        multicast.receive_rings_made()
    });
    println!("seed {seed}: receive rings made per rank, 64 roots heard: {rings:?}");
    assert!(rings.iter().all(|&made| (1..=super::datagram::KEPT_RINGS).contains(&made)), "seed {seed}: receive rings made per rank, 64 roots heard: {rings:?}");
}
