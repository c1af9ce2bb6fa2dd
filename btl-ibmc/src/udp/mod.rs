//! The udp backend: a communicator's transport over plain Ethernet. Each
//! rank has its own UDP socket (bound to the chosen interface) and a
//! socket on the communicator's IPv4 multicast group; datagram multicast
//! is one `sendto` to the group, the reliable per-pair channel is UDP
//! unicast with sequence numbers, ACKs and retransmission (`reliable`,
//! which says why not TCP), and one-sided puts travel as records on that
//! channel, applied to the target's window when it next takes in traffic.
//!
//! Every frame carries the communicator's multicast id and the sender's
//! rank (`frame`); a frame is believed only if it came from the socket
//! address that rank announced at setup (`source`) and its AES-GCM tag
//! verifies under the key rank 0 drew for the communicator (`seal`; by
//! default the body is encrypted too), and taken in once (a replayed
//! counter is dropped). Everything else is dropped and counted
//! ([`UdpStats`]), never delivered and never an error. With
//! `Protection::None` only the address and rank 0's nonce, in clear, are
//! checked: that stops accidents and blind senders, not a host on the
//! same link (docs/security.md).
//!
//! Puts are emulated: the target sees them only when it takes in traffic
//! (its polls, waits and `progress`), which every wait of this crate does
//! while it yields. Peers' windows cannot be read ([`PeerReads`] answers
//! `Unsupported`).

mod config;
mod engine;
mod establish;
mod faults;
mod frame;
mod inbox;
mod interface;
mod probe;
mod record_turn;
mod reliable;
mod seal;
mod socket;
mod source;
mod stats;

#[cfg(test)]
mod tests;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use config::{ETHERNET_DATAGRAM_BYTES, IPV4_UDP_HEADER_BYTES, JUMBO_DATAGRAM_BYTES, UdpConfig, UdpFaults};
pub use establish::{DatagramChoice, UdpSetupError, establish};
pub use faults::REORDER_SPAN;
pub use interface::interface_address;
pub use crate::seal::{Cipher, Protection};
pub use socket::route_source;
pub use stats::UdpStats;

use crate::poison::lock;
use crate::transport::{Datagrams, Endpoint, MulticastKind, PeerReads, ReliableChannel, Sleep, TransportError, Windows};
use crate::wait::Waiter;
use crate::window::Window;
use record_turn::{HeldTurn, RecordTurn};
use engine::{Context, Engine, MESSAGE_RECORD, MOST_MESSAGE_BYTES, PUT_HEADER_BYTES, PUT_RECORD, Wire, check_outgoing_put, send_frame};
use stats::Counters;
use crate::footprint::MemoryFootprint;

/// One rank's udp transport for one communicator.
pub struct UdpTransport {
    rank: usize,
    size: usize,
    window_len: usize,
    config: UdpConfig,
    wire: Wire,
    window: Box<[AtomicU64]>,
    engine: Mutex<Engine>,
    /// Held for a whole record: fragments of two records to one peer must
    /// not interleave, as the receiver joins them in order. A record sent
    /// from inside a wait of this thread's own record is deferred to it.
    record_turn: RecordTurn,
    counters: Counters,
    /// The smaller of the two sockets' granted receive buffers.
    receive_buffer: usize,
    /// Whether multicast batches still go out as segmented sends: cleared
    /// for good the first time the kernel refuses one.
    segmenting: AtomicBool,
    datagram_choice: DatagramChoice,
}

impl UdpTransport {
    /// The communicator's multicast group and port.
    pub fn group(&self) -> SocketAddrV4 {
        self.wire.group
    }

    /// The address this rank's own socket is bound to.
    pub fn local_address(&self) -> SocketAddrV4 {
        self.wire.addresses[self.rank]
    }

    pub fn interface(&self) -> Ipv4Addr {
        *self.local_address().ip()
    }

    /// The window and the sockets' receive buffers the kernel granted.
    pub fn memory_footprint(&self) -> MemoryFootprint {
        MemoryFootprint { udp_window_bytes: self.window.len() * 8, udp_socket_receive_buffer_bytes: self.receive_buffer, ..MemoryFootprint::default() }
    }

    /// Bytes of receive buffer the kernel granted each socket (the
    /// smaller of the two), for a warning when it falls short of the asked.
    pub fn receive_buffer_bytes(&self) -> usize {
        self.receive_buffer
    }

    pub fn stats(&self) -> UdpStats {
        self.counters.snapshot()
    }

