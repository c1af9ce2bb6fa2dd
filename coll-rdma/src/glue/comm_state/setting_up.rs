//! A communicator's setup started by a non-blocking call: the same
//! `PendingSetup::connect` a blocking call runs, on a stack of its own (a
//! stackful coroutine, `corosensei`), with an exchange whose allgather posts
//! the module underneath's non-blocking allgather and suspends until it
//! completed. Nothing else in the setup waits for a peer: the transports'
//! steps between two exchanges are local (shm's segment, verbs' queue
//! pairs, udp's sockets); udp's probe rounds listen a bounded time for the
//! peers' datagrams and their verdict is exchanged, so a peer that is late
//! to them makes every rank reach the same verdict; the testing-only
//! `coll_rdma_test_setup_pause_s` sleeps where it stands.
//!
//! Invariants:
//! - every rank starts the setup at the same call (the communicator's first
//!   collective, blocking or not: every rank makes its collectives in the
//!   same order) and every later call until it ends is queued behind it in
//!   call order (`Deferred`), so every rank serves or hands over the same
//!   calls in the same order once it ends;
//! - the coroutine is resumed only by the holder of the communicator's state
//!   (a call of ours, or a progress pass), never from inside itself, and
//!   it never runs Open MPI's progress: posting from progress is what
//!   libnbc does too, and a resumption from inside Open MPI's progress
//!   loop (its own MPI_Iallreduce agreeing on a context id) nests nothing;
//! - the blocking setup's "never joins" watchdog (a rank that does not
//!   select coll rdma for the communicator never joins the exchange) runs
//!   only while something waits for the setup: a blocking call or `*_init`
//!   finishing it (`finish_setup_by_waiting`), or progress passes that
//!   follow each other closely (`PassWatch`: the application is inside
//!   MPI, waiting); a gap between passes (the application computing: a
//!   rank may post MPI_Ibarrier and compute for minutes while a peer is
//!   late) starts its clock again;
//! - a panic inside the setup reaches the resumer (corosensei carries it
//!   across the stacks) and so the entry point's `ffi_guard`; a setup
//!   dropped while suspended (its communicator freed, or failed) unwinds its
//!   stack, leaving a posted allgather's buffers allocated (`PostedGather`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::Poll;

use btl_ibmc::{Exchange, TransportError};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use ompi_sys as sys;

use super::super::deferred::Deferred;
use super::super::events;
use super::super::saved::{end_job_for_abandoned_setup, SavedAllgather, SavedCollectives, SETUP_EXCHANGE_AWAITED};
use super::super::params::TestFaults;
use super::ready::ReadyComm;
use crate::{StallClock, StallLimits, Stuck};
use super::setup::PendingSetup;
use super::{CommId, CommState, Stage};

/// The setup's stack: the blocking setup runs on the thread's own, so this
/// is far more than it needs, and only the pages touched are ever mapped.
const SETUP_STACK_BYTES: usize = 1 << 21;

type SetupRun = Coroutine<(), (), Option<ReadyComm>, DefaultStack>;

/// The coroutine running `PendingSetup::connect`.
struct SetupCoroutine(SetupRun);

// SAFETY: the coroutine's stack holds, at its only suspension point (the
// exchange's allgather, which holds no lock and no thread-local borrow),
// the setup's own data (`PendingSetup` and transports being built, all
// `Send` as `ReadyComm` is), an `Arc` of the saved functions and pointers
// to the communicator and a request of the module underneath, which Open
// MPI lets any thread use. It is resumed by whichever thread holds the
// communicator's state, one at a time.
unsafe impl Send for SetupCoroutine {}

/// A setup under way, and the calls queued behind it.
pub(super) struct SettingUp {
    run: SetupCoroutine,
    comm: *mut sys::ompi_communicator_t,
    queued: VecDeque<Deferred>,
    watch: PassWatch,
}

/// The watchdog of the passes that advance a setup without a wait of ours
/// around them (`SettingUp` invariants): the runs' stall clock, whose
/// stuck time starts again after a gap between passes (`AWAY`).
struct PassWatch(StallClock);

impl PassWatch {
    fn new(limits: StallLimits) -> Self {
        PassWatch(StallClock::new(limits))
    }

