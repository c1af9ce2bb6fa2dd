//! The non-blocking barriers (`BarrierRun`, the dissemination's, and
//! `TwoLevelBarrierRun` across nodes) over the in-process fabric: threads
//! as ranks, several communicators each with its own fabric, and one
//! script of posts, blocking barriers and waits that every rank follows
//! while advancing its pending runs at random in between. The property
//! checked is the barrier's definition, per communicator: no rank finishes
//! barrier k (blocking or not) before every rank has entered it; and every
//! run ends.

use crate::common;

use common::{EntryLedger, XorShift};

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::shm::NodeGroups;
use btl_ibmc::{SideProgress, TransportError, WaitPolicy};
use coll_rdma_core::collectives::allreduce::AllreduceConfig;
use coll_rdma_core::collectives::barrier::two_level::TwoLevelBarrier;
use coll_rdma_core::collectives::barrier::DisseminationBarrier;
use coll_rdma_core::layout::WindowLayout;
use coll_rdma_core::schedule::{Schedule, Step};

type BarrierRun = Box<dyn Schedule<FabricEndpoint, Error = TransportError> + Send>;

/// The barrier a communicator runs: the flat dissemination, or two levels
/// across the fabric's nodes (as the selector picks for one across nodes).
enum Barrier {
    Flat(DisseminationBarrier),
    TwoLevel(TwoLevelBarrier),
}

impl Barrier {
    fn start(&mut self) -> BarrierRun {
        match self {
            Barrier::Flat(barrier) => Box::new(barrier.start()),
            Barrier::TwoLevel(barrier) => Box::new(barrier.start()),
        }
    }

    fn run(&mut self, endpoint: &FabricEndpoint, side_progress: &dyn SideProgress) -> Result<(), TransportError> {
        match self {
            Barrier::Flat(barrier) => barrier.run(endpoint, side_progress),
            Barrier::TwoLevel(barrier) => barrier.run(endpoint, side_progress),
        }
    }
}

/// What every rank does next, in the same order on every rank.
#[derive(Clone, Copy, Debug)]
enum Action {
    /// Posts a non-blocking barrier on the communicator.
    Post(usize),
    /// A blocking barrier on the communicator: its pending runs first.
    Blocking(usize),
    /// Waits for the oldest-but-`skip` pending run of the communicator
    /// (any order of completion the application asks for).
    Wait { comm: usize, skip: usize },
}

fn script(comms: usize, actions: usize, seed: u64) -> Vec<Action> {
    let mut rng = XorShift::new(seed);
    (0..actions)
        .map(|_| {
            let comm = rng.below(comms);
            match rng.below(8) {
                0..=4 => Action::Post(comm),
                5 => Action::Blocking(comm),
                _ => Action::Wait { comm, skip: rng.below(3) },
            }
        })
        .collect()
}

/// One rank's view of one communicator.
struct RankComm {
    barrier: Barrier,
    endpoint: FabricEndpoint,
    /// Runs in the order posted, with the barrier's index on this comm.
    pending: VecDeque<(usize, BarrierRun)>,
    /// Barriers entered so far (posted or blocking).
    entered: usize,
    ledger: Arc<EntryLedger>,
    size: usize,
    /// The first barrier this rank left too early, if any.
    violation: Option<String>,
}

impl RankComm {
    /// Advances the oldest run, then the next once it is done: runs of one
    /// barrier advance in the order they were posted.
    ///
    /// A run's awaited word (`Schedule::awaited`, what MPI_Wait polls
    /// alone) must hold it back: an advance made while that word is
    /// missing, before and after, leaves the run pending on the same word.
    fn advance(&mut self) -> Result<(), String> {
        while let Some((k, run)) = self.pending.front_mut() {
            let watched = run.awaited().filter(|word| !word.arrived(&self.endpoint));
            let step = run.advance(&mut self.endpoint).map_err(|e| e.to_string())?;
            if let Some(word) = watched.filter(|word| !word.arrived(&self.endpoint))
                && (step == Step::Done || run.awaited() != Some(word))
            {
                return Err(format!("barrier {k}: awaited {word:?}, but an advance while it was missing moved the run ({step:?}, now {:?})", run.awaited()));
            }
            match step {
                Step::Pending => return Ok(()),
                Step::Done => {
                    // A violation is noted, not returned: the rank goes on
                    // with the script, so that the others are not left
                    // waiting for it and the test fails instead of hanging.
                    if let Err(why) = self.ledger.check_leave(*k, self.size) {
                        self.violation.get_or_insert(why);
                    }
                    self.pending.pop_front();
                }
            }
        }
        Ok(())
    }

    fn post(&mut self) -> Result<usize, String> {
        let k = self.entered;
        self.entered += 1;
        self.ledger.enter(k);
        self.pending.push_back((k, self.barrier.start()));
        // The first step is taken at post, unless an earlier run is queued.
        if self.pending.len() == 1 {
            self.advance()?;
        }
        Ok(k)
    }

