//! Node-local shared memory: every rank of a communicator maps one POSIX
//! shared-memory segment holding all windows and one reliable ring per
//! ordered pair of ranks. A put is a copy plus a release store. There is no
//! datagram multicast: every rank maps every window, so a write into the
//! sender's own window that all others read is the multicast
//! ([`MulticastKind::SharedWindow`]).

mod establish;
mod groups;
mod layout;
mod naming;
pub(crate) mod node;
mod reap;
mod record;
mod ring;
mod segment;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use crate::poison::lock;

pub use establish::{ShmSetupError, establish, establish_in_groups};
pub use groups::NodeGroups;
pub use ring::SLOT_PAYLOAD as RELIABLE_MAX;
pub use segment::{OsCall, SegmentError, ShmSegment};

use crate::cross_memory::{CrossMemory, CrossMemoryRefusal};
use crate::footprint::MemoryFootprint;
use crate::transport::{Datagrams, Endpoint, Exchange, MulticastKind, PeerReads, ReliableChannel, TransportError, Windows};
use crate::wait::{OwnChannel, Waiter};
use crate::window::Window;
use crate::words::words_for;
use layout::SegmentLayout;
use ring::{RING_BYTES, Ring};

/// One rank's shared-memory transport; dropping it unmaps the segment.
pub struct ShmTransport {
    segment: ShmSegment,
    layout: SegmentLayout,
    rank: usize,
    /// Where this rank's window starts and how many words a window spans,
    /// kept to spare the hot paths the layout arithmetic.
    own_window_first_word: usize,
    window_words: usize,
    /// One lock per destination ring: a ring has a single producer, but
    /// several threads of this process may send to the same peer.
    producers: Box<[Mutex<()>]>,
    /// This rank's consuming side, serialised.
    consumer: Mutex<Consumer>,
    /// Set once every rank showed it can read every other's memory.
    cross_memory: Option<CrossMemory>,
}

/// Where the round-robin scan of senders resumes, and the messages a
/// sender facing a full ring took out of this rank's inbound rings: a
/// peer may be blocked on a full ring towards this rank while this rank
/// is blocked towards it (two co-roots forwarding to each other), and
/// only emptying our own rings lets both go on.
#[derive(Default)]
struct Consumer {
    next_sender: usize,
    /// (sender, message), in the order they left the rings; served before
    /// the rings, so each pair's order holds.
    parked: VecDeque<(usize, Vec<u8>)>,
}

impl Consumer {
    fn park_everything_arrived(&mut self, transport: &ShmTransport) {
        for sender in 0..transport.layout.size {
            let ring = transport.ring(sender, transport.rank);
            loop {
                let mut message = Vec::new();
                if !ring.try_pop(&mut message) {
                    break;
                }
                self.parked.push_back((sender, message));
            }
        }
    }
}

impl ShmTransport {
    fn new(segment: ShmSegment, layout: SegmentLayout, rank: usize) -> Self {
        let producers = (0..layout.size).map(|_| Mutex::new(())).collect();
        let own_window_first_word = layout.window_offset(rank) / 8;
        let window_words = words_for(layout.window_len);
        ShmTransport {
            segment,
            layout,
            rank,
            own_window_first_word,
            window_words,
            producers,
            consumer: Mutex::new(Consumer::default()),
            cross_memory: None,
        }
    }

    /// Collective over this transport's ranks, whose `exchange` it uses:
    /// probes whether every rank can read every other's memory
    /// (`process_vm_readv`) and, if all can, serves
    /// [`PeerReads::read_peer_memory`] from then on. Every rank gets the
    /// same verdict. `pretend_refused` (a test setting) makes this rank
    /// report a refusal without trying.
    pub fn enable_cross_memory(&mut self, exchange: &dyn Exchange, pretend_refused: bool) -> Result<(), CrossMemoryRefusal> {
        let cross_memory = CrossMemory::establish(exchange, self.rank, self.layout.size, pretend_refused)?;
        self.cross_memory = Some(cross_memory);
        Ok(())
    }

    /// Ranks sharing this node: all of them, for shared memory.
    pub fn local_ranks(&self) -> usize {
        self.layout.size
    }

    /// What this rank maps for the communicator: the whole segment, by part.
    pub fn memory_footprint(&self) -> MemoryFootprint {
        let layout = &self.layout;
        MemoryFootprint {
            shm_segment_bytes: self.segment.len(),
            shm_header_bytes: layout.header_len(),
            shm_windows_bytes: layout.size * layout.window_stride(),
            shm_ranks: layout.size,
            shm_rings_bytes: layout.size * layout.size * RING_BYTES,
            ..MemoryFootprint::default()
        }
    }

    /// The name the segment had while it was being set up (already removed
    /// from the namespace); for diagnostics.
    pub fn segment_name(&self) -> &str {
        self.segment.name()
    }

    /// Where this rank's window lies in this process and how many bytes
    /// (whole pages) it spans: what a verbs transport registers so that
    /// remote writers land in the same window node-local writers use.
    /// Valid while `self` lives.
    #[cfg(feature = "verbs")]
    pub(crate) fn own_window_span(&self) -> (*mut u8, usize) {
        let first = &self.segment.words()[self.own_window_first_word];
        (std::ptr::from_ref(first).cast_mut().cast::<u8>(), self.layout.window_stride())
    }

