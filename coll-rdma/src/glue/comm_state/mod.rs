//! What coll rdma keeps per communicator, as the stages it goes through:
//!
//! 1. `Stage::Pending` from the module's enable: the settings are read and
//!    the plan made (configurations, window layout, schedules), nothing is
//!    sent. Open MPI's collectives cannot be used while modules are being
//!    enabled, so agreement and the transport wait for the first collective.
//! 2. The communicator's first collective call, on every rank alike (all
//!    make the same collective calls in the same order), agrees on the
//!    settings and connects: a blocking one (`CommState::enter`) or a
//!    persistent `*_init` (`set_up`), waiting; a non-blocking one starts
//!    the same setup resumable (`Stage::SettingUp`,
//!    `setting_up.rs`), advanced by the progress callback and by every
//!    call, with that call and every later one queued behind it until it
//!    ends (a blocking call or `*_init` finishes it by waiting, then posts
//!    the queue, then runs). Success makes the stage `Ready(ReadyComm)`;
//!    any failure makes it `Unavailable` for good, every rank having
//!    reached the same verdict, and asks the module once to put the
//!    functions underneath back. The starts of persistent requests never
//!    connect (`enter_if_set_up`): a persistent request of ours exists
//!    only once its `*_init` found the stage `Ready`.
//! 3. `Stage::Ready`: the transport and everything that exists only with it
//!    (schedules, two-level barrier, leader links, limits) live in
//!    `ReadyComm`. The only way to it is `enter`, which hands the caller a
//!    `Native` (the shared part and the `ReadyComm`, borrowed together), so
//!    no code path can ask for the transport of a communicator without one.
//!
//! Who holds what: the module (`module.rs`) owns one `CommState` per
//! communicator and lends it to one holder at a time, a collective call or
//! the progress callback; nothing here is tied to one call's stack. The
//! parts every stage has (identity, saved functions, tallies, fault
//! injection, hand-over reports) are `Shared`.
//!
//! After a failure midway through a call (`Tallies::mark_failed`) the stage
//! stays as it is but is trusted no more: the module hands every later call
//! over without entering the state, and teardown skips the protocols'
//! closing steps. The counts (`tally.rs`) and the words said about all this
//! (`report.rs`) are kept apart from the stages.

mod pending;
mod policy;
mod ready;
mod report;
mod report_events;
mod setting_up;
mod setup;
mod summary;
mod tally;

use std::ffi::c_int;
use std::sync::Arc;

use btl_ibmc::{Endpoint, TransportError};
use ompi_sys as sys;

use super::{events, process_facts};
use super::handover::Handover;
use crate::StallLimits;
use super::params::{Settings, TestFaults};
use super::reduction_call::FoldOrder;
use super::saved::SavedCollectives;
#[cfg(test)] // the parameters' tests check a bcast configuration
pub(super) use policy::bcast_config;
pub(super) use pending::PendingRuns;
pub(super) use ready::ReadyComm;
use report::HandoverReports;
use setting_up::SettingUp;
use setup::PendingSetup;
pub(super) use tally::Collective;
use tally::Tallies;

/// Why a non-blocking call before the setup is handed over where the setup
/// cannot be made resumable.
const SETUP_DEFERRED: &str = "the communicator is not set up yet, and the module underneath has no non-blocking allgather \
     to set it up without blocking: its first blocking collective or persistent *_init sets it up";

/// What a collective entry point does once it has let go of the state.
pub(super) enum Step {
    Done(c_int),
    /// Run the module underneath. It may call back into our entry points
    /// (tuned's allreduce runs the communicator's reduce and bcast), so it
    /// must run after the state is released.
    HandOver(Box<dyn FnOnce() -> c_int>),
}

/// Which communicator, and this process's place in it; the same in every
/// stage.
#[derive(Clone, Copy, Debug)]
pub(super) struct CommId {
    pub(super) cid: u32,
    pub(super) rank: usize,
    pub(super) size: usize,
}

