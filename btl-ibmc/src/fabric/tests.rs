//! The test fabric is itself tested: later collectives trust its faults to
//! be the configured ones and its reliable parts to be truly reliable.
//! Every randomised test prints its seed on failure; rerun with
//! `BTL_IBMC_SEED=<seed>` to replay the same fault schedule.

use std::collections::HashMap;
use std::time::Duration;

use super::{Fabric, FabricConfig, FabricEndpoint, REORDER_SPAN};
use crate::test_support::{assert_rejects_bad_access, await_flag, pattern, run_ranks, run_with, test_seed};
use crate::transport::{Datagrams, Endpoint, Exchange, MulticastKind, PeerReads, ReliableChannel, TransportError, Windows};

#[test]
fn puts_and_flags_cross_threads_in_order_despite_random_delays() {
    const SIZE: usize = 4;
    const ROUNDS: u64 = 30;
    const SLOT: usize = 1024;
    const FLAGS_AT: usize = SIZE * SLOT;
    let data_flag = |source: usize| FLAGS_AT + source * 8;
    let ack_flag = |source: usize| FLAGS_AT + 64 + source * 8;

    let seed = test_seed();
    let config = FabricConfig { put_delay_max: Duration::from_micros(200), seed, ..FabricConfig::default() };
    let endpoints = Fabric::new(SIZE, FLAGS_AT + 128, config);
    run_with(endpoints, |me, fabric| {
        let peers = || (0..SIZE).filter(move |&peer| peer != me);
        let len = |round: u64| (round as usize * 37) % SLOT + 1;
        let tag = |source: usize, target: usize, round: u64| (source * SIZE + target) as u64 * 1000 + round;
        for round in 1..=ROUNDS {
            for peer in peers() {
                await_flag(&fabric, ack_flag(peer), round - 1, "the peer to consume the previous round");
                fabric.put(peer, me * SLOT, &pattern(tag(me, peer, round), len(round)), data_flag(me), round).unwrap();
            }
            for source in peers() {
                let flag = await_flag(&fabric, data_flag(source), round, "a peer's data");
                assert_eq!(flag, round, "seed {seed}: rank {me} saw round {flag} from rank {source} early");
                let mut got = vec![0u8; len(round)];
                fabric.read_local(source * SLOT, &mut got);
                assert!(
                    got == pattern(tag(source, me, round), len(round)),
                    "seed {seed}: rank {me} saw the flag of round {round} from rank {source} before its data"
                );
                fabric.put_flag(source, ack_flag(me), round).unwrap();
            }
        }
    });
}

#[test]
fn windows_start_zeroed_and_bad_accesses_are_rejected() {
    let endpoints = Fabric::new(3, 200, FabricConfig::default());
    for endpoint in &endpoints {
        assert_eq!((endpoint.name(), endpoint.size(), endpoint.window_len()), ("fabric", 3, 200));
        assert_eq!(endpoint.multicast_kind(), MulticastKind::Datagram);
        assert_eq!(endpoint.max_datagram(), 4096);
        assert_rejects_bad_access(endpoint);
    }
    assert!(matches!(endpoints[0].send_reliable(3, b"x"), Err(TransportError::OutOfRange { peer: 3, .. })));
    assert_eq!(endpoints[0].multicast(&[0; 4097]), Err(TransportError::TooLarge { len: 4097, max: 4096 }));
}

/// Everything one receiver took from the multicast queue, as sequence numbers.
fn drain(endpoint: &FabricEndpoint) -> Vec<u32> {
    let mut out = Vec::new();
    let mut received = Vec::new();
    while endpoint.poll_multicast(&mut out).is_some() {
        received.push(u32::from_le_bytes(out[..4].try_into().unwrap()));
    }
    received
}

fn numbered(sequence: u32) -> Vec<u8> {
    let mut datagram = pattern(u64::from(sequence), 4 + sequence as usize % 60);
    datagram[..4].copy_from_slice(&sequence.to_le_bytes());
    datagram
}

