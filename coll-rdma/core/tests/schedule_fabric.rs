//! Resumable runs (`Schedule`) over the in-process fabric: every rank a
//! thread holding one endpoint per communicator, several communicators at
//! once, each with a script of allreduces (exchange and tree lengths),
//! reduces and put-tree bcasts with moving roots, zero counts among them,
//! the same on every rank. Each rank posts and advances them in its own
//! random interleaving (seeded; every rank a different one): at each turn
//! it either starts the next call of a random communicator (at most
//! `MAX_OUTSTANDING` pending there) or advances a random communicator's
//! queue, so calls finish in whatever order the interleaving gives. The
//! fabric delays puts at random. Every result is compared with a fold the
//! test computes serially from all ranks' inputs: the wrapping word sum,
//! and the 2x2 matrix product, which is not commutative, so only the
//! canonical rank order passes.
//!
//! On pretended nodes the allreduce takes the two-level tree, and the
//! scripts add reduces that go through it (`ReducePath::ThroughAllreduce`:
//! the root keeps the allreduce's result, the others drop theirs); the
//! bcasts take the two-level bcast's run (`Bcast::start`: the root's
//! node, the leaders, the other nodes, each stage on the put tree, the
//! fabric offering no multicast).
//!
//! Window puts are reliable on every transport (only datagrams are lost,
//! duplicated or reordered, and these runs use none): the fabric's put
//! delays are the faults that apply.

use crate::common;

use std::time::{Duration, Instant};

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::{MulticastKind, RmcastConfig, TransportError, WaitPolicy};
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::bcast::put_tree::{PutTreeBcast, PutTreeConfig};
use coll_rdma_core::collectives::bcast::{Bcast, BcastConfig};
use coll_rdma_core::collectives::reduce::Reduce;
use btl_ibmc::shm::NodeGroups;
use coll_rdma_core::patterns::{two_level_links, TreeStreamConfig};
use coll_rdma_core::reduction::Reduction;
use coll_rdma_core::schedule_queue::{Lane, Run, ScheduleQueue};

use common::matrix::{random_words, serial_fold, MatrixProduct};
use common::turns::{play_on_one_thread, TakesTurns, Turns};
use common::{WordSum, XorShift};

/// A rank that has not finished its script by then takes it for a deadlock.
const DEADLINE: Duration = Duration::from_secs(120);
const MAX_OUTSTANDING: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Allreduce,
    /// MPI_IN_PLACE on every rank.
    AllreduceInPlace,
    Reduce { root: usize },
    /// A reduce through the two-level allreduce: the root's run is an
    /// allreduce's, the others' drop the result.
    ReduceThroughAllreduce { root: usize },
    Bcast { root: usize },
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
    /// Elements (8-byte words for the sum and bcast, 32-byte matrices).
    elements: usize,
}

