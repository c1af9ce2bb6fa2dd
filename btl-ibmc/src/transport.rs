//! The contract every collective is written against.
//!
//! A communicator's transport gives each rank a *window*: `window_len` bytes
//! of registered memory that peers write into one-sidedly (shared memory
//! within a node, RDMA write over an RC queue pair across nodes). A writer
//! announces data by storing a 64-bit word after it; the target learns of the
//! arrival by polling that word in its own window, never by a receive call.
//! Beside the window, every backend offers an unreliable multicast datagram
//! (UD multicast, UDP multicast, or none) and a reliable, per-pair ordered
//! point-to-point channel that reliable multicast uses for retransmissions.
//!
//! Each of these is its own trait ([`Windows`], [`Datagrams`],
//! [`ReliableChannel`], and [`PeerReads`] where every window is mapped),
//! each standing on [`Endpoint`], so that a collective's bounds say what it
//! uses. [`Transport`] is all of them: what a backend implements.
//!
//! Offsets are byte offsets into the *target's* window. Flag words must be
//! 8-byte aligned and must not overlap payload written by another put that
//! is still in flight.

use std::time::Duration;

/// What a backend can do with the unreliable multicast primitive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MulticastKind {
    /// No datagram multicast; reliable multicast must be built from puts.
    None,
    /// Datagrams that may be dropped, duplicated or reordered (UD, UDP, test fabric).
    Datagram,
    /// Every rank can read every rank's window directly (node-local shared
    /// memory), so one write into the sender's own window, read by all, is
    /// the multicast: it cannot be lost, duplicated or reordered. Such a
    /// backend serves [`PeerReads`].
    SharedWindow,
}

/// Why a transport operation could not be carried out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransportError {
    /// The backend does not offer this primitive (e.g. multicast on shm).
    Unsupported(&'static str),
    /// The peer index or window range is outside what was registered.
    OutOfRange { peer: usize, offset: usize, len: usize },
    /// A message is larger than the channel or datagram can carry.
    TooLarge { len: usize, max: usize },
    /// The backend failed (a verbs completion error, a socket error...).
    Failed(String),
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportError::Unsupported(what) => write!(f, "{what} is not supported by this transport"),
            TransportError::OutOfRange { peer, offset, len } => {
                write!(f, "window access out of range (peer {peer}, offset {offset}, len {len})")
            }
            TransportError::TooLarge { len, max } => write!(f, "message of {len} bytes exceeds the {max}-byte limit"),
            TransportError::Failed(why) => write!(f, "transport failure: {why}"),
        }
    }
}

impl std::error::Error for TransportError {}

/// What every capability of a communicator's transport stands on: who
/// this rank is, progress and health. Methods take `&self` because the
/// progress engine may drive a transport while a collective is using it;
/// implementations synchronise internally.
pub trait Endpoint {
    /// Short name for diagnostics ("shm", "verbs", "udp", "fabric").
    fn name(&self) -> &'static str;
    /// This process's rank in the communicator.
    fn rank(&self) -> usize;
    /// Number of ranks in the communicator.
    fn size(&self) -> usize;

    /// Drives completions and deferred work; wait loops call it while polling.
    fn progress(&self);

    /// Ok while nothing this rank depends on is known to have failed;
    /// otherwise the failure, naming the peer or link where the backend
    /// knows it (a queue pair in error, a peer that died). Every wait
    /// checks it now and then, so a dead peer ends the wait with an error
    /// rather than leaving it to spin. A backend that cannot tell says Ok.
    fn health(&self) -> Result<(), TransportError> {
        Ok(())
    }

    /// Whether this rank's data comes through the kernel's sockets (udp),
    /// so that its waits sleep there ([`Endpoint::sleep_until_arrival`])
    /// instead of yielding: a rank that keeps its core, even yielding it
    /// to nobody, delays the kernel's delivery of the data it waits for
    /// (on a veth bed by a scheduler tick). Backends whose peers write
    /// into memory (shared memory, verbs) say false.
    fn sleeps_in_kernel(&self) -> bool {
        false
    }

