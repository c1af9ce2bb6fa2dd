//! The ring allreduce and reduce (reduce-scatter, then allgather, between
//! neighbours) on threads as ranks over the test fabric, whose ranks cannot
//! read each other's memory (as across nodes): lengths around the block and
//! segment boundaries (fewer elements than ranks, one element, blocks of
//! unequal length), element sizes of 1, 8 and 24 bytes, every root, in
//! place, np 2..9, slots reused across hundreds of back-to-back calls with
//! delayed puts, and messages far longer than the window. Every result is
//! compared with a sum computed here from the inputs' formula, not through
//! `Reduction::combine`. Non-commutative operations are refused (the glue
//! gives them to the tree, which folds in rank order); an operation that
//! lies about being commutative is caught by the same check, which shows
//! it can fail.

use crate::common;

use common::ReductionKind as Kind;

use std::time::Duration;

use btl_ibmc::fabric::{run_ranks_watched, Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::{NoSideProgress, Transport, WaitPolicy};
use coll_rdma_core::collectives::large_reduction::buffers::{Gather, ReductionBuffers};
use coll_rdma_core::collectives::large_reduction::ring::{RingLengths, RingReduction};
use coll_rdma_core::reduction::Reduction;

const PATIENCE: Duration = Duration::from_secs(600);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Wrapping sum of bytes (1-byte elements).
    ByteSum,
    /// Wrapping sum of u64 words.
    WordSum,
    /// Wrapping sums of three u64 words at once (24-byte elements, which
    /// divide no segment evenly).
    TripleSum,
    /// Composition of affine maps x -> a*x + b (two u64 words): not
    /// commutative, so the ring must not take it.
    Affine,
    /// `Affine`, claiming to be commutative: the ring takes it and folds
    /// blocks in another order, which the check must catch.
    AffineClaimingCommutative,
}

impl Op {
    fn words(self) -> usize {
        match self {
            Op::ByteSum | Op::WordSum => 1,
            Op::Affine | Op::AffineClaimingCommutative => 2,
            Op::TripleSum => 3,
        }
    }

    fn affine(self) -> bool {
        matches!(self, Op::Affine | Op::AffineClaimingCommutative)
    }
}

impl Reduction for Op {
    fn element_size(&self) -> usize {
        if *self == Op::ByteSum { 1 } else { 8 * self.words() }
    }

    fn is_commutative(&self) -> bool {
        *self != Op::Affine
    }

    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        if *self == Op::ByteSum {
            for (low, high) in lower.iter().zip(higher.iter_mut()) {
                *high = high.wrapping_add(*low);
            }
            return;
        }
        let size = self.element_size();
        for (low, high) in lower.chunks_exact(size).zip(higher.chunks_exact_mut(size)) {
            let (l, h) = (words_of(low), words_of(high));
            let out: Vec<u64> = if self.affine() {
                vec![l[0].wrapping_mul(h[0]), l[0].wrapping_mul(h[1]).wrapping_add(l[1])]
            } else {
                l.iter().zip(&h).map(|(a, b)| a.wrapping_add(*b)).collect()
            };
            for (chunk, word) in high.chunks_exact_mut(8).zip(out) {
                chunk.copy_from_slice(&word.to_ne_bytes());
            }
        }
    }
}

fn words_of(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks_exact(8).map(|chunk| u64::from_ne_bytes(chunk.try_into().expect("8 bytes"))).collect()
}

fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Word `word` of `rank`'s input to call `call` (odd, so affine products
/// stay informative).
fn input_word(call: usize, rank: usize, word: usize) -> u64 {
    mix(((call as u64) << 40) ^ ((rank as u64) << 32) ^ word as u64) | 1
}

fn input(op: Op, call: usize, rank: usize, len: usize) -> Vec<u8> {
    if op == Op::ByteSum {
        return (0..len).map(|index| input_word(call, rank, index) as u8).collect();
    }
    (0..len / 8).flat_map(|word| input_word(call, rank, word).to_ne_bytes()).collect()
}