/// One sender multicasts `count` numbered datagrams, then every receiver
/// drains its queue; returns what each rank received and the counters.
fn broadcast_then_drain(config: FabricConfig, size: usize, count: u32) -> (Vec<Vec<u32>>, super::FabricStats) {
    let endpoints = Fabric::new(size, 0, config);
    for sequence in 0..count {
        endpoints[0].multicast(&numbered(sequence)).unwrap();
    }
    let received = endpoints.iter().map(drain).collect();
    (received, endpoints[0].stats())
}

#[test]
fn lossy_multicast_faults_match_the_configured_rates_and_replay_from_the_seed() {
    const SENT: u32 = 20_000;
    const RECEIVERS: u64 = 3;
    let seed = test_seed();
    let config = FabricConfig { multicast_drop: 0.3, multicast_duplicate: 0.1, multicast_reorder: 0.2, seed, ..FabricConfig::default() };
    let (received, stats) = broadcast_then_drain(config.clone(), 4, SENT);

    let copies = u64::from(SENT) * RECEIVERS;
    assert_eq!((stats.datagrams_sent, stats.copies), (u64::from(SENT), copies), "seed {seed}");
    let delivered = copies - stats.dropped + stats.duplicated;
    let rate = |count: u64, out_of: u64| count as f64 / out_of as f64;
    let drop_rate = rate(stats.dropped, copies);
    let duplicate_rate = rate(stats.duplicated, copies - stats.dropped);
    let reorder_rate = rate(stats.reordered, delivered);
    // Binomial standard deviations here are at most 0.002; allow about 6.
    assert!((drop_rate - 0.3).abs() < 0.012, "seed {seed}: drop rate {drop_rate}");
    assert!((duplicate_rate - 0.1).abs() < 0.012, "seed {seed}: duplicate rate {duplicate_rate}");
    assert!((reorder_rate - 0.2).abs() < 0.012, "seed {seed}: reorder rate {reorder_rate}");

    assert!(received[0].is_empty(), "seed {seed}: the sender received its own datagrams");
    let mut duplicates_seen = 0;
    let mut inversions = 0;
    for (rank, sequence) in received.iter().enumerate().skip(1) {
        let mut counts = HashMap::new();
        for &number in sequence {
            assert!(number < SENT, "seed {seed}: rank {rank} received a datagram nobody sent");
            *counts.entry(number).or_insert(0u32) += 1;
        }
        assert!(counts.values().all(|&n| n <= 2), "seed {seed}: rank {rank} got a datagram three times");
        duplicates_seen += counts.values().filter(|&&n| n == 2).count() as u64;
        inversions += sequence.windows(2).filter(|pair| pair[1] < pair[0]).count() as u64;
    }
    let total: u64 = received.iter().map(|r| r.len() as u64).sum();
    assert_eq!(total, delivered, "seed {seed}: received count disagrees with the counters");
    assert_eq!(stats.datagrams_received, delivered, "seed {seed}");
    // A duplicate's twin can itself be lost to nothing, so these match exactly.
    assert_eq!(duplicates_seen, stats.duplicated, "seed {seed}");
    assert!(inversions >= stats.reordered / 2, "seed {seed}: {inversions} inversions for {} reorders", stats.reordered);

    let (replayed, replayed_stats) = broadcast_then_drain(config, 4, SENT);
    assert_eq!(replayed, received, "seed {seed}: the same seed gave a different fault schedule");
    assert_eq!(replayed_stats, stats, "seed {seed}");
}

#[test]
fn reordering_stays_within_the_documented_span() {
    let seed = test_seed();
    let config = FabricConfig { multicast_reorder: 0.5, seed, ..FabricConfig::default() };
    let (received, stats) = broadcast_then_drain(config, 2, 5000);
    assert!(stats.reordered > 2000, "seed {seed}: only {} reorders", stats.reordered);
    // An overtaking copy lands at most REORDER_SPAN places early; being
    // overtaken by later copies only delays it, and only while it is among
    // the last REORDER_SPAN queued, so lateness stays within a few spans.
    let positions = received[1].iter().enumerate();
    let early = positions.clone().filter(|&(position, &number)| number as usize > position + REORDER_SPAN).count();
    assert_eq!(early, 0, "seed {seed}: datagrams overtook more than REORDER_SPAN others");
    let late = positions.filter(|&(position, &number)| (number as usize) + 4 * REORDER_SPAN < position).count();
    assert_eq!(late, 0, "seed {seed}: datagrams fell back far beyond the reorder span");
}

