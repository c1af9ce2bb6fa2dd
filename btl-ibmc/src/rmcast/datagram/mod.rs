//! Reliable multicast over lossy datagrams: each rank's own stream as a
//! root (`sender`), its view of every other root's stream (`receiver`),
//! and the traffic between them, demultiplexed here. Whatever a rank is
//! waiting for, it keeps serving every stream, so a root whose window is
//! full and a receiver waiting for a piece both keep others moving.

mod collector;
mod nack;
mod parity;
mod receiver;
mod ring;
mod sender;
mod transfer;

use std::time::Instant;

use receiver::Receiver;
use ring::RingPool;
use sender::Sender;

use super::config::RmcastConfig;
use super::region::DatagramRegion;
use super::repair::ParityPlan;
use super::stats::RmcastStats;
use super::transfer::Transfer;
use super::wire::{Frame, PARITY_HEADER_BYTES, PIECE_HEADER_BYTES, decode};
use super::protocol_error;
use crate::transport::{Datagrams, ReliableChannel, TransportError, Windows};

/// Pieces a root queues before it sends them as one batch: as many as
/// one segmented udp send carries (64 KiB of 1500-byte datagrams), few
/// enough that receivers start on a batch while the next is prepared.
const MOST_QUEUED_PIECES: u64 = 32;

/// Receive rings (W frames each) a rank keeps lent to streams that no
/// longer need them, for the next bcasts of those roots; beyond this a
/// new root's stream takes a drained one's.
pub(crate) const KEPT_RINGS: usize = 4;

/// How a frame reached this rank, and who the transport says sent it.
#[derive(Clone, Copy, Debug)]
enum Arrival {
    Multicast { sender: usize },
    Reliable { from: usize },
}

/// What a message to a peer over the reliable channel does when the
/// channel to that peer is full (`ReliableChannel::has_room_for`).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Room {
    /// Waits for room: the message is new to the peer (a first NACK, an
    /// answer to a NACK).
    WaitFor,
    /// Stops at the first message without room: it only repeats what the
    /// channel already carries (a collector's timeout-driven resend, a
    /// leaf's NACK repeat). A peer that leaves its channel full is away
    /// from MPI (a rank computing), the channel delivers what it holds
    /// once the peer is back, and waiting for room would hold this rank
    /// inside whatever MPI call ran the progress pass until then.
    StopWithout,
}

pub(crate) struct DatagramFlavour {
    me: usize,
    size: usize,
    /// The communicator's nonce, stamped on every frame and demanded back.
    nonce: u64,
    /// Whether a rejected frame has been reported (once is enough).
    rejection_reported: bool,
    config: RmcastConfig,
    /// Whether congestion control runs over this transport.
    congestion: bool,
    region: DatagramRegion,
    piece_bytes: usize,
    /// Whether a parity frame (a shard of a padded piece) fits a datagram.
    parity_fits: bool,
    sender: Option<Sender>,
    /// Indexed by root; made when the root's first piece or call comes.
    /// Each holds counts only (tens of bytes, O(members) at a co-root);
    /// the slots, up to W frames each, are lent from `rings` while a
    /// stream holds pieces, so memory follows the streams in flight, not
    /// the roots ever heard.
    receivers: Vec<Option<Receiver>>,
    rings: RingPool,
    inbox: Vec<u8>,
}

impl DatagramFlavour {
    pub(crate) fn new(
        me: usize,
        size: usize,
        region_offset: usize,
        config: RmcastConfig,
        max_datagram: usize,
        nonce: u64,
        congestion: bool,
    ) -> Result<Self, TransportError> {
        let config = config.for_datagrams(congestion);
        let room = max_datagram.checked_sub(PIECE_HEADER_BYTES).filter(|&room| room > 0).ok_or(TransportError::TooLarge {
            len: PIECE_HEADER_BYTES + 1,
            max: max_datagram,
        })?;
        Ok(DatagramFlavour {
            me,
            size,
            nonce,
            rejection_reported: false,
            region: DatagramRegion::new(region_offset, size, &config),
            piece_bytes: config.fragment_bytes.min(room),
            parity_fits: PARITY_HEADER_BYTES + parity::shard_bytes(config.fragment_bytes.min(room)) <= max_datagram,
            config,
            congestion,
            sender: None,
            receivers: (0..size).map(|_| None).collect(),
            rings: RingPool::default(),
            inbox: Vec::new(),
        })
    }

