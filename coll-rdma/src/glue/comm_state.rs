//! What coll rdma keeps per communicator: the saved fallbacks, the lazily
//! established transport, the collectives' precomputed schedules and the
//! counts reported at verbose level when the communicator is freed.

use std::ffi::c_int;
use std::rc::Rc;

use btl_ibmc::{Datagrams, Endpoint, MulticastKind, NoSideProgress, PeerReads, SelectedTransport, TransportError, WaitPolicy};
use ompi_sys as sys;
use tuning::{choose_barrier_radix, choose_bcast_max_bytes, BcastStreamModel, WindowedBcast};

use super::handover::Handover;
use super::reduction_call::FoldOrder;
use super::hierarchy::{HierarchyPlan, JobPlacement, Schedule};
use super::leader_links::{FlatSchedules, LeaderLinks};
use btl_ibmc::shm::NodeGroups;
use crate::patterns::two_level_links;
use super::link::{self, LinkRequest};
use super::agreement::{agree_on_protocol, ProtocolInputs, ProtocolSettings};
use super::params::{BcastSettings, Hierarchy, ReductionSettings, Settings, TestFaults, TransportChoice, UdpSettings, VerbsSettings, WindowLimit};
use super::saved::SavedCollectives;
use crate::collectives::allreduce::{Allreduce, AllreduceConfig};
use crate::collectives::allreduce_autotune::{degree_candidates, trial_bytes, DegreeOutcome, DegreeTrial};
use crate::collectives::barrier_autotune::{barrier_candidates, TrialOutcome, TunedBarrier};
use crate::collectives::barrier_two_level::TwoLevelBarrier;
use crate::collectives::bcast::{Bcast, BcastConfig};
use crate::collectives::read_tree::ReadTree;
use crate::collectives::reduce::Reduce;
use crate::collectives::ring_reduction::{RingLengths, RingReduction};
use crate::layout::WindowLayout;

/// What a collective entry point does once it has let go of the state.
pub(super) enum Step {
    Done(c_int),
    /// Run the module underneath. It may call back into our entry points
    /// (tuned's allreduce runs the communicator's reduce and bcast), so it
    /// must run after the state is released.
    HandOver(Box<dyn FnOnce() -> c_int>),
}

pub(super) enum Link {
    /// Set up on the first collective: Open MPI's collectives cannot be
    /// used while modules are being enabled.
    NotYet,
    Ready(SelectedTransport),
    /// Every rank reached the same verdict, so all of them fall back.
    Unavailable,
}

/// The collectives coll rdma serves, for counting and for messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Collective {
    Barrier,
    Allreduce,
    Reduce,
    Bcast,
}

impl Collective {
    pub(super) const ALL: [Collective; 4] = [Collective::Barrier, Collective::Allreduce, Collective::Reduce, Collective::Bcast];

    pub(super) fn name(self) -> &'static str {
        match self {
            Collective::Barrier => "barrier",
            Collective::Allreduce => "allreduce",
            Collective::Reduce => "reduce",
            Collective::Bcast => "bcast",
        }
    }
}

/// Calls of one collective: served natively or handed over.
#[derive(Default)]
struct Tally {
    served: u64,
    handed_over: u64,
}

