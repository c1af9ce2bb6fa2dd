//! A number per thread, for locks that must tell their holder's own
//! nested call from another thread's (the udp record turn, coll rdma's
//! communicator entry).
//!
//! Invariant: never 0, below 2^63, and distinct for every thread the
//! process has started (numbers are not reused).

use std::sync::atomic::{AtomicU64, Ordering};

/// This thread's number.
pub fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN.with(|token| *token)
}
