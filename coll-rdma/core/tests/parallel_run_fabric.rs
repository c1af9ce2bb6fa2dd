//! The parallel reduction's runs (`large_reduction::parallel_run`, and its
//! `read_tree_run`) over the
//! in-process fabric with cross-memory attach: every rank with one
//! endpoint per communicator, each communicator with a script of
//! allreduces and reduces (in place and not, moving roots), most of them
//! long enough for the parallel reduction, some short enough for the
//! exchange or the tree (the same lane), zero counts. Each rank posts and
//! advances them in its own random interleaving (at most
//! `MAX_OUTSTANDING` pending per communicator). Ranks as threads on one
//! communicator also make blocking calls among the runs, finishing their
//! queue first as the glue does (on several communicators, random
//! interleavings would order blocking calls differently on different
//! ranks, which MPI forbids); ranks taking turns on one thread use two
//! communicators. Chunks are a few elements long, so a run folds its slice
//! over many advances, and there are more ranks than slice holders
//! (`set_workers`) at 3 and 5 ranks; at 4 and 5 ranks short reduces
//! (commutative, or rooted at rank 0) go down the read tree, which folds
//! each child's partial over many advances too. Every result is compared with a
//! serial left-to-right fold computed here (the wrapping word sum, and the
//! 2x2 matrix product, which is not commutative); every contribution must
//! come back untouched.

use crate::common;

use std::time::{Duration, Instant};