pub struct CommState {
    pub(super) cid: u32,
    pub(super) rank: usize,
    pub(super) size: usize,
    pub(super) saved: Rc<SavedCollectives>,
    /// What every rank must agree on before any protocol runs.
    protocol: ProtocolSettings,
    /// Calls per collective, for the testing-only fault injection.
    calls: [u64; 4],
    test_faults: TestFaults,
    /// A call failed midway: the protocols' state is not to be trusted, so
    /// teardown skips their closing steps (the module hands every later call
    /// over).
    failed: bool,
    /// Calls the module handed over without this state once it had failed.
    handed_over_after_failure: u64,
    transport_choice: TransportChoice,
    /// coll_rdma_autotune is on (whether or not this communicator has
    /// radices to choose from).
    autotune: bool,
    verbs_settings: VerbsSettings,
    udp_settings: UdpSettings,
    layout: WindowLayout,
    pub(super) link: Link,
    /// Every rank has just agreed that there is no transport: the module
    /// may put the functions underneath back into the communicator's table.
    bypass_requested: bool,
    pub(super) barrier: TunedBarrier,
    /// Set when the transport is known, if the communicator spans nodes
    /// and `coll_rdma_hierarchy` allows: it then serves every barrier in
    /// place of `barrier` (they share the window's barrier region).
    pub(super) two_level_barrier: Option<TwoLevelBarrier>,
    hierarchy: HierarchyPlan,
    /// Set when only the nodes' leaders hold queue pairs across nodes:
    /// the calls it rules out go to the module underneath.
    pub(super) leader_links: Option<LeaderLinks>,
    pub(super) allreduce: Allreduce,
    /// The autotune's degree trial, until the first allreduce the tree
    /// serves runs it (or the two-level tree makes it moot).
    pub(super) allreduce_trial: Option<DegreeTrial>,
    /// coll_rdma_autotune is on and the degree is not fixed.
    allreduce_autotune: bool,
    pub(super) allreduce_max_bytes: Option<usize>,
    pub(super) reduce: Reduce,
    pub(super) reduce_max_bytes: Option<usize>,
    /// Long allreduces and reduces of commutative ops where the parallel
    /// reduction does not serve.
    pub(super) ring: RingReduction,
    pub(super) allreduce_ring: RingLengths,
    pub(super) reduce_ring: RingLengths,
    /// `coll_rdma_udp_ring_max_bytes`, which bounds both lengths above
    /// once the transport turns out to be udp.
    udp_ring_max_bytes: Option<usize>,
    pub(super) bcast: Bcast,
    /// The window paths' limit as set; `bcast_max_bytes` once the
    /// transport is known.
    bcast_window_limit: WindowLimit,
    pub(super) bcast_max_bytes: Option<usize>,
    pub(super) bcast_single_copy_max_bytes: Option<usize>,
    /// `Some(pretend_refused)`: probe cross-memory attach at setup.
    cross_memory_probe: Option<bool>,
    /// Indexed by `Collective as usize`.
    tallies: [Tally; 4],
    /// (collective, reason category, fold order) already reported, so that a
    /// loop of handed-over calls says why once, not every time (a handful at
    /// most).
    reported_handovers: Vec<(Collective, &'static str, FoldOrder)>,
}

/// How a rank waits: spin only while every rank of the node has a core
/// (and not at all where the data comes through the kernel, see
/// `btl_ibmc::KERNEL_DEFAULT_SPIN_POLLS`), unless the user chose a count.
fn wait_policy(settings: &Settings, local_ranks: usize) -> WaitPolicy {
    let cores = online_cores();
    let mut policy = WaitPolicy::for_occupancy(local_ranks, cores, settings.stall_warning);
    policy.fault_timeout = settings.fault_timeout;
    if let Some(polls) = settings.spin_polls {
        policy = policy.spinning(polls);
    }
    policy
}

fn online_cores() -> usize {
    // SAFETY: sysconf has no preconditions. Online cores, not this
    // process's affinity mask: a rank bound to one core still has that core
    // to itself when the node is not oversubscribed.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 { n as usize } else { 1 }
}

/// The configuration of one reduction collective: the model's choices,
/// overridden by whatever the user fixed, with a sentence saying why.
pub(super) fn reduction_config(settings: &Settings, chosen: &ReductionSettings, size: usize, policy: WaitPolicy) -> (AllreduceConfig, String) {
    let model = tuning::AllreduceModel { segment_bytes: Some(chosen.segment_bytes), ..settings.reduction_model };
    let (mut config, mut why) = AllreduceConfig::from_model(size, &model, policy);
    config.tree.segment_bytes = chosen.segment_bytes;
    if let Some(degree) = chosen.degree {
        config.tree.degree = degree;
        why = format!("degree {degree} set by parameter; {why}");
    }
    if let Some(bytes) = chosen.exchange_max_bytes {
        config.exchange_max_bytes = bytes.min(chosen.segment_bytes);
    }
    (config, why)
}

/// The reduce tree's degree where the job's ranks outnumber the cores of
/// the one node they all run on, unless the user fixed the degree, with a
/// sentence saying why. Judged for one-node jobs only, and only for a
/// communicator no larger than the job: every rank of such a job reads the
/// same ranks and cores and builds the same tree. A communicator merged
/// with another job's processes (MPI_Comm_spawn) that is larger than either
/// job keeps the model's usual degree on both sides; one that mixes two
/// jobs of which only one outnumbers the cores may still disagree, and
/// then, like any setting its ranks do not share, goes to the module
/// underneath (`agreement.rs`), with correct results.
fn oversubscribed_reduce_degree(settings: &Settings, size: usize, one_node_ranks: Option<usize>, cores: usize) -> Option<(usize, String)> {
    let ranks = oversubscribed_job_ranks(size, one_node_ranks, cores).filter(|_| settings.reduce.degree.is_none())?;
    let model = tuning::AllreduceModel { segment_bytes: Some(settings.reduce.segment_bytes), ..settings.reduction_model };
    let choice = tuning::choose_oversubscribed_reduce_degree(size, &model);
    let why = format!(
        "the job's {ranks} ranks on {cores} cores of one node: a parent often waits for a child that is not running, so each step costs at least \
         {:.0} ns; over every length from 1 byte, {}",
        tuning::OVERSUBSCRIBED_STEP_LATENCY_NS,
        choice.reason
    );
    Some((choice.degree, why))
}

/// How many ranks at most hold a slice of a parallel reduction: where the
/// job's ranks outnumber the cores of the one node they all run on, as
/// many as there are cores (more would only take turns on them), judged
/// as `oversubscribed_reduce_degree` judges (every rank of a one-node job
/// reads the same ranks and cores; `agreement.rs` compares the result);
/// otherwise every rank.
fn oversubscribed_parallel_workers(size: usize, one_node_ranks: Option<usize>, cores: usize) -> usize {
    match oversubscribed_job_ranks(size, one_node_ranks, cores) {
        Some(_) if size > cores => cores.max(1),
        _ => usize::MAX,
    }
}

/// The job's ranks where they outnumber the cores of the one node they
/// all run on and the communicator of `size` is no larger than the job:
/// the setups judged for such a job alone, which every rank of it judges
/// alike.
fn oversubscribed_job_ranks(size: usize, one_node_ranks: Option<usize>, cores: usize) -> Option<usize> {
    one_node_ranks.filter(|&ranks| ranks > cores && size <= ranks)
}

/// The bcast configuration from the parameters, co-roots from the model
/// unless fixed, with a sentence saying why.
pub(super) fn bcast_config(chosen: &BcastSettings, udp: &UdpSettings, size: usize, policy: WaitPolicy) -> (BcastConfig, String) {
    let mut config = BcastConfig::default();
    let multicast = &mut config.multicast;
    // Congestion control is on only where the transport is udp (its
    // `Auto` mode), so these are inert on the other transports.
    multicast.congestion.cwnd_initial = udp.cwnd_initial;
    multicast.congestion.ssthresh_initial = udp.ssthresh_initial;
    multicast.congestion.window_slots = Some(udp.window_slots);
    multicast.congestion.ack_interval = Some(udp.ack_interval.min(udp.window_slots));
    multicast.window_slots = chosen.window_slots;
    multicast.slot_bytes = chosen.slot_bytes;
    multicast.fragment_bytes = chosen.fragment_bytes;
    multicast.ack_interval = chosen.ack_interval.min(chosen.window_slots);
    multicast.timeout = chosen.timeout;
    multicast.nack = chosen.nack;
    multicast.tail_repeat = chosen.tail_repeat;
    multicast.wait = policy;
    config.single_copy_min_bytes = chosen.single_copy_min_bytes.unwrap_or(usize::MAX);
    match chosen.co_roots {
        Some(co_roots) => {
            config.multicast.co_roots = co_roots;
            (config, format!("{co_roots} co-root(s) set by coll_rdma_bcast_co_roots"))
        }
        None => config.with_modelled_co_roots(size, &tuning::CoRootModel::PAPER_2004),
    }
}

/// Whether any collective reads peers' memory, so that the shared-memory
/// setup probes whether it may.
fn uses_cross_memory(settings: &Settings) -> bool {
    settings.bcast.single_copy_min_bytes.is_some()
        || settings.allreduce.parallel_min_bytes.is_some()
        || settings.reduce.parallel_min_bytes.is_some()
}

impl CommState {
    /// The radix to use and a sentence saying why.
    pub fn barrier_radix(settings: &Settings, size: usize) -> (usize, String) {
        match (settings.barrier_radix, settings.autotune_calls) {
            (Some(radix), None) => (radix, "set by coll_rdma_barrier_radix".to_string()),
            (Some(radix), Some(_)) => (radix, "set by coll_rdma_barrier_radix, which coll_rdma_autotune leaves alone".to_string()),
            (None, autotune) => {
                let choice = choose_barrier_radix(size, &settings.model);
                let mut why = format!("automatic: {}", choice.reason);
                if let Some(calls) = autotune {
                    let candidates = barrier_candidates(size, choice.radix);
                    if candidates.len() > 1 {
                        why += &format!(
                            "; coll_rdma_autotune times radices {candidates:?} over the first {} barriers and keeps the fastest",
                            candidates.len() * calls
                        );
                    }
                }
                (choice.radix, why)
            }
        }
    }

