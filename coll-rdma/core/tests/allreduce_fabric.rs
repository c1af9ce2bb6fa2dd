//! Allreduce and reduce over the in-process fabric: threads as ranks,
//! random skew before each call and random delays on puts, back-to-back
//! calls alternating the two collectives with changing roots, operations,
//! lengths and variants. Every result is compared with a reference the
//! test computes serially from all ranks' inputs:
//!
//! * wrapping u64 sum and 2x2 u64 matrix product (associative, exact; the
//!   product is not commutative): the strict left-to-right fold, so any
//!   result but the canonical-order one fails;
//! * f64 sum (rounding makes association visible): bit-exact against the
//!   association the variant promises, the left-to-right fold for the
//!   exchange and the fold of consecutive groups of k+1 (ranks, then group
//!   results, ...) for the tree; matching it on every rank also proves that
//!   all ranks got identical bits.
//!
//! The same calls also run on the two-level tree across nodes (ranks
//! grouped into consecutive nodes of uneven sizes, puts between nodes
//! slower), where only node leaders may write across nodes (rank 0 also
//! relays a reduce's result to a root on another node).

use crate::common;

use common::matrix::{matrix_product, read_matrix, write_matrix};
use common::nodes::blocks;
use common::{ReductionKind as Kind, XorShift};

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::shm::NodeGroups;
use btl_ibmc::{NoSideProgress, TransportError, WaitPolicy};
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::layout::WindowLayout;
use coll_rdma_core::patterns::{two_level_links, TreeStreamConfig};
use coll_rdma_core::collectives::reduce::Reduce;
use coll_rdma_core::reduction::Reduction;

/// A scenario that has not finished by then is taken for a deadlock.
const SCENARIO_DEADLINE: Duration = Duration::from_secs(120);

fn yielding_policy() -> WaitPolicy {
    common::yielding_policy(20)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    WrappingSum,
    MatrixProduct,
    FloatSum,
    /// Claims to be the matrix product but folds in the wrong order: what
    /// a collective that mixed up lower and higher ranks would compute.
    MatrixProductSwapped,
}

fn words(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes.chunks_exact(8).map(|chunk| u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk")))
}

impl Op {
    /// higher = lower ∘ higher with the operation's true meaning; the
    /// reference uses this, never `Reduction::combine`.
    fn true_combine(self, lower: &[u8], higher: &mut [u8]) {
        match self {
            Op::WrappingSum => {
                for (h, l) in higher.chunks_exact_mut(8).zip(words(lower)) {
                    let sum = l.wrapping_add(u64::from_ne_bytes((&*h).try_into().expect("8 bytes")));
                    h.copy_from_slice(&sum.to_ne_bytes());
                }
            }
            Op::FloatSum => {
                for (h, l) in higher.chunks_exact_mut(8).zip(words(lower)) {
                    let sum = f64::from_bits(l) + f64::from_ne_bytes((&*h).try_into().expect("8 bytes"));
                    h.copy_from_slice(&sum.to_ne_bytes());
                }
            }
            Op::MatrixProduct | Op::MatrixProductSwapped => {
                for (h, l) in higher.chunks_exact_mut(32).zip(lower.chunks_exact(32)) {
                    let product = matrix_product(read_matrix(l), read_matrix(h));
                    write_matrix(h, product);
                }
            }
        }
    }

    fn input(self, rng: &mut XorShift, count: usize) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(count * self.element_size());
        for _ in 0..count * self.element_size() / 8 {
            let word = match self {
                Op::FloatSum => {
                    // Magnitudes from 1e-6 to 1e6 and both signs, so that the
                    // association shows in the last bits.
                    let unit = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                    (unit * 10f64.powi((rng.next() % 13) as i32 - 6)).to_bits()
                }
                _ => rng.next(),
            };
            bytes.extend_from_slice(&word.to_ne_bytes());
        }
        bytes
    }
}

