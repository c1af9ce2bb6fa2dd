//! MPI_Bcast across nodes in two levels, each level a flat [`Bcast`] over
//! a subset of the communicator (`btl_ibmc::subset`):
//!
//! 1. the root's node: the root broadcasts to its node (its leader
//!    included) through the node's own stage;
//! 2. the leaders (each node's lowest rank): the root's node's leader
//!    broadcasts to the other leaders through the leaders' stage, the only
//!    one that crosses nodes (the communicator's multicast, co-roots and
//!    reliable channel, restricted to leaders);
//! 3. every other node: its leader broadcasts to its node through the
//!    node's stage.
//!
//! Every rank knows the root, so every rank knows which stages it takes
//! part in and in what role, and each stage sees its members call it in
//! the same order with the same lengths: a node's stage serves every
//! bcast of the communicator once (in step 1 or step 3), the leaders'
//! stage every bcast once, in the communicator's order. Each stage keeps
//! its flat bcast's guarantees (per-root streams, windowed flow control),
//! so consecutive bcasts with different roots need nothing more. Only
//! leaders use the network's multicast and reliable channel; non-leaders
//! discard the leaders' datagrams that the multicast group hands them.
//!
//! The leaders' stage uses the flat bcast's region; each node's stage has
//! one region more (a flat bcast's for the whole communicator, since the
//! window is laid out before the nodes are known).
//!
//! The same stages in the same order make the resumable run
//! (`two_level_run`, `start`): each stage's flat run over its subset.

use std::sync::Arc;

use btl_ibmc::shm::NodeGroups;
use btl_ibmc::{MulticastKind, Reach, RmcastStats, Subset, Transport, TransportError};

use super::two_level_run::{StageRun, TwoLevelBcastRun};
use super::{Bcast, BcastConfig};

/// One rank's stages of the two-level bcast.
#[derive(Debug)]
pub struct TwoLevelBcast {
    nodes: NodeGroups,
    rank: usize,
    node: Stage,
    /// Present on leaders only.
    leaders: Option<Stage>,
    scratch: Vec<u8>,
}

/// A flat bcast over a subset.
#[derive(Debug)]
struct Stage {
    /// Shared with the stage's runs, which view the transport through it.
    subset: Arc<Subset>,
    bcast: Bcast,
}

impl Stage {
    fn new(rank: usize, size: usize, ranks: Vec<usize>, reach: Reach, region_offset: usize, config: BcastConfig) -> Self {
        let subset = Subset::new(rank, size, ranks, reach);
        let bcast = Bcast::new(subset.position(), subset.len(), region_offset, config);
        Stage { subset: Arc::new(subset), bcast }
    }

    /// The communicator's rank `root` as a member's position.
    fn position_of(&self, root: usize, len: usize) -> Result<usize, TransportError> {
        self.subset.position_of(root).ok_or(TransportError::OutOfRange { peer: root, offset: 0, len })
    }

    /// Starts this stage's run of a bcast from the communicator's rank
    /// `root`, a member, taking the stage's numbers now; hands the run
    /// back parked, with `buf` (see `FlatBcastRun::take_buffer`).
    fn start<'a, T: Transport + ?Sized>(&mut self, transport: &T, root: usize, buf: &'a mut [u8]) -> Result<(StageRun<'a>, &'a mut [u8]), TransportError> {
        let position = self.position_of(root, buf.len())?;
        self.bcast.calls += 1;
        let mut run = self.bcast.start_flat(&self.subset.view(transport), position, buf, |run| run)?;
        let buf = run.take_buffer();
        let as_root = position == self.subset.position();
        Ok((StageRun { subset: Arc::clone(&self.subset), run, as_root }, buf))
    }

    fn abandon_run_at_root<T: Transport + ?Sized>(&mut self, transport: &T, len: usize) -> Result<(), TransportError> {
        self.bcast.calls += 1;
        self.bcast.abandon_run_at_root_flat(&self.subset.view(transport), self.subset.position(), len)
    }

    /// Broadcasts from the communicator's rank `root`, a member.
    fn bcast<T: Transport + ?Sized>(&mut self, transport: &T, root: usize, buf: &mut [u8]) -> Result<(), TransportError> {
        let root = self.position_of(root, buf.len())?;
        self.bcast.calls += 1;
        self.bcast.bcast_flat(&self.subset.view(transport), root, buf)
    }

    fn abandon_at_root<T: Transport + ?Sized>(&mut self, transport: &T, len: usize) -> Result<(), TransportError> {
        self.bcast.calls += 1;
        self.bcast.abandon_at_root_flat(&self.subset.view(transport), len)
    }
}

