//! The ring reduction's runs (`large_reduction::ring_run`) over the
//! in-process fabric without cross-memory attach (as across nodes, or
//! shared memory with it refused): every rank with one endpoint per
//! communicator, each communicator with a script of allreduces and reduces
//! (in place and not, moving roots, 8- and 24-byte elements, zero counts,
//! fewer elements than ranks, many segments), all in the ring's one lane.
//! Each rank posts and advances them in its own random interleaving (at
//! most `MAX_OUTSTANDING` pending per communicator). Ranks as threads on
//! one communicator also make blocking ring calls among the runs,
//! finishing their queue first as the glue does, with puts delayed at
//! random (skew and late arrivals; the ring moves by puts alone, which
//! the fabric never loses, so there is no loss to add); ranks taking turns
//! on one thread use two communicators. Slots are 40 bytes, so a call
//! takes many segments and many advances. Every result is compared with a
//! wrapping word sum of every rank's input computed here, not through
//! `Reduction::combine`; every contribution must come back untouched.

use crate::common;

use std::time::{Duration, Instant};

use btl_ibmc::fabric::{run_ranks_watched, Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::{NoSideProgress, TransportError, WaitPolicy};
use coll_rdma_core::collectives::large_reduction::buffers::{Gather, ReductionBuffers};
use coll_rdma_core::collectives::large_reduction::ring::RingReduction;
use coll_rdma_core::collectives::large_reduction::ring_run::SEGMENTS_PER_POLL;
use coll_rdma_core::StallLimits;
use coll_rdma_core::reduction::Reduction;
use coll_rdma_core::schedule::{Schedule, Step};
use coll_rdma_core::schedule_queue::Lane;

use common::buffers::{rank_buffers, Buffers, ReductionCall};
use common::turns::{play_on_one_thread, TakesTurns, Turns};
use common::{word, WordSum, XorShift};

/// A rank that has not finished its script by then takes it for a deadlock.
const DEADLINE: Duration = Duration::from_secs(120);
const PATIENCE: Duration = Duration::from_secs(300);
const MAX_OUTSTANDING: usize = 6;
const SEGMENT_BYTES: usize = 40;

/// Three words summed at once: 24-byte elements, which divide no slot.
struct TripleSum;

impl Reduction for TripleSum {
    fn element_size(&self) -> usize {
        24
    }
    fn is_commutative(&self) -> bool {
        true
    }
    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        WordSum.combine(lower, higher)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Allreduce { in_place: bool },
    /// In place only at the root (as MPI allows).
    Reduce { root: usize, in_place: bool },
}

#[derive(Clone, Copy, Debug)]
struct Call {
    kind: Kind,
    triple: bool,
    elements: usize,
    /// Made with the blocking call, after the queue is finished.
    blocking: bool,
}

impl Call {
    fn reduction(&self) -> &'static (dyn Reduction + Sync) {
        if self.triple { &TripleSum } else { &WordSum }
    }

    fn len(&self) -> usize {
        self.elements * self.reduction().element_size()
    }

    fn gather(&self) -> Gather {
        match self.kind {
            Kind::Allreduce { .. } => Gather::All,
            Kind::Reduce { root, .. } => Gather::Root(root),
        }
    }

    fn in_place_at(&self, rank: usize) -> bool {
        match self.kind {
            Kind::Allreduce { in_place } => in_place,
            Kind::Reduce { root, in_place } => in_place && root == rank,
        }
    }

    fn gathers_at(&self, rank: usize) -> bool {
        !matches!(self.kind, Kind::Reduce { root, .. } if root != rank)
    }
}

fn policy() -> WaitPolicy {
    // Bounded: a run stuck this long fails (the stall clock) instead of hanging.
    WaitPolicy { fault_timeout: Some(Duration::from_secs(60)), ..common::yielding_policy(20) }
}

/// The same script on every rank.
fn script(size: usize, seed: u64, calls: usize, with_blocking: bool) -> Vec<Call> {
    let mut rng = XorShift::new(seed);
    (0..calls)
        .map(|_| {
            let in_place = rng.below(2) == 0;
            let kind = if rng.below(2) == 0 { Kind::Allreduce { in_place } } else { Kind::Reduce { root: rng.below(size), in_place } };
            let elements = match rng.below(8) {
                0 => 0,
                1 => 1,
                2 => size - 1,
                _ => 2 + rng.below(80),
            };
            Call { kind, triple: rng.below(3) == 0, elements, blocking: with_blocking && rng.below(5) == 0 }
        })
        .collect()
}