    pub(crate) fn piece_bytes(&self) -> usize {
        self.piece_bytes
    }

    fn sender(&mut self) -> &mut Sender {
        let (me, size, nonce, config, congestion, region) = (self.me, self.size, self.nonce, &self.config, self.congestion, &self.region);
        self.sender.get_or_insert_with(|| Sender::new(me, size, nonce, config, congestion, region, Instant::now()))
    }

    fn receiver(&mut self, root: usize) -> &mut Receiver {
        self.receiver_and_rings(root).0
    }

    fn receiver_and_rings(&mut self, root: usize) -> (&mut Receiver, &mut RingPool) {
        let (me, size, nonce, config, congestion, region, piece_bytes) = (self.me, self.size, self.nonce, &self.config, self.congestion, &self.region, self.piece_bytes);
        let receiver = self.receivers[root].get_or_insert_with(|| Receiver::new(me, root, size, nonce, config, congestion, region, piece_bytes, Instant::now()));
        (receiver, &mut self.rings)
    }

    /// Before `root`'s stream borrows slots: when `KEPT_RINGS` are lent
    /// already, takes back those of one drained stream, if any. Streams
    /// keep their slots until then, so bcasts from one root in a row
    /// reuse them at no cost; a stream not drained keeps them whatever
    /// the pressure (its pieces are needed).
    fn make_room_for(&mut self, root: usize) {
        if self.rings.lent() < KEPT_RINGS || self.receivers[root].as_ref().is_some_and(Receiver::has_slots) {
            return;
        }
        for receiver in self.receivers.iter_mut().flatten() {
            if receiver.give_back_if_drained(&mut self.rings) {
                return;
            }
        }
    }

    /// Rings of receive slots this rank has made: the memory its receive
    /// state holds is at most this many windows of frames.
    #[cfg(test)]
    pub(crate) fn receive_rings_made(&self) -> usize {
        self.rings.made()
    }

    /// Streams that hold receive slots now.
    #[cfg(test)]
    pub(crate) fn streams_holding_slots(&self) -> usize {
        self.receivers.iter().flatten().filter(|receiver| receiver.has_slots()).count()
    }

    /// The blocking send: `step_send` until every piece is out.
    pub(crate) fn send<T: Windows + Datagrams + ReliableChannel + ?Sized>(&mut self, transport: &T, message: &[u8], stats: &mut RmcastStats) -> Result<(), TransportError> {
        let mut transfer = Transfer::new(self.me, message.len());
        self.step_until_done(transport, &mut transfer, |this, transfer| this.step_send(transport, transfer, message, stats))
    }

    /// Takes `step` until it says done, waiting between steps; a step
    /// that moved the transfer starts the wait afresh, so the stall limit
    /// applies to each wait, not to the whole message.
    fn step_until_done<T, S>(&mut self, transport: &T, transfer: &mut Transfer, mut step: S) -> Result<(), TransportError>
    where
        T: Windows + Datagrams + ReliableChannel + ?Sized,
        S: FnMut(&mut Self, &mut Transfer) -> Result<bool, TransportError>,
    {
        let mut waiter = self.config.waiter();
        loop {
            let before = transfer.pieces_done;
            if step(self, transfer)? {
                return Ok(());
            }
            if transfer.pieces_done != before {
                waiter = self.config.waiter();
            }
            let this = &*self;
            waiter.pause(transport, || this.describe_transfer(transfer))?;
        }
    }

    /// The parity for a message of `count` pieces: none where a parity
    /// frame does not fit a datagram, the message has more pieces than
    /// the frame can number, or a block would be wider than the window.
    fn plan_parity(&mut self, count: usize) -> ParityPlan {
        let (receivers, most_percent, assumed_loss) = (self.size - 1, self.config.parity_percent, self.config.parity_assumed_loss);
        if !self.parity_fits || u32::try_from(count).is_err() {
            return ParityPlan::NONE;
        }
        let plan = self.sender().plan_parity(count, receivers, most_percent, assumed_loss);
        // A block wider than the window could not be rebuilt from slots.
        if plan.parity > 0 && plan.block_pieces as u64 <= self.config.window() { plan } else { ParityPlan::NONE }
    }