    /// The radices the barrier region holds: the autotune's candidates
    /// around the model's pick, or the one radix.
    fn barrier_radices(settings: &Settings, size: usize, radix: usize) -> Vec<usize> {
        match (settings.barrier_radix, settings.autotune_calls) {
            (None, Some(_)) => barrier_candidates(size, radix),
            _ => vec![radix],
        }
    }

    /// The autotune's degree trial: the candidates the allreduce region
    /// holds around the model's pick, when there are several and the
    /// degree is not fixed. Every rank computes it from agreed values.
    fn allreduce_degree_trial(settings: &Settings, size: usize, config: &AllreduceConfig) -> Option<DegreeTrial> {
        let calls = settings.autotune_calls.filter(|_| Self::tunes_allreduce_degree(settings))?;
        let candidates = degree_candidates(size, config.tree.degree, config.tree.ring_positions(size));
        (candidates.len() > 1).then(|| DegreeTrial::new(size, &candidates, calls))
    }

    /// coll_rdma_autotune is on and coll_rdma_allreduce_degree leaves the
    /// degree to it.
    fn tunes_allreduce_degree(settings: &Settings) -> bool {
        settings.autotune_calls.is_some() && settings.allreduce.degree.is_none()
    }

    pub fn new(cid: u32, rank: usize, size: usize, saved: Rc<SavedCollectives>, settings: &Settings) -> Self {
        let (radix, _) = Self::barrier_radix(settings, size);
        let barrier_radices = Self::barrier_radices(settings, size, radix);
        let policy = wait_policy(settings, size);
        let (mut allreduce_config, allreduce_why) = reduction_config(settings, &settings.allreduce, size, policy);
        let (mut reduce_config, mut reduce_why) = reduction_config(settings, &settings.reduce, size, policy);
        let (one_node_ranks, cores) = (JobPlacement::one_node_ranks(), online_cores());
        if let Some((degree, why)) = oversubscribed_reduce_degree(settings, size, one_node_ranks, cores) {
            reduce_config.tree.degree = degree;
            reduce_why = why;
        }
        let parallel_workers = oversubscribed_parallel_workers(size, one_node_ranks, cores);
        let two_levels_possible = HierarchyPlan::may_use_two_levels(settings, JobPlacement::from_launcher());
        // The trees keep their two-level reserve wherever the hierarchy is
        // auto, one node or not: it is small (the rings of one more step)
        // and the allreduce autotune tries the degrees whose trees fit it
        // (without it a single-node np=4 had degree 1 alone to try).
        let trees_reserve = settings.hierarchy == Hierarchy::Auto;
        allreduce_config.tree.room_for_two_levels = trees_reserve;
        reduce_config.tree.room_for_two_levels = trees_reserve;
        let (mut bcast_config, bcast_why) = bcast_config(&settings.bcast, &settings.udp, size, policy);
        bcast_config.room_for_two_levels = two_levels_possible;
        tracing::info!(
            "comm {cid} rank {rank}: allreduce degree {}, exchange up to {} bytes ({allreduce_why}); reduce degree {} ({reduce_why}); \
             bcast co-roots {} ({bcast_why})",
            allreduce_config.tree.degree,
            allreduce_config.exchange_max_bytes,
            reduce_config.tree.degree,
            bcast_config.multicast.co_roots
        );
        tracing::info!(
            "comm {cid} rank {rank}: bcast over datagrams multicasts the last {} piece(s) of every message twice \
             (coll_rdma_bcast_tail_repeat), so a lost tail is repaired without the {} ms timeout",
            bcast_config.multicast.tail_repeat,
            bcast_config.multicast.timeout.as_millis()
        );
        let mut barrier_len = TunedBarrier::region_len(size, &barrier_radices);
        if two_levels_possible {
            barrier_len = barrier_len.max(TwoLevelBarrier::region_len(size));
        }
        let layout = WindowLayout::with_barrier_region(
            size,
            barrier_len,
            &allreduce_config,
            &reduce_config.tree,
            settings.ring_segment_bytes,
            &bcast_config,
        );
        let context = format!("comm {cid}");
        let protocol = ProtocolSettings::of(&ProtocolInputs {
            settings,
            size,
            barrier_radix: radix,
            barrier_candidates: &barrier_radices,
            allreduce: &allreduce_config,
            reduce: &reduce_config.tree,
            bcast: &bcast_config,
            window_len: layout.window_len,
            parallel_workers,
        });
        let allreduce_autotune = Self::tunes_allreduce_degree(settings);
        let allreduce_trial = Self::allreduce_degree_trial(settings, size, &allreduce_config);
        let mut allreduce = Allreduce::new(rank, size, layout.allreduce_offset, allreduce_config);
        allreduce.parallel_mut().set_min_bytes(settings.allreduce.parallel_min_bytes.unwrap_or(usize::MAX));
        let mut reduce = Reduce::new(rank, size, layout.reduce_offset, reduce_config.tree);
        reduce.parallel_mut().set_min_bytes(settings.reduce.parallel_min_bytes.unwrap_or(usize::MAX));
        reduce.parallel_mut().set_slices_min_bytes(settings.reduce.parallel_slices_min_bytes.unwrap_or(usize::MAX));
        allreduce.parallel_mut().set_workers(parallel_workers);
        reduce.parallel_mut().set_workers(parallel_workers);
        CommState {
            cid,
            rank,
            size,
            saved,
            protocol,
            calls: [0; 4],
            test_faults: settings.test_faults,
            failed: false,
            handed_over_after_failure: 0,
            transport_choice: settings.transport,
            autotune: settings.autotune_calls.is_some() && settings.barrier_radix.is_none(),
            verbs_settings: settings.verbs.clone(),
            udp_settings: settings.udp.clone(),
            layout,
            link: Link::NotYet,
            bypass_requested: false,
            barrier: TunedBarrier::new(rank, size, &barrier_radices, radix, settings.autotune_calls.unwrap_or(1), layout.barrier_offset, policy)
                .with_context(context),
            two_level_barrier: None,
            hierarchy: HierarchyPlan::new(settings, policy, layout.barrier_offset, two_levels_possible),
            leader_links: None,
            allreduce,
            allreduce_trial,
            allreduce_autotune,
            allreduce_max_bytes: settings.allreduce.max_bytes,
            reduce,
            reduce_max_bytes: settings.reduce.max_bytes,
            ring: RingReduction::new(rank, size, layout.ring_offset, settings.ring_segment_bytes),
            allreduce_ring: RingLengths { from: settings.allreduce.ring_min_bytes, up_to: None },
            reduce_ring: RingLengths { from: settings.reduce.ring_min_bytes, up_to: None },
            udp_ring_max_bytes: settings.udp_ring_max_bytes,
            bcast: Bcast::new(rank, size, layout.bcast_offset, bcast_config),
            bcast_window_limit: settings.bcast.max_bytes,
            bcast_max_bytes: None,
            bcast_single_copy_max_bytes: settings.bcast.single_copy_max_bytes,
            cross_memory_probe: uses_cross_memory(settings).then_some(settings.bcast.pretend_no_cross_memory),
            tallies: Default::default(),
            reported_handovers: Vec::new(),
        }
    }

