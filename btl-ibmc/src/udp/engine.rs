//! Everything a udp endpoint does when it takes in traffic: drains both
//! sockets (through the fault injection, when on), refuses what is not
//! this communicator's (a frame's source address first, then its seal,
//! then its form, then its counter against replays: nothing in a frame
//! changes any state before its seal was verified), queues multicast
//! datagrams and reliable messages,
//! applies peers' puts to the window, and then sends the ACKs and
//! retransmissions that are due. It runs under the endpoint's lock, from
//! every poll, every wait for room, and `progress`.

use std::collections::VecDeque;
use std::net::{SocketAddrV4, UdpSocket};
use std::time::Instant;

use super::faults::{Arrival, FaultInjector};
use super::frame::{self, Body, Refusal, Stamp};
use super::inbox::{MOST_QUEUED_MULTICAST_BYTES, MulticastInbox};
use super::reliable::{AckTaken, Incoming, Outgoing, Receipt, RecordLimits};
use super::seal::{ReplayWindow, Sealer};
use super::source::{Origin, RankAddresses, origin, unreadable_counter};
use super::stats::Counters;
use super::UdpConfig;
use crate::transport::TransportError;
use crate::window::{Window, check_put};

/// Datagrams taken from one socket per pass, so that a flood cannot keep
/// a pass from ending.
const DATAGRAMS_PER_SOCKET_PER_PASS: usize = 4096;
/// A receive buffer that holds any UDP payload, and tells a longer one apart.
const RECEIVE_BUFFER_BYTES: usize = frame::MAX_UDP_PAYLOAD + 1;

/// The kinds of record the reliable channel carries.
pub(crate) const MESSAGE_RECORD: u8 = 0;
/// `[kind | offset u64 | flag offset u64 | flag u64 | data]`: a put into
/// the receiver's window, applied (data, then flag) in channel order.
pub(crate) const PUT_RECORD: u8 = 1;
pub(crate) const PUT_HEADER_BYTES: usize = 1 + 3 * 8;
/// The longest message `send_reliable` takes. Its callers send frames
/// of one datagram at most (pieces, NACKs); the cap lets a receiver
/// bound what it assembles from a peer.
pub(crate) const MOST_MESSAGE_BYTES: usize = 1 << 16;

/// Payload of one reliable fragment: its data frame's body (sequence
/// number and fragment) fills the agreed datagram with the header and
/// the seal, in whole AES blocks when sealed (`Protection::fitted_body`).
pub(crate) fn fragment_bytes(config: &UdpConfig) -> usize {
    let room = config.datagram_bytes.saturating_sub(frame::HEADER_BYTES + config.protection.overhead());
    config.protection.fitted_body(room).saturating_sub(frame::DATA_HEADER_BYTES - frame::HEADER_BYTES)
}

/// What a rank takes from any peer on the reliable channel: fragments
/// no longer than [`fragment_bytes`], records no longer than a message
/// or a put into this rank's window.
pub(crate) fn record_limits(config: &UdpConfig, window_len: usize) -> RecordLimits {
    RecordLimits {
        fragment: fragment_bytes(config),
        record: (1 + MOST_MESSAGE_BYTES).max(PUT_HEADER_BYTES.saturating_add(window_len)),
    }
}

/// What the engine works with besides its own state; none of it changes
/// after setup, so it lives outside the lock.
pub(crate) struct Wire {
    pub(crate) own_socket: UdpSocket,
    pub(crate) group_socket: UdpSocket,
    pub(crate) group: SocketAddrV4,
    /// Indexed by rank: the address every rank's own socket is bound to.
    pub(crate) addresses: RankAddresses,
    pub(crate) stamp: Stamp,
    pub(crate) seal: Sealer,
}

impl Wire {
    /// Seals a copy of `plain` into `scratch` and sends it to one rank.
    pub(crate) fn send_sealed(&self, plain: &[u8], to: SocketAddrV4, scratch: &mut Vec<u8>) -> Result<(), String> {
        send_frame(&self.own_socket, self.seal.seal_copy(plain, false, scratch), to)
    }
}

pub(crate) struct Context<'a> {
    pub(crate) rank: usize,
    pub(crate) config: &'a UdpConfig,
    pub(crate) wire: &'a Wire,
    pub(crate) window: Window<'a>,
    pub(crate) counters: &'a Counters,
}

