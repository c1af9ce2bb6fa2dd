//! Where a posted run lives while the communicator's queue holds it: in a
//! box of its own (MPI_I*: one call, one run), or, for a persistent
//! request, in storage the request keeps from one start to the next, so
//! that a start needs no box once the first one has made the storage, and
//! the runs that take over their predecessor's scratch
//! (`Schedule::reuse_storage_of`: the window allreduce's and reduce's,
//! the parallel reduction's) allocate nothing either; the ring's and the
//! packed or two-level bcast's still size their buffers at every start.
//! The queue then holds a handle to the kept run (`QueuedRun::Kept`).
//!
//! Invariants:
//! - a kept run is touched only through its handle while queued, and only
//!   by whoever holds the communicator's state (where the queue lives);
//!   the request's storage is refilled, or its run restarted in place
//!   (`restart_kept`: the barrier's, the window allreduce's and reduce's),
//!   only by a start of that request, which MPI forbids while it is
//!   active, so never while a handle to the run it replaces is queued;
//! - a handle is queued with its request's `RequestRef` as tag, which keeps
//!   the request, and so the storage, alive as long as the handle is;
//!   once the queue hands the tag back the handle is never used again;
//! - a run stays in the storage after it ended, until the next start
//!   replaces it or the request is destroyed: no run's drop touches the
//!   communicator (dropping one frees its own memory and releases the
//!   Open MPI objects it retained, which the request retains too).

use std::any::{Any, TypeId};
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use btl_ibmc::{SelectedTransport, TransportError};

use super::nonblocking_post::Planned;
use super::spare_boxes::{made_in, SpareBoxes};
use crate::schedule::{AwaitedWord, Overlap, Schedule, Step};
use crate::schedule_queue::{Lane, Run};

/// A run as the queue sees it.
pub(super) type DynRun = dyn Schedule<SelectedTransport, Error = TransportError> + Send;

/// What the communicator's queue holds for a posted run.
pub(super) enum QueuedRun {
    /// A run of its own, freed when the queue is done with it.
    Boxed(Run<'static, SelectedTransport>),
    /// A persistent request's run, in that request's `RunStorage`.
    Kept(NonNull<DynRun>),
}

// SAFETY: a kept run is `Send` itself (`RunStorage::keep` requires it),
// and its handle moves with the queue, which moves with the
// communicator's state between the threads that hold it, one at a time;
// nobody else touches the run meanwhile (module invariants).
unsafe impl Send for QueuedRun {}

impl Schedule<SelectedTransport> for QueuedRun {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut SelectedTransport) -> Result<Step, TransportError> {
        match self {
            QueuedRun::Boxed(run) => run.advance(transport),
            // SAFETY: the handle points at a live run nobody else touches
            // while it is queued (module invariants).
            QueuedRun::Kept(run) => unsafe { run.as_mut() }.advance(transport),
        }
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        match self {
            QueuedRun::Boxed(run) => run.awaited(),
            // SAFETY: as in `advance`.
            QueuedRun::Kept(run) => unsafe { run.as_ref() }.awaited(),
        }
    }

    fn overlap(&self) -> Option<Overlap> {
        match self {
            QueuedRun::Boxed(run) => run.overlap(),
            // SAFETY: as in `advance`.
            QueuedRun::Kept(run) => unsafe { run.as_ref() }.overlap(),
        }
    }
}

impl QueuedRun {
    /// Lets go of a run that ended: a box's block goes to `spare` for the
    /// next run; a kept run stays in its request's storage.
    pub(super) fn release(self, spare: &mut SpareBoxes) {
        if let QueuedRun::Boxed(run) = self {
            spare.recycle(run);
        }
    }
}

/// A run on its way into the communicator's queue (`PendingRuns::post`):
/// what the queue holds of it if it outlives its first step, and how it
/// is let go if it ends there.
pub(super) trait Posting: Schedule<SelectedTransport, Error = TransportError> {
    fn into_queued(self, spare: &mut SpareBoxes) -> QueuedRun;
    fn finished_at_post(self, spare: &mut SpareBoxes);
}

impl Posting for QueuedRun {
    fn into_queued(self, _spare: &mut SpareBoxes) -> QueuedRun {
        self
    }

    fn finished_at_post(self, spare: &mut SpareBoxes) {
        self.release(spare);
    }
}

/// A run of an MPI_I* call not placed yet: boxed only if it outlives its
/// first step, so that one ending there (a barrier whose peers all
/// arrived) costs no box at all.
pub(super) struct Unplaced<S>(pub(super) S);

impl<S: Schedule<SelectedTransport, Error = TransportError>> Schedule<SelectedTransport> for Unplaced<S> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut SelectedTransport) -> Result<Step, TransportError> {
        self.0.advance(transport)
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        self.0.awaited()
    }

    fn overlap(&self) -> Option<Overlap> {
        self.0.overlap()
    }
}

impl<S> Posting for Unplaced<S>
where
    S: Schedule<SelectedTransport, Error = TransportError> + Send + 'static,
{
    fn into_queued(self, spare: &mut SpareBoxes) -> QueuedRun {
        QueuedRun::Boxed(spare.boxed(self.0))
    }

    fn finished_at_post(self, _spare: &mut SpareBoxes) {}
}

