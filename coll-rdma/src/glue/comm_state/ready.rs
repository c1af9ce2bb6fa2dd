//! The last stage of a communicator that has a transport: `ReadyComm` owns
//! the transport together with everything that only means something once it
//! is known (the collectives' schedules, the two-level barrier, the leader
//! links, the limits agreed for it). A collective reaches it only through
//! `CommState::enter`, so a path that needs the transport always has one.
//! It is owned by the communicator's state, not by any call's stack: whoever
//! holds the state (one collective, or the progress callback) may borrow it.

use btl_ibmc::{Endpoint, NoSideProgress, PeerReads, SelectedTransport, TransportError};

use super::super::output;
use super::super::request_for::RequestFor;
use super::{CommId, PendingRuns};
use crate::collectives::allreduce::Allreduce;
use crate::collectives::allreduce::autotune::DegreeTrial;
use crate::collectives::barrier::autotune::TunedBarrier;
use crate::collectives::barrier::two_level::TwoLevelBarrier;
use crate::collectives::bcast::Bcast;
use crate::collectives::reduce::Reduce;
use crate::collectives::large_reduction::ring::{RingLengths, RingReduction};
use crate::schedule::Schedule;
use crate::schedule_queue::Lane;
use super::super::run_home::{Posting, QueuedRun, RunHome, Unplaced};
use crate::select::{BcastPlan, Decisions, Plan, ReductionPlan};

/// The collectives' schedules, built when the module is enabled (they need
/// only the window's layout) and moved into the `ReadyComm`.
pub(super) struct Schedules {
    pub barrier: TunedBarrier,
    pub allreduce: Allreduce,
    pub allreduce_trial: Option<DegreeTrial>,
    pub reduce: Reduce,
    pub ring: RingReduction,
    pub bcast: Bcast,
}

/// The lengths each native path serves, agreed at setup (every rank holds
/// the same values, so every rank takes the same path).
pub(in crate::glue) struct Limits {
    pub(in crate::glue) allreduce_max_bytes: Option<usize>,
    pub(in crate::glue) reduce_max_bytes: Option<usize>,
    /// Long allreduces and reduces of commutative ops where the parallel
    /// reduction does not serve.
    pub(in crate::glue) allreduce_ring: RingLengths,
    pub(in crate::glue) reduce_ring: RingLengths,
    /// The window paths' limit for the transport in use.
    pub(in crate::glue) bcast_max_bytes: Option<usize>,
    pub(in crate::glue) bcast_single_copy_max_bytes: Option<usize>,
}

/// A communicator with a transport, ready to serve collectives.
pub(in crate::glue) struct ReadyComm {
    pub(in crate::glue) id: CommId,
    pub(in crate::glue) transport: SelectedTransport,
    pub(in crate::glue) barrier: TunedBarrier,
    /// Set where the communicator spans nodes and `coll_rdma_hierarchy`
    /// allows: it then serves every barrier in place of `barrier` (they
    /// share the window's barrier region).
    pub(in crate::glue) two_level_barrier: Option<TwoLevelBarrier>,
    pub(in crate::glue) allreduce: Allreduce,
    /// The autotune's degree trial, until the first allreduce the tree
    /// serves runs it (or the two-level tree makes it moot).
    pub(in crate::glue) allreduce_trial: Option<DegreeTrial>,
    pub(in crate::glue) reduce: Reduce,
    pub(in crate::glue) ring: RingReduction,
    pub(in crate::glue) bcast: Bcast,
    pub(in crate::glue) limits: Limits,
    /// Non-blocking and persistent runs under way, of every collective.
    pub(in crate::glue) pending_runs: PendingRuns,
    /// What the selectors read (`crate::select`), settled once the setup's
    /// choices are made (its `leaders_only` is set where only the nodes'
    /// leaders hold queue pairs across nodes), with the allreduce's and
    /// reduce's last answers on it: a call of the last call's shape takes
    /// the remembered path without asking the selector again.
    pub(in crate::glue) decisions: Decisions,
}

