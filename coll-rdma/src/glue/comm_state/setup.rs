//! The first two stages of a communicator: the plan made when the module is
//! enabled (`PendingSetup`: settings read, configurations and window layout
//! chosen, nothing sent), then, on its first collective, agreement on the
//! settings and the transport's setup, which turn the plan into a
//! `ReadyComm` or into nothing. The choices that need the transport (two-level
//! schedules, leader links, the bcast window's limit, the udp ring bound) are
//! made here, once, before the `ReadyComm` is handed to any collective.

use std::sync::atomic::{AtomicBool, Ordering};

use btl_ibmc::{Datagrams, Endpoint, Exchange, MulticastKind, PeerReads, SelectedTransport};
use tuning::{choose_bcast_max_bytes, BcastStreamModel, WindowedBcast};

use super::super::events;
use super::super::agreement::{agree_on_protocol, ProtocolInputs, ProtocolSettings};
use super::super::hierarchy::{HierarchyPlan, JobPlacement, Schedule};
use super::super::link::{self, LinkRequest};
use super::super::params::{Hierarchy, Settings, TestFaults, TransportChoice, UdpSettings, VerbsSettings, WindowLimit};
use super::policy::{bcast_config, online_cores, uses_cross_memory, wait_policy};
use super::ready::{Limits, ReadyComm, Schedules};
use super::report_events::hierarchy_event;
use super::{CommId, CommState};
use crate::collectives::allreduce::Allreduce;
use crate::select::policy::{oversubscribed_parallel_workers, oversubscribed_reduce_degree, reduction_config, shared_window_runs_multicast_from, single_copy_min_bytes};
use crate::select::{FlatSchedules, LeadersOnly};
use crate::collectives::barrier::autotune::TunedBarrier;
use crate::collectives::barrier::two_level::TwoLevelBarrier;
use crate::collectives::bcast::Bcast;
use crate::collectives::reduce::Reduce;
use crate::collectives::large_reduction::ring::{RingLengths, RingReduction};
use crate::layout::WindowLayout;
use crate::patterns::two_level_links;
use btl_ibmc::shm::NodeGroups;

/// Everything decided when the module is enabled, waiting for the first
/// collective to agree on it and connect.
pub(super) struct PendingSetup {
    /// What every rank must agree on before any protocol runs.
    protocol: ProtocolSettings,
    transport_choice: TransportChoice,
    /// coll_rdma_autotune is on and the barrier radix is not fixed (whether
    /// or not this communicator has radices to choose from).
    barrier_autotune: bool,
    /// coll_rdma_autotune is on and the allreduce degree is not fixed.
    allreduce_autotune: bool,
    verbs_settings: VerbsSettings,
    udp_settings: UdpSettings,
    layout: WindowLayout,
    hierarchy: HierarchyPlan,
    /// `Some(pretend_refused)`: probe cross-memory attach at setup.
    cross_memory_probe: Option<bool>,
    /// `coll_rdma_window_max_mib` in bytes: a larger window is not made.
    window_max_bytes: usize,
    /// The window paths' limit as set; `Limits::bcast_max_bytes` once the
    /// transport is known.
    bcast_window_limit: WindowLimit,
    /// `coll_rdma_udp_ring_max_bytes`, which bounds both ring lengths once
    /// the transport turns out to be udp.
    udp_ring_max_bytes: Option<usize>,
    schedules: Schedules,
    limits: Limits,
}

