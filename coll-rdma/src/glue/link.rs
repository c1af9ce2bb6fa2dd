//! Choosing and setting up a communicator's transport, collectively: every
//! rank runs the same steps on exchanged data, so all reach the same
//! verdict and none waits in an exchange the others skipped.
//!
//! `auto` takes shared memory when every rank is on one node; otherwise
//! shared memory within each node and verbs between the nodes (the
//! hybrid), so node-local pairs never go through the adapter; where that
//! fails (a rank without an active device, a build without verbs), udp
//! between all ranks. Each step's verdict is the same on every rank, so
//! all ranks take the next step together. `verbs` and `udp` force their
//! transport between all ranks, and `test_pretend_nodes` makes `auto`
//! build the hybrid on one machine, so that one machine can exercise both.

use std::sync::atomic::{AtomicBool, Ordering};

use btl_ibmc::udp::{Cipher, Protection};
use btl_ibmc::shm::{self, ShmSetupError};
use btl_ibmc::{CrossMemoryRefusal, Exchange, SelectedTransport, UdpSetupError};

use super::params::{TransportChoice, UdpSettings, VerbsSettings};
use super::udp_interface;

/// What a communicator needs from its transport.
pub(super) struct LinkRequest<'a> {
    pub choice: TransportChoice,
    pub verbs: &'a VerbsSettings,
    pub udp: &'a UdpSettings,
    pub cid: u32,
    pub rank: usize,
    pub size: usize,
    pub window_len: usize,
    /// On the hybrid, only the nodes' leaders connect across nodes where
    /// some rank would otherwise hold more than this many queue pairs;
    /// `None`: every pair (the schedules may stay flat).
    // a build without verbs has no hybrid to read it
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    pub leaders_above: Option<usize>,
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
        TransportChoice::Udp => connect_udp(exchange, request),
        TransportChoice::Auto if request.verbs.pretend_nodes > 1 => connect_hybrid(exchange, request),
        TransportChoice::Auto => match connect_shm(exchange, request) {
            Ok(transport) => Ok(transport),
            // Every rank sees the same records, so all of them go on.
            Err(ShmSetupError::NotNodeLocal { .. }) => connect_across_nodes(exchange, request),
            Err(why) => Err(why.to_string()),
        },
    }
}

/// `auto` across nodes: verbs between the nodes, else udp. The hybrid's
/// verdict is the same on every rank whatever failed where (a node
/// without a device fails them all alike), and only that verdict, never
/// its kind, decides whether udp is tried.
fn connect_across_nodes(exchange: &dyn Exchange, request: &LinkRequest) -> Result<SelectedTransport, String> {
    let verbs_failure = match connect_hybrid(exchange, request) {
        Ok(transport) => return Ok(transport),
        Err(why) => why,
    };
    tracing::info!("comm {} rank {}: ranks span several nodes and {verbs_failure}; trying udp", request.cid, request.rank);
    connect_udp(exchange, request).map_err(|udp_failure| format!("ranks span several nodes, {verbs_failure}, and {udp_failure}"))
}

/// udp between all ranks. Each rank first finds its interface; one
/// exchange tells every rank whether all did, so that all go on to the
/// backend's collective setup or none does.
fn connect_udp(exchange: &dyn Exchange, request: &LinkRequest) -> Result<SelectedTransport, String> {
    let chosen = udp_interface::choose(request.udp);
    let mut found = vec![0u8; 8 * request.size];
    exchange
        .allgather(&u64::from(chosen.is_ok()).to_le_bytes(), &mut found)
        .map_err(|why| format!("udp: the setup exchange failed: {why}"))?;
    let chosen = chosen.map_err(|why| own_udp_failure(request, format!("udp: {why}")))?;
    if let Some(rank) = found.chunks_exact(8).position(|found| found != 1u64.to_le_bytes()) {
        return Err(format!("udp: rank {rank} found no interface (its own message says why)"));
    }
    let multicast_id = multicast_id(request.cid);
    let config = request.udp.config(multicast_id, chosen.address, u64::from(multicast_id));
    match btl_ibmc::udp::establish(exchange, request.rank, request.size, request.window_len, &config) {
        Ok(udp) => {
            tracing::info!(
                "comm {} rank {}: udp chosen: interface {} ({}), group {}, datagrams of up to {}{} ({} for a bcast piece with its headers), TTL {}, frames {}{}",
                request.cid,
                request.rank,
                chosen.address,
                chosen.how,
                udp.group(),
                udp.datagram_choice(),
                if request.udp.datagram_bytes.is_some() { " by coll_rdma_udp_fragment_bytes" } else { "" },
                btl_ibmc::Datagrams::max_datagram(&udp),
                config.ttl,
                protection_said(config.protection, config.cipher),
                injected_faults(request.udp)
            );
            warn_if_unprotected(
                request,
                config.protection,
                Unsealed {
                    what: "udp frames",
                    parameter: "coll_rdma_udp_protection",
                    exposure: &format!("anyone reaching group {} or the ranks' ports can read bcasts and inject frames", udp.group()),
                },
            );
            Ok(SelectedTransport::Udp(udp))
        }
        Err(why @ UdpSetupError::Socket(_)) => Err(own_udp_failure(request, format!("udp: {why}"))),
        Err(why) => Err(format!("udp: {why}")),
    }
}

