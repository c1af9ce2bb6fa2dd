//! Parallel allreduce and reduce (each rank reduces its own slice of every
//! rank's input, read with process_vm_readv, then the slices are gathered)
//! on threads as ranks, over the test fabric's shared windows and over real
//! shared memory: lengths around the slice boundaries (fewer elements than
//! ranks, one element, counts not divisible by the ranks, staging-chunk
//! edges), up to 64 MiB, every root, in place, np 2..8, interleaved with
//! calls below the threshold that take the tree. Every result is compared
//! element by element with a serial left-to-right fold of every rank's
//! input, computed here from the inputs' formula with the operation's own
//! arithmetic (never through `Reduction::combine`); the affine-map
//! composition is not commutative, so any other operand order fails.

use crate::common;

use common::ReductionKind as Kind;

use std::time::Duration;

use btl_ibmc::fabric::{run_ranks_watched, Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::{establish, CrossMemoryRefusal, MulticastKind, NoSideProgress, PeerReads, Transport};
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::large_reduction::parallel::CHUNK_BYTES;
use coll_rdma_core::collectives::reduce::Reduce;
use coll_rdma_core::reduction::Reduction;

const MIB: usize = 1 << 20;
const PATIENCE: Duration = Duration::from_secs(900);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Wrapping sum of u64 words (8-byte elements).
    Sum,
    /// Composition of affine maps x -> a*x + b over wrapping u64, with a
    /// call counter: element (a, b, n), 24 bytes. (lower ∘ higher) applies
    /// higher first: (a_l*a_h, a_l*b_h + b_l, n_l + n_h). Associative, not
    /// commutative, and 24 bytes do not divide the staging chunk.
    Affine,
}

type Element = [u64; 3];

impl Op {
    fn words(self) -> usize {
        match self {
            Op::Sum => 1,
            Op::Affine => 3,
        }
    }

    /// lower ∘ higher on typed values: the reference's arithmetic.
    fn compose(self, lower: Element, higher: Element) -> Element {
        match self {
            Op::Sum => [lower[0].wrapping_add(higher[0]), 0, 0],
            Op::Affine => [
                lower[0].wrapping_mul(higher[0]),
                lower[0].wrapping_mul(higher[1]).wrapping_add(lower[1]),
                lower[2].wrapping_add(higher[2]),
            ],
        }
    }
}

fn load(bytes: &[u8], words: usize) -> Element {
    let mut element = [0; 3];
    for (slot, chunk) in element.iter_mut().zip(bytes.chunks_exact(8)).take(words) {
        *slot = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
    }
    element
}

fn store(bytes: &mut [u8], element: Element) {
    for (chunk, word) in bytes.chunks_exact_mut(8).zip(element) {
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
}

impl Reduction for Op {
    fn element_size(&self) -> usize {
        8 * self.words()
    }

    fn is_commutative(&self) -> bool {
        *self == Op::Sum
    }

    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        let size = self.element_size();
        for (low, high) in lower.chunks_exact(size).zip(higher.chunks_exact_mut(size)) {
            let result = self.compose(load(low, self.words()), load(high, self.words()));
            store(high, result);
        }
    }
}

fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Element `index` of `rank`'s input to call `call`: odd multipliers so
/// that products do not collapse to zero.
fn input_element(op: Op, call: usize, rank: usize, index: usize) -> Element {
    let seed = mix(((call as u64) << 40) ^ ((rank as u64) << 32) ^ index as u64);
    match op {
        Op::Sum => [seed, 0, 0],
        Op::Affine => [mix(seed) | 1, mix(seed ^ 0x55), 1 << rank],
    }
}

fn fill_input(op: Op, call: usize, rank: usize, buffer: &mut [u8]) {
    for (index, bytes) in buffer.chunks_exact_mut(op.element_size()).enumerate() {
        store(bytes, input_element(op, call, rank, index));
    }
}

/// r0 ∘ r1 ∘ ... ∘ r(size-1), folded left to right.
fn expected_element(op: Op, call: usize, size: usize, index: usize) -> Element {
    (1..size).fold(input_element(op, call, 0, index), |acc, rank| op.compose(acc, input_element(op, call, rank, index)))
}

fn first_wrong_element(op: Op, call: usize, size: usize, result: &[u8]) -> Option<usize> {
    result
        .chunks_exact(op.element_size())
        .enumerate()
        .position(|(index, bytes)| load(bytes, op.words()) != expected_element(op, call, size, index))
}