    /// The window paths' limit on `transport`: as set, or from the model
    /// for the transport in use; with a sentence saying why.
    fn bcast_window_limit_on(&self, transport: &SelectedTransport) -> (Option<usize>, String) {
        match self.bcast_window_limit {
            WindowLimit::Never => (None, "no limit (coll_rdma_bcast_max_bytes=-1)".to_string()),
            WindowLimit::Bytes(bytes) => (Some(bytes), format!("up to {bytes} bytes (set by coll_rdma_bcast_max_bytes)")),
            WindowLimit::Modelled => {
                let multicast = &self.bcast.config().multicast;
                let (path, model) = match transport.multicast_kind() {
                    MulticastKind::None => (WindowedBcast::PutTree, BcastStreamModel::VERBS),
                    MulticastKind::SharedWindow => (
                        WindowedBcast::Multicast { window_bytes: multicast.window_slots * multicast.slot_bytes },
                        BcastStreamModel::SHARED_MEMORY,
                    ),
                    MulticastKind::Datagram => (
                        WindowedBcast::Multicast { window_bytes: multicast.window_slots * multicast.fragment_bytes },
                        BcastStreamModel::VERBS,
                    ),
                };
                let choice = choose_bcast_max_bytes(self.size, path, &model);
                (choice.max_bytes, format!("automatic for {}: {}", transport.name(), choice.reason))
            }
        }
    }

    /// Says at verbose level 1 which allreduce and reduce lengths are
    /// reduced in parallel, or why none are.
    fn report_parallel_reduction(&self, transport: &SelectedTransport) {
        let from = [("allreduce", self.allreduce.parallel().min_bytes()), ("reduce", self.reduce.parallel().min_bytes())];
        for (name, from) in from {
            if transport.reads_peer_memory() && from != usize::MAX {
                let lengths = if name == "allreduce" { self.allreduce_ring } else { self.reduce_ring };
                let shorter = match lengths.from.filter(|&ring_from| ring_from < from) {
                    Some(ring_from) => format!(
                        "from {ring_from} bytes commutative ops go around a ring of {}-byte slots, shorter ones (and the others) through the window",
                        self.ring.segment_bytes()
                    ),
                    None => "shorter ones through the window".to_string(),
                };
                tracing::info!(
                    "comm {} rank {}: {name} of {from} bytes or more reduced in parallel (each rank reduces its slice of every \
                     rank's input, read with process_vm_readv, and writes it into the gathering ranks' buffers with process_vm_writev) at any length; {shorter}",
                    self.cid,
                    self.rank
                );
                let workers = self.reduce.parallel().workers();
                if name == "reduce" && workers < self.size {
                    tracing::info!(
                        "comm {} rank {}: allreduce and reduce slices held by {workers} of the {} ranks at most (the job's ranks \
                         outnumber the {workers} cores of its node; the others announce their buffers and wait)",
                        self.cid,
                        self.rank,
                        self.size
                    );
                }
                if name == "reduce" {
                    let slices_from = self.reduce.parallel().slices_min_bytes();
                    let unsplit = if self.size >= ReadTree::MIN_RANKS {
                        "shorter ones go down a binomial tree of reads (each rank reads its children's partial results with \
                         process_vm_readv and folds them, so the root reads about log2 of the ranks) where the op is commutative \
                         or the root is rank 0, and otherwise the root reduces alone (it reads every rank's input and folds it)"
                    } else {
                        "shorter ones the root reduces alone (it reads every rank's input with process_vm_readv and folds it)"
                    };
                    tracing::info!(
                        "comm {} rank {}: of those, reduce of {} split into slices; {unsplit}",
                        self.cid,
                        self.rank,
                        if slices_from == usize::MAX { "no length".to_string() } else { format!("{slices_from} bytes or more") }
                    );
                }
            } else {
                tracing::info!(
                    "comm {} rank {}: no parallel {name} ({}): {}",
                    self.cid,
                    self.rank,
                    if from == usize::MAX {
                        format!("coll_rdma_{name}_parallel_min_bytes is -1")
                    } else {
                        format!("{} cannot read its peers' memory", transport.name())
                    },
                    self.ring_report(name)
                );
            }
        }
    }

    /// On udp, whose puts go one datagram at a time, long messages leave
    /// the ring for the module underneath (`coll_rdma_udp_ring_max_bytes`).
    fn bound_the_ring_on(&mut self, transport: &SelectedTransport) {
        if matches!(transport, SelectedTransport::Udp(_)) {
            self.allreduce_ring.up_to = self.udp_ring_max_bytes;
            self.reduce_ring.up_to = self.udp_ring_max_bytes;
        }
    }

    /// Which lengths of `name` (allreduce or reduce) go around the ring
    /// where the parallel reduction cannot serve.
    fn ring_report(&self, name: &str) -> String {
        let lengths = if name == "allreduce" { self.allreduce_ring } else { self.reduce_ring };
        let Some(from) = lengths.from else {
            return format!("{name} keeps the window, up to coll_rdma_{name}_max_bytes for commutative ops (at any length for the others)");
        };
        let up_to = match lengths.up_to {
            Some(up_to) => format!(" up to {up_to} (coll_rdma_udp_ring_max_bytes; longer ones as coll_rdma_{name}_max_bytes says)"),
            None => String::new(),
        };
        format!(
            "{name} of {from} bytes or more{up_to} with a commutative op goes around a ring of {}-byte slots (reduce-scatter, \
             then allgather, each rank putting to the next); shorter ones, and non-commutative ops at any length, through the window's tree",
            self.ring.segment_bytes()
        )
    }