impl CommId {
    /// The same, as the events name it.
    pub(super) fn origin(self) -> events::Origin {
        events::Origin { cid: self.cid, rank: self.rank, size: self.size }
    }
}

/// What every stage has.
pub(super) struct Shared {
    pub(super) id: CommId,
    pub(super) saved: Arc<SavedCollectives>,
    test_faults: TestFaults,
    /// A fault that strikes inside a call is set (`count_call`): false
    /// outside tests, so each call pays one test for them.
    call_faults_armed: bool,
    tallies: Tallies,
    handovers: HandoverReports,
    /// Every rank has just agreed that there is no transport: the module
    /// may put the functions underneath back into the communicator's table.
    bypass_requested: bool,
    /// A non-blocking call came before the setup (said once).
    setup_deferral_reported: bool,
    /// The watchdog's limits for a resumable setup (`setting_up.rs`).
    setup_watch: StallLimits,
}

/// Why a non-blocking or persistent call is not served natively.
pub(super) enum Unserved {
    /// The communicator has had no blocking collective nor `*_init` yet,
    /// and its setup cannot run resumable (no non-blocking allgather
    /// underneath): see `SettingUp::start`.
    BeforeSetup,
    HandOver(Handover),
}

impl From<Handover> for Unserved {
    fn from(why: Handover) -> Self {
        Unserved::HandOver(why)
    }
}

enum Stage {
    Pending(Box<PendingSetup>),
    /// Started by a non-blocking call, advancing without blocking.
    SettingUp(Box<SettingUp>),
    Ready(Box<ReadyComm>),
    /// No transport: every rank reached the same verdict, so all of them
    /// hand their calls over.
    Unavailable,
}

pub struct CommState {
    pub(super) shared: Shared,
    stage: Stage,
}

/// A call served natively: the shared part and the ready stage, borrowed
/// together from `CommState::enter`.
pub(super) struct Native<'a> {
    pub(super) shared: &'a mut Shared,
    pub(super) ready: &'a mut ReadyComm,
}

impl CommState {
    pub fn new(cid: u32, rank: usize, size: usize, saved: Arc<SavedCollectives>, settings: &Settings) -> Self {
        let id = CommId { cid, rank, size };
        process_facts::say_once(id.origin());
        events::emit("comm_claimed", id.origin(), || events::json!({ "priority": settings.priority }));
        CommState {
            shared: Shared {
                id,
                saved,
                test_faults: settings.test_faults,
                call_faults_armed: settings.test_faults.panic_at.is_some() || settings.test_faults.thread_stop_at.is_some(),
                tallies: Tallies::default(),
                handovers: HandoverReports::default(),
                bypass_requested: false,
                setup_deferral_reported: false,
                setup_watch: StallLimits { stall_warning: settings.stall_warning, fault_timeout: settings.fault_timeout },
            },
            stage: Stage::Pending(Box::new(PendingSetup::new(id, settings))),
        }
    }