#[derive(Clone, Copy, Debug)]
struct Call {
    kind: Kind,
    op: Op,
    count: usize,
    in_place: bool,
}

fn tree_config() -> AllreduceConfig {
    let mut config = AllreduceConfig::default();
    config.tree.policy = common::yielding_policy(50);
    config
}

fn reduce_offset(size: usize) -> usize {
    Allreduce::region_len(size, &tree_config()).next_multiple_of(4096)
}

fn window_len(size: usize) -> usize {
    reduce_offset(size) + Reduce::region_len(size, &tree_config().tree)
}

/// Where the parallel reduction starts, and where reduce splits it into
/// slices (shorter: unsplit, by the root alone or down the read tree).
#[derive(Clone, Copy, Debug)]
struct Thresholds {
    parallel_min_bytes: usize,
    slices_min_bytes: usize,
    /// Ranks that hold a slice at most.
    workers: usize,
    /// Bytes folded at a time.
    chunk_bytes: usize,
}

/// The chunk of the boundary scripts, shorter than the component's
/// `CHUNK_BYTES`: their lengths cross chunk boundaries at a quarter of the
/// cost.
const TEST_CHUNK_BYTES: usize = 131072;

/// Every length in parallel, every reduce in slices.
const ALWAYS_SLICES: Thresholds = Thresholds { parallel_min_bytes: 1, slices_min_bytes: 0, workers: usize::MAX, chunk_bytes: TEST_CHUNK_BYTES };
/// Every length in parallel, every reduce unsplit: by the root alone, or
/// down the read tree on 4 ranks or more where the op allows.
const ALWAYS_ROOT_ALONE: Thresholds = Thresholds { parallel_min_bytes: 1, slices_min_bytes: usize::MAX, workers: usize::MAX, chunk_bytes: TEST_CHUNK_BYTES };

/// How many calls of a rank's script went which way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Served {
    parallel_allreduces: u64,
    parallel_reduces: u64,
    /// Of `parallel_reduces`, those the root reduced alone.
    root_alone_reduces: u64,
    /// Of `parallel_reduces`, those gathered down the read tree.
    read_tree_reduces: u64,
}

/// Plays `script` on one rank with the given thresholds; returns how many
/// calls went which way.
fn play<T: Transport>(rank: usize, size: usize, transport: &T, thresholds: Thresholds, script: &[Call]) -> Served {
    let mut allreduce = Allreduce::new(rank, size, 0, tree_config());
    let mut reduce = Reduce::new(rank, size, reduce_offset(size), tree_config().tree);
    allreduce.parallel_mut().set_min_bytes(thresholds.parallel_min_bytes);
    reduce.parallel_mut().set_min_bytes(thresholds.parallel_min_bytes);
    reduce.parallel_mut().set_slices_min_bytes(thresholds.slices_min_bytes);
    allreduce.parallel_mut().set_workers(thresholds.workers);
    reduce.parallel_mut().set_workers(thresholds.workers);
    allreduce.parallel_mut().set_chunk_bytes(thresholds.chunk_bytes);
    reduce.parallel_mut().set_chunk_bytes(thresholds.chunk_bytes);
    for (index, call) in script.iter().enumerate() {
        let op = call.op;
        let len = call.count * op.element_size();
        let mut send = vec![0u8; len];
        fill_input(op, index, rank, &mut send);
        let mut recv = vec![0xEEu8; len];
        let (outcome, checked) = match call.kind {
            Kind::Allreduce if call.in_place => (allreduce.allreduce_in_place(transport, &NoSideProgress, &op, &mut send), Some(&send)),
            Kind::Allreduce => (allreduce.allreduce(transport, &NoSideProgress, &op, &send, &mut recv), Some(&recv)),
            Kind::Reduce { root } if root == rank && call.in_place => {
                (reduce.reduce_in_place_at_root(transport, &NoSideProgress, &op, root, &mut send), Some(&send))
            }
            Kind::Reduce { root } if root == rank => (reduce.reduce(transport, &NoSideProgress, &op, root, &send, Some(&mut recv)), Some(&recv)),
            Kind::Reduce { root } => (reduce.reduce(transport, &NoSideProgress, &op, root, &send, None), None),
        };
        outcome.unwrap_or_else(|e| panic!("np {size} rank {rank} call {index} {call:?}: {e}"));
        if let Some(at) = checked.and_then(|result| first_wrong_element(op, index, size, result)) {
            panic!("np {size} rank {rank} call {index} {call:?}: element {at} of {} differs from the serial fold", call.count);
        }
        let used_in_place = call.in_place && !matches!(call.kind, Kind::Reduce { root } if root != rank);
        if !used_in_place {
            // The contribution must come back untouched.
            let mut original = vec![0u8; len];
            fill_input(op, index, rank, &mut original);
            assert!(send == original, "np {size} rank {rank} call {index} {call:?}: the send buffer changed");
        }
    }
    Served {
        parallel_allreduces: allreduce.parallel().calls(),
        parallel_reduces: reduce.parallel().calls(),
        root_alone_reduces: reduce.parallel().root_alone_calls(),
        read_tree_reduces: reduce.parallel().read_tree_calls(),
    }
}

