//! What a rank does for the rest of the process while one of its waits
//! yields. A collective blocked on one communicator can be what another
//! communicator's peer is waiting for: over verbs, a root's send stalls
//! until its receiver reposts receive buffers, which that receiver does only
//! when something progresses that communicator. The embedding library (the
//! Open MPI glue) installs a hook that runs its progress engine; every
//! yielding wait calls it, so work on other communicators goes on.

use std::cell::Cell;
use std::sync::OnceLock;

static HOOK: OnceLock<fn()> = OnceLock::new();

/// Yielding polls between two runs of the hook: a progress engine pass
/// costs far more than a poll, and an oversubscribed rank polls (and
/// yields) constantly, so running it every time would slow every wait
/// down; another communicator's peer can afford to wait a few polls.
pub const POLLS_PER_HOOK: u32 = 1024;

thread_local! {
    /// The hook may end up in another wait (progress serving a
    /// communicator runs its transport): one level is enough.
    static RUNNING: Cell<bool> = const { Cell::new(false) };
    static POLLS: Cell<u32> = const { Cell::new(0) };
}

/// Installs the hook once per process; later calls are ignored.
pub fn set_idle_hook(hook: fn()) {
    let _ = HOOK.set(hook);
}

/// Called at every yielding poll: runs the hook every `POLLS_PER_HOOK`-th
/// time, unless none is installed or this thread is inside it already.
#[inline]
pub fn run_idle_hook() {
    if HOOK.get().is_none() {
        return;
    }
    let due = POLLS.with(|polls| {
        let next = polls.get().wrapping_add(1);
        polls.set(next);
        next % POLLS_PER_HOOK == 0
    });
    if due {
        run_idle_hook_now();
    }
}

/// Runs the hook now, unless none is installed or this thread is inside
/// it already: for a wait that slept through a quiet spell, where
/// counting polls would leave the rest of the process unserved for long.
#[inline]
pub(crate) fn run_idle_hook_now() {
    let Some(hook) = HOOK.get() else { return };
    RUNNING.with(|running| {
        if running.replace(true) {
            return;
        }
        hook();
        running.set(false);
    });
}

/// One yielding poll: serves the rest of the process when the hook is due,
/// then gives the core away for a moment.
#[inline]
pub(crate) fn yield_core() {
    run_idle_hook();
    std::thread::yield_now();
}

/// Test support: the process's hook runs, on each thread, what that
/// thread set here (tests of one binary share the one process-wide hook,
/// each with its own per-thread action).
#[cfg(test)]
pub(crate) mod per_thread {
    use std::cell::RefCell;

    thread_local! {
        static ACTION: RefCell<Option<Box<dyn FnMut()>>> = RefCell::new(None);
    }

    fn run_this_threads_action() {
        // Taken out while it runs: an action that waits may poll again.
        let Some(mut action) = ACTION.with(|slot| slot.borrow_mut().take()) else { return };
        action();
        ACTION.with(|slot| {
            slot.borrow_mut().get_or_insert(action);
        });
    }

    /// Makes `action` this thread's idle hook until `body` returns.
    pub(crate) fn with_idle_action<R>(action: impl FnMut() + 'static, body: impl FnOnce() -> R) -> R {
        super::set_idle_hook(run_this_threads_action);
        assert!(
            std::ptr::fn_addr_eq(*super::HOOK.get().expect("a hook"), run_this_threads_action as fn()),
            "another idle hook was installed in this test binary"
        );
        ACTION.with(|slot| *slot.borrow_mut() = Some(Box::new(action)));
        let result = body();
        ACTION.with(|slot| *slot.borrow_mut() = None);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_hook_runs_every_so_many_polls_and_never_reenters_itself() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let action = move || {
            counted.fetch_add(1, Ordering::SeqCst);
            run_idle_hook();
        };
        per_thread::with_idle_action(action, || {
            for _ in 0..POLLS_PER_HOOK * 3 {
                run_idle_hook();
            }
        });
        // The re-entrant calls inside the hook count as polls but never run it.
        let calls = calls.load(Ordering::SeqCst);
        assert!((2..=3).contains(&calls), "{calls} runs for {} polls", POLLS_PER_HOOK * 3);
    }
}