    /// The ready stage, connecting first if this is the communicator's first
    /// collective (every rank calls this in the same collective call, and
    /// all reach the same verdict); `None` when there is no transport.
    #[inline]
    pub(super) fn enter(&mut self, comm: *mut sys::ompi_communicator_t) -> Option<Native<'_>> {
        self.set_up(comm);
        match &mut self.stage {
            Stage::Ready(ready) => Some(Native { shared: &mut self.shared, ready }),
            Stage::Pending(_) | Stage::SettingUp(_) | Stage::Unavailable => None,
        }
    }

    /// Sets the communicator up, if nothing has, waiting for it: a
    /// blocking collective's first step (`enter`) and a persistent
    /// collective's `*_init`'s. MPI makes `*_init` a nonlocal collective
    /// call that follows every rule of the blocking ones, ordering
    /// included (MPI 4.1 section 7.13; Open MPI 4.1's `MPIX_` forms follow
    /// the 2018 draft of it): every rank makes it in the same place among
    /// the communicator's collectives, as a blocking call, so every rank
    /// connects in the same call. Open MPI makes no persistent collective
    /// call of its own (from its progress loop or elsewhere), unlike
    /// MPI_Iallreduce. A setup a non-blocking call started is finished
    /// here by waiting, as under a first blocking call, and the calls
    /// queued behind it are posted before this one.
    #[inline]
    pub(super) fn set_up(&mut self, comm: *mut sys::ompi_communicator_t) {
        if matches!(self.stage, Stage::Pending(_) | Stage::SettingUp(_)) {
            self.connect(comm);
        }
    }

    /// The ready stage for a non-blocking call or a persistent start,
    /// which never waits for the setup: Open MPI makes non-blocking calls
    /// from inside its progress loop (MPI_Iallreduce agreeing on a new
    /// communicator's context id), where the setup's blocking exchange
    /// would run Open MPI's progress again from inside itself, and those
    /// calls are local. A non-blocking call starts the setup resumable
    /// and is queued behind it before it gets here
    /// (`defer_behind_setup`); a persistent request of ours exists only
    /// on a ready communicator. `BeforeSetup` remains only where the setup
    /// cannot run resumable.
    pub(super) fn enter_if_set_up(&mut self) -> Result<Native<'_>, Unserved> {
        match &mut self.stage {
            Stage::Ready(ready) => Ok(Native { shared: &mut self.shared, ready }),
            Stage::Pending(_) | Stage::SettingUp(_) => Err(Unserved::BeforeSetup),
            Stage::Unavailable => Err(Handover::TransportUnavailable.into()),
        }
    }

    #[cold]
    #[inline(never)]
    fn connect(&mut self, comm: *mut sys::ompi_communicator_t) {
        if matches!(self.stage, Stage::SettingUp(_)) {
            self.finish_setup_by_waiting();
            return;
        }
        // Unavailable while connecting: a panic inside leaves no half-made
        // stage behind (the module marks the state failed anyway).
        let Stage::Pending(pending) = std::mem::replace(&mut self.stage, Stage::Unavailable) else { return };
        let shared = &mut self.shared;
        match pending.connect(shared.id, &shared.saved.exchange(comm), &shared.test_faults) {
            Some(ready) => self.stage = Stage::Ready(Box::new(ready)),
            None => shared.bypass_requested = true,
        }
        self.shared.saved.nested_in_setup.post_after_setup(&self.shared.saved);
    }

    /// Whether the setup ended (ready, or no transport).
    #[inline]
    pub(super) fn setup_has_ended(&self) -> bool {
        matches!(self.stage, Stage::Ready(_) | Stage::Unavailable)
    }

    /// True once, right after every rank agreed that this communicator has
    /// no transport: from then on nothing here can serve it.
    pub(super) fn take_bypass_request(&mut self) -> bool {
        std::mem::take(&mut self.shared.bypass_requested)
    }

    pub(super) fn note_handed_over_after_failure(&mut self, calls: u64) {
        self.shared.tallies.note_handed_over_after_failure(calls);
    }

    /// Agreements the module sent underneath without the state.
    pub(super) fn note_agreements_underneath(&mut self, calls: u64) {
        self.shared.tallies.note_agreements_underneath(calls);
    }

    pub(super) fn mark_failed(&mut self) {
        self.shared.tallies.mark_failed();
    }

    pub(super) fn has_failed(&self) -> bool {
        self.shared.tallies.has_failed()
    }

    /// Whether the progress callback has work here (see
    /// `ReadyComm::has_background_work`).
    pub(super) fn has_background_work(&self) -> bool {
        match &self.stage {
            Stage::Ready(ready) => ready.has_background_work(),
            Stage::SettingUp(_) => true,
            Stage::Pending(_) | Stage::Unavailable => false,
        }
    }

    /// Up to `reads` loads of the word the communicator's pending runs
    /// wait for, until it arrives (`ReadyComm::watch_awaited_word`); 0 if
    /// there is no such word.
    pub(super) fn watch_awaited_word(&self, reads: u32) -> u32 {
        match &self.stage {
            Stage::Ready(ready) => ready.watch_awaited_word(reads),
            Stage::Pending(_) | Stage::SettingUp(_) | Stage::Unavailable => 0,
        }
    }

    /// Completes every non-blocking run under way with an error, once the
    /// state failed: nothing advances them any more.
    pub(super) fn abandon_pending(&mut self) {
        self.abandon_queued();
        self.shared.saved.nested_in_setup.abandon();
        if let Stage::Ready(ready) = &mut self.stage
            && !ready.pending_runs.is_empty()
        {
            tracing::error!(
                "comm {} rank {}: {} non-blocking run(s) under way end with an error (the communicator failed)",
                self.shared.id.cid,
                self.shared.id.rank,
                ready.pending_runs.len()
            );
            ready.pending_runs.abandon();
        }
    }

    pub(super) fn progress_background_work(&mut self) {
        self.advance_setup();
        if let Stage::Ready(ready) = &mut self.stage
            && let Err(why) = ready.progress_background_work()
        {
            tracing::error!(
                "comm {} rank {}: a non-blocking run, or the bcast's repairs between calls, failed: {why}; pending requests \
                 and every later one complete with an error, and later collectives on this communicator go to the module underneath",
                self.shared.id.cid,
                self.shared.id.rank
            );
            self.shared.tallies.mark_failed();
        }
    }
}