use btl_ibmc::fabric::{run_ranks_watched, Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::{MulticastKind, NoSideProgress, TransportError, WaitPolicy};
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::reduce::Reduce;
use coll_rdma_core::patterns::TreeStreamConfig;
use coll_rdma_core::reduction::Reduction;
use coll_rdma_core::schedule::{Schedule, Step};
use coll_rdma_core::schedule_queue::{Lane, Run};

use common::matrix::{random_words, serial_fold, MatrixProduct};
use common::buffers::{rank_buffers, Buffers, ReductionCall};
use common::turns::{play_on_one_thread, TakesTurns, Turns};
use common::{WordSum, XorShift};

/// A rank that has not finished its script by then takes it for a deadlock.
const DEADLINE: Duration = Duration::from_secs(120);
const PATIENCE: Duration = Duration::from_secs(300);
const MAX_OUTSTANDING: usize = 6;
/// From this length the parallel reduction serves a call: one word sum
/// (8 bytes) takes the exchange, two matrices the tree.
const PARALLEL_MIN_BYTES: usize = 48;
/// Three words or one matrix per chunk (rounded down to whole elements).
const CHUNK_BYTES: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Allreduce { in_place: bool },
    /// In place only at the root (as MPI allows).
    Reduce { root: usize, in_place: bool },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpKind {
    Sum,
    Matrix,
}

#[derive(Clone, Copy, Debug)]
struct Call {
    kind: Kind,
    op: OpKind,
    elements: usize,
    /// Made with the blocking call, after the queue is finished.
    blocking: bool,
}

impl Call {
    fn element_size(&self) -> usize {
        match self.op {
            OpKind::Sum => 8,
            OpKind::Matrix => 32,
        }
    }

    fn len(&self) -> usize {
        self.elements * self.element_size()
    }

    fn reduction(&self) -> &'static (dyn Reduction + Sync) {
        match self.op {
            OpKind::Sum => &WordSum,
            OpKind::Matrix => &MatrixProduct,
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

fn tree_config() -> TreeStreamConfig {
    TreeStreamConfig { degree: 2, segment_bytes: 64, policy: policy(), room_for_two_levels: false }
}

fn allreduce_config() -> AllreduceConfig {
    AllreduceConfig { tree: tree_config(), exchange_max_bytes: 16 }
}

fn reduce_offset(size: usize) -> usize {
    Allreduce::region_len(size, &allreduce_config()).next_multiple_of(64)
}

fn window_len(size: usize) -> usize {
    reduce_offset(size) + Reduce::region_len(size, &tree_config())
}

/// Slice holders: fewer than the ranks from 3 ranks on.
fn workers(size: usize) -> usize {
    if size >= 3 { 2 } else { usize::MAX }
}

/// Below it a reduce is reduced by the root alone, or on 4 ranks or more
/// gathered down the read tree (commutative, or rooted at rank 0).
const SLICES_MIN_BYTES: usize = 200;

/// The same script on every rank.
fn script(size: usize, seed: u64, calls: usize, with_blocking: bool) -> Vec<Call> {
    let mut rng = XorShift::new(seed);
    (0..calls)
        .map(|_| {
            let op = if rng.below(2) == 0 { OpKind::Sum } else { OpKind::Matrix };
            let in_place = rng.below(2) == 0;
            let kind = if rng.below(2) == 0 { Kind::Allreduce { in_place } } else { Kind::Reduce { root: rng.below(size), in_place } };
            let elements = match rng.below(8) {
                0 => 0,
                1 => 1,
                _ => 2 + rng.below(60),
            };
            Call { kind, op, elements, blocking: with_blocking && rng.below(5) == 0 }
        })
        .collect()
}

fn input(comm: usize, index: usize, rank: usize, call: &Call) -> Vec<u8> {
    let mut rng = XorShift::new(((comm as u64) << 40) ^ ((index as u64) << 20) ^ rank as u64 ^ 0x5A5A);
    random_words(&mut rng, call.len(), call.op == OpKind::Matrix)
}

/// The serial left-to-right fold of every rank's input.
fn expected_fold(comm: usize, index: usize, size: usize, call: &Call) -> Vec<u8> {
    serial_fold(call.op == OpKind::Matrix, (0..size).map(|rank| input(comm, index, rank, call)))
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

struct Communicator {
    allreduce: Allreduce,
    reduce: Reduce,
}

impl Communicator {
    fn new(rank: usize, size: usize) -> Self {
        let mut allreduce = Allreduce::new(rank, size, 0, allreduce_config());
        let mut reduce = Reduce::new(rank, size, reduce_offset(size), tree_config());
        for parallel in [allreduce.parallel_mut(), reduce.parallel_mut()] {
            parallel.set_min_bytes(PARALLEL_MIN_BYTES);
            parallel.set_workers(workers(size));
            parallel.set_chunk_bytes(CHUNK_BYTES);
            parallel.set_slices_min_bytes(SLICES_MIN_BYTES);
        }
        Communicator { allreduce, reduce }
    }

    /// Parallel reductions so far (blocking and runs).
    fn parallel_calls(&self) -> u64 {
        self.allreduce.parallel().calls() + self.reduce.parallel().calls()
    }

    /// Of those, the reduces gathered down the read tree.
    fn read_tree_calls(&self) -> u64 {
        self.reduce.parallel().read_tree_calls()
    }
}

struct Player<'b> {
    rank: usize,
    size: usize,
    scripts: &'b [Vec<Call>],
    endpoints: Vec<FabricEndpoint>,
    comms: Vec<Communicator>,
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
            comms: scripts.iter().map(|_| Communicator::new(rank, size)).collect(),
            unposted: buffers.iter_mut().map(|calls| calls.iter_mut()).collect(),
            turns: Turns::new(rank, seed, scripts.iter().map(Vec::len).collect()),
        }
    }

    /// One random move: post the next call of a random communicator (a
    /// blocking one is made at once, after its queue), or advance its queue.
    fn turn(&mut self) -> Result<(), String> {
        let (comm, posting) = self.turns.draw(MAX_OUTSTANDING);
        if posting {
            let call = self.scripts[comm][self.turns.posted[comm]];
            if call.blocking {
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
        let (c, transport) = (&mut self.comms[comm], &self.endpoints[comm]);
        let op = call.reduction();
        let fail = |what: TransportError| format!("rank {rank}/{size} comm {comm} call {index} {call:?}: start: {what}");
        let (lane, run): (Lane, Run<'b, FabricEndpoint>) = match call.kind {
            Kind::Allreduce { in_place: true } => (Lane::Allreduce, Box::new(c.allreduce.start_in_place(transport, op, recv).map_err(fail)?)),
            Kind::Allreduce { in_place: false } => (Lane::Allreduce, Box::new(c.allreduce.start(transport, op, send, recv).map_err(fail)?)),
            Kind::Reduce { root, .. } if call.in_place_at(rank) => {
                (Lane::Reduce, Box::new(c.reduce.start_in_place_at_root(transport, op, root, recv).map_err(fail)?))
            }
            Kind::Reduce { root, .. } => {
                let result = (root == rank).then_some(&mut recv[..]);
                (Lane::Reduce, Box::new(c.reduce.start(transport, op, root, send, result).map_err(fail)?))
            }
        };
        self.turns.post(comm, lane, run);
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
        let (c, transport) = (&mut self.comms[comm], &self.endpoints[comm]);
        let op = call.reduction();
        let outcome = match call.kind {
            Kind::Allreduce { in_place: true } => c.allreduce.allreduce_in_place(transport, &NoSideProgress, op, recv),
            Kind::Allreduce { in_place: false } => c.allreduce.allreduce(transport, &NoSideProgress, op, send, recv),
            Kind::Reduce { root, .. } if call.in_place_at(rank) => c.reduce.reduce_in_place_at_root(transport, &NoSideProgress, op, root, recv),
            Kind::Reduce { root, .. } => c.reduce.reduce(transport, &NoSideProgress, op, root, send, (root == rank).then_some(&mut recv[..])),
        };
        outcome.map_err(|why| format!("rank {rank} comm {comm} call {index} {call:?} (blocking): {why}"))?;
        self.turns.posted[comm] += 1;
        self.turns.finished[comm] += 1;
        Ok(())
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
            if *send != input(comm, index, rank, call) {
                return Err(format!("{case}: the contribution changed"));
            }
            if call.gathers_at(rank) && *recv != expected_fold(comm, index, size, call) {
                return Err(format!("{case}: got {recv:?}, expected {:?}", expected_fold(comm, index, size, call)));
            }
        }
    }
    Ok(())
}

/// Per communicator, the calls of `script` the parallel reduction serves.
fn parallel_calls(scripts: &[Vec<Call>]) -> u64 {
    scripts.iter().flatten().filter(|call| call.len() >= PARALLEL_MIN_BYTES).count() as u64
}

/// Endpoints with cross-memory attach, per rank one per communicator.
fn fabrics(size: usize, communicators: usize, seed: u64, put_delay_max: Duration) -> Vec<Vec<FabricEndpoint>> {
    let mut per_rank: Vec<Vec<FabricEndpoint>> = (0..size).map(|_| Vec::new()).collect();
    for comm in 0..communicators {
        let config = FabricConfig { put_delay_max, seed: seed + comm as u64, multicast_kind: MulticastKind::SharedWindow, ..FabricConfig::default() };
        let endpoints = run_ranks_watched(Fabric::new(size, window_len(size), config), PATIENCE, |_, mut endpoint: FabricEndpoint| {
            endpoint.enable_cross_memory(false).expect("cross-memory attach on the fabric");
            endpoint
        });
        for (rank, endpoint) in endpoints.into_iter().enumerate() {
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
    let outcomes: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = per_rank
            .into_iter()
            .enumerate()
            .map(|(rank, endpoints)| {
                let scripts = &scripts;
                scope.spawn(move || {
                    let mut buffers = rank_buffers(rank, scripts, input);
                    let parallel = {
                        let mut player = Player::new(rank, size, seed, scripts, endpoints, &mut buffers);
                        let started = Instant::now();
                        while !player.turns.done() {
                            if started.elapsed() > DEADLINE {
                                return Err(format!("{} after {DEADLINE:?}: deadlock", player.turns.where_it_is()));
                            }
                            player.turn()?;
                        }
                        player.comms.iter().map(Communicator::parallel_calls).sum::<u64>()
                    };
                    if parallel != parallel_calls(scripts) {
                        return Err(format!("rank {rank}: {parallel} parallel reductions, {} expected", parallel_calls(scripts)));
                    }
                    check_results(rank, size, scripts, &buffers)
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or_else(|_| Err("a rank panicked".to_string()))).collect()
    });
    let failures: Vec<&String> = outcomes.iter().filter_map(|outcome| outcome.as_ref().err()).collect();
    assert!(failures.is_empty(), "size {size}, seed {seed}: {failures:#?}");
}

#[test]
fn parallel_runs_mixed_with_blocking_calls_match_the_serial_fold_in_random_interleavings() {
    for seed in [1, 2, 3] {
        for size in [2, 3, 5] {
            run_threads(size, 40, seed);
        }
    }
}

/// Every rank on one thread, taking turns at random: a run that waited
/// inside `advance` for a peer would wait for a rank that cannot move, and
/// fail by its fault timeout instead of finishing. At 4 and 5 ranks the
/// short reduces go down the read tree, whose runs must have served some.
#[test]
fn every_rank_on_one_thread_finishes_so_no_parallel_run_waits_inside_advance() {
    for (size, seed) in [(2, 31), (3, 32), (4, 33), (5, 34)] {
        let scripts = scripts_for(size, 2, 24, seed, false);
        let mut buffers: Vec<Vec<Vec<Buffers>>> = (0..size).map(|rank| rank_buffers(rank, &scripts, input)).collect();
        let read_tree_calls = {
            let mut players: Vec<Player<'_>> = fabrics(size, 2, seed, Duration::ZERO)
                .into_iter()
                .zip(buffers.iter_mut())
                .enumerate()
                .map(|(rank, (endpoints, buffers))| Player::new(rank, size, seed, &scripts, endpoints, buffers))
                .collect();
            play_on_one_thread(&mut players, seed, DEADLINE);
            players[0].comms.iter().map(Communicator::read_tree_calls).sum::<u64>()
        };
        assert_eq!(read_tree_calls > 0, size >= 4, "size {size}: {read_tree_calls} read tree calls");
        for (rank, buffers) in buffers.iter().enumerate() {
            check_results(rank, size, &scripts, buffers).unwrap_or_else(|why| panic!("seed {seed}: {why}"));
        }
    }
}

/// A run folds one chunk per advance: at 2 ranks, rank 0's slice of
/// `chunks` chunks is folded (and rank 0 says done) at its `chunks`-th
/// advance, not earlier, not later.
#[test]
fn a_run_folds_its_slice_a_chunk_per_advance() {
    let size = 2;
    let chunks = 5;
    let endpoints = fabrics(size, 1, 41, Duration::ZERO);
    let mut endpoints: Vec<FabricEndpoint> = endpoints.into_iter().map(|mut comms| comms.remove(0)).collect();
    let elements = 2 * chunks * CHUNK_BYTES / 8;
    let inputs: Vec<Vec<u8>> = (0..size).map(|rank| (0..elements as u64).flat_map(|i| (i * 10 + rank as u64).to_le_bytes()).collect()).collect();
    let mut results = vec![vec![0u8; elements * 8]; size];
    let mut comms: Vec<Communicator> = (0..size).map(|rank| Communicator::new(rank, size)).collect();
    let mut runs: Vec<_> = comms
        .iter_mut()
        .zip(&endpoints)
        .zip(inputs.iter().zip(results.iter_mut()))
        .map(|((comm, endpoint), (send, recv))| comm.allreduce.start(endpoint, &WordSum, send, recv).expect("a parallel run"))
        .collect();
    // Rank 1 announces and waits for rank 0's announcement.
    assert_eq!(runs[1].advance(&mut endpoints[1]).unwrap(), Step::Pending);
    // Rank 0 sees it and folds its slice, a chunk per advance.
    for advance in 1..chunks {
        assert_eq!(runs[0].advance(&mut endpoints[0]).unwrap(), Step::Pending, "advance {advance} of rank 0");
    }
    // Its last chunk not folded yet, rank 0 has not said done: rank 1,
    // with its own slice folded, waits for it.
    for advance in 0..3 * chunks {
        assert_eq!(runs[1].advance(&mut endpoints[1]).unwrap(), Step::Pending, "advance {advance} of rank 1");
    }
    assert_eq!(runs[0].advance(&mut endpoints[0]).unwrap(), Step::Done, "rank 0 after its last chunk");
    assert_eq!(runs[1].advance(&mut endpoints[1]).unwrap(), Step::Done, "rank 1 after rank 0's last chunk");
    drop(runs);
    let expected: Vec<u8> = (0..elements as u64).flat_map(|i| (2 * i * 10 + 1).to_le_bytes()).collect();
    assert!(results.iter().all(|result| *result == expected));
}
