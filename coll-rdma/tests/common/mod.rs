//! What the fabric tests share: a reproducible generator and the wait
//! policy for more threads than cores.

#![allow(dead_code)] // each test binary uses its own subset

use std::time::Duration;

use btl_ibmc::WaitPolicy;

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
}

/// Ranks are threads, usually more than cores: spin briefly, then yield.
pub fn yielding_policy(spin_polls: u32) -> WaitPolicy {
    WaitPolicy { spin_polls, stall_warning: Duration::from_secs(30), fault_timeout: None }
}
pub mod watchdog;
