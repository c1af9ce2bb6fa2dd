//! Every rank's run on the test's own thread, advanced in turn (the
//! restart and scratch tests, whose runs of one call need no queue).

use btl_ibmc::fabric::FabricEndpoint;
use btl_ibmc::TransportError;
use coll_rdma_core::schedule::{Schedule, Step};

/// Advances each rank's run (`runs[rank]` over `transports[rank]`) in
/// turn until all are done; a run still pending after 100,000 turns is
/// taken for a deadlock.
pub fn advance_in_turn<S: Schedule<FabricEndpoint, Error = TransportError>>(runs: &mut [S], transports: &mut [FabricEndpoint]) {
    let mut done = vec![false; runs.len()];
    for _ in 0..100_000 {
        for (rank, (run, transport)) in runs.iter_mut().zip(transports.iter_mut()).enumerate() {
            if !done[rank] {
                done[rank] = run.advance(transport).expect("the run advances") == Step::Done;
            }
        }
        if done.iter().all(|&done| done) {
            return;
        }
    }
    panic!("the runs did not finish: {done:?}");
}
