//! Some of a communicator's ranks presented as a communicator of their own,
//! so that a collective written for a whole communicator (reliable
//! multicast, the put tree, single copy) runs unchanged among a node's
//! ranks or among the nodes' leaders. Ranks map both ways: the view's rank
//! `i` is the communicator's `ranks[i]`. Window offsets are not mapped: a
//! stage built on a view keeps its own region of every member's window.
//!
//! Two subsets of one communicator share its datagram queue and its
//! reliable channel, so at most one of them may use those: the leaders'
//! view ([`Reach::Network`]) inherits the communicator's multicast and
//! channel; a node's view ([`Reach::Node`]) offers neither and multicasts
//! through shared windows where its members can read each other's, or
//! down the put tree where they cannot.

use crate::transport::{Datagrams, Endpoint, MulticastKind, PeerReads, ReliableChannel, Transport, TransportError, Windows};

/// Which of the communicator's means a subset uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Members on one node: shared windows (or puts), no datagrams, no
    /// reliable channel.
    Node,
    /// Members anywhere: the communicator's multicast and reliable channel,
    /// of which only datagrams and messages from members are taken.
    Network,
}

/// The members of a subset and this rank's place among them.
#[derive(Clone, Debug)]
pub struct Subset {
    ranks: Box<[usize]>,
    /// Indexed by the communicator's rank: its rank in the subset.
    position_of: Box<[Option<usize>]>,
    position: usize,
    reach: Reach,
}

impl Subset {
    /// `ranks` (ascending, distinct, below `size`) of a communicator of
    /// `size`, seen from `rank`, which must be one of them.
    pub fn new(rank: usize, size: usize, ranks: Vec<usize>, reach: Reach) -> Self {
        assert!(ranks.windows(2).all(|pair| pair[0] < pair[1]), "subset ranks must ascend: {ranks:?}");
        let mut position_of = vec![None; size].into_boxed_slice();
        for (position, &member) in ranks.iter().enumerate() {
            assert!(member < size, "rank {member} outside a communicator of {size}");
            position_of[member] = Some(position);
        }
        let position = position_of[rank].unwrap_or_else(|| panic!("rank {rank} is not among {ranks:?}"));
        Subset { ranks: ranks.into_boxed_slice(), position_of, position, reach }
    }

    /// This rank's rank in the subset.
    pub fn position(&self) -> usize {
        self.position
    }

    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// The communicator's rank of the subset's rank `position`.
    pub fn rank_of(&self, position: usize) -> usize {
        self.ranks[position]
    }

    /// The subset's rank of the communicator's `rank`, if it is a member.
    pub fn position_of(&self, rank: usize) -> Option<usize> {
        self.position_of.get(rank).copied().flatten()
    }

    /// The subset over `transport`, the communicator's.
    pub fn view<'a, T: Transport + ?Sized>(&'a self, transport: &'a T) -> SubsetView<'a, T> {
        debug_assert_eq!(transport.rank(), self.ranks[self.position]);
        SubsetView { inner: transport, subset: self }
    }

    #[inline]
    fn member(&self, position: usize, offset: usize, len: usize) -> Result<usize, TransportError> {
        self.ranks.get(position).copied().ok_or(TransportError::OutOfRange { peer: position, offset, len })
    }
}

/// A [`Subset`] over the communicator's transport: a transport of
/// `subset.len()` ranks.
pub struct SubsetView<'a, T: ?Sized> {
    inner: &'a T,
    subset: &'a Subset,
}

impl<T: Transport + ?Sized> SubsetView<'_, T> {
    /// Whether the members read each other's windows (probed on this
    /// rank's own, which answers as any member's would: the backends
    /// serve peer reads for every peer on the node or for none).
    fn reads_peer_windows(&self) -> bool {
        self.inner.peer_flag(self.inner.rank(), 0).is_ok()
    }
}

impl<T: Transport + ?Sized> Endpoint for SubsetView<'_, T> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn rank(&self) -> usize {
        self.subset.position
    }

    fn size(&self) -> usize {
        self.subset.len()
    }

    #[inline]
    fn progress(&self) {
        self.inner.progress();
    }

    fn health(&self) -> Result<(), TransportError> {
        self.inner.health()
    }
}

impl<T: Transport + ?Sized> Windows for SubsetView<'_, T> {
    fn window_len(&self) -> usize {
        self.inner.window_len()
    }

    #[inline]
    fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError> {
        self.inner.put(self.subset.member(peer, offset, data.len())?, offset, data, flag_offset, flag)
    }

    #[inline]
    fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), TransportError> {
        self.inner.put_flag(self.subset.member(peer, flag_offset, 8)?, flag_offset, value)
    }

    #[inline]
    fn local_flag(&self, flag_offset: usize) -> u64 {
        self.inner.local_flag(flag_offset)
    }

    #[inline]
    fn set_local_flag(&self, flag_offset: usize, value: u64) {
        self.inner.set_local_flag(flag_offset, value);
    }

    #[inline]
    fn read_local(&self, offset: usize, out: &mut [u8]) {
        self.inner.read_local(offset, out);
    }
}