fn input(comm: usize, index: usize, rank: usize, call: &Call) -> Vec<u8> {
    let mut rng = XorShift::new(((comm as u64) << 40) ^ ((index as u64) << 20) ^ rank as u64 ^ 0xA5A5);
    (0..call.len() / 8).flat_map(|_| rng.next().to_le_bytes()).collect()
}

/// Every rank's input summed word by word (wrapping), here.
fn expected_sum(comm: usize, index: usize, size: usize, call: &Call) -> Vec<u8> {
    let inputs: Vec<Vec<u8>> = (0..size).map(|rank| input(comm, index, rank, call)).collect();
    (0..call.len() / 8)
        .flat_map(|at| inputs.iter().fold(0u64, |sum, input| sum.wrapping_add(word(&input[8 * at..8 * at + 8]))).to_le_bytes())
        .collect()
}

impl ReductionCall for Call {
    fn len(&self) -> usize {
        Call::len(self)
    }
    fn in_place_at(&self, rank: usize) -> bool {
        Call::in_place_at(self, rank)
    }
    fn gathers_at(&self, rank: usize) -> bool {
        Call::gathers_at(self, rank)
    }
}

/// `call`'s buffers as the ring takes them on `rank`.
fn ring_buffers<'a>(rank: usize, call: &Call, send: &'a [u8], recv: &'a mut [u8]) -> ReductionBuffers<'a> {
    if call.in_place_at(rank) {
        ReductionBuffers::InPlace(recv)
    } else {
        ReductionBuffers::Separate { send, recv }
    }
}

struct Player<'b> {
    rank: usize,
    size: usize,
    scripts: &'b [Vec<Call>],
    endpoints: Vec<FabricEndpoint>,
    rings: Vec<RingReduction>,
    unposted: Vec<std::slice::IterMut<'b, Buffers>>,
    turns: Turns<'b>,
}

impl<'b> Player<'b> {
    fn new(rank: usize, size: usize, seed: u64, scripts: &'b [Vec<Call>], endpoints: Vec<FabricEndpoint>, buffers: &'b mut [Vec<Buffers>]) -> Self {
        Player {
            rank,
            size,
            scripts,
            endpoints,
            rings: scripts.iter().map(|_| RingReduction::new(rank, size, 0, SEGMENT_BYTES)).collect(),
            unposted: buffers.iter_mut().map(|calls| calls.iter_mut()).collect(),
            turns: Turns::new(rank, seed, scripts.iter().map(Vec::len).collect()),
        }
    }

    /// One random move: post the next call of a random communicator (a
    /// blocking one is made at once, after its queue), or advance its queue.
    fn turn(&mut self) -> Result<(), String> {
        let (comm, posting) = self.turns.draw(MAX_OUTSTANDING);
        if posting {
            if self.scripts[comm][self.turns.posted[comm]].blocking {
                self.blocking(comm)?;
            } else {
                self.post(comm)?;
            }
        } else if !self.turns.queues[comm].is_empty() {
            self.turns.advance(comm, &mut self.endpoints[comm])?;
        }
        Ok(())
    }

    fn post(&mut self, comm: usize) -> Result<(), String> {
        let (rank, size, index) = (self.rank, self.size, self.turns.posted[comm]);
        let call = self.scripts[comm][index];
        let Buffers { send, recv } = self.unposted[comm].next().expect("a buffer per call");
        let fail = |what: TransportError| format!("rank {rank}/{size} comm {comm} call {index} {call:?}: start: {what}");
        let buffers = ring_buffers(rank, &call, send, recv);
        let run = self.rings[comm].start(call.reduction(), call.gather(), buffers, StallLimits::of(&policy())).map_err(fail)?;
        self.turns.post(comm, Lane::Ring, Box::new(run));
        Ok(())
    }

    /// The blocking call, after every run of the communicator finished.
    fn blocking(&mut self, comm: usize) -> Result<(), String> {
        let started = Instant::now();
        while !self.turns.queues[comm].is_empty() {
            if started.elapsed() > DEADLINE {
                return Err(format!("{}: the queue did not drain", self.turns.where_it_is()));
            }
            self.turns.advance(comm, &mut self.endpoints[comm])?;
        }
        let (rank, index) = (self.rank, self.turns.posted[comm]);
        let call = self.scripts[comm][index];
        let Buffers { send, recv } = self.unposted[comm].next().expect("a buffer per call");
        let buffers = ring_buffers(rank, &call, send, recv);
        let policy = policy();
        self.rings[comm]
            .reduce(&self.endpoints[comm], policy.serving(&NoSideProgress), call.reduction(), call.gather(), buffers)
            .map_err(|why| format!("rank {rank} comm {comm} call {index} {call:?} (blocking): {why}"))?;
        self.turns.posted[comm] += 1;
        self.turns.finished[comm] += 1;
        Ok(())
    }

