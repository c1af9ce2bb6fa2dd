//! A short reduction run keeps its scratch on the stack: a run is made at
//! every MPI_Ireduce and MPI_Iallreduce post, and a buffer of its own was
//! an allocation and a free per call (`patterns::transient_scratch`).
//! Two ranks over the in-process fabric, both on this thread, advanced
//! in turn until done; results against sums computed here, and the heap
//! scratch each run held at its end: none up to 256-byte segments on
//! either rank of a reduce (rank 0 of a reduce to 0 folds into its
//! result) or of an allreduce (exchange and tree), some for longer
//! segments, as before, but none at a reduce's leaf at any length (it
//! sends its own part from its send buffer).

use std::time::Duration;

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::WaitPolicy;
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::large_reduction::parallel_run::OrParallel;
use coll_rdma_core::collectives::reduce::Reduce;
use coll_rdma_core::patterns::TreeStreamConfig;

use crate::common::in_turn::advance_in_turn;
use crate::common::{self, WordSum};

const SIZE: usize = 2;

fn tree_config(segment_bytes: usize) -> TreeStreamConfig {
    let policy = WaitPolicy { fault_timeout: Some(Duration::from_secs(30)), ..common::yielding_policy(20) };
    TreeStreamConfig { degree: 2, segment_bytes, policy, room_for_two_levels: false }
}

fn endpoints(window_len: usize) -> Vec<FabricEndpoint> {
    Fabric::new(SIZE, window_len, FabricConfig::default())
}

/// Rank `rank`'s input: `words` 8-byte words.
fn input(rank: usize, words: usize) -> Vec<u8> {
    (0..words).flat_map(|i| (1000 * rank as u64 + i as u64 + 1).to_le_bytes()).collect()
}

fn expected_sum(words: usize) -> Vec<u8> {
    (0..words).flat_map(|i| (0..SIZE).map(|rank| 1000 * rank as u64 + i as u64 + 1).sum::<u64>().to_le_bytes()).collect()
}

/// A reduce to rank 0 of `words` words in segments of `segment_bytes`:
/// each rank's heap scratch at the end.
fn reduce_scratch(words: usize, segment_bytes: usize) -> Vec<usize> {
    let config = tree_config(segment_bytes);
    let mut transports = endpoints(Reduce::region_len(SIZE, &config));
    let mut reduces: Vec<Reduce> = (0..SIZE).map(|rank| Reduce::new(rank, SIZE, 0, config)).collect();
    let inputs: Vec<Vec<u8>> = (0..SIZE).map(|rank| input(rank, words)).collect();
    let mut result = vec![0u8; words * 8];
    let mut runs = Vec::new();
    let mut result_at_root = Some(&mut result[..]);
    for rank in 0..SIZE {
        let recv = if rank == 0 { result_at_root.take() } else { None };
        match reduces[rank].start(&transports[rank], WordSum, 0, &inputs[rank], recv).expect("the reduce starts") {
            OrParallel::Window(run) => runs.push(run),
            OrParallel::Parallel(_) => panic!("the fabric has no cross-memory reads: the tree serves"),
        }
    }
    advance_in_turn(&mut runs, &mut transports);
    let scratch = runs.iter().map(|run| run.heap_scratch_bytes()).collect();
    drop(runs);
    assert_eq!(result, expected_sum(words), "reduce of {words} words");
    scratch
}

/// An allreduce of `words` words (exchange up to `exchange_max_bytes`):
/// each rank's heap scratch at the end.
fn allreduce_scratch(words: usize, exchange_max_bytes: usize, segment_bytes: usize) -> Vec<usize> {
    let config = AllreduceConfig { tree: tree_config(segment_bytes), exchange_max_bytes };
    let mut transports = endpoints(Allreduce::region_len(SIZE, &config));
    let mut allreduces: Vec<Allreduce> = (0..SIZE).map(|rank| Allreduce::new(rank, SIZE, 0, config)).collect();
    let inputs: Vec<Vec<u8>> = (0..SIZE).map(|rank| input(rank, words)).collect();
    let mut results: Vec<Vec<u8>> = (0..SIZE).map(|_| vec![0u8; words * 8]).collect();
    let mut runs = Vec::new();
    for ((allreduce, (transport, send)), recv) in allreduces.iter_mut().zip(transports.iter().zip(&inputs)).zip(results.iter_mut()) {
        match allreduce.start(transport, WordSum, send, recv).expect("the allreduce starts") {
            OrParallel::Window(run) => runs.push(run),
            OrParallel::Parallel(_) => panic!("the fabric has no cross-memory reads: the window serves"),
        }
    }
    advance_in_turn(&mut runs, &mut transports);
    let scratch = runs.iter().map(|run| run.heap_scratch_bytes()).collect();
    drop(runs);
    for result in &results {
        assert_eq!(*result, expected_sum(words), "allreduce of {words} words");
    }
    scratch
}

#[test]
fn short_reduce_runs_hold_no_heap_scratch_on_either_rank() {
    for words in [1, 4, 32] {
        assert_eq!(reduce_scratch(words, 256), vec![0, 0], "{words} words in 256-byte segments");
    }
    // Longer segments spill rank 0's incoming to the heap; the leaf sends
    // its own part from its send buffer and holds no scratch at any length
    // (it held a partial and an incoming segment, 2 KiB here, allocated
    // at every MPI_Ireduce).
    let scratch = reduce_scratch(200, 1024);
    assert!(scratch[0] >= 1024, "rank 0 folds through scratch: {scratch:?}");
    assert_eq!(scratch[1], 0, "the leaf holds none: {scratch:?}");
}

#[test]
fn short_allreduce_runs_hold_no_heap_scratch_on_the_exchange_or_the_tree() {
    assert_eq!(allreduce_scratch(2, 64, 256), vec![0, 0], "the exchange");
    assert_eq!(allreduce_scratch(40, 64, 256), vec![0, 0], "the tree in 256-byte segments");
    let scratch = allreduce_scratch(200, 64, 1024);
    assert!(scratch.iter().all(|&bytes| bytes >= 1024), "the tree in 1 KiB segments: {scratch:?}");
}
