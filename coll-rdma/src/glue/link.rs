//! Choosing and setting up a communicator's transport, collectively: every
//! rank runs the same steps on exchanged data, so all reach the same
//! verdict and none waits in an exchange the others skipped.
//!
//! `auto` takes shared memory when every rank is on one node; otherwise
//! shared memory within each node and verbs between the nodes (the
//! hybrid), so node-local pairs never go through the adapter. `verbs`
//! forces verbs between all ranks, and `test_pretend_nodes` makes `auto`
//! build the hybrid on one machine, so that one machine can exercise both.

use btl_ibmc::shm::{self, ShmSetupError};
use btl_ibmc::{CrossMemoryRefusal, Exchange, SelectedTransport};

use super::params::{TransportChoice, VerbsSettings};

/// What a communicator needs from its transport.
pub(super) struct LinkRequest<'a> {
    pub choice: TransportChoice,
    pub verbs: &'a VerbsSettings,
    pub cid: u32,
    pub rank: usize,
    pub size: usize,
    pub window_len: usize,
    /// `Some(pretend_refused)`: on shared memory, probe whether every rank
    /// can read every other's memory (single-copy bcast); the test setting
    /// makes this rank refuse.
    pub cross_memory_probe: Option<bool>,
}

/// The transport, or why there is none (said at verbose level by the caller).
pub(super) fn connect(exchange: &dyn Exchange, request: &LinkRequest) -> Result<SelectedTransport, String> {
    match request.choice {
        TransportChoice::Shm => connect_shm(exchange, request).map_err(|why| why.to_string()),
        TransportChoice::Verbs => connect_verbs(exchange, request),
        TransportChoice::Auto if request.verbs.pretend_nodes > 1 => connect_hybrid(exchange, request),
        TransportChoice::Auto => match connect_shm(exchange, request) {
            Ok(transport) => Ok(transport),
            // Every rank sees the same records, so all of them go on.
            Err(ShmSetupError::NotNodeLocal { .. }) => {
                connect_hybrid(exchange, request).map_err(|why| format!("ranks span several nodes and {why}"))
            }
            Err(why) => Err(why.to_string()),
        },
    }
}

fn connect_shm(exchange: &dyn Exchange, request: &LinkRequest) -> Result<SelectedTransport, ShmSetupError> {
    let mut transport = shm::establish(exchange, request.rank, request.size, request.window_len)?;
    if let Some(pretend_refused) = request.cross_memory_probe {
        // Every rank reaches the same verdict; a refusal only costs the
        // paths that read peers' memory (single-copy bcast, parallel
        // allreduce and reduce), so the transport is kept either way.
        match transport.enable_cross_memory(exchange, pretend_refused) {
            Ok(()) => {}
            Err(CrossMemoryRefusal::Exchange(error)) => return Err(ShmSetupError::Exchange(error)),
            Err(refusal) => tracing::info!("comm {} rank {}: no cross-memory reads, so no single-copy bcast or parallel reduction: {refusal}", request.cid, request.rank),
        }
    }
    Ok(SelectedTransport::Shm(transport))
}

#[cfg(feature = "verbs")]
fn verbs_config(request: &LinkRequest) -> btl_ibmc::VerbsConfig {
    btl_ibmc::VerbsConfig {
        device: request.verbs.device.clone(),
        port: request.verbs.port,
        gid_index: request.verbs.gid_index,
        multicast: request.verbs.multicast,
        multicast_id: multicast_id(request.cid),
        ..btl_ibmc::VerbsConfig::default()
    }
}

#[cfg(feature = "verbs")]
fn connect_verbs(exchange: &dyn Exchange, request: &LinkRequest) -> Result<SelectedTransport, String> {
    btl_ibmc::verbs::establish(exchange, request.rank, request.size, request.window_len, &verbs_config(request))
        .map(SelectedTransport::Verbs)
        .map_err(|why| why.to_string())
}

#[cfg(feature = "verbs")]
fn connect_hybrid(exchange: &dyn Exchange, request: &LinkRequest) -> Result<SelectedTransport, String> {
    let config = verbs_config(request);
    btl_ibmc::hybrid::establish(exchange, request.rank, request.size, request.window_len, &config, request.verbs.pretend_nodes)
        .map(SelectedTransport::Hybrid)
        .map_err(|why| why.to_string())
}

#[cfg(not(feature = "verbs"))]
fn connect_verbs(_exchange: &dyn Exchange, _request: &LinkRequest) -> Result<SelectedTransport, String> {
    Err("this build of coll rdma has no verbs support".to_string())
}

#[cfg(not(feature = "verbs"))]
fn connect_hybrid(exchange: &dyn Exchange, request: &LinkRequest) -> Result<SelectedTransport, String> {
    connect_verbs(exchange, request)
}

/// The communicator's multicast group id: the job's name mixed with the
/// context id, so that concurrent jobs on one fabric pick different groups.
/// The verbs setup mixes in where rank 0's window is registered, which
/// separates communicators that share a context id; the transport checks
/// the id on every datagram.
#[cfg(feature = "verbs")]
fn multicast_id(cid: u32) -> u32 {
    let job = ["PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"].iter().find_map(|name| std::env::var(name).ok()).unwrap_or_default();
    btl_ibmc::verbs::multicast_id_of([job.as_bytes(), &cid.to_le_bytes()])
}
