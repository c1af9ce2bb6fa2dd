//! `Bcast::start` (MPI_Ibcast's run) over the in-process fabric, as the
//! glue drives it: every rank a thread with one `Bcast` and one schedule
//! queue per communicator, a script of non-blocking bcasts with moving
//! roots and lengths from zero to several segments, non-blocking
//! allreduces in the same queue and blocking bcasts between them (each
//! after finishing the queue, as the glue's blocking call does). Each rank
//! posts and advances in its own seeded random interleaving. Both kinds
//! of window a run serves are covered: a shared window (shm: runs and
//! blocking calls multicast through the root's window, whose runs
//! `multicast_run_fabric` tests further) and none (verbs without multicast: both take the tree); and
//! ranks that read each other's memory (shm with cross-memory attach),
//! where longer messages go in one copy from the root's buffer, blocking
//! and run alike, up to lengths at which the root writes a share into
//! every receiver.
//!
//! On pretended nodes (`Bed::nodes`) the bcast takes its two levels, runs
//! and blocking calls alike: the root's node, the leaders, each node from
//! its leader, every stage on its own path's run (window multicast, put
//! tree or single copy), over every kind of window above.
//!
//! The reference: every rank's bcast buffer must equal the bytes the root
//! was given (generated from the call's index, never sent), and every
//! allreduce the wrapping sum of all ranks' inputs, computed serially.

use crate::common;

use std::time::{Duration, Instant};

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::shm::NodeGroups;
use btl_ibmc::{MulticastKind, RmcastConfig, WaitPolicy};
use coll_rdma_core::collectives::allreduce::Allreduce;
use coll_rdma_core::collectives::bcast::single_copy::root_share;
use coll_rdma_core::collectives::bcast::{Bcast, BcastConfig};
use coll_rdma_core::schedule_queue::{Lane, Run, ScheduleQueue};

use common::bcast_script::{allreduce_config, allreduce_offset, expected, initial_buffers, policy, window_len, Call, Kind};
use common::nodes::blocks;
use common::{WordSum, XorShift};

/// A rank that has not finished its script by then takes it for a deadlock.
const DEADLINE: Duration = Duration::from_secs(120);
const MAX_OUTSTANDING: usize = 6;
const SEGMENT: usize = 128;


/// Where ranks read each other's memory, the shortest message sent in one
/// copy: the script's longer lengths.
const SINGLE_COPY_FROM: usize = 5 * SEGMENT;
/// Past `single_copy::ROOT_SHARE_MIN_BYTES`: the root writes a share.
const WITH_ROOT_SHARE: usize = 300_007;

#[derive(Clone, Copy, Debug)]
struct Bed {
    kind: MulticastKind,
    /// Ranks read each other's memory, and long messages go in one copy.
    cross_memory: bool,
    /// The sizes of the pretended nodes (consecutive ranks), where the
    /// bcast takes two levels; `None`: flat.
    nodes: Option<&'static [usize]>,
    /// On a shared window, the shortest ibcast whose run multicasts
    /// (`BcastConfig::shared_window_runs_multicast_from`; 0 where ranks
    /// outnumber cores); shorter ones take the put tree.
    multicast_runs_from: usize,
}

impl Bed {
    fn flat(kind: MulticastKind, cross_memory: bool) -> Self {
        Bed { kind, cross_memory, nodes: None, multicast_runs_from: 0 }
    }

    fn nodes(&self) -> Option<NodeGroups> {
        self.nodes.map(blocks)
    }
}

fn bcast_config_on(bed: Bed) -> BcastConfig {
    let single_copy_min_bytes = if bed.cross_memory { SINGLE_COPY_FROM } else { usize::MAX };
    BcastConfig { single_copy_min_bytes, shared_window_runs_multicast_from: bed.multicast_runs_from, ..bcast_config() }
}

fn bcast_config() -> BcastConfig {
    let multicast = RmcastConfig {
        slot_bytes: SEGMENT,
        window_slots: 4,
        wait: policy(),
        give_up_after: Some(Duration::from_secs(60)),
        ..RmcastConfig::default()
    };
    // Room for a node's stage, which the pretended nodes' bcasts take.
    BcastConfig { multicast, room_for_two_levels: true, ..BcastConfig::default() }
}




