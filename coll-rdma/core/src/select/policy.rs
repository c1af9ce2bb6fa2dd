//! The choices made once when a communicator is enabled, from the
//! settings and the communicator's size alone: each reduction's and the
//! bcast's configuration, the barrier radix and the autotune's candidates.
//! Pure: nothing here reads the machine, Open MPI or a transport, and every
//! rank computes the same values from agreed inputs (the adapter's
//! agreement checks the settings). The settings types are the validated
//! parameters the choices read; the adapter fills them from its MCA table.

use std::time::Duration;

use btl_ibmc::WaitPolicy;
use tuning::{choose_barrier_radix, AllreduceModel, BarrierModel};

use crate::collectives::allreduce::AllreduceConfig;
use crate::collectives::allreduce::autotune::{degree_candidates, DegreeTrial};
use crate::collectives::barrier::autotune::barrier_candidates;
use crate::collectives::bcast::BcastConfig;

/// How MPI_Bcast's reliable multicast is configured.
#[derive(Clone, Copy, Debug)]
pub struct BcastSettings {
    pub window_slots: usize,
    pub slot_bytes: usize,
    pub fragment_bytes: usize,
    /// `None`: the paper's model chooses per communicator.
    pub co_roots: Option<usize>,
    pub ack_interval: usize,
    pub timeout: Duration,
    pub nack: bool,
    /// Trailing pieces of every message multicast twice (datagram transports).
    pub tail_repeat: usize,
    /// Most parity pieces per block, in percent of its data pieces
    /// (datagram transports; 0: no parity).
    pub parity_percent: u32,
    /// The limit of the window paths (copy in and out, multicast, put tree).
    pub max_bytes: WindowLimit,
    /// Where messages go in one copy, on a transport where every rank
    /// reads every other's memory.
    pub single_copy_min_bytes: SingleCopyFrom,
    /// `max_bytes` for the messages single copy serves.
    pub single_copy_max_bytes: Option<usize>,
    /// Testing: this rank pretends it cannot read its peers' memory.
    pub pretend_no_cross_memory: bool,
}

/// `coll_rdma_bcast_max_bytes`: above it, messages that would go through
/// the window go to the module underneath.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowLimit {
    /// The model for the transport in use chooses (`tuning::bcast_limit`),
    /// once the transport is known.
    Modelled,
    Never,
    Bytes(usize),
}

/// `coll_rdma_bcast_single_copy_min_bytes`: the shortest bcast that goes
/// in one copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SingleCopyFrom {
    /// By the job's placement (`single_copy_min_bytes`).
    Placement,
    /// Never (and no probe of whether ranks may read each other).
    Never,
    Bytes(usize),
}

/// The shortest bcast that goes in one copy (`BcastConfig::
/// single_copy_min_bytes`) for a communicator of `size` in a job of
/// `one_node_ranks` on `cores`, as `chosen` says; by placement:
/// - where every rank has a core, `SINGLE_COPY_FROM_BYTES`;
/// - where the job's ranks outnumber the cores of the one node they all
///   run on (judged as `oversubscribed_reduce_degree` judges, alike on
///   every rank), `OVERSUBSCRIBED_SINGLE_COPY_FROM_BYTES`.
pub fn single_copy_min_bytes(chosen: SingleCopyFrom, size: usize, one_node_ranks: Option<usize>, cores: usize) -> usize {
    match chosen {
        SingleCopyFrom::Bytes(bytes) => bytes,
        SingleCopyFrom::Never => usize::MAX,
        SingleCopyFrom::Placement if oversubscribed_job_ranks(size, one_node_ranks, cores).is_some() => OVERSUBSCRIBED_SINGLE_COPY_FROM_BYTES,
        SingleCopyFrom::Placement => SINGLE_COPY_FROM_BYTES,
    }
}

/// Where every rank has a core, bcasts from 8 KiB go in one copy. Paired at
/// np=2 (12 rounds from 4 launches, 2026-12-03, the VM's slow core
/// placement), the window (copy in, copy out, in 4 KiB slots) took 1.04x
/// stock's time at 8 KiB, and single copy 0.57x the window's; at 4 KiB
/// single copy was 0.77x the window, at 2 KiB even. In the fast placement
/// the window was ahead at 16 KiB (0.75x stock there, single copy 0.86x,
/// 2026-11-25; docs/tuning.md); 8 KiB was not measured there, so this
/// length may give up some of the window's lead in that placement.
pub const SINGLE_COPY_FROM_BYTES: usize = 8192;