#[test]
fn without_drops_or_duplicates_every_datagram_arrives_exactly_once() {
    const SIZE: usize = 4;
    const PER_SENDER: u32 = 2000;
    let seed = test_seed();
    for reorder in [0.0, 0.3] {
        let config = FabricConfig { multicast_reorder: reorder, put_delay_max: Duration::ZERO, seed, ..FabricConfig::default() };
        let endpoints = Fabric::new(SIZE, 0, config);
        let received = run_with(endpoints, |me, fabric| {
            let mut out = Vec::new();
            let mut got: Vec<(u32, u32)> = Vec::new();
            let expected = (SIZE - 1) * PER_SENDER as usize;
            for sequence in 0..PER_SENDER {
                let mut datagram = sequence.to_le_bytes().to_vec();
                datagram.push(me as u8);
                fabric.multicast(&datagram).unwrap();
                while let Some(sender) = fabric.poll_multicast(&mut out) {
                    assert_eq!(sender, usize::from(out[4]), "the fabric names the datagram's sender");
                    got.push((u32::from(out[4]), u32::from_le_bytes(out[..4].try_into().unwrap())));
                }
            }
            fabric.exchange_barrier();
            while let Some(sender) = fabric.poll_multicast(&mut out) {
                assert_eq!(sender, usize::from(out[4]), "the fabric names the datagram's sender");
                got.push((u32::from(out[4]), u32::from_le_bytes(out[..4].try_into().unwrap())));
            }
            assert_eq!(got.len(), expected, "seed {seed}, reorder {reorder}: rank {me} got {} datagrams", got.len());
            got
        });
        for (me, got) in received.iter().enumerate() {
            let mut sorted = got.clone();
            sorted.sort_unstable();
            let expected: Vec<(u32, u32)> =
                (0..SIZE as u32).filter(|&s| s as usize != me).flat_map(|s| (0..PER_SENDER).map(move |q| (s, q))).collect();
            assert_eq!(sorted, expected, "seed {seed}, reorder {reorder}: rank {me} lost or duplicated datagrams");
            if reorder == 0.0 {
                for sender in 0..SIZE as u32 {
                    let from: Vec<u32> = got.iter().filter(|(s, _)| *s == sender).map(|(_, q)| *q).collect();
                    assert!(from.windows(2).all(|p| p[0] < p[1]), "rank {me}: datagrams from {sender} reordered with reorder=0");
                }
            }
        }
    }
}

#[test]
fn reliable_messages_arrive_exactly_once_in_order_under_many_threads() {
    reliable_messages_arrive_exactly_once_in_order(1500, FabricConfig::default());
}

#[test]
fn reliable_messages_arrive_exactly_once_in_order_when_delayed() {
    let config = FabricConfig { reliable_delay_max: Duration::from_micros(400), seed: test_seed(), ..FabricConfig::default() };
    reliable_messages_arrive_exactly_once_in_order(40, config);
}

#[test]
fn reliable_delay_holds_each_send_back() {
    const SENDS: u32 = 40;
    let max = Duration::from_millis(2);
    let seed = test_seed();
    let endpoints = Fabric::new(2, 0, FabricConfig { reliable_delay_max: max, seed, ..FabricConfig::default() });
    let started = std::time::Instant::now();
    for sequence in 0..SENDS {
        endpoints[0].send_reliable(1, &sequence.to_le_bytes()).unwrap();
    }
    // The delays are uniform in [0, max]: their sum is about SENDS * max / 2
    // and below a quarter of that with negligible probability. A busy
    // machine only lengthens it.
    let least = max * SENDS / 8;
    assert!(started.elapsed() >= least, "seed {seed}: {SENDS} sends took {:?}, expected at least {least:?}", started.elapsed());
    let mut out = Vec::new();
    for sequence in 0..SENDS {
        assert_eq!(endpoints[1].poll_reliable(&mut out), Some(0));
        assert_eq!(out, sequence.to_le_bytes());
    }
}