/// The same script on every rank; consecutive bcasts change roots.
fn script(size: usize, seed: u64, calls: usize, bed: Bed) -> Vec<Call> {
    let mut rng = XorShift::new(seed);
    let mut lengths = vec![0, 1, 8, SEGMENT - 1, SEGMENT, SEGMENT + 1, 5 * SEGMENT + 3, 40 * SEGMENT];
    if bed.cross_memory {
        lengths.extend([SINGLE_COPY_FROM, WITH_ROOT_SHARE]);
    }
    let mut root = 0;
    (0..calls)
        .map(|_| {
            root = (root + 1) % size;
            let len = lengths[rng.below(lengths.len())];
            match rng.below(6) {
                0 | 1 | 2 => Call { kind: Kind::Ibcast { root }, len },
                3 | 4 => Call { kind: Kind::Iallreduce, len: len.next_multiple_of(8).min(64 * 8) },
                _ => Call { kind: Kind::Bcast { root }, len },
            }
        })
        .collect()
}

fn finish_queue(queue: &mut ScheduleQueue<'_, FabricEndpoint>, transport: &mut FabricEndpoint, what: &str) -> Result<usize, String> {
    let started = Instant::now();
    let mut finished = 0;
    while !queue.is_empty() {
        if started.elapsed() > DEADLINE {
            return Err(format!("{what}: queue not finished after {DEADLINE:?}"));
        }
        let mut failure = None;
        queue.advance(transport, |ticket, outcome| {
            finished += 1;
            if let Err(why) = outcome {
                failure.get_or_insert(format!("{what}: run {}: {why}", ticket.0));
            }
        });
        if let Some(failure) = failure {
            return Err(failure);
        }
        std::thread::yield_now();
    }
    Ok(finished)
}

/// Bytes `rank` writes into its receivers as the root of the script's
/// single-copy calls, blocking and run alike: their share of every message
/// long enough (`root_share`). Shows that the runs take the single copy.
fn root_shares(rank: usize, size: usize, script: &[Call], bed: Bed) -> u64 {
    if !bed.cross_memory {
        return 0;
    }
    let root_of = |call: &Call| match call.kind {
        Kind::Ibcast { root } | Kind::Bcast { root } => Some(root),
        Kind::Iallreduce => None,
    };
    let long = script.iter().filter(|call| call.len >= SINGLE_COPY_FROM);
    // What this rank writes as the root of a stage of `members` ranks.
    let shares = |len: usize, members: usize| (root_share(len, members) * (members - 1)) as u64;
    let Some(nodes) = bed.nodes() else {
        return long.filter(|call| root_of(call) == Some(rank)).map(|call| shares(call.len, size)).sum();
    };
    // In two levels: the root's node from the root, the leaders from the
    // root's leader, every other node from its leader.
    let (node, leaders) = (nodes.local_count(rank), nodes.count());
    let leads = nodes.leader_of(rank) == rank;
    long.filter_map(|call| root_of(call).map(|root| (call.len, root)))
        .map(|(len, root)| {
            let on_roots_node = nodes.same_node(rank, root);
            let mut bytes = 0;
            if root == rank || (leads && !on_roots_node) {
                bytes += shares(len, node);
            }
            if leads && nodes.leader_of(root) == rank {
                bytes += shares(len, leaders);
            }
            bytes
        })
        .sum()
}

/// Messages `rank` takes from the flat window multicast: every blocking
/// bcast of another root, and every ibcast of another root where the runs
/// multicast; none that go in one copy. `None` off a flat shared window.
fn multicast_messages_received(rank: usize, script: &[Call], bed: Bed) -> Option<u64> {
    if bed.kind != MulticastKind::SharedWindow || bed.nodes.is_some() {
        return None;
    }
    let through_window = |call: &&Call| match call.kind {
        Kind::Bcast { root } => root != rank,
        Kind::Ibcast { root } => root != rank && call.len >= bed.multicast_runs_from,
        Kind::Iallreduce => false,
    };
    let in_one_copy = |len: usize| bed.cross_memory && len >= SINGLE_COPY_FROM;
    Some(script.iter().filter(through_window).filter(|call| call.len > 0 && !in_one_copy(call.len)).count() as u64)
}