impl<T: Transport + ?Sized> Datagrams for SubsetView<'_, T> {
    fn multicast_kind(&self) -> MulticastKind {
        match self.subset.reach {
            Reach::Network => self.inner.multicast_kind(),
            Reach::Node if self.reads_peer_windows() => MulticastKind::SharedWindow,
            Reach::Node => MulticastKind::None,
        }
    }

    fn max_datagram(&self) -> usize {
        match self.subset.reach {
            Reach::Network => self.inner.max_datagram(),
            Reach::Node => 0,
        }
    }

    fn multicast(&self, datagram: &[u8]) -> Result<(), TransportError> {
        match self.subset.reach {
            Reach::Network => self.inner.multicast(datagram),
            Reach::Node => Err(TransportError::Unsupported("datagram multicast within a node's subset")),
        }
    }

    fn multicast_batch(&self, datagrams: &[&[u8]]) -> Result<(), TransportError> {
        match self.subset.reach {
            Reach::Network => self.inner.multicast_batch(datagrams),
            Reach::Node => Err(TransportError::Unsupported("datagram multicast within a node's subset")),
        }
    }

    /// Datagrams from ranks outside the subset are dropped: the group
    /// reaches every rank of the communicator, but only members send to it
    /// while the subset is in use.
    fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize> {
        if self.subset.reach == Reach::Node {
            return None;
        }
        loop {
            let sender = self.inner.poll_multicast(out)?;
            if let Some(position) = self.subset.position_of(sender) {
                return Some(position);
            }
        }
    }

    fn multicast_nonce(&self) -> u64 {
        match self.subset.reach {
            Reach::Network => self.inner.multicast_nonce(),
            Reach::Node => 0,
        }
    }
}

impl<T: Transport + ?Sized> ReliableChannel for SubsetView<'_, T> {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        match self.subset.reach {
            Reach::Network => self.inner.send_reliable(self.subset.member(peer, 0, message.len())?, message),
            Reach::Node => Err(TransportError::Unsupported("the reliable channel within a node's subset")),
        }
    }

    /// Only the network subset takes messages (it is the channel's one
    /// user); one from a rank outside it would be another collective's
    /// and is a protocol error, so it is dropped loudly in debug builds.
    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        if self.subset.reach == Reach::Node {
            return None;
        }
        loop {
            let sender = self.inner.poll_reliable(out)?;
            match self.subset.position_of(sender) {
                Some(position) => return Some(position),
                None => debug_assert!(false, "reliable message from rank {sender}, outside the subset"),
            }
        }
    }

    fn has_room_for(&self, peer: usize, len: usize) -> bool {
        match self.subset.reach {
            Reach::Network => match self.subset.member(peer, 0, len) {
                Ok(rank) => self.inner.has_room_for(rank, len),
                // The send itself reports a peer outside the subset.
                Err(_) => true,
            },
            Reach::Node => true,
        }
    }
}

impl<T: Transport + ?Sized> PeerReads for SubsetView<'_, T> {
    #[inline]
    fn read_peer(&self, peer: usize, offset: usize, out: &mut [u8]) -> Result<(), TransportError> {
        self.inner.read_peer(self.subset.member(peer, offset, out.len())?, offset, out)
    }

    #[inline]
    fn peer_flag(&self, peer: usize, flag_offset: usize) -> Result<u64, TransportError> {
        self.inner.peer_flag(self.subset.member(peer, flag_offset, 8)?, flag_offset)
    }

    fn reads_peer_memory(&self) -> bool {
        self.inner.reads_peer_memory()
    }

    fn read_peer_memory(&self, peer: usize, address: u64, out: &mut [u8]) -> Result<(), TransportError> {
        self.inner.read_peer_memory(self.subset.member(peer, 0, out.len())?, address, out)
    }

    fn write_peer_memory(&self, peer: usize, address: u64, data: &[u8]) -> Result<(), TransportError> {
        self.inner.write_peer_memory(self.subset.member(peer, 0, data.len())?, address, data)
    }
}

#[cfg(all(test, feature = "fabric"))]
mod tests {
    use super::*;
    use crate::fabric::{Fabric, FabricConfig};

    #[test]
    fn ranks_map_both_ways_and_puts_land_on_the_members() {
        let endpoints = Fabric::new(5, 4096, FabricConfig::default());
        let leaders = Subset::new(3, 5, vec![0, 3, 4], Reach::Network);
        assert_eq!((leaders.position(), leaders.len(), leaders.rank_of(2), leaders.position_of(4), leaders.position_of(1)), (1, 3, 4, Some(2), None));
        let view = leaders.view(&endpoints[3]);
        assert_eq!((view.rank(), view.size()), (1, 3));
        view.put_flag(2, 64, 7).unwrap();
        assert_eq!(endpoints[4].local_flag(64), 7, "subset rank 2 is rank 4");
        assert!(view.put_flag(3, 64, 7).is_err(), "no subset rank 3");
    }

    #[test]
    fn the_network_view_takes_only_members_datagrams_and_the_node_view_none() {
        let endpoints = Fabric::new(4, 4096, FabricConfig { multicast_kind: MulticastKind::Datagram, ..FabricConfig::default() });
        endpoints[1].multicast(b"from a non-member").unwrap();
        endpoints[2].multicast(b"from a member").unwrap();
        let leaders = Subset::new(0, 4, vec![0, 2], Reach::Network);
        let mut out = Vec::new();
        assert_eq!(leaders.view(&endpoints[0]).poll_multicast(&mut out), Some(1));
        assert_eq!(out, b"from a member");
        assert_eq!(leaders.view(&endpoints[0]).poll_multicast(&mut out), None);
        let node = Subset::new(3, 4, vec![1, 3], Reach::Node);
        let view = node.view(&endpoints[3]);
        assert_eq!(view.poll_multicast(&mut out), None);
        assert_eq!(view.multicast_kind(), MulticastKind::None, "fabric imitating a network: no peer reads");
        assert!(endpoints[3].poll_multicast(&mut out).is_some(), "the node view left the datagrams alone");
    }
}