    /// Ring calls so far over every communicator (blocking and runs).
    fn ring_calls(&self) -> u64 {
        self.rings.iter().map(RingReduction::calls).sum()
    }
}

impl<'b> TakesTurns<'b> for Player<'b> {
    fn turns(&self) -> &Turns<'b> {
        &self.turns
    }
    fn take_turn(&mut self) -> Result<(), String> {
        self.turn()
    }
}

fn check_results(rank: usize, size: usize, scripts: &[Vec<Call>], buffers: &[Vec<Buffers>]) -> Result<(), String> {
    for (comm, script) in scripts.iter().enumerate() {
        for (index, call) in script.iter().enumerate() {
            let Buffers { send, recv } = &buffers[comm][index];
            let case = format!("rank {rank}/{size} comm {comm} call {index} {call:?}");
            if !call.in_place_at(rank) && *send != input(comm, index, rank, call) {
                return Err(format!("{case}: the contribution changed"));
            }
            if call.gathers_at(rank) && *recv != expected_sum(comm, index, size, call) {
                return Err(format!("{case}: got {recv:?}, expected {:?}", expected_sum(comm, index, size, call)));
            }
        }
    }
    Ok(())
}

/// Calls the ring counts: those with something to reduce.
fn counted_calls(scripts: &[Vec<Call>]) -> u64 {
    scripts.iter().flatten().filter(|call| call.elements > 0).count() as u64
}

/// Put-only endpoints (no cross-memory attach), per rank one per
/// communicator.
fn fabrics(size: usize, communicators: usize, seed: u64, put_delay_max: Duration) -> Vec<Vec<FabricEndpoint>> {
    let mut per_rank: Vec<Vec<FabricEndpoint>> = (0..size).map(|_| Vec::new()).collect();
    for comm in 0..communicators {
        let config = FabricConfig { put_delay_max, seed: seed + comm as u64, ..FabricConfig::default() };
        for (rank, endpoint) in Fabric::new(size, RingReduction::region_len(SEGMENT_BYTES), config).into_iter().enumerate() {
            per_rank[rank].push(endpoint);
        }
    }
    per_rank
}

fn scripts_for(size: usize, communicators: usize, calls: usize, seed: u64, with_blocking: bool) -> Vec<Vec<Call>> {
    (0..communicators).map(|comm| script(size, seed ^ ((comm as u64 + 1) * 7919), calls, with_blocking)).collect()
}

/// Every rank on its own thread, one communicator, blocking calls among
/// the runs.
fn run_threads(size: usize, calls: usize, seed: u64) {
    let scripts = scripts_for(size, 1, calls, seed, true);
    let per_rank = fabrics(size, 1, seed, Duration::from_micros(20));
    let outcomes = run_ranks_watched(per_rank, PATIENCE, move |rank, endpoints| play_alone(rank, size, seed, &scripts, endpoints));
    let failures: Vec<&String> = outcomes.iter().filter_map(|outcome| outcome.as_ref().err()).collect();
    assert!(failures.is_empty(), "size {size}, seed {seed}: {failures:#?}");
}

/// One rank's whole script on its own thread, then its results checked.
fn play_alone(rank: usize, size: usize, seed: u64, scripts: &[Vec<Call>], endpoints: Vec<FabricEndpoint>) -> Result<(), String> {
    let mut buffers = rank_buffers(rank, scripts, input);
    let ring_calls = {
        let mut player = Player::new(rank, size, seed, scripts, endpoints, &mut buffers);
        let started = Instant::now();
        while !player.turns.done() {
            if started.elapsed() > DEADLINE {
                return Err(format!("{} after {DEADLINE:?}: deadlock", player.turns.where_it_is()));
            }
            player.turn()?;
        }
        player.ring_calls()
    };
    if ring_calls != counted_calls(scripts) {
        return Err(format!("rank {rank}: {ring_calls} ring calls, {} expected", counted_calls(scripts)));
    }
    check_results(rank, size, scripts, &buffers)
}

#[test]
fn ring_runs_mixed_with_blocking_ring_calls_match_the_sum_in_random_interleavings() {
    for seed in [1, 2] {
        for size in [2, 3, 5] {
            run_threads(size, 40, seed);
        }
    }
}