/// Plays the script on `rank`, in an interleaving drawn from `seed`, and
/// checks its results.
fn play_rank(rank: usize, size: usize, seed: u64, script: &[Call], mut transport: FabricEndpoint, bed: Bed) -> Result<(), String> {
    if bed.cross_memory {
        // Collective: every rank's thread makes this call.
        transport.enable_cross_memory(false).map_err(|why| format!("rank {rank}: cross-memory attach refused: {why:?}"))?;
    }
    let (sends, mut buffers) = initial_buffers(rank, script);
    {
        let mut bcast = Bcast::new(rank, size, 0, bcast_config_on(bed));
        if let Some(nodes) = bed.nodes() {
            bcast.use_two_levels(&nodes, 1).map_err(|why| format!("rank {rank}: no two levels: {why}"))?;
        }
        let mut allreduce = Allreduce::new(rank, size, allreduce_offset(size, &bcast_config()), allreduce_config());
        let mut queue: ScheduleQueue<'_, FabricEndpoint> = ScheduleQueue::default();
        let mut rng = XorShift::new(seed ^ (rank as u64 + 1).wrapping_mul(0x9E37_79B9));
        let mut calls = sends.iter().zip(buffers.iter_mut()).zip(script).enumerate();
        let started = Instant::now();
        let mut next = calls.next();
        let mut finished = 0;
        while next.is_some() || !queue.is_empty() {
            if started.elapsed() > DEADLINE {
                return Err(format!("rank {rank}: {} of {} calls finished after {DEADLINE:?}", finished, script.len()));
            }
            let may_post = queue.len() < MAX_OUTSTANDING;
            match next.take() {
                Some((index, ((send, buffer), call))) if may_post && rng.below(2) == 0 => {
                    let what = format!("rank {rank}/{size} call {index} {call:?}");
                    match call.kind {
                        Kind::Ibcast { root } => {
                            let run: Run<'_, FabricEndpoint> = Box::new(bcast.start(&transport, root, buffer).map_err(|why| format!("{what}: {why}"))?);
                            queue.post(Lane::Bcast, run);
                        }
                        Kind::Iallreduce => {
                            let run = allreduce.start(&transport, WordSum, send, buffer).map_err(|why| format!("{what}: {why}"))?;
                            queue.post(Lane::Allreduce, Box::new(run));
                        }
                        Kind::Bcast { root } => {
                            finished += finish_queue(&mut queue, &mut transport, &what)?;
                            bcast.bcast(&transport, root, buffer).map_err(|why| format!("{what}: {why}"))?;
                            finished += 1;
                        }
                    }
                    next = calls.next();
                }
                unposted => {
                    next = unposted;
                    queue.advance(&mut transport, |ticket, outcome| {
                        finished += 1;
                        if let Err(why) = outcome {
                            panic!("rank {rank}: run {}: {why}", ticket.0);
                        }
                    });
                }
            }
            if rng.below(8) == 0 {
                std::thread::yield_now();
            }
        }
        bcast.drain(&transport).map_err(|why| format!("rank {rank}: drain: {why}"))?;
        let received = bcast.stats().messages_received;
        if let Some(expected) = multicast_messages_received(rank, script, bed) {
            if received != expected {
                return Err(format!("rank {rank}: the multicast delivered {received} message(s), expected {expected}"));
            }
        }
        let shares_written = bcast.single_copy_root_share_bytes();
        let shares_expected = root_shares(rank, size, script, bed);
        if shares_written != shares_expected {
            return Err(format!("rank {rank}: wrote {shares_written} bytes into receivers as a single-copy root, expected {shares_expected}"));
        }
    }
    for (index, call) in script.iter().enumerate() {
        let expected = expected(index, size, call);
        if buffers[index] != expected {
            return Err(format!("rank {rank} call {index} {call:?}: got {:?}, expected {expected:?}", buffers[index]));
        }
    }
    Ok(())
}

fn run(size: usize, bed: Bed, calls: usize, seed: u64) {
    let script = script(size, seed, calls, bed);
    let kind = bed.kind;
    assert!(script.iter().any(|call| matches!(call.kind, Kind::Ibcast { .. }) && call.len > SEGMENT), "the script must hold multi-segment ibcasts");
    let fabric = FabricConfig { multicast_kind: kind, put_delay_max: Duration::from_micros(20), nodes: bed.nodes(), seed, ..FabricConfig::default() };
    let failures = play_every_rank(size, fabric, |rank, endpoint| play_rank(rank, size, seed, &script, endpoint, bed));
    assert!(failures.is_empty(), "size {size}, {bed:?}, seed {seed}: {failures:#?}");
}