impl Reduction for Op {
    fn element_size(&self) -> usize {
        match self {
            Op::WrappingSum | Op::FloatSum => 8,
            Op::MatrixProduct | Op::MatrixProductSwapped => 32,
        }
    }

    fn is_commutative(&self) -> bool {
        matches!(self, Op::WrappingSum | Op::FloatSum)
    }

    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        match self {
            Op::MatrixProductSwapped => {
                let mut swapped = lower.to_vec();
                self.true_combine(higher, &mut swapped);
                higher.copy_from_slice(&swapped);
            }
            _ => self.true_combine(lower, higher),
        }
    }
}

/// r0 ∘ r1 ∘ … ∘ r(P-1), strictly left to right.
fn left_fold(op: Op, inputs: &[Vec<u8>]) -> Vec<u8> {
    let mut acc = inputs[0].clone();
    for next in &inputs[1..] {
        let mut combined = next.clone();
        op.true_combine(&acc, &mut combined);
        acc = combined;
    }
    acc
}

/// Groups of `degree + 1` consecutive ranks folded left to right, then
/// groups of those results, until one is left.
fn grouped_fold(op: Op, inputs: &[Vec<u8>], degree: usize) -> Vec<u8> {
    let mut level = inputs.to_vec();
    while level.len() > 1 {
        level = level.chunks(degree + 1).map(|group| left_fold(op, group)).collect();
    }
    level.remove(0)
}

#[derive(Clone, Copy, Debug)]
struct Call {
    kind: Kind,
    op: Op,
    count: usize,
}

struct Scenario {
    size: usize,
    config: AllreduceConfig,
    seed: u64,
    put_delay: Duration,
    calls: Vec<Call>,
}

/// What a call must produce, and which rank-order association it follows:
/// on the two-level tree (consecutive nodes), each node's grouped fold,
/// then the grouped fold of the nodes' results.
fn expected_result(scenario: &Scenario, nodes: Option<&NodeGroups>, call: &Call, inputs: &[Vec<u8>]) -> Vec<u8> {
    let bytes = call.count * call.op.element_size();
    let uses_exchange = call.kind == Kind::Allreduce && bytes <= scenario.config.exchange_max_bytes && nodes.is_none();
    let degree = scenario.config.tree.degree;
    match (call.op, nodes) {
        (Op::FloatSum, Some(nodes)) => {
            let per_node: Vec<Vec<u8>> = nodes
                .leaders()
                .into_iter()
                .map(|leader| grouped_fold(call.op, &nodes.members(leader).map(|rank| inputs[rank].clone()).collect::<Vec<_>>(), degree))
                .collect();
            grouped_fold(call.op, &per_node, degree)
        }
        (Op::FloatSum, None) if !uses_exchange => grouped_fold(call.op, inputs, degree),
        _ => left_fold(call.op, inputs),
    }
}

/// Names the first differing element, or None when the bytes agree.
fn first_difference(op: Op, got: &[u8], want: &[u8]) -> Option<String> {
    let size = op.element_size();
    let index = got.chunks(size).zip(want.chunks(size)).position(|(g, w)| g != w)?;
    let show = |bytes: &[u8]| match op {
        Op::FloatSum => format!("{:e}", f64::from_ne_bytes(bytes.try_into().expect("8 bytes"))),
        _ => format!("{:x?}", words(bytes).collect::<Vec<_>>()),
    };
    Some(format!(
        "element {index} is {} instead of {}",
        show(&got[index * size..][..size]),
        show(&want[index * size..][..size])
    ))
}

struct Prepared {
    inputs: Vec<Vec<Vec<u8>>>,
    expected: Vec<Vec<u8>>,
}

fn prepare(scenario: &Scenario, nodes: Option<&NodeGroups>) -> Prepared {
    let mut rng = XorShift::new(scenario.seed);
    let mut inputs = Vec::new();
    let mut expected = Vec::new();
    for call in &scenario.calls {
        let per_rank: Vec<Vec<u8>> = (0..scenario.size).map(|_| call.op.input(&mut rng, call.count)).collect();
        expected.push(expected_result(scenario, nodes, call, &per_rank));
        inputs.push(per_rank);
    }
    Prepared { inputs, expected }
}

