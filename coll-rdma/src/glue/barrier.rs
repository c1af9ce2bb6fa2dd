//! MPI_Barrier's entry point: the dissemination barrier over the
//! communicator's transport, or the module underneath without one.

use std::ffi::c_int;

use ompi_sys as sys;

use super::comm_state::{CommState, Link, Step};
use super::ffi_guard::guarded;
use super::module::with_state;

pub(super) unsafe extern "C" fn barrier(comm: *mut sys::ompi_communicator_t, module: *mut sys::mca_coll_base_module_t) -> c_int {
    guarded("MPI_Barrier", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI calls us with the module it enabled for `comm`.
        unsafe { with_state(module, |state| state.barrier(comm)) }
    })
}

impl CommState {
    fn barrier(&mut self, comm: *mut sys::ompi_communicator_t) -> Step {
        if !self.ensure_link(comm) {
            self.tallies.barrier.handed_over += 1;
            return Step::HandOver(Box::new(self.saved.barrier(comm)));
        }
        let Link::Ready(transport) = &self.link else { unreachable!("ensure_link said the transport is ready") };
        match self.barrier.run(transport) {
            Ok(()) => {
                self.tallies.barrier.served += 1;
                Step::Done(sys::OMPI_SUCCESS as c_int)
            }
            Err(why) => {
                tracing::error!("comm {} rank {}: barrier failed: {why}", self.cid, self.rank);
                Step::Done(sys::OMPI_ERROR as c_int)
            }
        }
    }
}