    /// After a pass that found the setup still under way: warns at the
    /// stall warning and its doublings, and gives up at the fault timeout.
    fn after_pass(&mut self, id: CommId) -> Result<(), TransportError> {
        match self.0.stuck() {
            Stuck::Quiet => Ok(()),
            Stuck::PastFaultTimeout(waited) => Err(TransportError::Failed(format!(
                "gave up after {:.1} s waiting for every rank of the communicator to join coll rdma's setup exchange, which a \
                 non-blocking call started (coll_rdma_fault_timeout_s)",
                waited.as_secs_f64()
            ))),
            Stuck::Warn(waited) => {
                tracing::warn!(
                    "rank {} of {} has waited {:.1} s for every rank of the communicator to join coll rdma's setup exchange, \
                     which a non-blocking call started (comm {}; a rank that does not select coll rdma for it, e.g. with \
                     coll_rdma_priority or --mca coll set differently per rank, never joins)",
                    id.rank,
                    id.size,
                    waited.as_secs_f64(),
                    id.cid
                );
                Ok(())
            }
        }
    }
}

// SAFETY: `comm` is the communicator the state belongs to, used only by
// the state's holder; the rest is `Send` (see `SetupCoroutine`).
unsafe impl Send for SettingUp {}

/// The setup's exchange: each allgather posted underneath, then suspended
/// on until it completed.
struct SuspendingExchange<'a> {
    gather: SavedAllgather<'a>,
    yielder: &'a Yielder<(), ()>,
}

impl Exchange for SuspendingExchange<'_> {
    fn allgather(&self, mine: &[u8], all: &mut [u8]) -> Result<(), TransportError> {
        let posted = self.gather.post(mine, all.len())?;
        while !posted.is_complete() {
            self.yielder.suspend(());
        }
        posted.finish(all)
    }
}

impl SettingUp {
    /// Starts `pending` resumable on `comm`, without taking a step; gives
    /// it back where that cannot be done (no non-blocking allgather
    /// underneath, or no memory for the stack).
    fn start(
        pending: Box<PendingSetup>,
        id: CommId,
        saved: &Arc<SavedCollectives>,
        comm: *mut sys::ompi_communicator_t,
        faults: TestFaults,
        limits: StallLimits,
    ) -> Result<Self, Box<PendingSetup>> {
        if !saved.exchange(comm).can_post() {
            return Err(pending);
        }
        let stack = match DefaultStack::new(SETUP_STACK_BYTES) {
            Ok(stack) => stack,
            Err(why) => {
                tracing::warn!("comm {} rank {}: no stack for a resumable setup ({why})", id.cid, id.rank);
                return Err(pending);
            }
        };
        let saved = Arc::clone(saved);
        let run = Coroutine::with_stack(stack, move |yielder: &Yielder<(), ()>, ()| {
            let exchange = SuspendingExchange { gather: saved.exchange(comm), yielder };
            pending.connect(id, &exchange, &faults)
        });
        Ok(SettingUp { run: SetupCoroutine(run), comm, queued: VecDeque::new(), watch: PassWatch::new(limits) })
    }

    /// Takes every step the setup can take now: its outcome once it ended.
    fn advance(&mut self) -> Poll<Option<ReadyComm>> {
        match self.run.0.resume(()) {
            CoroutineResult::Yield(()) => Poll::Pending,
            CoroutineResult::Return(outcome) => Poll::Ready(outcome),
        }
    }
}

impl CommState {
    /// For a non-blocking call on `comm`: starts the setup if this is the
    /// communicator's first call, or advances it; true while it is under
    /// way (the call is then queued, `queue_behind_setup`), false when the
    /// call goes on as usual (set up, no transport, or a setup that cannot
    /// run resumable here and waits for a blocking call).
    pub(in crate::glue) fn must_queue_behind_setup(&mut self, comm: *mut sys::ompi_communicator_t, starts: &'static str) -> bool {
        if let Stage::Pending(_) = self.stage {
            let Stage::Pending(pending) = std::mem::replace(&mut self.stage, Stage::Unavailable) else { return false };
            let shared = &self.shared;
            match SettingUp::start(pending, shared.id, &shared.saved, comm, shared.test_faults, shared.setup_watch) {
                Ok(setting_up) => {
                    events::emit("setup_started", shared.id.origin(), || events::json!({ "collective": starts, "resumable": true }));
                    self.stage = Stage::SettingUp(Box::new(setting_up));
                }
                Err(pending) => {
                    self.stage = Stage::Pending(pending);
                    return false;
                }
            }
        }
        self.advance_setup();
        matches!(self.stage, Stage::SettingUp(_))
    }

    /// Queues a non-blocking call behind the setup under way.
    pub(in crate::glue) fn queue_behind_setup(&mut self, deferred: Deferred) {
        match &mut self.stage {
            Stage::SettingUp(setting_up) => setting_up.queued.push_back(deferred),
            // Unreachable: the caller asked `must_queue_behind_setup` just
            // before; the request completes with an error if it happens.
            Stage::Pending(_) | Stage::Ready(_) | Stage::Unavailable => drop(deferred),
        }
    }