    /// How every frame of this communicator is sealed (every rank agreed).
    pub fn protection(&self) -> Protection {
        self.wire.seal.protection()
    }

    /// The AEAD that seals them (every rank agreed; unused under `None`).
    pub fn cipher(&self) -> Cipher {
        self.wire.seal.cipher()
    }

    /// The datagram size all ranks agreed on, and how.
    pub fn datagram_choice(&self) -> &DatagramChoice {
        &self.datagram_choice
    }

    /// Waits, taking in traffic, until every reliable fragment this rank
    /// sent has been acknowledged: before a rank stops taking part (its
    /// peers may still need a retransmission of what it sent last).
    pub fn flush(&self) -> Result<(), TransportError> {
        self.flush_within(None)
    }

    /// `flush`, giving up after `limit` if that comes before the fault timeout.
    fn flush_within(&self, limit: Option<Duration>) -> Result<(), TransportError> {
        // Records deferred to a holder whose record failed go out first
        // (inside this thread's own record, its holder sends them).
        if let Some(turn) = self.record_turn.take() {
            self.send_deferred(&turn)?;
        }
        let mut waiter = Waiter::for_process().giving_up_by(limit);
        loop {
            let unacknowledged: usize = {
                let mut engine = lock(&self.engine);
                engine.pump(&self.context());
                if let Some(failure) = &engine.failure {
                    return Err(self.failed(failure));
                }
                engine.outgoing.iter().map(|outgoing| outgoing.unacknowledged()).sum()
            };
            if unacknowledged == 0 {
                return Ok(());
            }
            waiter.pause(self, || format!("acknowledgement of {unacknowledged} udp reliable fragments"))?;
        }
    }

    /// Test hook: sends raw bytes from this rank's own socket.
    #[cfg(test)]
    pub(crate) fn send_raw(&self, to: SocketAddrV4, bytes: &[u8]) {
        self.wire.own_socket.send_to(bytes, to).expect("a raw test datagram could not be sent");
    }

    /// Test hook: throws away whatever waits on this rank's own socket,
    /// as if it had been lost on the way.
    #[cfg(test)]
    pub(crate) fn lose_waiting_unicast(&self) -> usize {
        let mut buffer = vec![0u8; frame::MAX_UDP_PAYLOAD + 1];
        let mut lost = 0;
        while let Ok(Some(_)) = socket::receive(&self.wire.own_socket, &mut buffer) {
            lost += 1;
        }
        lost
    }

    #[cfg(test)]
    pub(crate) fn stamp(&self) -> frame::Stamp {
        self.wire.stamp
    }

    /// Test hook: seals `frame` (encoded with this rank's stamp) as this
    /// rank would send it to the group or to one rank.
    #[cfg(test)]
    pub(crate) fn seal_as_sent(&self, frame: &mut Vec<u8>, to_group: bool) {
        self.wire.seal.seal_at(frame, 0, to_group);
    }

    /// The endpoint's failure, as every operation reports it.
    fn failed(&self, why: &str) -> TransportError {
        TransportError::Failed(format!("udp: rank {}: {why}", self.rank))
    }

