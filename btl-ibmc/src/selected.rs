//! The transport a communicator ended up with. Collectives are generic over
//! the transport traits; an enum rather than a trait object keeps the shared-memory
//! hot path free of indirect calls (each method is one predictable branch).

use std::time::Duration;

use crate::footprint::MemoryFootprint;
use crate::seal::Protection;
use crate::shm::{NodeGroups, ShmTransport};
use crate::udp::UdpTransport;
use crate::transport::{Datagrams, Endpoint, MulticastKind, PeerReads, ReliableChannel, Sleep, TransportError, Windows};
#[cfg(feature = "verbs")]
use crate::hybrid::HybridTransport;
#[cfg(feature = "verbs")]
use crate::verbs::VerbsTransport;

pub enum SelectedTransport {
    Shm(ShmTransport),
    #[cfg(feature = "verbs")]
    Verbs(VerbsTransport),
    /// Shared memory within each node, verbs between nodes.
    #[cfg(feature = "verbs")]
    Hybrid(HybridTransport),
    /// UDP/IPv4 multicast and unicast, for Ethernet without RDMA.
    Udp(UdpTransport),
}

impl SelectedTransport {
    /// Makes every write this rank posted land before the communicator's
    /// closing barrier, where the backend can have writes in flight after a
    /// put returns (verbs). The caller then runs a barrier over this
    /// transport, after which no peer writes into this rank's window.
    pub fn quiesce_before_teardown(&self) -> Result<(), TransportError> {
        match self {
            SelectedTransport::Shm(_) => Ok(()),
            #[cfg(feature = "verbs")]
            SelectedTransport::Verbs(verbs) => verbs.quiesce(),
            #[cfg(feature = "verbs")]
            SelectedTransport::Hybrid(hybrid) => hybrid.quiesce(),
            // Puts travel on the reliable channel: landed once acknowledged.
            SelectedTransport::Udp(udp) => udp.flush(),
        }
    }

    /// What this rank mapped, registered and holds for the communicator.
    pub fn memory_footprint(&self) -> MemoryFootprint {
        match self {
            SelectedTransport::Shm(shm) => shm.memory_footprint(),
            #[cfg(feature = "verbs")]
            SelectedTransport::Verbs(verbs) => verbs.memory_footprint(),
            #[cfg(feature = "verbs")]
            SelectedTransport::Hybrid(hybrid) => hybrid.memory_footprint(),
            SelectedTransport::Udp(udp) => udp.memory_footprint(),
        }
    }

    /// Which ranks share a node, where the transport spans several nodes
    /// and treats node-local peers differently (the hybrid); None where
    /// every peer is reached alike.
    pub fn node_groups(&self) -> Option<&NodeGroups> {
        match self {
            #[cfg(feature = "verbs")]
            SelectedTransport::Hybrid(hybrid) => Some(hybrid.node_groups()),
            _ => None,
        }
    }

    /// Whether only the nodes' leaders reach each other across nodes (the
    /// hybrid with `CrossNodePairs::LeadersAbove` in force): then only
    /// two-level schedules may run.
    pub fn connects_only_leaders(&self) -> bool {
        match self {
            #[cfg(feature = "verbs")]
            SelectedTransport::Hybrid(hybrid) => hybrid.connects_only_leaders(),
            _ => false,
        }
    }

    /// Whether the verbs side cuts every RDMA write to one path MTU
    /// (Soft-RoCE); None where no verbs device carries the transport.
    pub fn verbs_single_packet_writes(&self) -> Option<bool> {
        match self {
            #[cfg(feature = "verbs")]
            SelectedTransport::Verbs(verbs) => Some(verbs.single_packet_writes()),
            #[cfg(feature = "verbs")]
            SelectedTransport::Hybrid(hybrid) => Some(hybrid.verbs().single_packet_writes()),
            _ => None,
        }
    }

    /// How the datagrams that cross a fabric others can reach are sealed:
    /// every udp frame, or verbs' UD multicast (its RDMA writes are not
    /// sealed); None where no such datagrams go (shared memory, verbs
    /// without multicast).
    pub fn datagram_protection(&self) -> Option<Protection> {
        match self {
            SelectedTransport::Shm(_) => None,
            #[cfg(feature = "verbs")]
            SelectedTransport::Verbs(verbs) => verbs.multicast_protection(),
            #[cfg(feature = "verbs")]
            SelectedTransport::Hybrid(hybrid) => hybrid.verbs().multicast_protection(),
            SelectedTransport::Udp(udp) => Some(udp.protection()),
        }
    }

    /// The AEAD that seals those datagrams, where they are sealed: udp's
    /// agreed cipher, AES-256-GCM for verbs' UD multicast (its setup
    /// names no other).
    pub fn datagram_cipher(&self) -> Option<crate::seal::Cipher> {
        self.datagram_protection().filter(|&protection| protection != Protection::None)?;
        match self {
            SelectedTransport::Udp(udp) => Some(udp.cipher()),
            _ => Some(crate::seal::Cipher::Aes256Gcm),
        }
    }

