//! Every collective at 64, 256 and 1024 ranks in the hybrid transport's
//! shape (issue 9, "prove it at scale"): threads play ranks, consecutive
//! ranks share a node group of 8 to 64 whose reliable channel is a real
//! shared-memory ring (bounded: a sender can find it full), puts and lossy
//! multicast datagrams go over the fabric, bcast uses the co-root count
//! the model picks for the size, with NACKs. Results are checked against
//! references computed directly from each rank's inputs.
//!
//! The default run is short enough for `make check`; `COLL_RDMA_SOAK=1`
//! (`make soak`) runs more calls, more seeds and larger node groups. Any
//! hang ends the run with a list of who waits for what (every wait that
//! has lasted over a second describes itself), and every wait gives up
//! after the fault timeout with its description.

use crate::common;

use std::time::{Duration, Instant};

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricWithNodeRings, run_ranks_watched};
use btl_ibmc::shm::NodeGroups;
use btl_ibmc::{RmcastConfig, RmcastStats, WaitPolicy};
use common::XorShift;
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::barrier::DisseminationBarrier;
use coll_rdma_core::collectives::barrier::two_level::TwoLevelBarrier;
use coll_rdma_core::collectives::bcast::{Bcast, BcastConfig};
use coll_rdma_core::layout::WindowLayout;
use coll_rdma_core::patterns::{two_level_links, TreeStreamConfig};
use coll_rdma_core::collectives::reduce::Reduce;
use coll_rdma_core::collectives::large_reduction::ring::RingReduction;
use common::{WordSum, word};
use coll_rdma_core::side_progress::BcastProgress;

fn soak() -> bool {
    std::env::var_os("COLL_RDMA_SOAK").is_some_and(|value| value != "0")
}