    fn context(&self) -> Context<'_> {
        Context { rank: self.rank, config: &self.config, wire: &self.wire, window: self.own_window(), counters: &self.counters }
    }

    #[inline]
    fn own_window(&self) -> Window<'_> {
        Window::new(&self.window, self.window_len)
    }

    /// Payload of one reliable fragment.
    fn fragment_bytes(&self) -> usize {
        engine::fragment_bytes(&self.config)
    }

    /// Sends a record to `peer` reliably, fragment by fragment, each
    /// waiting (taking in traffic meanwhile) for room in the pair's window.
    /// A call nested inside this thread's own record (a wait's idle hook
    /// reaching this transport again) is deferred: the outer record sends
    /// it right after itself, so it returns at once and never waits for a
    /// turn its own thread holds.
    fn send_record(&self, peer: usize, record: &[u8]) -> Result<(), TransportError> {
        let Some(turn) = self.record_turn.take_or_defer(peer, record) else {
            Counters::bump(&self.counters.records_deferred);
            return Ok(());
        };
        self.send_deferred(&turn)?;
        self.send_fragments(peer, record)?;
        self.send_deferred(&turn)
    }

    /// Sends the records deferred to the turn's holder, oldest first.
    fn send_deferred(&self, turn: &HeldTurn<'_>) -> Result<(), TransportError> {
        while let Some((peer, record)) = turn.next_deferred() {
            self.send_fragments(peer, &record)?;
        }
        Ok(())
    }

    fn send_fragments(&self, peer: usize, record: &[u8]) -> Result<(), TransportError> {
        let fragments = record.len().div_ceil(self.fragment_bytes()).max(1);
        for (index, fragment) in record.chunks(self.fragment_bytes()).enumerate() {
            let last = index + 1 == fragments;
            self.send_fragment(peer, fragment, last)?;
        }
        Ok(())
    }

    fn send_fragment(&self, peer: usize, fragment: &[u8], last: bool) -> Result<(), TransportError> {
        let mut waiter: Option<Waiter> = None;
        loop {
            let mut engine = lock(&self.engine);
            engine.pump(&self.context());
            if let Some(failure) = &engine.failure {
                return Err(self.failed(failure));
            }
            let outgoing = &engine.outgoing[peer];
            if outgoing.has_room(self.config.reliable_window) {
                // Kept unsealed: each sending seals it under a new counter.
                let mut frame = Vec::with_capacity(frame::DATA_HEADER_BYTES + fragment.len());
                frame::encode_data(self.wire.stamp, outgoing.next_seq(), last, fragment, &mut frame);
                if let Err(why) = engine.send_sealed(&self.wire, &frame, self.wire.addresses[peer]) {
                    // The record is cut short: this endpoint cannot go on.
                    engine.failure.get_or_insert(why.clone());
                    return Err(self.failed(&why));
                }
                engine.outgoing[peer].sent(frame, Instant::now());
                engine.awaiting_ack_from(peer);
                Counters::bump(&self.counters.fragments_sent);
                return Ok(());
            }
            let unacknowledged = outgoing.unacknowledged();
            drop(engine);
            // Room comes back only with the peer's ACKs, which this rank
            // takes in at the top of the loop.
            let waiter = waiter.get_or_insert_with(Waiter::for_process);
            waiter.pause(self, || {
                format!("room in the udp reliable channel to rank {peer} ({unacknowledged} fragments unacknowledged)")
            })?;
        }
    }
}

impl Endpoint for UdpTransport {
    fn name(&self) -> &'static str {
        "udp"
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn progress(&self) {
        lock(&self.engine).pump(&self.context());
    }

    fn health(&self) -> Result<(), TransportError> {
        match &lock(&self.engine).failure {
            Some(failure) => Err(self.failed(failure)),
            None => Ok(()),
        }
    }

    fn sleeps_in_kernel(&self) -> bool {
        true
    }

    /// Takes in what is there first: only when that is nothing, and
    /// nothing came since the last sleep either, does it sleep on both
    /// sockets; what wakes it is taken in before it returns.
    fn sleep_until_arrival(&self, longest: Duration) -> Sleep {
        {
            let mut engine = lock(&self.engine);
            engine.pump(&self.context());
            if engine.arrived_since_last_look() || engine.failure.is_some() {
                return Sleep::Woken;
            }
        }
        Counters::bump(&self.counters.sleeps);
        match socket::sleep_until_readable([&self.wire.own_socket, &self.wire.group_socket], longest) {
            Ok(false) => Sleep::TimedOut,
            Ok(true) => {
                Counters::bump(&self.counters.sleeps_woken);
                let mut engine = lock(&self.engine);
                engine.pump(&self.context());
                engine.arrived_since_last_look();
                Sleep::Woken
            }
            Err(error) => {
                lock(&self.engine).failure.get_or_insert_with(|| format!("waiting on the sockets: {error}"));
                Sleep::Woken
            }
        }
    }
}

impl Datagrams for UdpTransport {
    fn multicast_kind(&self) -> MulticastKind {
        MulticastKind::Datagram
    }

    /// The multicast frame's body is the datagram: in whole AES blocks when sealed.
    fn max_datagram(&self) -> usize {
        self.wire.seal.protection().fitted_body(self.config.datagram_bytes - self.frame_overhead())
    }

    fn multicast(&self, datagram: &[u8]) -> Result<(), TransportError> {
        let max = self.max_datagram();
        if datagram.len() > max {
            return Err(TransportError::TooLarge { len: datagram.len(), max });
        }
        let mut frame = Vec::with_capacity(self.frame_overhead() + datagram.len());
        frame::encode_multicast(self.wire.stamp, datagram, &mut frame);
        self.wire.seal.seal_at(&mut frame, 0, true);
        send_frame(&self.wire.own_socket, &frame, self.wire.group).map_err(TransportError::Failed)?;
        Counters::bump(&self.counters.multicast_sent);
        Ok(())
    }

