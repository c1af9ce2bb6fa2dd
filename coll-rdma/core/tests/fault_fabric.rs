//! Dead peers and silent peers (issue 9, item 6): a wait must end, with an
//! error, when the transport reports a peer failed or when it has seen no
//! progress for the fault timeout, instead of spinning for ever. Threads
//! play ranks on the fabric; one rank never takes part. Each run is
//! watched: a rank that is still waiting at the deadline fails the test
//! with a list of who waits for what.

use crate::common;

use std::time::{Duration, Instant};

use btl_ibmc::fabric::{Fabric, FabricConfig, FabricEndpoint, run_ranks_watched};
use btl_ibmc::{Endpoint, NoSideProgress, WaitPolicy};
use coll_rdma_core::collectives::allreduce::{Allreduce, AllreduceConfig};
use coll_rdma_core::collectives::barrier::DisseminationBarrier;
use coll_rdma_core::collectives::bcast::{Bcast, BcastConfig};
use coll_rdma_core::layout::WindowLayout;
use coll_rdma_core::patterns::TreeStreamConfig;
use common::WordSum;

const SIZE: usize = 6;
const ABSENT: usize = 3;
/// Far beyond how long noticing should take, even on a loaded machine.
const WATCHDOG: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug)]
enum Collective {
    Barrier,
    Allreduce,
    Bcast,
}

fn policy(fault_timeout: Option<Duration>) -> WaitPolicy {
    WaitPolicy { fault_timeout, ..common::yielding_policy(0) }
}

/// Runs `collective` on every rank but `ABSENT`, which either marks itself
/// dead or stays silent; returns each present rank's error (or success)
/// and how long it took.
fn run_without_one(collective: Collective, absent_dies: bool, wait: WaitPolicy) -> Vec<(usize, Result<(), String>, Duration)> {
    let tree = TreeStreamConfig { policy: wait, ..TreeStreamConfig::default() };
    let reductions = AllreduceConfig { tree, ..AllreduceConfig::default() };
    let mut bcast_config = BcastConfig::default();
    bcast_config.multicast.wait = wait;
    let layout = WindowLayout::new(SIZE, 2, &reductions, &reductions.tree, &bcast_config);
    let endpoints = Fabric::new(SIZE, layout.window_len, FabricConfig::default());
    let outcomes = run_ranks_watched(endpoints, WATCHDOG, move |rank, endpoint: FabricEndpoint| {
        if rank == ABSENT {
            if absent_dies {
                endpoint.mark_dead(rank);
            }
            return None;
        }
        let started = Instant::now();
        let result = match collective {
            Collective::Barrier => DisseminationBarrier::new(rank, SIZE, 2, layout.barrier_offset, wait).run(&endpoint, &NoSideProgress),
            Collective::Allreduce => {
                let send = (rank as u64).to_le_bytes().repeat(16);
                let mut recv = vec![0u8; send.len()];
                Allreduce::new(rank, SIZE, layout.allreduce_offset, reductions).allreduce(&endpoint, &NoSideProgress, &WordSum, &send, &mut recv)
            }
            Collective::Bcast => {
                let mut buf = vec![0u8; 1000];
                Bcast::new(rank, SIZE, layout.bcast_offset, bcast_config).bcast(&endpoint, ABSENT, &mut buf)
            }
        };
        Some((rank, result.map_err(|e| e.to_string()), started.elapsed()))
    });
    outcomes.into_iter().flatten().collect()
}

#[test]
fn a_peer_reported_dead_fails_every_wait_naming_it() {
    for collective in [Collective::Barrier, Collective::Allreduce, Collective::Bcast] {
        // No fault timeout: only the transport's health can end these waits.
        for (rank, result, took) in run_without_one(collective, true, policy(None)) {
            let error = result.expect_err(&format!("{collective:?}: rank {rank} completed without rank {ABSENT}"));
            assert!(
                error.contains(&format!("rank {ABSENT} is unreachable")) && error.contains(&format!("rank {rank} of {SIZE}")),
                "{collective:?}: rank {rank}: the error should name the dead peer and the waiting rank: {error}"
            );
            println!("{collective:?}: rank {rank} failed after {:.2} s: {error}", took.as_secs_f64());
        }
    }
}

#[test]
fn a_silent_peer_ends_waits_at_the_fault_timeout_with_their_description() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    for (collective, awaited) in
        [(Collective::Barrier, "barrier 1"), (Collective::Allreduce, "allreduce"), (Collective::Bcast, format!("from root {ABSENT}").leak() as &str)]
    {
        for (rank, result, took) in run_without_one(collective, false, policy(Some(TIMEOUT))) {
            let error = result.expect_err(&format!("{collective:?}: rank {rank} completed without rank {ABSENT}"));
            assert!(
                error.contains("looks hung") && error.contains("fault_timeout") && error.contains(awaited),
                "{collective:?}: rank {rank}: the error should report a hang and what was awaited ({awaited}): {error}"
            );
            assert!(took >= TIMEOUT, "{collective:?}: rank {rank} gave up after {took:?}, before the timeout");
            println!("{collective:?}: rank {rank} gave up after {:.2} s: {error}", took.as_secs_f64());
        }
    }
}

#[test]
fn a_healthy_run_is_not_cut_short_by_the_fault_timeout() {
    // Every rank present, one of them late: health stays Ok and no wait
    // gives up, so the checks cost a healthy job nothing but time.
    let wait = policy(Some(Duration::from_secs(60)));
    let layout = WindowLayout::with_reductions(SIZE, 2, &AllreduceConfig::default());
    let endpoints = Fabric::new(SIZE, layout.window_len, FabricConfig::default());
    run_ranks_watched(endpoints, WATCHDOG, move |rank, endpoint: FabricEndpoint| {
        let mut barrier = DisseminationBarrier::new(rank, SIZE, 2, layout.barrier_offset, wait);
        for round in 0..20 {
            if rank == ABSENT && round == 5 {
                std::thread::sleep(Duration::from_millis(300));
            }
            barrier.run(&endpoint, &NoSideProgress).unwrap_or_else(|e| panic!("rank {rank} barrier {round}: {e}"));
        }
        assert!(endpoint.health().is_ok());
    });
}