    /// How peers are reached, for verbose output; None on plain shared memory.
    pub fn route_summary(&self) -> Option<String> {
        match self {
            SelectedTransport::Shm(_) => None,
            #[cfg(feature = "verbs")]
            SelectedTransport::Verbs(verbs) => Some(format!("every peer over verbs on {}", verbs.device())),
            #[cfg(feature = "verbs")]
            SelectedTransport::Hybrid(hybrid) => Some(format!(
                "{} rank(s) of this node through shared memory, the other {} over verbs on {}",
                hybrid.node_ranks(),
                hybrid.size() - hybrid.node_ranks(),
                hybrid.verbs().device()
            )),
            SelectedTransport::Udp(udp) => Some(format!("every peer over udp from {}, multicast group {}", udp.local_address(), udp.group())),
        }
    }

    /// Whether peers can still be writing into this rank's window through
    /// the adapter after a collective returns, so that tearing down needs a
    /// closing barrier first. Shared memory is simply unmapped.
    pub fn needs_closing_barrier(&self) -> bool {
        !matches!(self, SelectedTransport::Shm(_))
    }
}

macro_rules! dispatch {
    ($self:ident, $backend:ident => $call:expr) => {
        match $self {
            SelectedTransport::Shm($backend) => $call,
            #[cfg(feature = "verbs")]
            SelectedTransport::Verbs($backend) => $call,
            #[cfg(feature = "verbs")]
            SelectedTransport::Hybrid($backend) => $call,
            SelectedTransport::Udp($backend) => $call,
        }
    };
}

impl Endpoint for SelectedTransport {
    fn name(&self) -> &'static str {
        dispatch!(self, t => t.name())
    }

    fn rank(&self) -> usize {
        dispatch!(self, t => t.rank())
    }

    fn size(&self) -> usize {
        dispatch!(self, t => t.size())
    }

    #[inline]
    fn progress(&self) {
        dispatch!(self, t => t.progress())
    }

    fn health(&self) -> Result<(), TransportError> {
        dispatch!(self, t => t.health())
    }

    fn sleeps_in_kernel(&self) -> bool {
        dispatch!(self, t => t.sleeps_in_kernel())
    }

    fn sleep_until_arrival(&self, longest: Duration) -> Sleep {
        dispatch!(self, t => t.sleep_until_arrival(longest))
    }
}

impl Windows for SelectedTransport {
    fn window_len(&self) -> usize {
        dispatch!(self, t => t.window_len())
    }

    #[inline]
    fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError> {
        dispatch!(self, t => t.put(peer, offset, data, flag_offset, flag))
    }

    #[inline]
    fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), TransportError> {
        dispatch!(self, t => t.put_flag(peer, flag_offset, value))
    }

    #[inline]
    fn local_flag(&self, flag_offset: usize) -> u64 {
        dispatch!(self, t => t.local_flag(flag_offset))
    }

    #[inline]
    fn set_local_flag(&self, flag_offset: usize, value: u64) {
        dispatch!(self, t => t.set_local_flag(flag_offset, value))
    }

    #[inline]
    fn read_local(&self, offset: usize, out: &mut [u8]) {
        dispatch!(self, t => t.read_local(offset, out))
    }

    #[inline]
    fn prepare_put(&self, peer: usize, offset: usize) {
        dispatch!(self, t => t.prepare_put(peer, offset))
    }
}

impl Datagrams for SelectedTransport {
    fn multicast_kind(&self) -> MulticastKind {
        dispatch!(self, t => t.multicast_kind())
    }

    fn max_datagram(&self) -> usize {
        dispatch!(self, t => t.max_datagram())
    }

    fn multicast(&self, datagram: &[u8]) -> Result<(), TransportError> {
        dispatch!(self, t => t.multicast(datagram))
    }

    fn multicast_batch(&self, datagrams: &[&[u8]]) -> Result<(), TransportError> {
        dispatch!(self, t => t.multicast_batch(datagrams))
    }

    fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize> {
        dispatch!(self, t => t.poll_multicast(out))
    }

    fn multicast_nonce(&self) -> u64 {
        dispatch!(self, t => t.multicast_nonce())
    }
}

impl ReliableChannel for SelectedTransport {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        dispatch!(self, t => t.send_reliable(peer, message))
    }

    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        dispatch!(self, t => t.poll_reliable(out))
    }

    fn has_room_for(&self, peer: usize, len: usize) -> bool {
        dispatch!(self, t => t.has_room_for(peer, len))
    }
}

impl PeerReads for SelectedTransport {
    #[inline]
    fn read_peer(&self, peer: usize, offset: usize, out: &mut [u8]) -> Result<(), TransportError> {
        dispatch!(self, t => t.read_peer(peer, offset, out))
    }

    #[inline]
    fn peer_flag(&self, peer: usize, flag_offset: usize) -> Result<u64, TransportError> {
        dispatch!(self, t => t.peer_flag(peer, flag_offset))
    }

    #[inline]
    fn reads_peer_memory(&self) -> bool {
        dispatch!(self, t => t.reads_peer_memory())
    }

    #[inline]
    fn read_peer_memory(&self, peer: usize, address: u64, out: &mut [u8]) -> Result<(), TransportError> {
        dispatch!(self, t => t.read_peer_memory(peer, address, out))
    }

    #[inline]
    fn write_peer_memory(&self, peer: usize, address: u64, data: &[u8]) -> Result<(), TransportError> {
        dispatch!(self, t => t.write_peer_memory(peer, address, data))
    }
}
