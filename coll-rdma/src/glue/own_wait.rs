//! MPI_Wait on a request of ours polls its communicator's runs before
//! Open MPI's wait loop takes over. Open MPI's loop calls `opal_progress` on
//! every turn: every component's progress function and ours, and every
//! eighth turn its event library's clock, so a barrier whose last peer
//! arrives while this rank waits is noticed a whole turn late, and its
//! completion pays another. Polling our own runs, as the blocking barrier
//! polls its flags, makes start + wait cost what the blocking call does.
//!
//! How: MPI_Wait calls `ompi_request_functions.req_wait`, one table for
//! every kind of request (Open MPI 4.1 and 5.0 alike). At the first
//! request of ours `install` puts `wait` there, in front of what was
//! there; component close puts that back.
//!
//! Invariants:
//! - every call ends in the function that was in the table before us, with
//!   the same arguments: a request not ours goes straight to it, one of
//!   ours after at most its `wait_spin_polls` passes (the communicator's
//!   spin polls: none where ranks outnumber cores), each a pass over the
//!   runs of the request's communicator alone (`serve_communicator_until`,
//!   which enters its state once for many passes), and then, if it is
//!   still pending, once it completed. Those first passes are bounded,
//!   because a peer may need this process's other progress (a
//!   point-to-point rendezvous, another communicator's runs), which only
//!   Open MPI's progress serves; no pass waits. After them the wait goes
//!   on as the blocking calls' waits do once their spin is over: it yields
//!   the core before every pass, and each pass is a whole `opal_progress`
//!   (every component's progress and every communicator's runs), so
//!   nothing else starves. Open MPI's own loop does not yield (unless the
//!   node is oversubscribed), so a peer that shares this core under load
//!   would wait out this rank's whole time slice;
//! - the table points at us only while this library is open: `uninstall`
//!   runs at component close, and takes us out only if nothing replaced
//!   us since (then whoever did chains to us, and we stay).

use std::ffi::c_int;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ompi_sys as sys;

use super::ffi_guard::guarded;
use super::progress::serve_communicator_until;
use super::wrapped;
use super::request::wait_spin_polls_if_ours;

type WaitFn = unsafe extern "C" fn(*mut *mut sys::ompi_request_t, *mut sys::ompi_status_public_t) -> c_int;

/// Whether the table points at `wait` (changed only under `INSTALLING`).
static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Serialises `install` and `uninstall` (threads may post at once).
static INSTALLING: Mutex<()> = Mutex::new(());
/// The function `wait` chains to, as an address (0 before the first
/// install). Kept after `uninstall`: a wait that read the table before
/// then may still be on its way here.
static CHAINED: AtomicUsize = AtomicUsize::new(0);

/// Puts `wait` in front of MPI_Wait's implementation, once per
/// initialisation; costs one atomic load once done.
pub(super) fn install() {
    if INSTALLED.load(Ordering::Acquire) {
        return;
    }
    let _installing = INSTALLING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if INSTALLED.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: reads the table's entry.
    let Some(current) = (unsafe { sys::coll_rdma_shim_request_wait_fn() }) else { return };
    CHAINED.store(current as usize, Ordering::Release);
    // SAFETY: swaps one function pointer for another of the same type.
    if unsafe { sys::coll_rdma_shim_request_wait_replace(Some(current), Some(wait)) } == 1 {
        INSTALLED.store(true, Ordering::Release);
    }
}

/// Puts back what `install` found, at component close.
pub(super) fn uninstall() {
    let _installing = INSTALLING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !INSTALLED.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: `CHAINED` holds the address of a WaitFn (set by `install`).
    let previous: WaitFn = unsafe { std::mem::transmute::<usize, WaitFn>(CHAINED.load(Ordering::Acquire)) };
    // SAFETY: as in `install`.
    if unsafe { sys::coll_rdma_shim_request_wait_replace(Some(wait), Some(previous)) } == 1 {
        INSTALLED.store(false, Ordering::Release);
    } else {
        tracing::warn!("MPI_Wait's implementation was replaced after coll rdma's: leaving coll rdma's in place");
    }
}

unsafe extern "C" fn wait(request: *mut *mut sys::ompi_request_t, status: *mut sys::ompi_status_public_t) -> c_int {
    // SAFETY: Open MPI's MPI_Wait passes the caller's handle of a live
    // request (MPI_REQUEST_NULL never gets here).
    let pending = unsafe { *request };
    // A request complete already (its run finished at post: a bcast
    // root's, a reduce leaf's) goes straight to the chained wait.
    // SAFETY: as above.
    let complete = unsafe { sys::coll_rdma_shim_request_is_complete(pending) } != 0;
    // SAFETY: as above.
    if let Some((polls, comm)) = (!complete).then(|| unsafe { wait_spin_polls_if_ours(pending) }).flatten().filter(|&(polls, _)| polls > 0) {
        guarded("MPI_Wait", (), || {
            // SAFETY: as above; the application's reference keeps it
            // alive until the wait below frees it.
            let done = || unsafe { sys::coll_rdma_shim_request_is_complete(pending) } != 0;
            serve_communicator_until(comm, polls, done);
            while !done() {
                std::thread::yield_now();
                // SAFETY: Open MPI's progress, called as its own wait
                // loop calls it (no lock of ours is held here).
                unsafe { sys::opal_progress() };
                // Also where our progress callback is not registered.
                wrapped::complete_finished();
            }
        });
    }
    let chained = CHAINED.load(Ordering::Acquire);
    if chained == 0 {
        return sys::OMPI_ERROR as c_int;
    }
    // SAFETY: the address of the function Open MPI's table held before
    // us (`install` stored it before putting `wait` there), called as
    // MPI_Wait would have called it.
    unsafe { std::mem::transmute::<usize, WaitFn>(chained)(request, status) }
}