    /// Sleeps in the kernel for at most `longest`, until something may
    /// have arrived; without sleeping when something arrived since the
    /// previous sleep ended, which the caller may not have looked at yet.
    /// Backends that do not sleep in the kernel say [`Sleep::NotOffered`].
    fn sleep_until_arrival(&self, longest: Duration) -> Sleep {
        let _ = longest;
        Sleep::NotOffered
    }
}

/// How [`Endpoint::sleep_until_arrival`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sleep {
    /// This transport's data does not come through the kernel: yield instead.
    NotOffered,
    /// Something arrived (or an error or signal woke the sleep): look again.
    Woken,
    /// Nothing arrived within the time given.
    TimedOut,
}

/// One-sided writes into peers' windows, and this rank's own window: all
/// that barrier, allreduce, reduce and the put-tree bcast need.
pub trait Windows: Endpoint {
    /// Bytes of window every rank exposes.
    fn window_len(&self) -> usize;

    /// Writes `data` into `peer`'s window at `offset`, then stores `flag` at
    /// `flag_offset` so that a reader that sees the flag also sees the data.
    /// Returns once the source buffer may be reused.
    fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError>;

    /// Stores one word into `peer`'s window (epochs, counters, ACKs).
    fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), TransportError>;

    /// Reads one word of this rank's own window with acquire ordering.
    fn local_flag(&self, flag_offset: usize) -> u64;

    /// Stores one word into this rank's own window (resetting a slot, a
    /// rank's own progress word that peers read).
    fn set_local_flag(&self, flag_offset: usize, value: u64);

    /// Copies bytes out of this rank's own window.
    fn read_local(&self, offset: usize, out: &mut [u8]);

    /// Says that this rank will soon put into `peer`'s window at `offset`
    /// (the slot of its next call): a transport that writes peers' windows
    /// with the CPU's own stores starts taking that cache line for writing
    /// now, so the put does not hold up the rank's next stores while the
    /// line crosses between cores. A hint: it changes no memory, and a
    /// peer or offset out of range is ignored. Nothing, by default.
    fn prepare_put(&self, _peer: usize, _offset: usize) {}
}

/// The unreliable multicast primitive, and which kind of multicast the
/// backend offers at all (reliable multicast picks its flavour from it).
pub trait Datagrams: Endpoint {
    /// What kind of multicast primitive this backend offers.
    fn multicast_kind(&self) -> MulticastKind;

    /// Largest datagram `multicast` accepts.
    fn max_datagram(&self) -> usize;

    /// Sends one datagram to every other rank; it may be lost, duplicated or
    /// reordered.
    fn multicast(&self, datagram: &[u8]) -> Result<(), TransportError>;

    /// Sends `datagrams` in order, each as `multicast` would; a backend
    /// may hand several to the network at once (udp: one segmented send,
    /// one pass through the network stack for up to 64 KiB).
    fn multicast_batch(&self, datagrams: &[&[u8]]) -> Result<(), TransportError> {
        datagrams.iter().try_for_each(|datagram| self.multicast(datagram))
    }

    /// Takes one received datagram into `out` (cleared first), if any,
    /// and returns the rank that sent it, as far as the backend can vouch
    /// for it (verbs: the source queue pair and GID of the completion match
    /// that rank's multicast queue pair from setup). Datagrams the backend
    /// cannot attribute to another rank of this communicator are dropped
    /// before this; the bytes are still untrusted.
    fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize>;

    /// A random number the ranks agreed on when this transport was set up
    /// and that nobody outside the communicator learns, which every
    /// datagram carries so that other traffic reaching the same group
    /// (another job's, another user's, an earlier communicator's) is told
    /// apart. Backends without datagrams answer 0.
    fn multicast_nonce(&self) -> u64;
}

/// The reliable, per-pair ordered point-to-point channel that reliable
/// multicast uses for forwarding and retransmissions.
pub trait ReliableChannel: Endpoint {
    /// Sends `message` to `peer`; delivered exactly once, in order per pair.
    fn send_reliable(&self, peer: usize, message: &[u8]) -> Result<(), TransportError>;

    /// Takes one reliable message into `out` (cleared first) and returns its
    /// sender, if any arrived.
    fn poll_reliable(&self, out: &mut Vec<u8>) -> Option<usize>;