    /// Builds the two-level schedules where the communicator spans nodes
    /// (and `coll_rdma_hierarchy` allows), and says at verbose level 1
    /// which barrier serves it.
    fn choose_schedule(&mut self, transport: &SelectedTransport) {
        match self.hierarchy.schedule(transport) {
            Schedule::TwoLevel(nodes) => {
                let (barrier, why) = self.hierarchy.two_level_barrier(self.rank, &nodes);
                let leader = nodes.leader_of(self.rank);
                let role = if leader == self.rank { "this rank leads its node".to_string() } else { format!("this rank's node leader is rank {leader}") };
                tracing::info!(
                    "comm {} rank {}: barrier two-level across {} nodes of {} to {} ranks: node-local arrival at each node's leader, \
                     dissemination with {why}, node-local release; {role} (its node holds {} rank(s))",
                    self.cid,
                    self.rank,
                    nodes.count(),
                    (0..self.size).map(|rank| nodes.local_count(rank)).min().unwrap_or(0),
                    (0..self.size).map(|rank| nodes.local_count(rank)).max().unwrap_or(0),
                    nodes.local_count(self.rank)
                );
                self.two_level_barrier = Some(barrier.with_context(format!("comm {}", self.cid)));
                let (allreduce, reduce) = self.choose_reduction_trees(&nodes);
                let bcast = self.choose_bcast_levels(transport, &nodes);
                if transport.connects_only_leaders() {
                    self.confine_to_leaders(transport, nodes, FlatSchedules { allreduce: !allreduce, reduce: !reduce, bcast: !bcast });
                }
            }
            Schedule::Flat(why) => {
                tracing::info!(
                    "comm {} rank {}: barrier flat over all {} ranks ({why}): dissemination radix {}",
                    self.cid,
                    self.rank,
                    self.size,
                    self.barrier.radix()
                );
                tracing::info!("comm {} rank {}: allreduce and reduce flat over all {} ranks ({why})", self.cid, self.rank, self.size);
                tracing::info!("comm {} rank {}: bcast flat over all {} ranks ({why})", self.cid, self.rank, self.size);
            }
        }
    }

    /// Where only the nodes' leaders hold queue pairs across nodes: the
    /// ring (whose neighbours at a node boundary need not be leaders)
    /// serves no length, and the calls `LeaderLinks` rules out go to the
    /// module underneath; says so at verbose level 1.
    fn confine_to_leaders(&mut self, transport: &SelectedTransport, nodes: NodeGroups, flat: FlatSchedules) {
        let (cid, rank) = (self.cid, self.rank);
        self.allreduce_ring.from = None;
        self.reduce_ring.from = None;
        let role = if nodes.leader_of(rank) == rank { "this rank leads its node" } else { "this rank reaches its own node alone" };
        let limit = self.verbs_settings.queue_pairs_max.map_or("every pair".to_string(), |most| most.to_string());
        tracing::info!(
            "comm {cid} rank {rank}: queue pairs across nodes only between the {} leaders (coll_rdma_hierarchy_queue_pairs_max={limit}; \
             every pair would give some rank {} of them), {} here ({role}); no ring for long allreduces and reduces{}{}",
            nodes.count(),
            nodes.most_ranks_elsewhere(),
            transport.memory_footprint().verbs_queue_pairs,
            if flat.allreduce || flat.reduce || flat.bcast { "; flat schedules go to the module underneath: " } else { "" },
            [("allreduce", flat.allreduce), ("reduce", flat.reduce), ("bcast", flat.bcast)]
                .iter()
                .filter(|(_, is_flat)| *is_flat)
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", ")
        );
        self.leader_links = Some(LeaderLinks::new(nodes, flat));
    }

    /// Puts bcast on its two-level stages, and says at verbose level 1
    /// how each stage multicasts; false where it stays flat.
    fn choose_bcast_levels(&mut self, transport: &SelectedTransport, nodes: &NodeGroups) -> bool {
        let (cid, rank, size) = (self.cid, self.rank, self.size);
        let (co_roots, co_roots_why) = self.hierarchy.leaders_bcast_co_roots(nodes);
        if let Err(why) = self.bcast.use_two_levels(nodes, co_roots) {
            tracing::info!("comm {cid} rank {rank}: bcast flat over all {size} ranks ({why})");
            return false;
        }
        let among_leaders = match transport.multicast_kind() {
            MulticastKind::Datagram => "datagram multicast among the leaders; non-leaders drop the group's datagrams unread",
            MulticastKind::SharedWindow => "the leaders read the root leader's window",
            MulticastKind::None => "a binomial tree of puts among the leaders",
        };
        let within_nodes = if transport.peer_flag(rank, 0).is_ok() {
            "each node's ranks read their node root's window (or its buffer in one copy where single copy serves)"
        } else {
            "a binomial tree of puts within each node"
        };
        let role = if nodes.leader_of(rank) == rank { "this rank leads its node" } else { "this rank is not a leader" };
        tracing::info!(
            "comm {cid} rank {rank}: bcast two-level across {} nodes: the root's node from the root, then the {} leaders from the root's \
             leader ({among_leaders}; {co_roots} co-root(s), {co_roots_why}), then every other node from its leader ({within_nodes}); \
             {role}",
            nodes.count(),
            nodes.count()
        );
        true
    }

    /// Puts allreduce and reduce on the two-level tree where the nodes keep
    /// the rank order and the window holds the tree's rings, and says at
    /// verbose level 1 which tree serves each; whether each went two-level.
    fn choose_reduction_trees(&mut self, nodes: &NodeGroups) -> (bool, bool) {
        let (cid, rank, size) = (self.cid, self.rank, self.size);
        if let Err(why) = HierarchyPlan::reductions_fit(nodes) {
            tracing::info!("comm {cid} rank {rank}: allreduce and reduce flat over all {size} ranks ({why})");
            return (false, false);
        }
        let allreduce_degree = self.allreduce.config().tree.degree;
        let allreduce = self.allreduce.use_two_level_tree(&two_level_links(rank, nodes, allreduce_degree));
        match &allreduce {
            Ok(()) => tracing::info!(
                "comm {cid} rank {rank}: allreduce two-level: a degree-{allreduce_degree} tree within each node into its leader and among \
                 the {} leaders, the result back down the same tree (no exchange; the parallel reduction still serves the lengths it \
                 serves where ranks can read each other's memory)",
                nodes.count()
            ),
            Err(why) => tracing::info!("comm {cid} rank {rank}: allreduce flat over all {size} ranks ({why})"),
        }
        let reduce_degree = self.reduce.config().degree;
        let reduce = self.reduce.use_two_level_tree(&two_level_links(rank, nodes, reduce_degree));
        match &reduce {
            Ok(()) => tracing::info!(
                "comm {cid} rank {rank}: reduce two-level: a degree-{reduce_degree} tree within each node into its leader and among the {} \
                 leaders, rank 0 relays the result to the root",
                nodes.count()
            ),
            Err(why) => tracing::info!("comm {cid} rank {rank}: reduce flat over all {size} ranks ({why})"),
        }
        (allreduce.is_ok(), reduce.is_ok())
    }

    /// Says at verbose level 1, once per communicator (from its rank 0),
    /// what the barrier autotune will measure, or that there is nothing to
    /// choose from.
    fn report_barrier_trial_plan(&self) {
        if self.rank != 0 || !self.autotune {
            return;
        }
        if self.two_level_barrier.is_some() {
            tracing::info!("comm {} rank 0: barrier autotune: not run, the two-level barrier serves this communicator", self.cid);
            return;
        }
        match self.barrier.trial() {
            Some(trial) => tracing::info!(
                "comm {} rank 0: barrier autotune: radices {:?} in turn over the next {} barrier(s) ({} each), then one allreduce \
                 of {} bytes to agree",
                self.cid,
                self.barrier.candidates(),
                trial.total_calls(),
                trial.total_calls() / self.barrier.candidates().len(),
                (2 * self.barrier.candidates().len() + 1) * 8
            ),
            None => tracing::info!(
                "comm {} rank 0: barrier autotune: nothing to measure, radix {} is the only useful one for {} ranks",
                self.cid,
                self.barrier.radix(),
                self.size
            ),
        }
    }