/// A failure of this rank's own part of the udp setup: where the user
/// forced udp, said at verbose level 0 by this rank, once per process (the
/// cause, an interface or a socket of this host, is the same for every
/// communicator); rank 0 says every communicator's verdict, and the other
/// ranks' verdicts name this rank and refer here.
fn own_udp_failure(request: &LinkRequest, why: String) -> String {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if request.choice == TransportChoice::Udp && request.rank != 0 && !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!("comm {} rank {}: {why} (said once; later communicators say it at verbose level 2)", request.cid, request.rank);
    }
    why
}

/// A transport's frames' protection, as the verbose line shows it.
fn protection_said(protection: Protection, cipher: Cipher) -> String {
    match protection {
        Protection::Encrypt => format!("encrypted and authenticated ({})", cipher.name()),
        Protection::Authenticate => format!("authenticated ({}), payload in clear", cipher.name()),
        Protection::None => "unprotected".to_string(),
    }
}

/// Datagrams a transport would seal, as its warning names them when
/// they go unprotected.
struct Unsealed<'a> {
    what: &'static str,
    /// The MCA parameter set to `none`.
    parameter: &'static str,
    /// Who can then read and forge them.
    exposure: &'a str,
}

/// Warns at verbose 1, once per communicator (on rank 0: every rank
/// agreed on the protection), that `datagrams` go unprotected.
fn warn_if_unprotected(request: &LinkRequest, protection: Protection, datagrams: Unsealed) {
    if protection == Protection::None && request.rank == 0 {
        tracing::info!(
            target: super::output::SUMMARY,
            "comm {}: warning: {} unprotected ({}=none): {}",
            request.cid,
            datagrams.what,
            datagrams.parameter,
            datagrams.exposure
        );
    }
}

/// The testing-only fault injection, as the verbose line shows it.
fn injected_faults(udp: &UdpSettings) -> String {
    if udp.loss_percent + udp.duplicate_percent + udp.reorder_percent == 0 {
        return String::new();
    }
    format!(
        ", injecting {} % loss, {} % duplication, {} % reordering on receipt (testing)",
        udp.loss_percent, udp.duplicate_percent, udp.reorder_percent
    )
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
        protection: request.verbs.protection,
        ..btl_ibmc::VerbsConfig::default()
    }
}

/// Says at verbose 2 how verbs seals its multicast datagrams, and warns
/// at verbose 1 when it does not.
#[cfg(feature = "verbs")]
fn say_multicast_protection(request: &LinkRequest, protection: Option<Protection>) {
    let Some(protection) = protection else { return };
    tracing::info!("comm {} rank {}: verbs multicast datagrams {}", request.cid, request.rank, protection_said(protection, Cipher::Aes256Gcm));
    warn_if_unprotected(
        request,
        protection,
        Unsealed {
            what: "verbs multicast datagrams",
            parameter: "coll_rdma_verbs_protection",
            exposure: "anyone who can open the RDMA device and join the group can read bcasts and inject pieces",
        },
    );
}

#[cfg(feature = "verbs")]
fn connect_verbs(exchange: &dyn Exchange, request: &LinkRequest) -> Result<SelectedTransport, String> {
    let verbs = btl_ibmc::verbs::establish(exchange, request.rank, request.size, request.window_len, &verbs_config(request)).map_err(|why| why.to_string())?;
    say_multicast_protection(request, verbs.multicast_protection());
    Ok(SelectedTransport::Verbs(verbs))
}

#[cfg(feature = "verbs")]
fn connect_hybrid(exchange: &dyn Exchange, request: &LinkRequest) -> Result<SelectedTransport, String> {
    let config = verbs_config(request);
    let pairs = request.leaders_above.map_or(btl_ibmc::hybrid::CrossNodePairs::Every, btl_ibmc::hybrid::CrossNodePairs::LeadersAbove);
    let hybrid = btl_ibmc::hybrid::establish(exchange, request.rank, request.size, request.window_len, &config, request.verbs.pretend_nodes, pairs)
        .map_err(|why| why.to_string())?;
    say_multicast_protection(request, hybrid.verbs().multicast_protection());
    Ok(SelectedTransport::Hybrid(hybrid))
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
/// The setups mix in something only rank 0 has (where its window is
/// registered, its socket's address and nonce), which separates
/// communicators that share a context id; the transports check the id on
/// every datagram.
fn multicast_id(cid: u32) -> u32 {
    let job = ["PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"].iter().find_map(|name| std::env::var(name).ok()).unwrap_or_default();
    btl_ibmc::multicast_group::multicast_id_of([job.as_bytes(), &cid.to_le_bytes()])
}