pub(crate) struct Engine {
    pub(crate) outgoing: Vec<Outgoing>,
    incoming: Vec<Incoming>,
    /// Per sender: the counters taken in from it, to the group and to this rank.
    replay: Vec<[ReplayWindow; 2]>,
    /// Peers owed an ACK, and peers that owe this rank ACKs, so that a
    /// pass touches only those, however large the communicator.
    acks_due: Vec<usize>,
    awaiting_acks: Vec<usize>,
    pub(crate) multicast_inbox: MulticastInbox,
    /// Message records, their kind byte still in front (skipped when
    /// polled, rather than moving every message down by one byte).
    pub(crate) reliable_inbox: VecDeque<(usize, Vec<u8>)>,
    faults: Option<FaultInjector>,
    record_limits: RecordLimits,
    buffer: Vec<u8>,
    /// Scratch for encoding ACKs, and for sealing what goes to one rank.
    frame: Vec<u8>,
    sealed: Vec<u8>,
    arrivals: Vec<Arrival>,
    /// A socket error that ends this endpoint's usefulness.
    pub(crate) failure: Option<String>,
    bad_put_reported: bool,
    /// This communicator's frames taken in (sealed, fresh, from the rank
    /// they name), and their count when a sleeping wait last looked (see
    /// [`Engine::arrived_since_last_look`]).
    handled: u64,
    handled_at_last_look: u64,
}

impl Engine {
    pub(crate) fn new(rank: usize, size: usize, window_len: usize, config: &UdpConfig) -> Self {
        Engine {
            outgoing: (0..size).map(|_| Outgoing::new(config.retransmit_timing())).collect(),
            incoming: (0..size).map(|_| Incoming::new()).collect(),
            replay: (0..size).map(|_| [ReplayWindow::new(), ReplayWindow::new()]).collect(),
            acks_due: Vec::new(),
            awaiting_acks: Vec::new(),
            multicast_inbox: MulticastInbox::new(MOST_QUEUED_MULTICAST_BYTES),
            reliable_inbox: VecDeque::new(),
            faults: config.faults.any().then(|| FaultInjector::new(config.faults, rank)),
            record_limits: record_limits(config, window_len),
            buffer: vec![0; RECEIVE_BUFFER_BYTES],
            frame: Vec::new(),
            sealed: Vec::new(),
            arrivals: Vec::new(),
            failure: None,
            bad_put_reported: false,
            handled: 0,
            handled_at_last_look: 0,
        }
    }

    /// Takes in whatever arrived, then sends what is due.
    pub(crate) fn pump(&mut self, cx: &Context) {
        let mut received = 0;
        for to_group in [false, true] {
            let socket = if to_group { &cx.wire.group_socket } else { &cx.wire.own_socket };
            received += self.drain_socket(cx, socket, to_group);
        }
        if received == 0
            && let Some(injector) = &mut self.faults
        {
            // The burst is over: nothing held may wait for later traffic.
            let mut arrivals = std::mem::take(&mut self.arrivals);
            injector.release(true, &mut arrivals);
            for mut arrival in arrivals.drain(..) {
                self.handle(cx, &mut arrival.bytes, arrival.from, arrival.to_group);
            }
            self.arrivals = arrivals;
        }
        self.send_acks(cx);
        self.resend_due(cx);
    }

    fn drain_socket(&mut self, cx: &Context, socket: &UdpSocket, to_group: bool) -> usize {
        let mut buffer = std::mem::take(&mut self.buffer);
        let mut taken = 0;
        while taken < DATAGRAMS_PER_SOCKET_PER_PASS {
            let received = match super::socket::receive(socket, &mut buffer) {
                Ok(Some(received)) => received,
                Ok(None) => break,
                Err(error) => {
                    self.failure.get_or_insert_with(|| format!("receiving on {}: {error}", if to_group { "the group socket" } else { "the rank's socket" }));
                    break;
                }
            };
            taken += 1;
            let from = received.from;
            if to_group && cx.config.faults.multicast_lost {
                Counters::bump(&cx.counters.injected_drops);
                continue;
            }
            if received.len > buffer.len() {
                Counters::bump(unreadable_counter(cx.counters, from, &cx.wire.addresses));
                continue;
            }
            let bytes = &mut buffer[..received.len];
            match received.segment {
                // Several datagrams of one segmented send, each taken in
                // (and exposed to injected faults) as if it came alone.
                Some(segment) if segment < bytes.len() => {
                    Counters::bump(&cx.counters.coalesced_receives);
                    for datagram in bytes.chunks_mut(segment) {
                        self.admit(cx, datagram, from, to_group);
                    }
                }
                _ => self.admit(cx, bytes, from, to_group),
            }
        }
        self.buffer = buffer;
        taken
    }

