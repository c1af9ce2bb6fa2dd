//! The choices made when a communicator is enabled that read the machine
//! (how ranks wait, from the cores online), and the settings handed to the
//! pure choices in `crate::select::policy`, which make the rest (each
//! reduction's and the bcast's configuration, the barrier radix and the
//! autotune's candidates) from agreed inputs.

use btl_ibmc::WaitPolicy;

use super::super::params::{Settings, UdpSettings};
use super::CommState;
use crate::collectives::allreduce::AllreduceConfig;
use crate::collectives::allreduce::autotune::DegreeTrial;
use crate::collectives::bcast::BcastConfig;
use crate::select::policy::{self, BcastSettings, UdpWindow};

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

/// The bcast configuration (see `policy::bcast_config`), with udp's own
/// window where the transport is udp.
pub(in crate::glue) fn bcast_config(chosen: &BcastSettings, udp: &UdpSettings, size: usize, wait: WaitPolicy) -> (BcastConfig, String) {
    let window = UdpWindow {
        cwnd_initial: udp.cwnd_initial,
        ssthresh_initial: udp.ssthresh_initial,
        window_slots: udp.window_slots,
        ack_interval: udp.ack_interval,
        loss_tolerance_percent: udp.loss_tolerance_percent,
        repair_backoff: udp.repair_backoff,
    };
    policy::bcast_config(chosen, window, size, wait)
}

/// Whether any collective reads peers' memory, so that the shared-memory
/// setup probes whether it may.
pub(super) fn uses_cross_memory(settings: &Settings) -> bool {
    policy::uses_cross_memory(&settings.bcast, &settings.allreduce, &settings.reduce)
}

impl CommState {
    /// The radix to use and a sentence saying why.
    pub fn barrier_radix(settings: &Settings, size: usize) -> (usize, String) {
        policy::barrier_radix(settings.barrier_radix, settings.autotune_calls, &settings.model, size)
    }

    /// The radices the barrier region holds.
    pub(super) fn barrier_radices(settings: &Settings, size: usize, radix: usize) -> Vec<usize> {
        policy::barrier_radices(settings.barrier_radix, settings.autotune_calls, size, radix)
    }

    /// The autotune's degree trial, if there is one.
    pub(super) fn allreduce_degree_trial(settings: &Settings, size: usize, config: &AllreduceConfig) -> Option<DegreeTrial> {
        policy::allreduce_degree_trial(settings.autotune_calls, settings.allreduce.degree, size, config)
    }

    /// coll_rdma_autotune is on and coll_rdma_allreduce_degree leaves the
    /// degree to it.
    pub(super) fn tunes_allreduce_degree(settings: &Settings) -> bool {
        policy::tunes_allreduce_degree(settings.autotune_calls, settings.allreduce.degree)
    }
}
