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
