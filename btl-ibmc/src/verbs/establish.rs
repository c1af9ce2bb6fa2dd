//! The collective setup every rank of a communicator runs together. Each
//! rank opens the device, registers its memory and creates one RC queue
//! pair per peer; one allgather of fixed-size records tells every rank how
//! to reach every other; each connects its queue pairs and joins the
//! multicast group; a second allgather confirms both and hands every rank
//! rank 0's key for the multicast datagrams (`ud_frame`), so the key
//! travels only through the exchange, over Open MPI's own transports.
//! Every verdict is computed from exchanged data, so all ranks get a
//! transport or all get an error, and all agree on whether multicast is
//! used and how its datagrams are sealed.

use std::sync::{Arc, Mutex};

use super::completion::CompletionQueue;
use super::config::{VerbsConfig, multicast_id_of};
use super::device::{OpenDevice, mtu_bytes};
use super::error::{VerbsError, VerbsSetupError};
use super::links::{Failure, Links, ReceiveSlots, RemoteWindow};
use super::memory::{BorrowedMemory, LOCAL_ONLY, RegisteredBuffer, remote_access};
use super::rc::{LocalPort, RcQueuePair, RemoteQp};
use super::record::{Endpoint, READY_LEN, Ready, Record, record_len};
use super::reliable::{ReliableInbox, post_all_receives};
use super::send_path::SendPath;
use super::ud_frame::{UdSeal, max_body};
use super::ud_multicast::{JoinRequest, UdMulticast};
use super::ud_source::UdSource;
use super::{RELIABLE_SLOT_BYTES, VerbsTransport};
use crate::seal::{KEY_BYTES, Protection, draw_key, scrub};
use crate::shm::NodeGroups;
use crate::transport::Exchange;

/// Inline bytes asked of each RC queue pair: puts up to this size skip the
/// staging copy.
const INLINE_WANTED: u32 = 256;
/// Bytes of the completion sink (one word is written; a cache line is kept).
const SINK_BYTES: usize = 64;

/// Where a transport's window lives and which peers it connects to.
#[derive(Default)]
pub(crate) struct Placement<'a> {
    /// Memory to register as this rank's window instead of mapping its own.
    pub(crate) window: Option<BorrowedMemory>,
    /// Peers on this rank's node are reached another way (shared memory):
    /// no queue pair is made to them.
    pub(crate) nodes: Option<&'a NodeGroups>,
    /// With `nodes`: queue pairs across nodes only between the nodes'
    /// leaders, whose two-level collectives are the only ones to cross.
    pub(crate) leaders_only: bool,
}

impl Placement<'_> {
    /// Whether `rank` holds a queue pair to `peer`; both sides answer alike.
    pub(crate) fn connects(&self, rank: usize, peer: usize) -> bool {
        match self.nodes {
            _ if peer == rank => false,
            None => true,
            Some(nodes) if nodes.same_node(peer, rank) => false,
            Some(nodes) => !self.leaders_only || (nodes.leader_of(rank) == rank && nodes.leader_of(peer) == peer),
        }
    }
}

/// Sets up verbs for one communicator; every rank calls it with the same
/// `size`, `window_len` and (except per-host fields) `config`.
pub fn establish(
    exchange: &dyn Exchange,
    rank: usize,
    size: usize,
    window_len: usize,
    config: &VerbsConfig,
) -> Result<VerbsTransport, VerbsSetupError> {
    // SAFETY: the default placement borrows no memory.
    unsafe { establish_placed(exchange, rank, size, window_len, config, &Placement::default()) }
}