impl Call {
    fn element_size(&self) -> usize {
        match (self.kind, self.op) {
            (Kind::Bcast { .. }, _) | (_, OpKind::Sum) => 8,
            (_, OpKind::Matrix) => 32,
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
}

/// Segments small enough that tree lengths take several of them; rings
/// enough for the two-level tree on the pretended nodes.
fn tree_config() -> TreeStreamConfig {
    TreeStreamConfig { degree: 2, segment_bytes: 256, policy: policy(), room_for_two_levels: true }
}

fn policy() -> WaitPolicy {
    // Bounded: a run stuck this long fails (the stall clock) instead of hanging.
    WaitPolicy { fault_timeout: Some(Duration::from_secs(60)), ..common::yielding_policy(20) }
}

fn allreduce_config() -> AllreduceConfig {
    AllreduceConfig { tree: tree_config(), exchange_max_bytes: 64 }
}

fn bcast_config() -> PutTreeConfig {
    PutTreeConfig { segment_bytes: 96, policy: policy() }
}

/// The two-level bcast's: the put tree's segments in every stage.
fn two_level_bcast_config() -> BcastConfig {
    let multicast = RmcastConfig { slot_bytes: 96, window_slots: 4, wait: policy(), ..RmcastConfig::default() };
    BcastConfig { multicast, room_for_two_levels: true, ..BcastConfig::default() }
}

struct Offsets {
    allreduce: usize,
    reduce: usize,
    bcast: usize,
    two_level_bcast: usize,
    window_len: usize,
}

fn offsets(size: usize) -> Offsets {
    let align = |offset: usize| offset.next_multiple_of(64);
    let reduce = align(Allreduce::region_len(size, &allreduce_config()));
    let bcast = align(reduce + Reduce::region_len(size, &tree_config()));
    let two_level_bcast = align(bcast + PutTreeBcast::region_len(size, &bcast_config()));
    let window_len = align(two_level_bcast + Bcast::region_len(size, &two_level_bcast_config()));
    Offsets { allreduce: 0, reduce, bcast, two_level_bcast, window_len }
}

/// The same script on every rank: drawn from the communicator's seed;
/// reduces through the allreduce only where it is `two_level`.
fn script(size: usize, seed: u64, calls: usize, two_level: bool) -> Vec<Call> {
    let mut rng = XorShift::new(seed);
    (0..calls)
        .map(|_| {
            let op = if rng.below(2) == 0 { OpKind::Sum } else { OpKind::Matrix };
            let kind = match rng.below(if two_level { 6 } else { 4 }) {
                0 => Kind::Allreduce,
                1 => Kind::AllreduceInPlace,
                2 => Kind::Reduce { root: rng.below(size) },
                3 => Kind::Bcast { root: rng.below(size) },
                _ => Kind::ReduceThroughAllreduce { root: rng.below(size) },
            };
            // Zero counts, exchange lengths (up to 64 bytes) and tree
            // lengths of several segments.
            let elements = match rng.below(5) {
                0 => 0,
                1 | 2 => 1 + rng.below(2),
                _ => 3 + rng.below(30),
            };
            Call { kind, op, elements }
        })
        .collect()
}

/// Rank `rank`'s input to call `index` of communicator `comm`.
fn input(comm: usize, index: usize, rank: usize, call: &Call) -> Vec<u8> {
    let mut rng = XorShift::new(((comm as u64) << 40) ^ ((index as u64) << 20) ^ rank as u64 ^ 0xA5A5);
    random_words(&mut rng, call.len(), call.op == OpKind::Matrix)
}

/// The serial left-to-right fold of every rank's input.
fn expected_fold(comm: usize, index: usize, size: usize, call: &Call) -> Vec<u8> {
    serial_fold(call.op == OpKind::Matrix, (0..size).map(|rank| input(comm, index, rank, call)))
}

/// One call's buffers on one rank.
struct Buffers {
    send: Vec<u8>,
    recv: Vec<u8>,
}

struct Communicator {
    allreduce: Allreduce,
    reduce: Reduce,
    bcast: PutTreeBcast,
    /// On pretended nodes: serves the bcasts instead of `bcast`.
    two_level_bcast: Option<Bcast>,
}

/// Rank `rank`'s buffers for every call of every script.
fn rank_buffers(rank: usize, scripts: &[Vec<Call>]) -> Vec<Vec<Buffers>> {
    scripts
        .iter()
        .enumerate()
        .map(|(comm, script)| {
            script
                .iter()
                .enumerate()
                .map(|(index, call)| {
                    let send = input(comm, index, rank, call);
                    let recv = match call.kind {
                        Kind::AllreduceInPlace | Kind::Bcast { .. } => send.clone(),
                        Kind::Reduce { root } | Kind::ReduceThroughAllreduce { root } if root != rank => Vec::new(),
                        _ => vec![0xEE; call.len()],
                    };
                    Buffers { send, recv }
                })
                .collect()
        })
        .collect()
}

/// One rank playing its scripts: its communicators and their calls.
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
    /// `nodes`: the pretended nodes, where the allreduce takes the
    /// two-level tree; `None` for the flat one.
    fn new(
        rank: usize,
        size: usize,
        seed: u64,
        scripts: &'b [Vec<Call>],
        nodes: Option<&NodeGroups>,
        endpoints: Vec<FabricEndpoint>,
        buffers: &'b mut [Vec<Buffers>],
    ) -> Self {
        let offsets = offsets(size);
        let communicator = || {
            let mut allreduce = Allreduce::new(rank, size, offsets.allreduce, allreduce_config());
            let two_level_bcast = nodes.map(|nodes| {
                let tree = two_level_links(rank, nodes, tree_config().degree);
                allreduce.use_two_level_tree(&tree).unwrap_or_else(|why| panic!("rank {rank}: no two-level tree: {why}"));
                let mut bcast = Bcast::new(rank, size, offsets.two_level_bcast, two_level_bcast_config());
                bcast.use_two_levels(nodes, 1).unwrap_or_else(|why| panic!("rank {rank}: no two-level bcast: {why}"));
                bcast
            });
            Communicator {
                allreduce,
                reduce: Reduce::new(rank, size, offsets.reduce, tree_config()),
                bcast: PutTreeBcast::new(rank, size, offsets.bcast, bcast_config()),
                two_level_bcast,
            }
        };
        Player {
            rank,
            size,
            scripts,
            endpoints,
            comms: (0..scripts.len()).map(|_| communicator()).collect(),
            unposted: buffers.iter_mut().map(|calls| calls.iter_mut()).collect(),
            turns: Turns::new(rank, seed, scripts.iter().map(Vec::len).collect()),
        }
    }

    /// One random move: start the next call of a random communicator, or
    /// advance its queue.
    fn turn(&mut self) -> Result<(), String> {
        let (rank, size) = (self.rank, self.size);
        let (comm, posting) = self.turns.draw(MAX_OUTSTANDING);
        if posting {
            let index = self.turns.posted[comm];
            let call = self.scripts[comm][index];
            let Buffers { send, recv } = self.unposted[comm].next().expect("a buffer per call");
            let (c, transport) = (&mut self.comms[comm], &self.endpoints[comm]);
            let op = call.reduction();
            let fail = |what: TransportError| format!("rank {rank}/{size} comm {comm} call {index} {call:?}: start: {what}");
            let (lane, run): (Lane, Run<'b, FabricEndpoint>) = match call.kind {
                Kind::Allreduce => (Lane::Allreduce, Box::new(c.allreduce.start(transport, op, send, recv).map_err(fail)?)),
                Kind::AllreduceInPlace => (Lane::Allreduce, Box::new(c.allreduce.start_in_place(transport, op, recv).map_err(fail)?)),
                Kind::Reduce { root } => {
                    let result = (root == rank).then_some(&mut recv[..]);
                    (Lane::Reduce, Box::new(c.reduce.start(transport, op, root, send, result).map_err(fail)?))
                }
                Kind::ReduceThroughAllreduce { root } if root == rank => {
                    (Lane::Allreduce, Box::new(c.allreduce.start(transport, op, send, recv).map_err(fail)?))
                }
                Kind::ReduceThroughAllreduce { .. } => {
                    (Lane::Allreduce, Box::new(c.allreduce.start_result_dropped(transport, op, send).map_err(fail)?))
                }
                Kind::Bcast { root } => match c.two_level_bcast.as_mut() {
                    Some(bcast) => (Lane::Bcast, Box::new(bcast.start(transport, root, recv).map_err(fail)?)),
                    None => (Lane::Bcast, Box::new(c.bcast.start(root, recv).map_err(fail)?)),
                },
            };
            self.turns.post(comm, lane, run);
        } else if !self.turns.queues[comm].is_empty() {
            self.turns.advance(comm, &mut self.endpoints[comm])?;
        }
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

/// Compares rank `rank`'s results with the serial folds.
fn check_results(rank: usize, size: usize, scripts: &[Vec<Call>], buffers: &[Vec<Buffers>]) -> Result<(), String> {
    for (comm, script) in scripts.iter().enumerate() {
        for (index, call) in script.iter().enumerate() {
            let got = &buffers[comm][index].recv;
            let expected = match call.kind {
                Kind::Allreduce | Kind::AllreduceInPlace => expected_fold(comm, index, size, call),
                Kind::Reduce { root } | Kind::ReduceThroughAllreduce { root } if root == rank => expected_fold(comm, index, size, call),
                // Given no buffer, and still none.
                Kind::Reduce { .. } | Kind::ReduceThroughAllreduce { .. } if got.is_empty() => continue,
                Kind::Reduce { .. } | Kind::ReduceThroughAllreduce { .. } => return Err(format!("rank {rank} call {index}: {call:?} grew a result")),
                Kind::Bcast { root } => input(comm, index, root, call),
            };
            if *got != expected {
                return Err(format!("rank {rank} comm {comm} call {index} {call:?}: got {got:?}, expected {expected:?}"));
            }
        }
    }
    Ok(())
}

/// Plays every communicator's script on `rank` in an interleaving drawn
/// from `seed`, and checks its own results.
fn play_rank(rank: usize, size: usize, seed: u64, scripts: &[Vec<Call>], nodes: Option<&NodeGroups>, endpoints: Vec<FabricEndpoint>) -> Result<(), String> {
    let mut buffers = rank_buffers(rank, scripts);
    {
        let mut player = Player::new(rank, size, seed, scripts, nodes, endpoints, &mut buffers);
        let started = Instant::now();
        while !player.turns.done() {
            if started.elapsed() > DEADLINE {
                return Err(format!("{} after {DEADLINE:?}: deadlock", player.turns.where_it_is()));
            }
            player.turn()?;
            if player.turns.rng.below(8) == 0 {
                std::thread::yield_now();
            }
        }
    }
    check_results(rank, size, scripts, &buffers)
}

fn scripts_for(size: usize, communicators: usize, calls: usize, seed: u64, two_level: bool) -> Vec<Vec<Call>> {
    (0..communicators).map(|comm| script(size, seed ^ ((comm as u64 + 1) * 7919), calls, two_level)).collect()
}

/// Fabrics imitating a network; on pretended `nodes` one without
/// multicast (as verbs without it), so that the two-level bcast has runs.
fn fabrics(size: usize, nodes: Option<&NodeGroups>, communicators: usize, seed: u64, put_delay_max: Duration) -> Vec<Vec<FabricEndpoint>> {
    let window_len = offsets(size).window_len;
    let mut per_rank: Vec<Vec<FabricEndpoint>> = (0..size).map(|_| Vec::new()).collect();
    let multicast_kind = if nodes.is_some() { MulticastKind::None } else { MulticastKind::Datagram };
    for comm in 0..communicators {
        let config = FabricConfig { put_delay_max, multicast_kind, nodes: nodes.cloned(), seed: seed + comm as u64, ..FabricConfig::default() };
        for (rank, endpoint) in Fabric::new(size, window_len, config).into_iter().enumerate() {
            per_rank[rank].push(endpoint);
        }
    }
    per_rank
}

fn run(size: usize, communicators: usize, calls: usize, seed: u64) {
    run_on(size, None, communicators, calls, seed);
}

/// `run` with the allreduce's two-level tree on `nodes` where given.
fn run_on(size: usize, nodes: Option<&NodeGroups>, communicators: usize, calls: usize, seed: u64) {
    let scripts = scripts_for(size, communicators, calls, seed, nodes.is_some());
    let per_rank = fabrics(size, nodes, communicators, seed, Duration::from_micros(20));
    let outcomes: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = per_rank
            .into_iter()
            .enumerate()
            .map(|(rank, endpoints)| {
                let scripts = &scripts;
                scope.spawn(move || play_rank(rank, size, seed, scripts, nodes, endpoints))
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or_else(|_| Err("a rank panicked".to_string()))).collect()
    });
    let failures: Vec<&String> = outcomes.iter().filter_map(|outcome| outcome.as_ref().err()).collect();
    assert!(failures.is_empty(), "size {size}, seed {seed}: {failures:#?}");
}

#[test]
fn outstanding_runs_of_every_kind_finish_in_random_interleavings() {
    for seed in [1, 2, 3, 4] {
        for size in [2, 3, 5] {
            run(size, 3, 24, seed);
        }
    }
}

/// Pretended nodes of consecutive ranks (so the two-level tree keeps the
/// rank order for the matrix product): reduces through the two-level
/// allreduce and two-level bcasts, with moving roots, among allreduces and
/// reduces.
#[test]
fn two_level_runs_finish_among_other_runs_on_pretended_nodes() {
    for (seed, sizes) in [(31, &[3, 2][..]), (32, &[2, 1, 2][..]), (33, &[1, 4][..]), (34, &[2, 2, 2][..])] {
        let nodes = common::nodes::blocks(sizes);
        run_on(nodes.size(), Some(&nodes), 3, 24, seed);
    }
}

#[test]
fn sixty_four_ranks_run_interleaved_calls() {
    run(64, 2, 10, 11);
}

#[test]
fn a_single_rank_and_zero_counts_finish_at_once() {
    run(1, 2, 12, 5);
}

/// Every rank on one thread, taking turns at random: a run that waited
/// inside `advance` for a peer would wait for a rank that cannot move,
/// and fail by its fault timeout instead of finishing.
#[test]
fn every_rank_on_one_thread_finishes_so_no_advance_waits() {
    for seed in [21, 22, 23] {
        let size = 4;
        // The last seed on pretended nodes of 2 and 2 (the two-level
        // allreduce and reduces through it, the two-level bcast).
        let nodes = (seed == 23).then(|| common::nodes::blocks(&[2, 2]));
        let scripts = scripts_for(size, 2, 20, seed, nodes.is_some());
        let mut buffers: Vec<Vec<Vec<Buffers>>> = (0..size).map(|rank| rank_buffers(rank, &scripts)).collect();
        {
            let mut players: Vec<Player<'_>> = fabrics(size, nodes.as_ref(), 2, seed, Duration::ZERO)
                .into_iter()
                .zip(buffers.iter_mut())
                .enumerate()
                .map(|(rank, (endpoints, buffers))| Player::new(rank, size, seed, &scripts, nodes.as_ref(), endpoints, buffers))
                .collect();
            play_on_one_thread(&mut players, seed, DEADLINE);
        }
        for (rank, buffers) in buffers.iter().enumerate() {
            check_results(rank, size, &scripts, buffers).unwrap_or_else(|why| panic!("seed {seed}: {why}"));
        }
    }
}

/// A peer that dies while a run waits for it ends the run with an error,
/// and the runs queued behind it on the same lane fail too rather than
/// wait on streams left out of step; another lane is untouched.
#[test]
fn a_dead_peer_fails_the_pending_run_and_those_behind_it() {
    let size = 2;
    let offsets = offsets(size);
    let mut endpoints = Fabric::new(size, offsets.window_len, FabricConfig::default());
    let mut first = endpoints.remove(0);
    let mut allreduce = Allreduce::new(0, size, offsets.allreduce, allreduce_config());
    let mut bcast = PutTreeBcast::new(0, size, offsets.bcast, bcast_config());
    let (send, mut one, mut two, mut message) = (vec![1u8; 8], vec![0u8; 8], vec![0u8; 8], vec![7u8; 16]);
    let mut queue: ScheduleQueue<'_, FabricEndpoint> = ScheduleQueue::default();
    let waiting = queue.post(Lane::Allreduce, Box::new(allreduce.start(&first, &WordSum, &send, &mut one).unwrap()));
    let behind = queue.post(Lane::Allreduce, Box::new(allreduce.start(&first, &WordSum, &send, &mut two).unwrap()));
    // Rank 0 is the put tree's root: it only sends, so it finishes alone.
    let other_lane = queue.post(Lane::Bcast, Box::new(bcast.start(0, &mut message).unwrap()));
    let mut outcomes = Vec::new();
    queue.advance(&mut first, |ticket, outcome| outcomes.push((ticket, outcome)));
    assert_eq!(outcomes.len(), 1, "only the bcast can finish while rank 1 is silent: {outcomes:?}");
    assert_eq!(outcomes[0], (other_lane, Ok(())));
    first.mark_dead(1);
    outcomes.clear();
    queue.advance(&mut first, |ticket, outcome| outcomes.push((ticket, outcome)));
    assert_eq!(outcomes.iter().map(|(ticket, _)| *ticket).collect::<Vec<_>>(), vec![waiting, behind]);
    let messages: Vec<String> = outcomes.iter().map(|(_, outcome)| outcome.clone().unwrap_err().to_string()).collect();
    assert!(messages[0].contains("rank 1 is unreachable"), "{messages:?}");
    assert!(messages[1].contains("an earlier run of this communicator failed") && messages[1].contains("rank 1"), "{messages:?}");
    assert!(queue.is_empty());
}
