//! Reliable, ordered multicast of messages from any root to every other
//! rank of a communicator, over any [`Transport`]; the design of Liu,
//! Mamidala and Panda (2004), sections 4 and 5, plus an optional NACK.
//!
//! Each root has its own stream of pieces numbered 0, 1, 2... with 64-bit
//! sequence numbers that never wrap. A message is cut into pieces of at
//! most `piece_bytes`; a zero-length message is no pieces at all. Sender
//! and receivers agree on the cut because both know the message length (as
//! MPI_Bcast requires); every piece also carries it, so a disagreement is
//! reported instead of delivering the wrong bytes.
//!
//! Two flavours, picked from [`Datagrams::multicast_kind`]:
//!
//! * **Datagram** (`datagram`): the root copies each piece into a slot of
//!   its sliding window, multicasts it, sends it reliably to the co-roots
//!   along a binomial tree, and returns. Receivers keep W slots per root,
//!   deliver strictly in order, drop copies, and ACK lazily by one-sided
//!   writes into their collector's ACK array (`ack`, `region`); the root
//!   and each co-root resend over the reliable channel to exactly the
//!   members that have not acknowledged (`collector`). A receiver that sees
//!   a gap may NACK it at once.
//! * With **congestion control** (`congestion`; on by default over udp),
//!   the datagram flavour also paces each root with a congestion window
//!   clocked by an acker, sets its timeouts from an RTT estimate, and
//!   delays NACKs at random so that a repair another member asked for can
//!   cancel them.
//! * **Shared window** (`shared`): the root writes each piece once into a
//!   slot of its own window; readers copy it out directly and publish their
//!   progress into the root's ACK lines.
//!
//! In both, the root sends piece s only when every receiver has room for
//! it (s < least ACK + W, the proofs are in `datagram::sender` and
//! `shared`), and when its window is full it keeps serving every stream
//! while it waits (its wait warns if that lasts). Because the root
//! returns before ACKs come in, [`ReliableMulticast::progress`] must also
//! be called from outside any multicast call (Open MPI's progress engine):
//! it takes in arrivals and does whatever ACK, NACK, forward or
//! retransmission is due.
//!
//! Both flavours' send and receive are also offered as steps
//! (`start_send`, `step_send`, `start_receive`, `step_receive`) that never
//! wait, for a resumable bcast; the blocking send and receive are those
//! steps with a wait between them (`datagram::transfer`, `shared`), on
//! the same sequence numbers, so steps and blocking calls interleave on
//! one stream.
//!
//! After an error the instance is unusable: a stream may have stopped
//! between two pieces.

mod ack;
#[cfg(any(test, feature = "fabric"))]
pub mod away_member;
mod config;
mod congestion;
mod datagram;
mod groups;
mod region;
pub mod repair;
mod shared;
mod stats;
mod transfer;
mod wire;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod congestion_tests;
#[cfg(test)]
mod tail_tests;
#[cfg(test)]
mod random_loss_tests;
#[cfg(test)]
mod nack_retry_tests;
#[cfg(test)]
mod parity_tests;
#[cfg(test)]
mod loss_bench;

pub use config::{
    CongestionConfig, CongestionMode, DEFAULT_LOSS_TOLERANCE_PERCENT, DEFAULT_PARITY_PERCENT, DEFAULT_REPEAT_DOUBLINGS, DEFAULT_TAIL_REPEAT, MAX_REPEAT_DOUBLINGS, RmcastConfig,
};
pub use groups::{Groups, Member, Role};
pub use region::region_len;
pub use stats::RmcastStats;
pub use transfer::Transfer;

use crate::transport::{Datagrams, MulticastKind, Transport, TransportError};
use datagram::DatagramFlavour;
use region::LINE;
use shared::SharedFlavour;

enum Flavour {
    /// Chosen at the first call, which is the first sight of the transport.
    Undecided,
    Datagram(DatagramFlavour),
    Shared(SharedFlavour),
}

/// One rank's reliable multicast for one communicator.
pub struct ReliableMulticast {
    rank: usize,
    size: usize,
    region_offset: usize,
    config: RmcastConfig,
    flavour: Flavour,
    stats: RmcastStats,
}

impl ReliableMulticast {
    /// `rank` of `size` ranks; the region of [`region_len`] bytes starts at
    /// `region_offset` (64-byte aligned) of every rank's window. Panics on
    /// an invalid configuration: check it with [`RmcastConfig::validate`].
    pub fn new(rank: usize, size: usize, region_offset: usize, config: RmcastConfig) -> Self {
        if let Err(why) = config.validate() {
            panic!("invalid reliable-multicast configuration: {why}");
        }
        assert!(rank < size, "rank {rank} outside a communicator of {size}");
        assert_eq!(region_offset % LINE, 0, "the reliable-multicast region must start on a cache line");
        ReliableMulticast { rank, size, region_offset, config, flavour: Flavour::Undecided, stats: RmcastStats::default() }
    }

