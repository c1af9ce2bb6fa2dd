//! MPI_Bcast over btl-ibmc's reliable multicast: the root hands its
//! message to the substrate, which copies it into the root's window (cut
//! into pieces when it exceeds one) and returns; every other rank takes the
//! root's next message out of it. Each root has its own stream, so
//! consecutive broadcasts with different roots need no agreement beyond
//! MPI's rule that every rank calls the same broadcasts in the same order
//! with the same lengths.
//!
//! The root returns before its receivers have acknowledged, as MPI allows;
//! ACKs, NACKs and retransmissions are then served by [`Bcast::progress`]
//! (the glue calls it from Open MPI's progress engine) and by later
//! broadcasts. Before the communicator's transport goes away, every rank
//! must [`Bcast::drain`], or a receiver could be left waiting for a
//! retransmission that no one will send.
//!
//! MPI_Ibcast's run over either multicast (`multicast_run`: datagrams, or
//! the root's shared window) steps the same `ReliableMulticast` the
//! blocking calls use; the two share it through a handle that one of them
//! holds at a time.
//!
//! Every length goes through the substrate. Messages are pieces in the
//! window, so window space stays fixed whatever the length; above
//! `substrate_max_bytes` the glue may prefer the module underneath
//! ([`Bcast::serves`]), whose point-to-point pipelines avoid the copy into
//! the root's window. On shared memory, readers copying straight out of
//! the root's window is already one copy in and one copy out, which a tree
//! of puts cannot beat; the put tree (`put_tree`) serves only transports
//! without any multicast.

use btl_ibmc::{Datagrams, MulticastKind, ReliableMulticast, RmcastConfig, RmcastStats, Transport, TransportError};
use tuning::{choose_co_roots, CoRootModel};

use crate::patterns::region::RegionCursor;
use crate::schedule::{built, RunSlot};

pub mod put_tree;
mod multicast_run;
mod put_tree_run;
mod run;
pub mod single_copy;
mod single_copy_run;
pub mod two_level;
mod two_level_run;

pub use multicast_run::MulticastRun;
pub use run::{BcastRun, FlatBcastRun};
pub use two_level_run::TwoLevelBcastRun;

use put_tree::{PutTreeBcast, PutTreeConfig};
use multicast_run::SharedMulticast;
use single_copy::SingleCopyBcast;
use two_level::TwoLevelBcast;

use btl_ibmc::shm::NodeGroups;

#[derive(Clone, Copy, Debug)]
pub struct BcastConfig {
    pub multicast: RmcastConfig,
    /// Longest message the glue should hand to `bcast`; `Bcast` itself
    /// serves any length.
    pub substrate_max_bytes: usize,
    /// Shortest message broadcast in one copy (`single_copy`) where the
    /// transport reads peers' memory; `usize::MAX` never.
    pub single_copy_min_bytes: usize,
    /// Whether the region also holds a node's stage of the two-level bcast
    /// (`two_level`), which a communicator across nodes may take once its
    /// transport is known.
    pub room_for_two_levels: bool,
    /// On a shared window (shm): the shortest ibcast whose run multicasts
    /// through the root's window as the blocking call does; shorter ones
    /// take the put tree's own region beside it (0: every length;
    /// `usize::MAX`: none). The glue takes it from
    /// `select::policy::shared_window_runs_multicast_from`. Every rank must
    /// hold the same value.
    pub shared_window_runs_multicast_from: usize,
}

impl Default for BcastConfig {
    fn default() -> Self {
        BcastConfig {
            multicast: RmcastConfig::default(),
            substrate_max_bytes: usize::MAX,
            single_copy_min_bytes: usize::MAX,
            room_for_two_levels: false,
            shared_window_runs_multicast_from: 0,
        }
    }
}

impl BcastConfig {
    /// This configuration with the co-roots the paper's model picks for
    /// `size` ranks (section 7.2), and the model's explanation.
    pub fn with_modelled_co_roots(mut self, size: usize, model: &CoRootModel) -> (Self, String) {
        let choice = choose_co_roots(size, model);
        self.multicast.co_roots = choice.co_roots;
        (self, choice.reason)
    }
}