/// Fabric endpoints with shared windows and cross-memory attach (refused
/// if `refusing` names a rank).
fn fabric(size: usize, refusing: Option<usize>) -> Vec<FabricEndpoint> {
    let config = FabricConfig { multicast_kind: MulticastKind::SharedWindow, ..FabricConfig::default() };
    run_ranks_watched(Fabric::new(size, window_len(size), config), PATIENCE, move |rank, mut endpoint: FabricEndpoint| {
        let verdict = endpoint.enable_cross_memory(refusing == Some(rank));
        assert_eq!(verdict.is_ok(), refusing.is_none(), "{verdict:?}");
        if let Err(refusal) = verdict {
            assert!(matches!(refusal, CrossMemoryRefusal::Refused { .. }), "{refusal:?}");
        }
        endpoint
    })
}

fn run_fabric(size: usize, refusing: Option<usize>, thresholds: Thresholds, script: Vec<Call>) -> Vec<Served> {
    run_ranks_watched(fabric(size, refusing), PATIENCE, move |rank, endpoint: FabricEndpoint| {
        play(rank, size, &endpoint, thresholds, &script)
    })
}

fn served(parallel_allreduces: u64, parallel_reduces: u64, (root_alone_reduces, read_tree_reduces): (u64, u64)) -> Served {
    Served { parallel_allreduces, parallel_reduces, root_alone_reduces, read_tree_reduces }
}

/// Of the unsplit reduces among `calls` on `size` ranks, (by the root
/// alone, down the read tree): the tree from 4 ranks, for a commutative op
/// from any root, for another from rank 0 only.
fn unsplit_ways<'a>(size: usize, calls: impl Iterator<Item = &'a Call>) -> (u64, u64) {
    let (mut alone, mut tree) = (0, 0);
    for call in calls {
        match call.kind {
            Kind::Reduce { root } if size >= 4 && (call.op == Op::Sum || root == 0) => tree += 1,
            Kind::Reduce { .. } => alone += 1,
            Kind::Allreduce => {}
        }
    }
    (alone, tree)
}

/// (allreduces, reduces) in `script`.
fn kinds(script: &[Call]) -> (u64, u64) {
    let allreduces = script.iter().filter(|call| matches!(call.kind, Kind::Allreduce)).count() as u64;
    (allreduces, script.len() as u64 - allreduces)
}

/// Counts around the slice boundaries for `size` ranks and around the
/// staging chunk (131072 bytes: 16384 words, 5461 affine elements per chunk).
fn boundary_counts(size: usize, op: Op) -> Vec<usize> {
    let per_chunk = TEST_CHUNK_BYTES / op.element_size();
    vec![1, size - 1, size, size + 1, 3 * size + 2, per_chunk * size - 1, per_chunk * size + size + 1, 2 * per_chunk * size + 5]
}

/// Every count, each as allreduce and as reduce from every root, in place
/// and not, alternating the operations.
fn boundary_script(size: usize) -> Vec<Call> {
    let mut calls = Vec::new();
    for op in [Op::Affine, Op::Sum] {
        for (step, count) in boundary_counts(size, op).into_iter().enumerate() {
            let count = count.max(1);
            for (kind, in_place) in common::every_root_calls(size, step) {
                calls.push(Call { kind, op, count, in_place });
            }
        }
    }
    calls
}

