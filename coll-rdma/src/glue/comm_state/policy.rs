//! Pure choices made when a communicator is enabled, from the settings and
//! the communicator's size alone: how ranks wait, each reduction's and the
//! bcast's configuration, the barrier radix and the autotune's candidates.
//! Nothing here touches Open MPI or a transport; every rank computes the
//! same values from agreed inputs (`agreement.rs` checks the settings).

use btl_ibmc::WaitPolicy;
use tuning::choose_barrier_radix;

use super::super::params::{BcastSettings, ReductionSettings, Settings, UdpSettings};
use super::CommState;
use crate::collectives::allreduce::AllreduceConfig;
use crate::collectives::allreduce_autotune::{degree_candidates, DegreeTrial};
use crate::collectives::barrier_autotune::barrier_candidates;
use crate::collectives::bcast::BcastConfig;

/// How a rank waits: spin only while every rank of the node has a core
/// (and not at all where the data comes through the kernel, see
/// `btl_ibmc::KERNEL_DEFAULT_SPIN_POLLS`), unless the user chose a count.
pub(super) fn wait_policy(settings: &Settings, local_ranks: usize) -> WaitPolicy {
    let cores = online_cores();
    let mut policy = WaitPolicy::for_occupancy(local_ranks, cores, settings.stall_warning);
    policy.fault_timeout = settings.fault_timeout;
    if let Some(polls) = settings.spin_polls {
        policy = policy.spinning(polls);
    }
    policy
}

pub(super) fn online_cores() -> usize {
    // SAFETY: sysconf has no preconditions. Online cores, not this
    // process's affinity mask: a rank bound to one core still has that core
    // to itself when the node is not oversubscribed.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 { n as usize } else { 1 }
}

/// The configuration of one reduction collective: the model's choices,
/// overridden by whatever the user fixed, with a sentence saying why.
pub(in crate::glue) fn reduction_config(settings: &Settings, chosen: &ReductionSettings, size: usize, policy: WaitPolicy) -> (AllreduceConfig, String) {
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
pub(super) fn oversubscribed_reduce_degree(settings: &Settings, size: usize, one_node_ranks: Option<usize>, cores: usize) -> Option<(usize, String)> {
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
pub(super) fn oversubscribed_parallel_workers(size: usize, one_node_ranks: Option<usize>, cores: usize) -> usize {
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
pub(in crate::glue) fn bcast_config(chosen: &BcastSettings, udp: &UdpSettings, size: usize, policy: WaitPolicy) -> (BcastConfig, String) {
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
pub(super) fn uses_cross_memory(settings: &Settings) -> bool {
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
    pub(super) fn barrier_radices(settings: &Settings, size: usize, radix: usize) -> Vec<usize> {
        match (settings.barrier_radix, settings.autotune_calls) {
            (None, Some(_)) => barrier_candidates(size, radix),
            _ => vec![radix],
        }
    }

    /// The autotune's degree trial: the candidates the allreduce region
    /// holds around the model's pick, when there are several and the
    /// degree is not fixed. Every rank computes it from agreed values.
    pub(super) fn allreduce_degree_trial(settings: &Settings, size: usize, config: &AllreduceConfig) -> Option<DegreeTrial> {
        let calls = settings.autotune_calls.filter(|_| Self::tunes_allreduce_degree(settings))?;
        let candidates = degree_candidates(size, config.tree.degree, config.tree.ring_positions(size));
        (candidates.len() > 1).then(|| DegreeTrial::new(size, &candidates, calls))
    }

    /// coll_rdma_autotune is on and coll_rdma_allreduce_degree leaves the
    /// degree to it.
    pub(super) fn tunes_allreduce_degree(settings: &Settings) -> bool {
        settings.autotune_calls.is_some() && settings.allreduce.degree.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::params::{validate, RawParams};
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
