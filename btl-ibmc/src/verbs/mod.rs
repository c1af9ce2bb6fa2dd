//! RDMA verbs: windows written one-sidedly over reliable-connected queue
//! pairs, the reliable channel as sends on the same queue pairs, and
//! unreliable multicast over a UD queue pair joined to a group through
//! rdma_cm.
//!
//! A put copies its data into a registered staging ring (or inlines it
//! into the work request when small), posts an RDMA write of the data and
//! then an RDMA write of the flag on the same queue pair, and returns. The
//! adapter places the two writes in order, so a reader that sees the flag
//! sees the data (the RDMA-write channel of Liu, Wu and Panda, 2003). Most
//! writes are unsignalled; every `signal_interval`-th asks for a
//! completion, which gives back the staging of all writes before it.
//!
//! [`establish`] builds a transport collectively; [`probe`] says whether
//! this host can, without building anything.

mod cm_group;
mod completion;
mod config;
mod context;
mod device;
mod error;
mod establish;
mod gid;
mod links;
mod memory;
mod rc;
mod record;
mod reliable;
mod reliable_frame;
mod send_path;
mod staging;
mod ud_frame;
mod ud_multicast;
mod ud_source;
mod work_request;

#[cfg(test)]
mod tests;

use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::time::Duration;

pub use config::{VerbsConfig, multicast_id_of};
pub use device::{DeviceSummary, probe};
pub use error::VerbsSetupError;
pub use establish::establish;
pub(crate) use establish::{Placement, establish_placed};
pub(crate) use memory::BorrowedMemory;

use crate::footprint::MemoryFootprint;
use crate::poison::lock;
use crate::transport::{Datagrams, Endpoint, MulticastKind, PeerReads, ReliableChannel, TransportError, Windows};
use crate::window::Window;
use links::{Failure, Links};
use reliable::ReliableInbox;
use send_path::SendPath;
use ud_multicast::UdMulticast;

/// Bytes of each pre-posted receive buffer of the reliable channel.
const RELIABLE_SLOT_BYTES: usize = 4096;

/// Largest reliable-channel message: a receive buffer less the frame's
/// length and checksum. Enough for a control message or a datagram-sized
/// piece (a 4096-byte path MTU less the datagram header).
pub const RELIABLE_MAX: usize = RELIABLE_SLOT_BYTES - reliable_frame::TRAILER_BYTES;

/// How long dropping a transport waits for its writes in flight to reach
/// their peers before it destroys the queue pairs.
/// By then the caller has quiesced and passed a closing barrier, so all
/// that can be left is that barrier's own last writes, already placed.
const TEARDOWN_PATIENCE: Duration = Duration::from_secs(2);

/// One rank's verbs transport. Dropping it waits for its writes in flight,
/// leaves the multicast group and releases every verbs resource. Peers
/// must have stopped writing into this rank's window by then (the caller's
/// closing barrier sees to that).
pub struct VerbsTransport {
    rank: usize,
    size: usize,
    window_len: usize,
    /// On a device context of its own (rdma_cm's), shared with nothing else.
    multicast: Option<UdMulticast>,
    send_path: Mutex<SendPath>,
    inbox: Mutex<ReliableInbox>,
    failure: Failure,
    links: Links,
}

impl VerbsTransport {
    /// The device, port and GID this transport runs on.
    pub fn device(&self) -> &DeviceSummary {
        &self.links.device.summary
    }

    /// The queue pairs and registered buffers this rank holds for the
    /// communicator, by purpose.
    pub fn memory_footprint(&self) -> MemoryFootprint {
        let links = &self.links;
        MemoryFootprint {
            verbs_queue_pairs: links.queue_pairs.iter().flatten().count(),
            verbs_window_bytes: links.window.len(),
            verbs_window_in_segment: links.window.is_borrowed(),
            verbs_staging_bytes: links.staging.len(),
            verbs_receive_buffer_bytes: links.reliable_buffers.len(),
            verbs_multicast_bytes: self.multicast.as_ref().map_or(0, UdMulticast::registered_bytes),
            verbs_sink_bytes: links.sink.len(),
            ..MemoryFootprint::default()
        }
    }