/// Every rank of a fabric of `size` ranks as a thread playing `play`; the
/// failures.
fn play_every_rank<P>(size: usize, fabric: FabricConfig, play: P) -> Vec<String>
where
    P: Fn(usize, FabricEndpoint) -> Result<(), String> + Sync,
{
    let endpoints = Fabric::new(size, window_len(size, &bcast_config()), fabric);
    let outcomes: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = endpoints
            .into_iter()
            .enumerate()
            .map(|(rank, endpoint)| {
                let play = &play;
                scope.spawn(move || play(rank, endpoint))
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or_else(|_| Err("a rank panicked".to_string()))).collect()
    });
    outcomes.into_iter().filter_map(Result::err).collect()
}

/// Both runs a shared window may take: the window multicast at every
/// length (where ranks outnumber cores), from one segment on (the
/// script's shorter ibcasts on the put tree beside the longer ones
/// multicasting), and the put tree alone; the multicast counts the
/// messages of the runs that take it.
#[test]
fn ibcasts_with_moving_roots_match_the_root_beside_other_runs_on_a_shared_window() {
    for seed in [1, 2, 3] {
        for size in [2, 3, 5] {
            for multicast_runs_from in [0, SEGMENT, usize::MAX] {
                run(size, Bed { multicast_runs_from, ..Bed::flat(MulticastKind::SharedWindow, false) }, 30, seed);
            }
        }
    }
}

#[test]
fn ibcasts_and_blocking_bcasts_share_the_put_tree_without_multicast() {
    for seed in [4, 5] {
        for size in [2, 4] {
            run(size, Bed::flat(MulticastKind::None, false), 30, seed);
        }
    }
}

#[test]
fn ibcasts_in_one_copy_mix_with_blocking_ones_and_the_window_multicast() {
    let bed = Bed::flat(MulticastKind::SharedWindow, true);
    let sizes = [2, 3, 5];
    // The first two seeds whose scripts post, at every size, an ibcast
    // long enough for the root to write shares.
    let with_root_share = |seed: u64, size: usize| {
        script(size, seed, 30, bed).iter().any(|call| matches!(call.kind, Kind::Ibcast { .. }) && call.len >= WITH_ROOT_SHARE)
    };
    let seeds: Vec<u64> = (7..).filter(|&seed| sizes.iter().all(|&size| with_root_share(seed, size))).take(2).collect();
    for seed in seeds {
        for size in sizes {
            run(size, bed, 30, seed);
        }
    }
}