impl PendingSetup {
    pub(super) fn new(id: CommId, settings: &Settings) -> Self {
        let CommId { cid, rank, size } = id;
        let (radix, _) = CommState::barrier_radix(settings, size);
        let barrier_radices = CommState::barrier_radices(settings, size, radix);
        let policy = wait_policy(settings, size);
        let model = &settings.reduction_model;
        let (mut allreduce_config, allreduce_why) = reduction_config(model, &settings.allreduce, size, policy);
        let (mut reduce_config, mut reduce_why) = reduction_config(model, &settings.reduce, size, policy);
        let (one_node_ranks, cores) = (JobPlacement::one_node_ranks(), online_cores());
        if let Some((degree, why)) = oversubscribed_reduce_degree(model, &settings.reduce, size, one_node_ranks, cores) {
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
        bcast_config.shared_window_runs_multicast_from = shared_window_runs_multicast_from(size, one_node_ranks, cores);
        bcast_config.single_copy_min_bytes = single_copy_min_bytes(settings.bcast.single_copy_min_bytes, size, one_node_ranks, cores);
        tracing::info!(
            "comm {cid} rank {rank}: allreduce degree {}, exchange up to {} bytes ({allreduce_why}); reduce degree {} ({reduce_why}); \
             bcast co-roots {} ({bcast_why})",
            allreduce_config.tree.degree,
            allreduce_config.exchange_max_bytes,
            reduce_config.tree.degree,
            bcast_config.multicast.co_roots
        );
        // Said once per communicator: every rank uses the same value.
        if rank == 0 {
            tracing::info!(
                "comm {cid} rank {rank}: bcast over datagrams multicasts the last {} piece(s) of every message twice \
                 (coll_rdma_bcast_tail_repeat), so a lost tail is repaired without the {} ms timeout; once it sees loss, \
                 the root follows each block with parity of up to {} % of it (coll_rdma_bcast_parity_percent)",
                bcast_config.multicast.tail_repeat,
                bcast_config.multicast.timeout.as_millis(),
                bcast_config.multicast.parity_percent
            );
            tracing::info!(
                "comm {cid} rank {rank}: bcast congestion control (udp) halves its window only when one receiver reports \
                 loss for more than {} % of the last window of fragments (coll_rdma_udp_loss_tolerance)",
                bcast_config.multicast.congestion.loss_tolerance_percent
            );
            tracing::info!(
                "comm {cid} rank {rank}: over udp, a repair that random loss defeats is repeated at most {}x its round-trip \
                 timeout apart (coll_rdma_udp_repair_backoff {}: the reliable channel and bcast NACKs)",
                1u64 << bcast_config.multicast.congestion.nack_retry_doublings.unwrap_or(0).min(16),
                bcast_config.multicast.congestion.nack_retry_doublings.unwrap_or(0)
            );
        }
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
        let allreduce_trial = CommState::allreduce_degree_trial(settings, size, &allreduce_config);
        let mut allreduce = Allreduce::new(rank, size, layout.allreduce_offset, allreduce_config);
        allreduce.parallel_mut().set_min_bytes(settings.allreduce.parallel_min_bytes.unwrap_or(usize::MAX));
        let mut reduce = Reduce::new(rank, size, layout.reduce_offset, reduce_config.tree);
        reduce.parallel_mut().set_min_bytes(settings.reduce.parallel_min_bytes.unwrap_or(usize::MAX));
        reduce.parallel_mut().set_slices_min_bytes(settings.reduce.parallel_slices_min_bytes.unwrap_or(usize::MAX));
        allreduce.parallel_mut().set_workers(parallel_workers);
        reduce.parallel_mut().set_workers(parallel_workers);
        let barrier = TunedBarrier::new(rank, size, &barrier_radices, radix, settings.autotune_calls.unwrap_or(1), layout.barrier_offset, policy)
            .with_context(format!("comm {cid}"));
        PendingSetup {
            protocol,
            transport_choice: settings.transport,
            barrier_autotune: settings.autotune_calls.is_some() && settings.barrier_radix.is_none(),
            allreduce_autotune: CommState::tunes_allreduce_degree(settings),
            verbs_settings: settings.verbs.clone(),
            udp_settings: settings.udp.clone(),
            layout,
            hierarchy: HierarchyPlan::new(settings, policy, layout.barrier_offset, two_levels_possible),
            cross_memory_probe: uses_cross_memory(settings).then_some(settings.bcast.pretend_no_cross_memory),
            bcast_window_limit: settings.bcast.max_bytes,
            udp_ring_max_bytes: settings.udp_ring_max_bytes,
            window_max_bytes: settings.window_max_bytes,
            schedules: Schedules {
                barrier,
                allreduce,
                allreduce_trial,
                reduce,
                ring: RingReduction::new(rank, size, layout.ring_offset, settings.ring_segment_bytes),
                bcast: Bcast::new(rank, size, layout.bcast_offset, bcast_config),
            },
            limits: Limits {
                allreduce_max_bytes: settings.allreduce.max_bytes,
                reduce_max_bytes: settings.reduce.max_bytes,
                allreduce_ring: RingLengths { from: settings.allreduce.ring_min_bytes, up_to: None },
                reduce_ring: RingLengths { from: settings.reduce.ring_min_bytes, up_to: None },
                bcast_max_bytes: None,
                bcast_single_copy_max_bytes: settings.bcast.single_copy_max_bytes,
            },
        }
    }

    /// Agrees on the settings and sets the transport up, collectively: every
    /// rank of the communicator calls this in the same collective call (or
    /// starts it, resumable, in the same non-blocking one), and all reach
    /// the same verdict. `exchange` is every step that talks to the other
    /// ranks (blocking, or suspending a resumable setup: `setting_up.rs`).
    /// `None` (said why) when there is no transport.
    pub(super) fn connect(self, id: CommId, exchange: &dyn Exchange, test_faults: &TestFaults) -> Option<ReadyComm> {
        let CommId { cid, rank, size } = id;
        if let Err(why) = agree_on_protocol(exchange, &self.protocol, size) {
            events::emit("comm_unavailable", id.origin(), || events::json!({ "stage": "agreement", "reason": why.to_string() }));
            let message = format!("comm {cid} rank {rank}: {why}; collectives fall back to the module underneath");
            // Once per communicator and job, where it is easy to find.
            if rank == 0 {
                tracing::warn!("{message}");
            } else {
                tracing::info!("{message}");
            }
            return None;
        }
        // After the agreement: every rank then has the same layout and
        // the same limit, so all refuse together.
        if let Some(why) = window_too_large(&self.layout, self.window_max_bytes) {
            events::emit("comm_unavailable", id.origin(), || events::json!({ "stage": "window", "reason": why.clone() }));
            let message = format!("comm {cid} rank {rank}: {why}; collectives fall back to the module underneath");
            // The settings are the job's, so every communicator meets
            // them: a process warns for its first one only.
            if rank == 0 && !WINDOW_WARNED.swap(true, Ordering::Relaxed) {
                tracing::warn!("{message} (said once per process; the others at verbose 2)");
            } else {
                tracing::info!("{message}");
            }
            return None;
        }
        if let Some(pause) = test_faults.setup_pause.filter(|_| rank != 0) {
            std::thread::sleep(pause);
        }
        let request = LinkRequest {
            choice: self.transport_choice,
            verbs: &self.verbs_settings,
            udp: &self.udp_settings,
            cid,
            rank,
            size,
            window_len: self.layout.window_len,
            leaders_above: self.hierarchy.leaders_above(self.verbs_settings.queue_pairs_max),
            cross_memory_probe: self.cross_memory_probe,
        };
        match link::connect(exchange, &request) {
            Ok(transport) => Some(self.ready_on(id, transport)),
            Err(why) => {
                events::emit("comm_unavailable", id.origin(), || {
                    events::json!({ "stage": "transport", "reason": format!("transport unavailable ({why})") })
                });
                let message = format!("comm {cid} rank {rank}: transport unavailable ({why}); collectives fall back to the module underneath");
                // A forced udp that cannot work is worth a warning: the
                // user asked for it. Once per communicator, from rank 0
                // (a rank whose own part failed also warns, saying why).
                if self.transport_choice == TransportChoice::Udp && rank == 0 {
                    tracing::warn!("{message}");
                } else {
                    tracing::info!("{message}");
                }
                None
            }
        }
    }

    /// Makes the choices that need the transport and says what they are.
    fn ready_on(self, id: CommId, transport: SelectedTransport) -> ReadyComm {
        let CommId { cid, rank, .. } = id;
        let mut ready = ReadyComm::assemble(id, transport, self.schedules, self.limits);
        tracing::info!(
            "comm {} rank {}: transport {} ready ({} ranks, multicast {:?}, window {} bytes, barrier radix {} in {} round(s), \
             allreduce degree {}, reduce degree {}, bcast window {} x {} bytes)",
            cid,
            rank,
            ready.transport.name(),
            ready.transport.size(),
            ready.transport.multicast_kind(),
            self.layout.window_len,
            ready.barrier.radix(),
            ready.barrier.rounds(),
            ready.allreduce.config().tree.degree,
            ready.reduce.config().degree,
            ready.bcast.config().multicast.window_slots,
            ready.bcast.config().multicast.slot_bytes
        );
        // What the transport actually set up, per rank (issue 14):
        // nodes differ, so every rank says its own.
        tracing::info!("comm {} rank {}: memory for this communicator: {}", cid, rank, ready.transport.memory_footprint());
        ready.choose_schedule(&self.hierarchy, self.verbs_settings.queue_pairs_max);
        // The two-level tree makes the degree trial moot (every rank alike:
        // the schedule is agreed).
        if ready.allreduce.is_two_level() {
            ready.allreduce_trial = None;
        }
        ready.report_barrier_trial_plan(self.barrier_autotune);
        ready.report_allreduce_trial_plan(self.allreduce_autotune);
        if let Some(routes) = ready.transport.route_summary() {
            tracing::info!("comm {} rank {}: {routes}", cid, rank);
        }
        tracing::info!("comm {} rank {}: waits {}", cid, rank, ready.bcast.config().multicast.wait.describe(&ready.transport));
        let (window_limit, why) = ready.bcast_window_limit(self.bcast_window_limit);
        ready.limits.bcast_max_bytes = window_limit;
        ready.report_bcast_paths(&why);
        ready.bound_the_ring(self.udp_ring_max_bytes);
        ready.report_parallel_reduction();
        if Bcast::uses_put_tree(&ready.transport) {
            tracing::info!(
                "comm {} rank {}: the {} transport offers no multicast: bcast goes down a binomial tree of puts",
                cid,
                rank,
                ready.transport.name()
            );
        }
        ready.settle_plan();
        ready.report_plan_event(self.layout.window_len);
        ready.say_ready_summary();
        ready
    }
}

/// Whether a communicator's window was refused for its size already in
/// this process (warned once, then said at verbose 2).
static WINDOW_WARNED: AtomicBool = AtomicBool::new(false);

/// Why a window of `layout` is not made, if it takes more than
/// `max_bytes` on each rank: its length and its regions', in MiB.
fn window_too_large(layout: &WindowLayout, max_bytes: usize) -> Option<String> {
    let mib = |bytes: usize| bytes as f64 / f64::from(1u32 << 20);
    (layout.window_len > max_bytes).then(|| {
        let regions: Vec<String> = layout.region_lens().iter().map(|&(name, len)| format!("{name} {:.1}", mib(len))).collect();
        format!(
            "its window would take {:.1} MiB on each rank ({} MiB; the bcast's is coll_rdma_bcast_window x \
             coll_rdma_bcast_slot_size, the others grow with their segment sizes and degrees), more than \
             coll_rdma_window_max_mib ({})",
            mib(layout.window_len),
            regions.join(", "),
            max_bytes >> 20
        )
    })
}

/// How a two-level bcast moves data at each stage, as the hierarchy
/// event names it (docs/events.md).
struct BcastStages {
    /// "datagram multicast", "window reads" or "put tree".
    among_leaders: &'static str,
    /// "window reads" or "put tree".
    within_nodes: &'static str,
}

/// The plan choices that need the transport, made once while the
/// `ReadyComm` is being assembled.
impl ReadyComm {
    /// The window paths' limit on the transport: as set, or from the model
    /// for the transport in use; with a sentence saying why.
    fn bcast_window_limit(&self, as_set: WindowLimit) -> (Option<usize>, String) {
        match as_set {
            WindowLimit::Never => (None, "no limit (coll_rdma_bcast_max_bytes=-1)".to_string()),
            WindowLimit::Bytes(bytes) => (Some(bytes), format!("up to {bytes} bytes (set by coll_rdma_bcast_max_bytes)")),
            WindowLimit::Modelled => {
                let multicast = &self.bcast.config().multicast;
                let (path, model) = match self.transport.multicast_kind() {
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
                let choice = choose_bcast_max_bytes(self.id.size, path, &model);
                (choice.max_bytes, format!("automatic for {}: {}", self.transport.name(), choice.reason))
            }
        }
    }

    /// On udp, whose puts go one datagram at a time, long messages leave
    /// the ring for the module underneath (`coll_rdma_udp_ring_max_bytes`).
    fn bound_the_ring(&mut self, udp_ring_max_bytes: Option<usize>) {
        if matches!(self.transport, SelectedTransport::Udp(_)) {
            self.limits.allreduce_ring.up_to = udp_ring_max_bytes;
            self.limits.reduce_ring.up_to = udp_ring_max_bytes;
        }
    }

    /// Builds the two-level schedules where the communicator spans nodes
    /// (and `coll_rdma_hierarchy` allows), and says at verbose level 2
    /// which barrier serves it.
    fn choose_schedule(&mut self, hierarchy: &HierarchyPlan, queue_pairs_max: Option<usize>) {
        let CommId { cid, rank, size } = self.id;
        match hierarchy.schedule(&self.transport) {
            Schedule::TwoLevel(nodes) => {
                let (barrier, why) = hierarchy.two_level_barrier(rank, &nodes);
                let leader = nodes.leader_of(rank);
                let role = if leader == rank { "this rank leads its node".to_string() } else { format!("this rank's node leader is rank {leader}") };
                tracing::info!(
                    "comm {} rank {}: barrier two-level across {} nodes of {} to {} ranks: node-local arrival at each node's leader, \
                     dissemination with {why}, node-local release; {role} (its node holds {} rank(s))",
                    cid,
                    rank,
                    nodes.count(),
                    (0..size).map(|rank| nodes.local_count(rank)).min().unwrap_or(0),
                    (0..size).map(|rank| nodes.local_count(rank)).max().unwrap_or(0),
                    nodes.local_count(rank)
                );
                self.two_level_barrier = Some(barrier.with_context(format!("comm {cid}")));
                let (allreduce, reduce) = self.choose_reduction_trees(&nodes);
                let bcast_stages = self.choose_bcast_levels(hierarchy, &nodes);
                let bcast = bcast_stages.is_some();
                hierarchy_event(self.id, events::json!({
                    "levels": "two-level",
                    "nodes": nodes.count(),
                    "node_leader": leader,
                    "node_ranks": nodes.local_count(rank),
                    "two_level": { "allreduce": allreduce, "reduce": reduce, "bcast": bcast },
                    "bcast_stages": bcast_stages.map(|stages| events::json!({
                        "among_leaders": stages.among_leaders,
                        "within_nodes": stages.within_nodes,
                    })),
                }));
                if self.transport.connects_only_leaders() {
                    let flat = FlatSchedules { allreduce: !allreduce, reduce: !reduce, bcast: !bcast };
                    self.confine_to_leaders(nodes, flat, queue_pairs_max);
                }
            }
            Schedule::Flat(why) => {
                hierarchy_event(self.id, events::json!({ "levels": "flat", "reason": why.to_string() }));
                tracing::info!(
                    "comm {} rank {}: barrier flat over all {} ranks ({why}): dissemination radix {}",
                    cid,
                    rank,
                    size,
                    self.barrier.radix()
                );
                tracing::info!("comm {} rank {}: allreduce and reduce flat over all {} ranks ({why})", cid, rank, size);
                tracing::info!("comm {} rank {}: bcast flat over all {} ranks ({why})", cid, rank, size);
            }
        }
    }

    /// Where only the nodes' leaders hold queue pairs across nodes: the
    /// ring (whose neighbours at a node boundary need not be leaders)
    /// serves no length, and the calls `LeadersOnly` rules out go to the
    /// module underneath; says so at verbose level 2.
    fn confine_to_leaders(&mut self, nodes: NodeGroups, flat: FlatSchedules, queue_pairs_max: Option<usize>) {
        let CommId { cid, rank, .. } = self.id;
        self.limits.allreduce_ring.from = None;
        self.limits.reduce_ring.from = None;
        let role = if nodes.leader_of(rank) == rank { "this rank leads its node" } else { "this rank reaches its own node alone" };
        let limit = queue_pairs_max.map_or("every pair".to_string(), |most| most.to_string());
        tracing::info!(
            "comm {cid} rank {rank}: queue pairs across nodes only between the {} leaders (coll_rdma_hierarchy_queue_pairs_max={limit}; \
             every pair would give some rank {} of them), {} here ({role}); no ring for long allreduces and reduces{}{}",
            nodes.count(),
            nodes.most_ranks_elsewhere(),
            self.transport.memory_footprint().verbs_queue_pairs,
            if flat.allreduce || flat.reduce || flat.bcast { "; flat schedules go to the module underneath: " } else { "" },
            [("allreduce", flat.allreduce), ("reduce", flat.reduce), ("bcast", flat.bcast)]
                .iter()
                .filter(|(_, is_flat)| *is_flat)
                .map(|(name, _)| *name)
                .collect::<Vec<_>>()
                .join(", ")
        );
        self.decisions.plan_mut().leaders_only = Some(LeadersOnly { nodes, flat });
    }

    /// Puts bcast on its two-level stages, and says at verbose level 2
    /// how each stage multicasts; None where it stays flat.
    fn choose_bcast_levels(&mut self, hierarchy: &HierarchyPlan, nodes: &NodeGroups) -> Option<BcastStages> {
        let CommId { cid, rank, size } = self.id;
        let (co_roots, co_roots_why) = hierarchy.leaders_bcast_co_roots(nodes);
        if let Err(why) = self.bcast.use_two_levels(nodes, co_roots) {
            tracing::info!("comm {cid} rank {rank}: bcast flat over all {size} ranks ({why})");
            return None;
        }
        let (among_leaders, stages_among_leaders) = match self.transport.multicast_kind() {
            MulticastKind::Datagram => {
                ("datagram multicast among the leaders; non-leaders drop the group's datagrams unread", "datagram multicast")
            }
            MulticastKind::SharedWindow => ("the leaders read the root leader's window", "window reads"),
            MulticastKind::None => ("a binomial tree of puts among the leaders", "put tree"),
        };
        let (within_nodes, stages_within_nodes) = if self.transport.peer_flag(rank, 0).is_ok() {
            ("each node's ranks read their node root's window (or its buffer in one copy where single copy serves)", "window reads")
        } else {
            ("a binomial tree of puts within each node", "put tree")
        };
        let role = if nodes.leader_of(rank) == rank { "this rank leads its node" } else { "this rank is not a leader" };
        tracing::info!(
            "comm {cid} rank {rank}: bcast two-level across {} nodes: the root's node from the root, then the {} leaders from the root's \
             leader ({among_leaders}; {co_roots} co-root(s), {co_roots_why}), then every other node from its leader ({within_nodes}); \
             {role}",
            nodes.count(),
            nodes.count()
        );
        Some(BcastStages { among_leaders: stages_among_leaders, within_nodes: stages_within_nodes })
    }

    /// Puts allreduce and reduce on the two-level tree where the nodes keep
    /// the rank order and the window holds the tree's rings, and says at
    /// verbose level 2 which tree serves each; whether each went two-level.
    fn choose_reduction_trees(&mut self, nodes: &NodeGroups) -> (bool, bool) {
        let CommId { cid, rank, size } = self.id;
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
}
