//! Spare request objects: a non-blocking call's request, once nobody holds
//! it any more (the application freed it and its run finished), waits here
//! for the next post instead of going back to malloc. Open MPI's PML and
//! libnbc take their requests from free lists for the same reason: an
//! allocation, Open MPI's constructors, its destructors and a free cost a
//! small MPI_Iallreduce's posting rank about 280 instructions per call
//! (callgrind, docs/nonblocking.md).
//!
//! Invariants:
//! - an object in the pool has reference count 0 and nobody can reach it:
//!   its constructors have run, its destructors have not;
//! - only requests that are not persistent come here (a persistent one
//!   lives from `*_init` to MPI_Request_free, and releases the objects it
//!   retained in its destructor); `request.rs` decides which;
//! - at most `SPARE_REQUESTS` objects wait here; `destroy_all` (component
//!   close) destroys them, so none outlives the library's class;
//! - the pool is a cache: a post or release that finds it in use (another
//!   thread's, at MPI_THREAD_MULTIPLE) makes or destroys its object
//!   instead of waiting, and below that level using it takes no locked
//!   instruction (`thread_level.rs`).

use ompi_sys as sys;

use super::thread_level::TryLock;

/// Enough for the outstanding calls of a typical loop (8 in the
/// benchmarks' batch, a few more across communicators).
const SPARE_REQUESTS: usize = 64;

/// Addresses of spare request objects (count 0, constructed).
static SPARE: TryLock<Vec<usize>> = TryLock::new(Vec::new());

/// A spare request object with one reference (the caller's), if any.
pub(super) fn take() -> Option<*mut sys::opal_object_t> {
    let object = SPARE.try_lock()?.pop()? as *mut sys::opal_object_t;
    // SAFETY: nobody else can reach a spare object (see the invariants).
    unsafe { sys::coll_rdma_shim_obj_revive(object) };
    Some(object)
}

/// Gives up one reference on `object`, a request of ours that is not
/// persistent; the last one puts it in the pool (or destroys it if the
/// pool is full).
///
/// # Safety
/// The caller must hold a reference on `object` and not use it after.
pub(super) unsafe fn release(object: *mut sys::opal_object_t) {
    // SAFETY: guaranteed by the caller; the count is atomic once threads
    // are enabled, so exactly one releaser sees it reach zero.
    if unsafe { sys::coll_rdma_shim_obj_drop_reference(object) } != 0 {
        return;
    }
    if let Some(mut spare) = SPARE.try_lock().filter(|spare| spare.len() < SPARE_REQUESTS) {
        spare.push(object as usize);
        return;
    }
    // SAFETY: nobody holds it any more; revived only to be released at once,
    // which runs the destructors and frees it.
    unsafe { destroy(object) };
}

/// Destroys every spare object, at component close.
pub(super) fn destroy_all() {
    // Component close: no call of ours is under way, so nothing holds it.
    let objects = SPARE.try_lock().map(|mut spare| std::mem::take(&mut *spare)).unwrap_or_default();
    for object in objects {
        // SAFETY: spare objects are unreachable from anywhere else.
        unsafe { destroy(object as *mut sys::opal_object_t) };
    }
}

/// # Safety
/// `object` must have count 0 and be unreachable from anywhere else.
unsafe fn destroy(object: *mut sys::opal_object_t) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        sys::coll_rdma_shim_obj_revive(object);
        sys::coll_rdma_shim_obj_release(object);
    }
}
