//! The in-process test fabric: threads play ranks. Windows are shared heap
//! memory with the same put/flag semantics and checks as shared memory,
//! multicast loses, duplicates and reorders on a seeded schedule, the
//! reliable channel is an exactly-once FIFO per pair, and every endpoint is
//! also an `Exchange` so transports can be set up on it. The fabric imitates
//! either a network (lossy datagrams) or shared memory (windows readable by
//! all), as `FabricConfig::multicast_kind` says.

mod config;
mod datagrams;
mod exchange;
mod node_rings;
mod stats;
mod watchdog;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::poison::lock;
use std::time::{Duration, Instant};

pub use config::FabricConfig;
pub use datagrams::REORDER_SPAN;
pub use node_rings::FabricWithNodeRings;
pub use watchdog::run_ranks_watched;
pub use stats::FabricStats;

use crate::rng::Rng;
use crate::transport::{Datagrams, Endpoint, Exchange, MulticastKind, PeerReads, ReliableChannel, TransportError, Windows};
use crate::window::Window;
use crate::cross_memory::{CrossMemory, CrossMemoryRefusal};
use crate::words::words_for;
use datagrams::DatagramQueues;
use exchange::AllgatherBarrier;
use stats::Counters;

/// Delays shorter than this are spun: sleeping overshoots them many times.
const LONGEST_SPUN_DELAY: Duration = Duration::from_micros(50);

/// One rank's incoming reliable messages, with their senders, in arrival order.
type ReliableInbox = Mutex<VecDeque<(usize, Vec<u8>)>>;

/// State shared by all endpoints of one fabric.
pub struct Fabric {
    size: usize,
    window_len: usize,
    config: FabricConfig,
    windows: Box<[Box<[AtomicU64]>]>,
    datagrams: DatagramQueues,
    reliable_inboxes: Box<[ReliableInbox]>,
    exchange: AllgatherBarrier,
    counters: Counters,
    /// Indexed by rank: ranks a test declared dead, as a queue pair in
    /// error would reveal them to their peers.
    dead: Box<[AtomicBool]>,
    /// What a real backend draws at setup; here it follows from the seed.
    multicast_nonce: u64,
    /// (writer, target) of every put that crossed nodes.
    inter_node_pairs: Mutex<BTreeSet<(usize, usize)>>,
    /// (sender, receiver) of every reliable message that crossed nodes.
    inter_node_messages: Mutex<BTreeSet<(usize, usize)>>,
    /// Every rank that multicast a datagram.
    multicast_senders: Mutex<BTreeSet<usize>>,
}

impl Fabric {
    /// Builds a fabric of `size` ranks with zeroed `window_len`-byte windows
    /// and returns one endpoint per rank, in rank order.
    // Tests only ever hold endpoints; the fabric lives on behind them.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(size: usize, window_len: usize, config: FabricConfig) -> Vec<FabricEndpoint> {
        config.validate();
        if let Some(nodes) = &config.nodes {
            assert_eq!(nodes.size(), size, "FabricConfig::nodes places {} ranks on a fabric of {size}", nodes.size());
        }
        let fabric = Arc::new(Fabric {
            size,
            window_len,
            windows: (0..size).map(|_| (0..words_for(window_len)).map(|_| AtomicU64::new(0)).collect()).collect(),
            datagrams: DatagramQueues::new(size),
            reliable_inboxes: (0..size).map(|_| Mutex::new(VecDeque::new())).collect(),
            exchange: AllgatherBarrier::new(size),
            counters: Counters::default(),
            dead: (0..size).map(|_| AtomicBool::new(false)).collect(),
            multicast_nonce: crate::rng::splitmix64(config.seed ^ 0x6E6F_6E63_6521),
            inter_node_pairs: Mutex::new(BTreeSet::new()),
            inter_node_messages: Mutex::new(BTreeSet::new()),
            multicast_senders: Mutex::new(BTreeSet::new()),
            config,
        });
        (0..size)
            .map(|rank| FabricEndpoint {
                rank,
                rng: Mutex::new(Rng::new(fabric.config.seed ^ crate::rng::splitmix64(rank as u64))),
                fabric: Arc::clone(&fabric),
                cross_memory: None,
            })
            .collect()
    }

    #[inline]
    fn window(&self, peer: usize) -> Option<Window<'_>> {
        self.windows.get(peer).map(|words| Window::new(words, self.window_len))
    }
}