fn skew(rng: &mut XorShift) {
    match rng.next() % 16 {
        0 => std::thread::sleep(Duration::from_micros(rng.next() % 200)),
        1..=3 => std::thread::yield_now(),
        _ => {}
    }
}

/// One rank's run through every call. A wrong result is recorded and the
/// rank carries on, so that the other ranks are not left waiting for it.
fn play_rank(
    rank: usize,
    endpoint: &FabricEndpoint,
    scenario: &Scenario,
    layout: WindowLayout,
    prepared: &Prepared,
    nodes: Option<&NodeGroups>,
    refused: bool,
) -> Result<(), String> {
    let size = scenario.size;
    let mut allreduce = Allreduce::new(rank, size, layout.allreduce_offset, scenario.config);
    let mut reduce = Reduce::new(rank, size, layout.reduce_offset, scenario.config.tree);
    if let Some(nodes) = nodes {
        let tree = two_level_links(rank, nodes, scenario.config.tree.degree);
        let (allreduce_choice, reduce_choice) = (allreduce.use_two_level_tree(&tree), reduce.use_two_level_tree(&tree));
        if refused {
            // the flat tree must then serve in the window laid out for two levels
            if allreduce_choice.is_ok() || reduce_choice.is_ok() {
                return Err(format!("rank {rank}: the two-level tree was accepted where it does not fit"));
            }
        } else {
            allreduce_choice.map_err(|why| format!("rank {rank}: allreduce: {why}"))?;
            reduce_choice.map_err(|why| format!("rank {rank}: reduce: {why}"))?;
        }
    }
    let mut rng = XorShift::new(scenario.seed ^ (rank as u64 + 1) << 32);
    let mut first_error = None;
    for (index, call) in scenario.calls.iter().enumerate() {
        skew(&mut rng);
        let send = &prepared.inputs[index][rank];
        let mut recv = vec![0xA5; send.len()];
        let transport_failure = |e: TransportError| format!("call {index} ({call:?}) on rank {rank}: {e}");
        let checked = match call.kind {
            Kind::Allreduce => {
                allreduce.allreduce(endpoint, &NoSideProgress, &call.op, send, &mut recv).map_err(transport_failure)?;
                true
            }
            Kind::Reduce { root } => {
                let mine = (rank == root).then_some(&mut recv[..]);
                reduce.reduce(endpoint, &NoSideProgress, &call.op, root, send, mine).map_err(transport_failure)?;
                rank == root
            }
        };
        let difference = if checked { first_difference(call.op, &recv, &prepared.expected[index]) } else { None };
        if let Some(difference) = difference {
            first_error.get_or_insert(format!("call {index} ({call:?}) on rank {rank}: {difference}"));
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn run(scenario: Scenario) -> Result<(), String> {
    run_placed(scenario, None, false).map(|_| ())
}

/// Runs the scenario, on the two-level tree over `nodes` if given (or, if
/// `refused`, on the flat tree after the two-level one was refused), and
/// returns the (writer, target) pairs whose puts crossed nodes.
fn run_placed(mut scenario: Scenario, nodes: Option<NodeGroups>, refused: bool) -> Result<Vec<(usize, usize)>, String> {
    scenario.config.tree.room_for_two_levels = nodes.is_some();
    let scenario = Arc::new(scenario);
    let nodes = Arc::new(nodes);
    let prepared = Arc::new(prepare(&scenario, if refused { None } else { nodes.as_ref().as_ref() }));
    let layout = WindowLayout::with_reductions(scenario.size, 1, &scenario.config);
    let fabric = FabricConfig {
        put_delay_max: scenario.put_delay,
        seed: scenario.seed,
        nodes: nodes.as_ref().clone(),
        inter_node_put_delay: if nodes.is_some() { Duration::from_micros(10) } else { Duration::ZERO },
        ..FabricConfig::default()
    };
    let endpoints = Fabric::new(scenario.size, layout.window_len, fabric);
    let (done, outcomes) = mpsc::channel();
    for (rank, endpoint) in endpoints.into_iter().enumerate() {
        let scenario = Arc::clone(&scenario);
        let prepared = Arc::clone(&prepared);
        let nodes = Arc::clone(&nodes);
        let done = done.clone();
        std::thread::spawn(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                play_rank(rank, &endpoint, &scenario, layout, &prepared, nodes.as_ref().as_ref(), refused)
            }))
            .unwrap_or_else(|_| Err(format!("rank {rank} panicked")));
            // The fabric's record is shared: the last rank to finish
            // has seen every put.
            let _ = done.send(outcome.map(|()| endpoint.inter_node_pairs()));
        });
    }
    drop(done);
    let deadline = Instant::now() + SCENARIO_DEADLINE;
    let mut first_error = None;
    let mut crossings = std::collections::BTreeSet::new();
    for finished in 0..scenario.size {
        let left = deadline.saturating_duration_since(Instant::now());
        match outcomes.recv_timeout(left) {
            Ok(Ok(pairs)) => crossings.extend(pairs),
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => panic!(
                "size {} k {} seed {:#x}: only {finished} of {} ranks finished within {SCENARIO_DEADLINE:?} (deadlock?)",
                scenario.size, scenario.config.tree.degree, scenario.seed, scenario.size
            ),
        }
    }
    match first_error {
        None => Ok(crossings.into_iter().collect()),
        Some(e) => Err(format!("size {} k {} seed {:#x}: {e}", scenario.size, scenario.config.tree.degree, scenario.seed)),
    }
}