    fn is_pending(&self, k: usize) -> bool {
        self.pending.iter().any(|(pending, _)| *pending == k)
    }
}

/// What a blocking wait on one communicator serves meanwhile: the pending
/// runs of the others, as Open MPI's progress loop does.
struct OtherComms<'a>(&'a [RefCell<RankComm>]);

impl SideProgress for OtherComms<'_> {
    fn progress_others(&self) {
        for comm in self.0 {
            if let Ok(mut comm) = comm.try_borrow_mut() {
                comm.advance().expect("a run failed while serving another communicator's wait");
            }
        }
    }
}

fn advance_all(comms: &[RefCell<RankComm>]) -> Result<(), String> {
    comms.iter().try_for_each(|comm| comm.borrow_mut().advance())
}

fn run_rank(comms: Vec<RankComm>, actions: &[Action], seed: u64) -> Result<(), String> {
    let comms: Vec<RefCell<RankComm>> = comms.into_iter().map(RefCell::new).collect();
    let mut rng = XorShift::new(seed);
    for &action in actions {
        // A random amount of application work, with some progress calls.
        for _ in 0..rng.below(4) {
            let comm = rng.below(comms.len());
            comms[comm].borrow_mut().advance()?;
        }
        rng.skew_arrival();
        match action {
            Action::Post(comm) => {
                comms[comm].borrow_mut().post()?;
            }
            Action::Blocking(comm) => {
                let mut this = comms[comm].borrow_mut();
                while !this.pending.is_empty() {
                    this.advance()?;
                    OtherComms(&comms).progress_others();
                    std::thread::yield_now();
                }
                let k = this.entered;
                this.entered += 1;
                this.ledger.enter(k);
                let this = &mut *this;
                this.barrier.run(&this.endpoint, &OtherComms(&comms)).map_err(|e| e.to_string())?;
                if let Err(why) = this.ledger.check_leave(k, this.size) {
                    this.violation.get_or_insert(why);
                }
            }
            Action::Wait { comm, skip } => {
                let target = {
                    let this = comms[comm].borrow();
                    this.pending.get(skip.min(this.pending.len().saturating_sub(1))).map(|(k, _)| *k)
                };
                if let Some(k) = target {
                    while comms[comm].borrow().is_pending(k) {
                        advance_all(&comms)?;
                        std::thread::yield_now();
                    }
                }
            }
        }
    }
    while comms.iter().any(|comm| !comm.borrow().pending.is_empty()) {
        advance_all(&comms)?;
        std::thread::yield_now();
    }
    comms.into_iter().find_map(|comm| comm.into_inner().violation).map_or(Ok(()), Err)
}

/// `nodes`: None for the flat barrier, else the two-level one over them
/// (leaders disseminating at `radix`), with slower puts between nodes.
fn interleaved(size: usize, radix: usize, nodes: Option<&NodeGroups>, comm_count: usize, actions: usize, seed: u64) -> Result<(), String> {
    let layout = WindowLayout::with_reductions(size, radix, &AllreduceConfig::default());
    let window_len = layout.window_len.max(layout.barrier_offset + TwoLevelBarrier::region_len(size));
    let script = Arc::new(script(comm_count, actions, seed));
    let policy = common::yielding_policy(50);
    let mut per_rank: Vec<Vec<RankComm>> = (0..size).map(|_| Vec::new()).collect();
    for comm in 0..comm_count {
        let config = FabricConfig {
            put_delay_max: Duration::from_micros(20),
            inter_node_put_delay: if nodes.is_some() { Duration::from_micros(30) } else { Duration::ZERO },
            nodes: nodes.cloned(),
            seed: seed ^ comm as u64,
            ..FabricConfig::default()
        };
        let ledger = Arc::new(EntryLedger::new(actions + 1));
        for (rank, endpoint) in Fabric::new(size, window_len, config).into_iter().enumerate() {
            let barrier = match nodes {
                None => Barrier::Flat(DisseminationBarrier::new(rank, size, radix, layout.barrier_offset, policy)),
                Some(nodes) => Barrier::TwoLevel(TwoLevelBarrier::new(rank, nodes, radix, layout.barrier_offset, policy)),
            };
            per_rank[rank].push(RankComm {
                barrier,
                endpoint,
                pending: VecDeque::new(),
                entered: 0,
                ledger: Arc::clone(&ledger),
                violation: None,
                size,
            });
        }
    }
    let handles: Vec<_> = per_rank
        .into_iter()
        .enumerate()
        .map(|(rank, comms)| {
            let script = Arc::clone(&script);
            std::thread::spawn(move || run_rank(comms, &script, seed ^ (rank as u64 + 1) << 8))
        })
        .collect();
    let mut first_error = None;
    for handle in handles {
        if let Err(e) = handle.join().expect("rank thread panicked") {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), |e| Err(format!("size {size} radix {radix} seed {seed:#x}: {e}")))
}

