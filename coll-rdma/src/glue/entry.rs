//! Who may be inside one communicator's state, under any MPI thread level:
//! one collective call of some thread, or one pass of the progress callback
//! of some thread, and nobody else.
//!
//! Invariants:
//! - `word` is `FREE` or names exactly one holder: its thread's token and
//!   whether it is a collective or the progress callback.
//! - A collective waits only behind a progress pass (bounded: one pass of
//!   background work), never behind another thread's collective: two
//!   collectives on one communicator at once is erroneous MPI use, which
//!   `enter_collective` reports instead of waiting (the other one may be
//!   waiting for peers that are themselves in this call: waiting could hang,
//!   going in would corrupt).
//! - The progress callback never waits: `try_enter_progress` skips a held
//!   state. Nothing it skips starves: a collective holding the state runs
//!   that communicator's transport in every wait, and whoever leaves the
//!   state with background work left says so in `needs_progress`, which the
//!   next pass after it leaves reads; a progress pass holding it is serving
//!   that very work.
//! - `needs_progress` changes only while the state is held, so once nobody
//!   holds it, it says whether the last holder left background work: no
//!   holder can clear it after another has set it for work still there.
//!   Each flip reports itself (`WorkChange`), so that a count of states
//!   with work (see `progress.rs`) stays equal to the number of flags set.
//! - Below MPI_THREAD_MULTIPLE (`Threads::OneAtATime`) a load and a store
//!   take the word (`thread_level.rs`): one thread at a time is inside the
//!   library, so the word is only ever found held by a call of that same
//!   thread further up its stack, and the answers are those above.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::thread_level::Threads;

const FREE: u64 = 0;
const COLLECTIVE_BIT: u64 = 1;

/// Tells a nested call of the thread that holds a state from another
/// thread's call.
pub(super) use btl_ibmc::thread_token;

fn word_of(token: u64, collective: bool) -> u64 {
    debug_assert!(token != 0 && token < 1 << 63);
    token << 1 | u64::from(collective)
}

/// Another thread's collective is inside the state (erroneous MPI use).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ConcurrentCollective {
    /// The token of the thread whose collective holds the state.
    pub(super) holder_token: u64,
}

/// What leaving the state did to its `needs_progress` flag.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub(super) enum WorkChange {
    Unchanged,
    /// The flag went up: one more state with background work.
    Added,
    /// The flag went down: one fewer.
    Finished,
}

pub(super) struct EntryLock {
    word: AtomicU64,
    needs_progress: AtomicBool,
    threads: Threads,
}

impl EntryLock {
    pub(super) const fn new(threads: Threads) -> Self {
        EntryLock { word: AtomicU64::new(FREE), needs_progress: AtomicBool::new(false), threads }
    }

    /// Whether the thread with `token` holds the state: a call nested in
    /// its own (through the module underneath), which must not wait for it.
    pub(super) fn held_by_thread(&self, token: u64) -> bool {
        self.word.load(Ordering::Acquire) >> 1 == token
    }

    /// Enters for a collective of the thread with `token`, waiting only
    /// while a progress pass of another thread is inside.
    pub(super) fn enter_collective(&self, token: u64) -> Result<(), ConcurrentCollective> {
        let mine = word_of(token, true);
        loop {
            match self.threads.claim(&self.word, FREE, mine) {
                Ok(()) => return Ok(()),
                Err(held) if held & COLLECTIVE_BIT != 0 => return Err(ConcurrentCollective { holder_token: held >> 1 }),
                Err(_) => std::thread::yield_now(),
            }
        }
    }

    /// Enters for a progress pass of the thread with `token` if nobody is
    /// inside.
    pub(super) fn try_enter_progress(&self, token: u64) -> bool {
        self.threads.claim(&self.word, FREE, word_of(token, false)).is_ok()
    }

    /// Records, while still inside, whether the state has background work.
    #[inline]
    pub(super) fn note_background_work(&self, has_work: bool) -> WorkChange {
        debug_assert!(self.word.load(Ordering::Relaxed) != FREE, "the flag changes only while the state is held");
        // Only holders write the flag (`retire` too), one at a time, so
        // this read is exact and a
        // plain store changes it: a start that leaves a run pending and
        // the wait that finishes it flip the flag each, and a locked swap
        // cost both of them as much as the entry's own compare-exchange.
        if self.needs_progress.load(Ordering::Relaxed) == has_work {
            return WorkChange::Unchanged;
        }
        self.needs_progress.store(has_work, Ordering::Release);
        if has_work { WorkChange::Added } else { WorkChange::Finished }
    }

    /// Whether the last holder left background work (a hint when read
    /// without holding the state).
    pub(super) fn needs_progress(&self) -> bool {
        self.needs_progress.load(Ordering::Acquire)
    }

    /// Clears the flag of a state nobody will serve again (it failed),
    /// held by the caller as every change of the flag is: whether it was
    /// set.
    pub(super) fn retire(&self) -> bool {
        debug_assert!(self.word.load(Ordering::Relaxed) != FREE, "the flag changes only while the state is held");
        self.needs_progress.swap(false, Ordering::AcqRel)
    }

    pub(super) fn leave(&self) {
        self.word.store(FREE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests;