    pub fn config(&self) -> &RmcastConfig {
        &self.config
    }

    pub fn stats(&self) -> RmcastStats {
        self.stats
    }

    /// Whether `transport` can carry reliable multicast at all.
    pub fn supported_by<T: Datagrams + ?Sized>(transport: &T) -> bool {
        matches!(transport.multicast_kind(), MulticastKind::Datagram | MulticastKind::SharedWindow)
    }

    /// Bytes per piece on `transport`.
    pub fn piece_bytes<T: Transport + ?Sized>(&mut self, transport: &T) -> Result<usize, TransportError> {
        Ok(match self.flavour(transport)? {
            Flavour::Datagram(flavour) => flavour.piece_bytes(),
            Flavour::Shared(flavour) => flavour.piece_bytes(),
            Flavour::Undecided => unreachable!(),
        })
    }

    /// Multicasts `message` from this rank, in order after its previous
    /// ones. Returns once `message` has been copied into the window, which
    /// waits only when the window is full.
    pub fn send<T: Transport + ?Sized>(&mut self, transport: &T, message: &[u8]) -> Result<(), TransportError> {
        if self.size == 1 || message.is_empty() {
            return Ok(());
        }
        let stats = &mut self.stats;
        match Self::decide(&mut self.flavour, self.rank, self.size, self.region_offset, &self.config, transport)? {
            Flavour::Datagram(flavour) => flavour.send(transport, message, stats)?,
            Flavour::Shared(flavour) => flavour.send(transport, message, stats)?,
            Flavour::Undecided => unreachable!(),
        }
        stats.messages_sent += 1;
        Ok(())
    }

    /// Receives `root`'s next message, which must be `message.len()` bytes
    /// long, into `message`.
    pub fn receive<T: Transport + ?Sized>(&mut self, transport: &T, root: usize, message: &mut [u8]) -> Result<(), TransportError> {
        if root >= self.size || root == self.rank {
            return Err(TransportError::Failed(format!("rank {} cannot receive from root {root} of {} ranks", self.rank, self.size)));
        }
        if message.is_empty() {
            return Ok(());
        }
        let stats = &mut self.stats;
        match Self::decide(&mut self.flavour, self.rank, self.size, self.region_offset, &self.config, transport)? {
            Flavour::Datagram(flavour) => flavour.receive(transport, root, message, stats)?,
            Flavour::Shared(flavour) => flavour.receive(transport, root, message, stats)?,
            Flavour::Undecided => unreachable!(),
        }
        stats.messages_received += 1;
        Ok(())
    }

    /// Starts sending a `len`-byte message from this rank as resumable
    /// steps (`step_send`) instead of `send`; either flavour.
    /// Its pieces are numbered when queued, so a rank steps its transfers
    /// one at a time in call order, between its blocking calls.
    pub fn start_send(&self, len: usize) -> Transfer {
        Transfer::new(self.rank, len)
    }

    /// Starts receiving `root`'s next message, of `len` bytes, as resumable
    /// steps (`step_receive`) instead of `receive`; in order as `start_send`.
    pub fn start_receive(&self, root: usize, len: usize) -> Result<Transfer, TransportError> {
        if root >= self.size || root == self.rank {
            return Err(TransportError::Failed(format!("rank {} cannot receive from root {root} of {} ranks", self.rank, self.size)));
        }
        Ok(Transfer::new(root, len))
    }

    /// One step of `send`: queues and sends every piece of `message` the
    /// window has room for, takes in arrivals (datagrams) or rereads the
    /// readers' lines (shared window) once if it is full, and returns
    /// whether every piece is out. Never waits.
    pub fn step_send<T: Transport + ?Sized>(&mut self, transport: &T, transfer: &mut Transfer, message: &[u8]) -> Result<bool, TransportError> {
        if transfer.root != self.rank || transfer.len != message.len() {
            return Err(TransportError::Failed(format!("a send of {} bytes stepped with the transfer of {transfer:?}", message.len())));
        }
        if self.size == 1 || message.is_empty() {
            return Ok(true);
        }
        let stats = &mut self.stats;
        let done = match Self::decide(&mut self.flavour, self.rank, self.size, self.region_offset, &self.config, transport)? {
            Flavour::Datagram(flavour) => flavour.step_send(transport, transfer, message, stats)?,
            Flavour::Shared(flavour) => flavour.step_send(transport, transfer, message, stats)?,
            Flavour::Undecided => unreachable!(),
        };
        if done {
            stats.messages_sent += 1;
        }
        Ok(done)
    }