    /// Whether every RDMA write is cut to one path MTU (Soft-RoCE fails a
    /// queue pair that retransmits a multi-packet write).
    pub fn single_packet_writes(&self) -> bool {
        self.links.device.single_packet_writes
    }

    /// Largest message `send_reliable` accepts.
    pub fn max_reliable(&self) -> usize {
        RELIABLE_MAX
    }

    /// Puts of at most this many bytes skip the staging copy.
    pub fn max_inline(&self) -> usize {
        self.links.max_inline
    }

    /// The group joined, if multicast is in use.
    pub fn multicast_group(&self) -> Option<Ipv4Addr> {
        self.multicast.as_ref().map(UdMulticast::group_address)
    }

    /// Waits until every write and send this rank posted has completed, so
    /// that a following barrier means they have all landed. Call it before
    /// the closing barrier that precedes dropping the transport.
    pub fn quiesce(&self) -> Result<(), TransportError> {
        lock(&self.send_path).quiesce(&self.links, &self.failure, &|| self.drain_inbox())
    }

    /// Takes arrived reliable messages off the adapter and reposts their
    /// buffers. Every wait of the send side calls it: a peer's send to
    /// this rank may be what holds up the completion being waited for.
    fn drain_inbox(&self) {
        // Whoever holds the lock is draining already.
        if let Ok(mut inbox) = self.inbox.try_lock() {
            inbox.drain(&self.links, &self.failure);
        }
    }

    /// `send_reliable`, running `meanwhile` beside draining this
    /// transport's own inbox whenever the send waits: the hybrid
    /// transport empties its node's rings there, since a node-local peer
    /// held up on a full ring may be what keeps the receiver from reposting.
    pub(crate) fn send_reliable_while(&self, peer: usize, message: &[u8], meanwhile: &dyn Fn()) -> Result<(), TransportError> {
        if peer >= self.size {
            return Err(TransportError::OutOfRange { peer, offset: 0, len: message.len() });
        }
        if message.len() > RELIABLE_MAX {
            return Err(TransportError::TooLarge { len: message.len(), max: RELIABLE_MAX });
        }
        if peer == self.rank {
            self.failure.check()?;
            lock(&self.inbox).push_own(self.rank, message);
            return Ok(());
        }
        lock(&self.send_path).send(&self.links, &self.failure, peer, message, &|| {
            self.drain_inbox();
            meanwhile();
        })
    }

    /// Multicast datagrams that had to wait for the adapter to give a send
    /// buffer back (0 without multicast). None is ever dropped at the sender.
    pub fn multicast_send_waits(&self) -> u64 {
        self.multicast.as_ref().map_or(0, UdMulticast::send_waits)
    }

    /// Datagrams received on the group that no rank of this communicator
    /// sent (their source queue pair or address is not one exchanged at
    /// setup) and were dropped (0 without multicast).
    pub fn multicast_strangers_dropped(&self) -> u64 {
        self.multicast.as_ref().map_or(0, UdMulticast::strangers_dropped)
    }

    /// Multicast datagrams from the ranks' own sources that failed
    /// authentication under the communicator's key (0 without multicast).
    pub fn multicast_unauthenticated_dropped(&self) -> u64 {
        self.multicast.as_ref().map_or(0, UdMulticast::unauthenticated_dropped)
    }

    /// Authenticated multicast datagrams dropped as replays (0 without multicast).
    pub fn multicast_replays_dropped(&self) -> u64 {
        self.multicast.as_ref().map_or(0, UdMulticast::replays_dropped)
    }

    /// Test hook: the next datagram that reached this rank's multicast
    /// group, raw (header, body and tag, whoever sent it, this
    /// communicator's or not), as an eavesdropper who joined the group
    /// reads it; false when none is waiting.
    #[cfg(any(test, feature = "fabric"))]
    #[doc(hidden)]
    pub fn eavesdrop_multicast(&self, out: &mut Vec<u8>) -> bool {
        self.multicast.as_ref().is_some_and(|multicast| multicast.receive_raw(out))
    }

