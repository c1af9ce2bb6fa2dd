//! One multicast bcast as a resumable run, on either flavour of btl-ibmc's
//! reliable multicast: datagrams (udp, verbs UD multicast) or the root's
//! shared window (shm). The multicast is stepped (`ReliableMulticast::
//! step_send`, `step_receive`) instead of waited on. The protocol is the
//! blocking call's, step for step (the blocking `send`/`receive` are the
//! same steps with a wait between them): the root queues or writes the
//! pieces its window has credit for, a receiver delivers the pieces that
//! are there, and where either would wait it takes in arrivals once (ACKs,
//! NACKs, forwards, retransmissions for every stream; on a shared window,
//! the readers' ACK lines) and returns Pending.
//!
//! Invariants:
//! * The communicator has one `ReliableMulticast`, shared by its blocking
//!   calls, its side progress and its runs (`SharedMulticast`). Only one
//!   of them holds it at a time, and never across a return to the
//!   progress loop: a run holds it for one step. MPI makes one thread at
//!   a time drive a communicator, so a holder found busy is a misuse and
//!   refused, never waited for.
//! * A root's stream numbers its pieces when they are queued: the runs
//!   of one communicator step in post order, one at a time (the queue's
//!   bcast lane), and the blocking calls finish the queue first, so each
//!   stream carries the messages in the communicator's call order.
//! * The root's run is done once its last piece is sent, as the blocking
//!   call returns then: the application's buffer is no longer read (the
//!   pieces are in the window). On datagrams, ACKs and retransmissions go
//!   on in side progress (`Bcast::progress`) and in later steps of any
//!   run; a shared window needs neither (`Bcast::needs_side_progress`).
//! * A run stuck (no piece queued or delivered) longer than the
//!   multicast's limit (`RmcastConfig::stall_limit`) fails, as the
//!   blocking wait does.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use btl_ibmc::rmcast::Transfer;
use btl_ibmc::{ReliableMulticast, Transport, TransportError};

use crate::patterns::meet::{advance_by_polling, Meet, Resumable, StallClock, StallLimits};
use crate::schedule::{Schedule, Step};

/// The communicator's reliable multicast, shared between its `Bcast` and
/// the runs it started (see the invariants above).
#[derive(Clone, Debug)]
pub(super) struct SharedMulticast(Arc<Mutex<ReliableMulticast>>);

impl SharedMulticast {
    pub(super) fn new(multicast: ReliableMulticast) -> Self {
        SharedMulticast(Arc::new(Mutex::new(multicast)))
    }

    /// The multicast, to drive; refused if something else holds it.
    pub(super) fn get(&self) -> Result<MutexGuard<'_, ReliableMulticast>, TransportError> {
        match self.0.try_lock() {
            Ok(multicast) => Ok(multicast),
            // A step that failed midway poisons nothing it did not already
            // report: the error went to its caller, who stops using it.
            Err(TryLockError::Poisoned(poisoned)) => Ok(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => {
                Err(TransportError::Failed("the bcast's reliable multicast is in use by another thread of this communicator".to_string()))
            }
        }
    }

    /// The multicast, to read a count or a state from.
    pub(super) fn peek(&self) -> MutexGuard<'_, ReliableMulticast> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One rank's part of one multicast bcast; made by `Bcast::start`.
pub struct MulticastRun<'a> {
    multicast: SharedMulticast,
    transfer: Transfer,
    /// The root's message, or the receiver's buffer (empty while a
    /// two-level run has it parked, `FlatBcastRun::take_buffer`).
    pub(super) buf: &'a mut [u8],
    at_root: bool,
    /// Set by `abandon_at_root`: the message of a length no receiver
    /// expects, sent instead of `buf`, after which the run fails.
    abandoned: Option<Vec<u8>>,
    stall: StallClock,
}

impl<'a> MulticastRun<'a> {
    pub(super) fn start(multicast: &SharedMulticast, rank: usize, root: usize, buf: &'a mut [u8]) -> Result<Self, TransportError> {
        let shared = multicast.get()?;
        let at_root = root == rank;
        let transfer = if at_root { shared.start_send(buf.len()) } else { shared.start_receive(root, buf.len())? };
        let config = shared.config();
        let stall = StallClock::new(StallLimits { fault_timeout: config.stall_limit(), stall_warning: config.wait.stall_warning });
        drop(shared);
        Ok(MulticastRun { multicast: multicast.clone(), transfer, buf, at_root, abandoned: None, stall })
    }

    /// Turns a root's run that has not begun into one that sends a message
    /// of a length no receiver expects (as `Bcast::abandon_at_root` does),
    /// which each receiver refuses, and then fails.
    pub(super) fn abandon_at_root(&mut self) {
        debug_assert!(self.at_root && self.transfer.pieces_done() == 0, "abandoned where it may not be");
        let unexpected_length = vec![0u8; if self.transfer.len() == 1 { 2 } else { 1 }];
        self.transfer = self.multicast.peek().start_send(unexpected_length.len());
        self.abandoned = Some(unexpected_length);
    }
}

impl<T: Transport + ?Sized> Resumable<T> for MulticastRun<'_> {
    type Position = usize;

    /// One step whatever `meet` says: the blocking call is the multicast's
    /// own `send`/`receive`, which wait between these same steps.
    fn resume(&mut self, transport: &T, _meet: Meet<'_>) -> Result<bool, TransportError> {
        let mut multicast = self.multicast.get()?;
        if let Some(unexpected_length) = &self.abandoned {
            if !multicast.step_send(transport, &mut self.transfer, unexpected_length)? {
                return Ok(false);
            }
            return Err(TransportError::Failed(format!(
                "bcast from root {}: the root could not provide its message (it sent its receivers one of a length they refuse)",
                self.transfer.root()
            )));
        }
        if self.at_root {
            multicast.step_send(transport, &mut self.transfer, self.buf)
        } else {
            multicast.step_receive(transport, &mut self.transfer, self.buf)
        }
    }

    fn position(&self) -> usize {
        self.transfer.pieces_done()
    }

    fn stall_clock(&mut self) -> &mut StallClock {
        &mut self.stall
    }

    fn describe(&self) -> String {
        let waiting_for = self.multicast.get().map_or_else(|why| why.to_string(), |multicast| multicast.describe_transfer(&self.transfer));
        let role = if self.at_root { "root" } else { "receiver" };
        format!(
            "multicast bcast of {} bytes from root {} ({role}, {} piece(s) done) waiting for {waiting_for}",
            self.transfer.len(),
            self.transfer.root(),
            self.transfer.pieces_done()
        )
    }
}

impl<T: Transport + ?Sized> Schedule<T> for MulticastRun<'_> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        advance_by_polling(self, &*transport)
    }
}
