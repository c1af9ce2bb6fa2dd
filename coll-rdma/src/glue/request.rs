//! coll rdma's MPI requests: Open MPI request objects (derived from
//! `ompi_request_t`, allocated and freed through Open MPI's object system)
//! so that MPI_Test, MPI_Wait and their all/any/some forms treat them like
//! any other. A request completes through Open MPI's own completion
//! function, which also wakes a waiter blocked in a multi-request wait.
//!
//! Ownership: the application holds one reference from the call that made
//! the request until MPI_Wait/MPI_Test (or MPI_Request_free) calls
//! `req_free`; while a run is under way its queue holds a second one
//! (`RequestRef`), released right after completion. So freeing a request
//! still under way is safe, and memory goes only when both are gone: a
//! non-persistent request's object then waits in `request_pool` for the
//! next post.
//! A persistent request remembers its communicator and module for
//! MPI_Start; it holds no reference on either (MPI requires the
//! communicator to outlive the request's use). A persistent reduction
//! holds one on its op and datatype (a bcast on its datatype) from
//! creation to destruction: MPI lets the application free both right after
//! `*_init` and go on starting the request, and Open MPI's MPI layer
//! retains them only for a request still pending when `*_init` returns,
//! which an inactive persistent one is not.
//! A persistent request of ours exists only on a set-up communicator that
//! serves its call (its `*_init` sets the communicator up first if need
//! be); every other `*_init` returns the module underneath's own request.

use std::ffi::c_int;
use std::mem::size_of;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};

use ompi_sys as sys;

use super::ffi_guard::guarded;
use super::own_wait;
use super::request_pool;
use super::run_home::{RunHome, RunStorage};
use super::mpi_ibcast::KeptBcast;
use super::mpi_ireduction::KeptPath;
use super::saved::ReductionCall;
use super::saved_nonblocking::BcastCall;

/// What MPI_Start does with a persistent request of ours.
#[derive(Clone, Copy)]
pub(super) struct Persistent {
    pub(super) comm: *mut sys::ompi_communicator_t,
    pub(super) module: *mut sys::mca_coll_base_module_t,
    /// The arguments every start repeats.
    pub(super) call: PersistentCall,
    /// Reads what it needs of this through the request it starts
    /// (`RequestRef::persistent_target`, `persistent_call`): a start
    /// copies no more of it than that.
    pub(super) start: unsafe fn(RequestRef) -> c_int,
}

/// The arguments of a persistent call, as given to its `*_init`.
#[derive(Clone, Copy)]
pub(super) enum PersistentCall {
    Barrier,
    /// An allreduce (`root` `None`) or a reduce, with the path its starts
    /// take while the communicator's plan stays as it was when decided
    /// (`*_init` decides it, on the set-up communicator).
    Reduction { call: ReductionCall, root: Option<c_int>, kept: KeptPath },
    /// A bcast, with the length and span its starts send while the plan
    /// stays as it was when decided (`*_init` decides it).
    Bcast(BcastCall, KeptBcast),
}

impl PersistentCall {
    /// The Open MPI objects a persistent request keeps alive from `*_init`
    /// until it is freed (MPI lets the application free them before).
    fn retained_objects(&self) -> Vec<*mut sys::opal_object_t> {
        match self {
            PersistentCall::Barrier => Vec::new(),
            PersistentCall::Reduction { call, .. } => vec![call.op as *mut sys::opal_object_t, call.dtype as *mut sys::opal_object_t],
            PersistentCall::Bcast(call, _) => vec![call.dtype as *mut sys::opal_object_t],
        }
    }
}

// Derived from Open MPI's ompi_coll_base_nbc_request_t, not directly from
// ompi_request_t: the MPI layer of Open MPI (MPI_Iallreduce, MPI_Ibcast, ...)
// casts every collective request to it to retain a user op or a derived
// datatype until completion (ompi_coll_base_retain_op/_datatypes), writing
// and later reading (and freeing) the fields after ompi_request_t.
#[repr(C)]
pub(super) struct RdmaRequest {
    base: sys::ompi_coll_base_nbc_request_t,
    persistent: Option<Persistent>,
    /// Passes of coll rdma's own progress MPI_Wait makes on this request
    /// before Open MPI's wait loop (`own_wait.rs`); set at each post or
    /// start from the communicator's wait policy, read by the waiter
    /// (atomic: MPI lets another thread wait than the one that started).
    wait_spin_polls: AtomicU32,
    /// The communicator whose runs MPI_Wait polls (`own_wait.rs`).
    comm: *mut sys::ompi_communicator_t,
    /// A persistent request's run, kept from one start to the next
    /// (`run_home.rs`); empty in any other request.
    runs: RunStorage,
}