fn reliable_messages_arrive_exactly_once_in_order(per_peer: u32, config: FabricConfig) {
    const SIZE: usize = 8;
    let endpoints = Fabric::new(SIZE, 0, config);
    run_with(endpoints, |me, fabric| {
        let mut next_from = [0u32; SIZE];
        let mut out = Vec::new();
        let expected_total = (SIZE - 1) as u32 * per_peer;
        let mut received = 0;
        let take = |out: &mut Vec<u8>, received: &mut u32, next_from: &mut [u32; SIZE]| {
            while let Some(sender) = fabric.poll_reliable(out) {
                let sequence = u32::from_le_bytes(out[..4].try_into().unwrap());
                assert_eq!(sequence, next_from[sender], "rank {me}: message from {sender} lost, repeated or reordered");
                assert_eq!(out[4..], pattern((sender * SIZE + me) as u64 ^ u64::from(sequence) << 8, sequence as usize % 40)[..]);
                next_from[sender] += 1;
                *received += 1;
            }
        };
        for sequence in 0..per_peer {
            for peer in (0..SIZE).filter(|&p| p != me) {
                let mut message = sequence.to_le_bytes().to_vec();
                message.extend(pattern((me * SIZE + peer) as u64 ^ u64::from(sequence) << 8, sequence as usize % 40));
                fabric.send_reliable(peer, &message).unwrap();
            }
            take(&mut out, &mut received, &mut next_from);
        }
        let deadline = std::time::Instant::now() + crate::test_support::PATIENCE;
        while received < expected_total {
            assert!(std::time::Instant::now() < deadline, "rank {me}: only {received} of {expected_total} messages arrived");
            take(&mut out, &mut received, &mut next_from);
            std::thread::yield_now();
        }
        assert!(fabric.poll_reliable(&mut out).is_none());
        assert!(out.is_empty(), "poll_reliable must clear the buffer");
    });
}

#[test]
fn exchange_repeats_a_thousand_times_with_rank_ordered_contents() {
    const SIZE: usize = 4;
    const ROUNDS: usize = 1000;
    let endpoints = Fabric::new(SIZE, 0, FabricConfig::default());
    run_with(endpoints, |me, fabric| {
        for round in 0..ROUNDS {
            let len = round % 13 + 1;
            let tag = |rank: usize| (round * SIZE + rank) as u64;
            let mut all = vec![0u8; SIZE * len];
            fabric.allgather(&pattern(tag(me), len), &mut all).unwrap();
            for (rank, record) in all.chunks(len).enumerate() {
                assert!(record == pattern(tag(rank), len), "rank {me}, round {round}: record of rank {rank} wrong");
            }
        }
    });
}

#[test]
fn an_exchange_with_mismatched_lengths_fails_everywhere_and_the_next_one_works() {
    let endpoints = Fabric::new(3, 0, FabricConfig::default());
    run_with(endpoints, |me, fabric| {
        let mine = vec![me as u8; if me == 2 { 5 } else { 4 }];
        let mut all = vec![0u8; 3 * mine.len()];
        let error = fabric.allgather(&mine, &mut all).unwrap_err();
        assert!(matches!(&error, TransportError::Failed(why) if why.contains("rank 2 contributed 5 bytes")), "{error}");

        let mut all = [0u8; 3];
        fabric.allgather(&[me as u8], &mut all).unwrap();
        assert_eq!(all, [0, 1, 2]);
        let mut wrong_size = [0u8; 5];
        assert!(fabric.allgather(&[me as u8], &mut wrong_size).is_err());
    });
}

#[test]
fn endpoints_move_to_threads_and_report_their_ranks() {
    fn assert_send<T: Send>(_: &T) {}
    let endpoints = Fabric::new(5, 8, FabricConfig::default());
    assert_send(&endpoints[0]);
    let ranks = run_ranks(5, |rank| endpoints[rank].rank());
    assert_eq!(ranks, vec![0, 1, 2, 3, 4]);
}