    /// Says at verbose level 1, once per communicator (from its rank 0),
    /// what the allreduce degree autotune will measure, or why nothing;
    /// drops the trial where the two-level tree serves (every rank alike:
    /// the schedule is agreed).
    fn report_allreduce_trial_plan(&mut self) {
        if self.allreduce.is_two_level() {
            self.allreduce_trial = None;
        }
        if self.rank != 0 || !self.allreduce_autotune {
            return;
        }
        let cid = self.cid;
        if self.allreduce.is_two_level() {
            tracing::info!("comm {cid} rank 0: allreduce autotune: not run, the two-level tree serves this communicator");
            return;
        }
        let config = self.allreduce.config();
        match &self.allreduce_trial {
            Some(trial) => tracing::info!(
                "comm {cid} rank 0: allreduce autotune: degrees {:?} (those whose tree fits the window's {} slot ring(s)) in turn over \
                 {} trial allreduce(s) ({} each, a barrier before each) of the first tree-served call's length (above {} bytes, at most \
                 {} bytes), run before that call, then one allreduce of {} bytes to agree",
                trial.degrees(),
                self.allreduce.reserved_rings(),
                trial.total_calls(),
                trial.total_calls() / trial.degrees().len(),
                config.exchange_max_bytes,
                trial_bytes(usize::MAX, config.exchange_max_bytes, config.tree.segment_bytes),
                trial.summary_words() * 8
            ),
            None => tracing::info!(
                "comm {cid} rank 0: allreduce autotune: nothing to measure, degree {} is the only tree the window holds for {} ranks",
                config.tree.degree,
                self.size
            ),
        }
    }

    /// Says at verbose level 1 what the allreduce autotune measured and
    /// chose: the table from rank 0, the choice from every rank.
    pub(super) fn report_allreduce_trial(&self, outcome: &DegreeOutcome, agreement_ns: u64) {
        let cid = self.cid;
        if self.rank == 0 {
            tracing::info!(
                "comm {cid} rank 0: allreduce autotune table ({} ranks, {} call(s) of {} bytes per degree; slowest rank's median and longest call):",
                self.size,
                outcome.calls_per_candidate,
                outcome.message_bytes
            );
            let rows = outcome.rows.iter().map(|row| (row.degree, row.steps, row.median_ns, row.max_ns));
            log_trial_rows(cid, "allreduce autotune   degree", "step(s)", rows, outcome.winner);
        }
        tracing::info!(
            "comm {cid} rank {}: allreduce autotune chose degree {} ({} step(s)); cost: {} trial allreduce(s) of {} bytes taking {:.1} us \
             on the slowest rank, {} barrier(s) between degrees, and one allreduce ({:.1} us here)",
            self.rank,
            outcome.degree(),
            outcome.rows[outcome.winner].steps,
            outcome.trial_calls(),
            outcome.message_bytes,
            outcome.trial_ns as f64 / 1000.0,
            outcome.barriers,
            agreement_ns as f64 / 1000.0
        );
    }

    /// Says at verbose level 1 what the barrier autotune measured and
    /// chose: the table once per communicator (from its rank 0; every rank
    /// holds the same agreed figures), the choice from every rank.
    pub(super) fn report_barrier_trial(&self, outcome: &TrialOutcome, agreement_ns: u64) {
        let cid = self.cid;
        if self.rank == 0 {
            tracing::info!(
                "comm {cid} rank 0: barrier autotune table ({} ranks, {} call(s) per radix; slowest rank's median and longest call):",
                self.size,
                outcome.calls_per_candidate
            );
            let rows = outcome.rows.iter().map(|row| (row.radix, row.rounds, row.median_ns, row.max_ns));
            log_trial_rows(cid, "barrier autotune   radix", "round(s)", rows, outcome.winner);
        }
        tracing::info!(
            "comm {cid} rank {}: barrier autotune chose radix {} ({} round(s)); cost: {} trial barrier(s) taking {:.1} us on the slowest \
             rank, about {:.1} us more than radix {} throughout, and one allreduce ({:.1} us here)",
            self.rank,
            outcome.radix(),
            outcome.rows[outcome.winner].rounds,
            outcome.rows.len() * outcome.calls_per_candidate,
            outcome.trial_ns as f64 / 1000.0,
            outcome.excess_ns() as f64 / 1000.0,
            outcome.radix(),
            agreement_ns as f64 / 1000.0
        );
    }

    /// Says at verbose level 1 which path serves which bcast lengths.
    fn report_bcast_paths(&self, transport: &SelectedTransport, window_limit: &str) {
        let window = match transport.multicast_kind() {
            MulticastKind::None => "down the put tree",
            MulticastKind::SharedWindow => "through the window (copy in, copy out)",
            MulticastKind::Datagram => "by multicast through the sliding window",
        };
        let from = self.bcast.config().single_copy_min_bytes;
        if !transport.reads_peer_memory() || from == usize::MAX {
            tracing::info!("comm {} rank {}: bcast of any length {window}, {window_limit}", self.cid, self.rank);
            return;
        }
        let up_to = match self.bcast_single_copy_max_bytes {
            Some(limit) => format!("up to {limit} bytes (coll_rdma_bcast_single_copy_max_bytes; longer ones to the module underneath)"),
            None => "at any length".to_string(),
        };
        tracing::info!(
            "comm {} rank {}: bcast of {from} bytes or more in one copy (receivers read the root's buffer with process_vm_readv), \
             {up_to}; shorter ones {window}, {window_limit}",
            self.cid,
            self.rank
        );
    }

    /// Establishes the transport collectively on first use; every rank of
    /// the communicator calls this in the same collective call, and all
    /// reach the same verdict. True when the transport is usable.
    pub(super) fn ensure_link(&mut self, comm: *mut sys::ompi_communicator_t) -> bool {
        if let Link::NotYet = self.link {
            self.connect(comm);
            self.bypass_requested = matches!(self.link, Link::Unavailable);
        }
        matches!(self.link, Link::Ready(_))
    }