    /// One step of `receive`: delivers every piece that has arrived into
    /// `message`, takes in arrivals once if the next is missing
    /// (datagrams), and returns whether every piece is in. Never waits.
    pub fn step_receive<T: Transport + ?Sized>(&mut self, transport: &T, transfer: &mut Transfer, message: &mut [u8]) -> Result<bool, TransportError> {
        if transfer.root == self.rank || transfer.len != message.len() {
            return Err(TransportError::Failed(format!("a receive of {} bytes stepped with the transfer of {transfer:?}", message.len())));
        }
        if message.is_empty() {
            return Ok(true);
        }
        let stats = &mut self.stats;
        let done = match Self::decide(&mut self.flavour, self.rank, self.size, self.region_offset, &self.config, transport)? {
            Flavour::Datagram(flavour) => flavour.step_receive(transport, transfer, message, stats)?,
            Flavour::Shared(flavour) => flavour.step_receive(transport, transfer, message, stats)?,
            Flavour::Undecided => unreachable!(),
        };
        if done {
            stats.messages_received += 1;
        }
        Ok(done)
    }

    /// What `transfer` waits for, for a run that stopped moving.
    pub fn describe_transfer(&self, transfer: &Transfer) -> String {
        match &self.flavour {
            Flavour::Datagram(flavour) => flavour.describe_transfer(transfer),
            Flavour::Shared(flavour) => flavour.describe_transfer(transfer),
            Flavour::Undecided => format!("{transfer:?}"),
        }
    }

    /// Does whatever is due without waiting: takes in arrivals, writes
    /// ACKs, answers NACKs, forwards and retransmits.
    pub fn progress<T: Transport + ?Sized>(&mut self, transport: &T) -> Result<(), TransportError> {
        if self.size == 1 {
            return Ok(());
        }
        let stats = &mut self.stats;
        match Self::decide(&mut self.flavour, self.rank, self.size, self.region_offset, &self.config, transport)? {
            Flavour::Datagram(flavour) => flavour.progress(transport, stats),
            Flavour::Shared(flavour) => flavour.progress(transport, stats),
            Flavour::Undecided => unreachable!(),
        }
    }

    /// Nothing this rank sent or collects is unacknowledged, and every ACK
    /// it owes is written; as of the last call.
    pub fn is_idle(&self) -> bool {
        match &self.flavour {
            Flavour::Undecided => true,
            Flavour::Datagram(flavour) => flavour.idle(),
            Flavour::Shared(flavour) => flavour.idle(),
        }
    }

    /// Writes every pending ACK, then progresses until [`Self::is_idle`].
    /// Every rank must drain (e.g. before the communicator is freed): a
    /// root is idle only once its receivers have acknowledged.
    pub fn drain<T: Transport + ?Sized>(&mut self, transport: &T) -> Result<(), TransportError> {
        self.flush_then_progress_until(transport, Self::is_idle, |this, transport| {
            format!("every receiver to acknowledge (this rank sent {} pieces as a root; pending: {})", this.sent(), this.describe_pending(transport))
        })
    }

    /// Writes every pending ACK and, on `as_root`, progresses until every
    /// receiver has acknowledged what this rank sent as a root. Unlike
    /// [`Self::drain`] it may run between calls while other ranks are
    /// already in later ones: it waits for nothing that only a later call
    /// delivers (a co-root's members acknowledge pieces of later calls only
    /// once they get there, and a drain that waited for those while they
    /// waited for this rank's pieces of those calls would never end).
    pub fn settle<T: Transport + ?Sized>(&mut self, transport: &T, as_root: bool) -> Result<(), TransportError> {
        if !as_root {
            return if self.size == 1 { Ok(()) } else { self.flush_acks(transport) };
        }
        self.flush_then_progress_until(transport, Self::own_stream_acknowledged, |this, transport| {
            format!("every receiver to acknowledge the {} pieces this rank sent as a root ({})", this.sent(), this.describe_own_stream(transport))
        })
    }

    fn flush_acks<T: Transport + ?Sized>(&mut self, transport: &T) -> Result<(), TransportError> {
        let stats = &mut self.stats;
        match Self::decide(&mut self.flavour, self.rank, self.size, self.region_offset, &self.config, transport)? {
            Flavour::Datagram(flavour) => flavour.flush_acks(transport, stats),
            Flavour::Shared(flavour) => flavour.flush_acks(transport, stats),
            Flavour::Undecided => unreachable!(),
        }
    }