/// Back-to-back calls mixing both collectives at random, so that runs of
/// reduces (where nothing synchronises the ranks between calls) alternate
/// with allreduces; every operation, `counts` and roots at random.
fn mixed_calls(size: usize, counts: &[usize], calls: usize, seed: u64) -> Vec<Call> {
    let ops = [Op::WrappingSum, Op::MatrixProduct, Op::FloatSum];
    let mut rng = XorShift::new(seed);
    (0..calls)
        .map(|i| Call {
            kind: if rng.next() < u64::MAX / 2 {
                Kind::Allreduce
            } else {
                Kind::Reduce { root: rng.next() as usize % size }
            },
            op: ops[(i + i / 3) % ops.len()],
            count: counts[(rng.next() % counts.len() as u64) as usize],
        })
        .collect()
}

fn config(degree: usize, segment_bytes: usize, exchange_max_bytes: usize) -> AllreduceConfig {
    AllreduceConfig { tree: TreeStreamConfig { degree, segment_bytes, policy: yielding_policy(), room_for_two_levels: false }, exchange_max_bytes }
}

#[test]
fn every_size_and_degree_matches_the_serial_reduction() {
    for size in 1..=17 {
        for degree in 1..=8 {
            let seed = 0xA11_0000 + (size * 16 + degree) as u64;
            // 40-byte segments: 5 sums or 1 matrix each, so the longer
            // messages span many segments; up to 64 bytes use the exchange.
            let calls = mixed_calls(size, &[1, 2, 7, 30, 61], 16, seed);
            // Odd degrees also delay every put, by up to 3 µs.
            let put_delay = Duration::from_micros(3 * (degree as u64 % 2));
            run(Scenario { size, config: config(degree, 40, 64), seed, put_delay, calls }).unwrap();
        }
    }
}

#[test]
fn each_variant_when_forced() {
    for size in [2, 3, 5, 8, 13, 17] {
        for degree in [1, 2, 4] {
            for exchange_max_bytes in [0, 4096] {
                let seed = 0xF0_0000 + (size * 64 + degree * 2) as u64 + exchange_max_bytes as u64;
                let calls = mixed_calls(size, &[1, 4, 33, 127], 30, seed);
                let scenario = Scenario {
                    size,
                    config: config(degree, 256, exchange_max_bytes),
                    seed,
                    put_delay: Duration::ZERO,
                    calls,
                };
                run(scenario).unwrap();
            }
        }
    }
}

