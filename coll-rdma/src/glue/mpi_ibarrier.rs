//! MPI_Ibarrier and the persistent barrier (MPIX_Barrier_init on Open MPI
//! 4.1, MPI_Barrier_init on 5.0): the blocking barrier's path (the
//! selector's: dissemination, or two levels across nodes), resumable
//! (`collectives::barrier::run`, `two_level_run`), on the same slots and
//! epochs.
//! A call posts a run behind the communicator's earlier ones and takes its
//! first step (this rank's arrival) at once; Open MPI's progress loop
//! advances it (`progress.rs`), and a blocking barrier finishes it first.
//! Where the blocking barrier is not served (no transport), the calls go
//! to the module underneath, with the reason.

use std::ffi::c_int;

use ompi_sys as sys;

use crate::schedule_queue::Lane;
use crate::select::barrier::BarrierPath;
use crate::select::Choice;
use super::comm_state::{Collective, CommState, Native, Step, Unserved};
use super::deferred::DeferredCall;
use super::ffi_guard::guarded;
use super::module::{with_state, with_state_nonblocking, NonblockingCall};
use super::mpi_barrier::barrier_choice;
use super::nonblocking_post::start_persistent;
use super::reduction_call::FoldOrder;
use super::request::{new_request, Persistent, PersistentCall, RequestRef};
use super::request_for::RequestFor;
use super::run_home::RunHome;

pub(super) unsafe extern "C" fn ibarrier(
    comm: *mut sys::ompi_communicator_t,
    request: *mut *mut sys::ompi_request_t,
    module: *mut sys::mca_coll_base_module_t,
) -> c_int {
    guarded("MPI_Ibarrier", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI calls us with the module it enabled for `comm`
        // and the caller's request handle.
        unsafe {
            with_state_nonblocking(
                module,
                |state| state.ibarrier(comm, request),
                NonblockingCall { call: DeferredCall::Ibarrier(comm), request, agreement: false },
                |saved| saved.nonblocking.ibarrier(comm, request)(),
            )
        }
    })
}

pub(super) unsafe extern "C" fn barrier_init(
    comm: *mut sys::ompi_communicator_t,
    info: *mut sys::ompi_info_t,
    request: *mut *mut sys::ompi_request_t,
    module: *mut sys::mca_coll_base_module_t,
) -> c_int {
    guarded("MPI_Barrier_init", sys::OMPI_ERROR as c_int, || {
        // SAFETY: as for `ibarrier`.
        unsafe {
            with_state(
                module,
                |state| state.barrier_init(comm, info, request, module),
                |saved| saved.nonblocking.barrier_init(comm, info, request)(),
            )
        }
    })
}

/// MPI_Start of a persistent barrier of ours.
///
/// # Safety
/// `request` must come from `barrier_init` on a communicator that is
/// still alive (MPI requires it of a started request).
unsafe fn start_persistent_barrier(request: RequestRef) -> c_int {
    let Some((_, module)) = request.persistent_target() else { return sys::OMPI_ERR_BAD_PARAM as c_int };
    // SAFETY: guaranteed by the caller.
    unsafe { start_persistent(module, request, |state, request| state.start_barrier(request)) }
}

impl CommState {
    /// The native state if a barrier can run resumably here, else why not.
    fn resumable_barrier(&mut self) -> Result<Native<'_>, Unserved> {
        let native = self.enter_if_set_up()?;
        match barrier_choice(native.ready.decisions.plan()) {
            Choice::Native(_) => Ok(native),
            Choice::HandOver(why) => Err(why.into()),
        }
    }

    fn ibarrier(&mut self, comm: *mut sys::ompi_communicator_t, request_out: *mut *mut sys::ompi_request_t) -> Step {
        if let Some(queued) = self.defer_behind_setup(DeferredCall::Ibarrier(comm), request_out) {
            return queued;
        }
        let mut native = match self.resumable_barrier() {
            Ok(native) => native,
            Err(why) => {
                let fallback = self.shared.saved.nonblocking.ibarrier(comm, request_out);
                return self.shared.decline(Collective::Ibarrier, why, FoldOrder::Any, fallback);
            }
        };
        native.post_barrier(Collective::Ibarrier, RequestFor::New { comm, handle: request_out })
    }

    fn barrier_init(
        &mut self,
        comm: *mut sys::ompi_communicator_t,
        info: *mut sys::ompi_info_t,
        request_out: *mut *mut sys::ompi_request_t,
        module: *mut sys::mca_coll_base_module_t,
    ) -> Step {
        // The path is settled here, once: a communicator served natively now
        // stays so (its transport and barrier kind are fixed at setup),
        // which the first `*_init` makes if nothing did before.
        self.set_up(comm);
        if let Err(why) = self.resumable_barrier() {
            let fallback = self.shared.saved.nonblocking.barrier_init(comm, info, request_out);
            return self.shared.decline(Collective::BarrierInit, why, FoldOrder::Any, fallback);
        }
        let persistent = Persistent { comm, module, call: PersistentCall::Barrier, start: start_persistent_barrier };
        let Some(request) = new_request(comm, Some(persistent)) else {
            return Step::Done(sys::OMPI_ERR_OUT_OF_RESOURCE as c_int);
        };
        // SAFETY: Open MPI passes the caller's handle.
        unsafe { *request_out = request };
        Step::Done(sys::OMPI_SUCCESS as c_int)
    }

    /// An MPI_Ibarrier queued behind the setup (`deferred.rs`), posted
    /// now that the setup ended.
    pub(super) fn replay_ibarrier(&mut self, comm: *mut sys::ompi_communicator_t, request: RequestRef) -> Step {
        match self.resumable_barrier() {
            Ok(mut native) => native.post_barrier(Collective::Ibarrier, RequestFor::Made(request)),
            Err(why) => self.hand_over_queued(Collective::Ibarrier, why, FoldOrder::Any, request, move |saved, handle| {
                Box::new(saved.nonblocking.ibarrier(comm, handle))
            }),
        }
    }

    fn start_barrier(&mut self, request: RequestRef) -> Step {
        match self.resumable_barrier() {
            Ok(mut native) => native.post_barrier(Collective::BarrierInit, RequestFor::Made(request)),
            // The plan changed to one that hands the barrier over.
            Err(why) => self.hand_over_started(Collective::BarrierInit, why, FoldOrder::Any, request),
        }
    }
}

impl Native<'_> {
    /// Queues a barrier run for `request` behind the earlier ones, taking
    /// its first step if there are none.
    fn post_barrier(&mut self, collective: Collective, mut request: RequestFor) -> Step {
        self.shared.count_call(collective);
        let ready = &mut *self.ready;
        let outcome = match (barrier_choice(ready.decisions.plan()), ready.two_level_barrier.as_mut()) {
            (Choice::Native(BarrierPath::TwoLevel), Some(two_level)) => {
                let run = two_level.start();
                ready.post_for(Lane::Barrier, run, request)
            }
            _ => {
                // A persistent request's next run is its last one, made
                // again in place when it is of the barrier's current radix.
                let restarted = match request.run_home() {
                    RunHome::Kept(storage) => storage.restart_kept(|finished| Ok(ready.barrier.restart(finished))),
                    RunHome::Boxed => Ok(None),
                };
                match restarted {
                    Ok(Some(run)) => ready.post_run(Lane::Barrier, run, request),
                    Err(why) => Err(why),
                    Ok(None) => {
                        let run = ready.barrier.start();
                        ready.post_for(Lane::Barrier, run, request)
                    }
                }
            }
        };
        self.shared.finish(collective, outcome)
    }
}