/// Where a call's run goes once made.
pub(super) enum RunHome<'a> {
    /// Boxed: a non-persistent call.
    Boxed,
    /// Into the storage of this started persistent request.
    Kept(&'a mut RunStorage),
}

impl RunHome<'_> {
    /// `run` where it goes: boxed (in one of `spare`'s blocks if one fits),
    /// or kept in the request's storage.
    pub(super) fn place<S>(self, run: S, spare: &mut SpareBoxes) -> QueuedRun
    where
        S: Schedule<SelectedTransport, Error = TransportError> + Send + 'static,
    {
        match self {
            RunHome::Boxed => QueuedRun::Boxed(spare.boxed(run)),
            RunHome::Kept(storage) => QueuedRun::Kept(storage.keep(run)),
        }
    }

    /// The run `make` builds, where it goes: built straight into its box
    /// (`SpareBoxes::boxed_made`), or built and then kept in the request's
    /// storage. `make` writes the run into the memory it gets and returns
    /// it.
    #[inline(always)]
    pub(super) fn place_made<S>(
        self,
        spare: &mut SpareBoxes,
        make: impl FnOnce(&mut MaybeUninit<S>) -> Result<&mut S, TransportError>,
    ) -> Result<QueuedRun, TransportError>
    where
        S: Schedule<SelectedTransport, Error = TransportError> + Send + 'static,
    {
        match self {
            RunHome::Boxed => spare.boxed_made(make).map(QueuedRun::Boxed),
            RunHome::Kept(storage) => {
                let mut slot = MaybeUninit::uninit();
                made_in(&mut slot, make)?;
                // SAFETY: `made_in` succeeded, so the slot holds a live `S`.
                Ok(QueuedRun::Kept(storage.keep(unsafe { slot.assume_init() })))
            }
        }
    }

    /// A started persistent request's kept run of kind `S`, made the next
    /// one in place by `restart` (`RunStorage::restart_kept`), as the
    /// call's plan; `None` where none was (the caller makes a run).
    pub(super) fn restarted<S>(&mut self, lane: Lane, restart: impl FnOnce(&mut S) -> Result<bool, TransportError>) -> Option<Planned>
    where
        S: Schedule<SelectedTransport, Error = TransportError> + Send + 'static,
    {
        let RunHome::Kept(storage) = self else { return None };
        match storage.restart_kept(restart) {
            Ok(Some(run)) => Some(Planned::Run(lane, run)),
            Ok(None) => None,
            Err(why) => Some(Planned::Failed(why)),
        }
    }
}

/// A persistent request's run storage: made for the kind of run its first
/// start took, refilled by every later start of that kind; a start of
/// another kind (the plan changed, and with it the path) replaces it. The
/// kind is its `TypeId`, compared without a call through the box's vtable
/// (`Any::is` and `downcast_mut` made four such calls per start).
#[derive(Default)]
pub(super) struct RunStorage(Option<(TypeId, Box<dyn Any + Send>)>);

impl RunStorage {
    /// Puts `run` in place of the previous one, handing it the previous
    /// run's scratch buffers; the handle the queue advances it through.
    pub(super) fn keep<S>(&mut self, mut run: S) -> NonNull<DynRun>
    where
        S: Schedule<SelectedTransport, Error = TransportError> + Send + 'static,
    {
        if self.slot_of::<S>().is_none() {
            self.0 = Some((TypeId::of::<Option<S>>(), Box::new(None::<S>)));
        }
        let slot = self.slot_of::<S>().expect("a slot of this kind, made just above");
        if let Some(previous) = slot.as_mut() {
            run.reuse_storage_of(previous);
        }
        let run: &mut DynRun = slot.insert(run);
        NonNull::from(run)
    }

    /// The run of kind `S` kept here, over, made the next one in place by
    /// `restart` (a start that builds nothing: `TunedBarrier::restart`,
    /// `Allreduce::restart`, `Reduce::restart`): the queue's handle to it;
    /// `Ok(None)`, with nothing changed, if none of that kind is kept or
    /// `restart` declines it (the caller then makes a run and `keep`s it).
    pub(super) fn restart_kept<S>(&mut self, restart: impl FnOnce(&mut S) -> Result<bool, TransportError>) -> Result<Option<QueuedRun>, TransportError>
    where
        S: Schedule<SelectedTransport, Error = TransportError> + Send + 'static,
    {
        let Some(run) = self.slot_of::<S>().and_then(Option::as_mut) else { return Ok(None) };
        Ok(restart(run)?.then(|| QueuedRun::Kept(NonNull::from(run as &mut DynRun))))
    }

    fn slot_of<S: Send + 'static>(&mut self) -> Option<&mut Option<S>> {
        match &mut self.0 {
            // SAFETY: the box holds an `Option<S>`: `keep` made it with
            // the `TypeId` stored beside it.
            Some((kind, slot)) if *kind == TypeId::of::<Option<S>>() => Some(unsafe { &mut *(slot.as_mut() as *mut (dyn Any + Send) as *mut Option<S>) }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