/// One rank's view of a [`Fabric`]; move it into the thread playing that rank.
pub struct FabricEndpoint {
    rank: usize,
    fabric: Arc<Fabric>,
    /// This rank's fault schedule.
    rng: Mutex<Rng>,
    /// Set by `enable_cross_memory`: the ranks are threads of one process,
    /// so they read each other's memory with the same system call as
    /// processes do.
    cross_memory: Option<CrossMemory>,
}

impl FabricEndpoint {
    /// Counters of the whole fabric, all ranks together.
    pub fn stats(&self) -> FabricStats {
        self.fabric.counters.snapshot()
    }

    pub fn config(&self) -> &FabricConfig {
        &self.fabric.config
    }

    /// `ShmTransport::enable_cross_memory` for the fabric's ranks: collective,
    /// over the fabric's own exchange; one pretended refusal refuses all.
    pub fn enable_cross_memory(&mut self, pretend_refused: bool) -> Result<(), CrossMemoryRefusal> {
        let cross_memory = CrossMemory::establish(self, self.rank, self.fabric.size, pretend_refused)?;
        self.cross_memory = Some(cross_memory);
        Ok(())
    }

    /// From now on every other rank's [`Endpoint::health`] reports `rank`
    /// as failed, the way a queue pair to a dead peer ends in error.
    pub fn mark_dead(&self, rank: usize) {
        if let Some(flag) = self.fabric.dead.get(rank) {
            flag.store(true, Ordering::Release);
        }
    }

    /// Every (writer, target) pair of ranks on different nodes between
    /// which a put was made so far, in order.
    pub fn inter_node_pairs(&self) -> Vec<(usize, usize)> {
        lock(&self.fabric.inter_node_pairs).iter().copied().collect()
    }

    /// Every (sender, receiver) pair of ranks on different nodes between
    /// which a reliable message was sent so far, in order.
    pub fn inter_node_messages(&self) -> Vec<(usize, usize)> {
        lock(&self.fabric.inter_node_messages).iter().copied().collect()
    }

    /// Every rank that multicast a datagram so far, in order.
    pub fn multicast_senders(&self) -> Vec<usize> {
        lock(&self.fabric.multicast_senders).iter().copied().collect()
    }

    /// Test hook: hands `to` a datagram that `poll_multicast` will
    /// attribute to `sender`, behind whatever is already queued, free of
    /// faults. With a sender of this communicator it stands for what a
    /// real backend could not tell from genuine traffic (the sender's own
    /// queue pair): a stale or foreign frame that carries its own nonce,
    /// a frame the wrong rank put on the group, garbage.
    pub fn inject_datagram(&self, to: usize, sender: usize, datagram: &[u8]) {
        assert!(to < self.fabric.size && sender < self.fabric.size, "datagram injected between ranks outside the fabric");
        self.fabric.datagrams.inject(to, sender, datagram);
    }

    /// Test hook: queues `message` for `to` on the reliable channel as if
    /// `from` had sent it.
    pub fn inject_reliable(&self, to: usize, from: usize, message: &[u8]) {
        assert!(to < self.fabric.size && from < self.fabric.size, "message injected between ranks outside the fabric");
        lock(&self.fabric.reliable_inboxes[to]).push_back((from, message.to_vec()));
    }