#[test]
fn hundreds_of_back_to_back_calls_with_delayed_puts() {
    for (size, degree, segment_bytes) in [(2, 1, 64), (3, 2, 40), (4, 1, 48), (6, 3, 64), (9, 2, 40)] {
        let seed = 0xDE1A_0000 + (size * 16 + degree) as u64;
        let calls = mixed_calls(size, &[1, 3, 12, 40], 300, seed);
        let scenario = Scenario {
            size,
            config: config(degree, segment_bytes, 48),
            seed,
            put_delay: Duration::from_micros(15),
            calls,
        };
        run(scenario).unwrap();
    }
}

#[test]
fn long_messages_stream_through_a_bounded_window() {
    for (size, degree) in [(5, 1), (7, 2), (12, 3)] {
        let seed = 0xB16_0000 + (size * 16 + degree) as u64;
        let config = config(degree, 256, 64);
        let calls = vec![
            Call { kind: Kind::Allreduce, op: Op::WrappingSum, count: 8_000 },
            Call { kind: Kind::Reduce { root: size - 1 }, op: Op::MatrixProduct, count: 1_201 },
            Call { kind: Kind::Allreduce, op: Op::FloatSum, count: 3_999 },
            Call { kind: Kind::Reduce { root: 0 }, op: Op::FloatSum, count: 2_000 },
            Call { kind: Kind::Allreduce, op: Op::MatrixProduct, count: 1_000 },
        ];
        let longest = 8_000 * 8;
        let layout = WindowLayout::with_reductions(size, 1, &config);
        // The trees' share of the window: from their first region to the
        // ring's, which follows them (these calls' op mix would send only
        // the commutative ones around the ring, in the glue).
        let reductions_len = layout.ring_offset - layout.allreduce_offset;
        assert!(
            reductions_len < longest / 2,
            "the reductions' window ({reductions_len} bytes) is not much smaller than the message"
        );
        run(Scenario { size, config, seed, put_delay: Duration::from_micros(2), calls }).unwrap();
    }
}

/// The comparisons above must be able to fail: a collective that folds in
/// the wrong order is caught, by the allreduce (both variants) and by the
/// reduce.
#[test]
fn the_checker_catches_a_fold_in_the_wrong_order() {
    for (kind, exchange_max_bytes) in [(Kind::Allreduce, 4096), (Kind::Allreduce, 0), (Kind::Reduce { root: 2 }, 0)] {
        let calls = vec![Call { kind, op: Op::MatrixProductSwapped, count: 3 }];
        let scenario =
            Scenario { size: 5, config: config(2, 64, exchange_max_bytes), seed: 11, put_delay: Duration::ZERO, calls };
        let outcome = run(scenario);
        assert!(outcome.is_err(), "{kind:?} with a swapped fold went unnoticed");
    }
    // The correct matrix product passes the same scenario.
    let calls = vec![Call { kind: Kind::Allreduce, op: Op::MatrixProduct, count: 3 }];
    run(Scenario { size: 5, config: config(2, 64, 0), seed: 11, put_delay: Duration::ZERO, calls }).unwrap();
}

/// The f64 comparison distinguishes associations: with these inputs the
/// grouped fold and the left-to-right fold differ, so a tree that grouped
/// ranks differently from its promise would fail the bit-exact check.
#[test]
fn the_float_reference_tells_associations_apart() {
    let mut rng = XorShift::new(3);
    for (size, degree) in [(5, 1), (9, 2), (17, 3)] {
        let inputs: Vec<Vec<u8>> = (0..size).map(|_| Op::FloatSum.input(&mut rng, 64)).collect();
        let grouped = grouped_fold(Op::FloatSum, &inputs, degree);
        let serial = left_fold(Op::FloatSum, &inputs);
        assert!(first_difference(Op::FloatSum, &grouped, &serial).is_some(), "size {size} k {degree}");
        // ...while both stay close to the true sum.
        for (g, s) in words(&grouped).zip(words(&serial)) {
            let (g, s) = (f64::from_bits(g), f64::from_bits(s));
            assert!((g - s).abs() <= 1e-9 * s.abs().max(1.0), "{g} vs {s}");
        }
    }
}

