//! Open MPI's progress engine drives what coll rdma has left to do between
//! collective calls: a bcast root returns before its receivers acknowledge,
//! so ACKs, NACKs and retransmissions are served from inside whatever MPI
//! call the rank makes next. The callback is registered only once some
//! communicator has such work, and then costs two atomic loads while none
//! has. A communicator whose bcast runs over datagram multicast counts as
//! having work until it is freed (a co-root may still forward into this
//! rank's reliable channel; see `Bcast::needs_side_progress`).
//! Non-blocking barriers under way count as work too: the callback advances
//! them and completes their requests (`comm_state/pending.rs`), and so do
//! requests of ours that follow one of the module underneath (`wrapped.rs`).
//!
//! Under MPI_THREAD_MULTIPLE any thread may run the callback, several at
//! once. It never waits: a pass that finds the registry locked (another
//! thread's pass, or a module being registered or freed) returns, and a
//! module whose state is held is skipped (`entry.rs`). Neither starves
//! anything: the pass holding the registry serves every module in it, and
//! a held state is either being served by that other pass or inside a
//! collective, whose waits run that communicator's transport and which
//! leaves the state's `needs_progress` set if work remains, so the first
//! pass after it takes it up.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ompi_sys as sys;

use super::ffi_guard::guarded;
use super::thread_level;
use super::wrapped;
use super::module::{has_pending_work, module_comm, progress_state, progress_state_until, RdmaModule};

struct ModulePtr(*mut RdmaModule);

// SAFETY: the pointer is only dereferenced under the registry lock, which
// the destructor also takes before the module is freed.
unsafe impl Send for ModulePtr {}

/// The enabled modules, by their communicator's address: MPI_Wait finds
/// its request's communicator here at every wait, so the lookup must not
/// grow with the number of communicators (a linear search cost 2.5
/// instructions per module on each wait).
static MODULES: Mutex<BTreeMap<usize, ModulePtr>> = Mutex::new(BTreeMap::new());
static MODULES_WITH_WORK: AtomicUsize = AtomicUsize::new(0);
/// Whether the callback is in Open MPI's progress list now: component close
/// takes it out, and the next initialisation in the process (MPI sessions)
/// registers it again when work appears.
static REGISTERED_WITH_OPAL: AtomicBool = AtomicBool::new(false);

fn registry() -> std::sync::MutexGuard<'static, BTreeMap<usize, ModulePtr>> {
    MODULES.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Makes `module`, enabled on its communicator, reachable from the
/// progress callback.
pub(super) fn register(module: *mut RdmaModule) {
    // SAFETY: an enabled module of ours: its communicator is set.
    let comm = unsafe { module_comm(module) } as usize;
    registry().insert(comm, ModulePtr(module));
}

/// Registers the callback with Open MPI the first time a module has work
/// left or a request of ours waits for one underneath (`wrapped.rs`), so
/// that jobs that never leave any (shared memory has none) keep Open MPI's
/// progress loop free of our call.
pub(super) fn ensure_registered() {
    // A load first: every non-blocking call that goes on pending gets here,
    // and a read-modify-write would cost each of them a locked instruction.
    if REGISTERED_WITH_OPAL.load(Ordering::Acquire) || REGISTERED_WITH_OPAL.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: a plain C callback with the signature opal expects; it
    // stays valid as long as this library is loaded, and component
    // close unregisters it.
    let rc = unsafe { sys::opal_progress_register(Some(progress_callback)) };
    if rc != sys::OPAL_SUCCESS as c_int {
        tracing::warn!("could not register with Open MPI's progress engine (error {rc}); bcast acknowledgements are served only inside coll rdma calls");
    }
}

/// Takes `module` out of the callback's reach; after this returns the
/// callback no longer touches it.
pub(super) fn unregister(module: *mut RdmaModule) {
    // SAFETY: still alive: its destructor is the caller (a module never
    // enabled has no communicator, and is not registered).
    let comm = unsafe { module_comm(module) } as usize;
    let mut modules = registry();
    if modules.get(&comm).is_some_and(|registered| registered.0 == module) {
        modules.remove(&comm);
        // SAFETY: still alive: its destructor is the caller.
        if unsafe { has_pending_work(module) } {
            thread_level::current().decrement(&MODULES_WITH_WORK);
        }
    }
}

pub(super) fn work_added() {
    ensure_registered();
    thread_level::current().increment(&MODULES_WITH_WORK);
}

pub(super) fn work_finished() {
    thread_level::current().decrement(&MODULES_WITH_WORK);
}

/// Stops Open MPI from calling us, at component close.
pub(super) fn unregister_from_opal() {
    if REGISTERED_WITH_OPAL.swap(false, Ordering::AcqRel) {
        // SAFETY: the callback was registered in `ensure_registered`.
        unsafe { sys::opal_progress_unregister(Some(progress_callback)) };
    }
}

unsafe extern "C" fn progress_callback() -> c_int {
    if MODULES_WITH_WORK.load(Ordering::Acquire) == 0 && !wrapped::any_pending() {
        return 0;
    }
    guarded("progress callback", 0, || {
        serve_modules_once();
        wrapped::complete_finished();
        // Completed requests (non-blocking barriers) are not reported as
        // events: that would stop an oversubscribed rank's progress loop
        // from yielding its core to the rank it is waiting for.
        0
    })
}

/// One pass over every module with work (the callback's); false once none
/// has any.
fn serve_modules_once() -> bool {
    if MODULES_WITH_WORK.load(Ordering::Acquire) == 0 {
        return false;
    }
    // Never wait for the registry: a destructor on another thread may
    // hold it, and progress must not block.
    let Ok(modules) = MODULES.try_lock() else { return true };
    for module in modules.values() {
        // SAFETY: registered modules are alive while the lock is held.
        unsafe { progress_state(module.0) };
    }
    true
}

/// Passes per hold of the registry in `serve_communicator_until`: another
/// thread's progress pass that finds the registry held skips its turn, so
/// holds stay short.
const PASSES_PER_HOLD: u32 = 32;

/// Up to `passes` passes over the runs of `comm` alone, until `done` says
/// so: MPI_Wait on a request of ours (`own_wait.rs`). The registry and
/// the communicator's state are entered once per `PASSES_PER_HOLD` passes,
/// not at every pass as `serve_modules_once` does for the whole registry:
/// the locks, the thread token and the work flag cost a waiting rank's
/// poll more than the run's own look at its flags. Other communicators
/// wait for Open MPI's loop meanwhile, which is why callers bound
/// `passes`.
pub(super) fn serve_communicator_until(comm: *mut sys::ompi_communicator_t, passes: u32, done: impl Fn() -> bool) {
    let mut left = passes;
    let mut advances = 0;
    while left > 0 && !done() {
        let hold = left.min(PASSES_PER_HOLD);
        left -= hold;
        if MODULES_WITH_WORK.load(Ordering::Acquire) == 0 {
            return;
        }
        // Never wait for the registry (see `serve_modules_once`).
        let Ok(modules) = MODULES.try_lock() else {
            std::hint::spin_loop();
            continue;
        };
        let Some(module) = modules.get(&(comm as usize)) else { return };
        // SAFETY: registered modules are alive while the lock is held,
        // and it is held until this returns.
        if !unsafe { progress_state_until(module.0, hold, &mut advances, &done) } {
            return;
        }
    }
}
