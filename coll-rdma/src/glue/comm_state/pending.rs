//! The non-blocking runs a communicator has under way (MPI_Ibarrier,
//! MPI_Iallreduce, MPI_Ireduce and started persistent requests), each with
//! the request it completes: the core's `ScheduleQueue`, tagged with those
//! requests.
//!
//! Invariants (the queue's): runs of one collective advance in post
//! order, one at a time but for small allreduces' exchange runs, several
//! of which advance at once (a run writes into the slots the earlier ones
//! wrote, see `schedule_queue`); the queue is empty before a blocking
//! collective runs on the communicator (`drain`). A run that fails
//! completes its request, and every later one of its collective, with an
//! error.

use std::ffi::c_int;

use btl_ibmc::{SelectedTransport, TransportError};
use ompi_sys as sys;

use crate::schedule::Step;
use crate::schedule_queue::{Lane, ScheduleQueue};
use super::super::run_home::{Posting, QueuedRun};
use super::super::request::RequestRef;
use super::super::request_for::RequestFor;
use super::super::spare_boxes::SpareBoxes;


#[derive(Default)]
pub(in crate::glue) struct PendingRuns {
    queue: ScheduleQueue<'static, SelectedTransport, RequestRef, QueuedRun>,
    /// The boxes of runs that ended, for the next ones.
    spare: SpareBoxes,
}

impl PendingRuns {
    pub(in crate::glue) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub(in crate::glue) fn len(&self) -> usize {
        self.queue.len()
    }

    /// Where a run made for this queue gets its box (`RunHome::place`).
    pub(in crate::glue) fn spare_boxes(&mut self) -> &mut SpareBoxes {
        &mut self.spare
    }

    /// Polls the word the queue's oldest run waits for where only that
    /// run can move (`ScheduleQueue::sole_lane_awaits`: one lane queued),
    /// up to `reads` loads, until it arrives: the loads made, 0 if there
    /// is no such word (the caller advances instead). Nothing is consumed
    /// here; `advance` does that.
    pub(in crate::glue) fn watch_awaited_word(&self, transport: &SelectedTransport, reads: u32) -> u32 {
        let Some(word) = self.queue.sole_lane_awaits() else { return 0 };
        for made in 1..=reads {
            if word.arrived(transport) {
                return made;
            }
            std::hint::spin_loop();
        }
        reads
    }

    /// Drops every run; their requests complete with an error.
    pub(in crate::glue) fn abandon(&mut self) {
        self.queue.abandon().for_each(drop);
    }

    /// Queues `run` behind the earlier ones of its collective and takes
    /// every step that can be taken now (its first, if it is the oldest
    /// or overlaps the ones queued: `ScheduleQueue::may_advance_now`).
    /// A run that may advance and finishes at that first step (a barrier
    /// whose peers have all arrived) never enters the queue, and completes
    /// at once: an MPI_I* call gets no request of its own
    /// (`RequestFor::done_at_once`), MPI_Wait finds a started one complete.
    /// The queue holds what `Posting::into_queued` makes of it (a box, or
    /// the handle `run` already is: `run_home.rs`). A request is made, or
    /// taken, only after that first step: what the step sends (a root's
    /// message, a leaf's contribution) leaves before the request's
    /// bookkeeping; MPI_Wait on it polls up to `spin_polls` times first
    /// (`own_wait.rs`). A request that could not be made fails the post
    /// and puts the lane out of step, since the run was started.
    pub(in crate::glue) fn post<S: Posting>(
        &mut self,
        lane: Lane,
        mut run: S,
        request: RequestFor,
        spin_polls: u32,
        transport: &mut SelectedTransport,
    ) -> Result<(), TransportError> {
        if !self.queue.may_advance_now(lane, run.overlap()) {
            let Some(request) = request.pending(spin_polls) else { return Err(self.no_request(lane)) };
            let queued = run.into_queued(&mut self.spare);
            self.queue.post_tagged(lane, queued, request);
            return self.advance(transport);
        }
        // Runs of other lanes get a pass below; a run beside earlier ones
        // of its own lane (overlapping) leaves the pass to MPI_Wait and the
        // progress loop: the earlier ones wrote what they write at their
        // own posts, and the next pass finds their peers' contributions.
        let others_queued = self.queue.lane_is_idle(lane) && !self.queue.is_empty();
        match run.advance(transport) {
            Ok(Step::Done) => {
                request.done_at_once();
                run.finished_at_post(&mut self.spare);
            }
            Ok(Step::Pending) => {
                let Some(request) = request.pending(spin_polls) else { return Err(self.no_request(lane)) };
                let queued = run.into_queued(&mut self.spare);
                self.queue.post_stepped(lane, queued, request);
            }
            Err(why) => {
                self.queue.record_failure(lane, &why);
                request.fail();
                return Err(why);
            }
        }
        // The other lanes' oldest runs get their turn, as in any pass;
        // this run just had its own.
        if others_queued { self.advance(transport) } else { Ok(()) }
    }

    #[cold]
    fn no_request(&mut self, lane: Lane) -> TransportError {
        let why = TransportError::Failed("Open MPI could not allocate the request of a non-blocking collective".to_string());
        self.queue.record_failure(lane, &why);
        why
    }

    /// Advances the oldest run of every collective, and each next one once
    /// it is done, until each must wait; completes the requests of the runs
    /// that ended. Returns the first failure.
    pub(in crate::glue) fn advance(&mut self, transport: &mut SelectedTransport) -> Result<(), TransportError> {
        let mut first_failure = None;
        let spare = &mut self.spare;
        self.queue.advance_returning(transport, |request, run, outcome| {
            match outcome {
                Ok(()) => request.finish(sys::MPI_SUCCESS as c_int),
                Err(why) => {
                    request.finish(sys::MPI_ERR_OTHER as c_int);
                    first_failure.get_or_insert(why);
                }
            }
            run.release(spare);
        });
        first_failure.map_or(Ok(()), Err)
    }

    /// Runs every pending run to its end (before a blocking collective or
    /// the communicator's teardown), calling `side_progress` at every pass
    /// (the bcast's ACKs and retransmissions, which a peer's run may be
    /// waiting for while this rank's queue holds no bcast run); completes
    /// the requests of the runs that ended. Returns the first failure, a
    /// run's or the side progress's (`ScheduleQueue::drain`).
    pub(in crate::glue) fn drain(
        &mut self,
        transport: &mut SelectedTransport,
        side_progress: impl FnMut(&mut SelectedTransport) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        self.queue.drain(transport, side_progress, |request, outcome| {
            request.finish(if outcome.is_ok() { sys::MPI_SUCCESS } else { sys::MPI_ERR_OTHER } as c_int)
        })
    }
}