#[test]
fn interleaved_runs_on_several_communicators_keep_the_barrier_property() {
    for (size, radix) in [(2, 1), (3, 1), (4, 1), (4, 2), (5, 2), (7, 1)] {
        for seed in 1..=3u64 {
            interleaved(size, radix, None, 3, 120, seed * 0x9E37 + size as u64).unwrap();
        }
    }
}

#[test]
fn interleaved_two_level_runs_keep_the_barrier_property_on_uneven_nodes() {
    for (name, nodes) in common::nodes::uneven_layouts() {
        for radix in [1, 2] {
            for seed in 1..=2u64 {
                interleaved(nodes.size(), radix, Some(&nodes), 2, 80, seed * 0x51ED + nodes.size() as u64)
                    .map_err(|e| format!("nodes {name}: {e}"))
                    .unwrap();
            }
        }
    }
}

fn two_rank_pair(fault_timeout: Option<Duration>) -> (Vec<DisseminationBarrier>, Vec<FabricEndpoint>) {
    let layout = WindowLayout::with_reductions(2, 1, &AllreduceConfig::default());
    let policy = WaitPolicy { fault_timeout, ..common::yielding_policy(50) };
    let barriers = (0..2).map(|rank| DisseminationBarrier::new(rank, 2, 1, layout.barrier_offset, policy)).collect();
    (barriers, Fabric::new(2, layout.window_len, FabricConfig::default()))
}

#[test]
fn a_run_waits_for_the_late_rank_and_then_finishes() {
    let (mut barriers, mut endpoints) = two_rank_pair(None);
    let mut early = barriers[0].start();
    for _ in 0..100 {
        assert_eq!(early.advance(&mut endpoints[0]).unwrap(), Step::Pending, "finished before rank 1 entered");
    }
    let mut late = barriers[1].start();
    assert_eq!(late.advance(&mut endpoints[1]).unwrap(), Step::Done, "rank 0 had entered: one round is enough");
    assert_eq!(early.advance(&mut endpoints[0]).unwrap(), Step::Done);
    // The blocking barrier follows on the same slots and epochs.
    assert_eq!((barriers[0].epoch(), barriers[1].epoch()), (1, 1));
}

#[test]
fn a_run_that_waits_past_the_fault_timeout_fails() {
    let (mut barriers, mut endpoints) = two_rank_pair(Some(Duration::from_millis(5)));
    let mut lonely = barriers[0].start();
    assert_eq!(lonely.advance(&mut endpoints[0]).unwrap(), Step::Pending);
    let error = poll_until_failed(&mut lonely, &mut endpoints[0]);
    assert!(error.contains("fault timeout"), "{error}");
}

/// Polls a run that cannot finish, 1 ms apart, until it fails: a loaded
/// machine may stretch one gap past `AWAY` (time away from MPI, which
/// starts the stuck time again), so the polls go on until the clock gives
/// up, bounded far above the test's fault timeout.
fn poll_until_failed<S>(run: &mut S, endpoint: &mut FabricEndpoint) -> String
where
    S: Schedule<FabricEndpoint> + ?Sized,
    S::Error: std::fmt::Display,
{
    let started = Instant::now();
    loop {
        match run.advance(endpoint) {
            Ok(Step::Pending) if started.elapsed() < Duration::from_secs(60) => std::thread::sleep(Duration::from_millis(1)),
            Ok(step) => panic!("{step:?} after {:?} instead of the fault timeout's failure", started.elapsed()),
            Err(why) => return why.to_string(),
        }
    }
}

#[test]
fn two_level_runs_that_wait_past_the_fault_timeout_fail() {
    // One node of two: rank 0 leads, rank 1 is its member. Each waits
    // alone for the other (the member for its release, the leader for the
    // member's arrival) and must give up with the fault timeout's error.
    let nodes = common::nodes::blocks(&[2]);
    let layout = WindowLayout::with_reductions(2, 1, &AllreduceConfig::default());
    let window_len = layout.window_len.max(layout.barrier_offset + TwoLevelBarrier::region_len(2));
    let policy = WaitPolicy { fault_timeout: Some(Duration::from_millis(5)), ..common::yielding_policy(50) };
    for waiting_rank in [0, 1] {
        let mut endpoints = Fabric::new(2, window_len, FabricConfig { nodes: Some(nodes.clone()), ..FabricConfig::default() });
        let mut barrier = TwoLevelBarrier::new(waiting_rank, &nodes, 1, layout.barrier_offset, policy);
        let mut lonely = barrier.start();
        assert_eq!(lonely.advance(&mut endpoints[waiting_rank]).unwrap(), Step::Pending, "rank {waiting_rank}");
        let error = poll_until_failed(&mut lonely, &mut endpoints[waiting_rank]);
        assert!(error.contains("fault timeout"), "rank {waiting_rank}: {error}");
    }
}