    /// The blocking receive: `step_receive` until every piece is in.
    pub(crate) fn receive<T: Windows + Datagrams + ReliableChannel + ?Sized>(
        &mut self,
        transport: &T,
        root: usize,
        message: &mut [u8],
        stats: &mut RmcastStats,
    ) -> Result<(), TransportError> {
        let mut transfer = Transfer::new(root, message.len());
        self.step_until_done(transport, &mut transfer, |this, transfer| this.step_receive(transport, transfer, message, stats))
    }

    /// Takes in everything that arrived and does what is due: ACKs,
    /// forwards, NACK answers and retransmissions, for every stream.
    pub(crate) fn progress<T: Windows + Datagrams + ReliableChannel + ?Sized>(&mut self, transport: &T, stats: &mut RmcastStats) -> Result<(), TransportError> {
        transport.progress();
        let now = Instant::now();
        let mut inbox = std::mem::take(&mut self.inbox);
        let taken = self.take_arrivals(transport, &mut inbox, now, stats);
        self.inbox = inbox;
        taken?;
        if let Some(sender) = &mut self.sender {
            sender.tick(transport, now, stats)?;
            if let Some((cwnd, rto)) = sender.congestion_gauges() {
                stats.cwnd = cwnd;
                stats.rto_micros = rto.as_micros() as u64;
            }
        }
        for receiver in self.receivers.iter_mut().flatten() {
            receiver.tick(transport, now, stats)?;
        }
        Ok(())
    }

    fn take_arrivals<T: Windows + Datagrams + ReliableChannel + ?Sized>(&mut self, transport: &T, inbox: &mut Vec<u8>, now: Instant, stats: &mut RmcastStats) -> Result<(), TransportError> {
        while let Some(sender) = transport.poll_multicast(inbox) {
            self.on_frame(transport, Arrival::Multicast { sender }, inbox, now, stats)?;
        }
        while let Some(from) = transport.poll_reliable(inbox) {
            self.on_frame(transport, Arrival::Reliable { from }, inbox, now, stats)?;
        }
        Ok(())
    }

    /// Takes in one frame. Anything that is not this communicator's own
    /// traffic, carried by the rank entitled to carry it, is dropped and
    /// counted: a datagram may come from anywhere on the group, and no
    /// stranger may fail or feed a broadcast. Errors are the transport's.
    fn on_frame<T: Windows + Datagrams + ReliableChannel + ?Sized>(
        &mut self,
        transport: &T,
        arrival: Arrival,
        bytes: &[u8],
        now: Instant,
        stats: &mut RmcastStats,
    ) -> Result<(), TransportError> {
        let frame = match decode(bytes, self.nonce) {
            Ok(frame) => frame,
            Err(refusal) => return Ok(self.reject(arrival, format_args!("{refusal}"), stats)),
        };
        match (frame, arrival) {
            (Frame::Piece(header, _), _) if header.root >= self.size || header.root == self.me => {
                self.reject(arrival, format_args!("piece {} claims root {}", header.seq, header.root), stats);
            }
            // Only the root multicasts its pieces.
            (Frame::Piece(header, _), Arrival::Multicast { sender }) if sender != header.root => {
                self.reject(arrival, format_args!("piece {} of root {} multicast by rank {sender}", header.seq, header.root), stats);
            }
            (Frame::Piece(header, _), Arrival::Reliable { from }) if !self.receiver(header.root).carried_by(from) => {
                self.reject(arrival, format_args!("piece {} of root {} passed on by rank {from}, who does not carry it here", header.seq, header.root), stats);
            }
            (Frame::Piece(header, _), arrival) => {
                let receiver = self.receiver(header.root);
                if let Arrival::Reliable { .. } = arrival {
                    receiver.took_carried_piece();
                }
                // A copy or a stale piece is dropped on the counts alone,
                // before it can make another stream give its slots back.
                if receiver.wants(transport, header.seq, stats) {
                    self.make_room_for(header.root);
                    let (receiver, rings) = self.receiver_and_rings(header.root);
                    receiver.accept(transport, header, bytes, now, rings, stats)?
                }
            }
            (Frame::Parity(header, _), _) if header.root >= self.size || header.root == self.me => {
                self.reject(arrival, format_args!("parity claims root {}", header.root), stats);
            }
            // Only the root multicasts its parity; nobody passes it on.
            (Frame::Parity(header, _), Arrival::Multicast { sender }) if sender != header.root => {
                self.reject(arrival, format_args!("parity of root {} multicast by rank {sender}", header.root), stats);
            }
            (Frame::Parity(header, _), Arrival::Reliable { .. }) => {
                self.reject(arrival, format_args!("parity of root {} not multicast", header.root), stats);
            }
            (Frame::Parity(header, shard), Arrival::Multicast { .. }) => {
                let taken = self.receiver(header.root).take_parity(transport, &header, shard, now, stats)?;
                match taken {
                    Ok(rebuilt) => self.take_rebuilt(transport, header.root, rebuilt, now, stats)?,
                    Err(why) => {
                        stats.parity_refused += 1;
                        self.reject(arrival, format_args!("{why}"), stats);
                    }
                }
            }
            (Frame::Nack { root, .. }, Arrival::Multicast { .. }) => {
                self.reject(arrival, format_args!("NACK for root {root} not over the reliable channel"), stats);
            }
            (Frame::Nack { root, from: first, to }, Arrival::Reliable { from: asker }) => {
                let served = if root >= self.size {
                    false
                } else if root == self.me {
                    self.sender().serve_nack(transport, asker, first..to, now, stats)?
                } else {
                    self.receiver(root).serve_nack(transport, asker, first..to, now, stats)?
                };
                if !served {
                    self.reject(arrival, format_args!("NACK for root {root} from rank {asker}, which this rank does not collect for"), stats);
                }
            }
        }
        Ok(())
    }