/// [`establish`] with the window and the set of connected peers given.
///
/// # Safety
/// A borrowed window must be readable, writable and mapped for as long as
/// its keeper is held (the registration holds it until it is undone).
pub(crate) unsafe fn establish_placed(
    exchange: &dyn Exchange,
    rank: usize,
    size: usize,
    window_len: usize,
    config: &VerbsConfig,
    placement: &Placement,
) -> Result<VerbsTransport, VerbsSetupError> {
    if size == 0 || rank >= size {
        return Err(VerbsSetupError::InvalidArguments(format!("rank {rank} of {size}")));
    }
    if let Some(problem) = config.problem() {
        return Err(VerbsSetupError::InvalidArguments(problem));
    }
    if let Some(nodes) = placement.nodes.filter(|nodes| nodes.size() != size) {
        return Err(VerbsSetupError::InvalidArguments(format!("node groups of {} ranks for {size} ranks", nodes.size())));
    }
    let psn = first_psn(rank);
    // SAFETY: passed on from this function's contract.
    let local = unsafe { open_local(config, rank, size, window_len, placement) };
    let mine = Record {
        size: size as u64,
        window_len: window_len as u64,
        endpoint: local.as_ref().map(|links| endpoint_of(links, psn)).map_err(ToString::to_string),
    };
    let mut gathered = vec![0u8; size * record_len(size)];
    exchange.allgather(&mine.encode(), &mut gathered).map_err(VerbsSetupError::Exchange)?;
    let endpoints = judge_records(&gathered, size, &mine);
    let mut links = local?;
    let endpoints = endpoints?;

    let config = &VerbsConfig { multicast_id: communicator_multicast_id(config.multicast_id, &endpoints[0]), ..config.clone() };
    let connected = connect_all(&mut links, &endpoints, rank, psn);
    let multicast = match (&connected, config.multicast) {
        (Ok(()), true) => join_multicast(&links, config, rank, size),
        (Ok(()), false) => Err(VerbsError::MulticastDisabled),
        (Err(_), _) => Err(VerbsError::NotConnected),
    };
    let multicast_nonce = if rank == 0 { crate::multicast_group::random_nonce() } else { 0 };
    let (multicast, mut key) = draw_datagram_key(multicast, rank, config.protection);
    let mut ready = Ready {
        connected: connected.clone().map_err(|error| error.to_string()),
        multicast_joined: multicast.is_ok(),
        multicast_nonce,
        ud_qp_num: multicast.as_ref().map_or(0, UdMulticast::qp_num),
        ud_ipv4: multicast.as_ref().map_or([0; 4], |multicast| multicast.local_address().octets()),
        protection: config.protection,
        key,
    };
    let mut mine = ready.encode();
    let mut gathered = vec![0u8; size * READY_LEN];
    let outcome = exchange.allgather(&mine, &mut gathered);
    for copy in [&mut key[..], &mut ready.key[..], &mut mine[..]] {
        scrub(copy);
    }
    let judged = outcome.map_err(VerbsSetupError::Exchange).and_then(|()| judge_readies(&gathered));
    scrub(&mut gathered);
    connected?;
    let (missing_multicast, mut readies) = judged?;

    let multicast = match (multicast, missing_multicast.is_empty()) {
        (Ok(mut multicast), true) => {
            let sources = readies
                .iter()
                .zip(&endpoints)
                .map(|(ready, endpoint)| UdSource { qp_num: ready.ud_qp_num, ipv4: ready.ud_ipv4, gid: endpoint.gid })
                .collect();
            let leader = &readies[0];
            let seal = UdSeal::new(leader.protection, &leader.key, config.multicast_id, rank as u32, leader.multicast_nonce);
            multicast.admit(sources, leader.multicast_nonce, seal);
            tracing::debug!("verbs: rank {rank} joined {} (max datagram {})", config.multicast_group(), multicast.max_datagram());
            Some(multicast)
        }
        (Ok(_), false) => {
            tracing::info!(
                "verbs: multicast unused because rank(s) {missing_multicast:?} could not join {}; broadcasts fall back",
                config.multicast_group()
            );
            None
        }
        (Err(why), _) => {
            if config.multicast {
                tracing::info!("verbs: rank {rank} could not join multicast group {}: {why}; broadcasts fall back", config.multicast_group());
            }
            None
        }
    };

    for ready in &mut readies {
        scrub(&mut ready.key);
    }

    let send_path = SendPath::new(rank, size, links.staging.len(), config.signal_interval, config.send_queue_depth.min(links.device.max_qp_wr.max(2)));
    Ok(VerbsTransport {
        rank,
        size,
        window_len,
        multicast,
        send_path: Mutex::new(send_path),
        inbox: Mutex::new(ReliableInbox::default()),
        failure: Failure::default(),
        links,
    })
}