    fn connect(&mut self, comm: *mut sys::ompi_communicator_t) {
        let saved = Rc::clone(&self.saved);
        let exchange = saved.exchange(comm);
        if let Err(why) = agree_on_protocol(&exchange, &self.protocol, self.size) {
            let message = format!("comm {} rank {}: {why}; collectives fall back to the module underneath", self.cid, self.rank);
            // Once per communicator and job, where it is easy to find.
            if self.rank == 0 {
                tracing::warn!("{message}");
            } else {
                tracing::info!("{message}");
            }
            self.link = Link::Unavailable;
            return;
        }
        if let Some(pause) = self.test_faults.setup_pause.filter(|_| self.rank != 0) {
            std::thread::sleep(pause);
        }
        let request = LinkRequest {
            choice: self.transport_choice,
            verbs: &self.verbs_settings,
            udp: &self.udp_settings,
            cid: self.cid,
            rank: self.rank,
            size: self.size,
            window_len: self.layout.window_len,
            leaders_above: self.hierarchy.leaders_above(self.verbs_settings.queue_pairs_max),
            cross_memory_probe: self.cross_memory_probe,
        };
        self.link = match link::connect(&exchange, &request) {
            Ok(transport) => {
                tracing::info!(
                    "comm {} rank {}: transport {} ready ({} ranks, multicast {:?}, window {} bytes, barrier radix {} in {} round(s), \
                     allreduce degree {}, reduce degree {}, bcast window {} x {} bytes)",
                    self.cid,
                    self.rank,
                    transport.name(),
                    transport.size(),
                    transport.multicast_kind(),
                    self.layout.window_len,
                    self.barrier.radix(),
                    self.barrier.rounds(),
                    self.allreduce.config().tree.degree,
                    self.reduce.config().degree,
                    self.bcast.config().multicast.window_slots,
                    self.bcast.config().multicast.slot_bytes
                );
                // What the transport actually set up, per rank (issue 14):
                // nodes differ, so every rank says its own.
                tracing::info!("comm {} rank {}: memory for this communicator: {}", self.cid, self.rank, transport.memory_footprint());
                self.choose_schedule(&transport);
                self.report_barrier_trial_plan();
                self.report_allreduce_trial_plan();
                if let Some(routes) = transport.route_summary() {
                    tracing::info!("comm {} rank {}: {routes}", self.cid, self.rank);
                }
                tracing::info!("comm {} rank {}: waits {}", self.cid, self.rank, self.bcast.config().multicast.wait.describe(&transport));
                let (window_limit, why) = self.bcast_window_limit_on(&transport);
                self.bcast_max_bytes = window_limit;
                self.report_bcast_paths(&transport, &why);
                self.bound_the_ring_on(&transport);
                self.report_parallel_reduction(&transport);
                if Bcast::uses_put_tree(&transport) {
                    tracing::info!(
                        "comm {} rank {}: the {} transport offers no multicast: bcast goes down a binomial tree of puts",
                        self.cid,
                        self.rank,
                        transport.name()
                    );
                }
                Link::Ready(transport)
            }
            Err(why) => {
                let message = format!("comm {} rank {}: transport unavailable ({why}); collectives fall back to the module underneath", self.cid, self.rank);
                // A forced udp that cannot work is worth a warning: the
                // user asked for it. Once per communicator, from rank 0
                // (a rank whose own part failed also warns, saying why).
                if self.transport_choice == TransportChoice::Udp && self.rank == 0 {
                    tracing::warn!("{message}");
                } else {
                    tracing::info!("{message}");
                }
                Link::Unavailable
            }
        };
    }

    /// Counts a call served natively, or reports why it failed.
    pub(super) fn finish(&mut self, collective: Collective, outcome: Result<(), TransportError>) -> Step {
        match outcome {
            Ok(()) => {
                self.tallies[collective as usize].served += 1;
                Step::Done(sys::OMPI_SUCCESS as c_int)
            }
            Err(why) => {
                tracing::error!(
                    "comm {} rank {}: {} failed: {why}; later collectives on this communicator go to the module underneath",
                    self.cid,
                    self.rank,
                    collective.name()
                );
                self.mark_failed();
                Step::Done(sys::OMPI_ERROR as c_int)
            }
        }
    }

    /// Counts the call and panics where the testing-only parameter
    /// coll_rdma_test_panic_at says, to exercise the recovery from a panic.
    pub(super) fn count_call(&mut self, collective: Collective) {
        let calls = &mut self.calls[collective as usize];
        *calls += 1;
        if self.test_faults.panic_at == Some((collective, *calls)) {
            panic!("coll_rdma_test_panic_at={}:{} (testing only)", collective.name(), *calls);
        }
    }

    /// Whether the testing-only coll_rdma_test_pack_failure_at makes this
    /// rank's pack fail now (counting the packing bcast roots).
    pub(super) fn injected_pack_failure(&mut self) -> bool {
        match self.test_faults.pack_failure_at {
            Some(at) => {
                self.test_faults.packs_seen += 1;
                self.test_faults.packs_seen == at
            }
            None => false,
        }
    }

    /// True once, right after every rank agreed that this communicator has
    /// no transport: from then on nothing here can serve it.
    pub(super) fn take_bypass_request(&mut self) -> bool {
        std::mem::take(&mut self.bypass_requested)
    }

    pub(super) fn note_handed_over_after_failure(&mut self, calls: u64) {
        self.handed_over_after_failure = calls;
    }

    pub(super) fn mark_failed(&mut self) {
        self.failed = true;
    }

    pub(super) fn has_failed(&self) -> bool {
        self.failed
    }

    /// Hands a call to the module underneath, saying why once per
    /// communicator and kind of reason (and every time at debug level).
    pub(super) fn hand_over(&mut self, collective: Collective, why: Handover, fallback: impl FnOnce() -> c_int + 'static) -> Step {
        self.hand_over_reduction(collective, why, FoldOrder::Any, fallback)
    }

    /// As `hand_over`, for a reduction whose op asks for `order`. With a
    /// non-commutative op the result is right only if the module underneath
    /// keeps the rank order, which coll rdma cannot check, so the report
    /// says so, once per communicator under its own category (also after
    /// the same reason was given for commutative ops).
    pub(super) fn hand_over_reduction(
        &mut self,
        collective: Collective,
        why: Handover,
        order: FoldOrder,
        fallback: impl FnOnce() -> c_int + 'static,
    ) -> Step {
        let name = collective.name();
        let caveat = match order {
            FoldOrder::Any => "",
            FoldOrder::Canonical => {
                "; the op is not commutative, and the module underneath may not fold it in rank order \
                 (then the result is not the one MPI defines)"
            }
        };
        let key = (collective, why.category(), order);
        if !self.reported_handovers.contains(&key) {
            self.reported_handovers.push(key);
            tracing::info!("comm {} rank {}: {name} handed to the module underneath: {why}{caveat}", self.cid, self.rank);
        } else {
            tracing::debug!("comm {} rank {}: {name} handed to the module underneath: {why}{caveat}", self.cid, self.rank);
        }
        self.tallies[collective as usize].handed_over += 1;
        Step::HandOver(Box::new(fallback))
    }
}

