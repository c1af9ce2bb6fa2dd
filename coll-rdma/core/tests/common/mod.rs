//! What the fabric tests share: a reproducible generator, the wait
//! policy for more threads than cores, a word-sum reduction and the kinds
//! of reduction call the scripts play.

#![allow(dead_code)] // each test binary uses its own subset

use std::time::Duration;

use btl_ibmc::WaitPolicy;
use coll_rdma_core::reduction::Reduction;

/// Small deterministic generator so that a failure names a reproducible seed.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform enough in 0..bound for test schedules.
    pub fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    /// Makes this rank arrive late now and then, by varying amounts: a
    /// sleep of up to 200 us one time in 16, a yield three times in 16.
    #[allow(dead_code)] // not every test binary that shares this module skews
    pub fn skew_arrival(&mut self) {
        match self.next() % 16 {
            0 => std::thread::sleep(std::time::Duration::from_micros(self.next() % 200)),
            1..=3 => std::thread::yield_now(),
            _ => {}
        }
    }
}

/// Ranks are threads, usually more than cores: spin briefly, then yield.
pub fn yielding_policy(spin_polls: u32) -> WaitPolicy {
    WaitPolicy { spin_polls, kernel_spin_polls: spin_polls, stall_warning: Duration::from_secs(30), fault_timeout: None }
}
/// Counts, per barrier, how many ranks have entered it; a rank that leaves
/// barrier k early sees fewer than `size` entries.
pub struct EntryLedger {
    entered: Vec<std::sync::atomic::AtomicUsize>,
    violation: std::sync::atomic::AtomicBool,
}

impl EntryLedger {
    pub fn new(barriers: usize) -> Self {
        use std::sync::atomic::{AtomicBool, AtomicUsize};
        EntryLedger { entered: (0..barriers).map(|_| AtomicUsize::new(0)).collect(), violation: AtomicBool::new(false) }
    }

    pub fn enter(&self, k: usize) {
        self.entered[k].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn check_leave(&self, k: usize, size: usize) -> Result<(), String> {
        let seen = self.entered[k].load(std::sync::atomic::Ordering::SeqCst);
        if seen == size {
            Ok(())
        } else {
            self.violation.store(true, std::sync::atomic::Ordering::SeqCst);
            Err(format!("left barrier {k} when only {seen} of {size} ranks had entered it"))
        }
    }

    /// Whether some rank already left a barrier early.
    pub fn violated(&self) -> bool {
        self.violation.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A little-endian u64 from 8 bytes.
pub fn word(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().expect("8 bytes"))
}

/// Sum of u64 words, wrapping: exact whatever the order of combination.
pub struct WordSum;

impl Reduction for WordSum {
    fn element_size(&self) -> usize {
        8
    }
    fn is_commutative(&self) -> bool {
        true
    }
    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        for (low, high) in lower.chunks_exact(8).zip(higher.chunks_exact_mut(8)) {
            let sum = word(low).wrapping_add(word(high));
            high.copy_from_slice(&sum.to_le_bytes());
        }
    }
}

pub mod bcast_script;
pub mod buffers;
pub mod in_turn;
pub mod matrix;
pub mod nodes;
pub mod turns;
pub mod watchdog;

/// A reduction call as the fabric tests' scripts play it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReductionKind {
    Allreduce,
    Reduce { root: usize },
}

/// The calls of one length at position `step` of a script: an allreduce
/// in place and one not (which comes first alternates with `step`), and a
/// reduce from every root, in place at alternate roots.
pub fn every_root_calls(size: usize, step: usize) -> Vec<(ReductionKind, bool)> {
    let mut calls = vec![(ReductionKind::Allreduce, step % 2 == 0), (ReductionKind::Allreduce, step % 2 == 1)];
    calls.extend((0..size).map(|root| (ReductionKind::Reduce { root }, (root + step) % 2 == 0)));
    calls
}