/// Where the job's ranks outnumber the cores, bcasts from 512 KiB go in
/// one copy: there the root of a single copy waits until every receiver
/// has had a core to read on, while the window (64 pieces of 4 KiB by
/// default) lets it go on. Paired at np=4 on 2 cores (15 rounds from 4
/// launches, 2026-12-03): the window took 0.66x single copy's time at 16
/// KiB, 0.72x at 32 KiB, 0.82x at 128 KiB, 0.85x at 256 KiB, and even at
/// 64 and 512 KiB (MPI_Bcast); MPI_Ibcast 0.86x at 16-32 KiB, even from
/// 64 KiB (`docs/bench/2026-12-03/bcast-oversubscribed.txt`).
pub const OVERSUBSCRIBED_SINGLE_COPY_FROM_BYTES: usize = 524_288;

/// How one reduction collective (allreduce or reduce) is configured.
#[derive(Clone, Copy, Debug)]
pub struct ReductionSettings {
    /// `None`: the model chooses per communicator.
    pub degree: Option<usize>,
    pub segment_bytes: usize,
    /// `None`: the model chooses (allreduce only).
    pub exchange_max_bytes: Option<usize>,
    /// Messages above this go to the module underneath, unless they are
    /// reduced in parallel; `None`: never.
    pub max_bytes: Option<usize>,
    /// Messages of at least this many bytes are reduced in parallel where
    /// every rank reads every other's memory; `None`: never.
    pub parallel_min_bytes: Option<usize>,
    /// Messages of at least this many bytes with a commutative op go
    /// around the ring where the parallel reduction does not serve;
    /// `None`: never.
    pub ring_min_bytes: Option<usize>,
    /// Reduce only: parallel reductions of at least this many bytes are
    /// split into slices, shorter ones the root reduces alone; `None`:
    /// never split.
    pub parallel_slices_min_bytes: Option<usize>,
}

/// rmcast's congestion control and window over udp (fragments), which
/// take the place of the general ones where the transport is udp.
#[derive(Clone, Copy, Debug)]
pub struct UdpWindow {
    pub cwnd_initial: usize,
    pub ssthresh_initial: usize,
    pub window_slots: usize,
    pub ack_interval: usize,
    pub loss_tolerance_percent: u32,
    /// The NACK repeat's doublings over udp (`coll_rdma_udp_repair_backoff`).
    pub repair_backoff: u32,
}

