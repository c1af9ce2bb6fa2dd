//! Non-blocking calls that reach a communicator while this very thread is
//! setting it up. Open MPI posts its own MPI_Iallreduce (the context-id
//! agreement of MPI_Comm_idup on the parent) from its progress loop, and a
//! blocking collective's setup runs that loop while it waits for the
//! setup exchange, whose allgathers it posts in the module underneath's
//! non-blocking sequence (libnbc numbers its calls per communicator).
//! Posted there at once, the agreement would take a place among the
//! exchange's allgathers on this rank, while a rank that makes it outside
//! any call of ours queues it behind the whole setup (`deferred.rs`): the
//! two ranks' sequences differ and the calls meet the wrong partners.
//! So a nested call waits here until the setup ended, then goes to the
//! module underneath, as every nested call does once the communicator is
//! set up, its request (made at the call) following that call's
//! (`wrapped.rs`).
//!
//! Invariants: calls are queued only while the setup has not ended and
//! only by the thread holding the communicator's state (a nested call);
//! the holder that ends the setup closes the queue and posts what it holds
//! in call order before anything else of the communicator's runs, so a
//! nested call is never served natively and never overtakes another.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use ompi_sys as sys;

use super::deferred::{Deferred, DeferredCall};
use super::request::{new_request, RequestRef};
use super::saved::SavedCollectives;
use super::saved_nonblocking::Request;

pub(super) struct NestedInSetup {
    /// The communicator's setup has not ended yet.
    open: AtomicBool,
    queued: Mutex<VecDeque<Deferred>>,
}

impl NestedInSetup {
    pub(super) fn new() -> Self {
        NestedInSetup { open: AtomicBool::new(true), queued: Mutex::new(VecDeque::new()) }
    }

    /// Queues a call nested inside the communicator's setup, making its
    /// request into the caller's handle; `None` once the setup ended (the
    /// call goes to the module underneath at once).
    pub(super) fn queue(&self, call: DeferredCall, request_out: Request) -> Option<c_int> {
        if !self.open.load(Ordering::Acquire) {
            return None;
        }
        let Some(request) = new_request(call.comm(), None) else {
            return Some(sys::OMPI_ERR_OUT_OF_RESOURCE as c_int);
        };
        // SAFETY: Open MPI passes the caller's handle; the request is a
        // fresh, started one of ours.
        let request = unsafe {
            *request_out = request;
            RequestRef::retain(request)
        };
        tracing::debug!("a {} nested inside the communicator's setup waits for it to end", call.collective().name());
        self.lock().push_back(Deferred::new(call, request));
        Some(sys::OMPI_SUCCESS as c_int)
    }

    /// The setup ended: later nested calls go underneath at once, and the
    /// queued ones go there now, in call order.
    pub(super) fn post_after_setup(&self, saved: &SavedCollectives) {
        if !self.open.swap(false, Ordering::AcqRel) {
            return;
        }
        let queued = std::mem::take(&mut *self.lock());
        for deferred in queued {
            deferred.post_underneath(saved);
        }
    }

    /// The communicator failed: the queued calls complete with an error.
    pub(super) fn abandon(&self) {
        self.open.store(false, Ordering::Release);
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Deferred>> {
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