#[test]
fn degenerate_calls_neither_panic_nor_hang() {
    let config = config(2, 64, 32);
    let layout = WindowLayout::with_reductions(1, 1, &config);
    let single = Fabric::new(1, layout.window_len, FabricConfig::default()).remove(0);
    let mut allreduce = Allreduce::new(0, 1, layout.allreduce_offset, config);
    let mut reduce = Reduce::new(0, 1, layout.reduce_offset, config.tree);
    let send = Op::WrappingSum.input(&mut XorShift::new(5), 9);
    let mut recv = vec![0; send.len()];
    allreduce.allreduce(&single, &NoSideProgress, &Op::WrappingSum, &send, &mut recv).unwrap();
    assert_eq!(recv, send);
    recv.fill(0);
    reduce.reduce(&single, &NoSideProgress, &Op::WrappingSum, 0, &send, Some(&mut recv)).unwrap();
    assert_eq!(recv, send);
    allreduce.allreduce(&single, &NoSideProgress, &Op::WrappingSum, &[], &mut []).unwrap();

    // Count 0 on several ranks returns at once, without waiting for anyone.
    let layout = WindowLayout::with_reductions(3, 1, &config);
    let endpoints = Fabric::new(3, layout.window_len, FabricConfig::default());
    let mut allreduce = Allreduce::new(1, 3, layout.allreduce_offset, config);
    let mut reduce = Reduce::new(1, 3, layout.reduce_offset, config.tree);
    allreduce.allreduce(&endpoints[1], &NoSideProgress, &Op::FloatSum, &[], &mut []).unwrap();
    reduce.reduce(&endpoints[1], &NoSideProgress, &Op::FloatSum, 1, &[], Some(&mut [])).unwrap();
    reduce.reduce(&endpoints[1], &NoSideProgress, &Op::FloatSum, 0, &[], None).unwrap();

    // Misuse is reported before anything is sent.
    assert!(reduce.reduce(&endpoints[1], &NoSideProgress, &Op::WrappingSum, 3, &send, None).is_err());
    assert!(reduce.reduce(&endpoints[1], &NoSideProgress, &Op::WrappingSum, 1, &send, None).is_err());
    assert!(allreduce.allreduce(&endpoints[1], &NoSideProgress, &Op::WrappingSum, &send, &mut recv[..8]).is_err());
    assert!(allreduce.allreduce(&endpoints[1], &NoSideProgress, &Op::WrappingSum, &send[..12], &mut recv[..12]).is_err());
    let tiny_segments = AllreduceConfig { tree: TreeStreamConfig { segment_bytes: 16, ..config.tree }, exchange_max_bytes: 0 };
    let mut tiny = Allreduce::new(1, 3, layout.allreduce_offset, tiny_segments);
    let matrix = vec![0u8; 64];
    assert!(matches!(
        tiny.allreduce(&endpoints[1], &NoSideProgress, &Op::MatrixProduct, &matrix, &mut [0; 64]),
        Err(TransportError::TooLarge { len: 32, max: 16 })
    ));
    assert_eq!(allreduce.epoch() + reduce.epoch() + tiny.epoch(), 0, "a rejected or empty call used the window");
}