    /// One advance of a setup under way (a progress pass, a non-blocking
    /// call); once it ends, the queued calls are posted in their order.
    /// Every progress pass asks: the test is inlined, the advance not.
    #[inline]
    pub(super) fn advance_setup(&mut self) {
        if matches!(self.stage, Stage::SettingUp(_)) {
            self.advance_setup_under_way();
        }
    }

    #[inline(never)]
    fn advance_setup_under_way(&mut self) {
        let Stage::SettingUp(setting_up) = &mut self.stage else { return };
        match setting_up.advance() {
            Poll::Ready(outcome) => self.conclude_setup(outcome),
            Poll::Pending => {
                if let Err(failure) = setting_up.watch.after_pass(self.shared.id) {
                    let comm = setting_up.comm;
                    // SAFETY: the live communicator whose state this pass
                    // holds.
                    unsafe { end_job_for_abandoned_setup(comm, self.shared.id.rank, &failure) };
                    self.conclude_setup(None);
                }
            }
        }
    }

    /// Finishes a setup under way, waiting for it (a blocking call or an
    /// `*_init` arrived): the blocking setup's wait, its watchdog
    /// included, then the queued calls, so that the caller's call comes
    /// after them.
    pub(super) fn finish_setup_by_waiting(&mut self) {
        let Stage::SettingUp(setting_up) = &mut self.stage else { return };
        let CommId { rank, size, .. } = self.shared.id;
        let mut outcome = None;
        let waited = btl_ibmc::wait::wait_until(
            rank,
            size,
            || match setting_up.advance() {
                Poll::Ready(ended) => {
                    outcome = Some(ended);
                    Ok(true)
                }
                Poll::Pending => {
                    // SAFETY: Open MPI's progress, as the blocking setup's
                    // wait runs it; the progress callback skips this
                    // communicator, whose state this call holds.
                    unsafe { sys::opal_progress() };
                    Ok(false)
                }
            },
            || SETUP_EXCHANGE_AWAITED.to_string(),
        );
        match (waited, outcome) {
            (Ok(()), Some(outcome)) => self.conclude_setup(outcome),
            (Err(failure), _) => {
                let comm = setting_up.comm;
                // SAFETY: the live communicator of the current call.
                unsafe { end_job_for_abandoned_setup(comm, rank, &failure) };
                self.conclude_setup(None);
            }
            (Ok(()), None) => self.conclude_setup(None),
        }
    }

    /// The setup ended: the stage it leads to, then every queued call
    /// posted as if it were made now (served, or handed over with its
    /// reason, `deferred.rs`).
    fn conclude_setup(&mut self, outcome: Option<ReadyComm>) {
        let queued = match std::mem::replace(&mut self.stage, Stage::Unavailable) {
            Stage::SettingUp(setting_up) => setting_up.queued,
            other => {
                self.stage = other;
                return;
            }
        };
        match outcome {
            Some(ready) => self.stage = Stage::Ready(Box::new(ready)),
            None => self.shared.bypass_requested = true,
        }
        for deferred in queued {
            self.replay(deferred);
        }
        self.shared.saved.nested_in_setup.post_after_setup(&self.shared.saved);
    }

    /// Completes every queued call with an error (the state failed).
    pub(super) fn abandon_queued(&mut self) {
        if let Stage::SettingUp(setting_up) = &mut self.stage {
            setting_up.queued.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    const ID: CommId = CommId { cid: 7, rank: 1, size: 3 };

    fn watch(fault_timeout: Duration) -> PassWatch {
        PassWatch::new(StallLimits { stall_warning: Duration::MAX, fault_timeout: Some(fault_timeout) })
    }

    #[test]
    fn close_passes_give_up_at_the_fault_timeout() {
        let limit = Duration::from_millis(150);
        let mut watch = watch(limit);
        let started = Instant::now();
        // Passes 1 ms apart: a loaded machine may stretch one gap past
        // `AWAY`, which only starts the clock again, so the loop runs
        // until the watch gives up (bounded far above the limit).
        let failure = loop {
            if let Err(failure) = watch.after_pass(ID) {
                break Some(failure);
            }
            if started.elapsed() > Duration::from_secs(60) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let failure = failure.expect("close passes for a minute never reached a 150 ms fault timeout");
        assert!(started.elapsed() >= limit);
        assert!(failure.to_string().contains("gave up after"), "{failure}");
    }

    #[test]
    fn a_gap_between_passes_starts_the_clock_again() {
        let mut watch = watch(Duration::from_millis(150));
        watch.after_pass(ID).expect("the first pass");
        // The application computing, away from MPI, for longer than the
        // fault timeout: not a wait.
        std::thread::sleep(Duration::from_millis(300));
        watch.after_pass(ID).expect("a pass after a gap counts from itself, not from the setup's start");
    }
}