    fn multicast_batch(&self, datagrams: &[&[u8]]) -> Result<(), TransportError> {
        let mut rest = datagrams;
        while !rest.is_empty() {
            let run = if self.segmenting.load(Ordering::Relaxed) { segmentable_run(rest, self.max_datagram(), self.frame_overhead()) } else { 1 };
            let (now, later) = rest.split_at(run);
            if run == 1 || !self.multicast_segmented(now)? {
                now.iter().try_for_each(|datagram| self.multicast(datagram))?;
            }
            rest = later;
        }
        Ok(())
    }

    fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize> {
        out.clear();
        let mut engine = lock(&self.engine);
        if engine.multicast_inbox.is_empty() {
            engine.pump(&self.context());
        }
        // the queued datagram becomes `out`: no copy of its bytes (the
        // buffer `out` held is freed in place of the queued one)
        let (sender, mut datagram) = engine.multicast_inbox.pop()?;
        std::mem::swap(out, &mut datagram);
        Some(sender)
    }

    fn multicast_nonce(&self) -> u64 {
        self.wire.stamp.nonce
    }
}

impl UdpTransport {
    /// What a multicast frame carries besides its payload: header and tag.
    fn frame_overhead(&self) -> usize {
        frame::HEADER_BYTES + self.wire.seal.protection().overhead()
    }

    /// Sends `run` (from [`segmentable_run`]) in one segmented send; false,
    /// having sent nothing, where the kernel refuses segmentation (which
    /// then stays off for this endpoint).
    fn multicast_segmented(&self, run: &[&[u8]]) -> Result<bool, TransportError> {
        let mut frames = Vec::with_capacity(run.iter().map(|datagram| self.frame_overhead() + datagram.len()).sum());
        for datagram in run {
            let start = frames.len();
            frame::append_multicast(self.wire.stamp, datagram, &mut frames);
            self.wire.seal.seal_at(&mut frames, start, true);
        }
        let segment = (self.frame_overhead() + run[0].len()) as u16;
        match socket::send_segmented(&self.wire.own_socket, &frames, segment, self.wire.group) {
            Ok(()) => {}
            // As for single datagrams: a full buffer loses them, as the network may.
            Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => {}
            Err(error) if error.raw_os_error() == Some(libc::ENOBUFS) => {}
            // No UDP_SEGMENT (before Linux 4.18), an interface without
            // checksum offload (EIO), or datagrams longer than the
            // interface's MTU (EMSGSIZE: segments cannot be IP-fragmented,
            // single datagrams can): one datagram per send from now on.
            Err(error) if matches!(error.raw_os_error(), Some(libc::EINVAL | libc::EIO | libc::EMSGSIZE | libc::ENOPROTOOPT | libc::EOPNOTSUPP)) => {
                if self.segmenting.swap(false, Ordering::Relaxed) {
                    tracing::info!("udp: rank {}: segmented sends refused ({error}); sending one datagram per system call", self.rank);
                }
                return Ok(false);
            }
            Err(error) => return Err(TransportError::Failed(format!("sending {} bytes to {}: {error}", frames.len(), self.wire.group))),
        }
        Counters::bump(&self.counters.segmented_sends);
        self.counters.multicast_sent.fetch_add(run.len() as u64, Ordering::Relaxed);
        Ok(true)
    }
}

/// How many of `datagrams`, from the first, one segmented send can carry:
/// all as long as the first but the last, which may be shorter, within
/// the kernel's limits on segments and on the size of one UDP datagram
/// (each datagram becoming a frame `overhead` bytes longer).
fn segmentable_run(datagrams: &[&[u8]], max_datagram: usize, overhead: usize) -> usize {
    let first = datagrams[0].len();
    if first == 0 || first > max_datagram {
        return 1;
    }
    let most = socket::MOST_SEGMENTS.min(frame::MAX_UDP_PAYLOAD / (overhead + first));
    let mut run = 1;
    while run < datagrams.len().min(most) {
        let len = datagrams[run].len();
        if len > first || len == 0 {
            break;
        }
        run += 1;
        if len < first {
            break;
        }
    }
    run
}

