//! The two-level bcast over the in-process fabric with ranks grouped into
//! nodes of uneven sizes (1, 2 and 7 ranks, in several orders), by round
//! robin, all on one node and one per node. Two imitations: a network
//! (lossy, duplicating, reordering datagram multicast among the leaders;
//! within nodes the put tree, since that fabric has no shared windows) and
//! shared memory (shared windows at both levels, as `coll_rdma_transport=shm`
//! with pretended nodes). Checked: after every call every rank holds the
//! root's bytes (every root, lengths from 0 to several windows, the root
//! changing from call to call), and only leaders put, send or multicast
//! across nodes, which the flat bcast on the same nodes does not (so the
//! check can fail). A root that abandons its call fails every other
//! rank's instead of leaving it waiting.

use crate::common;

use std::time::Duration;

use btl_ibmc::fabric::{Fabric, FabricConfig};
use btl_ibmc::shm::NodeGroups;
use btl_ibmc::{MulticastKind, RmcastConfig, RmcastStats, WaitPolicy};
use common::nodes::{blocks, uneven_layouts};
use common::XorShift;
use coll_rdma_core::collectives::bcast::{Bcast, BcastConfig};

/// Region offset inside the window: not 0, so that offsets are really added.
const REGION_OFFSET: usize = 4096;
/// Bytes per piece (datagram fragment and shared slot), small so that a
/// few hundred bytes span several windows.
const PIECE: usize = 120;
const WINDOW_SLOTS: usize = 4;

fn content(index: usize, len: usize) -> Vec<u8> {
    let mut state = XorShift::new(0x2B_CA57 ^ index as u64);
    (0..len).map(|_| state.next() as u8).collect()
}

#[derive(Clone, Copy, Debug)]
struct Op {
    root: usize,
    len: usize,
}

/// Every root in turn with every length (the root changes at every call),
/// then random roots and lengths.
fn script(size: usize, rng: &mut XorShift) -> Vec<Op> {
    let several_windows = 3 * WINDOW_SLOTS * PIECE + 7;
    let lengths = [0, 1, PIECE - 1, PIECE, PIECE + 1, several_windows];
    let mut ops: Vec<Op> = (0..lengths.len() * size).map(|call| Op { root: call % size, len: lengths[(call / size) % lengths.len()] }).collect();
    ops.extend((0..30).map(|_| Op { root: rng.below(size), len: lengths[rng.below(lengths.len())] }));
    ops
}

fn multicast_config() -> RmcastConfig {
    RmcastConfig {
        window_slots: WINDOW_SLOTS,
        slot_bytes: PIECE,
        fragment_bytes: PIECE,
        co_roots: 1,
        timeout: Duration::from_millis(4),
        // Ranks are threads on a couple of cores: never spin. A hang
        // fails the test (every wait gives up) instead of stalling it.
        wait: WaitPolicy { spin_polls: 0, kernel_spin_polls: 0, stall_warning: Duration::from_secs(10), fault_timeout: Some(Duration::from_secs(60)) },
        give_up_after: Some(Duration::from_secs(25)),
        ..RmcastConfig::default()
    }
}

fn bcast_config() -> BcastConfig {
    BcastConfig { multicast: multicast_config(), room_for_two_levels: true, ..BcastConfig::default() }
}

fn fabric_config(nodes: &NodeGroups, kind: MulticastKind, seed: u64) -> FabricConfig {
    let lossy = kind == MulticastKind::Datagram;
    FabricConfig {
        multicast_kind: kind,
        multicast_drop: if lossy { 0.2 } else { 0.0 },
        multicast_duplicate: if lossy { 0.05 } else { 0.0 },
        multicast_reorder: if lossy { 0.1 } else { 0.0 },
        put_delay_max: Duration::from_micros(10),
        inter_node_put_delay: Duration::from_micros(20),
        nodes: Some(nodes.clone()),
        seed,
        ..FabricConfig::default()
    }
}

/// What crossed nodes in one run.
struct Crossings {
    puts: Vec<(usize, usize)>,
    messages: Vec<(usize, usize)>,
    multicast_senders: Vec<usize>,
    /// Every rank's counters together.
    stats: RmcastStats,
}