impl TwoLevelBcast {
    /// The stages of `rank` on `nodes`: the leaders' at `leaders_offset`,
    /// the node's at `node_offset`, each a region of
    /// `Bcast::region_len` bytes for its ranks and configuration (the
    /// leaders' has their co-roots).
    pub fn new(rank: usize, nodes: &NodeGroups, leaders_offset: usize, node_offset: usize, leaders: BcastConfig, node: BcastConfig) -> Self {
        let size = nodes.size();
        let node = Stage::new(rank, size, nodes.members(rank).collect(), Reach::Node, node_offset, node);
        let leaders = (nodes.leader_of(rank) == rank).then(|| Stage::new(rank, size, nodes.leaders(), Reach::Network, leaders_offset, leaders));
        TwoLevelBcast { nodes: nodes.clone(), rank, node, leaders, scratch: Vec::new() }
    }

    /// As [`Bcast::single_copy_root_share_bytes`], over both stages.
    pub fn single_copy_root_share_bytes(&self) -> u64 {
        let stages = std::iter::once(&self.node).chain(self.leaders.as_ref());
        stages.map(|stage| stage.bcast.single_copy_root_share_bytes()).sum()
    }

    pub fn is_leader(&self) -> bool {
        self.leaders.is_some()
    }

    pub fn nodes(&self) -> &NodeGroups {
        &self.nodes
    }

    pub fn stats(&self) -> RmcastStats {
        let mut all = vec![self.node.bcast.stats()];
        all.extend(self.leaders.as_ref().map(|stage| stage.bcast.stats()));
        RmcastStats::sum(&all)
    }

    /// As [`Bcast::bcast`]. A failed stage is passed on as an abandoned
    /// one wherever this rank roots a later stage, so that no rank waits
    /// for a message that will not come.
    pub fn bcast<T: Transport + ?Sized>(&mut self, transport: &T, root: usize, buf: &mut [u8]) -> Result<(), TransportError> {
        let on_roots_node = self.nodes.same_node(self.rank, root);
        if on_roots_node {
            if let Err(why) = self.node.bcast(transport, root, buf) {
                self.abandon_leaders_stage(transport, root, buf.len());
                return Err(why);
            }
        }
        if let Some(leaders) = self.leaders.as_mut() {
            // Settled before anything else: the waits of the node's stage
            // (this call's or the next's) serve only that stage, so a root
            // leader that returned early would never resend a piece lost
            // on its way to another leader, who would wait for it while
            // its node waits for it (two guests, 5 % multicast loss: hung
            // until the fault timeout). A receiving leader only flushes
            // its ACKs here; the root leader waits for them. Not a full
            // drain: a co-root's members acknowledge pieces of later calls
            // only in those calls, so leaders draining in different calls
            // waited for each other (nodes of 2/1/7/1/2 under 20 % loss).
            let root_leader = self.nodes.leader_of(root);
            let done = leaders
                .bcast(transport, root_leader, buf)
                .and_then(|()| leaders.bcast.settle_flat(&leaders.subset.view(transport), root_leader == self.rank));
            if let Err(why) = done {
                if !on_roots_node {
                    let _ = self.node.abandon_at_root(transport, buf.len());
                }
                return Err(why);
            }
        }
        if !on_roots_node {
            self.node.bcast(transport, self.nodes.leader_of(self.rank), buf)?;
        }
        self.discard_datagrams(transport);
        Ok(())
    }

