//! Requests of ours that the module underneath serves: a non-blocking call
//! whose request the application got before it was known who serves it
//! (queued behind a resumable setup, `comm_state/setting_up.rs`), and a
//! persistent start coll rdma cannot serve any more (`started_underneath.rs`).
//! The call is posted underneath into a request of its own; ours completes
//! when that one does, with its error: at the post if it completed there,
//! else from Open MPI's progress loop (our callback, and MPI_Wait's).
//!
//! One list for the process, not one per communicator: a communicator that
//! failed is never served again, and what was wrapped there must still
//! complete (the calls underneath do not depend on our state).
//!
//! Invariants: each entry's request underneath is live and was returned
//! by the module underneath's non-blocking function; it is freed exactly
//! once, when complete (or left alone for good at component close, when
//! the module underneath's requests go away). `PENDING` is the list's
//! length, written under its lock, so the progress callback reads one
//! atomic while nothing is wrapped.

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use ompi_sys as sys;

use super::nonblocking_post::mpi_error_of;
use super::progress;
use super::request::RequestRef;
use super::saved::free_completed;
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

fn wrapped() -> MutexGuard<'static, WrappedRequests> {
    WRAPPED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a call made for a request of ours did underneath.
pub(super) enum Posted {
    /// The module underneath's non-blocking call, with what it returned;
    /// on success it wrote its request into the handle.
    Pending(c_int),
    /// A blocking call underneath (where there is no non-blocking one),
    /// finished, with what it returned.
    Completed(c_int),
}

/// Posts a call underneath with `post` for `ours`. A call that fails at
/// once, or completed, completes ours with its outcome. Returns what the
/// call returned.
pub(super) fn post(ours: RequestRef, post: impl FnOnce(Request) -> Posted) -> c_int {
    // MPI_Wait's own passes serve our runs, which never complete this.
    ours.spin_in_wait(0);
    let mut underneath: *mut sys::ompi_request_t = std::ptr::null_mut();
    let rc = match post(&mut underneath) {
        Posted::Pending(rc) if rc == sys::OMPI_SUCCESS as c_int && !underneath.is_null() => {
            progress::ensure_registered();
            let mut list = wrapped();
            list.pending.push(Wrapped { underneath, ours });
            list.complete_finished();
            return rc;
        }
        // A success that made no request underneath is not one.
        Posted::Pending(rc) if rc == sys::OMPI_SUCCESS as c_int => sys::OMPI_ERROR as c_int,
        Posted::Pending(rc) | Posted::Completed(rc) => rc,
    };
    ours.finish(mpi_error_of(rc));
    rc
}

/// Completes ours for every request underneath that completed; never
/// waits for the list (the progress callback, from any thread).
pub(super) fn complete_finished() {
    if PENDING.load(Ordering::Acquire) == 0 {
        return;
    }
    let mut list = match WRAPPED.try_lock() {
        Ok(list) => list,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => return,
    };
    list.complete_finished();
}

/// At component close: completes ours for what completed underneath, and
/// leaves the rest for good (the module underneath's requests go away with
/// it, so they are not touched again; ours stay allocated). Only an
/// erroneous program (a request never waited for) leaves any.
pub(super) fn abandon_at_close() {
    let mut list = wrapped();
    list.complete_finished();
    if !list.pending.is_empty() {
        tracing::warn!(
            "{} request(s) of coll rdma served by the module underneath were still pending at close; they never complete",
            list.pending.len()
        );
        for Wrapped { ours, .. } in list.pending.drain(..) {
            std::mem::forget(ours);
        }
    }
    PENDING.store(0, Ordering::Release);
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
            // SAFETY: a live request of the module underneath, complete;
            // out of the list, so freed once, here.
            let error = unsafe { free_completed(&mut underneath) };
            ours.finish(error);
        }
        PENDING.store(self.pending.len(), Ordering::Release);
    }
}