/// Pretended nodes of uneven sizes: the two-level bcast's runs among
/// blocking two-level bcasts and allreduce runs, with moving roots, on a
/// shared window (the stages' runs multicasting or on the put tree),
/// without multicast, and with cross-memory reads (single copy in every
/// stage from 5 segments, shares written from 300,007 bytes).
#[test]
fn two_level_ibcasts_match_the_root_on_pretended_nodes() {
    let layouts: [&'static [usize]; 4] = [&[3, 2], &[1, 2, 2], &[2, 1], &[1, 1, 1, 2]];
    for (index, nodes) in layouts.into_iter().enumerate() {
        let seed = 40 + index as u64;
        let size = nodes.iter().sum();
        let beds = [
            (MulticastKind::SharedWindow, false, 0),
            (MulticastKind::SharedWindow, false, SEGMENT),
            (MulticastKind::SharedWindow, false, usize::MAX),
            (MulticastKind::None, false, 0),
            (MulticastKind::SharedWindow, true, 0),
        ];
        for (kind, cross_memory, multicast_runs_from) in beds {
            run(size, Bed { kind, cross_memory, nodes: Some(nodes), multicast_runs_from }, 30, seed);
        }
    }
}

/// The put tree's parents keep the highest credit they have read from
/// each child (`put_tree::ToChild`) and skip the read while it covers the
/// slot. Here every rank but one posts up to `SLOW_READER_OUTSTANDING`
/// ibcasts and advances them as fast as it can, so the tree's root and
/// every other parent run far ahead of the slow reader (a thread that
/// sleeps before each of its steps) and of the fast children alike;
/// roots move every few calls (the relay to rank 0), messages of one
/// segment and of several, a blocking bcast now and then (it finishes the
/// queue first, and uses the same kept credits). A credit taken from the
/// wrong child, or assumed rather than read, lets a parent overwrite a
/// slot the slow reader has not read: its buffer then holds a later
/// call's bytes.
#[test]
fn put_tree_parents_far_ahead_of_a_slow_reader_never_overwrite_its_slots() {
    for (size, slow) in [(3, 1), (4, 1), (4, 3), (5, 2)] {
        let seed = 70 + size as u64 + slow as u64;
        let mut rng = XorShift::new(seed);
        let lengths = [1, 8, SEGMENT, SEGMENT + 1, 3 * SEGMENT + 5];
        let script: Vec<Call> = (0..120)
            .map(|index| {
                let root = if index % 7 < 4 { 0 } else { rng.below(size) };
                let len = lengths[rng.below(lengths.len())];
                let kind = if index % 29 == 28 { Kind::Bcast { root } } else { Kind::Ibcast { root } };
                Call { kind, len }
            })
            .collect();
        let fabric = FabricConfig { multicast_kind: MulticastKind::None, put_delay_max: Duration::from_micros(5), seed, ..FabricConfig::default() };
        let failures = play_every_rank(size, fabric, |rank, endpoint| {
            let pause = if rank == slow { Duration::from_micros(200) } else { Duration::ZERO };
            play_far_ahead(rank, size, &script, endpoint, pause)
        });
        assert!(failures.is_empty(), "size {size}, slow rank {slow}: {failures:#?}");
    }
}

const SLOW_READER_OUTSTANDING: usize = 32;

/// `script` on `rank`, over the put tree (no multicast): posts while fewer
/// than `SLOW_READER_OUTSTANDING` runs are queued, else advances; sleeps
/// `pause` before each step. Checks every buffer against the root's bytes.
fn play_far_ahead(rank: usize, size: usize, script: &[Call], mut transport: FabricEndpoint, pause: Duration) -> Result<(), String> {
    let (_, mut buffers) = initial_buffers(rank, script);
    {
        let mut bcast = Bcast::new(rank, size, 0, bcast_config_on(Bed::flat(MulticastKind::None, false)));
        let mut queue: ScheduleQueue<'_, FabricEndpoint> = ScheduleQueue::default();
        let mut calls = buffers.iter_mut().zip(script).enumerate().peekable();
        let started = Instant::now();
        while calls.peek().is_some() || !queue.is_empty() {
            if started.elapsed() > DEADLINE {
                return Err(format!("rank {rank}: not finished after {DEADLINE:?}"));
            }
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
            if queue.len() < SLOW_READER_OUTSTANDING
                && let Some((index, (buffer, call))) = calls.next()
            {
                let what = format!("rank {rank}/{size} call {index} {call:?}");
                match call.kind {
                    Kind::Ibcast { root } => {
                        let run: Run<'_, FabricEndpoint> = Box::new(bcast.start(&transport, root, buffer).map_err(|why| format!("{what}: {why}"))?);
                        queue.post(Lane::Bcast, run);
                    }
                    Kind::Bcast { root } => {
                        finish_queue(&mut queue, &mut transport, &what)?;
                        bcast.bcast(&transport, root, buffer).map_err(|why| format!("{what}: {why}"))?;
                    }
                    Kind::Iallreduce => unreachable!("the script has no allreduce"),
                }
                continue;
            }
            let mut failure = None;
            queue.advance(&mut transport, |ticket, outcome| {
                if let Err(why) = outcome {
                    failure.get_or_insert(format!("rank {rank}: run {}: {why}", ticket.0));
                }
            });
            if let Some(failure) = failure {
                return Err(failure);
            }
            std::thread::yield_now();
        }
    }
    for (index, call) in script.iter().enumerate() {
        let expected = expected(index, size, call);
        if buffers[index] != expected {
            return Err(format!("rank {rank} call {index} {call:?}: got {:?}, expected {expected:?}", buffers[index]));
        }
    }
    Ok(())
}

#[test]
fn one_rank_and_zero_lengths_finish_at_once() {
    run(1, Bed::flat(MulticastKind::SharedWindow, false), 30, 6);
    run(1, Bed::flat(MulticastKind::SharedWindow, true), 30, 6);
}

/// A single-copy run whose peer never takes part fails once it has made
/// no progress for the fault timeout, on the root (no receiver says done)
/// and on a receiver (no announcement) alike, instead of pending for ever.
#[test]
fn a_single_copy_run_alone_fails_after_the_fault_timeout() {
    use coll_rdma_core::schedule::{Schedule, Step};
    let fault_timeout = Duration::from_millis(300);
    let config = BcastConfig {
        single_copy_min_bytes: SINGLE_COPY_FROM,
        multicast: RmcastConfig { wait: WaitPolicy { fault_timeout: Some(fault_timeout), ..policy() }, ..bcast_config().multicast },
        ..bcast_config()
    };
    for lonely in [0, 1] {
        let size = 2;
        let endpoints = Fabric::new(size, window_len(size, &bcast_config()), FabricConfig { multicast_kind: MulticastKind::SharedWindow, ..FabricConfig::default() });
        let outcomes: Vec<Option<String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = endpoints
                .into_iter()
                .enumerate()
                .map(|(rank, mut endpoint)| {
                    scope.spawn(move || {
                        endpoint.enable_cross_memory(false).expect("cross-memory attach");
                        if rank != lonely {
                            return None;
                        }
                        let mut bcast = Bcast::new(rank, size, 0, config);
                        let mut buf = vec![7u8; WITH_ROOT_SHARE];
                        let mut run = bcast.start(&endpoint, 0, &mut buf).expect("start");
                        let started = Instant::now();
                        loop {
                            match run.advance(&mut endpoint) {
                                Ok(Step::Pending) if started.elapsed() < DEADLINE => std::thread::yield_now(),
                                Ok(step) => return Some(format!("rank {rank}: {step:?} after {:?}", started.elapsed())),
                                Err(why) => return Some(format!("failed after {:?}: {why}", started.elapsed())),
                            }
                        }
                    })
                })
                .collect();
            handles.into_iter().map(|handle| handle.join().expect("rank thread")).collect()
        });
        let outcome = outcomes[lonely].clone().expect("the lonely rank's outcome");
        assert!(outcome.starts_with("failed") && outcome.contains("made no progress"), "rank {lonely} alone: {outcome}");
    }
}

