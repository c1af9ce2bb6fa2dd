//! The two-level barrier over the in-process fabric with ranks grouped
//! into nodes of uneven sizes (1, 2 and 7 ranks, in several orders), by
//! round robin, all on one node and one per node. Puts between nodes wait
//! a fixed time on top of random delays, and ranks arrive skewed. Checked:
//! the barrier's definition (no rank leaves barrier k before every rank
//! entered it; the ledger is barrier_fabric's, whose own test shows it
//! catches a barrier that does not wait), and that only node leaders write
//! across nodes, which the flat dissemination on the same nodes does not
//! (so that check can fail).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::shm::NodeGroups;
use btl_ibmc::{NoSideProgress, TransportError};
use common::nodes::{blocks, uneven_layouts};
use common::{EntryLedger, XorShift};
use coll_rdma_core::collectives::barrier::DisseminationBarrier;
use coll_rdma_core::collectives::barrier::two_level::TwoLevelBarrier;

/// Region offset inside the window: not 0, so that offsets are really added.
const REGION_OFFSET: usize = 4096;

/// What each rank runs: the barrier under test, built for its rank.
trait BarrierUnderTest: Send + 'static {
    fn run(&mut self, endpoint: &FabricEndpoint) -> Result<(), TransportError>;
}

impl BarrierUnderTest for TwoLevelBarrier {
    fn run(&mut self, endpoint: &FabricEndpoint) -> Result<(), TransportError> {
        TwoLevelBarrier::run(self, endpoint, &NoSideProgress)
    }
}

impl BarrierUnderTest for DisseminationBarrier {
    fn run(&mut self, endpoint: &FabricEndpoint) -> Result<(), TransportError> {
        DisseminationBarrier::run(self, endpoint, &NoSideProgress)
    }
}

struct Outcome {
    violation: Option<String>,
    inter_node_pairs: Vec<(usize, usize)>,
    inter_node_puts: u64,
}

fn run_barriers<B: BarrierUnderTest>(
    nodes: &NodeGroups,
    barriers: usize,
    seed: u64,
    build: impl Fn(usize) -> B,
) -> Outcome {
    let size = nodes.size();
    let window_len = REGION_OFFSET + TwoLevelBarrier::region_len(size).max(DisseminationBarrier::region_len(size, 8));
    let config = FabricConfig {
        put_delay_max: Duration::from_micros(5),
        inter_node_put_delay: Duration::from_micros(20),
        nodes: Some(nodes.clone()),
        seed,
        ..FabricConfig::default()
    };
    let endpoints = Fabric::new(size, window_len, config);
    let ledger = Arc::new(EntryLedger::new(barriers));
    let handles: Vec<_> = endpoints
        .into_iter()
        .enumerate()
        .map(|(rank, endpoint)| {
            let ledger = Arc::clone(&ledger);
            let mut barrier = build(rank);
            std::thread::spawn(move || -> (Option<String>, FabricEndpoint) {
                let mut rng = XorShift::new(seed ^ (rank as u64 + 1));
                for k in 0..barriers {
                    rng.skew_arrival();
                    ledger.enter(k);
                    barrier.run(&endpoint).expect("fabric put failed");
                    if let Err(why) = ledger.check_leave(k, size) {
                        return (Some(format!("rank {rank} {why}")), endpoint);
                    }
                    if ledger.violated() {
                        break;
                    }
                }
                (None, endpoint)
            })
        })
        .collect();
    let mut violation = None;
    let mut any_endpoint = None;
    for handle in handles {
        let (error, endpoint) = handle.join().expect("rank thread panicked");
        if let Some(error) = error {
            violation.get_or_insert(error);
        }
        any_endpoint = Some(endpoint);
    }
    let endpoint = any_endpoint.expect("at least one rank");
    Outcome { violation, inter_node_pairs: endpoint.inter_node_pairs(), inter_node_puts: endpoint.stats().inter_node_puts }
}

fn two_level(nodes: &NodeGroups, radix: usize) -> impl Fn(usize) -> TwoLevelBarrier + '_ {
    move |rank| TwoLevelBarrier::new(rank, nodes, radix, REGION_OFFSET, common::yielding_policy(50))
}

#[test]
fn uneven_nodes_keep_the_barrier_property_and_only_leaders_cross() {
    for (index, (name, nodes)) in uneven_layouts().into_iter().enumerate() {
        let leaders = nodes.leaders();
        for radix in [1, 2, 3] {
            let seed = 0x2_1E7E_0000 + (index * 16 + radix) as u64;
            let outcome = run_barriers(&nodes, 300, seed, two_level(&nodes, radix));
            assert!(outcome.violation.is_none(), "{name}, radix {radix}, seed {seed:#x}: {}", outcome.violation.unwrap());
            for (writer, target) in &outcome.inter_node_pairs {
                assert!(
                    leaders.contains(writer) && leaders.contains(target),
                    "{name}, radix {radix}: rank {writer} wrote to rank {target} on another node, but leaders are {leaders:?}"
                );
            }
            if leaders.len() > 1 {
                assert!(outcome.inter_node_puts > 0, "{name}: the leaders never met");
            } else {
                assert_eq!(outcome.inter_node_puts, 0, "{name}: one node, yet puts crossed nodes");
            }
        }
    }
}

#[test]
fn the_flat_barrier_on_the_same_nodes_has_members_crossing_and_crosses_more() {
    const BARRIERS: usize = 50;
    let nodes = blocks(&[1, 2, 7]);
    let size = nodes.size();
    let flat = run_barriers(&nodes, BARRIERS, 0xF1A7, |rank| {
        DisseminationBarrier::new(rank, size, 2, REGION_OFFSET, common::yielding_policy(50))
    });
    assert!(flat.violation.is_none(), "{}", flat.violation.unwrap());
    let leaders = nodes.leaders();
    assert!(
        flat.inter_node_pairs.iter().any(|(writer, target)| !leaders.contains(writer) || !leaders.contains(target)),
        "the flat barrier crossed only between leaders: the check above could not fail"
    );
    // Puts per barrier are fixed by the schedule: radix 2 over 10 ranks
    // is 5 notifications a rank, most of them across nodes; over the 3
    // leaders it is one round of 2 each.
    let two_level = run_barriers(&nodes, BARRIERS, 0xF1A7, two_level(&nodes, 2));
    assert!(two_level.violation.is_none(), "{}", two_level.violation.unwrap());
    let per_barrier = |outcome: &Outcome| outcome.inter_node_puts / BARRIERS as u64;
    println!("puts across nodes per barrier on nodes of 1, 2 and 7: flat {}, two-level {}", per_barrier(&flat), per_barrier(&two_level));
    assert_eq!(per_barrier(&two_level), 6);
    assert!(per_barrier(&flat) > 3 * per_barrier(&two_level), "flat {} vs two-level {}", per_barrier(&flat), per_barrier(&two_level));
}

#[test]
fn the_region_holds_every_layout_and_radix() {
    for size in 1..=40 {
        let widest = (1..=size.max(2) - 1).map(|radix| DisseminationBarrier::region_len(size, radix)).max().unwrap_or(0);
        // Release slot, an arrival slot for every other rank, the widest
        // leaders' dissemination (every rank its own node).
        assert!(TwoLevelBarrier::region_len(size) >= 64 * size + widest, "size {size}");
    }
}