impl ReadyComm {
    /// The flat schedules on `transport`; `setup.rs` then makes the choices
    /// that need the transport before anyone else sees the result.
    pub(super) fn assemble(id: CommId, transport: SelectedTransport, schedules: Schedules, limits: Limits) -> Self {
        let Schedules { barrier, allreduce, allreduce_trial, reduce, ring, bcast } = schedules;
        let mut ready = ReadyComm {
            id,
            transport,
            barrier,
            two_level_barrier: None,
            allreduce,
            allreduce_trial,
            reduce,
            ring,
            bcast,
            limits,
            pending_runs: PendingRuns::default(),
            decisions: Decisions::default(),
        };
        ready.settle_plan();
        ready
    }

    /// Makes the plan agree with the schedules and limits as they stand
    /// (keeping `leaders_only`); `setup.rs` calls it again once it has made
    /// the choices that need the transport. Every input is agreed, so every
    /// rank settles the same plan.
    pub(super) fn settle_plan(&mut self) {
        let reads_peers = self.transport.reads_peer_memory();
        let allreduce = self.allreduce.config();
        let ring_slot_bytes = self.ring.segment_bytes();
        let leaders_only = self.decisions.plan_mut().leaders_only.take();
        self.decisions.replace(Plan {
            size: self.id.size,
            allreduce: ReductionPlan {
                max_bytes: self.limits.allreduce_max_bytes,
                segment_bytes: allreduce.tree.segment_bytes,
                parallel_from: reads_peers.then(|| self.allreduce.parallel().min_bytes()),
                ring: self.limits.allreduce_ring,
                ring_slot_bytes,
                // The two-level tree serves every length (no exchange).
                exchange_max_bytes: (!self.allreduce.is_two_level()).then_some(allreduce.exchange_max_bytes),
            },
            reduce: ReductionPlan {
                max_bytes: self.limits.reduce_max_bytes,
                segment_bytes: self.reduce.config().segment_bytes,
                parallel_from: reads_peers.then(|| self.reduce.parallel().min_bytes()),
                ring: self.limits.reduce_ring,
                ring_slot_bytes,
                exchange_max_bytes: None,
            },
            bcast: BcastPlan {
                window_max_bytes: self.limits.bcast_max_bytes,
                single_copy_max_bytes: self.limits.bcast_single_copy_max_bytes,
                single_copy_from: reads_peers.then_some(self.bcast.config().single_copy_min_bytes),
                window_serves_up_to: self.bcast.config().substrate_max_bytes,
            },
            two_level_barrier: self.two_level_barrier.is_some(),
            leaders_only,
        });
    }

    /// Whether the bcast needs serving outside its own calls (see
    /// [`crate::collectives::bcast::Bcast::needs_side_progress`]): by other
    /// collectives' waits, and by the progress engine between calls.
    /// Keeping the callback idle otherwise keeps it off the progress loop
    /// of every later MPI call.
    /// Non-blocking runs under way count too: they advance only there.
    pub(super) fn has_background_work(&self) -> bool {
        !self.pending_runs.is_empty() || self.bcast.needs_side_progress(&self.transport)
    }

    /// Posts `run` for `request` (an MPI_I* call's made only if the run
    /// outlives its first step: `PendingRuns::post`) in `lane`. MPI_Wait
    /// on the request then makes as many passes over coll rdma's own
    /// progress before Open MPI's wait loop takes over (`own_wait.rs`) as
    /// the blocking waits spin: none where ranks outnumber cores, and
    /// where the data comes through the kernel its own count.
    pub(in crate::glue) fn post_run<S: Posting>(&mut self, lane: Lane, run: S, request: RequestFor) -> Result<(), TransportError> {
        let polls = self.barrier.wait_policy().spin_polls_where(self.transport.sleeps_in_kernel());
        self.pending_runs.post(lane, run, request, polls, &mut self.transport)
    }

    /// Posts `run` for `request` in `lane`: kept in the request's storage
    /// if it is persistent, else boxed if it does not finish at its first
    /// step (`run_home.rs`).
    pub(in crate::glue) fn post_for<S>(&mut self, lane: Lane, run: S, mut request: RequestFor) -> Result<(), TransportError>
    where
        S: Schedule<SelectedTransport, Error = TransportError> + Send + 'static,
    {
        match request.run_home() {
            RunHome::Kept(storage) => {
                let kept = QueuedRun::Kept(storage.keep(run));
                self.post_run(lane, kept, request)
            }
            RunHome::Boxed => self.post_run(lane, Unplaced(run), request),
        }
    }

