//! Why a communicator cannot use the verbs backend.

use crate::transport::TransportError;

/// Setup failures of [`establish`](super::establish) and
/// [`probe`](super::probe). Failures found on one rank are announced to all,
/// so every rank of a communicator returns an error when any rank fails: the
/// failing rank its own cause, the others `PeerFailed` naming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerbsSetupError {
    /// `rank >= size`, `size == 0`, or settings that cannot work.
    InvalidArguments(String),
    /// No usable device: none at all, or not the one asked for.
    NoDevice(String),
    /// The device exists but its port cannot carry traffic.
    PortUnusable(String),
    /// A verbs or rdma_cm call failed (`call` names it, `errno` says why).
    Verbs { call: &'static str, errno: i32, detail: String },
    /// The exchange used for setup failed.
    Exchange(TransportError),
    /// A rank's record was not understood, or it asked for another
    /// communicator size or window length than rank 0.
    Inconsistent { rank: usize, detail: String },
    /// Another rank failed its part of the setup.
    PeerFailed { rank: usize, reason: String },
}

impl VerbsSetupError {
    /// A failed call, with the calling thread's errno.
    pub(crate) fn last_os(call: &'static str, detail: impl Into<String>) -> Self {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        VerbsSetupError::Verbs { call, errno, detail: detail.into() }
    }

    /// A failed call that returned its error number (or -1 and set errno).
    pub(crate) fn returned(call: &'static str, returned: i32, detail: impl Into<String>) -> Self {
        let errno = if returned > 0 { returned } else { std::io::Error::last_os_error().raw_os_error().unwrap_or(0) };
        VerbsSetupError::Verbs { call, errno, detail: detail.into() }
    }
}

impl std::fmt::Display for VerbsSetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerbsSetupError::InvalidArguments(why) => write!(f, "invalid verbs setup: {why}"),
            VerbsSetupError::NoDevice(why) => write!(f, "{why}"),
            VerbsSetupError::PortUnusable(why) => write!(f, "{why}"),
            VerbsSetupError::Verbs { call, errno, detail } => {
                write!(f, "{call} failed ({}) {detail}", std::io::Error::from_raw_os_error(*errno))?;
                let out_of_locked_memory = [libc::ENOMEM, libc::EPERM, libc::EAGAIN].contains(errno);
                if out_of_locked_memory && call.contains("reg_mr") {
                    write!(f, "; is the locked-memory limit (ulimit -l) too small?")?;
                }
                Ok(())
            }
            VerbsSetupError::Exchange(error) => write!(f, "the verbs setup exchange failed: {error}"),
            VerbsSetupError::Inconsistent { rank, detail } => write!(f, "ranks disagree about the verbs setup: rank {rank} {detail}"),
            VerbsSetupError::PeerFailed { rank, reason } => write!(f, "rank {rank} could not set up verbs: {reason}"),
        }
    }
}

impl std::error::Error for VerbsSetupError {}

/// A verbs or rdma_cm failure after the device was opened: posting,
/// polling, and everything joining the multicast group can run into. The
/// first one a transport meets fails it for good (see `links::Failure`);
/// a multicast one only means going without multicast.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum VerbsError {
    /// `call` failed with `errno`; `subject` says on what, and reads on
    /// from the call's name (" on QP 7", " to 10.0.0.1", " (UD)").
    Call { call: &'static str, subject: String, errno: i32 },
    /// `ibv_poll_cq` returned this negative count.
    Poll(i32),
    /// Creating a buffer or completion queue failed as during setup.
    Setup(VerbsSetupError),
    /// No receive buffer is set aside for this slot's peer.
    NoReceiveSlot { slot: usize },
    /// rdma_cm bound the address, but to no RDMA device.
    NotAnRdmaAddress(std::net::Ipv4Addr),
    /// The join of `group` was not answered in time.
    JoinTimedOut { group: std::net::Ipv4Addr, timeout: std::time::Duration },
    /// The join of `group` was answered with another event than a join.
    JoinRefused { group: std::net::Ipv4Addr, event: String, status: i32 },
    /// The chosen GID carries no IPv4 address to join a group from.
    NoIpv4Address { gid_index: u32, device: String },
    /// The port's MTU leaves no room for a datagram's header.
    MtuTooSmall(usize),
    /// Multicast is switched off in the configuration.
    MulticastDisabled,
    /// Multicast was not tried because the queue pairs did not connect.
    NotConnected,
    /// Rank 0 could not draw the key its datagrams are sealed under.
    NoKey(String),
}

impl VerbsError {
    /// `call` failed; the errno is the calling thread's.
    pub(crate) fn last_os(call: &'static str, subject: impl Into<String>) -> Self {
        VerbsError::Call { call, subject: subject.into(), errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0) }
    }

    /// `call` returned its error number.
    pub(crate) fn returned(call: &'static str, subject: impl Into<String>, errno: i32) -> Self {
        VerbsError::Call { call, subject: subject.into(), errno }
    }
}

impl std::fmt::Display for VerbsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerbsError::Call { call, subject, errno } => {
                write!(f, "{call}{subject} failed: {}", std::io::Error::from_raw_os_error(*errno))?;
                if *call == "rdma_create_event_channel" {
                    write!(f, " (is rdma_ucm loaded?)")?;
                }
                Ok(())
            }
            VerbsError::Poll(returned) => write!(f, "ibv_poll_cq failed ({returned})"),
            VerbsError::Setup(error) => write!(f, "{error}"),
            VerbsError::NoReceiveSlot { slot } => write!(f, "receive slot {slot} belongs to no queue pair"),
            VerbsError::NotAnRdmaAddress(address) => write!(f, "{address} is not the address of an RDMA device"),
            VerbsError::JoinTimedOut { group, timeout } => write!(f, "joining {group}: no answer within {timeout:?}"),
            VerbsError::JoinRefused { group, event, status } => write!(f, "joining {group}: got {event} (status {status})"),
            VerbsError::NoIpv4Address { gid_index, device } => {
                write!(f, "GID {gid_index} of {device} is not IPv4-mapped; set local_address for the rdma_cm join")
            }
            VerbsError::MtuTooSmall(mtu) => write!(f, "an MTU of {mtu} bytes leaves no room for datagrams"),
            VerbsError::MulticastDisabled => write!(f, "multicast disabled by configuration"),
            VerbsError::NotConnected => write!(f, "not attempted: connecting failed"),
            VerbsError::NoKey(why) => write!(f, "no key to seal its datagrams: {why}"),
        }
    }
}

impl std::error::Error for VerbsError {}

impl From<VerbsSetupError> for VerbsError {
    fn from(error: VerbsSetupError) -> Self {
        VerbsError::Setup(error)
    }
}
