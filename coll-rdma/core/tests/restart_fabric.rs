//! A persistent request's later starts (`Allreduce::restart`,
//! `Reduce::restart`): its last run made again in place over the same
//! buffers. Three ranks over the in-process fabric, all on this thread,
//! advanced in turn until done; on the exchange and the tree.
//!
//! The reference: in place, each start's contribution is what the buffer
//! holds at that start, the last start's result, so the results grow as
//! the sum over ranks computed here, start after start (a restart that
//! kept its first contribution would repeat its first result). Apart,
//! every start gives the same sum; that the numbers of the next call are
//! taken shows as a rank's restarted run waiting until the others restart
//! theirs (with the last call's numbers it would find their contributions
//! there and finish alone). A run not over, or made before the plan
//! changed, is declined and left as it was.

use std::time::Duration;

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::{TransportError, WaitPolicy};
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig, AllreduceStart};
use coll_rdma_core::collectives::reduce::{Reduce, ReduceStart};
use coll_rdma_core::patterns::TreeStreamConfig;
use coll_rdma_core::schedule::{Schedule, Step};

use crate::common::in_turn::advance_in_turn;
use crate::common::{self, WordSum};

const SIZE: usize = 3;
const STARTS: usize = 12;
/// Advances of one rank alone that must leave its restarted run pending.
const ALONE: usize = 50;

fn tree_config() -> TreeStreamConfig {
    let policy = WaitPolicy { fault_timeout: Some(Duration::from_secs(30)), ..common::yielding_policy(20) };
    TreeStreamConfig { degree: 2, segment_bytes: 64, policy, room_for_two_levels: false }
}

fn allreduce_config(exchange_max_bytes: usize) -> AllreduceConfig {
    AllreduceConfig { tree: tree_config(), exchange_max_bytes }
}

/// Rank `rank`'s first input: `words` 8-byte words.
fn input(rank: usize, words: usize) -> Vec<u8> {
    (0..words).flat_map(|i| (1000 * rank as u64 + i as u64 + 1).to_le_bytes()).collect()
}

/// The wrapping word sum of `buffers`.
fn sum(buffers: &[Vec<u8>]) -> Vec<u8> {
    let words = buffers[0].len() / 8;
    (0..words)
        .flat_map(|i| {
            let word = |buffer: &Vec<u8>| u64::from_le_bytes(buffer[8 * i..8 * i + 8].try_into().expect("a word"));
            buffers.iter().map(word).fold(0u64, u64::wrapping_add).to_le_bytes()
        })
        .collect()
}

/// Advances a run restarted before the others': it must wait for their
/// contributions of this call.
fn alone_waits<S: Schedule<FabricEndpoint, Error = TransportError>>(run: &mut S, transport: &mut FabricEndpoint, what: &str) {
    for _ in 0..ALONE {
        assert_eq!(run.advance(transport).expect("the run advances"), Step::Pending, "{what}: a restarted run finished without the others");
    }
}

/// Allreduces of `words` words, `STARTS` starts, in place or apart.
fn allreduce_restarts(words: usize, exchange_max_bytes: usize, in_place: bool) {
    let what = format!("allreduce of {words} words, exchange to {exchange_max_bytes} bytes, in place {in_place}");
    let config = allreduce_config(exchange_max_bytes);
    let mut transports = Fabric::new(SIZE, Allreduce::region_len(SIZE, &config), FabricConfig::default());
    let mut allreduces: Vec<Allreduce> = (0..SIZE).map(|rank| Allreduce::new(rank, SIZE, 0, config)).collect();
    let sends: Vec<Vec<u8>> = (0..SIZE).map(|rank| input(rank, words)).collect();
    let mut results: Vec<Vec<u8>> = if in_place { sends.clone() } else { vec![vec![0u8; words * 8]; SIZE] };
    let mut expected = sum(&sends);
    let mut runs: Vec<AllreduceStart<'_, WordSum>> = allreduces
        .iter_mut()
        .zip(&transports)
        .zip(sends.iter().zip(results.iter_mut()))
        .map(|((allreduce, transport), (send, recv))| {
            if in_place { allreduce.start_in_place(transport, WordSum, recv) } else { allreduce.start(transport, WordSum, send, recv) }.expect("the first start")
        })
        .collect();
    advance_in_turn(&mut runs, &mut transports);
    for start in 1..STARTS {
        for rank in 0..SIZE {
            assert!(allreduces[rank].restart(&transports[rank], &mut runs[rank]).expect("a restart"), "{what}: rank {rank}'s start {start} declined");
            if rank == 0 {
                assert!(!allreduces[0].restart(&transports[0], &mut runs[0]).expect("a restart"), "{what}: a run not over restarted");
                alone_waits(&mut runs[0], &mut transports[0], &what);
            }
        }
        advance_in_turn(&mut runs, &mut transports);
        if in_place {
            expected = sum(&vec![expected; SIZE]);
        }
    }
    drop(runs);
    for (rank, result) in results.iter().enumerate() {
        assert_eq!(*result, expected, "{what}: rank {rank} after {STARTS} starts");
    }
}