/// Runs `ops` on every rank (two-level or flat), checking each rank's
/// buffer against the root's bytes after every call; drains; returns what
/// crossed nodes.
fn run(nodes: &NodeGroups, kind: MulticastKind, seed: u64, ops: &[Op], two_levels: bool) -> Result<Crossings, String> {
    let size = nodes.size();
    let config = bcast_config();
    let endpoints = Fabric::new(size, REGION_OFFSET + Bcast::region_len(size, &config), fabric_config(nodes, kind, seed));
    let results: Vec<Result<RmcastStats, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = endpoints
            .iter()
            .enumerate()
            .map(|(rank, endpoint)| {
                scope.spawn(move || -> Result<RmcastStats, String> {
                    let mut bcast = Bcast::new(rank, size, REGION_OFFSET, config);
                    if two_levels {
                        bcast.use_two_levels(nodes, 1)?;
                    }
                    let mut rng = XorShift::new(seed ^ ((rank as u64 + 1) << 32));
                    for (index, op) in ops.iter().enumerate() {
                        if rng.below(8) == 0 {
                            std::thread::sleep(Duration::from_micros(rng.below(300) as u64));
                        }
                        let expected = content(index, op.len);
                        let mut buf = if op.root == rank { expected.clone() } else { vec![0xEE; op.len] };
                        bcast.bcast(endpoint, op.root, &mut buf).map_err(|e| format!("rank {rank}, call {index} ({op:?}): {e}"))?;
                        if buf != expected {
                            let first = buf.iter().zip(&expected).position(|(got, want)| got != want);
                            return Err(format!("rank {rank}, call {index} ({op:?}): wrong bytes from byte {first:?}"));
                        }
                    }
                    bcast.drain(endpoint).map_err(|e| format!("rank {rank}, drain: {e}"))?;
                    Ok(bcast.stats())
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    let stats = RmcastStats::sum(&results.into_iter().collect::<Result<Vec<_>, String>>()?);
    let any = &endpoints[0];
    Ok(Crossings { puts: any.inter_node_pairs(), messages: any.inter_node_messages(), multicast_senders: any.multicast_senders(), stats })
}

fn only_leaders_crossed(nodes: &NodeGroups, crossings: &Crossings) -> Result<(), String> {
    let leaders = nodes.leaders();
    for (what, pairs) in [("put", &crossings.puts), ("reliable message", &crossings.messages)] {
        if let Some((from, to)) = pairs.iter().find(|(from, to)| !leaders.contains(from) || !leaders.contains(to)) {
            return Err(format!("rank {from} sent a {what} to rank {to} on another node; leaders are {leaders:?}"));
        }
    }
    match crossings.multicast_senders.iter().find(|sender| !leaders.contains(sender)) {
        Some(sender) => Err(format!("rank {sender} multicast; leaders are {leaders:?}")),
        None => Ok(()),
    }
}

#[test]
fn every_root_and_length_reaches_every_rank_and_only_leaders_cross() {
    for (index, (name, nodes)) in uneven_layouts().into_iter().enumerate() {
        for kind in [MulticastKind::Datagram, MulticastKind::SharedWindow] {
            let seed = 0x2B_CA57_0000 + (index * 4) as u64 + if kind == MulticastKind::Datagram { 0 } else { 1 };
            let ops = script(nodes.size(), &mut XorShift::new(seed));
            let started = std::time::Instant::now();
            let crossings = run(&nodes, kind, seed, &ops, true).unwrap_or_else(|why| panic!("{name}, {kind:?}, seed {seed:#x}: {why}"));
            only_leaders_crossed(&nodes, &crossings).unwrap_or_else(|why| panic!("{name}, {kind:?}: {why}"));
            if nodes.count() > 1 && kind == MulticastKind::Datagram {
                assert!(!crossings.multicast_senders.is_empty(), "{name}: the leaders never multicast");
                assert!(crossings.stats.retransmissions > 0, "{name}: 20 % loss, yet nothing was retransmitted: {:?}", crossings.stats);
                assert!(crossings.stats.forwarded > 0, "{name}: the leaders' co-root never forwarded: {:?}", crossings.stats);
            }
            assert_eq!(crossings.stats.overruns, 0, "{name}, {kind:?}: a root overran a receive window");
            if nodes.count() == 1 {
                assert!(crossings.puts.is_empty() && crossings.messages.is_empty(), "{name}: one node, yet something crossed");
            }
            println!(
                "{name}, {kind:?}: {} bcasts in {:.2} s, {} retransmissions",
                ops.len(),
                started.elapsed().as_secs_f64(),
                crossings.stats.retransmissions
            );
        }
    }
}

#[test]
fn the_flat_bcast_on_the_same_nodes_has_non_leaders_crossing() {
    let nodes = blocks(&[1, 2, 7]);
    for kind in [MulticastKind::Datagram, MulticastKind::SharedWindow] {
        let ops = script(nodes.size(), &mut XorShift::new(0xF1A7));
        let flat = run(&nodes, kind, 0xF1A7, &ops, false).unwrap_or_else(|why| panic!("{kind:?}: {why}"));
        assert!(only_leaders_crossed(&nodes, &flat).is_err(), "{kind:?}: the flat bcast crossed only between leaders: the check could not fail");
    }
}

#[test]
fn without_room_in_the_region_or_after_a_call_it_stays_flat() {
    let nodes = blocks(&[1, 2]);
    let mut no_room = Bcast::new(0, 3, 0, BcastConfig { room_for_two_levels: false, ..bcast_config() });
    assert!(no_room.use_two_levels(&nodes, 1).unwrap_err().contains("no room"));
    assert!(no_room.two_level().is_none());
    let config = bcast_config();
    let flat_len = Bcast::region_len(3, &BcastConfig { room_for_two_levels: false, ..config });
    assert!(Bcast::region_len(3, &config) >= 2 * flat_len, "a node's stage needs a flat region of its own");
    for size in [4, 64, 1024] {
        let flat = BcastConfig::default();
        let room = BcastConfig { room_for_two_levels: true, ..flat };
        println!(
            "bcast region with default parameters at {size} ranks: {} bytes flat, {} with room for two levels",
            Bcast::region_len(size, &flat),
            Bcast::region_len(size, &room)
        );
    }
    let endpoints = Fabric::new(1, Bcast::region_len(1, &config), FabricConfig::default());
    let mut used = Bcast::new(0, 1, 0, config);
    used.bcast(&endpoints[0], 0, &mut [1, 2, 3]).unwrap();
    assert!(used.use_two_levels(&blocks(&[1]), 0).is_err(), "switching after a call would put ranks out of step");
    // Without co-roots 512 leaders' ACK arrays (512 x 511 words) outgrow
    // those of 1024 ranks with the model's 127 co-roots: refused, not
    // laid out past the region.
    let (flat, _) = BcastConfig::default().with_modelled_co_roots(1024, &tuning::CoRootModel::PAPER_2004);
    let mut large = Bcast::new(0, 1024, 0, BcastConfig { room_for_two_levels: true, ..flat });
    let pairs = NodeGroups::from_keys(&(0..1024).map(|rank| rank / 2).collect::<Vec<_>>());
    let why = large.use_two_levels(&pairs, 0).unwrap_err();
    assert!(why.contains("no room for the stages") && why.contains("512 leaders"), "{why}");
    large.use_two_levels(&pairs, tuning::choose_co_roots(512, &tuning::CoRootModel::PAPER_2004).co_roots).expect("the model's co-roots fit");
}

/// The region holds both stages for every placement, with the co-roots
/// the model picks for the whole communicator (flat) and for the leaders,
/// as the glue sets them: the largest node and the number of leaders are
/// what the stages' regions grow with, and the worst cases are one large
/// node with singletons beside it.
#[test]
fn the_region_holds_both_stages_on_every_placement() {
    let model = &tuning::CoRootModel::PAPER_2004;
    for size in (2..=48).chain([64, 100, 256, 1024]) {
        let (flat, _) = BcastConfig::default().with_modelled_co_roots(size, model);
        let config = BcastConfig { room_for_two_levels: true, ..flat };
        let step = if size > 100 { size / 16 } else { 1 };
        for largest in (1..size).step_by(step).chain([size - 1]) {
            let mut sizes = vec![largest];
            sizes.extend(std::iter::repeat_n(1, size - largest));
            let nodes = blocks(&sizes);
            let leaders_co_roots = tuning::choose_co_roots(nodes.count(), model).co_roots;
            let mut bcast = Bcast::new(0, size, REGION_OFFSET, config);
            bcast.use_two_levels(&nodes, leaders_co_roots).unwrap_or_else(|why| panic!("{size} ranks, a node of {largest}: {why}"));
        }
    }
}

/// A root that cannot provide its message (its pack failed) makes every
/// other rank's call fail, whichever stage each waits in: the root's node,
/// the leaders, or another node behind its leader.
#[test]
fn an_abandoned_call_fails_every_rank_instead_of_hanging() {
    let nodes = blocks(&[2, 1, 7]);
    let size = nodes.size();
    for kind in [MulticastKind::Datagram, MulticastKind::SharedWindow] {
        for root in [0, 1, 2, 5] {
            let config = bcast_config();
            let endpoints = Fabric::new(size, REGION_OFFSET + Bcast::region_len(size, &config), fabric_config(&nodes, kind, 0xAB + root as u64));
            let len = 2 * PIECE + 3;
            let outcomes: Vec<Result<(), String>> = std::thread::scope(|scope| {
                let handles: Vec<_> = endpoints
                    .iter()
                    .enumerate()
                    .map(|(rank, endpoint)| {
                        let nodes = &nodes;
                        scope.spawn(move || {
                            let mut bcast = Bcast::new(rank, size, REGION_OFFSET, config);
                            bcast.use_two_levels(nodes, 1).unwrap();
                            if rank == root {
                                bcast.abandon_at_root(endpoint, root, len).map_err(|e| e.to_string())
                            } else {
                                let mut buf = vec![0u8; len];
                                bcast.bcast(endpoint, root, &mut buf).map_err(|e| e.to_string())
                            }
                        })
                    })
                    .collect();
                handles.into_iter().map(|handle| handle.join().expect("rank thread panicked")).collect()
            });
            for (rank, outcome) in outcomes.iter().enumerate() {
                if rank == root {
                    assert!(outcome.is_ok(), "{kind:?}, root {root}: abandoning failed: {outcome:?}");
                } else {
                    assert!(outcome.is_err(), "{kind:?}, root {root}: rank {rank} accepted an abandoned message");
                }
            }
        }
    }
}
