//! The hybrid transport's shape without an adapter: windows, puts and
//! lossy datagrams come from the test fabric, while the reliable channel
//! between ranks of one node group is a real shared-memory ring (bounded,
//! so a sender can find it full) and between groups the fabric's
//! unbounded FIFO stands in for RC. Each pair of ranks always uses one
//! channel, as in `HybridTransport`, which keeps every pair in order.

use crate::shm::{NodeGroups, ShmSetupError, ShmTransport, establish_in_groups};
use crate::transport::{Endpoint, ReliableChannel, TransportError, forward};

use super::FabricEndpoint;

/// Window bytes of the node segment: its windows are never used (the
/// fabric's carry the puts), only its rings.
const UNUSED_SEGMENT_WINDOW: usize = 64;

pub struct FabricWithNodeRings {
    fabric: FabricEndpoint,
    rings: ShmTransport,
    /// Indexed by rank: the peer's position in this rank's node group, if
    /// it is in it.
    node_index: Box<[Option<usize>]>,
    /// Indexed by position in this rank's node group: the peer's rank.
    node_members: Box<[usize]>,
}

impl FabricWithNodeRings {
    /// Collective over every rank of `groups`: sets up one shared-memory
    /// segment per node group over the fabric's exchange.
    pub fn establish(fabric: FabricEndpoint, groups: &NodeGroups) -> Result<Self, ShmSetupError> {
        let rank = fabric.rank();
        let rings = establish_in_groups(&fabric, rank, groups, UNUSED_SEGMENT_WINDOW)?;
        let node_members: Box<[usize]> = groups.members(rank).collect();
        let mut node_index = vec![None; fabric.size()].into_boxed_slice();
        for (index, &member) in node_members.iter().enumerate() {
            node_index[member] = Some(index);
        }
        Ok(FabricWithNodeRings { fabric, rings, node_index, node_members })
    }

    pub fn fabric(&self) -> &FabricEndpoint {
        &self.fabric
    }

    fn node_position(&self, peer: usize, len: usize) -> Result<Option<usize>, TransportError> {
        self.node_index.get(peer).copied().ok_or(TransportError::OutOfRange { peer, offset: 0, len })
    }
}

impl Endpoint for FabricWithNodeRings {
    fn name(&self) -> &'static str {
        "fabric+shm rings"
    }

    fn rank(&self) -> usize {
        self.fabric.rank()
    }

    fn size(&self) -> usize {
        self.fabric.size()
    }

    fn progress(&self) {
        self.fabric.progress();
    }

    fn health(&self) -> Result<(), TransportError> {
        self.fabric.health()?;
        self.rings.health()
    }
}

forward!(Windows for FabricWithNodeRings => fabric);

forward!(Datagrams for FabricWithNodeRings => fabric);

impl ReliableChannel for FabricWithNodeRings {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        match self.node_position(peer, message.len())? {
            Some(index) => self.rings.send_reliable(index, message),
            None => self.fabric.send_reliable(peer, message),
        }
    }

    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        self.rings.poll_reliable(out).map(|index| self.node_members[index]).or_else(|| self.fabric.poll_reliable(out))
    }
}

forward!(PeerReads for FabricWithNodeRings => fabric);

impl std::fmt::Debug for FabricWithNodeRings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FabricWithNodeRings").field("rank", &self.rank()).field("node_members", &self.node_members).finish()
    }
}
