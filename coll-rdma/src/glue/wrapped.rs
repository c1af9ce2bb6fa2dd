//! Requests of ours that the module underneath serves: a non-blocking call
//! whose request the application got before it was known who serves it
//! (queued behind a resumable setup, `comm_state/setting_up.rs`), and a
//! persistent start coll rdma cannot serve any more (`started_underneath.rs`).
//! The call is posted underneath into a request of its own; ours completes
//! when that one does, with its error, from Open MPI's progress loop.
//!
//! One list for the process, not one per communicator: a communicator that
//! failed is never served again, and what was wrapped there must still
//! complete (the calls underneath do not depend on our state).
//!
//! Invariants: each entry's request underneath is live and was returned
//! by the module underneath's non-blocking function; it is freed exactly
//! once, when complete. `PENDING` is the list's length, written under its
//! lock, so the progress callback reads one atomic while nothing is
//! wrapped.

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ompi_sys as sys;

use super::nonblocking_post::mpi_error_of;
use super::progress;
use super::request::RequestRef;
use super::saved_nonblocking::Request;

struct Wrapped {
    underneath: *mut sys::ompi_request_t,
    ours: RequestRef,
}

struct WrappedRequests {
    pending: Vec<Wrapped>,
}

// SAFETY: the requests underneath are Open MPI requests, which any thread
// may test and free; they are touched only under the list's lock.
unsafe impl Send for WrappedRequests {}

static WRAPPED: Mutex<WrappedRequests> = Mutex::new(WrappedRequests { pending: Vec::new() });
static PENDING: AtomicUsize = AtomicUsize::new(0);

fn wrapped() -> std::sync::MutexGuard<'static, WrappedRequests> {
    WRAPPED.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Posts a call underneath with `post` (the module underneath's
/// non-blocking function, into the handle given) for `ours`. A call that
/// fails at once completes ours with its error; one that leaves the handle
/// null completed inside `post` (a blocking call underneath, where there is
/// no non-blocking one), and ours completes with its outcome. Returns what
/// the call returned.
pub(super) fn post(ours: RequestRef, post: impl FnOnce(Request) -> c_int) -> c_int {
    let mut underneath: *mut sys::ompi_request_t = std::ptr::null_mut();
    let rc = post(&mut underneath);
    if rc != sys::OMPI_SUCCESS as c_int || underneath.is_null() {
        ours.finish(mpi_error_of(rc));
        return rc;
    }
    progress::ensure_registered();
    let mut list = wrapped();
    list.pending.push(Wrapped { underneath, ours });
    list.complete_finished();
    rc
}

/// Completes ours for every request underneath that completed; never
/// waits for the list (the progress callback, from any thread).
pub(super) fn complete_finished() {
    if PENDING.load(Ordering::Acquire) == 0 {
        return;
    }
    if let Ok(mut list) = WRAPPED.try_lock() {
        list.complete_finished();
    }
}

/// Whether some request of ours waits for one underneath.
pub(super) fn any_pending() -> bool {
    PENDING.load(Ordering::Acquire) != 0
}

impl WrappedRequests {
    fn complete_finished(&mut self) {
        let mut index = 0;
        while index < self.pending.len() {
            let underneath = self.pending[index].underneath;
            // SAFETY: a live request of the module underneath (invariant).
            if unsafe { sys::coll_rdma_shim_request_is_complete(underneath) } == 0 {
                index += 1;
                continue;
            }
            let Wrapped { mut underneath, ours } = self.pending.swap_remove(index);
            // SAFETY: complete, so its status is final; freed once, here.
            let error = unsafe {
                let error = (*underneath).req_status.MPI_ERROR;
                sys::coll_rdma_shim_request_free(&mut underneath);
                error
            };
            ours.finish(error);
        }
        PENDING.store(self.pending.len(), Ordering::Release);
    }
}