    /// Whether `send_reliable` of `len` bytes to `peer` would return without
    /// waiting for the peer to take in earlier messages (room in the pair's
    /// window now). A sender whose message only repeats what the channel
    /// already carries (a retransmission to a member that has not taken in
    /// the earlier copies) asks first, and sends nothing rather than wait
    /// inside a progress pass for a rank that is away from MPI. The default
    /// suits channels that never wait on the peer's CPU for room.
    fn has_room_for(&self, peer: usize, len: usize) -> bool {
        let _ = (peer, len);
        true
    }
}

/// Reading peers' windows directly. Only backends whose windows are all
/// mapped into this process ([`MulticastKind::SharedWindow`]) serve it; the
/// rest keep the defaults, which answer `Unsupported`.
pub trait PeerReads: Windows {
    /// Copies bytes out of `peer`'s window. The bytes are as coherent as
    /// the flag protocol makes them: read them after `peer_flag` announced
    /// them.
    fn read_peer(&self, peer: usize, offset: usize, out: &mut [u8]) -> Result<(), TransportError> {
        let _ = (peer, offset, out);
        Err(TransportError::Unsupported("reading a peer's window"))
    }

    /// Reads one word of `peer`'s window with acquire ordering, so that the
    /// bytes its writer stored before the word are visible to `read_peer`.
    /// Served where `read_peer` is.
    fn peer_flag(&self, peer: usize, flag_offset: usize) -> Result<u64, TransportError> {
        let _ = (peer, flag_offset);
        Err(TransportError::Unsupported("reading a flag in a peer's window"))
    }

    /// Whether `read_peer_memory` serves every peer; the same answer on
    /// every rank (agreed at setup, `crate::cross_memory`).
    fn reads_peer_memory(&self) -> bool {
        false
    }

    /// Copies bytes at `address` in `peer`'s address space (not its window:
    /// any memory the peer announced, such as a user buffer) into `out`,
    /// with cross-memory attach. The peer must keep those bytes unchanged
    /// until the reader says it is done.
    fn read_peer_memory(&self, peer: usize, address: u64, out: &mut [u8]) -> Result<(), TransportError> {
        let _ = (peer, address, out);
        Err(TransportError::Unsupported("reading a peer's memory"))
    }

    /// Copies `data` to `address` in `peer`'s address space, served where
    /// `read_peer_memory` is (the setup probe checks both directions). The
    /// peer must not touch those bytes until the writer says it is done.
    fn write_peer_memory(&self, peer: usize, address: u64, data: &[u8]) -> Result<(), TransportError> {
        let _ = (peer, address, data);
        Err(TransportError::Unsupported("writing a peer's memory"))
    }
}

/// Everything a communicator's transport offers; what a backend implements
/// and what bcast (reliable multicast, or the put tree where it has no
/// multicast) needs. Collectives that need less name the capability
/// instead, so that a wrapper or a test double provides only that.
pub trait Transport: Windows + Datagrams + ReliableChannel + PeerReads {}

impl<T: Windows + Datagrams + ReliableChannel + PeerReads + ?Sized> Transport for T {}

/// An all-to-all exchange of fixed-size records, used only while a transport
/// is being set up (Open MPI's saved lower-priority allgather, or the test
/// fabric's own). `all` receives `size * mine.len()` bytes in rank order.
pub trait Exchange {
    fn allgather(&self, mine: &[u8], all: &mut [u8]) -> Result<(), TransportError>;
}