    #[inline]
    fn own_window(&self) -> Window<'_> {
        match self.fabric.window(self.rank) {
            Some(window) => window,
            None => unreachable!("endpoints are only made for ranks below size"),
        }
    }

    fn offers_datagrams(&self) -> bool {
        self.fabric.config.multicast_kind == MulticastKind::Datagram
    }

    fn offers_shared_windows(&self) -> bool {
        self.fabric.config.multicast_kind == MulticastKind::SharedWindow
    }

    /// Delays a put to `peer` as configured and counts it as crossing
    /// nodes or not.
    #[inline]
    fn delay_put(&self, peer: usize) {
        let max = self.fabric.config.put_delay_max;
        if !max.is_zero() {
            self.random_delay(max);
        }
        let crosses = match &self.fabric.config.nodes {
            Some(nodes) => peer < nodes.size() && self.rank < nodes.size() && !nodes.same_node(self.rank, peer),
            None => false,
        };
        if crosses {
            self.cross_nodes(peer);
        } else {
            Counters::bump(&self.fabric.counters.intra_node_puts);
        }
    }

    #[cold]
    fn cross_nodes(&self, peer: usize) {
        Counters::bump(&self.fabric.counters.inter_node_puts);
        lock(&self.fabric.inter_node_pairs).insert((self.rank, peer));
        let delay = self.fabric.config.inter_node_put_delay;
        if !delay.is_zero() {
            sleep_or_spin(delay);
        }
    }

    #[cold]
    fn random_delay(&self, max: Duration) {
        let max_nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX - 1);
        let delay = Duration::from_nanos(lock(&self.rng).below(max_nanos + 1));
        sleep_or_spin(delay);
    }
}

fn sleep_or_spin(delay: Duration) {
    if delay <= LONGEST_SPUN_DELAY {
        let deadline = Instant::now() + delay;
        while Instant::now() < deadline {
            std::hint::spin_loop();
        }
    } else {
        std::thread::sleep(delay);
    }
}


impl Endpoint for FabricEndpoint {
    fn name(&self) -> &'static str {
        "fabric"
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.fabric.size
    }

    fn progress(&self) {}

    fn health(&self) -> Result<(), TransportError> {
        let dead_peer = self.fabric.dead.iter().enumerate().find(|&(peer, dead)| peer != self.rank && dead.load(Ordering::Acquire));
        match dead_peer {
            Some((peer, _)) => Err(TransportError::Failed(format!("rank {peer} is unreachable (its link is in error)"))),
            None => Ok(()),
        }
    }
}

impl Windows for FabricEndpoint {
    fn window_len(&self) -> usize {
        self.fabric.window_len
    }

    fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError> {
        self.delay_put(peer);
        let window = self.fabric.window(peer).ok_or(TransportError::OutOfRange { peer, offset, len: data.len() })?;
        window.put(peer, offset, data, flag_offset, flag)
    }

    fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), TransportError> {
        self.delay_put(peer);
        let window = self.fabric.window(peer).ok_or(TransportError::OutOfRange { peer, offset: flag_offset, len: 8 })?;
        window.store_flag(peer, flag_offset, value)
    }

    fn local_flag(&self, flag_offset: usize) -> u64 {
        self.own_window().load_own_flag(self.rank, flag_offset)
    }

    fn set_local_flag(&self, flag_offset: usize, value: u64) {
        self.own_window().store_own_flag(self.rank, flag_offset, value);
    }

    fn read_local(&self, offset: usize, out: &mut [u8]) {
        self.own_window().read_own(self.rank, offset, out);
    }

    fn prepare_put(&self, peer: usize, offset: usize) {
        if let Some(window) = self.fabric.window(peer) {
            window.prepare_put(offset);
        }
    }
}

impl Datagrams for FabricEndpoint {
    fn multicast_kind(&self) -> MulticastKind {
        self.fabric.config.multicast_kind
    }

    fn max_datagram(&self) -> usize {
        if self.offers_datagrams() { self.fabric.config.max_datagram } else { 0 }
    }

