//! Whether another thread may be inside coll rdma at the same moment as
//! this one. Only where the job asked for MPI_THREAD_MULTIPLE, or Open MPI
//! runs progress threads: below that level MPI lets one thread into the
//! library at a time (FUNNELED, SERIALIZED: the application orders its
//! threads' calls, and with them their memory). There the words that
//! guard shared state (a communicator state's entry, the request pool, the
//! count of states with work) need no read-modify-write: a load and a
//! store do. A locked instruction waits for every store before it, and a
//! non-blocking post's put is a store to a line another core holds, so
//! each one after a put cost the post that line's transfer
//! (docs/nonblocking.md, "What is left of a batch"). Open MPI makes the
//! same choice for its own counters and locks (`opal_using_threads`).
//!
//! Invariants:
//! - the level is set by the component's init query, before any module of
//!   that open exists, and read when a module is made, which keeps it;
//!   until the first init query it is `Concurrent`, the level that is
//!   right for any caller;
//! - under `OneAtATime` every guarded word is changed by one thread at a
//!   time, so a load followed by a store is exact; a claim that finds the
//!   word taken is a nested call of the same thread, and gets the same
//!   answer as under `Concurrent`.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Threads {
    /// Below MPI_THREAD_MULTIPLE, without progress threads.
    OneAtATime,
    /// Any thread may be inside at any moment.
    Concurrent,
}

static CONCURRENT: AtomicBool = AtomicBool::new(true);

/// Sets the level of this open (its init query).
pub(super) fn set(threads: Threads) {
    CONCURRENT.store(threads == Threads::Concurrent, Ordering::Relaxed);
}

/// The level of this open.
pub(super) fn current() -> Threads {
    if CONCURRENT.load(Ordering::Relaxed) { Threads::Concurrent } else { Threads::OneAtATime }
}

impl Threads {
    /// Turns `word` from `free` into `mine`, acquiring what its last
    /// owner released; the value found instead, if it was not `free`.
    #[inline]
    pub(super) fn claim(self, word: &AtomicU64, free: u64, mine: u64) -> Result<(), u64> {
        match self {
            Threads::Concurrent => word.compare_exchange(free, mine, Ordering::Acquire, Ordering::Relaxed).map(drop),
            Threads::OneAtATime => match word.load(Ordering::Acquire) {
                found if found == free => {
                    word.store(mine, Ordering::Relaxed);
                    Ok(())
                }
                found => Err(found),
            },
        }
    }

    /// Counts one more.
    #[inline]
    pub(super) fn increment(self, counter: &AtomicUsize) {
        match self {
            Threads::Concurrent => {
                counter.fetch_add(1, Ordering::AcqRel);
            }
            Threads::OneAtATime => counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Release),
        }
    }

    /// Counts one fewer.
    #[inline]
    pub(super) fn decrement(self, counter: &AtomicUsize) {
        match self {
            Threads::Concurrent => {
                counter.fetch_sub(1, Ordering::AcqRel);
            }
            Threads::OneAtATime => counter.store(counter.load(Ordering::Relaxed) - 1, Ordering::Release),
        }
    }
}

/// A value that one thread at a time may use, for a cache that can do
/// without it: `try_lock` never waits, and a caller that finds it taken
/// (another thread's use, or its own further up the stack) goes around it.
pub(super) struct TryLock<T> {
    held: AtomicU64,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and `held` lets one
// guard exist at a time (see `try_lock`); the value moves between threads
// with the guard's release and the next claim's acquire.
unsafe impl<T: Send> Sync for TryLock<T> {}

const FREE: u64 = 0;
const HELD: u64 = 1;

impl<T> TryLock<T> {
    pub(super) const fn new(value: T) -> Self {
        TryLock { held: AtomicU64::new(FREE), value: UnsafeCell::new(value) }
    }

    /// The value, unless someone uses it now.
    pub(super) fn try_lock(&self) -> Option<TryLockGuard<'_, T>> {
        self.try_lock_as(current())
    }

    fn try_lock_as(&self, threads: Threads) -> Option<TryLockGuard<'_, T>> {
        threads.claim(&self.held, FREE, HELD).ok().map(|()| TryLockGuard { lock: self })
    }
}

pub(super) struct TryLockGuard<'a, T> {
    lock: &'a TryLock<T>,
}

impl<T> std::ops::Deref for TryLockGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (`TryLock`'s invariant).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for TryLockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this borrow unique.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for TryLockGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.held.store(FREE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests;
