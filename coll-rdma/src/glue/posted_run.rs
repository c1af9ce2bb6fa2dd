//! The run a non-blocking call or a persistent start posts, as
//! `nonblocking_post.rs` hands it to the queue: the runs of the common
//! paths (the allreduce's and reduce's window paths, the bcast's) unboxed,
//! any other boxed already.
//!
//! A run that finishes at its first step (a bcast root's copy-in, a
//! reduce leaf's contribution, a peer's data already there) never enters
//! the queue (`PendingRuns::post`), so it needs no box: an allocation and
//! its free cost a short call's posting rank about as much as its own
//! step (callgrind, docs/nonblocking.md). Only a run that stays pending
//! is boxed (`into_queued`). A persistent request's run goes into the
//! request's storage instead (`run_home.rs`), and the post holds a handle
//! to it (`Kept`).

use std::ptr::NonNull;

use btl_ibmc::{SelectedTransport, TransportError};

use super::mpi_ireduction::RetainedReduction;
use super::run_home::{DynRun, QueuedRun};
use crate::collectives::allreduce::{AllreduceRun, AllreduceStart};
use crate::collectives::bcast::BcastRun;
use crate::collectives::large_reduction::parallel_run::OrParallel;
use crate::collectives::reduce::{ReduceRun, ReduceStart};
use crate::schedule::{AwaitedWord, Schedule, Step};
use crate::schedule_queue::Run;

/// Unboxed, the window paths' runs of the reduction (their parallel
/// runs, long and rare, are boxed: they would make every run as large
/// as themselves, and moving a post's run costs by its size).
pub(super) enum PostedRun {
    Allreduce(AllreduceRun<'static, RetainedReduction>),
    Reduce(ReduceRun<'static, RetainedReduction>),
    Bcast(BcastRun<'static>),
    Boxed(Run<'static, SelectedTransport>),
    /// A run kept in a persistent request's storage (`RunStorage::keep`).
    Kept(NonNull<DynRun>),
}

// SAFETY: the runs are `Send`; a kept run's handle is as `QueuedRun::Kept`'s
// (`run_home.rs`): it moves with the communicator's state, one holder at a
// time, and nobody else touches the run meanwhile.
unsafe impl Send for PostedRun {}

impl PostedRun {
    pub(super) fn allreduce(start: AllreduceStart<'static, RetainedReduction>) -> Self {
        match start {
            OrParallel::Window(run) => PostedRun::Allreduce(run),
            parallel => PostedRun::Boxed(Box::new(parallel)),
        }
    }

    pub(super) fn reduce(start: ReduceStart<'static, RetainedReduction>) -> Self {
        match start {
            OrParallel::Window(run) => PostedRun::Reduce(run),
            parallel => PostedRun::Boxed(Box::new(parallel)),
        }
    }

    /// The run as the queue holds it: the run itself boxed, here, so a
    /// queued run's advances and drop go through no match on this enum.
    pub(super) fn into_queued(self) -> QueuedRun {
        match self {
            PostedRun::Allreduce(run) => QueuedRun::Boxed(Box::new(run)),
            PostedRun::Reduce(run) => QueuedRun::Boxed(Box::new(run)),
            PostedRun::Bcast(run) => QueuedRun::Boxed(Box::new(run)),
            PostedRun::Boxed(run) => QueuedRun::Boxed(run),
            PostedRun::Kept(run) => QueuedRun::Kept(run),
        }
    }
}

impl Schedule<SelectedTransport> for PostedRun {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut SelectedTransport) -> Result<Step, TransportError> {
        match self {
            PostedRun::Allreduce(run) => run.advance(transport),
            PostedRun::Reduce(run) => run.advance(transport),
            PostedRun::Bcast(run) => run.advance(transport),
            PostedRun::Boxed(run) => run.advance(transport),
            // SAFETY: a live kept run nobody else touches while it is
            // posted (`run_home.rs`).
            PostedRun::Kept(run) => unsafe { run.as_mut() }.advance(transport),
        }
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        match self {
            PostedRun::Allreduce(run) => Schedule::<SelectedTransport>::awaited(run),
            PostedRun::Reduce(run) => Schedule::<SelectedTransport>::awaited(run),
            PostedRun::Bcast(run) => Schedule::<SelectedTransport>::awaited(run),
            PostedRun::Boxed(run) => run.awaited(),
            // SAFETY: as in `advance`.
            PostedRun::Kept(run) => unsafe { run.as_ref() }.awaited(),
        }
    }

    fn reuse_storage_of(&mut self, finished: &mut Self) {
        match (self, finished) {
            (PostedRun::Allreduce(run), PostedRun::Allreduce(finished)) => Schedule::<SelectedTransport>::reuse_storage_of(run, finished),
            (PostedRun::Reduce(run), PostedRun::Reduce(finished)) => Schedule::<SelectedTransport>::reuse_storage_of(run, finished),
            _ => {}
        }
    }
}
