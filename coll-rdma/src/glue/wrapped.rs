//! Requests of ours that the module underneath serves: a non-blocking call
//! whose request the application got before it was known who serves it
//! (queued behind a resumable setup, `comm_state/setting_up.rs`), then
//! handed over. The call is posted underneath into a request of its own;
//! ours completes when that one does, with its error, from the progress
//! callback or a call of ours on the communicator.
//!
//! Invariants: each entry's request underneath is live and was returned
//! by the module underneath's non-blocking function; it is freed exactly
//! once, when complete. One dropped pending (the communicator's teardown)
//! is left allocated (the module underneath may still complete it), and
//! ours completes with an error.

use std::ffi::c_int;

use ompi_sys as sys;

use super::nonblocking_post::mpi_error_of;
use super::request::RequestRef;
use super::saved_nonblocking::Request;

struct Wrapped {
    underneath: *mut sys::ompi_request_t,
    ours: RequestRef,
}

#[derive(Default)]
pub(super) struct WrappedRequests {
    pending: Vec<Wrapped>,
}

// SAFETY: the requests underneath are Open MPI requests, which any thread
// may test and free; they are touched only by the holder of the
// communicator's state, one thread at a time.
unsafe impl Send for WrappedRequests {}

impl WrappedRequests {
    pub(super) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Posts a call underneath with `post` (the module underneath's
    /// non-blocking function, into the handle given) for `ours`; a call
    /// that fails at once completes ours with its error. Returns what the
    /// call returned.
    pub(super) fn post(&mut self, ours: RequestRef, post: impl FnOnce(Request) -> c_int) -> c_int {
        let mut underneath: *mut sys::ompi_request_t = std::ptr::null_mut();
        let rc = post(&mut underneath);
        if rc != sys::OMPI_SUCCESS as c_int || underneath.is_null() {
            ours.finish(mpi_error_of(if rc == sys::OMPI_SUCCESS as c_int { sys::OMPI_ERROR as c_int } else { rc }));
            return rc;
        }
        self.pending.push(Wrapped { underneath, ours });
        self.complete_finished();
        rc
    }

    /// Completes ours for every request underneath that completed, with
    /// its error, and frees that one.
    pub(super) fn complete_finished(&mut self) {
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
    }
}