// Open MPI's class descriptor; its object system writes the initialisation
// fields on first use, so it must be a mutable static.
static mut RDMA_REQUEST_CLASS: sys::opal_class_t = sys::opal_class_t {
    cls_name: c"mca_coll_rdma_request_t".as_ptr(),
    cls_parent: &raw mut sys::ompi_coll_base_nbc_request_t_class,
    cls_construct: Some(construct),
    cls_destruct: Some(destruct),
    cls_initialized: 0,
    cls_depth: 0,
    cls_construct_array: null_mut(),
    cls_destruct_array: null_mut(),
    cls_sizeof: size_of::<RdmaRequest>(),
};

unsafe extern "C" fn construct(object: *mut sys::opal_object_t) {
    // SAFETY: Open MPI calls this on a freshly allocated object of our
    // class's size; the parent constructors initialised only `base`.
    unsafe {
        let request = object as *mut RdmaRequest;
        (&raw mut (*request).persistent).write(None);
        (&raw mut (*request).wait_spin_polls).write(AtomicU32::new(0));
        (&raw mut (*request).comm).write(null_mut());
        (&raw mut (*request).runs).write(RunStorage::default());
    }
}

unsafe extern "C" fn destruct(object: *mut sys::opal_object_t) {
    // SAFETY: Open MPI calls this once, when the last reference on one of
    // our requests goes; `persistent` was written by `construct` or
    // `new_request` and nothing reads it after this; likewise `runs`,
    // freed first: the last run may use the retained objects.
    let (runs, persistent) = unsafe {
        let request = object as *mut RdmaRequest;
        (std::mem::take(&mut (*request).runs), (*request).persistent.take())
    };
    // Open MPI calls this from C: a panic in a run's drop must not unwind
    // into it, and the retained objects go all the same.
    guarded("the request destructor", (), || drop(runs));
    let retained = guarded("the request destructor", Vec::new(), || persistent.map_or(Vec::new(), |persistent| persistent.call.retained_objects()));
    for object in retained {
        // SAFETY: the references `new_request` took.
        unsafe { sys::coll_rdma_shim_obj_release(object) };
    }
}

/// A new request on `comm`, owned by the caller (the application's
/// reference); `None` if Open MPI could not allocate it. A persistent
/// request starts inactive; any other is started at once.
pub(super) fn new_request(comm: *mut sys::ompi_communicator_t, persistent: Option<Persistent>) -> Option<*mut sys::ompi_request_t> {
    own_wait::install();
    // A spare object of a finished call is constructed and unreachable
    // (`request_pool`); everything a post sets is set again below.
    let spare = if persistent.is_none() { request_pool::take() } else { None };
    // SAFETY: the class derives from ompi_request_t's; opal_obj_new
    // allocates cls_sizeof bytes and runs the constructors.
    let request = spare.unwrap_or_else(|| unsafe { sys::coll_rdma_shim_obj_new(&raw mut RDMA_REQUEST_CLASS) }) as *mut RdmaRequest;
    if request.is_null() {
        return None;
    }
    for object in persistent.map_or(Vec::new(), |persistent| persistent.call.retained_objects()) {
        // SAFETY: `*_init` hands us live op and datatype objects, both
        // derived from opal_object_t; released in `destruct`.
        unsafe { sys::coll_rdma_shim_obj_retain(object) };
    }
    // SAFETY: freshly constructed and not yet shared.
    unsafe {
        sys::coll_rdma_shim_request_init(request as *mut sys::ompi_request_t, comm, c_int::from(persistent.is_some()));
        (*request).base.super_.req_free = Some(free);
        (*request).base.super_.req_cancel = None;
        (*request).base.super_.req_start = persistent.map(|_| start as unsafe extern "C" fn(usize, *mut *mut sys::ompi_request_t) -> c_int);
        (*request).persistent = persistent;
        (*request).wait_spin_polls.store(0, Ordering::Relaxed);
        (*request).comm = comm;
        if persistent.is_none() {
            sys::coll_rdma_shim_request_activate(request as *mut sys::ompi_request_t);
        }
    }
    Some(request as *mut sys::ompi_request_t)
}