/// Mixed calls, every operation (the matrix product is not commutative),
/// on consecutive nodes of 1, 2 and 7 ranks in several orders: results
/// in rank order on the two-level tree, and only leaders write across
/// nodes, apart from rank 0 relaying a reduce's result to its root (and
/// the root's credits for it).
#[test]
fn the_two_level_tree_on_uneven_nodes_matches_the_serial_reduction() {
    // (nodes of 2, 1, 7, 1 and 2 need more rings at degree 1 than the
    // window holds: the test below)
    let placements = [(&[1, 2, 7][..], 1), (&[7, 2, 1], 1), (&[2, 7, 1], 1), (&[2, 1, 7, 1, 2], 2), (&[1, 1, 1, 1], 1), (&[6], 1)];
    for (index, (sizes, least_degree)) in placements.into_iter().enumerate() {
        let nodes = blocks(sizes);
        let size = nodes.size();
        let leaders = nodes.leaders();
        for degree in least_degree..=3 {
            let seed = 0x2_1EAF_0000 + (index * 16 + degree) as u64;
            let calls = mixed_calls(size, &[1, 2, 7, 30, 61], 40, seed);
            let roots: Vec<usize> = calls.iter().filter_map(|call| match call.kind {
                Kind::Reduce { root } => Some(root),
                Kind::Allreduce => None,
            }).collect();
            let put_delay = Duration::from_micros(2 * (degree as u64 % 2));
            let scenario = Scenario { size, config: config(degree, 40, 64), seed, put_delay, calls };
            let crossings = run_placed(scenario, Some(nodes.clone()), false).unwrap_or_else(|e| panic!("nodes {sizes:?}: {e}"));
            for (writer, target) in crossings {
                let between_leaders = leaders.contains(&writer) && leaders.contains(&target);
                // The relay's segments, and the root's credits back.
                let relay = (writer == 0 && roots.contains(&target)) || (target == 0 && roots.contains(&writer));
                assert!(between_leaders || relay, "nodes {sizes:?} k {degree}: rank {writer} wrote to rank {target} on another node");
            }
        }
    }
}

/// The checks above can fail: a fold in the wrong order is caught on the
/// two-level tree too.
#[test]
fn the_two_level_checker_catches_a_fold_in_the_wrong_order() {
    for kind in [Kind::Allreduce, Kind::Reduce { root: 4 }] {
        let calls = vec![Call { kind, op: Op::MatrixProductSwapped, count: 3 }];
        let scenario = Scenario { size: 6, config: config(2, 64, 4096), seed: 12, put_delay: Duration::ZERO, calls };
        assert!(run_placed(scenario, Some(blocks(&[2, 3, 1])), false).is_err(), "{kind:?} with a swapped fold went unnoticed");
    }
}

/// A placement whose two-level tree needs more slot rings than the window
/// holds is refused before anything is sent, and the flat tree it keeps
/// still serves.
#[test]
fn a_two_level_tree_beyond_the_reserved_rings_is_refused() {
    let nodes = blocks(&[2, 1, 7, 1, 2]);
    let size = nodes.size();
    let mut scenario_config = config(1, 40, 0);
    scenario_config.tree.room_for_two_levels = true;
    let layout = WindowLayout::with_reductions(size, 1, &scenario_config);
    for rank in 0..size {
        let tree = two_level_links(rank, &nodes, 1);
        let mut allreduce = Allreduce::new(rank, size, layout.allreduce_offset, scenario_config);
        let why = allreduce.use_two_level_tree(&tree).unwrap_err();
        assert_eq!(why, "the two-level tree needs 6 slot ring(s) a rank, the window holds 5");
        let mut reduce = Reduce::new(rank, size, layout.reduce_offset, scenario_config.tree);
        assert!(reduce.use_two_level_tree(&tree).is_err());
        assert!(!allreduce.is_two_level());
    }
    // ... and the flat tree serves in that same window, rank order kept
    let calls = mixed_calls(size, &[1, 7, 30], 10, 0x2EF);
    run_placed(Scenario { size, config: config(1, 40, 0), seed: 0x2EF, put_delay: Duration::ZERO, calls }, Some(nodes), true).unwrap();
}
