//! Locks that survive a panicking holder: the state behind them (queues,
//! counters, a round-robin cursor) is consistent after every statement, so
//! a panic elsewhere must not turn into a second panic here.

use std::sync::{Mutex, MutexGuard, PoisonError};

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