    fn flush_then_progress_until<T: Transport + ?Sized>(
        &mut self,
        transport: &T,
        done: fn(&Self) -> bool,
        waiting_for: fn(&Self, &T) -> String,
    ) -> Result<(), TransportError> {
        if self.size == 1 {
            return Ok(());
        }
        self.flush_acks(transport)?;
        let mut waiter = self.config.waiter();
        loop {
            self.progress(transport)?;
            if done(self) {
                return Ok(());
            }
            waiter.pause(transport, || waiting_for(self, transport))?;
        }
    }

    fn own_stream_acknowledged(&self) -> bool {
        match &self.flavour {
            Flavour::Undecided => true,
            Flavour::Datagram(flavour) => flavour.own_stream_acknowledged(),
            Flavour::Shared(flavour) => flavour.own_stream_acknowledged(),
        }
    }

    fn describe_pending<T: Transport + ?Sized>(&self, transport: &T) -> String {
        match &self.flavour {
            Flavour::Datagram(flavour) => flavour.describe_pending(),
            Flavour::Shared(flavour) => flavour.describe_pending(transport),
            Flavour::Undecided => String::new(),
        }
    }

    fn describe_own_stream<T: Transport + ?Sized>(&self, transport: &T) -> String {
        match &self.flavour {
            Flavour::Datagram(flavour) => flavour.describe_own_stream(),
            Flavour::Shared(flavour) => flavour.describe_own_stream(transport),
            Flavour::Undecided => String::new(),
        }
    }

    /// Rings of receive slots the datagram flavour has made (none for
    /// the other flavours).
    #[cfg(test)]
    pub(crate) fn receive_rings_made(&self) -> usize {
        match &self.flavour {
            Flavour::Datagram(flavour) => flavour.receive_rings_made(),
            Flavour::Undecided | Flavour::Shared(_) => 0,
        }
    }

    /// Streams of the datagram flavour holding receive slots now.
    #[cfg(test)]
    pub(crate) fn streams_holding_slots(&self) -> usize {
        match &self.flavour {
            Flavour::Datagram(flavour) => flavour.streams_holding_slots(),
            Flavour::Undecided | Flavour::Shared(_) => 0,
        }
    }

    fn sent(&self) -> u64 {
        match &self.flavour {
            Flavour::Undecided => 0,
            Flavour::Datagram(flavour) => flavour.sent(),
            Flavour::Shared(flavour) => flavour.sent(),
        }
    }

    fn flavour<T: Transport + ?Sized>(&mut self, transport: &T) -> Result<&mut Flavour, TransportError> {
        Self::decide(&mut self.flavour, self.rank, self.size, self.region_offset, &self.config, transport)
    }

    /// The flavour, picked and checked against `transport` on first use.
    fn decide<'a, T: Transport + ?Sized>(
        flavour: &'a mut Flavour,
        rank: usize,
        size: usize,
        region_offset: usize,
        config: &RmcastConfig,
        transport: &T,
    ) -> Result<&'a mut Flavour, TransportError> {
        if let Flavour::Undecided = flavour {
            if (transport.rank(), transport.size()) != (rank, size) {
                return Err(TransportError::Failed(format!(
                    "reliable multicast for rank {rank} of {size} used over a transport of rank {} of {}",
                    transport.rank(),
                    transport.size()
                )));
            }
            let len = region_len(size, config);
            if region_offset.checked_add(len).is_none_or(|end| end > transport.window_len()) {
                return Err(TransportError::OutOfRange { peer: rank, offset: region_offset, len });
            }
            *flavour = match transport.multicast_kind() {
                MulticastKind::Datagram => {
                    let nonce = transport.multicast_nonce();
                    let congestion = config.congestion.enabled_for(transport.name());
                    Flavour::Datagram(DatagramFlavour::new(rank, size, region_offset, *config, transport.max_datagram(), nonce, congestion)?)
                },
                MulticastKind::SharedWindow => Flavour::Shared(SharedFlavour::new(rank, size, region_offset, *config)),
                MulticastKind::None => return Err(TransportError::Unsupported("reliable multicast without datagrams or shared windows")),
            };
        }
        Ok(flavour)
    }
}

impl std::fmt::Debug for ReliableMulticast {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let flavour = match self.flavour {
            Flavour::Undecided => "undecided",
            Flavour::Datagram(_) => "datagram",
            Flavour::Shared(_) => "shared window",
        };
        f.debug_struct("ReliableMulticast").field("rank", &self.rank).field("size", &self.size).field("flavour", &flavour).finish()
    }
}

#[cold]
fn protocol_error(root: usize, seq: u64, what: &str) -> TransportError {
    TransportError::Failed(format!("reliable multicast: piece {seq} of root {root} {what}"))
}