/// Implements one capability for a wrapper by handing every call to the
/// field that carries it unchanged, so that a wrapper spells out only the
/// capabilities it changes: `forward!(Datagrams for HybridTransport => verbs)`.
/// Its users (the hybrid, the test fabric) are optional features.
#[cfg(any(feature = "verbs", feature = "fabric", test))]
macro_rules! forward {
    (Endpoint for $wrapper:ty => $field:ident) => {
        impl $crate::transport::Endpoint for $wrapper {
            fn name(&self) -> &'static str {
                $crate::transport::Endpoint::name(&self.$field)
            }
            fn rank(&self) -> usize {
                $crate::transport::Endpoint::rank(&self.$field)
            }
            fn size(&self) -> usize {
                $crate::transport::Endpoint::size(&self.$field)
            }
            fn progress(&self) {
                $crate::transport::Endpoint::progress(&self.$field)
            }
            fn health(&self) -> Result<(), $crate::transport::TransportError> {
                $crate::transport::Endpoint::health(&self.$field)
            }
            fn sleeps_in_kernel(&self) -> bool {
                $crate::transport::Endpoint::sleeps_in_kernel(&self.$field)
            }
            fn sleep_until_arrival(&self, longest: std::time::Duration) -> $crate::transport::Sleep {
                $crate::transport::Endpoint::sleep_until_arrival(&self.$field, longest)
            }
        }
    };
    (Windows for $wrapper:ty => $field:ident) => {
        impl $crate::transport::Windows for $wrapper {
            #[inline]
            fn window_len(&self) -> usize {
                $crate::transport::Windows::window_len(&self.$field)
            }
            #[inline]
            fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), $crate::transport::TransportError> {
                $crate::transport::Windows::put(&self.$field, peer, offset, data, flag_offset, flag)
            }
            #[inline]
            fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), $crate::transport::TransportError> {
                $crate::transport::Windows::put_flag(&self.$field, peer, flag_offset, value)
            }
            #[inline]
            fn local_flag(&self, flag_offset: usize) -> u64 {
                $crate::transport::Windows::local_flag(&self.$field, flag_offset)
            }
            #[inline]
            fn set_local_flag(&self, flag_offset: usize, value: u64) {
                $crate::transport::Windows::set_local_flag(&self.$field, flag_offset, value)
            }
            #[inline]
            fn read_local(&self, offset: usize, out: &mut [u8]) {
                $crate::transport::Windows::read_local(&self.$field, offset, out)
            }
        }
    };
    (Datagrams for $wrapper:ty => $field:ident) => {
        impl $crate::transport::Datagrams for $wrapper {
            fn multicast_kind(&self) -> $crate::transport::MulticastKind {
                $crate::transport::Datagrams::multicast_kind(&self.$field)
            }
            fn max_datagram(&self) -> usize {
                $crate::transport::Datagrams::max_datagram(&self.$field)
            }
            fn multicast(&self, datagram: &[u8]) -> Result<(), $crate::transport::TransportError> {
                $crate::transport::Datagrams::multicast(&self.$field, datagram)
            }
            fn multicast_batch(&self, datagrams: &[&[u8]]) -> Result<(), $crate::transport::TransportError> {
                $crate::transport::Datagrams::multicast_batch(&self.$field, datagrams)
            }
            fn poll_multicast(&self, out: &mut Vec<u8>) -> Option<usize> {
                $crate::transport::Datagrams::poll_multicast(&self.$field, out)
            }
            fn multicast_nonce(&self) -> u64 {
                $crate::transport::Datagrams::multicast_nonce(&self.$field)
            }
        }
    };
    (PeerReads for $wrapper:ty => $field:ident) => {
        impl $crate::transport::PeerReads for $wrapper {
            #[inline]
            fn read_peer(&self, peer: usize, offset: usize, out: &mut [u8]) -> Result<(), $crate::transport::TransportError> {
                $crate::transport::PeerReads::read_peer(&self.$field, peer, offset, out)
            }
            #[inline]
            fn peer_flag(&self, peer: usize, flag_offset: usize) -> Result<u64, $crate::transport::TransportError> {
                $crate::transport::PeerReads::peer_flag(&self.$field, peer, flag_offset)
            }
            #[inline]
            fn reads_peer_memory(&self) -> bool {
                $crate::transport::PeerReads::reads_peer_memory(&self.$field)
            }
            #[inline]
            fn read_peer_memory(&self, peer: usize, address: u64, out: &mut [u8]) -> Result<(), $crate::transport::TransportError> {
                $crate::transport::PeerReads::read_peer_memory(&self.$field, peer, address, out)
            }
            #[inline]
            fn write_peer_memory(&self, peer: usize, address: u64, data: &[u8]) -> Result<(), $crate::transport::TransportError> {
                $crate::transport::PeerReads::write_peer_memory(&self.$field, peer, address, data)
            }
        }
    };
}
#[cfg(any(feature = "verbs", feature = "fabric", test))]
pub(crate) use forward;
