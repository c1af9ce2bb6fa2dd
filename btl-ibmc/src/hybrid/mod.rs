//! A communicator that spans nodes: peers on this rank's node are reached
//! through the node's shared-memory segment, the others over verbs. Both
//! paths write into the same memory: this rank's window in the segment is
//! also the window it registers with the adapter, so a flag is polled in
//! one place whoever wrote it, and each pair of ranks always uses one path,
//! which keeps every pair's writes and messages in order.
//!
//! The multicast primitive is the verbs one (UD multicast reaches the
//! node's own ranks too); without it, bcast goes down its tree of puts.

mod establish;
mod node_key;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use establish::{CrossNodePairs, HybridSetupError, establish};

use crate::footprint::MemoryFootprint;
use crate::shm::{NodeGroups, ShmTransport};
use crate::transport::{Endpoint, PeerReads, ReliableChannel, TransportError, Windows, forward};
use crate::verbs::VerbsTransport;

pub struct HybridTransport {
    verbs: VerbsTransport,
    /// Shared with the verbs registration of this rank's window, which
    /// lies in the segment: the segment is unmapped only after both let go.
    shm: Arc<ShmTransport>,
    rank: usize,
    /// Indexed by rank: the peer's index in this node's segment, if it is
    /// on this node.
    node_index: Box<[Option<usize>]>,
    /// Indexed by position in this node's segment: the peer's rank.
    node_members: Box<[usize]>,
    /// Every rank's node, the same on every rank: what two-level
    /// collectives build their schedules from.
    groups: NodeGroups,
    /// Queue pairs across nodes only between the nodes' leaders: only
    /// two-level schedules may cross nodes.
    leaders_only: bool,
    /// Which channel `poll_reliable` looks at first, alternated so that a
    /// busy one cannot starve the other.
    shm_first: AtomicBool,
}

impl HybridTransport {
    /// Ranks on this rank's node (itself included).
    pub fn node_ranks(&self) -> usize {
        self.node_members.len()
    }

    /// Which ranks share a node, as every rank of the communicator sees it.
    pub fn node_groups(&self) -> &NodeGroups {
        &self.groups
    }

    /// Whether only the nodes' leaders reach each other across nodes
    /// (`CrossNodePairs`): a rank that is not its node's leader reaches
    /// its own node alone.
    pub fn connects_only_leaders(&self) -> bool {
        self.leaders_only
    }

    /// The node's segment and the verbs side's queue pairs and
    /// registrations (the window's lies in the segment).
    pub fn memory_footprint(&self) -> MemoryFootprint {
        let shm = self.shm.memory_footprint();
        MemoryFootprint { verbs_window_in_segment: true, ..self.verbs.memory_footprint() }.with_segment_of(&shm)
    }

    /// The verbs side, for its device and multicast details.
    pub fn verbs(&self) -> &VerbsTransport {
        &self.verbs
    }

    /// As [`VerbsTransport::quiesce`]: node-local writes are complete when
    /// a put returns already.
    pub fn quiesce(&self) -> Result<(), TransportError> {
        self.verbs.quiesce()
    }

    #[inline]
    fn route(&self, peer: usize, offset: usize, len: usize) -> Result<Option<usize>, TransportError> {
        self.node_index.get(peer).copied().ok_or(TransportError::OutOfRange { peer, offset, len })
    }
}

impl Endpoint for HybridTransport {
    fn name(&self) -> &'static str {
        "shm+verbs"
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.node_index.len()
    }

    #[inline]
    fn progress(&self) {
        self.verbs.progress();
    }

    fn health(&self) -> Result<(), TransportError> {
        self.verbs.health()?;
        self.shm.health()
    }
}

impl Windows for HybridTransport {
    fn window_len(&self) -> usize {
        self.shm.window_len()
    }