/// How many passes over its communicator's runs MPI_Wait may spend on
/// `request` before Open MPI's wait loop, and that communicator; `None`
/// if it is not ours.
///
/// # Safety
/// `request` must be a live Open MPI request.
pub(super) unsafe fn wait_spin_polls_if_ours(request: *mut sys::ompi_request_t) -> Option<(u32, *mut sys::ompi_communicator_t)> {
    // SAFETY: every request is an Open MPI object; its class tells ours.
    let class = unsafe { (*(request as *mut sys::opal_object_t)).obj_class };
    if class != &raw mut RDMA_REQUEST_CLASS {
        return None;
    }
    let request = request as *mut RdmaRequest;
    // SAFETY: of our class, so an RdmaRequest; `comm` is written when the
    // request is made, before the application has it.
    Some(unsafe { ((*request).wait_spin_polls.load(Ordering::Relaxed), (*request).comm) })
}

/// Gives up one reference on a request of ours: the last one of a
/// non-persistent request leaves it to `request_pool` for the next post.
///
/// # Safety
/// The caller must hold a reference on `request`, one of ours, and not use
/// it after.
unsafe fn release_reference(request: *mut sys::ompi_request_t) {
    // SAFETY: guaranteed by the caller; `persistent` is written once, when
    // the request is made (or taken from the pool), before it is shared.
    let persistent = unsafe { (*(request as *mut RdmaRequest)).persistent.is_some() };
    let object = request as *mut sys::opal_object_t;
    // SAFETY: guaranteed by the caller.
    unsafe {
        if persistent {
            sys::coll_rdma_shim_obj_release(object);
        } else {
            request_pool::release(object);
        }
    }
}

/// `req_free`: MPI_Request_free, or MPI_Wait/MPI_Test once a
/// non-persistent request completed. Gives up the application's reference.
unsafe extern "C" fn free(request: *mut *mut sys::ompi_request_t) -> c_int {
    guarded("request free", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI passes the application's handle of one of our
        // requests, which holds a reference.
        unsafe {
            sys::coll_rdma_shim_request_fini(*request);
            release_reference(*request);
            sys::coll_rdma_shim_request_set_null(request);
        }
        sys::OMPI_SUCCESS as c_int
    })
}

/// `req_start`: MPI_Start and MPI_Startall on persistent requests of ours.
unsafe extern "C" fn start(count: usize, requests: *mut *mut sys::ompi_request_t) -> c_int {
    guarded("MPI_Start", sys::OMPI_ERROR as c_int, || {
        for index in 0..count {
            // SAFETY: Open MPI passes `count` handles of requests whose
            // req_start is ours, so they are ours.
            let request = unsafe { *requests.add(index) } as *mut RdmaRequest;
            // SAFETY: as above; `persistent` is written at creation and
            // otherwise only by a start of this request
            // (`keep_for_next_starts`), never while another runs. Only
            // the start function is read here, not the whole call.
            let Some(start_fn) = (unsafe { (*request).persistent.as_ref() }).map(|persistent| persistent.start) else {
                tracing::error!("MPI_Start on a coll rdma request that is not persistent");
                return sys::OMPI_ERR_BAD_PARAM as c_int;
            };
            // MPI forbids starting an active request (started, and not yet
            // made inactive by the application's wait or test, even if
            // its run has finished), and Open MPI 4.1's MPI_Start does not
            // check: restarted, its run would be queued twice, and this
            // rank alone would make one collective more. MPI_Start hands
            // our code to the application as it is, so the error is
            // raised here as an MPI function raises it: on the
            // communicator's handler, with an MPI class.
            // SAFETY: a live request of ours (the application holds it).
            if unsafe { sys::coll_rdma_shim_request_is_active(request as *mut sys::ompi_request_t) } != 0 {
                tracing::error!("MPI_Start on a persistent collective request of coll rdma that is still active");
                // SAFETY: as for `start_fn`; the communicator outlives its
                // persistent requests (the application frees them first).
                let comm = unsafe { (*request).comm };
                // SAFETY: as above.
                return unsafe { sys::coll_rdma_shim_comm_raise(comm, sys::MPI_ERR_REQUEST as c_int, c"MPI_Start".as_ptr()) };
            }
            // SAFETY: an inactive persistent request of ours, started by
            // its owner: nothing else touches it now.
            unsafe { sys::coll_rdma_shim_request_activate(request as *mut sys::ompi_request_t) };
            // SAFETY: the request is alive (the application holds it).
            let run = unsafe { RequestRef::retain(request as *mut sys::ompi_request_t) };
            // SAFETY: the start function was chosen together with the
            // call it starts, which it reads from the request.
            let rc = unsafe { start_fn(run) };
            if rc != sys::OMPI_SUCCESS as c_int {
                return rc;
            }
        }
        sys::OMPI_SUCCESS as c_int
    })
}