/// A root that cannot provide its message (the glue's failed pack:
/// `abandon_run_at_root`) in two levels: every other rank's run fails,
/// through every stage (the root's node, the leaders from the root's
/// leader, the other node from its leader), long before the fault
/// timeout, through the shared window's multicast, on the put tree and
/// in one copy, from a leader and from a rank that leads nothing.
#[test]
fn an_abandoned_two_level_bcast_fails_every_run_through_the_stages() {
    use coll_rdma_core::schedule::{Schedule, Step};
    let nodes: &'static [usize] = &[2, 2];
    let size = 4;
    // Below the stage runs' fault timeout (`policy`, 60 s), so a run that
    // only the timeout ends fails the test; far above what 4 yielding
    // threads need even at a load of a few hundred on 2 cores.
    let deadline = Duration::from_secs(45);
    let paths = [(3 * SEGMENT + 1, MulticastKind::SharedWindow, false), (3 * SEGMENT + 1, MulticastKind::None, false), (SINGLE_COPY_FROM + 9, MulticastKind::SharedWindow, true)];
    for (len, kind, cross_memory) in paths {
        for root in [1, 0] {
            let bed = Bed { kind, cross_memory, nodes: Some(nodes), multicast_runs_from: 0 };
            let fabric = FabricConfig { multicast_kind: bed.kind, nodes: bed.nodes(), ..FabricConfig::default() };
            let endpoints = Fabric::new(size, window_len(size, &bcast_config()), fabric);
            let outcomes: Vec<String> = std::thread::scope(|scope| {
                let handles: Vec<_> = endpoints
                    .into_iter()
                    .enumerate()
                    .map(|(rank, mut endpoint)| {
                        scope.spawn(move || {
                            if cross_memory {
                                endpoint.enable_cross_memory(false).expect("cross-memory attach");
                            }
                            let mut bcast = Bcast::new(rank, size, 0, bcast_config_on(bed));
                            bcast.use_two_levels(&blocks(nodes), 1).expect("room for two levels");
                            if rank == root {
                                return match bcast.abandon_run_at_root(&endpoint, root, len) {
                                    Ok(()) => "abandoned".to_string(),
                                    Err(why) => format!("could not abandon: {why}"),
                                };
                            }
                            let mut buf = vec![0u8; len];
                            let mut run = bcast.start(&endpoint, root, &mut buf).expect("start");
                            let started = Instant::now();
                            loop {
                                match run.advance(&mut endpoint) {
                                    Ok(Step::Pending) if started.elapsed() < deadline => std::thread::yield_now(),
                                    Ok(step) => return format!("{step:?} after {:?}", started.elapsed()),
                                    Err(why) => return format!("failed: {why}"),
                                }
                            }
                        })
                    })
                    .collect();
                handles.into_iter().map(|handle| handle.join().expect("rank thread")).collect()
            });
            for (rank, outcome) in outcomes.iter().enumerate() {
                let expected = if rank == root { "abandoned" } else { "failed: " };
                assert!(outcome.starts_with(expected), "root {root}, {len} bytes, rank {rank}: {outcome} (all: {outcomes:?})");
            }
        }
    }
}