#[test]
fn every_boundary_length_root_and_in_place_matches_the_canonical_fold_np2_to_8() {
    for size in 2..=8 {
        let script = boundary_script(size);
        let (allreduces, reduces) = kinds(&script);
        let counts = run_fabric(size, None, ALWAYS_SLICES, script);
        for (rank, &counts) in counts.iter().enumerate() {
            assert_eq!(counts, served(allreduces, reduces, (0, 0)), "np {size} rank {rank}");
        }
    }
}

#[test]
fn unsplit_reduces_by_the_root_alone_or_down_the_read_tree_match_the_canonical_fold_at_every_boundary_length_root_and_in_place_np2_to_9() {
    for size in 2..=9 {
        let script = boundary_script(size);
        let (allreduces, reduces) = kinds(&script);
        let ways = unsplit_ways(size, script.iter());
        assert_eq!(ways.0 + ways.1, reduces);
        assert!(size < 4 || ways.1 > ways.0, "np {size}: the script should go mostly down the tree: {ways:?}");
        let counts = run_fabric(size, None, ALWAYS_ROOT_ALONE, script);
        for (rank, &counts) in counts.iter().enumerate() {
            assert_eq!(counts, served(allreduces, reduces, ways), "np {size} rank {rank}");
        }
    }
}

#[test]
fn fewer_working_ranks_than_ranks_match_the_canonical_fold_at_every_boundary_length_root_and_in_place() {
    // As on a node with more ranks than cores: only `workers` ranks hold
    // a slice, the others announce their buffers and wait.
    for size in 3..=8 {
        for workers in [1, 2, size - 1] {
            let script = boundary_script(size);
            let (allreduces, reduces) = kinds(&script);
            let counts = run_fabric(size, None, Thresholds { workers, ..ALWAYS_SLICES }, script);
            for (rank, &counts) in counts.iter().enumerate() {
                assert_eq!(counts, served(allreduces, reduces, (0, 0)), "np {size} workers {workers} rank {rank}");
            }
        }
    }
}

#[test]
fn reduces_around_the_slices_threshold_take_the_right_schedule_and_interleave_with_the_tree() {
    let (tree_below, slices_from) = (4096, 65536);
    let thresholds = Thresholds { parallel_min_bytes: tree_below, slices_min_bytes: slices_from, ..ALWAYS_SLICES };
    for size in [2, 3, 4, 5] {
        let mut script = Vec::new();
        // (bytes of u64 sums, affine elements): under, at and over each threshold.
        let lengths = [tree_below - 8, tree_below, tree_below + 8, slices_from - 8, slices_from, slices_from + 8, 8, 3 * slices_from + 16];
        for (step, bytes) in lengths.into_iter().enumerate() {
            let root = step % size;
            script.push(Call { kind: Kind::Reduce { root }, op: Op::Sum, count: bytes / 8, in_place: step % 2 == 0 });
            script.push(Call { kind: Kind::Reduce { root: size - 1 - root }, op: Op::Affine, count: bytes / 24 + 1, in_place: step % 2 == 1 });
            script.push(Call { kind: Kind::Allreduce, op: Op::Sum, count: bytes / 8, in_place: step % 2 == 1 });
        }
        let bytes = |call: &Call| call.count * call.op.element_size();
        let is_reduce = |call: &Call| matches!(call.kind, Kind::Reduce { .. });
        let count = |wanted: &dyn Fn(&Call) -> bool| script.iter().filter(|call| wanted(call)).count() as u64;
        let parallel_reduces = count(&|call| is_reduce(call) && bytes(call) >= tree_below);
        let unsplit = count(&|call| is_reduce(call) && bytes(call) >= tree_below && bytes(call) < slices_from);
        let ways = unsplit_ways(size, script.iter().filter(|call| bytes(call) >= tree_below && bytes(call) < slices_from));
        let parallel_allreduces = count(&|call| !is_reduce(call) && bytes(call) >= tree_below);
        // Sums: 4096, 4104, 65528, 65536, 65544, 196624 bytes in parallel,
        // of which the first three by the root alone; affine (whole
        // elements, rounded up): 4104, 4104, 4128 by the root alone,
        // 65544, 65544, 65568, 196632 in slices, 24 through the tree.
        assert_eq!((parallel_reduces, unsplit), (13, 6), "the script changed");
        let counts = run_fabric(size, None, thresholds, script);
        for (rank, &counts) in counts.iter().enumerate() {
            assert_eq!(counts, served(parallel_allreduces, parallel_reduces, ways), "np {size} rank {rank}");
        }
    }
}

