//! A number per thread, for locks that must tell their holder's own
//! nested call from another thread's (the udp record turn, coll rdma's
//! communicator entry).
//!
//! Invariant: never 0, below 2^63, and distinct for every thread the
//! process has started (numbers are not reused).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    /// 0 until the thread first asks. A constant initialiser, so that the
    /// every-call read is one thread-local load, without the lazy
    /// initialisation's state check (each blocking collective asks).
    static TOKEN: Cell<u64> = const { Cell::new(0) };
}

/// This thread's number.
#[inline]
pub fn thread_token() -> u64 {
    let token = TOKEN.get();
    if token != 0 { token } else { first_token() }
}

#[cold]
#[inline(never)]
fn first_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let token = NEXT.fetch_add(1, Ordering::Relaxed);
    TOKEN.set(token);
    token
}