/// One rank's broadcast state for one communicator.
#[derive(Debug)]
pub struct Bcast {
    rank: usize,
    size: usize,
    config: BcastConfig,
    multicast: SharedMulticast,
    tree: PutTreeBcast,
    single_copy: SingleCopyBcast,
    /// Serves every call instead of the flat paths once set.
    two_level: Option<Box<TwoLevelBcast>>,
    node_stage_offset: Option<usize>,
    multicast_offset: usize,
    region_end: usize,
    calls: u64,
}

impl Bcast {
    /// Bytes of window the broadcast needs on every rank.
    pub fn region_len(size: usize, config: &BcastConfig) -> usize {
        Regions::new(0, size, config).end
    }

    /// The state of `rank` among `size` ranks; its region of `region_len`
    /// bytes starts at `region_offset` (64-byte aligned) of every rank's
    /// window. Panics on an invalid configuration.
    pub fn new(rank: usize, size: usize, region_offset: usize, config: BcastConfig) -> Self {
        let regions = Regions::new(region_offset, size, &config);
        let multicast = SharedMulticast::new(ReliableMulticast::new(rank, size, regions.multicast, config.multicast));
        let tree = PutTreeBcast::new(rank, size, regions.tree, tree_config(&config));
        let single_copy = SingleCopyBcast::new(rank, size, regions.single_copy, config.multicast.wait);
        Bcast {
            rank,
            size,
            config,
            multicast,
            tree,
            single_copy,
            two_level: None,
            node_stage_offset: regions.node_stage,
            multicast_offset: regions.multicast,
            region_end: regions.end,
            calls: 0,
        }
    }

    /// Serves every later call in two levels over `nodes` (`two_level`),
    /// the leaders multicasting with `leaders_co_roots` co-roots among
    /// them, or says why it cannot: the region has no room for a node's
    /// stage. Every rank must switch before its first bcast, alike.
    pub fn use_two_levels(&mut self, nodes: &NodeGroups, leaders_co_roots: usize) -> Result<(), String> {
        let Some(node_stage) = self.node_stage_offset else {
            return Err("the window holds no room for a node's stage (coll_rdma_hierarchy=flat at setup)".to_string());
        };
        if nodes.size() != self.size || self.calls > 0 {
            return Err(format!("nodes of {} ranks for a bcast of {} after {} call(s)", nodes.size(), self.size, self.calls));
        }
        // The leaders' co-roots change the size of their ACK arrays, and a
        // node's stage is laid out like a flat bcast of its ranks: both are
        // checked against the room the window has (the region grows with
        // the ranks, so they fit unless an explicit co-root count or the
        // model makes the leaders' arrays outgrow the whole communicator's).
        let flat = BcastConfig { room_for_two_levels: false, ..self.config };
        let leaders_config = BcastConfig { multicast: RmcastConfig { co_roots: leaders_co_roots, ..flat.multicast }, ..flat };
        let leaders_need = Bcast::region_len(nodes.count(), &leaders_config);
        let largest_node = (0..nodes.size()).map(|rank| nodes.local_count(rank)).max().unwrap_or(1);
        let node_need = Bcast::region_len(largest_node, &flat);
        if self.multicast_offset + leaders_need > node_stage || node_stage + node_need > self.region_end {
            return Err(format!(
                "the window's bcast region has no room for the stages on these nodes ({leaders_need} bytes among the {} leaders with \
                 {leaders_co_roots} co-root(s), {node_need} bytes within a node of {largest_node})",
                nodes.count()
            ));
        }
        self.two_level = Some(Box::new(TwoLevelBcast::new(self.rank, nodes, self.multicast_offset, node_stage, leaders_config, flat)));
        Ok(())
    }

    /// The two-level stages, where they serve.
    pub fn two_level(&self) -> Option<&TwoLevelBcast> {
        self.two_level.as_deref()
    }

    /// Whether `transport` broadcasts through the put tree, having no
    /// multicast of any kind; the same answer on every rank.
    pub fn uses_put_tree<T: Datagrams + ?Sized>(transport: &T) -> bool {
        transport.multicast_kind() == MulticastKind::None
    }

    /// Whether a `len`-byte broadcast goes in one copy from the root's
    /// buffer; the same answer on every rank (the transport's ability to
    /// read peers' memory is agreed at setup).
    pub fn uses_single_copy<T: Transport + ?Sized>(&self, transport: &T, len: usize) -> bool {
        len >= self.config.single_copy_min_bytes && transport.reads_peer_memory()
    }