    #[inline]
    fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError> {
        match self.route(peer, offset, data.len())? {
            Some(index) => self.shm.put(index, offset, data, flag_offset, flag),
            None => self.verbs.put(peer, offset, data, flag_offset, flag),
        }
    }

    #[inline]
    fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), TransportError> {
        match self.route(peer, flag_offset, 8)? {
            Some(index) => self.shm.put_flag(index, flag_offset, value),
            None => self.verbs.put_flag(peer, flag_offset, value),
        }
    }

    #[inline]
    fn local_flag(&self, flag_offset: usize) -> u64 {
        self.shm.local_flag(flag_offset)
    }

    #[inline]
    fn set_local_flag(&self, flag_offset: usize, value: u64) {
        self.shm.set_local_flag(flag_offset, value);
    }

    #[inline]
    fn read_local(&self, offset: usize, out: &mut [u8]) {
        self.shm.read_local(offset, out);
    }

    /// Node-local peers only: a put over verbs is the NIC's write.
    #[inline]
    fn prepare_put(&self, peer: usize, offset: usize) {
        if let Ok(Some(index)) = self.route(peer, offset, 0) {
            self.shm.prepare_put(index, offset);
        }
    }
}

forward!(Datagrams for HybridTransport => verbs);

impl ReliableChannel for HybridTransport {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        // One limit whichever channel reaches the peer, so that what a
        // caller may send does not depend on where the peer runs.
        let max = crate::verbs::RELIABLE_MAX.min(crate::shm::RELIABLE_MAX);
        if message.len() > max {
            return Err(TransportError::TooLarge { len: message.len(), max });
        }
        match self.route(peer, 0, message.len())? {
            // A blocked send empties this rank's inbound side of the other
            // channel too: a peer blocked sending to us there may be what
            // the one we wait for waits for.
            Some(index) => self.shm.send_reliable_while(index, message, &|| self.verbs.progress()),
            None => self.verbs.send_reliable_while(peer, message, &|| self.shm.park_arrivals()),
        }
    }

    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        let poll_shm = |out: &mut Vec<u8>| self.shm.poll_reliable(out).map(|index| self.node_members[index]);
        let poll_verbs = |out: &mut Vec<u8>| self.verbs.poll_reliable(out);
        if self.shm_first.fetch_xor(true, Ordering::Relaxed) {
            poll_shm(out).or_else(|| poll_verbs(out))
        } else {
            poll_verbs(out).or_else(|| poll_shm(out))
        }
    }

    /// Node-local peers are reached through shared memory, where nothing
    /// is resent; the send itself reports a peer out of range.
    fn has_room_for(&self, peer: usize, len: usize) -> bool {
        match self.route(peer, 0, len) {
            Ok(None) => self.verbs.has_room_for(peer, len),
            _ => true,
        }
    }
}

/// Windows on this node are read through the segment (a node's stage of
/// a two-level bcast reads its root's window); those on other nodes are
/// not mapped. Cross-memory attach is left off: it is agreed for every
/// peer or none.
impl PeerReads for HybridTransport {
    #[inline]
    fn read_peer(&self, peer: usize, offset: usize, out: &mut [u8]) -> Result<(), TransportError> {
        match self.route(peer, offset, out.len())? {
            Some(index) => self.shm.read_peer(index, offset, out),
            None => Err(TransportError::Unsupported("reading the window of a peer on another node")),
        }
    }

    #[inline]
    fn peer_flag(&self, peer: usize, flag_offset: usize) -> Result<u64, TransportError> {
        match self.route(peer, flag_offset, 8)? {
            Some(index) => self.shm.peer_flag(index, flag_offset),
            None => Err(TransportError::Unsupported("reading a flag of a peer on another node")),
        }
    }
}

impl std::fmt::Debug for HybridTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HybridTransport")
            .field("rank", &self.rank)
            .field("node_members", &self.node_members)
            .field("shm", &self.shm)
            .field("verbs", &self.verbs)
            .finish()
    }
}