/// Every rank on one thread, taking turns at random: a run that waited
/// inside `advance` for a peer would wait for a rank that cannot move, and
/// fail by its fault timeout instead of finishing.
#[test]
fn every_rank_on_one_thread_finishes_so_no_ring_run_waits_inside_advance() {
    for (size, seed) in [(2, 31), (3, 32), (4, 33)] {
        let scripts = scripts_for(size, 2, 24, seed, false);
        let mut buffers: Vec<Vec<Vec<Buffers>>> = (0..size).map(|rank| rank_buffers(rank, &scripts, input)).collect();
        {
            let mut players: Vec<Player<'_>> = fabrics(size, 2, seed, Duration::ZERO)
                .into_iter()
                .zip(buffers.iter_mut())
                .enumerate()
                .map(|(rank, (endpoints, buffers))| Player::new(rank, size, seed, &scripts, endpoints, buffers))
                .collect();
            play_on_one_thread(&mut players, seed, DEADLINE);
        }
        for (rank, buffers) in buffers.iter().enumerate() {
            check_results(rank, size, &scripts, buffers).unwrap_or_else(|why| panic!("seed {seed}: {why}"));
        }
    }
}

/// A poll moves at most `SEGMENTS_PER_POLL` segments: at 2 ranks advanced
/// in turn, a call of `segments` segments each way needs at least
/// `segments / SEGMENTS_PER_POLL` advances of each rank, however fast the
/// peer.
#[test]
fn a_run_moves_a_bounded_number_of_segments_per_advance() {
    let size = 2;
    let mut endpoints: Vec<FabricEndpoint> = fabrics(size, 1, 41, Duration::ZERO).into_iter().map(|mut comms| comms.remove(0)).collect();
    // Each rank's two steps (one each phase) send half the vector.
    let segments = 12 * SEGMENTS_PER_POLL;
    let words = segments * SEGMENT_BYTES / 8;
    let inputs: Vec<Vec<u8>> = (0..size).map(|rank| (0..words as u64).flat_map(|i| (i * 10 + rank as u64).to_le_bytes()).collect()).collect();
    let mut results = vec![vec![0u8; words * 8]; size];
    let mut rings: Vec<RingReduction> = (0..size).map(|rank| RingReduction::new(rank, size, 0, SEGMENT_BYTES)).collect();
    let mut runs: Vec<_> = rings
        .iter_mut()
        .zip(inputs.iter().zip(results.iter_mut()))
        .map(|(ring, (send, recv))| ring.start(&WordSum, Gather::All, ReductionBuffers::Separate { send, recv }, StallLimits::of(&policy())).expect("a ring run"))
        .collect();
    let mut advances = [0usize; 2];
    let mut done = [false; 2];
    while !done.iter().all(|&done| done) {
        for rank in 0..size {
            if !done[rank] {
                advances[rank] += 1;
                done[rank] = runs[rank].advance(&mut endpoints[rank]).expect("no failure") == Step::Done;
                assert!(advances[rank] < 100 * segments, "rank {rank} does not finish");
            }
        }
    }
    drop(runs);
    for rank in 0..size {
        assert!(advances[rank] >= segments / SEGMENTS_PER_POLL, "rank {rank} took {} advances for {segments} segments", advances[rank]);
    }
    let expected: Vec<u8> = (0..words as u64).flat_map(|i| (2 * i * 10 + 1).to_le_bytes()).collect();
    assert!(results.iter().all(|result| *result == expected));
}

/// A run whose neighbours never post fails by its fault timeout, naming
/// where it stopped, instead of pending for ever.
#[test]
fn a_run_whose_peers_never_come_fails_by_the_fault_timeout() {
    // The other ranks' endpoints stay open (alive, but never posting).
    let mut per_rank = fabrics(3, 1, 43, Duration::ZERO);
    let mut endpoint = per_rank[0].remove(0);
    let mut ring = RingReduction::new(0, 3, 0, SEGMENT_BYTES);
    let (send, mut recv) = (vec![1u8; 4 * SEGMENT_BYTES], vec![0u8; 4 * SEGMENT_BYTES]);
    let buffers = ReductionBuffers::Separate { send: &send, recv: &mut recv };
    let mut run = ring.start(&WordSum, Gather::All, buffers, StallLimits { fault_timeout: Some(Duration::from_millis(50)), stall_warning: Duration::MAX }).expect("a ring run");
    let started = Instant::now();
    let failure = loop {
        assert!(started.elapsed() < Duration::from_secs(30), "no failure after 30 s");
        match run.advance(&mut endpoint) {
            Ok(Step::Pending) => std::thread::yield_now(),
            Ok(Step::Done) => panic!("a ring finished without its peers"),
            Err(why) => break why.to_string(),
        }
    };
    assert!(failure.contains("fault timeout") && failure.contains("ring reduction"), "{failure}");
    drop(per_rank);
}