#[test]
fn each_imitated_backend_offers_exactly_its_own_primitives() {
    let shared = FabricConfig { multicast_kind: MulticastKind::SharedWindow, ..FabricConfig::default() };
    let endpoints = Fabric::new(2, 128, shared);
    assert_eq!(endpoints[0].multicast_kind(), MulticastKind::SharedWindow);
    assert_eq!(endpoints[0].max_datagram(), 0);
    assert!(matches!(endpoints[0].multicast(b"x"), Err(TransportError::Unsupported(_))));
    endpoints[1].put(1, 16, &pattern(5, 40), 8, 77).unwrap();
    assert_eq!(endpoints[0].peer_flag(1, 8), Ok(77));
    let mut seen = vec![0u8; 40];
    endpoints[0].read_peer(1, 16, &mut seen).unwrap();
    assert_eq!(seen, pattern(5, 40));
    endpoints[0].read_peer(1, 128, &mut []).expect("an empty read at the end is valid");
    assert_eq!(endpoints[0].read_peer(1, 100, &mut [0; 29]), Err(TransportError::OutOfRange { peer: 1, offset: 100, len: 29 }));
    assert_eq!(endpoints[0].read_peer(1, usize::MAX, &mut [0; 2]), Err(TransportError::OutOfRange { peer: 1, offset: usize::MAX, len: 2 }));
    assert_eq!(endpoints[0].read_peer(2, 0, &mut [0; 1]), Err(TransportError::OutOfRange { peer: 2, offset: 0, len: 1 }));
    assert_eq!(endpoints[0].peer_flag(1, 128), Err(TransportError::OutOfRange { peer: 1, offset: 128, len: 8 }));
    assert!(matches!(endpoints[0].peer_flag(1, 4), Err(TransportError::Failed(why)) if why.contains("aligned")));

    for kind in [MulticastKind::Datagram, MulticastKind::None] {
        let endpoints = Fabric::new(2, 64, FabricConfig { multicast_kind: kind, ..FabricConfig::default() });
        assert!(matches!(endpoints[0].read_peer(1, 0, &mut [0; 8]), Err(TransportError::Unsupported(_))), "{kind:?}");
        assert!(matches!(endpoints[0].peer_flag(1, 0), Err(TransportError::Unsupported(_))), "{kind:?}");
    }
    let none = Fabric::new(2, 64, FabricConfig { multicast_kind: MulticastKind::None, ..FabricConfig::default() });
    assert!(matches!(none[0].multicast(b"x"), Err(TransportError::Unsupported(_))));
}

#[test]
#[should_panic(expected = "multicast_drop must be a probability")]
fn a_probability_outside_zero_to_one_is_refused() {
    Fabric::new(2, 0, FabricConfig { multicast_drop: 1.5, ..FabricConfig::default() });
}

impl FabricEndpoint {
    /// Waits until every rank has called this (one empty exchange).
    fn exchange_barrier(&self) {
        self.allgather(&[], &mut []).expect("barrier");
    }
}

#[test]
fn puts_between_nodes_are_counted_recorded_and_slower() {
    use crate::shm::NodeGroups;
    use std::time::Instant;
    const SIZE: usize = 4;
    // Round robin over two nodes: ranks 0 and 2 on one, 1 and 3 on the other.
    let nodes = NodeGroups::from_keys(&["a", "b", "a", "b"]);
    let delay = Duration::from_millis(2);
    let config = FabricConfig { nodes: Some(nodes), inter_node_put_delay: delay, ..FabricConfig::default() };
    let endpoints = Fabric::new(SIZE, 64, config);
    let started = Instant::now();
    endpoints[0].put_flag(2, 0, 1).unwrap();
    let within = started.elapsed();
    let started = Instant::now();
    endpoints[0].put(1, 0, &[7; 8], 8, 1).unwrap();
    endpoints[3].put_flag(2, 0, 1).unwrap();
    let across = started.elapsed();
    assert!(across >= 2 * delay, "two puts between nodes took {across:?}");
    assert!(within < delay, "a put within a node took {within:?}");
    let stats = endpoints[0].stats();
    assert_eq!((stats.inter_node_puts, stats.intra_node_puts), (2, 1));
    assert_eq!(endpoints[1].inter_node_pairs(), [(0, 1), (3, 2)]);
}