/// The configuration of one reduction collective: the model's choices,
/// overridden by whatever the user fixed, with a sentence saying why.
pub fn reduction_config(model: &AllreduceModel, chosen: &ReductionSettings, size: usize, policy: WaitPolicy) -> (AllreduceConfig, String) {
    let model = AllreduceModel { segment_bytes: Some(chosen.segment_bytes), ..*model };
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
/// underneath (the adapter's agreement), with correct results.
pub fn oversubscribed_reduce_degree(
    model: &AllreduceModel,
    reduce: &ReductionSettings,
    size: usize,
    one_node_ranks: Option<usize>,
    cores: usize,
) -> Option<(usize, String)> {
    let ranks = oversubscribed_job_ranks(size, one_node_ranks, cores).filter(|_| reduce.degree.is_none())?;
    let model = AllreduceModel { segment_bytes: Some(reduce.segment_bytes), ..*model };
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
/// as `oversubscribed_reduce_degree` judges; otherwise every rank.
pub fn oversubscribed_parallel_workers(size: usize, one_node_ranks: Option<usize>, cores: usize) -> usize {
    match oversubscribed_job_ranks(size, one_node_ranks, cores) {
        Some(_) if size > cores => cores.max(1),
        _ => usize::MAX,
    }
}

/// The shortest ibcast whose run multicasts through the root's shared
/// window (`BcastConfig::shared_window_runs_multicast_from`), for a
/// communicator of `size` in a job of `one_node_ranks` on `cores`:
/// - where the job's ranks outnumber the cores of the one node they all run
///   on (judged as `oversubscribed_reduce_degree` judges, alike on every
///   rank), every length: there a root runs ahead in its window instead of
///   moving in lock-step with its children (back-to-back 4-byte ibcasts at
///   np=4 on 2 cores 5-8x faster than the put tree);
/// - elsewhere from `PUT_TREE_RUNS_BELOW`.
pub fn shared_window_runs_multicast_from(size: usize, one_node_ranks: Option<usize>, cores: usize) -> usize {
    if oversubscribed_job_ranks(size, one_node_ranks, cores).is_some() { 0 } else { PUT_TREE_RUNS_BELOW }
}

/// Where every rank has a core, ibcasts on a shared window shorter than
/// this take the put tree, whose push to each child beat the readers'
/// copy out of the root's window up to 512 bytes (np=2, paired, 12 rounds
/// from 4 launches: the put tree at 0.80-0.89x the window's time at 4-512
/// B), and lost from 1 KiB (1.15x at 1 KiB, 1.18x at 2 KiB, 1.06x at 4
/// KiB; docs/benchmarks.md, 2026-12-03).
pub const PUT_TREE_RUNS_BELOW: usize = 1024;

/// The job's ranks where they outnumber the cores of the one node they
/// all run on and the communicator of `size` is no larger than the job:
/// the setups judged for such a job alone, which every rank of it judges
/// alike.
fn oversubscribed_job_ranks(size: usize, one_node_ranks: Option<usize>, cores: usize) -> Option<usize> {
    one_node_ranks.filter(|&ranks| ranks > cores && size <= ranks)
}

/// The bcast configuration from the parameters, co-roots from the model
/// unless fixed, with a sentence saying why.
pub fn bcast_config(chosen: &BcastSettings, udp: UdpWindow, size: usize, policy: WaitPolicy) -> (BcastConfig, String) {
    let mut config = BcastConfig::default();
    let multicast = &mut config.multicast;
    // Congestion control is on only where the transport is udp (its
    // `Auto` mode), so these are inert on the other transports.
    multicast.congestion.cwnd_initial = udp.cwnd_initial;
    multicast.congestion.ssthresh_initial = udp.ssthresh_initial;
    multicast.congestion.window_slots = Some(udp.window_slots);
    multicast.congestion.ack_interval = Some(udp.ack_interval.min(udp.window_slots));
    multicast.congestion.loss_tolerance_percent = udp.loss_tolerance_percent.min(100);
    multicast.congestion.nack_retry_doublings = Some(udp.repair_backoff.min(btl_ibmc::rmcast::MAX_REPEAT_DOUBLINGS));
    multicast.window_slots = chosen.window_slots;
    multicast.slot_bytes = chosen.slot_bytes;
    multicast.fragment_bytes = chosen.fragment_bytes;
    multicast.ack_interval = chosen.ack_interval.min(chosen.window_slots);
    multicast.timeout = chosen.timeout;
    multicast.nack = chosen.nack;
    multicast.tail_repeat = chosen.tail_repeat;
    multicast.parity_percent = chosen.parity_percent;
    multicast.wait = policy;
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
pub fn uses_cross_memory(bcast: &BcastSettings, allreduce: &ReductionSettings, reduce: &ReductionSettings) -> bool {
    bcast.single_copy_min_bytes != SingleCopyFrom::Never || allreduce.parallel_min_bytes.is_some() || reduce.parallel_min_bytes.is_some()
}

/// The barrier radix (`fixed` where coll_rdma_barrier_radix sets it) and
/// a sentence saying why; `autotune_calls` is coll_rdma_autotune's calls
/// per candidate where it is on.
pub fn barrier_radix(fixed: Option<usize>, autotune_calls: Option<usize>, model: &BarrierModel, size: usize) -> (usize, String) {
    match (fixed, autotune_calls) {
        (Some(radix), None) => (radix, "set by coll_rdma_barrier_radix".to_string()),
        (Some(radix), Some(_)) => (radix, "set by coll_rdma_barrier_radix, which coll_rdma_autotune leaves alone".to_string()),
        (None, autotune) => {
            let choice = choose_barrier_radix(size, model);
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

/// The radices the barrier region holds: the autotune's candidates around
/// the model's pick, or the one radix.
pub fn barrier_radices(fixed: Option<usize>, autotune_calls: Option<usize>, size: usize, radix: usize) -> Vec<usize> {
    match (fixed, autotune_calls) {
        (None, Some(_)) => barrier_candidates(size, radix),
        _ => vec![radix],
    }
}

/// The autotune's degree trial: the candidates the allreduce region holds
/// around the model's pick, when there are several and the degree is not
/// fixed. Every rank computes it from agreed values.
pub fn allreduce_degree_trial(autotune_calls: Option<usize>, fixed_degree: Option<usize>, size: usize, config: &AllreduceConfig) -> Option<DegreeTrial> {
    let calls = autotune_calls.filter(|_| tunes_allreduce_degree(autotune_calls, fixed_degree))?;
    let candidates = degree_candidates(size, config.tree.degree, config.tree.ring_positions(size));
    (candidates.len() > 1).then(|| DegreeTrial::new(size, &candidates, calls))
}

/// coll_rdma_autotune is on and coll_rdma_allreduce_degree leaves the
/// degree to it.
pub fn tunes_allreduce_degree(autotune_calls: Option<usize>, fixed_degree: Option<usize>) -> bool {
    autotune_calls.is_some() && fixed_degree.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// coll_rdma_reduce_*'s defaults (the MCA table's).
    fn reduce_defaults() -> ReductionSettings {
        ReductionSettings {
            degree: None,
            segment_bytes: 8192,
            exchange_max_bytes: Some(0),
            max_bytes: Some(8192),
            parallel_min_bytes: Some(8192),
            ring_min_bytes: Some(8192),
            parallel_slices_min_bytes: Some(131072),
        }
    }

    #[test]
    fn only_a_one_node_job_with_more_ranks_than_cores_flattens_the_reduce_tree() {
        let (model, reduce) = (AllreduceModel::SHARED_MEMORY, reduce_defaults());
        let (degree, why) = oversubscribed_reduce_degree(&model, &reduce, 4, Some(4), 2).expect("4 ranks on 2 cores");
        assert_eq!(degree, 3, "{why}");
        assert!(why.starts_with("the job's 4 ranks on 2 cores of one node"), "{why}");
        let (eight, why) = oversubscribed_reduce_degree(&model, &reduce, 8, Some(8), 2).expect("8 ranks on 2 cores");
        assert_eq!(eight, 2, "{why}");
        // A sub-communicator of the same job is judged by the job's ranks.
        assert_eq!(oversubscribed_reduce_degree(&model, &reduce, 3, Some(4), 2).map(|(degree, _)| degree), Some(2));
        // Larger than the job: merged with a spawned job's processes.
        assert_eq!(oversubscribed_reduce_degree(&model, &reduce, 5, Some(4), 2), None);
        // The model's own choice stands where every rank has a core, and
        // where the job spans nodes or the launcher did not say.
        assert_eq!(oversubscribed_reduce_degree(&model, &reduce, 4, Some(4), 4), None);
        assert_eq!(oversubscribed_reduce_degree(&model, &reduce, 4, None, 2), None);
        let (usual, _) = reduction_config(&model, &reduce, 4, WaitPolicy::default());
        assert_eq!(usual.tree.degree, 1);
        // A degree the user fixed is kept.
        let fixed = ReductionSettings { degree: Some(1), ..reduce };
        assert_eq!(oversubscribed_reduce_degree(&model, &fixed, 4, Some(4), 2), None);
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

    #[test]
    fn single_copy_starts_later_where_ranks_outnumber_cores_unless_set() {
        let by_placement = |size, one_node_ranks, cores| single_copy_min_bytes(SingleCopyFrom::Placement, size, one_node_ranks, cores);
        assert_eq!(by_placement(2, Some(2), 2), SINGLE_COPY_FROM_BYTES);
        assert_eq!(by_placement(4, None, 2), SINGLE_COPY_FROM_BYTES, "no word from the launcher");
        assert_eq!(by_placement(4, Some(4), 2), OVERSUBSCRIBED_SINGLE_COPY_FROM_BYTES);
        assert_eq!(by_placement(2, Some(4), 2), OVERSUBSCRIBED_SINGLE_COPY_FROM_BYTES, "a sub-communicator of such a job");
        assert!(SINGLE_COPY_FROM_BYTES < OVERSUBSCRIBED_SINGLE_COPY_FROM_BYTES);
        // A value the user set stands wherever the ranks run.
        for (size, one_node_ranks, cores) in [(2, Some(2), 2), (4, Some(4), 2)] {
            assert_eq!(single_copy_min_bytes(SingleCopyFrom::Bytes(100), size, one_node_ranks, cores), 100);
            assert_eq!(single_copy_min_bytes(SingleCopyFrom::Never, size, one_node_ranks, cores), usize::MAX);
        }
    }

    #[test]
    fn ibcasts_multicast_through_the_window_at_every_length_only_where_ranks_outnumber_cores() {
        assert_eq!(shared_window_runs_multicast_from(4, Some(4), 2), 0);
        assert_eq!(shared_window_runs_multicast_from(2, Some(4), 2), 0, "a sub-communicator of such a job");
        // Enough cores, a communicator merged with another job's processes,
        // several nodes or no word from the launcher: the put tree below
        // its length.
        for (size, one_node_ranks, cores) in [(2, Some(2), 2), (4, Some(4), 4), (5, Some(4), 2), (4, None, 2)] {
            assert_eq!(shared_window_runs_multicast_from(size, one_node_ranks, cores), PUT_TREE_RUNS_BELOW, "{size} ranks");
        }
    }
}