    /// Whether the glue should hand a `len`-byte broadcast to `bcast`.
    pub fn serves(&self, len: usize) -> bool {
        len <= self.config.substrate_max_bytes
    }

    pub fn config(&self) -> &BcastConfig {
        &self.config
    }

    /// Broadcasts served so far.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    pub fn stats(&self) -> RmcastStats {
        match &self.two_level {
            Some(two_level) => two_level.stats(),
            None => self.multicast.peek().stats(),
        }
    }

    /// Bytes this rank, as a single-copy root, wrote into its receivers'
    /// buffers (`single_copy::root_share`).
    pub fn single_copy_root_share_bytes(&self) -> u64 {
        match &self.two_level {
            Some(two_level) => two_level.single_copy_root_share_bytes(),
            None => self.single_copy.root_share_bytes(),
        }
    }

    /// MPI_Bcast of `buf` from `root`: the root's bytes end up in `buf` on
    /// every rank. Every rank passes the same root and length.
    pub fn bcast<T: Transport + ?Sized>(&mut self, transport: &T, root: usize, buf: &mut [u8]) -> Result<(), TransportError> {
        if root >= self.size {
            return Err(TransportError::OutOfRange { peer: root, offset: 0, len: buf.len() });
        }
        self.calls += 1;
        match self.two_level.as_mut() {
            Some(two_level) => two_level.bcast(transport, root, buf),
            None => self.bcast_flat(transport, root, buf),
        }
    }

    /// `bcast` on the flat paths; a two-level stage's (which must not
    /// recurse into stages: each is over a view of the one before).
    fn bcast_flat<T: Transport + ?Sized>(&mut self, transport: &T, root: usize, buf: &mut [u8]) -> Result<(), TransportError> {
        if self.uses_single_copy(transport, buf.len()) {
            self.single_copy.bcast(transport, root, buf)
        } else if Self::uses_put_tree(transport) {
            self.tree.bcast(transport, root, buf)
        } else if root == self.rank {
            self.multicast.get()?.send(transport, buf)
        } else {
            self.multicast.get()?.receive(transport, root, buf)
        }
    }

    /// Whether the flat bcast's runs share the reliable multicast with the
    /// blocking calls, of datagrams or through a shared window (rather
    /// than the put tree or single copy).
    fn uses_multicast<T: Transport + ?Sized>(&self, transport: &T, len: usize) -> bool {
        let multicast = match transport.multicast_kind() {
            MulticastKind::Datagram => true,
            MulticastKind::SharedWindow => len >= self.config.shared_window_runs_multicast_from,
            MulticastKind::None => false,
        };
        multicast && !self.uses_single_copy(transport, len)
    }

    /// Starts one bcast of `buf` from `root` as a resumable run, taking
    /// its sequence numbers now: runs must be started in the
    /// communicator's post order and advanced one at a time
    /// (`schedule_queue`'s bcast lane). Every path has a run, the blocking
    /// call's: where the blocking call copies from the root's buffer
    /// (`single_copy`), single copy's run; where it multicasts datagrams
    /// (udp, verbs multicast), the same reliable multicast, stepped
    /// (`multicast_run`); where the transport has no multicast, the put
    /// tree's run. Through the root's shared window (shm) the run is the
    /// multicast's, or the put tree's on the tree's own part of the window
    /// (by length: `BcastConfig::shared_window_runs_multicast_from`),
    /// correct beside the blocking call's multicast because the two use
    /// disjoint regions and sequence numbers. In two levels
    /// (`two_level_run`) each stage takes the run its own blocking path
    /// would by the same rules: a node's stage never has datagrams (shared
    /// windows or puts), and the leaders' stage has the communicator's
    /// multicast, datagrams included (served by `progress` like the flat
    /// datagram run's).
    pub fn start<'a, T: Transport + ?Sized>(&mut self, transport: &T, root: usize, buf: &'a mut [u8]) -> Result<BcastRun<'a>, TransportError> {
        built(|slot| self.start_into(transport, root, buf, slot))
    }

    /// `start`, building the run in `slot` (`RunSlot`); the run, there.
    #[inline(always)]
    pub fn start_into<'a, 's, T: Transport + ?Sized>(
        &mut self,
        transport: &T,
        root: usize,
        buf: &'a mut [u8],
        slot: impl RunSlot<'s, BcastRun<'a>>,
    ) -> Result<&'s mut BcastRun<'a>, TransportError>
    where
        'a: 's,
    {
        if root >= self.size {
            return Err(TransportError::OutOfRange { peer: root, offset: 0, len: buf.len() });
        }
        self.calls += 1;
        match self.two_level.as_mut() {
            Some(two_level) => Ok(slot.fill(BcastRun::TwoLevel(Box::new(two_level.start(transport, root, buf)?)))),
            None => self.start_flat(transport, root, buf, |run| slot.fill(BcastRun::Flat(run))),
        }
    }

    /// `start` on the flat paths; a two-level stage's (see `bcast_flat`).
    /// The run goes straight to `place` (see `RunSlot`).
    #[inline(always)]
    fn start_flat<'a, T: Transport + ?Sized, Placed>(
        &mut self,
        transport: &T,
        root: usize,
        buf: &'a mut [u8],
        place: impl FnOnce(FlatBcastRun<'a>) -> Placed,
    ) -> Result<Placed, TransportError> {
        Ok(place(if self.uses_single_copy(transport, buf.len()) {
            FlatBcastRun::SingleCopy(self.single_copy.start(root, buf)?)
        } else if self.uses_multicast(transport, buf.len()) {
            FlatBcastRun::Multicast(MulticastRun::start(&self.multicast, self.rank, root, buf)?)
        } else {
            FlatBcastRun::PutTree(self.tree.start(root, buf)?)
        }))
    }

    /// `abandon_at_root` for a call its receivers take as a run (`start`):
    /// single copy's or the put tree's mark, or the multicast's message of
    /// a length no receiver expects, in each stage this rank roots
    /// where two levels serve. The runs started before it must be
    /// finished.
    pub fn abandon_run_at_root<T: Transport + ?Sized>(&mut self, transport: &T, root: usize, len: usize) -> Result<(), TransportError> {
        self.calls += 1;
        if let Some(two_level) = self.two_level.as_mut() {
            if root != self.rank {
                return Err(TransportError::OutOfRange { peer: root, offset: 0, len });
            }
            return two_level.abandon_run_at_root(transport, len);
        }
        self.abandon_run_at_root_flat(transport, root, len)
    }

    /// `abandon_run_at_root` on the flat paths; a two-level stage's (which
    /// must not recurse into stages, see `bcast_flat`).
    fn abandon_run_at_root_flat<T: Transport + ?Sized>(&mut self, transport: &T, root: usize, len: usize) -> Result<(), TransportError> {
        if self.uses_single_copy(transport, len) {
            return self.single_copy.abandon_at_root(transport, root, len);
        }
        if self.uses_multicast(transport, len) {
            return self.abandon_at_root_flat(transport, len);
        }
        self.tree.abandon_at_root(transport, root, len)
    }

    /// The root's side of a `len`-byte call whose message it cannot provide
    /// (its pack failed), instead of `bcast`: every other rank's call for it
    /// fails rather than waiting. The put tree forwards an "abandoned" mark;
    /// on a multicast window the root sends a message of a length no
    /// receiver expects, which each receiver refuses. Either way the ranks
    /// are out of step afterwards: the caller must not use this state again.
    pub fn abandon_at_root<T: Transport + ?Sized>(&mut self, transport: &T, root: usize, len: usize) -> Result<(), TransportError> {
        if root != self.rank {
            return Err(TransportError::OutOfRange { peer: root, offset: 0, len });
        }
        self.calls += 1;
        match self.two_level.as_mut() {
            Some(two_level) => two_level.abandon_at_root(transport, root, len),
            None => self.abandon_at_root_flat(transport, len),
        }
    }

    fn abandon_at_root_flat<T: Transport + ?Sized>(&mut self, transport: &T, len: usize) -> Result<(), TransportError> {
        let root = self.rank;
        if self.uses_single_copy(transport, len) {
            self.single_copy.abandon_at_root(transport, root, len)
        } else if Self::uses_put_tree(transport) {
            self.tree.abandon_at_root(transport, root, len)
        } else {
            let unexpected_length = vec![0u8; if len == 1 { 2 } else { 1 }];
            self.multicast.get()?.send(transport, &unexpected_length)
        }
    }

    /// Serves ACKs, NACKs and retransmissions without waiting; for the
    /// progress engine, between broadcasts.
    pub fn progress<T: Transport + ?Sized>(&mut self, transport: &T) -> Result<(), TransportError> {
        match self.two_level.as_mut() {
            Some(two_level) => two_level.progress(transport),
            None => self.progress_flat(transport),
        }
    }

    fn progress_flat<T: Transport + ?Sized>(&mut self, transport: &T) -> Result<(), TransportError> {
        if Self::uses_put_tree(transport) {
            return Ok(());
        }
        self.multicast.get()?.progress(transport)
    }

    /// Whether another collective's waits, and the progress engine between
    /// calls, must serve this bcast; the glue and the tests ask here.
    ///
    /// Over datagram multicast always, even when this rank owes nothing:
    /// a co-root may still be forwarding pieces of a finished bcast into
    /// this rank's reliable channel, and it cannot go on (to the barrier
    /// this rank waits in, say) until this rank drains it. Serving only
    /// ranks that were not idle hung the hybrid scale test (64 ranks, node
    /// groups of 8: co-roots blocked on full shared-memory rings of ranks
    /// waiting in a barrier). On a shared window nothing is retransmitted
    /// or forwarded: a reader's lazy ACK is only needed by a root whose
    /// window is full, and that root reads the ACK lines itself.
    pub fn needs_side_progress<T: Datagrams + ?Sized>(&self, transport: &T) -> bool {
        transport.multicast_kind() == MulticastKind::Datagram
    }

    /// Nothing sent is unacknowledged and no ACK is owed, as of the last call.
    pub fn is_idle(&self) -> bool {
        if let Some(two_level) = &self.two_level {
            return two_level.is_idle();
        }
        self.multicast.peek().is_idle()
    }

    /// Waits until this rank is idle; every rank calls it before the
    /// communicator's transport is torn down.
    pub fn drain<T: Transport + ?Sized>(&mut self, transport: &T) -> Result<(), TransportError> {
        match self.two_level.as_mut() {
            Some(two_level) => two_level.drain(transport),
            None => self.drain_flat(transport),
        }
    }

    fn drain_flat<T: Transport + ?Sized>(&mut self, transport: &T) -> Result<(), TransportError> {
        // The put tree leaves nothing in flight when a call returns.
        if Self::uses_put_tree(transport) {
            return Ok(());
        }
        self.multicast.get()?.drain(transport)
    }

    /// As `ReliableMulticast::settle`: ACKs written and, on `as_root`, this
    /// rank's pieces acknowledged by every receiver.
    fn settle_flat<T: Transport + ?Sized>(&mut self, transport: &T, as_root: bool) -> Result<(), TransportError> {
        if Self::uses_put_tree(transport) {
            return Ok(());
        }
        self.multicast.get()?.settle(transport, as_root)
    }
}

