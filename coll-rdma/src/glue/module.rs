//! The module object Open MPI attaches to each communicator we claim: an
//! Open MPI object (allocated, retained and released by Open MPI's object
//! system) whose first member is the base module and whose second points at
//! our Rust state.

use std::ffi::c_int;
use std::mem::size_of;
use std::ptr::{addr_of_mut, null_mut};
use std::sync::atomic::{AtomicBool, Ordering};

use ompi_sys as sys;

use super::comm_state::{CommState, Step};
use super::ffi_guard::guarded;
use super::params;
use super::progress;
use super::saved::SavedCollectives;

#[repr(C)]
pub struct RdmaModule {
    base: sys::mca_coll_base_module_t,
    state: *mut CommState,
    /// Held while a collective or the progress callback uses `state`: the
    /// callback may run inside a call we handed to the module underneath.
    busy: AtomicBool,
    /// The state has work to finish outside collective calls (a bcast
    /// root's unacknowledged messages); the progress callback serves it.
    needs_progress: AtomicBool,
}

// Open MPI's class descriptor; its object system writes the initialisation
// fields on first use, so it must be a mutable static.
static mut RDMA_MODULE_CLASS: sys::opal_class_t = sys::opal_class_t {
    cls_name: c"mca_coll_rdma_module_t".as_ptr(),
    cls_parent: &raw mut sys::mca_coll_base_module_t_class,
    cls_construct: Some(construct),
    cls_destruct: Some(destruct),
    cls_initialized: 0,
    cls_depth: 0,
    cls_construct_array: null_mut(),
    cls_destruct_array: null_mut(),
    cls_sizeof: size_of::<RdmaModule>(),
};

unsafe extern "C" fn construct(object: *mut sys::opal_object_t) {
    // SAFETY: Open MPI calls this on a freshly allocated object of our
    // class's size; the parent constructor only initialised `base`.
    unsafe {
        let module = object as *mut RdmaModule;
        (&raw mut (*module).state).write(null_mut());
        (&raw mut (*module).busy).write(AtomicBool::new(false));
        (&raw mut (*module).needs_progress).write(AtomicBool::new(false));
    }
}

unsafe extern "C" fn destruct(object: *mut sys::opal_object_t) {
    guarded("module destructor", (), || {
        let module = object as *mut RdmaModule;
        progress::unregister(module);
        // SAFETY: called once by Open MPI when the last reference goes, and
        // the progress callback can no longer reach it; `state` is null or
        // came from Box::into_raw in enable.
        unsafe {
            let state = std::mem::replace(&mut (*module).state, null_mut());
            if !state.is_null() {
                drop(Box::from_raw(state));
            }
        }
    })
}

/// A new module with our entry points; Open MPI owns the reference.
pub fn new_module() -> *mut sys::mca_coll_base_module_t {
    // SAFETY: the class is a valid descriptor derived from the base module
    // class; opal_obj_new allocates cls_sizeof bytes and runs constructors.
    let module = unsafe { sys::coll_rdma_shim_obj_new(addr_of_mut!(RDMA_MODULE_CLASS)) } as *mut RdmaModule;
    if module.is_null() {
        return null_mut();
    }
    // SAFETY: freshly constructed, not yet shared.
    unsafe {
        (*module).base.coll_module_enable = Some(enable);
        (*module).base.coll_barrier = Some(super::barrier::barrier);
        (*module).base.coll_allreduce = Some(super::allreduce::allreduce);
        (*module).base.coll_reduce = Some(super::reduce::reduce);
        (*module).base.coll_bcast = Some(super::bcast::bcast);
    }
    module as *mut sys::mca_coll_base_module_t
}

unsafe extern "C" fn enable(module: *mut sys::mca_coll_base_module_t, comm: *mut sys::ompi_communicator_t) -> c_int {
    guarded("module enable", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI passes our module and a communicator whose
        // collective table holds the lower-priority functions.
        let (cid, rank, size) = unsafe {
            (
                sys::coll_rdma_shim_comm_cid(comm),
                sys::coll_rdma_shim_comm_rank(comm) as usize,
                sys::coll_rdma_shim_comm_size(comm) as usize,
            )
        };
        // SAFETY: as above.
        let Some(saved) = (unsafe { SavedCollectives::take_from(comm) }) else {
            tracing::info!(
                "comm {cid}: not enabled: no lower-priority barrier, allgather, allreduce and reduce to fall back on \
                 (keep e.g. tuned or basic in --mca coll)"
            );
            return sys::OMPI_ERROR as c_int;
        };
        let state = Box::new(CommState::new(cid, rank, size, saved, params::load()));
        // SAFETY: our module, enabled once per communicator.
        unsafe { (*(module as *mut RdmaModule)).state = Box::into_raw(state) };
        progress::register(module as *mut RdmaModule);
        sys::OMPI_SUCCESS as c_int
    })
}

/// Runs `call` on our per-communicator state behind `module`, holding the
/// module's busy flag, and lets the progress callback know if work is left.
///
/// # Safety
/// `module` must be a module created by `new_module` and enabled on the
/// communicator of the current call.
pub(super) unsafe fn with_state(module: *mut sys::mca_coll_base_module_t, call: impl FnOnce(&mut CommState) -> Step) -> c_int {
    let module = module as *mut RdmaModule;
    // SAFETY: guaranteed by the caller; the flags are only ever shared.
    let (busy, needs_progress) = unsafe { (&(*module).busy, &(*module).needs_progress) };
    while busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        // Only the progress callback of another thread holds it, briefly.
        std::thread::yield_now();
    }
    // SAFETY: enable stored a live Box pointer; the busy flag makes this
    // the only reference while it is held.
    let state = unsafe { &mut *(*module).state };
    let step = call(state);
    let has_work = state.has_background_work();
    busy.store(false, Ordering::Release);
    if has_work && !needs_progress.swap(true, Ordering::AcqRel) {
        progress::work_added();
    }
    match step {
        Step::Done(rc) => rc,
        Step::HandOver(fallback) => fallback(),
    }
}

/// Lets the progress callback serve the state behind `module` if nobody
/// else is using it. Returns whether its background work is finished.
///
/// # Safety
/// `module` must be a live, enabled module of ours.
pub(super) unsafe fn progress_state(module: *mut RdmaModule) -> bool {
    // SAFETY: guaranteed by the caller.
    let (busy, needs_progress) = unsafe { (&(*module).busy, &(*module).needs_progress) };
    if !needs_progress.load(Ordering::Acquire) {
        return true;
    }
    if busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        return false;
    }
    // SAFETY: as in `with_state`.
    let state = unsafe { &mut *(*module).state };
    state.progress_background_work();
    let finished = !state.has_background_work();
    busy.store(false, Ordering::Release);
    if finished && needs_progress.swap(false, Ordering::AcqRel) {
        progress::work_finished();
    }
    finished
}

/// Whether the progress callback counts `module` as having work.
///
/// # Safety
/// `module` must be a live module of ours.
pub(super) unsafe fn has_pending_work(module: *mut RdmaModule) -> bool {
    // SAFETY: guaranteed by the caller.
    unsafe { (*module).needs_progress.load(Ordering::Acquire) }
}
