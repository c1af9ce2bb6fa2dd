//! The scripts of the bcast runs' fabric tests (`bcast_run_fabric`,
//! `multicast_run_fabric`): non-blocking bcasts, non-blocking allreduces
//! and blocking bcasts, each rank's bytes generated from the call's index
//! (never sent), and the results every rank must end with.

use std::time::Duration;

use btl_ibmc::WaitPolicy;
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::bcast::{Bcast, BcastConfig};
use coll_rdma_core::patterns::TreeStreamConfig;

use super::word;
use super::XorShift;

/// Ranks are threads on a couple of cores: spin little. Bounded: a run or
/// wait stuck this long fails instead of hanging.
pub fn policy() -> WaitPolicy {
    WaitPolicy { fault_timeout: Some(Duration::from_secs(60)), ..super::yielding_policy(20) }
}

/// The allreduce the scripts' `Iallreduce` calls run.
pub fn allreduce_config() -> AllreduceConfig {
    AllreduceConfig { tree: TreeStreamConfig { degree: 2, segment_bytes: 256, policy: policy(), room_for_two_levels: false }, exchange_max_bytes: 64 }
}

/// The bcast region first, the allreduce's after it.
pub fn allreduce_offset(size: usize, bcast: &BcastConfig) -> usize {
    Bcast::region_len(size, bcast).next_multiple_of(64)
}

pub fn window_len(size: usize, bcast: &BcastConfig) -> usize {
    (allreduce_offset(size, bcast) + Allreduce::region_len(size, &allreduce_config())).next_multiple_of(64)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ibcast { root: usize },
    Iallreduce,
    /// The blocking call, after the queue is finished.
    Bcast { root: usize },
}

#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub kind: Kind,
    /// Bytes (a multiple of 8 for the allreduce's words).
    pub len: usize,
}

/// Rank `rank`'s bytes for call `index`: a bcast root's message, or an
/// allreduce input.
pub fn input(index: usize, rank: usize, len: usize) -> Vec<u8> {
    let mut rng = XorShift::new(((index as u64) << 20) ^ rank as u64 ^ 0xB0CA);
    (0..len).map(|_| rng.next() as u8).collect()
}

/// What every rank's buffer holds after call `index`: the root's bytes,
/// or the wrapping sum of every rank's input words, computed serially.
pub fn expected(index: usize, size: usize, call: &Call) -> Vec<u8> {
    match call.kind {
        Kind::Ibcast { root } | Kind::Bcast { root } => input(index, root, call.len),
        Kind::Iallreduce => {
            let mut sum = vec![0u64; call.len / 8];
            for rank in 0..size {
                for (total, chunk) in sum.iter_mut().zip(input(index, rank, call.len).chunks_exact(8)) {
                    *total = total.wrapping_add(word(chunk));
                }
            }
            sum.iter().flat_map(|value| value.to_le_bytes()).collect()
        }
    }
}

/// Rank `rank`'s inputs, and its buffer for each call before it runs: a
/// bcast root's holds its message, every other rank's a filler the result
/// must overwrite.
pub fn initial_buffers(rank: usize, script: &[Call]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let sends = script.iter().enumerate().map(|(index, call)| input(index, rank, call.len)).collect();
    let buffers = script
        .iter()
        .enumerate()
        .map(|(index, call)| match call.kind {
            Kind::Ibcast { root } | Kind::Bcast { root } if root == rank => input(index, rank, call.len),
            _ => vec![0xEE; call.len],
        })
        .collect();
    (sends, buffers)
}
