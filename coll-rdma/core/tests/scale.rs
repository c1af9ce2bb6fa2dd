//! The scale tests: every collective at 64, 256 and 1024 ranks as threads
//! on the in-process fabric, flat (`scale_fabric`) and in node groups over
//! shared-memory rings (`scale_hybrid_fabric`). A binary apart from the
//! other fabric tests (`fabric.rs`), so that a thousand rank threads never
//! run beside them in one process and stretch their deadlines; and within
//! it, the large runs take turns ([`one_large_run_at_a_time`]).
//!
//! `make test-scale` runs this binary alone; `make soak` its long runs.

use std::sync::{Mutex, MutexGuard, PoisonError};

mod common;

mod scale_fabric;
mod scale_hybrid_fabric;

/// Each run of 64 ranks and more already has more threads than cores: two
/// at once would only slow both toward their deadlines (and 2,048 threads
/// of 1024-rank runs side by side strain memory), so they take turns,
/// whichever file they are in. A run that panicked leaves the lock
/// poisoned, which the next one ignores: its own result stands alone.
pub fn one_large_run_at_a_time() -> MutexGuard<'static, ()> {
    static LARGE_RUN: Mutex<()> = Mutex::new(());
    LARGE_RUN.lock().unwrap_or_else(PoisonError::into_inner)
}