#[test]
fn large_messages_up_to_64_mib_from_every_root_and_in_place() {
    for size in [2, 3, 4] {
        let words = |bytes: usize| bytes / 8;
        let mut script = vec![
            Call { kind: Kind::Allreduce, op: Op::Sum, count: words(64 * MIB), in_place: false },
            Call { kind: Kind::Allreduce, op: Op::Sum, count: words(64 * MIB) - 1, in_place: true },
            Call { kind: Kind::Allreduce, op: Op::Affine, count: 16 * MIB / 24 + 1, in_place: true },
        ];
        for root in 0..size {
            script.push(Call { kind: Kind::Reduce { root }, op: Op::Sum, count: words(64 * MIB) - root, in_place: root % 2 == 1 });
        }
        script.push(Call { kind: Kind::Reduce { root: size - 1 }, op: Op::Affine, count: 4 * MIB / 24 + 7, in_place: false });
        // The component's own chunk: 64 MiB crosses its boundaries too.
        let counts = run_fabric(size, None, Thresholds { chunk_bytes: CHUNK_BYTES, ..ALWAYS_SLICES }, script);
        assert!(counts.iter().all(|&counts| counts == served(3, size as u64 + 1, (0, 0))), "np {size}: {counts:?}");
    }
}

#[test]
fn below_the_threshold_the_tree_serves_and_the_two_interleave() {
    let size = 3;
    let threshold = 64 * 1024;
    let mut script = Vec::new();
    for (step, bytes) in [threshold - 8, threshold, 8, threshold * 3 + 8, 256, threshold + 24].into_iter().enumerate() {
        script.push(Call { kind: Kind::Allreduce, op: Op::Sum, count: bytes / 8, in_place: step % 2 == 0 });
        script.push(Call { kind: Kind::Reduce { root: step % size }, op: Op::Affine, count: bytes / 24 + 1, in_place: step % 2 == 1 });
    }
    let counts = run_fabric(size, None, Thresholds { parallel_min_bytes: threshold, ..ALWAYS_SLICES }, script);
    // At or above the threshold: 3 allreduces (65536, 196616, 65560
    // bytes) and 4 reduces (65544, 65544, 196632, 65568 bytes).
    assert!(counts.iter().all(|&counts| counts == served(3, 4, (0, 0))), "{counts:?}");
}

#[test]
fn one_rank_refusing_cross_memory_sends_every_rank_down_the_tree() {
    for refusing in [0, 2] {
        let size = 3;
        let script = boundary_script(size);
        let counts = run_fabric(size, Some(refusing), ALWAYS_SLICES, script);
        assert!(counts.iter().all(|&counts| counts == served(0, 0, (0, 0))), "rank {refusing} refused, yet: {counts:?}");
    }
}

#[test]
fn real_shared_memory_reduces_in_parallel() {
    for size in [3, 4] {
        let exchanges = Fabric::new(size, 0, FabricConfig::default());
        let transports = run_ranks_watched(exchanges, PATIENCE, move |rank, exchange: FabricEndpoint| {
            let mut shm = establish(&exchange, rank, size, window_len(size)).expect("shm");
            shm.enable_cross_memory(&exchange, false).expect("cross-memory attach between threads of one process");
            assert!(shm.reads_peer_memory());
            shm
        });
        let mut script = boundary_script(size);
        script.push(Call { kind: Kind::Allreduce, op: Op::Sum, count: 8 * MIB / 8 + 3, in_place: true });
        script.push(Call { kind: Kind::Reduce { root: 1 }, op: Op::Affine, count: 8 * MIB / 24, in_place: false });
        // Reduces below 64 KiB unsplit (at np=4 mostly down the read
        // tree), the others in slices.
        let thresholds = Thresholds { slices_min_bytes: 65536, ..ALWAYS_SLICES };
        let (allreduces, reduces) = kinds(&script);
        let ways = unsplit_ways(size, script.iter().filter(|call| call.count * call.op.element_size() < thresholds.slices_min_bytes));
        assert!(ways.0 + ways.1 > 0 && ways.0 + ways.1 < reduces, "the script takes both schedules");
        let counts = run_ranks_watched(transports, PATIENCE, move |rank, shm| play(rank, size, &shm, thresholds, &script));
        assert!(counts.iter().all(|&counts| counts == served(allreduces, reduces, ways)), "np {size}: {counts:?}");
    }
}