    /// How the multicast datagrams are sealed; None without multicast.
    pub fn multicast_protection(&self) -> Option<crate::seal::Protection> {
        self.multicast.as_ref().and_then(UdMulticast::protection)
    }

    #[inline]
    fn own_window(&self) -> Window<'_> {
        Window::new(self.links.window.words(), self.window_len)
    }

    /// Checks a peer index and a put's ranges against the window length
    /// every rank shares, exactly as the shared-memory window does.
    #[inline]
    fn check_put(&self, peer: usize, offset: usize, len: usize, flag_offset: usize) -> Result<(), TransportError> {
        if peer >= self.size {
            return Err(TransportError::OutOfRange { peer, offset, len });
        }
        let window = self.own_window();
        window.flag(peer, flag_offset)?;
        window.check_range(peer, offset, len)
    }
}

impl Endpoint for VerbsTransport {
    fn name(&self) -> &'static str {
        "verbs"
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn progress(&self) {
        // Whoever holds a lock is making the same progress already.
        if let Ok(mut send_path) = self.send_path.try_lock() {
            send_path.progress(&self.links, &self.failure);
        }
        self.drain_inbox();
        if let Some(multicast) = &self.multicast {
            multicast.progress();
        }
    }

    /// The first failure a completion reported (a queue pair in error
    /// after a peer or link died), as the next operation would return it.
    fn health(&self) -> Result<(), TransportError> {
        self.failure.check()
    }
}

impl Windows for VerbsTransport {
    fn window_len(&self) -> usize {
        self.window_len
    }

    fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError> {
        self.check_put(peer, offset, data.len(), flag_offset)?;
        if peer == self.rank {
            return self.own_window().put(peer, offset, data, flag_offset, flag);
        }
        lock(&self.send_path).put(&self.links, &self.failure, peer, offset, data, flag_offset, flag, &|| self.drain_inbox())
    }

    fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), TransportError> {
        self.check_put(peer, flag_offset, 0, flag_offset)?;
        if peer == self.rank {
            return self.own_window().store_flag(peer, flag_offset, value);
        }
        lock(&self.send_path).put_flag(&self.links, &self.failure, peer, flag_offset, value, &|| self.drain_inbox())
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
}

impl Datagrams for VerbsTransport {
    fn multicast_kind(&self) -> MulticastKind {
        if self.multicast.is_some() { MulticastKind::Datagram } else { MulticastKind::None }
    }

    fn max_datagram(&self) -> usize {
        self.multicast.as_ref().map_or(0, UdMulticast::max_datagram)
    }

    fn multicast(&self, datagram: &[u8]) -> Result<(), TransportError> {
        match &self.multicast {
            Some(multicast) => multicast.send(datagram),
            None => Err(TransportError::Unsupported("multicast (the group could not be joined on every rank)")),
        }
    }

    fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize> {
        match &self.multicast {
            Some(multicast) => multicast.receive(out),
            None => {
                out.clear();
                None
            }
        }
    }

    fn multicast_nonce(&self) -> u64 {
        self.multicast.as_ref().map_or(0, UdMulticast::nonce)
    }
}

impl ReliableChannel for VerbsTransport {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        self.send_reliable_while(peer, message, &|| {})
    }

    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        out.clear();
        lock(&self.inbox).take(&self.links, &self.failure, out)
    }

    fn has_room_for(&self, peer: usize, len: usize) -> bool {
        if peer >= self.size || peer == self.rank {
            return true;
        }
        // A send under way holds the path, perhaps waiting for room itself:
        // no room to be had at once.
        self.send_path.try_lock().is_ok_and(|path| path.has_room_for_message(&self.links, peer, len))
    }
}

impl PeerReads for VerbsTransport {}

impl Drop for VerbsTransport {
    fn drop(&mut self) {
        lock(&self.send_path).flush(&self.links, &self.failure, TEARDOWN_PATIENCE);
    }
}

impl std::fmt::Debug for VerbsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsTransport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("window_len", &self.window_len)
            .field("device", &self.links.device.summary.to_string())
            .field("multicast", &self.multicast_group())
            .finish()
    }
}
