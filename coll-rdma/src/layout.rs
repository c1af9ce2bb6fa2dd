//! Where each collective's region sits in a communicator's window. Every
//! rank computes the same layout from the same inputs, so offsets never
//! need to be exchanged.

use crate::barrier::DisseminationBarrier;

/// Regions are page-aligned so that later regions can be registered or
/// mapped on their own.
const REGION_ALIGN: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowLayout {
    pub barrier_offset: usize,
    pub window_len: usize,
}

impl WindowLayout {
    pub fn new(size: usize, barrier_radix: usize) -> Self {
        let barrier_offset = 0;
        let barrier_len = DisseminationBarrier::region_len(size, barrier_radix);
        let window_len = (barrier_offset + barrier_len).div_ceil(REGION_ALIGN).max(1) * REGION_ALIGN;
        WindowLayout { barrier_offset, window_len }
    }
}