/// Everything this rank can build before it knows its peers.
///
/// # Safety
/// As for [`establish_placed`].
unsafe fn open_local(config: &VerbsConfig, rank: usize, size: usize, window_len: usize, placement: &Placement) -> Result<Links, VerbsSetupError> {
    let device = OpenDevice::open(config)?;
    // Its own handle, as `device` moves into the links below.
    let pd = &Arc::clone(device.pd());
    let peers = (0..size).filter(|&peer| placement.connects(rank, peer)).count();
    let depth = config.send_queue_depth.min(device.max_qp_wr.max(2));
    let slots = config.reliable_receive_slots.min(device.max_qp_wr.max(1));
    let cq_limit = device.max_cqe.max(1);
    let send_cq = CompletionQueue::new(device.context(), clamp_entries(depth as usize * peers, cq_limit), "RC sends")?;
    let recv_cq = CompletionQueue::new(device.context(), clamp_entries(slots as usize * peers, cq_limit), "RC receives")?;

    let window = match placement.window.clone() {
        // SAFETY: the memory stays mapped while its keeper is held (the
        // registration holds it), per this function's contract.
        Some(memory) if memory.len >= window_len => unsafe { RegisteredBuffer::borrow(pd, memory, remote_access(), "window")? },
        Some(memory) => {
            return Err(VerbsSetupError::InvalidArguments(format!("a {}-byte window cannot hold {window_len} bytes", memory.len)));
        }
        None => RegisteredBuffer::new(pd, window_len.max(8), remote_access(), "window")?,
    };
    // A rank without queue pairs (a non-leader where only leaders connect)
    // never stages a byte: one page keeps the send path's arithmetic whole.
    let staging_bytes = if peers == 0 { 1 } else { config.staging_bytes };
    let staging = RegisteredBuffer::new(pd, staging_bytes, LOCAL_ONLY, "staging ring")?;
    let sink = RegisteredBuffer::new(pd, SINK_BYTES, remote_access(), "completion sink")?;
    let reliable_len = peers.checked_mul(slots as usize).and_then(|count| count.checked_mul(RELIABLE_SLOT_BYTES)).ok_or_else(|| {
        VerbsSetupError::InvalidArguments(format!("{peers} peers x {slots} reliable receive slots do not fit in memory"))
    })?;
    let reliable_buffers = RegisteredBuffer::new(pd, reliable_len, LOCAL_ONLY, "reliable receive buffers")?;

    let mut queue_pairs = Vec::with_capacity(size);
    for peer in 0..size {
        queue_pairs.push(if placement.connects(rank, peer) {
            Some(RcQueuePair::new(pd, &send_cq, &recv_cq, depth, slots, INLINE_WANTED, config.port)?)
        } else {
            None
        });
    }
    let receivers = ReceiveSlots::of(&queue_pairs);
    let max_inline = queue_pairs.iter().flatten().map(RcQueuePair::max_inline).min().unwrap_or(0);
    let links = Links {
        queue_pairs: queue_pairs.into_boxed_slice(),
        remotes: vec![RemoteWindow::default(); size].into_boxed_slice(),
        window,
        staging,
        sink,
        reliable_buffers,
        receivers,
        send_cq,
        recv_cq,
        device,
        reliable_slots: slots as usize,
        max_inline,
    };
    post_all_receives(&links)?;
    Ok(links)
}

fn clamp_entries(wanted: usize, limit: u32) -> u32 {
    u32::try_from(wanted.max(1)).unwrap_or(u32::MAX).min(limit)
}

fn endpoint_of(links: &Links, psn: u32) -> Endpoint {
    let device = &links.device;
    Endpoint {
        port: device.summary.port,
        link_layer: device.link_layer,
        mtu_code: device.active_mtu_code,
        lid: device.summary.lid,
        psn,
        gid: device.summary.gid,
        window_address: links.window.address(),
        window_rkey: links.window.rkey(),
        sink_address: links.sink.address(),
        sink_rkey: links.sink.rkey(),
        qp_nums: links.queue_pairs.iter().map(|queue_pair| queue_pair.as_ref().map_or(0, RcQueuePair::qp_num)).collect(),
    }
}

