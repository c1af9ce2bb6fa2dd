//! The request a posted run completes (`PendingRuns::post`). An MPI_I*
//! call's request is made only if its run outlives its first step; a run
//! that ends there (a reduce leaf's or a bcast root's put, an allreduce
//! whose peers' contributions were there, a barrier whose peers had all
//! arrived) gives the caller Open MPI's completed empty request instead,
//! as Open MPI's MPI layer does for a reduction of no elements and libnbc
//! for a communicator of one rank: no object is made, completed, waited
//! for or freed. A started persistent request, and one made when its call
//! was queued behind the setup, exist already and complete as any.
//!
//! Invariants:
//! - the caller's handle is written exactly once, with a request of ours
//!   (`pending`) or with the empty one (`done_at_once`);
//! - the empty request stands only for a run that ended without error: an
//!   error needs a request of ours to carry it to MPI_Wait;
//! - the empty request is shared and never written: Open MPI's MPI layer
//!   touches a collective's request after the call only while it is not
//!   complete (`ompi_coll_base_retain_op`, `_retain_datatypes`), and
//!   waiting for it, testing it or freeing it only sets the caller's
//!   handle to MPI_REQUEST_NULL.

use std::ffi::c_int;

use ompi_sys as sys;

use super::request::{new_request, RequestRef};
use super::run_home::RunHome;
use super::saved_nonblocking::Request;

pub(super) enum RequestFor {
    /// An MPI_I* call's, not made yet: the caller's handle.
    New { comm: *mut sys::ompi_communicator_t, handle: Request },
    /// A started persistent request, or a queued call's.
    Made(RequestRef),
}

impl RequestFor {
    /// The request of a run that is still under way after its first step
    /// (or failed there), MPI_Wait on it spending up to `spin_polls`
    /// passes of coll rdma's progress (`own_wait.rs`); `None` if Open MPI
    /// could not allocate it.
    pub(super) fn pending(self, spin_polls: u32) -> Option<RequestRef> {
        let request = match self {
            RequestFor::New { comm, handle } => {
                let request = new_request(comm, None)?;
                // SAFETY: Open MPI passes the caller's handle; the request
                // is a fresh, started one of ours, the handle's reference
                // the application's and the returned one the run's.
                unsafe {
                    *handle = request;
                    RequestRef::retain(request)
                }
            }
            RequestFor::Made(request) => request,
        };
        request.spin_in_wait(spin_polls);
        Some(request)
    }

    /// The run ended at its first step, without error.
    pub(super) fn done_at_once(self) {
        match self {
            // SAFETY: Open MPI passes the caller's handle; the empty
            // request is Open MPI's own, complete for ever (module header).
            RequestFor::New { handle, .. } => unsafe { *handle = sys::coll_rdma_shim_request_empty() },
            RequestFor::Made(request) => request.finish(sys::MPI_SUCCESS as c_int),
        }
    }

    /// The run failed at its post: a request of ours carries the error
    /// (none if Open MPI could not allocate it).
    pub(super) fn fail(self) {
        if let Some(request) = self.pending(0) {
            request.finish(sys::MPI_ERR_OTHER as c_int);
        }
    }

    /// Where the run goes: a persistent request's storage, else a box.
    pub(super) fn run_home(&mut self) -> RunHome<'_> {
        match self {
            RequestFor::New { .. } => RunHome::Boxed,
            RequestFor::Made(request) => request.run_home(),
        }
    }
}
