//! MPI_Barrier's entry point: the dissemination barrier over the
//! communicator's transport (two-level where it spans nodes), or the
//! module underneath without one.

use std::ffi::c_int;
use std::time::Instant;

use btl_ibmc::TransportError;
use ompi_sys as sys;

use crate::word_max::{bytes_to_words, words_to_bytes, U64Max};
use crate::side_progress::BcastProgress;
use super::handover::Handover;
use super::comm_state::{Collective, CommState, Link, Step};
use super::ffi_guard::guarded;
use super::module::with_state;

pub(super) unsafe extern "C" fn barrier(comm: *mut sys::ompi_communicator_t, module: *mut sys::mca_coll_base_module_t) -> c_int {
    guarded("MPI_Barrier", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI calls us with the module it enabled for `comm`.
        unsafe { with_state(module, |state| state.barrier(comm), |saved| saved.barrier(comm)()) }
    })
}

impl CommState {
    fn barrier(&mut self, comm: *mut sys::ompi_communicator_t) -> Step {
        if !self.ensure_link(comm) {
            let fallback = self.saved.barrier(comm);
            return self.hand_over(Collective::Barrier, Handover::TransportUnavailable, fallback);
        }
        self.count_call(Collective::Barrier);
        let Link::Ready(transport) = &self.link else { unreachable!("ensure_link said the transport is ready") };
        let bcast_progress = BcastProgress::if_needed(transport, &mut self.bcast);
        if let Some(two_level) = self.two_level_barrier.as_mut() {
            let outcome = two_level.run(transport, &bcast_progress);
            drop(bcast_progress);
            return self.finish(Collective::Barrier, outcome);
        }
        let allreduce = &mut self.allreduce;
        let mut agreement_ns = 0;
        // Only the call that ends the autotune's trial agrees, through the
        // communicator's own allreduce, which every rank runs in that same
        // barrier call.
        let agree = |summary: &mut [u64]| -> Result<(), TransportError> {
            let started = Instant::now();
            let mut bytes = words_to_bytes(summary);
            allreduce.allreduce_in_place(transport, &bcast_progress, &U64Max, &mut bytes)?;
            summary.copy_from_slice(&bytes_to_words(&bytes));
            agreement_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            Ok(())
        };
        let outcome = self.barrier.run(transport, &bcast_progress, agree);
        drop(bcast_progress);
        if let Ok(Some(trial)) = &outcome {
            self.report_barrier_trial(trial, agreement_ns);
        }
        self.finish(Collective::Barrier, outcome.map(|_| ()))
    }
}
