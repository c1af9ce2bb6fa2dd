//! The last step of every non-blocking and persistent reduction and bcast
//! (`mpi_ireduction.rs`, `mpi_ibcast.rs`), once the call is planned: its
//! request made (MPI_I*) or taken (MPI_Start), then the run posted in the
//! communicator's queue, completed at once (nothing to send), failed, or
//! handed to the module underneath.
//!
//! A call handed over at post gets no request of ours: the module
//! underneath's non-blocking function makes its own. A started persistent
//! request that coll rdma can no longer serve, and a call queued behind the
//! setup and then handed over, keep ours, which follows the module
//! underneath's call (`started_underneath.rs`, `wrapped.rs`).

use std::cell::Cell;
use std::ffi::c_int;

use btl_ibmc::TransportError;
use ompi_sys as sys;

use super::comm_state::{Collective, CommState, Step, Unserved};
use super::module::with_state;
use super::reduction_call::FoldOrder;
use super::request::RequestRef;
use super::request_for::RequestFor;
use super::saved::SavedCollectives;
use super::run_home::QueuedRun;
use super::saved_nonblocking::Request;
use super::started_underneath;
use super::wrapped::{self, Posted};
use crate::schedule_queue::Lane;

/// What a non-blocking call turns into on this communicator.
pub(super) enum Planned {
    /// Nothing to exchange (a zero count): the request completes at once.
    Nothing,
    /// A run, placed already (`RunHome::place`).
    Run(Lane, QueuedRun),
    HandOver(Unserved),
    /// Making the run failed (the communicator's state is not to be
    /// trusted any more).
    Failed(TransportError),
}

/// How a posted call gets its request.
pub(super) enum PostAs {
    /// MPI_I*: a new request, into the caller's handle.
    Now(Request),
    /// MPI_Start of a persistent request: already made and activated.
    Started(RequestRef),
    /// MPI_I* queued behind the communicator's setup (`deferred.rs`): its
    /// request made when it was called.
    Queued(RequestRef),
}

/// A call of the module underneath, ready to run once the state is let go.
pub(super) type Underneath = Box<dyn FnOnce() -> c_int>;

/// The MPI error class a request reports for an Open MPI return code.
pub(super) fn mpi_error_of(rc: c_int) -> c_int {
    if rc == sys::OMPI_SUCCESS as c_int { sys::MPI_SUCCESS as c_int } else { sys::MPI_ERR_OTHER as c_int }
}

impl CommState {
    /// Carries `planned` out for a call on `comm`; `nonblocking` builds the
    /// module underneath's non-blocking call into the handle given.
    pub(super) fn post_planned(
        &mut self,
        collective: Collective,
        order: FoldOrder,
        comm: *mut sys::ompi_communicator_t,
        planned: Planned,
        post: PostAs,
        nonblocking: impl FnOnce(&SavedCollectives, Request) -> Underneath,
    ) -> Step {
        let request = match post {
            PostAs::Started(request) => {
                if let Planned::HandOver(why) = planned {
                    return self.hand_over_started(collective, why, order, request);
                }
                RequestFor::Made(request)
            }
            PostAs::Queued(request) => {
                if let Planned::HandOver(why) = planned {
                    return self.hand_over_queued(collective, why, order, request, nonblocking);
                }
                RequestFor::Made(request)
            }
            PostAs::Now(handle) => {
                if let Planned::HandOver(why) = planned {
                    let fallback = nonblocking(&self.shared.saved, handle);
                    return self.shared.decline(collective, why, order, fallback);
                }
                RequestFor::New { comm, handle }
            }
        };
        match planned {
            // Complete at once: an MPI_I* call gets Open MPI's empty
            // request, as Open MPI's MPI layer gives a zero count.
            Planned::Nothing => {
                request.done_at_once();
                self.shared.finish(collective, Ok(()))
            }
            // An MPI_I* call's request is made after the run's first step,
            // and only if the run is still under way (`PendingRuns::post`).
            Planned::Run(lane, run) => self.post_run(collective, lane, run, request),
            Planned::Failed(why) => {
                request.fail();
                self.shared.finish(collective, Err(why))
            }
            // Unreachable: taken apart above.
            Planned::HandOver(_) => {
                debug_assert!(false, "a hand-over reached the post of a run");
                request.fail();
                Step::Done(sys::OMPI_ERROR as c_int)
            }
        }
    }

    /// Hands a started persistent request's run over (the plan changed to
    /// one that is not served, or the communicator failed since `*_init`):
    /// said and counted as any hand-over, and the module underneath's
    /// non-blocking form posted for it once the state is let go
    /// (`started_underneath.rs`), as every call underneath is.
    pub(super) fn hand_over_started(&mut self, collective: Collective, why: Unserved, order: FoldOrder, request: RequestRef) -> Step {
        let saved = std::sync::Arc::clone(&self.shared.saved);
        self.shared.decline(collective, why, order, move || started_underneath::follow(&saved, request))
    }

    /// Hands a call queued behind the setup over (`deferred.rs`): said and
    /// counted as any hand-over, posted underneath now, and `request`
    /// completes when that call's own request does (`wrapped.rs`).
    pub(super) fn hand_over_queued(
        &mut self,
        collective: Collective,
        why: Unserved,
        order: FoldOrder,
        request: RequestRef,
        nonblocking: impl FnOnce(&SavedCollectives, Request) -> Underneath,
    ) -> Step {
        // The report and the count alone: the call is posted below.
        let _counted = self.shared.decline(collective, why, order, || sys::OMPI_SUCCESS as c_int);
        let saved = std::sync::Arc::clone(&self.shared.saved);
        wrapped::post(request, |handle| Posted::Pending(nonblocking(&saved, handle)()));
        // The call's outcome is its request's.
        Step::Done(sys::OMPI_SUCCESS as c_int)
    }

    /// Posts `run` in the communicator's queue, for `request`.
    fn post_run(&mut self, collective: Collective, lane: Lane, run: QueuedRun, request: RequestFor) -> Step {
        match self.enter_if_set_up() {
            Ok(native) => {
                let outcome = native.ready.post_run(lane, run, request);
                native.shared.finish(collective, outcome)
            }
            // Unreachable: the call was planned in the set-up state.
            Err(_) => Step::Done(sys::OMPI_ERROR as c_int),
        }
    }
}

/// MPI_Start of a persistent request of ours on `module`'s communicator:
/// `post` queues its run from the state; nested in our own call, or after
/// a failure, the module underneath's non-blocking form is posted and the
/// request follows it (`started_underneath.rs`).
///
/// # Safety
/// As `with_state`.
pub(super) unsafe fn start_persistent(
    module: *mut sys::mca_coll_base_module_t,
    request: RequestRef,
    post: impl FnOnce(&mut CommState, RequestRef) -> Step,
) -> c_int {
    // Exactly one of the two closures below runs and takes the request.
    let request = Cell::new(Some(request));
    // SAFETY: guaranteed by the caller.
    unsafe {
        with_state(
            module,
            |state| match request.take() {
                Some(request) => post(state, request),
                None => Step::Done(sys::OMPI_ERROR as c_int),
            },
            |saved| match request.take() {
                Some(request) => started_underneath::follow(saved, request),
                None => sys::OMPI_ERROR as c_int,
            },
        )
    }
}
