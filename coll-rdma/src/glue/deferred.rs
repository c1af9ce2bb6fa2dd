//! Non-blocking calls made while their communicator's setup is under way
//! (`comm_state/setting_up.rs`): each gets a request of ours at once and
//! waits in the setup's queue with its arguments; when the setup ends they
//! are posted in call order, as if made then: served, or handed to the
//! module underneath's non-blocking function with their reason, ours
//! completing when that one does (`wrapped.rs`).

use std::ffi::c_int;

use ompi_sys as sys;

use super::comm_state::{Collective, CommState, Step};
use super::nonblocking_post::PostAs;
use super::request::{new_request, RequestRef};
use super::saved::{ReductionCall, SavedCollectives};
use super::wrapped::{self, Posted};
use super::saved_nonblocking::{BcastCall, Request};

/// A queued call's arguments.
#[derive(Clone, Copy)]
pub(super) enum DeferredCall {
    Ibarrier(*mut sys::ompi_communicator_t),
    /// An iallreduce (`root` `None`) or an ireduce.
    Ireduction { call: ReductionCall, root: Option<c_int> },
    Ibcast(BcastCall),
}

impl DeferredCall {
    pub(super) fn comm(&self) -> *mut sys::ompi_communicator_t {
        match self {
            DeferredCall::Ibarrier(comm) => *comm,
            DeferredCall::Ireduction { call, .. } => call.comm,
            DeferredCall::Ibcast(call) => call.comm,
        }
    }

    /// The call, as the tallies and events name it.
    pub(super) fn collective(&self) -> Collective {
        match self {
            DeferredCall::Ibarrier(_) => Collective::Ibarrier,
            DeferredCall::Ireduction { root: None, .. } => Collective::Iallreduce,
            DeferredCall::Ireduction { root: Some(_), .. } => Collective::Ireduce,
            DeferredCall::Ibcast(_) => Collective::Ibcast,
        }
    }
}

/// A queued call and the request the application holds for it.
pub(super) struct Deferred {
    call: DeferredCall,
    request: RequestRef,
}

impl Deferred {
    pub(super) fn new(call: DeferredCall, request: RequestRef) -> Self {
        Deferred { call, request }
    }

    /// Posts the call in the module underneath, the request following
    /// that call's (`wrapped.rs`).
    pub(super) fn post_underneath(self, saved: &SavedCollectives) {
        let Deferred { call, request } = self;
        let nonblocking = &saved.nonblocking;
        wrapped::post(request, |handle| {
            Posted::Pending(match call {
                DeferredCall::Ibarrier(comm) => nonblocking.ibarrier(comm, handle)(),
                DeferredCall::Ireduction { call, root: None } => nonblocking.iallreduce(call, handle)(),
                DeferredCall::Ireduction { call, root: Some(root) } => nonblocking.ireduce(call, root, handle)(),
                DeferredCall::Ibcast(call) => nonblocking.ibcast(call, handle)(),
            })
        });
    }
}

// SAFETY: the pointers are the application's buffers and Open MPI's
// communicator, datatype and op objects of a pending call (the MPI layer
// retains a derived datatype and a user op for a pending request, and MPI
// forbids touching the buffers), used by whichever thread holds the
// communicator's state, one at a time, as a posted run's are.
unsafe impl Send for Deferred {}

impl CommState {
    /// Queues `call` behind the setup under way if there is one (starting
    /// it if this is the communicator's first call): the caller's handle
    /// gets a request of ours. `None`: the call goes on as usual.
    #[inline]
    pub(super) fn defer_behind_setup(&mut self, call: DeferredCall, request_out: Request) -> Option<Step> {
        // Every call on a set-up communicator: one test.
        if self.setup_has_ended() {
            return None;
        }
        self.defer_behind_setup_slow(call, request_out)
    }

    #[cold]
    #[inline(never)]
    fn defer_behind_setup_slow(&mut self, call: DeferredCall, request_out: Request) -> Option<Step> {
        if !self.must_queue_behind_setup(call.comm(), call.collective().name()) {
            return None;
        }
        let Some(request) = new_request(call.comm(), None) else {
            return Some(Step::Done(sys::OMPI_ERR_OUT_OF_RESOURCE as c_int));
        };
        // SAFETY: Open MPI passes the caller's handle; the request is a
        // fresh, started one of ours.
        let request = unsafe {
            *request_out = request;
            RequestRef::retain(request)
        };
        self.queue_behind_setup(Deferred::new(call, request));
        Some(Step::Done(sys::OMPI_SUCCESS as c_int))
    }

    /// Posts a queued call now that the setup ended.
    pub(super) fn replay(&mut self, deferred: Deferred) {
        let Deferred { call, request } = deferred;
        let step = match call {
            DeferredCall::Ibarrier(comm) => self.replay_ibarrier(comm, request),
            DeferredCall::Ireduction { call, root } => self.post_reduction(&call, root, PostAs::Queued(request), None),
            DeferredCall::Ibcast(call) => self.post_bcast(&call, PostAs::Queued(request), None),
        };
        // Every hand-over of a queued call is posted underneath already
        // (`hand_over_queued`); what it returned is in its request.
        if let Step::HandOver(underneath) = step {
            underneath();
        }
    }
}