    /// As [`Bcast::start`]: the stages `bcast` takes, in its order, each
    /// started now (its numbers taken in the communicator's post order)
    /// and run one after the other (`two_level_run`).
    pub(super) fn start<'a, T: Transport + ?Sized>(&mut self, transport: &T, root: usize, buf: &'a mut [u8]) -> Result<TwoLevelBcastRun<'a>, TransportError> {
        let on_roots_node = self.nodes.same_node(self.rank, root);
        let mut stages = Vec::with_capacity(3);
        let mut buf = buf;
        if on_roots_node {
            let (stage, back) = self.node.start(transport, root, buf)?;
            stages.push(stage);
            buf = back;
        }
        if let Some(leaders) = self.leaders.as_mut() {
            let (stage, back) = leaders.start(transport, self.nodes.leader_of(root), buf)?;
            stages.push(stage);
            buf = back;
        }
        if !on_roots_node {
            let (stage, back) = self.node.start(transport, self.nodes.leader_of(self.rank), buf)?;
            stages.push(stage);
            buf = back;
        }
        Ok(TwoLevelBcastRun::new(stages, buf))
    }

    /// As [`Bcast::abandon_run_at_root`], on the root of a call the
    /// others take as runs: its node's stage, and the leaders' if it
    /// leads; the other leaders' runs pass it on (`two_level_run`).
    pub(super) fn abandon_run_at_root<T: Transport + ?Sized>(&mut self, transport: &T, len: usize) -> Result<(), TransportError> {
        let node = self.node.abandon_run_at_root(transport, len);
        if let Some(leaders) = self.leaders.as_mut() {
            // The node stage's failure is the one the caller reports; the
            // leaders' abandonment is best effort on a call already lost
            // (a leader that misses it ends at its fault timeout).
            let _ = leaders.abandon_run_at_root(transport, len);
        }
        node
    }

    /// As [`Bcast::abandon_at_root`], on the root: its node's stage, and
    /// the leaders' if it leads; the other leaders pass it on.
    pub fn abandon_at_root<T: Transport + ?Sized>(&mut self, transport: &T, root: usize, len: usize) -> Result<(), TransportError> {
        let node = self.node.abandon_at_root(transport, len);
        self.abandon_leaders_stage(transport, root, len);
        node
    }

    /// Where this rank roots the leaders' stage for `root`'s bcast.
    fn abandon_leaders_stage<T: Transport + ?Sized>(&mut self, transport: &T, root: usize, len: usize) {
        if self.nodes.leader_of(root) == self.rank
            && let Some(leaders) = self.leaders.as_mut()
        {
            let _ = leaders.abandon_at_root(transport, len);
        }
    }

    pub fn progress<T: Transport + ?Sized>(&mut self, transport: &T) -> Result<(), TransportError> {
        self.node.bcast.progress_flat(&self.node.subset.view(transport))?;
        match self.leaders.as_mut() {
            Some(leaders) => leaders.bcast.progress_flat(&leaders.subset.view(transport)),
            None => {
                self.discard_datagrams(transport);
                Ok(())
            }
        }
    }

    pub fn is_idle(&self) -> bool {
        self.node.bcast.is_idle() && self.leaders.as_ref().is_none_or(|leaders| leaders.bcast.is_idle())
    }

    /// The node's stage first: it depends on this node's ranks alone, who
    /// all drain it, so a leader gets to the leaders' stage in any case.
    pub fn drain<T: Transport + ?Sized>(&mut self, transport: &T) -> Result<(), TransportError> {
        self.node.bcast.drain_flat(&self.node.subset.view(transport))?;
        match self.leaders.as_mut() {
            Some(leaders) => leaders.bcast.drain_flat(&leaders.subset.view(transport)),
            None => {
                self.discard_datagrams(transport);
                Ok(())
            }
        }
    }

    /// A non-leader is in the multicast group only because the group is
    /// the communicator's: it drops the leaders' datagrams unread, so that
    /// they do not pile up in its queue.
    fn discard_datagrams<T: Transport + ?Sized>(&mut self, transport: &T) {
        if self.leaders.is_some() || transport.multicast_kind() != MulticastKind::Datagram {
            return;
        }
        while transport.poll_multicast(&mut self.scratch).is_some() {}
    }
}