    #[inline]
    fn window(&self, peer: usize) -> Option<Window<'_>> {
        if peer >= self.layout.size {
            return None;
        }
        let first = self.layout.window_offset(peer) / 8;
        let words = &self.segment.words()[first..first + self.window_words];
        Some(Window::new(words, self.layout.window_len))
    }

    #[inline]
    fn own_window(&self) -> Window<'_> {
        let first = self.own_window_first_word;
        let words = &self.segment.words()[first..first + self.window_words];
        Window::new(words, self.layout.window_len)
    }

    /// `send_reliable`, running `meanwhile` whenever the ring is full: the
    /// hybrid transport drains its other channel there, since a peer held
    /// up on it may be the one this ring waits for.
    pub(crate) fn send_reliable_while(&self, peer: usize, message: &[u8], meanwhile: &dyn Fn()) -> Result<(), TransportError> {
        if peer >= self.layout.size {
            return Err(TransportError::OutOfRange { peer, offset: 0, len: message.len() });
        }
        if message.len() > RELIABLE_MAX {
            return Err(TransportError::TooLarge { len: message.len(), max: RELIABLE_MAX });
        }
        let _sole_producer = lock(&self.producers[peer]);
        let ring = self.ring(self.rank, peer);
        let mut waiter = Waiter::for_process();
        while !ring.try_push(message) {
            self.park_arrivals();
            meanwhile();
            waiter.pause(&OwnChannel { rank: self.rank, size: self.layout.size }, || format!("room in the shared-memory ring from rank {} to rank {peer}", self.rank))?;
        }
        Ok(())
    }

    /// Empties this rank's inbound rings into the parked queue.
    pub(crate) fn park_arrivals(&self) {
        // Whoever holds the lock is consuming already.
        if let Ok(mut consumer) = self.consumer.try_lock() {
            consumer.park_everything_arrived(self);
        }
    }

    #[inline]
    fn ring(&self, sender: usize, receiver: usize) -> Ring<'_> {
        let first = self.layout.ring_offset(sender, receiver) / 8;
        Ring::new(&self.segment.words()[first..first + RING_BYTES / 8])
    }
}


impl Endpoint for ShmTransport {
    fn name(&self) -> &'static str {
        "shm"
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.layout.size
    }

    fn progress(&self) {}
}

impl Windows for ShmTransport {
    fn window_len(&self) -> usize {
        self.layout.window_len
    }

    #[inline]
    fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError> {
        let window = self.window(peer).ok_or(TransportError::OutOfRange { peer, offset, len: data.len() })?;
        window.put(peer, offset, data, flag_offset, flag)
    }

    #[inline]
    fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), TransportError> {
        let window = self.window(peer).ok_or(TransportError::OutOfRange { peer, offset: flag_offset, len: 8 })?;
        window.store_flag(peer, flag_offset, value)
    }

    #[inline]
    fn local_flag(&self, flag_offset: usize) -> u64 {
        self.own_window().load_own_flag(self.rank, flag_offset)
    }

    #[inline]
    fn set_local_flag(&self, flag_offset: usize, value: u64) {
        self.own_window().store_own_flag(self.rank, flag_offset, value);
    }

    #[inline]
    fn read_local(&self, offset: usize, out: &mut [u8]) {
        self.own_window().read_own(self.rank, offset, out);
    }

    #[inline]
    fn prepare_put(&self, peer: usize, offset: usize) {
        if let Some(window) = self.window(peer) {
            window.prepare_put(offset);
        }
    }
}

impl Datagrams for ShmTransport {
    fn multicast_kind(&self) -> MulticastKind {
        MulticastKind::SharedWindow
    }

    fn max_datagram(&self) -> usize {
        0
    }

    fn multicast(&self, _datagram: &[u8]) -> Result<(), TransportError> {
        Err(TransportError::Unsupported("multicast over shared memory"))
    }

    fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize> {
        out.clear();
        None
    }

    fn multicast_nonce(&self) -> u64 {
        0
    }
}

impl ReliableChannel for ShmTransport {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        self.send_reliable_while(peer, message, &|| {})
    }

    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        out.clear();
        let mut consumer = lock(&self.consumer);
        if let Some((sender, mut message)) = consumer.parked.pop_front() {
            std::mem::swap(out, &mut message);
            return Some(sender);
        }
        let size = self.layout.size;
        for step in 0..size {
            let sender = (consumer.next_sender + step) % size;
            if self.ring(sender, self.rank).try_pop(out) {
                consumer.next_sender = (sender + 1) % size;
                return Some(sender);
            }
        }
        None
    }
}

impl PeerReads for ShmTransport {
    #[inline]
    fn read_peer(&self, peer: usize, offset: usize, out: &mut [u8]) -> Result<(), TransportError> {
        let out_of_range = TransportError::OutOfRange { peer, offset, len: out.len() };
        let window = self.window(peer).ok_or(out_of_range.clone())?;
        match offset.checked_add(out.len()) {
            // The range is checked here, so the window's own read cannot panic.
            Some(end) if end <= self.layout.window_len => {
                window.read_own(peer, offset, out);
                Ok(())
            }
            _ => Err(out_of_range),
        }
    }

    #[inline]
    fn peer_flag(&self, peer: usize, flag_offset: usize) -> Result<u64, TransportError> {
        let window = self.window(peer).ok_or(TransportError::OutOfRange { peer, offset: flag_offset, len: 8 })?;
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

impl std::fmt::Debug for ShmTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmTransport")
            .field("rank", &self.rank)
            .field("size", &self.layout.size)
            .field("window_len", &self.layout.window_len)
            .field("segment", &self.segment)
            .finish()
    }
}
