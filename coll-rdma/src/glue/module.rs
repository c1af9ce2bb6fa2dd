//! The module object Open MPI attaches to each communicator we claim: an
//! Open MPI object (allocated, retained and released by Open MPI's object
//! system) whose first member is the base module and whose second points at
//! our Rust state.

use std::ffi::c_int;
use std::mem::size_of;
use std::ptr::{addr_of_mut, null_mut};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ompi_sys as sys;

use super::bypass;
use super::comm_state::{CommState, Step};
use super::deferred::DeferredCall;
use super::entry::{thread_token, ConcurrentCollective, EntryLock, WorkChange};
use super::ffi_guard::guarded;
use super::misuse;
use super::output;
use super::params;
use super::progress;
use super::saved::SavedCollectives;
use super::saved_nonblocking::Request;
use super::thread_level;

#[repr(C)]
pub struct RdmaModule {
    base: sys::mca_coll_base_module_t,
    state: *mut CommState,
    /// The communicator the module was enabled on.
    comm: *mut sys::ompi_communicator_t,
    /// The functions underneath, also reachable while `state` is held:
    /// calls nested inside our own setup, and calls after a failure, go
    /// straight to them. One of the two `Arc` references (the state holds
    /// the other): atomic, as the module may be freed by another thread
    /// than the one that enabled it.
    saved: *const SavedCollectives,
    /// Who uses `state` (a collective or the progress callback, of which
    /// thread), and whether it has background work; see `entry.rs`. The
    /// callback may run inside a call we handed to the module underneath.
    entry: EntryLock,
    /// The state was left half-updated (a panic, or a transport error in the
    /// middle of a protocol): every later call goes to the module underneath.
    failed: AtomicBool,
    /// Calls handed over because of `failed`, reported at teardown.
    handed_over_after_failure: AtomicU64,
    /// Agreements (`NonblockingCall::agreement`) sent underneath without
    /// the state (nested in a call of ours, or beside another thread's),
    /// reported at teardown.
    agreements_beside: AtomicU64,
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
        (&raw mut (*module).comm).write(null_mut());
        (&raw mut (*module).saved).write(std::ptr::null());
        (&raw mut (*module).entry).write(EntryLock::new(thread_level::current()));
        (&raw mut (*module).failed).write(AtomicBool::new(false));
        (&raw mut (*module).handed_over_after_failure).write(AtomicU64::new(0));
        (&raw mut (*module).agreements_beside).write(AtomicU64::new(0));
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
                let mut state = Box::from_raw(state);
                state.note_handed_over_after_failure((*module).handed_over_after_failure.load(Ordering::Acquire));
                state.note_agreements_underneath((*module).agreements_beside.load(Ordering::Acquire));
                drop(state);
            }
            let saved = std::mem::replace(&mut (*module).saved, std::ptr::null());
            if !saved.is_null() {
                drop(Arc::from_raw(saved));
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
        (*module).base.coll_barrier = Some(super::mpi_barrier::barrier);
        (*module).base.coll_allreduce = Some(super::mpi_allreduce::allreduce);
        (*module).base.coll_reduce = Some(super::mpi_reduce::reduce);
        (*module).base.coll_bcast = Some(super::mpi_bcast::bcast);
        register_nonblocking(&mut (*module).base);
    }
    module as *mut sys::mca_coll_base_module_t
}

/// The non-blocking and persistent slots (`mpi_ibarrier.rs`,
/// `mpi_ireduction.rs`, `mpi_ibcast.rs`).
fn register_nonblocking(base: &mut sys::mca_coll_base_module_t) {
    use super::{mpi_ibarrier as barrier, mpi_ibcast as bcasts, mpi_ireduction as reductions};
    base.coll_ibarrier = Some(barrier::ibarrier);
    base.coll_barrier_init = Some(barrier::barrier_init);
    base.coll_ibcast = Some(bcasts::ibcast);
    base.coll_iallreduce = Some(reductions::iallreduce);
    base.coll_ireduce = Some(reductions::ireduce);
    base.coll_bcast_init = Some(bcasts::bcast_init);
    base.coll_allreduce_init = Some(reductions::allreduce_init);
    base.coll_reduce_init = Some(reductions::reduce_init);
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
            // Every rank finds the same components underneath: its rank 0
            // says so in the summary, the others in the detail.
            let why = "not enabled: no lower-priority barrier, allgather, allreduce, reduce or bcast to fall back on \
                       (each is needed; keep e.g. tuned or basic in --mca coll)";
            if rank == 0 {
                tracing::info!(target: output::SUMMARY, "comm {cid}: {why}");
            } else {
                tracing::info!("comm {cid} rank {rank}: {why}");
            }
            return sys::OMPI_ERROR as c_int;
        };
        let saved = Arc::new(saved);
        let state = Box::new(CommState::new(cid, rank, size, Arc::clone(&saved), &params::current()));
        // SAFETY: our module, enabled once per communicator.
        unsafe {
            let module = module as *mut RdmaModule;
            (*module).comm = comm;
            (*module).saved = Arc::into_raw(saved);
            (*module).state = Box::into_raw(state);
        }
        progress::register(module as *mut RdmaModule);
        sys::OMPI_SUCCESS as c_int
    })
}

