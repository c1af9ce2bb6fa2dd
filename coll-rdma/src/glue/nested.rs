//! Non-blocking calls that reach a communicator while a call holding its
//! state is setting it up: nested in that call on this thread, or Open
//! MPI's own agreements posted by another thread's progress.
//!
//! Open MPI posts its own MPI_Iallreduce (the context-id agreement of
//! MPI_Comm_idup on the parent) from its progress loop, and a blocking
//! collective's setup runs that loop while it waits for the setup
//! exchange, whose allgathers it posts in the module underneath's
//! non-blocking sequence (libnbc numbers its calls per communicator).
//! Posted there at once, the agreement would take a place among the
//! exchange's allgathers on this rank, while a rank that makes it outside
//! any call of ours queues it behind the whole setup (`deferred.rs`): the
//! two ranks' sequences differ and the calls meet the wrong partners.
//! So such a call waits here until the setup ended, then goes to the
//! module underneath, as every nested call and every agreement posted
//! beside a call of ours does once the communicator is set up, its
//! request (made at the call) following that call's (`wrapped.rs`).
//!
//! Invariants: the queue is open until the holder that ends the setup
//! closes it, and whether it is open is read and changed under its lock,
//! so a call from another thread is either queued before the close (and
//! posted by the closer) or finds it closed; the closer posts what it holds
//! in call order before anything else of the communicator's runs, so a
//! queued call is never served natively and never overtakes another.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ompi_sys as sys;

use super::deferred::{Deferred, DeferredCall};
use super::request::{new_request, RequestRef};
use super::saved::SavedCollectives;
use super::saved_nonblocking::Request;

pub(super) struct NestedInSetup {
    /// The calls queued; `None` once the communicator's setup ended.
    queued: Mutex<Option<VecDeque<Deferred>>>,
}

impl NestedInSetup {
    pub(super) fn new() -> Self {
        NestedInSetup { queued: Mutex::new(Some(VecDeque::new())) }
    }

    /// Queues a call while the communicator's setup has not ended, making
    /// its request into the caller's handle; `None` once it ended (the
    /// call goes to the module underneath at once).
    pub(super) fn queue(&self, call: DeferredCall, request_out: Request) -> Option<c_int> {
        let mut queued = self.lock();
        let queue = queued.as_mut()?;
        let Some(request) = new_request(call.comm(), None) else {
            return Some(sys::OMPI_ERR_OUT_OF_RESOURCE as c_int);
        };
        // SAFETY: Open MPI passes the caller's handle; the request is a
        // fresh, started one of ours.
        let request = unsafe {
            *request_out = request;
            RequestRef::retain(request)
        };
        tracing::debug!("a {} beside the communicator's setup waits for it to end", call.collective().name());
        queue.push_back(Deferred::new(call, request));
        Some(sys::OMPI_SUCCESS as c_int)
    }

    /// The setup ended: later calls go underneath at once, and the queued
    /// ones go there now, in call order.
    pub(super) fn post_after_setup(&self, saved: &SavedCollectives) {
        let Some(queued) = self.lock().take() else { return };
        for deferred in queued {
            deferred.post_underneath(saved);
        }
    }

    /// The communicator failed: the queued calls complete with an error.
    pub(super) fn abandon(&self) {
        drop(self.lock().take());
    }

    fn lock(&self) -> MutexGuard<'_, Option<VecDeque<Deferred>>> {
        self.queued.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