impl ReliableChannel for UdpTransport {
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError> {
        if peer >= self.size {
            return Err(TransportError::OutOfRange { peer, offset: 0, len: message.len() });
        }
        if message.len() > MOST_MESSAGE_BYTES {
            return Err(TransportError::TooLarge { len: message.len(), max: MOST_MESSAGE_BYTES });
        }
        let mut record = Vec::with_capacity(1 + message.len());
        record.push(MESSAGE_RECORD);
        record.extend_from_slice(message);
        if peer == self.rank {
            lock(&self.engine).reliable_inbox.push_back((peer, record));
            return Ok(());
        }
        self.send_record(peer, &record)
    }

    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize> {
        out.clear();
        let mut engine = lock(&self.engine);
        if engine.reliable_inbox.is_empty() {
            engine.pump(&self.context());
        }
        let (sender, record) = engine.reliable_inbox.pop_front()?;
        out.extend_from_slice(&record[1..]);
        Some(sender)
    }

    /// Room for every fragment of the message's record in the pair's
    /// window, as `send_fragment` would find it now.
    fn has_room_for(&self, peer: usize, len: usize) -> bool {
        if peer >= self.size || peer == self.rank {
            return true;
        }
        let fragments = (1 + len).div_ceil(self.fragment_bytes()).max(1);
        lock(&self.engine).outgoing[peer].unacknowledged() + fragments <= self.config.reliable_window
    }
}

impl Windows for UdpTransport {
    fn window_len(&self) -> usize {
        self.window_len
    }

    fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError> {
        check_outgoing_put(self.window_len, self.size, peer, offset, data.len(), flag_offset)?;
        if peer == self.rank {
            return self.own_window().put(peer, offset, data, flag_offset, flag);
        }
        let mut record = Vec::with_capacity(PUT_HEADER_BYTES + data.len());
        record.push(PUT_RECORD);
        for word in [offset as u64, flag_offset as u64, flag] {
            record.extend_from_slice(&word.to_le_bytes());
        }
        record.extend_from_slice(data);
        self.send_record(peer, &record)
    }

    fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), TransportError> {
        if peer >= self.size {
            return Err(TransportError::OutOfRange { peer, offset: flag_offset, len: 8 });
        }
        self.put(peer, 0, &[], flag_offset, value)
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
}

/// Peers' windows live in other processes, reached only by puts.
impl PeerReads for UdpTransport {}

/// How long a closing endpoint keeps retransmitting what its peers have
/// not acknowledged: the last put of a closing barrier may have been lost
/// on its way to a peer that is still waiting for it. Long enough for the
/// backed-off retransmissions of a fragment lost several times over (20,
/// 40, ... 1280 ms after the first send). A peer that left first with its
/// last ACK lost does not hold it up: its farewell ACKs end the wait.
/// Only data the peer never received (it left without it) costs the
/// whole linger, as nobody is left to acknowledge it.
const LINGER: Duration = Duration::from_secs(3);

/// Copies of its cumulative ACK a closing rank sends each peer that sent
/// it anything: all of them lost is as unlikely as a fragment lost thrice.
const FAREWELL_ACKS: usize = 3;

impl Drop for UdpTransport {
    fn drop(&mut self) {
        if let Err(why) = self.flush_within(Some(LINGER)) {
            tracing::info!("udp: rank {} closed with reliable fragments unacknowledged: {why}", self.rank);
        }
        lock(&self.engine).send_farewell_acks(&self.context(), FAREWELL_ACKS);
        let stats = self.stats();
        if stats.multicast_sent + stats.multicast_received > 0 {
            tracing::info!(
                "udp: rank {} sent {} multicast datagram(s), {} segmented send(s) among them; received {}, {} coalesced receive(s); \
                 {} reliable fragment(s) sent, {} retransmitted, {} timer burst(s) (longest timeout {} us)",
                self.rank,
                stats.multicast_sent,
                stats.segmented_sends,
                stats.multicast_received,
                stats.coalesced_receives,
                stats.fragments_sent,
                stats.retransmissions,
                stats.timer_resends,
                stats.longest_timer_micros
            );
        }
        if stats.refused() > 0 {
            tracing::info!(
                "udp: rank {} dropped {} frame(s) on {} that were not this communicator's ({} from strangers, {} of another job, \
                 {} failing authentication, {} replayed, {} malformed)",
                self.rank,
                stats.refused(),
                self.wire.group,
                stats.strangers_dropped,
                stats.wrong_job_dropped,
                stats.unauthenticated_dropped,
                stats.replays_dropped,
                stats.malformed_dropped
            );
        }
    }
}

impl std::fmt::Debug for UdpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpTransport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("local", &self.local_address())
            .field("group", &self.wire.group)
            .finish()
    }
}