impl Drop for CommState {
    fn drop(&mut self) {
        // A root returns from MPI_Bcast before its receivers acknowledge,
        // and receivers acknowledge lazily: settle both before the window
        // goes away.
        if self.failed {
            tracing::info!(
                "comm {} rank {}: a call failed earlier, so the protocols' closing steps are skipped; {} later call(s) \
                 went to the module underneath (not in the counts below)",
                self.cid,
                self.rank,
                self.handed_over_after_failure
            );
        }
        if let Link::Ready(ref transport) = self.link
            && !self.failed
            && let Err(why) = self.bcast.drain(transport) {
                tracing::warn!("comm {} rank {}: bcast could not settle before the communicator was freed: {why}", self.cid, self.rank);
            }
        // Every rank frees the communicator (MPI_Comm_free and MPI_Finalize
        // are collective): once all have passed this barrier, no peer writes
        // into a window that is about to be deregistered.
        if let Link::Ready(ref transport) = self.link
            && !self.failed
            && transport.needs_closing_barrier()
        {
            if let Err(why) = transport.quiesce_before_teardown() {
                tracing::warn!("comm {} rank {}: writes still in flight at teardown: {why}", self.cid, self.rank);
            }
            let closed = match self.two_level_barrier.as_mut() {
                Some(two_level) => two_level.run(transport, &NoSideProgress),
                None => self.barrier.run_untimed(transport, &NoSideProgress),
            };
            if let Err(why) = closed {
                tracing::warn!("comm {} rank {}: closing barrier failed: {why}", self.cid, self.rank);
            }
        }
        let transport = match self.link {
            Link::Ready(ref t) => t.name(),
            Link::Unavailable => "no transport",
            Link::NotYet => "no transport (never used)",
        };
        let multicast = self.bcast.stats();
        if multicast.pieces_sent + multicast.pieces_delivered + multicast.frames_rejected > 0 {
            tracing::info!(
                "comm {} rank {}: bcast multicast: {} piece(s) sent, {} delivered, {} retransmitted, {} NACK(s) sent, \
                 {} duplicate(s) dropped, {} window-full stall(s), {} foreign or malformed frame(s) rejected, {} overrun(s)",
                self.cid,
                self.rank,
                multicast.pieces_sent,
                multicast.pieces_delivered,
                multicast.retransmissions,
                multicast.nacks_sent,
                multicast.duplicates_dropped,
                multicast.window_full_stalls,
                multicast.frames_rejected,
                multicast.overruns
            );
            if multicast.cwnd > 0 {
                tracing::info!(
                    "comm {} rank {}: bcast congestion control: window {} fragment(s) now, retransmission timeout {} us, \
                     {} loss event(s), {} timeout collapse(s), {} acker switch(es), {} NACK(s) suppressed, {} repair(s) multicast",
                    self.cid,
                    self.rank,
                    multicast.cwnd,
                    multicast.rto_micros,
                    multicast.loss_events,
                    multicast.timeout_collapses,
                    multicast.acker_switches,
                    multicast.nacks_suppressed,
                    multicast.repairs_multicast
                );
            }
        }
        for collective in Collective::ALL {
            let tally = &self.tallies[collective as usize];
            tracing::info!(
                "comm {} rank {}: served {} {}(s) over {transport}, {} handed to the fallback",
                self.cid,
                self.rank,
                tally.served,
                collective.name(),
                tally.handed_over
            );
        }
    }
}

/// An autotune's agreed table, one line per candidate (from rank 0):
/// `candidate` says what is tried ("barrier autotune   radix"), each row
/// gives its value, its step count (`steps`, e.g. "round(s)"), and the
/// slowest rank's median and longest call in nanoseconds.
fn log_trial_rows(cid: u32, candidate: &str, steps: &str, rows: impl Iterator<Item = (usize, usize, u64, u64)>, winner: usize) {
    for (index, (value, step_count, median_ns, max_ns)) in rows.enumerate() {
        tracing::info!(
            "comm {cid} rank 0: {candidate} {value:>2}, {step_count} {steps}: median {:>9.2} us, max {:>9.2} us{}",
            median_ns as f64 / 1000.0,
            max_ns as f64 / 1000.0,
            if index == winner { "  <- chosen" } else { "" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::params::{validate, RawParams};
    use super::*;

    #[test]
    fn only_a_one_node_job_with_more_ranks_than_cores_flattens_the_reduce_tree() {
        let settings = validate(RawParams::defaults());
        let (degree, why) = oversubscribed_reduce_degree(&settings, 4, Some(4), 2).expect("4 ranks on 2 cores");
        assert_eq!(degree, 3, "{why}");
        assert!(why.starts_with("the job's 4 ranks on 2 cores of one node"), "{why}");
        let (eight, why) = oversubscribed_reduce_degree(&settings, 8, Some(8), 2).expect("8 ranks on 2 cores");
        assert_eq!(eight, 2, "{why}");
        // A sub-communicator of the same job is judged by the job's ranks.
        assert_eq!(oversubscribed_reduce_degree(&settings, 3, Some(4), 2).map(|(degree, _)| degree), Some(2));
        // Larger than the job: merged with a spawned job's processes.
        assert_eq!(oversubscribed_reduce_degree(&settings, 5, Some(4), 2), None);
        // The model's own choice stands where every rank has a core, and
        // where the job spans nodes or the launcher did not say.
        assert_eq!(oversubscribed_reduce_degree(&settings, 4, Some(4), 4), None);
        assert_eq!(oversubscribed_reduce_degree(&settings, 4, None, 2), None);
        let (usual, _) = reduction_config(&settings, &settings.reduce, 4, WaitPolicy::default());
        assert_eq!(usual.tree.degree, 1);
        // A degree the user fixed is kept.
        let mut fixed = settings.clone();
        fixed.reduce.degree = Some(1);
        assert_eq!(oversubscribed_reduce_degree(&fixed, 4, Some(4), 2), None);
    }

    #[test]
    fn only_a_one_node_job_with_more_ranks_than_cores_reduces_in_parallel_on_fewer_ranks() {
        assert_eq!(oversubscribed_parallel_workers(4, Some(4), 2), 2);
        assert_eq!(oversubscribed_parallel_workers(8, Some(8), 2), 2);
        assert_eq!(oversubscribed_parallel_workers(3, Some(4), 2), 2);
        // A communicator with no more ranks than cores, one merged with a
        // spawned job's processes, enough cores, several nodes or no word
        // from the launcher: every rank.
        assert_eq!(oversubscribed_parallel_workers(2, Some(4), 2), usize::MAX);
        assert_eq!(oversubscribed_parallel_workers(5, Some(4), 2), usize::MAX);
        assert_eq!(oversubscribed_parallel_workers(4, Some(4), 4), usize::MAX);
        assert_eq!(oversubscribed_parallel_workers(4, None, 2), usize::MAX);
    }
}
