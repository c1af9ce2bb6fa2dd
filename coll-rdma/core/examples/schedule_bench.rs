//! The cost of the blocking calls' own code on one core: allreduce,
//! reduce (root 1) and put-tree bcast (root 1) of 8 B and 64 KiB, as rank
//! 0 and as rank 1 of two, over a transport whose every flag and credit has
//! already arrived (puts and reads still copy the bytes). No peer runs, so
//! the machine's load does not decide when a flag shows up: what is left is
//! the per-call work of the collective's code (time on a core, from
//! /proc/thread-self/schedstat, not wall time), which is what a change of
//! its structure (the blocking call as a resumable run driven to its end)
//! could make slower. Only the public blocking calls are used, so the same
//! file measures any revision: build it on each and run them alternately
//! (docs/nonblocking.md, "Schedules").
//!
//! cargo run --release -p coll-rdma-core --example schedule_bench [rounds]

use std::cell::RefCell;
use std::hint::black_box;
use std::time::Instant;

use btl_ibmc::{Endpoint, NoSideProgress, PeerReads, TransportError, WaitPolicy, Windows};
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::bcast::put_tree::{PutTreeBcast, PutTreeConfig};
use coll_rdma_core::collectives::reduce::Reduce;
use coll_rdma_core::patterns::TreeStreamConfig;

#[path = "../tests/common/mod.rs"]
mod common;
use common::WordSum;

/// Every flag reads as arrived (below the bit that marks an abandoned
/// segment); puts land in, and reads come from, one local buffer.
struct ReadyWindows {
    rank: usize,
    window: RefCell<Vec<u8>>,
}

impl Endpoint for ReadyWindows {
    fn name(&self) -> &'static str {
        "ready windows"
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        SIZE
    }
    fn progress(&self) {}
}

impl Windows for ReadyWindows {
    fn window_len(&self) -> usize {
        self.window.borrow().len()
    }
    fn put(&self, _peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), TransportError> {
        let mut window = self.window.borrow_mut();
        window[offset..offset + data.len()].copy_from_slice(data);
        window[flag_offset..flag_offset + 8].copy_from_slice(&flag.to_le_bytes());
        Ok(())
    }
    fn put_flag(&self, _peer: usize, flag_offset: usize, value: u64) -> Result<(), TransportError> {
        self.window.borrow_mut()[flag_offset..flag_offset + 8].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }
    fn local_flag(&self, _flag_offset: usize) -> u64 {
        u64::MAX >> 2
    }
    fn set_local_flag(&self, _flag_offset: usize, _value: u64) {}
    fn read_local(&self, offset: usize, out: &mut [u8]) {
        out.copy_from_slice(&self.window.borrow()[offset..offset + out.len()]);
    }
}

impl PeerReads for ReadyWindows {}

const SIZE: usize = 2;

fn configs() -> (AllreduceConfig, TreeStreamConfig, PutTreeConfig) {
    let policy = WaitPolicy::default();
    let tree = TreeStreamConfig { policy, ..TreeStreamConfig::default() };
    (AllreduceConfig { tree, exchange_max_bytes: 256 }, tree, PutTreeConfig { segment_bytes: 8192, policy })
}

/// Nanoseconds per call of `kind` at `len` bytes as `rank`.
fn measure(rank: usize, kind: &str, len: usize, iterations: usize) -> f64 {
    let (allreduce_config, tree, bcast_config) = configs();
    let reduce_offset = Allreduce::region_len(SIZE, &allreduce_config).next_multiple_of(64);
    let bcast_offset = (reduce_offset + Reduce::region_len(SIZE, &tree)).next_multiple_of(64);
    let window_len = bcast_offset + PutTreeBcast::region_len(SIZE, &bcast_config);
    let transport = ReadyWindows { rank, window: RefCell::new(vec![0; window_len]) };
    let mut allreduce = Allreduce::new(rank, SIZE, 0, allreduce_config);
    let mut reduce = Reduce::new(rank, SIZE, reduce_offset, tree);
    let mut bcast = PutTreeBcast::new(rank, SIZE, bcast_offset, bcast_config);
    let send = vec![1u8; len];
    let mut recv = vec![0u8; len];
    let mut call = |recv: &mut Vec<u8>| match kind {
        "allreduce" => allreduce.allreduce(&transport, &NoSideProgress, &WordSum, &send, recv).unwrap(),
        "reduce" => reduce.reduce(&transport, &NoSideProgress, &WordSum, 1, &send, (rank == 1).then_some(&mut recv[..])).unwrap(),
        _ => bcast.bcast(&transport, 1, recv).unwrap(),
    };
    for _ in 0..iterations / 10 {
        call(&mut recv);
    }
    let start = on_cpu_ns();
    for _ in 0..iterations {
        call(black_box(&mut recv));
    }
    (on_cpu_ns() - start) as f64 / iterations as f64
}

/// Nanoseconds this thread has spent on a core (the kernel's schedstat),
/// so that time spent preempted by the machine's other work is not
/// counted; falls back to wall time where the file is missing.
fn on_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|line| line.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| EPOCH.with(|epoch| epoch.elapsed().as_nanos() as u64))
}

thread_local! {
    static EPOCH: Instant = Instant::now();
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|arg| arg.parse().ok()).unwrap_or(1);
    for _ in 0..rounds {
        for (kind, len, iterations) in
            [("allreduce", 8, 2_000_000), ("allreduce", 65536, 5_000), ("reduce", 8, 2_000_000), ("reduce", 65536, 5_000), ("bcast", 8, 2_000_000), ("bcast", 65536, 5_000)]
        {
            let per_rank: Vec<f64> = (0..SIZE).map(|rank| measure(rank, kind, len, iterations)).collect();
            println!("{kind} {len} B: rank 0 {:.1} ns/call, rank 1 {:.1} ns/call", per_rank[0], per_rank[1]);
        }
    }
}