/// The verdict on the first exchange, the same on every rank: every
/// rank's endpoint, or the first reason not to go on (this rank's own
/// failure is reported by the caller instead).
fn judge_records(gathered: &[u8], size: usize, mine: &Record) -> Result<Vec<Endpoint>, VerbsSetupError> {
    let mut endpoints = Vec::with_capacity(size);
    let mut first_failure = None;
    for (rank, bytes) in gathered.chunks_exact(record_len(size)).enumerate() {
        let record = Record::decode(bytes, size).ok_or_else(|| VerbsSetupError::Inconsistent {
            rank,
            detail: "sent a setup record this build does not understand (mixed builds of coll rdma?)".into(),
        })?;
        if record.size != mine.size || record.window_len != mine.window_len {
            return Err(VerbsSetupError::Inconsistent {
                rank,
                detail: format!(
                    "asked for {} ranks with {}-byte windows, this rank for {} with {}-byte windows",
                    record.size, record.window_len, mine.size, mine.window_len
                ),
            });
        }
        match record.endpoint {
            Ok(endpoint) => endpoints.push(endpoint),
            Err(reason) => {
                first_failure.get_or_insert(VerbsSetupError::PeerFailed { rank, reason });
            }
        }
    }
    match first_failure {
        Some(failure) => Err(failure),
        None => Ok(endpoints),
    }
}

/// Brings every queue pair to RTS towards its peer.
fn connect_all(links: &mut Links, endpoints: &[Endpoint], rank: usize, psn: u32) -> Result<(), VerbsSetupError> {
    let device = &links.device;
    let local = LocalPort {
        port: device.summary.port,
        gid_index: u8::try_from(device.summary.gid_index).unwrap_or(0),
        global_routing: device.is_ethernet() || device.summary.lid == 0,
        mtu_code: device.active_mtu_code,
    };
    for (peer, endpoint) in endpoints.iter().enumerate() {
        links.remotes[peer] = RemoteWindow {
            window_address: endpoint.window_address,
            window_rkey: endpoint.window_rkey,
            sink_address: endpoint.sink_address,
            sink_rkey: endpoint.sink_rkey,
            write_max_bytes: write_max_bytes(device.single_packet_writes, device.active_mtu_code, endpoint.mtu_code),
        };
        let Some(queue_pair) = links.queue_pair(peer) else { continue };
        let remote = RemoteQp {
            qp_num: endpoint.qp_nums.get(rank).copied().unwrap_or(0),
            psn: endpoint.psn,
            gid: endpoint.gid,
            lid: endpoint.lid,
            mtu_code: endpoint.mtu_code,
        };
        queue_pair.connect(&local, &remote, psn).map_err(|error| match error {
            VerbsSetupError::Verbs { call, errno, detail } => {
                VerbsSetupError::Verbs { call, errno, detail: format!("{detail} (connecting to rank {peer})") }
            }
            other => other,
        })?;
    }
    Ok(())
}

/// `RemoteWindow::write_max_bytes` towards a peer whose port's MTU is
/// `remote_mtu_code` (verbs' enum), from this rank's `local_mtu_code`: the
/// queue pair's path MTU (the smaller of the two, as
/// `RcQueuePair::connect` sets it) where writes are kept to a packet.
fn write_max_bytes(single_packet_writes: bool, local_mtu_code: u8, remote_mtu_code: u8) -> usize {
    if !single_packet_writes {
        return usize::MAX;
    }
    // A code no enum value names gives 0 bytes; 256 is the smallest path
    // MTU there is.
    mtu_bytes(u32::from(local_mtu_code.min(remote_mtu_code))).max(256)
}