    /// One datagram received: through the fault injection, when on.
    fn admit(&mut self, cx: &Context, bytes: &mut [u8], from: SocketAddrV4, to_group: bool) {
        match &mut self.faults {
            None => self.handle(cx, bytes, from, to_group),
            Some(injector) => {
                let mut arrivals = std::mem::take(&mut self.arrivals);
                injector.admit(Arrival { bytes: bytes.to_vec(), from, to_group }, cx.counters, &mut arrivals);
                for mut arrival in arrivals.drain(..) {
                    self.handle(cx, &mut arrival.bytes, arrival.from, arrival.to_group);
                }
                self.arrivals = arrivals;
            }
        }
    }

    /// Takes in one datagram (opening its seal in place); anything that is
    /// not this communicator's own traffic, sent by the rank it names, is
    /// dropped and counted.
    fn handle(&mut self, cx: &Context, bytes: &mut [u8], from: SocketAddrV4, to_group: bool) {
        let counters = cx.counters;
        let Some(claimed) = frame::claimed_sender(bytes) else {
            return Counters::bump(unreadable_counter(counters, from, &cx.wire.addresses));
        };
        let rank = match origin(claimed, from, cx.rank, &cx.wire.addresses) {
            Origin::Rank(rank) => rank,
            Origin::OwnCopy if to_group => return,
            Origin::OwnCopy | Origin::Stranger => return Counters::bump(&counters.strangers_dropped),
        };
        let refused = |refusal: Refusal| match refusal {
            Refusal::WrongJob => Counters::bump(&counters.wrong_job_dropped),
            Refusal::Malformed => Counters::bump(&counters.malformed_dropped),
            Refusal::Unauthenticated => Counters::bump(&counters.unauthenticated_dropped),
        };
        // A multicast frame's body is opened into the buffer it is queued
        // in (under `encrypt`, decrypted into it: one pass over the body,
        // where opening in place and then copying took two); other frames
        // are opened in place. Nothing is kept of a frame that fails to open.
        let says_multicast = frame::says_multicast(bytes);
        let mut opened_payload = Vec::new();
        let opened = if says_multicast {
            cx.wire.seal.open_body_into(bytes, cx.wire.stamp.communicator, &mut opened_payload)
        } else {
            cx.wire.seal.open(bytes, cx.wire.stamp.communicator)
        };
        let (plain, counter) = match opened {
            Ok(opened) => opened,
            Err(refusal) => return refused(refusal),
        };
        let body = match frame::decode(plain) {
            Ok(body) => body,
            Err(refusal) => return refused(refusal),
        };
        // Frames to the group arrive on the group socket and carry group
        // counters; the rest, on the rank's own socket. A frame that went
        // astray is dropped before its counter is taken, so that a copy
        // sent to the wrong socket cannot spend the genuine one's counter.
        let socket_fits = match body {
            Body::Multicast(_) | Body::Probe { .. } => to_group,
            Body::Data { .. } | Body::Ack { .. } => !to_group,
        };
        if !socket_fits || counter.is_some_and(|counter| counter.to_group != to_group) {
            return Counters::bump(&counters.malformed_dropped);
        }
        if let Some(counter) = counter
            && !self.replay[rank][usize::from(to_group)].admit(counter.value)
        {
            return Counters::bump(&counters.replays_dropped);
        }
        // Only this communicator's traffic counts as an arrival: what a
        // stranger sends may keep no wait from sleeping.
        self.handled = self.handled.wrapping_add(1);
        match (body, to_group) {
            (Body::Multicast(header_only), true) => {
                debug_assert!(says_multicast && header_only.is_empty(), "a multicast frame opened in place");
                if !self.multicast_inbox.push(rank, opened_payload) {
                    return Counters::bump(&counters.multicast_overflows);
                }
                Counters::bump(&counters.multicast_received);
            }
            (Body::Data { seq, last, fragment }, false) => {
                let mut records = Vec::new();
                let incoming = &mut self.incoming[rank];
                let limits = self.record_limits;
                let receipt = incoming.accept(seq, last, fragment, cx.config.reliable_window, limits, |record| records.push(record));
                match receipt {
                    Receipt::Accepted => {}
                    Receipt::Duplicate => Counters::bump(&counters.duplicates_dropped),
                    // Counted as malformed: no sender of this backend goes
                    // past the window or the agreed fragment size.
                    Receipt::OutOfWindow | Receipt::Oversized => return Counters::bump(&counters.malformed_dropped),
                    Receipt::RecordTooLong => {
                        Counters::bump(&counters.malformed_dropped);
                        self.failure.get_or_insert_with(|| {
                            format!(
                                "rank {rank} sent a reliable record longer than {} bytes, the most a message or a put into this rank's window can be; \
                                 nothing more from it can be delivered",
                                limits.record
                            )
                        });
                        return;
                    }
                }
                if incoming.mark_ack_due() {
                    self.acks_due.push(rank);
                }
                for record in records {
                    self.take_record(cx, rank, record);
                }
            }
            (Body::Ack { next, reported }, false) => {
                let (outgoing, now, sealed) = (&mut self.outgoing[rank], Instant::now(), &mut self.sealed);
                match outgoing.acknowledged(next, reported, now) {
                    AckTaken::Refused => return Counters::bump(&counters.malformed_dropped),
                    AckTaken::Taken { sampled: true } => Counters::bump(&counters.rtt_samples),
                    AckTaken::Taken { sampled: false } => {}
                }
                match outgoing.fast_resend(|frame| cx.wire.send_sealed(frame, from, sealed)) {
                    Ok(resent) => {
                        counters.retransmissions.fetch_add(resent as u64, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(why) => {
                        self.failure.get_or_insert(why);
                    }
                }
            }
            // A probe of setup's, late: it proved its point already.
            (Body::Probe { .. }, true) => {}
            // Multicast sent to a rank's port, or unicast to the group.
            _ => Counters::bump(&counters.malformed_dropped),
        }
    }

    /// Whether anything was taken in since the previous call. A wait may
    /// sleep on the sockets only when nothing was: what an earlier pass
    /// took in (its own caller's progress, between its look and its
    /// sleep) has left the sockets, and would otherwise wait unseen until
    /// the sleep ends.
    pub(crate) fn arrived_since_last_look(&mut self) -> bool {
        let arrived = self.handled != self.handled_at_last_look;
        self.handled_at_last_look = self.handled;
        arrived
    }

    /// A record `rank` sent reliably, complete and in order.
    fn take_record(&mut self, cx: &Context, rank: usize, record: Vec<u8>) {
        match record.first() {
            Some(&MESSAGE_RECORD) => self.reliable_inbox.push_back((rank, record)),
            Some(&PUT_RECORD) if record.len() >= PUT_HEADER_BYTES => {
                let word = |at: usize| u64::from_le_bytes(record[at..at + 8].try_into().unwrap_or([0; 8]));
                let (offset, flag_offset, flag) = (word(1), word(9), word(17));
                let data = &record[PUT_HEADER_BYTES..];
                let applied = match (usize::try_from(offset), usize::try_from(flag_offset)) {
                    (Ok(offset), Ok(flag_offset)) => cx.window.put(cx.rank, offset, data, flag_offset, flag),
                    _ => Err(TransportError::OutOfRange { peer: cx.rank, offset: usize::MAX, len: data.len() }),
                };
                if let Err(why) = applied {
                    Counters::bump(&cx.counters.bad_puts_dropped);
                    if !std::mem::replace(&mut self.bad_put_reported, true) {
                        tracing::warn!("udp: rank {} dropped a put from rank {rank} outside its window: {why}", cx.rank);
                    }
                }
            }
            _ => Counters::bump(&cx.counters.malformed_dropped),
        }
    }

    /// Seals a copy of `plain` in this engine's scratch and sends it to one rank.
    pub(crate) fn send_sealed(&mut self, wire: &Wire, plain: &[u8], to: SocketAddrV4) -> Result<(), String> {
        wire.send_sealed(plain, to, &mut self.sealed)
    }

    /// Lists `peer` among those that owe this rank ACKs, after a send.
    pub(crate) fn awaiting_ack_from(&mut self, peer: usize) {
        let outgoing = &mut self.outgoing[peer];
        if !std::mem::replace(&mut outgoing.listed, true) {
            self.awaiting_acks.push(peer);
        }
    }

    fn send_acks(&mut self, cx: &Context) {
        for peer in self.acks_due.drain(..) {
            let incoming = &mut self.incoming[peer];
            if incoming.take_ack_due() {
                frame::encode_ack(cx.wire.stamp, incoming.next_expected(), incoming.reported_early(), &mut self.frame);
                if let Err(why) = cx.wire.send_sealed(&self.frame, cx.wire.addresses[peer], &mut self.sealed) {
                    self.failure.get_or_insert(why);
                }
                Counters::bump(&cx.counters.acks_sent);
            }
        }
    }

    /// A closing rank's farewell: every peer that sent it anything gets
    /// its cumulative ACK `copies` times, unasked. A peer whose last ACK
    /// was lost would otherwise retransmit to a closed port, unanswered,
    /// until its own linger ran out.
    pub(crate) fn send_farewell_acks(&mut self, cx: &Context, copies: usize) {
        for (peer, incoming) in self.incoming.iter().enumerate() {
            if peer == cx.rank || (incoming.next_expected() == 0 && incoming.reported_early() == 0) {
                continue;
            }
            frame::encode_ack(cx.wire.stamp, incoming.next_expected(), incoming.reported_early(), &mut self.frame);
            for _ in 0..copies {
                // Best effort: a closing rank has no one left to tell.
                if cx.wire.send_sealed(&self.frame, cx.wire.addresses[peer], &mut self.sealed).is_ok() {
                    Counters::bump(&cx.counters.acks_sent);
                }
            }
        }
    }

    fn resend_due(&mut self, cx: &Context) {
        if self.awaiting_acks.is_empty() {
            return;
        }
        let now = Instant::now();
        let (outgoing, failure, sealed) = (&mut self.outgoing, &mut self.failure, &mut self.sealed);
        self.awaiting_acks.retain(|&peer| {
            let outgoing = &mut outgoing[peer];
            let to = cx.wire.addresses[peer];
            let timeout = outgoing.timeout();
            match outgoing.resend_due(now, |frame| cx.wire.send_sealed(frame, to, sealed)) {
                Ok(resent) => {
                    cx.counters.retransmissions.fetch_add(resent as u64, std::sync::atomic::Ordering::Relaxed);
                    if resent > 0 {
                        Counters::bump(&cx.counters.timer_resends);
                        let micros = u64::try_from(timeout.as_micros()).unwrap_or(u64::MAX);
                        cx.counters.longest_timer_micros.fetch_max(micros, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                Err(why) => {
                    failure.get_or_insert(why);
                }
            }
            outgoing.listed = outgoing.unacknowledged() > 0;
            outgoing.listed
        });
    }
}

/// Sends one datagram. A full socket buffer or interface queue loses it,
/// as the network may (whoever needs it sends it again); anything else
/// is a failure of this endpoint.
pub(crate) fn send_frame(socket: &UdpSocket, frame: &[u8], to: SocketAddrV4) -> Result<(), String> {
    match socket.send_to(frame, to) {
        Ok(_) => Ok(()),
        Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => Ok(()),
        Err(error) if error.raw_os_error() == Some(libc::ENOBUFS) => Ok(()),
        // Linux reports ICMP port-unreachable on an unconnected UDP socket
        // only with IP_RECVERR, which is not set, so this does not happen
        // here; elsewhere it would be an earlier datagram's error, not this one's.
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => Ok(()),
        Err(error) => Err(format!("sending {} bytes to {to}: {error}", frame.len())),
    }
}

/// Checks a put before it is sent, as the target's window would.
pub(crate) fn check_outgoing_put(window_len: usize, size: usize, peer: usize, offset: usize, len: usize, flag_offset: usize) -> Result<(), TransportError> {
    if peer >= size {
        return Err(TransportError::OutOfRange { peer, offset, len });
    }
    check_put(window_len, peer, offset, len, flag_offset)
}