/// The module's state, held by one thread; released when dropped, also
/// while a panic unwinds, which then marks the state failed. One exists
/// only while its thread holds the entry: dropping it is what releases it.
struct Held {
    module: *mut RdmaModule,
}

impl Held {
    /// Enters for a collective: waits only while another thread's progress
    /// callback is inside, briefly.
    ///
    /// # Safety
    /// `module` must be a live, enabled module of ours.
    unsafe fn enter_collective(module: *mut RdmaModule, token: u64) -> Result<Held, ConcurrentCollective> {
        // SAFETY: guaranteed by the caller.
        unsafe { &(*module).entry }.enter_collective(token).map(|()| Held { module })
    }

    /// # Safety
    /// As for `enter_collective`.
    unsafe fn try_enter_progress(module: *mut RdmaModule, token: u64) -> Option<Held> {
        // A `Held` leaves the entry when dropped, so it is made only once
        // the entry is ours: one made for a failed attempt (as
        // `bool::then_some`, which builds its argument either way, did)
        // released the holder's entry, and the next pass went in beside a
        // collective still running there (a bcast root's retransmission
        // nested in its own record's wait on the same udp transport).
        // SAFETY: guaranteed by the caller.
        if unsafe { &(*module).entry }.try_enter_progress(token) { Some(Held { module }) } else { None }
    }

    /// Records whether background work is left, while still holding the
    /// state, and tells the progress registry when that changes.
    #[inline]
    fn leave_background_work(&self, has_work: bool) {
        // SAFETY: the module outlives every holder.
        match unsafe { &(*self.module).entry }.note_background_work(has_work) {
            WorkChange::Added => progress::work_added(),
            WorkChange::Finished => progress::work_finished(),
            WorkChange::Unchanged => {}
        }
    }

    fn state(&mut self) -> &mut CommState {
        // SAFETY: enable stored a live Box pointer; holding the module makes
        // this the only reference.
        unsafe { &mut *(*self.module).state }
    }

    fn mark_failed(&self) {
        // SAFETY: the module outlives every holder.
        unsafe { (*self.module).failed.store(true, Ordering::Release) };
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Whatever the panic interrupted is half done: no later call may
            // build on it, and the communicator's teardown must not run its
            // closing protocol on it either.
            self.mark_failed();
            self.state().mark_failed();
            self.state().abandon_pending();
        }
        // SAFETY: the module outlives every holder.
        unsafe { (*self.module).entry.leave() };
    }
}

/// Runs `call` on our per-communicator state behind `module`, holding it,
/// and lets the progress callback know if work is left. A call that cannot
/// use the state (it is held by this very thread: the module underneath
/// called back into us during our own setup; or it failed earlier) runs
/// `underneath` on the saved functions instead, without waiting. A call
/// that finds another thread's collective inside ends the job (see
/// `misuse`). Once all ranks have agreed to fall back for good, the
/// communicator's table gets the saved functions back (see `bypass`).
///
/// # Safety
/// `module` must be a module created by `new_module` and enabled on the
/// communicator of the current call.
pub(super) unsafe fn with_state(
    module: *mut sys::mca_coll_base_module_t,
    call: impl FnOnce(&mut CommState) -> Step,
    underneath: impl FnOnce(&SavedCollectives) -> c_int,
) -> c_int {
    // SAFETY: guaranteed by the caller.
    unsafe { enter_state(module, call, None, underneath) }
}

/// An MPI_I* call, for when it cannot hold the state (`nested.rs`).
pub(super) struct NonblockingCall {
    pub(super) call: DeferredCall,
    /// The caller's request handle.
    pub(super) request: Request,
    /// The call has the shape of one of Open MPI's own agreements
    /// (`mpi_ireduction.rs`), which its progress loop posts from any
    /// thread: one that finds another thread's collective inside is not
    /// the application's misuse, and goes underneath as every agreement
    /// does.
    pub(super) agreement: bool,
}