fn join_multicast(links: &Links, config: &VerbsConfig, rank: usize, size: usize) -> Result<UdMulticast, VerbsError> {
    let summary = &links.device.summary;
    let local_address = config
        .local_address
        .or(summary.ipv4)
        .ok_or_else(|| VerbsError::NoIpv4Address { gid_index: summary.gid_index, device: summary.device.clone() })?;
    if max_body(config.protection, summary.active_mtu) == 0 {
        return Err(VerbsError::MtuTooSmall(summary.active_mtu));
    }
    UdMulticast::join(&JoinRequest {
        local_address,
        group: config.multicast_group(),
        communicator: config.multicast_id,
        rank: u32::try_from(rank).unwrap_or(u32::MAX),
        size,
        mtu: summary.active_mtu,
        protection: config.protection,
        receive_slots: config.multicast_receive_slots,
        timeout: config.join_timeout,
        device: summary.device.clone(),
    })
}

/// Rank 0's key for the multicast datagrams, drawn from the OS RNG where
/// it joined and seals; zeros elsewhere. A rank 0 that cannot draw one
/// joins nothing, so that every rank goes without multicast alike.
fn draw_datagram_key(
    multicast: Result<UdMulticast, VerbsError>,
    rank: usize,
    protection: Protection,
) -> (Result<UdMulticast, VerbsError>, [u8; KEY_BYTES]) {
    match multicast {
        Ok(multicast) if rank == 0 && protection != Protection::None => match draw_key() {
            Ok(key) => (Ok(multicast), key),
            Err(why) => (Err(VerbsError::NoKey(why)), [0; KEY_BYTES]),
        },
        other => (other, [0; KEY_BYTES]),
    }
}

/// The multicast id of this communicator: the caller's id (from the job
/// and the context id) mixed with where rank 0's window is registered. A
/// context id alone does not single a communicator out: the disjoint
/// halves of a split communicator may get the same one, and would then
/// read each other's datagrams. Two live communicators with the same
/// context id share no process, and no two live registrations on one
/// adapter share an rkey, so rank 0's GID and window rkey tell them apart.
fn communicator_multicast_id(base: u32, leader: &Endpoint) -> u32 {
    multicast_id_of([&base.to_le_bytes()[..], &leader.gid, &leader.window_rkey.to_le_bytes()])
}

/// The verdict on the second exchange: an error if any rank failed to
/// connect or means to seal multicast datagrams otherwise than rank 0,
/// else the ranks that could not join the multicast group, and every
/// rank's record.
fn judge_readies(readies: &[u8]) -> Result<(Vec<usize>, Vec<Ready>), VerbsSetupError> {
    let mut missing = Vec::new();
    let mut all = Vec::new();
    for (rank, bytes) in readies.chunks_exact(READY_LEN).enumerate() {
        let ready = Ready::decode(bytes).ok_or_else(|| VerbsSetupError::Inconsistent {
            rank,
            detail: "sent a confirmation record this build does not understand".into(),
        })?;
        if let Err(reason) = ready.connected {
            return Err(VerbsSetupError::PeerFailed { rank, reason });
        }
        if let Some(leader) = all.first().filter(|leader: &&Ready| leader.protection != ready.protection) {
            return Err(VerbsSetupError::Inconsistent {
                rank,
                detail: format!(
                    "seals multicast datagrams as \"{}\", rank 0 as \"{}\" (coll_rdma_verbs_protection must be the same on every rank)",
                    ready.protection.name(),
                    leader.protection.name()
                ),
            });
        }
        if !ready.multicast_joined {
            missing.push(rank);
        }
        all.push(ready);
    }
    Ok((missing, all))
}