impl Shared {
    /// Counts an MPI_Iallreduce of the shape of Open MPI's own agreements,
    /// left to the module underneath (`mpi_ireduction.rs`).
    pub(super) fn agreement_underneath(&mut self) {
        tracing::debug!(
            "comm {} rank {}: an iallreduce of one MPI_INT with MPI_MAX, MPI_MIN or MPI_BAND (the shape of Open MPI's own agreements) goes to the module underneath",
            self.id.cid,
            self.id.rank
        );
        self.tallies.agreement_underneath();
    }

    /// Counts the call and injects the testing-only faults that strike
    /// inside a collective: a panic (coll_rdma_test_panic_at), to exercise
    /// the recovery from one, and a thread stopped for good
    /// (coll_rdma_test_thread_stop_at), to check that a dead thread ends
    /// the job with a diagnostic.
    #[inline]
    pub(super) fn count_call(&mut self, collective: Collective) {
        let calls = self.tallies.entered(collective);
        if self.call_faults_armed {
            self.strike_injected_fault(collective, calls);
        }
    }

    #[cold]
    #[inline(never)]
    fn strike_injected_fault(&mut self, collective: Collective, calls: u64) {
        if self.test_faults.panic_at == Some((collective, calls)) {
            panic!("coll_rdma_test_panic_at={}:{} (testing only)", collective.name(), calls);
        }
        if self.test_faults.thread_stop_at == Some((collective, calls)) && self.id.rank == 1 {
            stop_this_thread(self.id, collective, calls);
        }
    }

    /// Whether the testing-only coll_rdma_test_pack_failure_at makes this
    /// rank's pack fail now (counting the packing bcast roots).
    pub(super) fn injected_pack_failure(&mut self) -> bool {
        match self.test_faults.pack_failure_at {
            Some(at) => {
                self.test_faults.packs_seen += 1;
                self.test_faults.packs_seen == at
            }
            None => false,
        }
    }

    /// Counts a call served natively, or reports why it failed.
    #[inline]
    pub(super) fn finish(&mut self, collective: Collective, outcome: Result<(), TransportError>) -> Step {
        match outcome {
            Ok(()) => {
                self.tallies.served(collective);
                Step::Done(sys::OMPI_SUCCESS as c_int)
            }
            Err(why) => self.fail(collective, why),
        }
    }