    /// Finishes the non-blocking runs posted earlier, before a blocking
    /// collective: they come first in every rank's order, and a blocking
    /// call must not start on slots a run of its collective still uses.
    #[inline]
    pub(in crate::glue) fn finish_pending_runs(&mut self) -> Result<(), TransportError> {
        if self.pending_runs.is_empty() {
            return Ok(());
        }
        let ReadyComm { pending_runs, transport, bcast, .. } = self;
        pending_runs.drain(transport, |transport| serve_bcast(bcast, transport))
    }

    /// Serves ACKs, NACKs and retransmissions outside a collective call
    /// where the bcast needs that (as the blocking calls' waits do,
    /// `BcastProgress::if_needed`: not on a shared window, whose pass would
    /// only slow every poll of a pending run), and advances the
    /// non-blocking runs; fails if one of those did.
    pub(super) fn progress_background_work(&mut self) -> Result<(), TransportError> {
        serve_bcast(&mut self.bcast, &self.transport)?;
        self.pending_runs.advance(&mut self.transport)
    }

    /// `PendingRuns::watch_awaited_word` on this communicator's transport;
    /// none where data comes through the kernel (udp), whose words change
    /// only inside the transport's progress, that is, in an advance.
    pub(super) fn watch_awaited_word(&self, reads: u32) -> u32 {
        if self.transport.sleeps_in_kernel() {
            return 0;
        }
        self.pending_runs.watch_awaited_word(&self.transport, reads)
    }

    /// The protocols' closing steps when the communicator is freed (never
    /// after a failed call: their state is not to be trusted then).
    pub(super) fn close(&mut self) {
        let CommId { cid, rank, .. } = self.id;
        if !self.pending_runs.is_empty() {
            tracing::info!(
                target: output::SUMMARY,
                "comm {cid} rank {rank}: freed with {} non-blocking run(s) under way: finishing them first",
                self.pending_runs.len()
            );
            if let Err(why) = self.finish_pending_runs() {
                tracing::warn!("comm {cid} rank {rank}: non-blocking runs pending at teardown failed: {why}");
            }
        }
        // A root returns from MPI_Bcast before its receivers acknowledge,
        // and receivers acknowledge lazily: settle both before the window
        // goes away.
        if let Err(why) = self.bcast.drain(&self.transport) {
            tracing::warn!("comm {} rank {}: bcast could not settle before the communicator was freed: {why}", cid, rank);
        }
        // Every rank frees the communicator (MPI_Comm_free and MPI_Finalize
        // are collective): once all have passed this barrier, no peer writes
        // into a window that is about to be deregistered.
        if !self.transport.needs_closing_barrier() {
            return;
        }
        if let Err(why) = self.transport.quiesce_before_teardown() {
            tracing::warn!("comm {} rank {}: writes still in flight at teardown: {why}", cid, rank);
        }
        let closed = match self.two_level_barrier.as_mut() {
            Some(two_level) => two_level.run(&self.transport, &NoSideProgress),
            None => self.barrier.run_untimed(&self.transport, &NoSideProgress),
        };
        if let Err(why) = closed {
            tracing::warn!("comm {} rank {}: closing barrier failed: {why}", cid, rank);
        }
    }
}

/// Serves the bcast's ACKs, NACKs and retransmissions where it needs
/// that outside its own calls (`Bcast::needs_side_progress`): between
/// calls, and at every pass of a drain of the queue, whose runs may wait
/// on a peer that waits for this rank's retransmission. Its failure is
/// the caller's: the multicast is not usable after one (btl-ibmc's
/// `ReliableMulticast`), so the communicator fails rather than repeat it.
fn serve_bcast(bcast: &mut Bcast, transport: &SelectedTransport) -> Result<(), TransportError> {
    if bcast.needs_side_progress(transport) {
        bcast.progress(transport)?;
    }
    Ok(())
}