/// The reduction of every rank's input, from the formula: sums in any
/// order, affine maps composed in rank order r0 ∘ r1 ∘ ... .
fn expected(op: Op, call: usize, size: usize, len: usize) -> Vec<u8> {
    if op == Op::ByteSum {
        return (0..len).map(|index| (0..size).fold(0u8, |sum, rank| sum.wrapping_add(input_word(call, rank, index) as u8))).collect();
    }
    let words = len / 8;
    let mut out = Vec::with_capacity(len);
    if op.affine() {
        for element in 0..words / 2 {
            let (mut a, mut b) = (input_word(call, 0, 2 * element), input_word(call, 0, 2 * element + 1));
            for rank in 1..size {
                let (ah, bh) = (input_word(call, rank, 2 * element), input_word(call, rank, 2 * element + 1));
                (a, b) = (a.wrapping_mul(ah), a.wrapping_mul(bh).wrapping_add(b));
            }
            out.extend(a.to_ne_bytes());
            out.extend(b.to_ne_bytes());
        }
    } else {
        for word in 0..words {
            out.extend((0..size).fold(0u64, |sum, rank| sum.wrapping_add(input_word(call, rank, word))).to_ne_bytes());
        }
    }
    out
}

#[derive(Clone, Copy, Debug)]
struct Call {
    kind: Kind,
    op: Op,
    bytes: usize,
    in_place: bool,
}

#[derive(Clone, Copy, Debug)]
struct Setup {
    size: usize,
    segment_bytes: usize,
    put_delay: Duration,
}

fn policy() -> WaitPolicy {
    common::yielding_policy(50)
}

/// Plays `script` on one rank around the ring; returns how many calls it
/// served, or the first wrong result.
fn play<T: Transport>(rank: usize, transport: &T, setup: Setup, script: &[Call]) -> Result<u64, String> {
    let size = setup.size;
    let mut ring = RingReduction::new(rank, size, 0, setup.segment_bytes);
    let policy = policy();
    for (index, call) in script.iter().enumerate() {
        let op = call.op;
        let mut send = input(op, index, rank, call.bytes);
        let mut recv = vec![0xEEu8; call.bytes];
        let (gather, gathers) = match call.kind {
            Kind::Allreduce => (Gather::All, true),
            Kind::Reduce { root } => (Gather::Root(root), root == rank),
        };
        let in_place = call.in_place && gathers;
        let buffers = match () {
            _ if in_place => ReductionBuffers::InPlace(&mut send),
            _ if gathers => ReductionBuffers::Separate { send: &send, recv: &mut recv },
            // a reduce's other ranks pass no receive buffer
            _ => ReductionBuffers::Separate { send: &send, recv: &mut [] },
        };
        ring.reduce(transport, policy.serving(&NoSideProgress), &op, gather, buffers)
            .map_err(|e| format!("np {size} rank {rank} call {index} {call:?}: {e}"))?;
        let result = if in_place { &send } else { &recv };
        if gathers {
            let want = expected(op, index, size, call.bytes);
            if let Some(at) = result.iter().zip(&want).position(|(got, want)| got != want) {
                return Err(format!("np {size} rank {rank} call {index} {call:?}: byte {at} of {} differs from the reference", call.bytes));
            }
        }
        if !in_place && send != input(op, index, rank, call.bytes) {
            return Err(format!("np {size} rank {rank} call {index} {call:?}: the send buffer changed"));
        }
    }
    Ok(ring.calls())
}

fn run(setup: Setup, script: Vec<Call>) -> Vec<Result<u64, String>> {
    let window_len = RingReduction::region_len(setup.segment_bytes);
    let fabric = FabricConfig { put_delay_max: setup.put_delay, seed: setup.size as u64, ..FabricConfig::default() };
    let endpoints = Fabric::new(setup.size, window_len, fabric);
    run_ranks_watched(endpoints, PATIENCE, move |rank, endpoint: FabricEndpoint| play(rank, &endpoint, setup, &script))
}

fn assert_all_right(setup: Setup, script: Vec<Call>) {
    let want = script.iter().filter(|call| call.bytes > 0).count() as u64;
    for (rank, outcome) in run(setup, script).into_iter().enumerate() {
        assert_eq!(outcome, Ok(want), "{setup:?} rank {rank}");
    }
}

/// Each length as allreduce and as reduce from every root, in place and
/// not, for every operation.
fn every_root_script(size: usize, ops: &[Op], lengths: &[usize]) -> Vec<Call> {
    let mut calls = Vec::new();
    for (step, &bytes) in lengths.iter().enumerate() {
        for &op in ops {
            let bytes = bytes.next_multiple_of(op.element_size()).max(op.element_size());
            for (kind, in_place) in common::every_root_calls(size, step) {
                calls.push(Call { kind, op, bytes, in_place });
            }
        }
    }
    calls
}