    #[cold]
    #[inline(never)]
    fn fail(&mut self, collective: Collective, why: TransportError) -> Step {
        tracing::error!(
            "comm {} rank {}: {} failed: {why}; later collectives on this communicator go to the module underneath",
            self.id.cid,
            self.id.rank,
            collective.name()
        );
        events::emit("fault", self.id.origin(), || events::json!({ "collective": collective.name(), "error": why.to_string() }));
        self.tallies.mark_failed();
        Step::Done(sys::OMPI_ERROR as c_int)
    }

    pub(super) fn mark_failed(&mut self) {
        self.tallies.mark_failed();
    }

    /// Hands a call to the module underneath, saying why once per
    /// communicator and kind of reason (and every time at debug level).
    pub(super) fn hand_over(&mut self, collective: Collective, why: Handover, fallback: impl FnOnce() -> c_int + 'static) -> Step {
        self.hand_over_reduction(collective, why, FoldOrder::Any, fallback)
    }

    /// As `hand_over`, for a reduction whose op asks for `order` (see
    /// `HandoverReports::report`).
    pub(super) fn hand_over_reduction(
        &mut self,
        collective: Collective,
        why: Handover,
        order: FoldOrder,
        fallback: impl FnOnce() -> c_int + 'static,
    ) -> Step {
        self.handovers.report(self.id, collective, &why, order);
        self.tallies.handed_over(collective);
        Step::HandOver(Box::new(fallback))
    }
}

impl Shared {
    /// Hands a non-blocking or persistent call that is not served to the
    /// module underneath: counted with its reason as any hand-over, or,
    /// before the communicator's setup, not counted (no decision about the
    /// communicator is made yet) and said at debug level every time and
    /// in a `setup_deferred` event once per communicator.
    pub(super) fn decline(
        &mut self,
        collective: Collective,
        why: Unserved,
        order: FoldOrder,
        fallback: impl FnOnce() -> c_int + 'static,
    ) -> Step {
        let why = match why {
            Unserved::HandOver(why) => return self.hand_over_reduction(collective, why, order, fallback),
            Unserved::BeforeSetup => SETUP_DEFERRED,
        };
        tracing::debug!("comm {} rank {}: {} handed to the module underneath: {why}", self.id.cid, self.id.rank, collective.name());
        if !std::mem::replace(&mut self.setup_deferral_reported, true) {
            events::emit("setup_deferred", self.id.origin(), || events::json!({ "collective": collective.name(), "reason": why }));
        }
        Step::HandOver(Box::new(fallback))
    }
}

impl Drop for CommState {
    fn drop(&mut self) {
        let (id, tallies) = (self.shared.id, &self.shared.tallies);
        report::report_closing_skipped(id, tallies);
        let (transport, bcast) = match &mut self.stage {
            Stage::Ready(ready) => {
                if !tallies.has_failed() {
                    ready.close();
                }
                (ready.transport.name(), Some(&ready.bcast))
            }
            Stage::Unavailable => ("no transport", None),
            Stage::Pending(_) => ("no transport (never used)", None),
            Stage::SettingUp(_) => ("no transport (freed while setting up)", None),
        };
        report::report_summary(id, transport, bcast, tallies);
        summary::say_freed_summary(id, transport, tallies);
    }
}

/// Stops the calling thread for good, where it is (inside a collective,
/// holding its communicator), as a thread killed mid-collective would stop;
/// the first thread of the process to get here only, so that the others
/// go on as in a process that lost one thread. Killing a thread outright
/// (pthread_exit, pthread_cancel) would unwind or abandon Rust and Open MPI
/// frames holding locks, which no real program can survive either; what
/// the rest of the job sees of a dead thread, a thread that never runs
/// again and never lets go, is exactly this.
fn stop_this_thread(id: CommId, collective: Collective, calls: u64) {
    static STOPPED_ONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if STOPPED_ONE.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return;
    }
    tracing::warn!(
        "comm {} rank {}: coll_rdma_test_thread_stop_at={}:{}: this thread stops here for good, holding the communicator (testing only)",
        id.cid,
        id.rank,
        collective.name(),
        calls
    );
    loop {
        std::thread::park();
    }
}