/// `with_state` for an MPI_I* call: nested inside this thread's own setup
/// of the communicator (or an agreement beside another thread's), the call
/// waits for the setup to end (`nested.rs`) instead of going underneath
/// at once.
///
/// # Safety
/// As `with_state`.
pub(super) unsafe fn with_state_nonblocking(
    module: *mut sys::mca_coll_base_module_t,
    call: impl FnOnce(&mut CommState) -> Step,
    nonblocking: NonblockingCall,
    underneath: impl FnOnce(&SavedCollectives) -> c_int,
) -> c_int {
    // SAFETY: guaranteed by the caller.
    unsafe { enter_state(module, call, Some(nonblocking), underneath) }
}

/// # Safety
/// As `with_state`.
unsafe fn enter_state(
    module: *mut sys::mca_coll_base_module_t,
    call: impl FnOnce(&mut CommState) -> Step,
    nonblocking: Option<NonblockingCall>,
    underneath: impl FnOnce(&SavedCollectives) -> c_int,
) -> c_int {
    let module = module as *mut RdmaModule;
    let token = thread_token();
    // SAFETY: guaranteed by the caller; the lock, the flags, the counts
    // and `saved` are only ever shared, and `saved` lives as long as the
    // module.
    let (entry, failed, saved, agreements) =
        unsafe { (&(*module).entry, &(*module).failed, &*(*module).saved, &(*module).agreements_beside) };
    if entry.held_by_thread(token) {
        if let Some(nonblocking) = nonblocking {
            return queue_or_underneath(nonblocking, saved, agreements, underneath);
        }
        tracing::debug!("a collective nested inside coll rdma's own call (the module underneath called back) goes to the module underneath");
        return underneath(saved);
    }
    if failed.load(Ordering::Acquire) {
        // SAFETY: as above.
        unsafe { (*module).handed_over_after_failure.fetch_add(1, Ordering::Relaxed) };
        return underneath(saved);
    }
    // SAFETY: guaranteed by the caller.
    let mut held = match unsafe { Held::enter_collective(module, token) } {
        Ok(held) => held,
        Err(_) if let Some(nonblocking) = nonblocking.filter(|call| call.agreement) => {
            return queue_or_underneath(nonblocking, saved, agreements, underneath);
        }
        // SAFETY: our module, enabled on `comm`.
        Err(concurrent) => return unsafe { misuse::end_job_for_concurrent_collectives((*module).comm, &concurrent) },
    };
    let state = held.state();
    let step = call(state);
    let state_failed = state.has_failed();
    let has_work = !state_failed && state.has_background_work();
    let falls_back_for_good = !state_failed && state.take_bypass_request();
    let (cid, rank) = (state.shared.id.cid, state.shared.id.rank);
    if state_failed {
        held.mark_failed();
        held.state().abandon_pending();
    }
    held.leave_background_work(has_work);
    drop(held);
    if falls_back_for_good {
        // SAFETY: our module, enabled on `comm`; the state is released and
        // this thread runs the communicator's only call.
        unsafe { bypass::install_underneath((*module).comm, module as *mut sys::mca_coll_base_module_t, saved, cid, rank) };
    }
    match step {
        Step::Done(rc) => rc,
        Step::HandOver(fallback) => fallback(),
    }
}

/// A non-blocking call that cannot hold the state: queued while the
/// communicator's setup is under way, else posted underneath (an agreement
/// counted).
fn queue_or_underneath(
    nonblocking: NonblockingCall,
    saved: &SavedCollectives,
    agreements: &AtomicU64,
    underneath: impl FnOnce(&SavedCollectives) -> c_int,
) -> c_int {
    let NonblockingCall { call, request, agreement } = nonblocking;
    if let Some(rc) = saved.nested_in_setup.queue(call, request) {
        return rc;
    }
    if agreement {
        agreements.fetch_add(1, Ordering::Relaxed);
    }
    tracing::debug!("a {} beside coll rdma's own call on its communicator goes to the module underneath", call.collective().name());
    underneath(saved)
}

