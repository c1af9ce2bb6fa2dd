//! The dissemination barrier over the in-process fabric: threads as ranks,
//! random skew before each barrier and random delays on every flag write.
//! The property checked is the barrier's definition: no rank leaves
//! barrier k before every rank has entered barrier k.

use crate::common;

use common::{EntryLedger, XorShift};

use std::sync::Arc;
use std::time::Duration;

use btl_ibmc::fabric::{Fabric, FabricConfig};
use btl_ibmc::{NoSideProgress, WaitPolicy};
use coll_rdma_core::collectives::allreduce::AllreduceConfig;
use coll_rdma_core::collectives::barrier::DisseminationBarrier;
use coll_rdma_core::layout::WindowLayout;

fn yielding_policy() -> WaitPolicy {
    common::yielding_policy(50)
}

/// Runs `barriers` consecutive barriers on `size` threads and returns the
/// first violation seen, if any. `barrier_fn` is what each rank calls.
fn run_ranks<F>(size: usize, radix: usize, barriers: usize, seed: u64, put_delay: Duration, run_barrier: F) -> Result<(), String>
where
    F: Fn(&mut DisseminationBarrier, &btl_ibmc::fabric::FabricEndpoint) + Send + Sync + 'static,
{
    let layout = WindowLayout::with_reductions(size, radix, &AllreduceConfig::default());
    let config = FabricConfig { put_delay_max: put_delay, seed, ..FabricConfig::default() };
    let endpoints = Fabric::new(size, layout.window_len, config);
    let ledger = Arc::new(EntryLedger::new(barriers));
    let run_barrier = Arc::new(run_barrier);
    let handles: Vec<_> = endpoints
        .into_iter()
        .enumerate()
        .map(|(rank, endpoint)| {
            let ledger = Arc::clone(&ledger);
            let run_barrier = Arc::clone(&run_barrier);
            std::thread::spawn(move || -> Result<(), String> {
                let mut barrier = DisseminationBarrier::new(rank, size, radix, layout.barrier_offset, yielding_policy());
                let mut rng = XorShift::new(seed ^ (rank as u64 + 1));
                for k in 0..barriers {
                    rng.skew_arrival();
                    ledger.enter(k);
                    run_barrier(&mut barrier, &endpoint);
                    ledger.check_leave(k, size)?;
                    if ledger.violated() {
                        return Ok(()); // another rank already reported it
                    }
                }
                Ok(())
            })
        })
        .collect();
    let mut first_error = None;
    for handle in handles {
        if let Err(e) = handle.join().expect("rank thread panicked") {
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(format!("size {size} radix {radix} seed {seed:#x}: {e}")),
        None => Ok(()),
    }
}

fn dissemination(barrier: &mut DisseminationBarrier, endpoint: &btl_ibmc::fabric::FabricEndpoint) {
    barrier.run(endpoint, &NoSideProgress).expect("fabric put failed");
}

fn barriers_for(size: usize) -> usize {
    // Every rank is a thread on a 2-core machine: large sizes cost a
    // context switch per notification, so they run fewer barriers.
    match size {
        0..=8 => 1500,
        9..=17 => 400,
        _ => 120,
    }
}

#[test]
fn every_size_and_radix_keeps_the_barrier_property() {
    for size in 1..=33 {
        for radix in 1..=8 {
            let seed = 0x5EED_0000 + (size * 16 + radix) as u64;
            run_ranks(size, radix, barriers_for(size), seed, Duration::ZERO, dissemination).unwrap();
        }
    }
}

#[test]
fn thousands_of_barriers_with_delayed_writes() {
    for (size, radix) in [(2, 1), (3, 2), (5, 1), (6, 2), (7, 3), (9, 2)] {
        let seed = 0xDE1A_0000 + (size * 16 + radix) as u64;
        run_ranks(size, radix, 3000, seed, Duration::from_micros(20), dissemination).unwrap();
    }
}

#[test]
fn large_sizes_with_delayed_writes() {
    for (size, radix) in [(17, 1), (24, 3), (33, 2), (33, 8)] {
        let seed = 0xB16_0000 + (size * 16 + radix) as u64;
        run_ranks(size, radix, 150, seed, Duration::from_micros(30), dissemination).unwrap();
    }
}

/// The checker itself must catch a barrier that does not wait: otherwise the
/// tests above could not fail.
#[test]
fn the_ledger_catches_a_barrier_that_does_not_wait() {
    let no_wait = |_: &mut DisseminationBarrier, _: &btl_ibmc::fabric::FabricEndpoint| {};
    let outcome = run_ranks(4, 1, 2000, 7, Duration::ZERO, no_wait);
    assert!(outcome.is_err(), "a barrier that returns at once went unnoticed");
}