    /// Takes in pieces rebuilt from parity like multicast arrivals.
    fn take_rebuilt<T: Windows + Datagrams + ReliableChannel + ?Sized>(
        &mut self,
        transport: &T,
        root: usize,
        rebuilt: Vec<Vec<u8>>,
        now: Instant,
        stats: &mut RmcastStats,
    ) -> Result<(), TransportError> {
        for frame in rebuilt {
            let Ok(Frame::Piece(header, _)) = decode(&frame, self.nonce) else {
                return Err(protocol_error(root, 0, "was rebuilt into a frame that is not a piece"));
            };
            if self.receiver(root).wants(transport, header.seq, stats) {
                self.make_room_for(root);
                let (receiver, rings) = self.receiver_and_rings(root);
                receiver.accept(transport, header, &frame, now, rings, stats)?;
                stats.pieces_rebuilt += 1;
            }
        }
        Ok(())
    }

    /// Drops a frame: counted always, reported once per communicator.
    #[cold]
    fn reject(&mut self, arrival: Arrival, why: std::fmt::Arguments<'_>, stats: &mut RmcastStats) {
        stats.frames_rejected += 1;
        if !self.rejection_reported {
            self.rejection_reported = true;
            tracing::info!(
                "rank {}: reliable multicast dropped a frame ({arrival:?}): {why}; later ones are only counted",
                self.me
            );
        }
    }

    /// Writes every pending lazy ACK now.
    pub(crate) fn flush_acks<T: Windows + Datagrams + ReliableChannel + ?Sized>(&mut self, transport: &T, stats: &mut RmcastStats) -> Result<(), TransportError> {
        for receiver in self.receivers.iter_mut().flatten() {
            receiver.flush_ack(transport, stats)?;
        }
        Ok(())
    }

    pub(crate) fn idle(&self) -> bool {
        self.own_stream_acknowledged() && self.receivers.iter().flatten().all(Receiver::idle)
    }

    /// Every piece this rank sent as a root is acknowledged by every member.
    pub(crate) fn own_stream_acknowledged(&self) -> bool {
        self.sender.as_ref().is_none_or(Sender::idle)
    }

    pub(crate) fn describe_own_stream(&self) -> String {
        self.sender.as_ref().map_or_else(String::new, Sender::describe_unacknowledged)
    }

    /// What keeps this rank from being idle: its own stream's silent
    /// members and every other root's stream it still owes something.
    pub(crate) fn describe_pending(&self) -> String {
        let own = self.sender.as_ref().filter(|sender| !sender.idle()).map(Sender::describe_unacknowledged);
        let others = self.receivers.iter().flatten().filter(|receiver| !receiver.idle()).map(Receiver::describe_pending);
        own.into_iter().chain(others).collect::<Vec<_>>().join("; ")
    }

    /// Pieces this rank has sent as a root.
    pub(crate) fn sent(&self) -> u64 {
        self.sender.as_ref().map_or(0, Sender::next_seq)
    }
}

