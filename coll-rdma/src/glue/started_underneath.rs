//! A start of a persistent request of ours that coll rdma cannot serve:
//! its communicator failed since `*_init`, the start is nested inside our
//! own call (the module underneath called back), or the plan changed to one
//! that hands the call over. The module underneath's non-blocking form of
//! the call is posted, after the communicator's state is let go, and our
//! request follows it (`wrapped.rs`).
//!
//! MPI_Start is local: the blocking call underneath would wait there for
//! peers that may start only after a message this rank sends once its
//! start returned (a chain of ranks each posting after hearing from the
//! one before), and so hang. Only a module underneath without the
//! non-blocking form (libnbc excluded) gets the blocking call, in the
//! start, as before; that is said once at verbose.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

use ompi_sys as sys;

use super::request::{PersistentCall, RequestRef};
use super::saved::SavedCollectives;
use super::saved_nonblocking::{NonblockingKind, Request};
use super::wrapped::{self, Posted};

/// The non-blocking call a persistent one is the repetition of.
fn kind_of(call: &PersistentCall) -> NonblockingKind {
    match call {
        PersistentCall::Barrier => NonblockingKind::Ibarrier,
        PersistentCall::Bcast(..) => NonblockingKind::Ibcast,
        PersistentCall::Reduction { root: None, .. } => NonblockingKind::Iallreduce,
        PersistentCall::Reduction { root: Some(_), .. } => NonblockingKind::Ireduce,
    }
}

/// Carries one start of `request`, a persistent request of ours, out
/// through the module underneath, `request` following it: the start's
/// outcome is its request's. Run with the communicator's state let go.
pub(super) fn follow(saved: &SavedCollectives, request: RequestRef) -> c_int {
    let (Some((comm, _)), Some(call)) = (request.persistent_target(), request.persistent_call()) else {
        // Dropped, the request completes with an error.
        return sys::OMPI_ERR_BAD_PARAM as c_int;
    };
    wrapped::post(request, |handle| post(saved, comm, &call, handle));
    sys::OMPI_SUCCESS as c_int
}

/// Carries out one start of `call` on `comm` through the module
/// underneath: posted into `handle`, or, where the module underneath has
/// no non-blocking form, run blocking.
fn post(saved: &SavedCollectives, comm: *mut sys::ompi_communicator_t, call: &PersistentCall, handle: Request) -> Posted {
    let kind = kind_of(call);
    if saved.nonblocking.provides(kind) {
        return Posted::Pending(match *call {
            PersistentCall::Barrier => saved.nonblocking.ibarrier(comm, handle)(),
            PersistentCall::Bcast(bcast, _) => saved.nonblocking.ibcast(bcast, handle)(),
            PersistentCall::Reduction { call, root: None, .. } => saved.nonblocking.iallreduce(call, handle)(),
            PersistentCall::Reduction { call, root: Some(root), .. } => saved.nonblocking.ireduce(call, root, handle)(),
        });
    }
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        tracing::info!(
            "the module underneath has no {kind:?}: a persistent start coll rdma cannot serve runs its blocking call inside MPI_Start"
        );
    }
    Posted::Completed(match *call {
        PersistentCall::Barrier => saved.barrier(comm)(),
        PersistentCall::Bcast(bcast, _) => saved.bcast(bcast.buffer, bcast.count, bcast.dtype, bcast.root, bcast.comm)(),
        PersistentCall::Reduction { call, root: None, .. } => saved.allreduce(call)(),
        PersistentCall::Reduction { call, root: Some(root), .. } => saved.reduce(call, root)(),
    })
}