/// Rank `rank`'s input to reduction call `call`: distinct per rank, call and word.
fn contribution(rank: usize, call: usize, words: usize) -> Vec<u8> {
    (0..words).flat_map(|index| (((rank as u64 + 1) << 32) ^ ((call as u64) << 16) ^ index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes()).collect()
}

fn expected_sum(size: usize, call: usize, words: usize) -> Vec<u8> {
    let mut total = vec![0u64; words];
    for rank in 0..size {
        for (slot, bytes) in total.iter_mut().zip(contribution(rank, call, words).chunks_exact(8)) {
            *slot = slot.wrapping_add(word(bytes));
        }
    }
    total.iter().flat_map(|value| value.to_le_bytes()).collect()
}

fn bcast_content(call: usize, len: usize) -> Vec<u8> {
    let mut state = XorShift::new(0x5CA1_E000 ^ call as u64);
    (0..len).map(|_| state.next() as u8).collect()
}

/// What every rank calls, in order.
#[derive(Clone, Copy, Debug)]
enum Call {
    Barrier,
    Allreduce { words: usize },
    Reduce { root: usize, words: usize },
    Bcast { root: usize, len: usize },
}

#[derive(Clone, Debug)]
struct Scale {
    size: usize,
    group: usize,
    calls: usize,
    seed: u64,
    /// Every collective in two levels over the node groups
    /// (coll_rdma_hierarchy auto on shm+verbs): bcast's leaders multicast
    /// among themselves, and within a group (no peer reads here) the put
    /// tree serves.
    two_level: bool,
}

const FRAGMENT: usize = 512;

fn script(scale: &Scale) -> Vec<Call> {
    let mut rng = XorShift::new(scale.seed);
    let size = scale.size;
    let lengths = [1, FRAGMENT - 1, FRAGMENT, 3 * FRAGMENT + 5, 40 * FRAGMENT];
    let mut calls = Vec::new();
    for index in 0..scale.calls {
        calls.push(match index % 6 {
            0 => Call::Barrier,
            1 => Call::Allreduce { words: 1 + rng.below(300) },
            2 => Call::Reduce { root: rng.below(size), words: 1 + rng.below(300) },
            // Roots in one node group back to back, then anywhere: the
            // co-roots next to a root forward to each other over rings.
            3 | 4 => Call::Bcast { root: (index / 6 % scale.group) + rng.below(size / scale.group) * scale.group, len: lengths[rng.below(lengths.len())] },
            _ => Call::Bcast { root: rng.below(size), len: lengths[rng.below(lengths.len())] },
        });
    }
    calls
}

fn multicast_config(size: usize, fault_timeout: Duration) -> (BcastConfig, String) {
    let multicast = RmcastConfig {
        window_slots: 64,
        fragment_bytes: FRAGMENT,
        ack_interval: 4,
        timeout: Duration::from_millis(30),
        nack: true,
        wait: wait_policy(fault_timeout),
        give_up_after: None,
        ..RmcastConfig::default()
    };
    BcastConfig { multicast, ..BcastConfig::default() }.with_modelled_co_roots(size, &tuning::CoRootModel::PAPER_2004)
}

fn wait_policy(fault_timeout: Duration) -> WaitPolicy {
    WaitPolicy { spin_polls: 0, kernel_spin_polls: 0, stall_warning: Duration::from_secs(60), fault_timeout: Some(fault_timeout) }
}

enum Barrier {
    Flat(DisseminationBarrier),
    TwoLevel(TwoLevelBarrier),
}

impl Barrier {
    fn run<T: btl_ibmc::Windows + ?Sized>(&mut self, transport: &T, side_progress: &dyn btl_ibmc::SideProgress) -> Result<(), btl_ibmc::TransportError> {
        match self {
            Barrier::Flat(barrier) => barrier.run(transport, side_progress),
            Barrier::TwoLevel(barrier) => barrier.run(transport, side_progress),
        }
    }
}

fn run_at_scale(scale: Scale) {
    let Scale { size, group, seed, two_level, .. } = scale;
    assert_eq!(size % group, 0);
    let _alone = crate::one_large_run_at_a_time();
    let started = Instant::now();
    // Generous: ranks are threads, a thousand of them on a couple of busy
    // cores. The watchdog fires first, so a hang lists every stalled wait.
    let watchdog = Duration::from_secs(if size >= 1024 { 300 } else { 150 });
    let fault_timeout = watchdog + Duration::from_secs(60);
    let (mut bcast_config, why) = multicast_config(size, fault_timeout);
    bcast_config.room_for_two_levels = two_level;
    // Two-level: only the leaders multicast, with the co-roots the model
    // picks for their number, as the glue does.
    let (co_roots, why) = match two_level {
        true => {
            let choice = tuning::choose_co_roots(size / group, &tuning::CoRootModel::PAPER_2004);
            (choice.co_roots, format!("among the {} leaders: {}", size / group, choice.reason))
        }
        false => (bcast_config.multicast.co_roots, why),
    };
    let tree = TreeStreamConfig { policy: wait_policy(fault_timeout), room_for_two_levels: two_level, ..TreeStreamConfig::default() };
    let reductions = AllreduceConfig { tree, ..AllreduceConfig::default() };
    let radix = 2;
    let barrier_len = DisseminationBarrier::region_len(size, radix).max(if two_level { TwoLevelBarrier::region_len(size) } else { 0 });
    let layout = WindowLayout::with_barrier_region(size, barrier_len, &reductions, &reductions.tree, RingReduction::DEFAULT_SEGMENT_BYTES, &bcast_config);
    let fabric = FabricConfig {
        multicast_drop: 0.05,
        multicast_duplicate: 0.02,
        multicast_reorder: 0.05,
        seed,
        ..FabricConfig::default()
    };
    let keys: Vec<usize> = (0..size).map(|rank| rank / group).collect();
    let groups = NodeGroups::from_keys(&keys);
    let nodes = groups.clone();
    let endpoints = Fabric::new(size, layout.window_len, fabric);
    let transports = run_ranks_watched(endpoints, watchdog, move |rank, endpoint| {
        FabricWithNodeRings::establish(endpoint, &groups).unwrap_or_else(|e| panic!("rank {rank}: node rings: {e}"))
    });
    let setup = started.elapsed();
    let calls = script(&scale);
    let levels = if two_level { ", two-level barrier, reductions and bcast" } else { "" };
    let what = format!("{size} ranks in node groups of {group}{levels}, {co_roots} co-roots, seed {seed:#x}");
    let what_in_ranks = what.clone();
    let stats = run_ranks_watched(transports, watchdog, move |rank, transport| {
        let what = &what_in_ranks;
        let policy = wait_policy(fault_timeout);
        let mut barrier = if two_level {
            Barrier::TwoLevel(TwoLevelBarrier::new(rank, &nodes, radix, layout.barrier_offset, policy))
        } else {
            Barrier::Flat(DisseminationBarrier::new(rank, size, radix, layout.barrier_offset, policy))
        };
        let mut allreduce = Allreduce::new(rank, size, layout.allreduce_offset, reductions);
        let mut reduce = Reduce::new(rank, size, layout.reduce_offset, reductions.tree);
        if two_level {
            let tree = two_level_links(rank, &nodes, reductions.tree.degree);
            allreduce.use_two_level_tree(&tree).unwrap_or_else(|why| panic!("rank {rank}: allreduce: {why}"));
            reduce.use_two_level_tree(&tree).unwrap_or_else(|why| panic!("rank {rank}: reduce: {why}"));
        }
        let mut bcast = Bcast::new(rank, size, layout.bcast_offset, bcast_config);
        if two_level {
            bcast.use_two_levels(&nodes, co_roots).unwrap_or_else(|why| panic!("rank {rank}: bcast: {why}"));
        }
        for (index, call) in calls.iter().enumerate() {
            let failed = |e: btl_ibmc::TransportError| panic!("{what}: rank {rank}, call {index} ({call:?}): {e}");
            // As the glue does: a root returns before its pieces are
            // acknowledged, so the other collectives' waits serve the bcast.
            match *call {
                Call::Barrier => barrier.run(&transport, &BcastProgress::if_needed(&transport, &mut bcast)).unwrap_or_else(failed),
                Call::Allreduce { words } => {
                    let send = contribution(rank, index, words);
                    let mut recv = vec![0u8; send.len()];
                    allreduce.allreduce(&transport, &BcastProgress::if_needed(&transport, &mut bcast), &WordSum, &send, &mut recv).unwrap_or_else(failed);
                    assert!(recv == expected_sum(size, index, words), "{what}: rank {rank}, call {index}: wrong allreduce sum");
                }
                Call::Reduce { root, words } => {
                    let send = contribution(rank, index, words);
                    let mut recv = vec![0u8; send.len()];
                    let out = (rank == root).then_some(&mut recv[..]);
                    reduce.reduce(&transport, &BcastProgress::if_needed(&transport, &mut bcast), &WordSum, root, &send, out).unwrap_or_else(failed);
                    if rank == root {
                        assert!(recv == expected_sum(size, index, words), "{what}: root {rank}, call {index}: wrong reduce sum");
                    }
                }
                Call::Bcast { root, len } => {
                    let mut buf = if rank == root { bcast_content(index, len) } else { vec![0xEE; len] };
                    bcast.bcast(&transport, root, &mut buf).unwrap_or_else(failed);
                    assert!(buf == bcast_content(index, len), "{what}: rank {rank}, call {index}: wrong bcast bytes from root {root}");
                }
            }
        }
        bcast.drain(&transport).unwrap_or_else(|e| panic!("{what}: rank {rank}, drain: {e}"));
        // Nobody leaves (and drops its rings) while a peer may still send to it.
        barrier.run(&transport, &BcastProgress::if_needed(&transport, &mut bcast)).unwrap_or_else(|e| panic!("{what}: rank {rank}, closing barrier: {e}"));
        bcast.stats()
    });
    let total = RmcastStats::sum(&stats);
    println!(
        "{what}: {} calls in {:.1} s (setup {:.1} s), {} forwarded, {} retransmissions, {} NACKs, {} duplicates dropped; {why}",
        scale.calls,
        started.elapsed().as_secs_f64(),
        setup.as_secs_f64(),
        total.forwarded,
        total.retransmissions,
        total.nacks_sent,
        total.duplicates_dropped
    );
    assert_eq!(total.overruns, 0, "{what}: a root overran a receive window");
    if !two_level || co_roots > 0 {
        assert!(co_roots > 0 && total.forwarded > 0, "{what}: co-roots were never used");
    }
    assert!(total.retransmissions + total.nacks_sent > 0, "{what}: the loss paths were never exercised: {total:?}");
}

#[test]
fn every_collective_at_64_ranks_in_node_groups_of_8_and_64() {
    let calls = if soak() { 300 } else { 36 };
    run_at_scale(Scale { size: 64, group: 8, calls, seed: 0x64_0008, two_level: false });
    run_at_scale(Scale { size: 64, group: 64, calls, seed: 0x64_0064, two_level: false });
}

#[test]
fn every_collective_at_256_ranks_in_node_groups_of_32() {
    let calls = if soak() { 120 } else { 18 };
    run_at_scale(Scale { size: 256, group: 32, calls, seed: 0x256_0032, two_level: false });
}

#[test]
fn every_collective_at_1024_ranks_in_node_groups_of_8() {
    let calls = if soak() { 60 } else { 9 };
    run_at_scale(Scale { size: 1024, group: 8, calls, seed: 0x1024_0008, two_level: false });
    if soak() {
        run_at_scale(Scale { size: 1024, group: 16, calls, seed: 0x1024_0016, two_level: false });
    }
}

#[test]
fn two_level_collectives_at_64_and_256_ranks() {
    let calls = if soak() { 300 } else { 36 };
    run_at_scale(Scale { size: 64, group: 8, calls, seed: 0x64_2008, two_level: true });
    run_at_scale(Scale { size: 256, group: 32, calls: calls / 2, seed: 0x256_2032, two_level: true });
}