#[test]
fn restarted_allreduce_runs_take_new_numbers_and_contributions_on_the_exchange_and_the_tree() {
    for in_place in [false, true] {
        allreduce_restarts(2, 64, in_place);
        allreduce_restarts(40, 64, in_place);
    }
}

/// Reduces to `root` of `words` words, `STARTS` starts, in place at the
/// root or apart.
fn reduce_restarts(words: usize, root: usize, in_place: bool) {
    let what = format!("reduce of {words} words to {root}, in place {in_place}");
    let config = tree_config();
    let mut transports = Fabric::new(SIZE, Reduce::region_len(SIZE, &config), FabricConfig::default());
    let mut reduces: Vec<Reduce> = (0..SIZE).map(|rank| Reduce::new(rank, SIZE, 0, config)).collect();
    let sends: Vec<Vec<u8>> = (0..SIZE).map(|rank| input(rank, words)).collect();
    let mut result = if in_place { sends[root].clone() } else { vec![0u8; words * 8] };
    let mut result_at_root = Some(&mut result[..]);
    let mut expected = sum(&sends);
    let mut runs: Vec<ReduceStart<'_, WordSum>> = Vec::new();
    for (rank, (reduce, transport)) in reduces.iter_mut().zip(&transports).enumerate() {
        let run = match (rank == root).then(|| result_at_root.take()).flatten() {
            Some(buffer) if in_place => reduce.start_in_place_at_root(transport, WordSum, root, buffer),
            recv => reduce.start(transport, WordSum, root, &sends[rank], recv),
        };
        runs.push(run.expect("the first start"));
    }
    advance_in_turn(&mut runs, &mut transports);
    for start in 1..STARTS {
        for rank in 0..SIZE {
            assert!(reduces[rank].restart(&transports[rank], &mut runs[rank]).expect("a restart"), "{what}: rank {rank}'s start {start} declined");
            if rank == root {
                assert!(!reduces[rank].restart(&transports[rank], &mut runs[rank]).expect("a restart"), "{what}: a run not over restarted");
                alone_waits(&mut runs[rank], &mut transports[rank], &what);
            }
        }
        advance_in_turn(&mut runs, &mut transports);
        if in_place {
            // The root contributes its last result, the others their inputs.
            let mut contributions = sends.clone();
            contributions[root] = expected;
            expected = sum(&contributions);
        }
    }
    drop(runs);
    assert_eq!(result, expected, "{what}: the root after {STARTS} starts");
}

#[test]
fn restarted_reduce_runs_take_new_numbers_and_contributions() {
    for in_place in [false, true] {
        reduce_restarts(1, 0, in_place);
        reduce_restarts(40, 2, in_place);
    }
}

/// After the degree changed, a run of the earlier plan is declined: the
/// caller starts a run of the new plan instead.
#[test]
fn a_run_made_before_the_degree_changed_is_not_restarted() {
    let config = allreduce_config(0);
    let mut transports = Fabric::new(SIZE, Allreduce::region_len(SIZE, &config), FabricConfig::default());
    let mut allreduces: Vec<Allreduce> = (0..SIZE).map(|rank| Allreduce::new(rank, SIZE, 0, config)).collect();
    let sends: Vec<Vec<u8>> = (0..SIZE).map(|rank| input(rank, 16)).collect();
    let mut results = vec![vec![0u8; 16 * 8]; SIZE];
    let mut runs: Vec<AllreduceStart<'_, WordSum>> = allreduces
        .iter_mut()
        .zip(&transports)
        .zip(sends.iter().zip(results.iter_mut()))
        .map(|((allreduce, transport), (send, recv))| allreduce.start(transport, WordSum, send, recv).expect("the first start"))
        .collect();
    advance_in_turn(&mut runs, &mut transports);
    for (rank, allreduce) in allreduces.iter_mut().enumerate() {
        allreduce.set_degree(1).expect("degree 1");
        assert!(!allreduce.restart(&transports[rank], &mut runs[rank]).expect("a restart"), "rank {rank}: a run of degree 2 restarted at degree 1");
    }
    drop(runs);
    for result in &results {
        assert_eq!(*result, sum(&sends));
    }
}