/// The put tree cuts messages like the multicast window does.
fn tree_config(config: &BcastConfig) -> PutTreeConfig {
    PutTreeConfig { segment_bytes: config.multicast.slot_bytes, policy: config.multicast.wait }
}

/// Where the multicast substrate, the put tree, single copy and (where
/// there is room for it) a node's stage of the two-level bcast sit in the
/// bcast region. The leaders' stage reuses the flat paths' part: a
/// communicator takes one or the other for life.
struct Regions {
    multicast: usize,
    tree: usize,
    single_copy: usize,
    node_stage: Option<usize>,
    end: usize,
}

impl Regions {
    fn new(start: usize, size: usize, config: &BcastConfig) -> Self {
        let mut cursor = RegionCursor::starting_at(start);
        let multicast = cursor.take(btl_ibmc::rmcast::region_len(size, &config.multicast));
        let tree = cursor.take(PutTreeBcast::region_len(size, &tree_config(config)));
        let single_copy = cursor.take(SingleCopyBcast::region_len(size));
        let flat = BcastConfig { room_for_two_levels: false, ..*config };
        let node_stage = config.room_for_two_levels.then(|| cursor.take(Regions::new(0, size, &flat).end));
        Regions { multicast, tree, single_copy, node_stage, end: cursor.end() }
    }
}