    fn multicast(&self, datagram: &[u8]) -> Result<(), TransportError> {
        if !self.offers_datagrams() {
            return Err(TransportError::Unsupported("datagram multicast on a fabric imitating a backend without it"));
        }
        let max = self.fabric.config.max_datagram;
        if datagram.len() > max {
            return Err(TransportError::TooLarge { len: datagram.len(), max });
        }
        lock(&self.fabric.multicast_senders).insert(self.rank);
        let mut rng = lock(&self.rng);
        self.fabric.datagrams.deliver(self.rank, datagram, &self.fabric.config, &mut rng, &self.fabric.counters);
        Ok(())
    }

    fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize> {
        out.clear();
        let (sender, datagram) = self.fabric.datagrams.take(self.rank)?;
        out.extend_from_slice(&datagram);
        Counters::bump(&self.fabric.counters.datagrams_received);
        Some(sender)
    }

    fn multicast_nonce(&self) -> u64 {
        if self.offers_datagrams() { self.fabric.multicast_nonce } else { 0 }
    }
}

impl ReliableChannel for FabricEndpoint {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        let max_delay = self.fabric.config.reliable_delay_max;
        if !max_delay.is_zero() {
            self.random_delay(max_delay);
        }
        let inbox = self.fabric.reliable_inboxes.get(peer).ok_or(TransportError::OutOfRange { peer, offset: 0, len: message.len() })?;
        if let Some(nodes) = &self.fabric.config.nodes
            && !nodes.same_node(self.rank, peer)
        {
            lock(&self.fabric.inter_node_messages).insert((self.rank, peer));
        }
        lock(inbox).push_back((self.rank, message.to_vec()));
        Counters::bump(&self.fabric.counters.reliable_sent);
        Ok(())
    }

    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        out.clear();
        let (sender, message) = lock(&self.fabric.reliable_inboxes[self.rank]).pop_front()?;
        out.extend_from_slice(&message);
        Some(sender)
    }
}

impl PeerReads for FabricEndpoint {
    fn read_peer(&self, peer: usize, offset: usize, out: &mut [u8]) -> Result<(), TransportError> {
        if !self.offers_shared_windows() {
            return Err(TransportError::Unsupported("reading a peer's window on a fabric imitating a network"));
        }
        let out_of_range = TransportError::OutOfRange { peer, offset, len: out.len() };
        let window = self.fabric.window(peer).ok_or(out_of_range.clone())?;
        match offset.checked_add(out.len()) {
            // The range is checked here, so the window's own read cannot panic.
            Some(end) if end <= self.fabric.window_len => {
                window.read_own(peer, offset, out);
                Ok(())
            }
            _ => Err(out_of_range),
        }
    }

    fn peer_flag(&self, peer: usize, flag_offset: usize) -> Result<u64, TransportError> {
        if !self.offers_shared_windows() {
            return Err(TransportError::Unsupported("reading a flag in a peer's window on a fabric imitating a network"));
        }
        let window = self.fabric.window(peer).ok_or(TransportError::OutOfRange { peer, offset: flag_offset, len: 8 })?;
        Ok(window.flag(peer, flag_offset)?.load(Ordering::Acquire))
    }

    fn reads_peer_memory(&self) -> bool {
        self.cross_memory.is_some()
    }

    fn read_peer_memory(&self, peer: usize, address: u64, out: &mut [u8]) -> Result<(), TransportError> {
        crate::cross_memory::read_if_enabled(self.cross_memory.as_ref(), peer, address, out)
    }

    fn write_peer_memory(&self, peer: usize, address: u64, data: &[u8]) -> Result<(), TransportError> {
        crate::cross_memory::write_if_enabled(self.cross_memory.as_ref(), peer, address, data)
    }
}

impl Exchange for FabricEndpoint {
    fn allgather(&self, mine: &[u8], all: &mut [u8]) -> Result<(), TransportError> {
        self.fabric.exchange.allgather(self.rank, mine, all)
    }
}

impl std::fmt::Debug for FabricEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FabricEndpoint").field("rank", &self.rank).field("size", &self.fabric.size).finish()
    }
}