#[test]
fn every_block_and_segment_boundary_root_and_in_place_matches_the_reference_np2_to_9() {
    let segment_bytes = 240;
    for size in 2..=9 {
        // one element, fewer elements than ranks, blocks one element apart,
        // a block of exactly one segment and one byte more
        let lengths = [1, size - 1, size, size + 1, 3 * size + 2, segment_bytes * size, segment_bytes * size + 24, 5 * segment_bytes * size - 8];
        let setup = Setup { size, segment_bytes, put_delay: Duration::ZERO };
        assert_all_right(setup, every_root_script(size, &[Op::ByteSum, Op::WordSum, Op::TripleSum], &lengths));
    }
}

#[test]
fn hundreds_of_back_to_back_calls_reuse_the_slots_with_delayed_puts() {
    for (size, segment_bytes) in [(2, 64), (3, 40), (4, 64), (7, 48)] {
        let mut rng = common::XorShift::new(0x7175 + size as u64);
        let script: Vec<Call> = (0..300)
            .map(|_| {
                let kind = if rng.below(3) == 0 { Kind::Reduce { root: rng.below(size) } } else { Kind::Allreduce };
                let op = [Op::WordSum, Op::TripleSum, Op::ByteSum][rng.below(3)];
                let bytes = (1 + rng.below(40 * segment_bytes)).next_multiple_of(op.element_size());
                Call { kind, op, bytes, in_place: rng.below(2) == 0 }
            })
            .collect();
        let setup = Setup { size, segment_bytes, put_delay: Duration::from_micros(15) };
        assert_all_right(setup, script);
    }
}

#[test]
fn messages_far_longer_than_the_window_stream_through_it() {
    for size in [3, 4] {
        let setup = Setup { size, segment_bytes: RingReduction::DEFAULT_SEGMENT_BYTES, put_delay: Duration::ZERO };
        let script = every_root_script(size, &[Op::WordSum], &[8 << 20]);
        assert!(RingReduction::region_len(setup.segment_bytes) < (8 << 20) / 32, "the window is not much smaller than the message");
        assert_all_right(setup, script);
    }
}

#[test]
fn the_lengths_it_takes_are_the_same_whatever_the_rank() {
    let ring = |rank| RingReduction::new(rank, 4, 0, 4096);
    let lengths = RingLengths { from: Some(16384), up_to: Some(262144) };
    for rank in 0..4 {
        let ring = ring(rank);
        assert!(!ring.applies(16383, 8, true, lengths));
        assert!(ring.applies(16384, 8, true, lengths) && ring.applies(262144, 8, true, lengths));
        assert!(!ring.applies(262145, 8, true, lengths));
        assert!(!ring.applies(65536, 8, false, lengths), "a non-commutative op must keep the tree");
        assert!(!ring.applies(65536, 8, true, RingLengths { from: None, up_to: None }));
        assert!(ring.applies(1 << 30, 8, true, RingLengths { from: Some(1), up_to: None }));
        assert!(ring.applies(65536, 4096, true, lengths) && !ring.applies(65536, 4104, true, lengths), "an element must fit a slot");
    }
    assert!(!RingReduction::new(0, 1, 0, 4096).applies(65536, 8, true, lengths), "one rank needs no ring");
}

#[test]
fn a_non_commutative_op_is_refused_on_every_rank_before_anything_moves() {
    let setup = Setup { size: 3, segment_bytes: 64, put_delay: Duration::ZERO };
    let script = vec![Call { kind: Kind::Allreduce, op: Op::Affine, bytes: 16 * 64, in_place: false }];
    for outcome in run(setup, script) {
        assert!(matches!(&outcome, Err(why) if why.contains("commutative operations only")), "{outcome:?}");
    }
}

#[test]
fn the_check_catches_an_op_folded_out_of_rank_order() {
    let setup = Setup { size: 4, segment_bytes: 64, put_delay: Duration::ZERO };
    let script = vec![Call { kind: Kind::Allreduce, op: Op::AffineClaimingCommutative, bytes: 16 * 64, in_place: false }];
    let outcomes = run(setup, script);
    assert!(
        outcomes.iter().any(|outcome| matches!(outcome, Err(why) if why.contains("differs from the reference"))),
        "a non-commutative op went around the ring unnoticed: {outcomes:?}"
    );
}