/// One reference on a started request, held by whatever runs it; `finish`
/// completes the request and gives the reference up. Dropped unfinished
/// (its run was abandoned: a failure, the communicator's teardown), it
/// completes the request with an error so that no waiter hangs.
pub(super) struct RequestRef(*mut sys::ompi_request_t);

// SAFETY: the queue holding a RequestRef moves with the communicator's
// state between the threads that hold it, one at a time, and the list of
// requests that follow one underneath (`wrapped.rs`) is behind a lock
// that any thread's progress may take; completing a
// request is Open MPI's thread-safe ompi_request_complete (an atomic swap
// and a wake-up), and its reference count is atomic once threads are
// enabled, so the last release may come from any thread.
unsafe impl Send for RequestRef {}

impl RequestRef {
    /// # Safety
    /// `request` must be a live request of ours, started.
    pub(super) unsafe fn retain(request: *mut sys::ompi_request_t) -> Self {
        // SAFETY: guaranteed by the caller; released in `finish`.
        unsafe { sys::coll_rdma_shim_obj_retain(request as *mut sys::opal_object_t) };
        RequestRef(request)
    }

    /// Lets MPI_Wait on the request spend up to `polls` passes of coll
    /// rdma's own progress before Open MPI's wait loop (`own_wait.rs`).
    pub(super) fn spin_in_wait(&self, polls: u32) {
        // SAFETY: our reference keeps the request, one of ours, alive.
        unsafe { (*(self.0 as *mut RdmaRequest)).wait_spin_polls.store(polls, Ordering::Relaxed) };
    }

    /// The communicator and module of a persistent request, as its
    /// `*_init` got them; `None` for any other request.
    pub(super) fn persistent_target(&self) -> Option<(*mut sys::ompi_communicator_t, *mut sys::mca_coll_base_module_t)> {
        // SAFETY: our reference keeps the request, one of ours, alive;
        // `comm` and `module` are written at creation only.
        unsafe { (*(self.0 as *mut RdmaRequest)).persistent.as_ref() }.map(|persistent| (persistent.comm, persistent.module))
    }

    /// What every start of a persistent request repeats (a copy: a start
    /// may replace it, `keep_for_next_starts`); `None` for any other
    /// request.
    pub(super) fn persistent_call(&self) -> Option<PersistentCall> {
        // SAFETY: our reference keeps the request, one of ours, alive;
        // `call` changes only in a start of this request, which is the
        // caller (MPI forbids starting an active request).
        unsafe { (*(self.0 as *mut RdmaRequest)).persistent.as_ref() }.map(|persistent| persistent.call)
    }

    /// Where this started request's run goes: a persistent request's own
    /// storage, else a box (`run_home.rs`).
    pub(super) fn run_home(&mut self) -> RunHome<'_> {
        let request = self.0 as *mut RdmaRequest;
        // SAFETY: our reference keeps the request, one of ours, alive;
        // `persistent` is written at creation only, and `runs` is touched
        // only by the starting call of a persistent request (MPI forbids
        // starting an active request: this is that call) and by the queue
        // through the handle this call queues once it placed the run;
        // `&mut self` keeps two homes of one request apart.
        unsafe {
            if (*request).persistent.is_some() { RunHome::Kept(&mut *(&raw mut (*request).runs)) } else { RunHome::Boxed }
        }
    }

    /// Replaces what the next starts of this persistent request repeat
    /// (a reduction's path, decided again after its plan changed); a
    /// request that is not persistent has nothing to keep.
    pub(super) fn keep_for_next_starts(&self, call: PersistentCall) {
        // SAFETY: our reference keeps the request, one of ours, alive; a
        // started persistent request is touched by its starting call alone
        // (MPI forbids starting an active request), and this is that call.
        if let Some(persistent) = unsafe { (*(self.0 as *mut RdmaRequest)).persistent.as_mut() } {
            persistent.call = call;
        }
    }

    /// Completes the request with `mpi_error` (an MPI error class).
    pub(super) fn finish(self, mpi_error: c_int) {
        let request = self.0;
        std::mem::forget(self);
        // SAFETY: our reference keeps the request alive until the release;
        // completion may free nothing (the application's reference, if it
        // still has one, is released only by req_free).
        unsafe {
            sys::coll_rdma_shim_request_complete(request, mpi_error);
            release_reference(request);
        }
    }
}

impl Drop for RequestRef {
    fn drop(&mut self) {
        RequestRef(self.0).finish(sys::MPI_ERR_OTHER as c_int);
    }
}
