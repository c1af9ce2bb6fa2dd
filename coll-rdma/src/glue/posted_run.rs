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
//! is boxed (`into_queued`).

use btl_ibmc::{SelectedTransport, TransportError};

use super::mpi_ireduction::RetainedReduction;
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
}

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
    pub(super) fn into_queued(self) -> Run<'static, SelectedTransport> {
        match self {
            PostedRun::Allreduce(run) => Box::new(run),
            PostedRun::Reduce(run) => Box::new(run),
            PostedRun::Bcast(run) => Box::new(run),
            PostedRun::Boxed(run) => run,
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
        }
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        match self {
            PostedRun::Allreduce(run) => Schedule::<SelectedTransport>::awaited(run),
            PostedRun::Reduce(run) => Schedule::<SelectedTransport>::awaited(run),
            PostedRun::Bcast(run) => Schedule::<SelectedTransport>::awaited(run),
            PostedRun::Boxed(run) => run.awaited(),
        }
    }
}
