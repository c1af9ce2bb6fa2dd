//! Blocking-call latency on the in-process fabric, two ranks as threads:
//! allreduce, reduce (root 1) and put-tree bcast (root 1) of 8 B and
//! 64 KiB, through the public blocking calls only, so that the same file
//! measures any revision (the paired before/after comparison of
//! docs/nonblocking.md).
//!
//! cargo run --release -p coll-rdma-core --example schedule_bench

use std::time::Instant;

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::{NoSideProgress, WaitPolicy};
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::bcast::put_tree::{PutTreeBcast, PutTreeConfig};
use coll_rdma_core::collectives::reduce::Reduce;
use coll_rdma_core::patterns::TreeStreamConfig;
use coll_rdma_core::reduction::Reduction;

struct WordSum;

impl Reduction for WordSum {
    fn element_size(&self) -> usize {
        8
    }
    fn is_commutative(&self) -> bool {
        true
    }
    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        for (low, high) in lower.chunks_exact(8).zip(higher.chunks_exact_mut(8)) {
            let sum = u64::from_le_bytes(low.try_into().unwrap()).wrapping_add(u64::from_le_bytes((&*high).try_into().unwrap()));
            high.copy_from_slice(&sum.to_le_bytes());
        }
    }
}

const SIZE: usize = 2;

fn configs() -> (AllreduceConfig, TreeStreamConfig, PutTreeConfig) {
    let policy = WaitPolicy::default();
    let tree = TreeStreamConfig { policy, ..TreeStreamConfig::default() };
    (AllreduceConfig { tree, exchange_max_bytes: 256 }, tree, PutTreeConfig { segment_bytes: 8192, policy })
}

fn offsets() -> (usize, usize, usize) {
    let (allreduce, tree, bcast) = configs();
    let reduce = Allreduce::region_len(SIZE, &allreduce).next_multiple_of(64);
    let put_tree = (reduce + Reduce::region_len(SIZE, &tree)).next_multiple_of(64);
    (reduce, put_tree, (put_tree + PutTreeBcast::region_len(SIZE, &bcast)).next_multiple_of(64))
}

/// Nanoseconds per call of `kind` at `len` bytes on `rank`, over `iterations`.
fn measure(rank: usize, endpoint: &FabricEndpoint, kind: &str, len: usize, iterations: usize) -> f64 {
    let (allreduce_config, tree, bcast_config) = configs();
    let (reduce_offset, bcast_offset, _) = offsets();
    let mut allreduce = Allreduce::new(rank, SIZE, 0, allreduce_config);
    let mut reduce = Reduce::new(rank, SIZE, reduce_offset, tree);
    let mut bcast = PutTreeBcast::new(rank, SIZE, bcast_offset, bcast_config);
    let send = vec![1u8; len];
    let mut recv = vec![0u8; len];
    let mut call = |recv: &mut Vec<u8>| match kind {
        "allreduce" => allreduce.allreduce(endpoint, &NoSideProgress, &WordSum, &send, recv).unwrap(),
        "reduce" => reduce.reduce(endpoint, &NoSideProgress, &WordSum, 1, &send, (rank == 1).then_some(&mut recv[..])).unwrap(),
        _ => bcast.bcast(endpoint, 1, recv).unwrap(),
    };
    for _ in 0..iterations / 10 {
        call(&mut recv);
    }
    let start = Instant::now();
    for _ in 0..iterations {
        call(&mut recv);
    }
    start.elapsed().as_nanos() as f64 / iterations as f64
}

fn main() {
    let (_, _, window_len) = offsets();
    for (kind, len, iterations) in
        [("allreduce", 8, 200_000), ("allreduce", 65536, 5_000), ("reduce", 8, 200_000), ("reduce", 65536, 5_000), ("bcast", 8, 200_000), ("bcast", 65536, 5_000)]
    {
        let endpoints = Fabric::new(SIZE, window_len, FabricConfig::default());
        let times: Vec<f64> = std::thread::scope(|scope| {
            let handles: Vec<_> = endpoints
                .iter()
                .enumerate()
                .map(|(rank, endpoint)| scope.spawn(move || measure(rank, endpoint, kind, len, iterations)))
                .collect();
            handles.into_iter().map(|handle| handle.join().unwrap()).collect()
        });
        let worst = times.iter().cloned().fold(0.0, f64::max);
        println!("{kind} {len} B: {worst:.0} ns/call");
    }
}