/// A 24-bit first packet sequence number that differs between runs, so a
/// stale packet from an earlier incarnation of a queue pair is unlikely to
/// be accepted.
fn first_psn(rank: usize) -> u32 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_nanos() as u64);
    let seed = nanos ^ (u64::from(std::process::id()) << 32) ^ rank as u64;
    (crate::rng::Rng::new(seed).next_u64() & 0x00FF_FFFF) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leader(gid_last: u8, window_rkey: u32) -> Endpoint {
        let mut gid = [0u8; 16];
        gid[15] = gid_last;
        Endpoint {
            port: 1,
            link_layer: 2,
            mtu_code: 3,
            lid: 0,
            psn: 7,
            gid,
            window_address: 0x1000,
            window_rkey,
            sink_address: 0x2000,
            sink_rkey: 9,
            qp_nums: vec![0, 17],
        }
    }

    #[test]
    fn communicators_with_one_context_id_get_different_multicast_ids() {
        let base = 0x1234_5678;
        let first = communicator_multicast_id(base, &leader(1, 0x100));
        assert_eq!(first, communicator_multicast_id(base, &leader(1, 0x100)), "every rank must compute the same id");
        assert_ne!(first, communicator_multicast_id(base, &leader(1, 0x200)), "another window on the same adapter");
        assert_ne!(first, communicator_multicast_id(base, &leader(2, 0x100)), "the same rkey on another adapter");
        assert_ne!(first, communicator_multicast_id(base + 1, &leader(1, 0x100)), "another job or context id");
    }

    fn ready(protection: Protection) -> Vec<u8> {
        let key = [7; KEY_BYTES];
        Ready { connected: Ok(()), multicast_joined: true, multicast_nonce: 1, ud_qp_num: 2, ud_ipv4: [10, 0, 0, 1], protection, key }.encode().to_vec()
    }

    #[test]
    fn ranks_that_would_seal_datagrams_differently_are_refused_naming_both() {
        let alike = [ready(Protection::Authenticate), ready(Protection::Authenticate)].concat();
        let (missing, readies) = judge_readies(&alike).expect("the same protection on every rank");
        assert!(missing.is_empty());
        assert_eq!(readies[0].key, [7; KEY_BYTES], "rank 0's key reaches every rank");
        let unlike = [ready(Protection::Encrypt), ready(Protection::Encrypt), ready(Protection::None)].concat();
        match judge_readies(&unlike) {
            Err(VerbsSetupError::Inconsistent { rank: 2, detail }) => {
                assert!(detail.contains("\"none\", rank 0 as \"encrypt\"") && detail.contains("coll_rdma_verbs_protection"), "{detail}");
            }
            other => panic!("expected rank 2 named as inconsistent, got {other:?}"),
        }
    }

    #[test]
    fn soft_roce_writes_carry_one_path_mtu_and_other_devices_any_length() {
        // verbs' MTU codes: 1 = 256, 3 = 1024, 5 = 4096 bytes.
        assert_eq!(write_max_bytes(true, 5, 3), 1024, "the smaller end's MTU is the path's");
        assert_eq!(write_max_bytes(true, 3, 5), 1024);
        assert_eq!(write_max_bytes(true, 5, 5), 4096);
        assert_eq!(write_max_bytes(true, 0, 5), 256, "an unnamed code falls to the smallest MTU, never 0");
        assert_eq!(write_max_bytes(false, 3, 3), usize::MAX);
    }
}

#[cfg(test)]
mod placement_tests {
    use super::Placement;
    use crate::shm::NodeGroups;

    fn pairs(placement: &Placement, size: usize) -> Vec<(usize, usize)> {
        (0..size).flat_map(|rank| (0..size).map(move |peer| (rank, peer))).filter(|&(rank, peer)| placement.connects(rank, peer)).collect()
    }

    #[test]
    fn queue_pairs_join_every_pair_across_nodes_or_only_the_leaders() {
        let groups = NodeGroups::from_keys(&[0, 0, 0, 1, 1, 2]);
        let every = Placement { nodes: Some(&groups), ..Placement::default() };
        let leaders = Placement { nodes: Some(&groups), leaders_only: true, ..Placement::default() };
        // 3 ranks x 3 others + 2 x 4 + 1 x 5 ordered pairs cross nodes.
        assert_eq!(pairs(&every, 6).len(), 9 + 8 + 5);
        assert_eq!(pairs(&leaders, 6), [(0, 3), (0, 5), (3, 0), (3, 5), (5, 0), (5, 3)]);
        // Without node groups every other rank is a peer.
        assert_eq!(pairs(&Placement::default(), 3), [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]);
        for (rank, peer) in pairs(&every, 6) {
            assert!(every.connects(peer, rank), "{rank} -> {peer} is one-sided");
        }
    }
}