/// Lets the progress callback serve the state behind `module` if nobody
/// else is using it (skipping it otherwise: see `entry.rs` for why nothing
/// skipped starves). Returns whether its background work is finished.
///
/// # Safety
/// `module` must be a live, enabled module of ours.
pub(super) unsafe fn progress_state(module: *mut RdmaModule) -> bool {
    // SAFETY: guaranteed by the caller.
    let (entry, failed) = unsafe { (&(*module).entry, &(*module).failed) };
    if !entry.needs_progress() {
        return true;
    }
    // SAFETY: guaranteed by the caller.
    let Some(mut held) = (unsafe { Held::try_enter_progress(module, thread_token()) }) else {
        return false;
    };
    if failed.load(Ordering::Acquire) {
        // Nobody serves a failed state again; its last holder may have
        // unwound without clearing the flag. Cleared holding the state, as
        // every change of it is (`EntryLock::note_background_work`).
        if entry.retire() {
            progress::work_finished();
        }
        return true;
    }
    let state = held.state();
    state.progress_background_work();
    let state_failed = state.has_failed();
    let finished = state_failed || !state.has_background_work();
    if state_failed {
        held.mark_failed();
        held.state().abandon_pending();
    }
    held.leave_background_work(!finished);
    finished
}

/// Loads of the runs' awaited word between two of their advances at
/// most: the advance also runs the transport's progress and the fault
/// timeout's clock, which must not wait long.
const WORD_LOADS_PER_ADVANCE: u32 = 32;

/// Advances of one wait before it watches the awaited word (see
/// `progress_state_until`).
const ADVANCES_BEFORE_WATCHING: u32 = 4;

/// `progress_state` for MPI_Wait on a request of this module's
/// communicator (`own_wait.rs`): up to `passes` passes in one hold of the
/// state, stopping once `done` says so; the entry, the thread token and
/// the work flag are paid once, not at every pass; between advances it
/// polls the word the runs wait for (`CommState::watch_awaited_word`).
/// `advances` counts the wait's advances over its holds: a long wait
/// watches the word from its fifth advance on, not from the fifth of
/// every hold (each hold re-counting made 4 of every 32 passes whole
/// advances, so the spin took about twice as long as a blocking wait's
/// before it yielded the core).
/// Returns false once the
/// state has no work left (or failed), true otherwise (also when another
/// thread holds it: that one serves it).
///
/// # Safety
/// `module` must be a live, enabled module of ours, and stay so until this
/// returns (the caller holds the progress registry).
pub(super) unsafe fn progress_state_until(module: *mut RdmaModule, passes: u32, advances: &mut u32, done: &impl Fn() -> bool) -> bool {
    // SAFETY: guaranteed by the caller.
    let (entry, failed) = unsafe { (&(*module).entry, &(*module).failed) };
    if !entry.needs_progress() || failed.load(Ordering::Acquire) {
        // SAFETY: as above; retires the flag of a failed state.
        return !unsafe { progress_state(module) };
    }
    // SAFETY: guaranteed by the caller.
    let Some(mut held) = (unsafe { Held::try_enter_progress(module, thread_token()) }) else {
        return true;
    };
    let state = held.state();
    let mut finished = false;
    let mut left = passes;
    while left > 0 {
        left -= 1;
        state.progress_background_work();
        if state.has_failed() || !state.has_background_work() {
            finished = true;
            break;
        }
        if done() {
            break;
        }
        *advances += 1;
        // Once the wait has lasted a few advances, the one word the runs
        // wait for, alone, between advances: a load where an advance
        // costs hundreds of instructions. Not before: most waits end
        // within an advance or two, where finding the word costs more
        // than it saves. Each load is one of the passes, as each load of
        // a blocking wait is one of its polls.
        if *advances < ADVANCES_BEFORE_WATCHING {
            std::hint::spin_loop();
            continue;
        }
        match state.watch_awaited_word(left.min(WORD_LOADS_PER_ADVANCE)) {
            0 => std::hint::spin_loop(),
            loads => left -= loads,
        }
    }
    if state.has_failed() {
        held.mark_failed();
        held.state().abandon_pending();
    }
    held.leave_background_work(!finished);
    !finished
}

/// The communicator `module` was enabled on.
///
/// # Safety
/// `module` must be a live module of ours.
pub(super) unsafe fn module_comm(module: *mut RdmaModule) -> *mut sys::ompi_communicator_t {
    // SAFETY: guaranteed by the caller.
    unsafe { (*module).comm }
}

/// Whether the progress callback counts `module` as having work.
///
/// # Safety
/// `module` must be a live module of ours.
pub(super) unsafe fn has_pending_work(module: *mut RdmaModule) -> bool {
    // SAFETY: guaranteed by the caller.
    unsafe { (*module).entry.needs_progress() }
}

/// The state is entered by whichever thread's collective or progress pass
/// holds it (`entry.rs`), so it must be able to move between threads.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<CommState>();
};

#[cfg(test)]
mod tests;
