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
use super::comm_state::{Collective, CommState, Native, Step};
use super::ffi_guard::guarded;
use super::module::with_state;
use crate::select::barrier::{select, BarrierPath};
use crate::select::{CallShape, Choice, DataShape, Plan};

pub(super) unsafe extern "C" fn barrier(comm: *mut sys::ompi_communicator_t, module: *mut sys::mca_coll_base_module_t) -> c_int {
    guarded("MPI_Barrier", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI calls us with the module it enabled for `comm`.
        unsafe { with_state(module, |state| state.barrier(comm), |saved| saved.barrier(comm)()) }
    })
}

impl CommState {
    fn barrier(&mut self, comm: *mut sys::ompi_communicator_t) -> Step {
        let Some(mut native) = self.enter(comm) else {
            let fallback = self.shared.saved.barrier(comm);
            return self.shared.hand_over(Collective::Barrier, Handover::TransportUnavailable, fallback);
        };
        native.barrier(comm)
    }
}

impl Native<'_> {
    fn barrier(&mut self, comm: *mut sys::ompi_communicator_t) -> Step {
        self.shared.count_call(Collective::Barrier);
        let ready = &mut *self.ready;
        if let Err(why) = ready.finish_pending_runs() {
            return self.shared.finish(Collective::Barrier, Err(why));
        }
        let transport = &ready.transport;
        let bcast_progress = BcastProgress::if_needed(transport, &mut ready.bcast);
        let path = match barrier_choice(ready.decisions.plan()) {
            Choice::Native(path) => path,
            Choice::HandOver(why) => {
                let fallback = self.shared.saved.barrier(comm);
                return self.shared.hand_over(Collective::Barrier, why, fallback);
            }
        };
        if let (BarrierPath::TwoLevel, Some(two_level)) = (path, ready.two_level_barrier.as_mut()) {
            let outcome = two_level.run(transport, &bcast_progress);
            return self.shared.finish(Collective::Barrier, outcome);
        }
        let allreduce = &mut ready.allreduce;
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
        let outcome = ready.barrier.run(transport, &bcast_progress, agree);
        if let Ok(Some(trial)) = &outcome {
            ready.report_barrier_trial(trial, agreement_ns);
        }
        self.shared.finish(Collective::Barrier, outcome.map(|_| ()))
    }
}

/// The selector's path for a barrier (blocking or not) on a communicator
/// with `plan`: a barrier has no data, so the call's shape is always this.
pub(super) fn barrier_choice(plan: &Plan) -> Choice<BarrierPath> {
    let no_data = CallShape { count: 0, data: DataShape::Contiguous { bytes: 0, element_bytes: 0 }, commutative: false, root: 0 };
    select(&no_data, plan)
}
