//! The lower-priority collectives our module replaces. Open MPI enables
//! modules in increasing priority, so when ours is enabled the
//! communicator's table holds what would have run without us: we keep those
//! functions (and a reference on their modules) as fallbacks and as the
//! means to exchange transport addresses.

use std::ffi::{c_int, c_void};

use btl_ibmc::{Exchange, TransportError};
use ompi_sys as sys;

type Module = *mut sys::mca_coll_base_module_t;

pub struct SavedCollectives {
    barrier: sys::mca_coll_base_module_barrier_fn_t,
    barrier_module: Module,
    allgather: sys::mca_coll_base_module_allgather_fn_t,
    allgather_module: Module,
}

impl SavedCollectives {
    /// Takes the functions currently installed on `comm`; `None` if a
    /// collective we need has no lower-priority provider.
    ///
    /// # Safety
    /// `comm` must be a valid communicator whose `c_coll` table is set up
    /// (true inside module enable).
    pub unsafe fn take_from(comm: *mut sys::ompi_communicator_t) -> Option<Self> {
        // SAFETY: guaranteed by the caller.
        let table = unsafe { &*(*comm).c_coll };
        let complete = table.coll_barrier.is_some()
            && table.coll_allgather.is_some()
            && !table.coll_barrier_module.is_null()
            && !table.coll_allgather_module.is_null();
        if !complete {
            return None;
        }
        let saved = SavedCollectives {
            barrier: table.coll_barrier,
            barrier_module: table.coll_barrier_module,
            allgather: table.coll_allgather,
            allgather_module: table.coll_allgather_module,
        };
        // Retained only once the value exists, so that Drop's release
        // always matches a retain.
        for module in [saved.barrier_module, saved.allgather_module] {
            // SAFETY: a live module object; released in Drop.
            unsafe { sys::coll_rdma_shim_obj_retain(module as *mut sys::opal_object_t) };
        }
        Some(saved)
    }

    /// Runs the saved barrier.
    pub fn barrier(&self, comm: *mut sys::ompi_communicator_t) -> c_int {
        let barrier = self.barrier.expect("checked in take_from");
        // SAFETY: function and module were installed together by Open MPI
        // for this communicator and are kept alive by our reference.
        unsafe { barrier(comm, self.barrier_module) }
    }

    /// An `Exchange` over the saved allgather on `comm`.
    pub fn exchange(&self, comm: *mut sys::ompi_communicator_t) -> SavedAllgather<'_> {
        SavedAllgather { saved: self, comm }
    }
}

impl Drop for SavedCollectives {
    fn drop(&mut self) {
        for module in [self.barrier_module, self.allgather_module] {
            // SAFETY: retained in take_from; released exactly once here.
            unsafe { sys::coll_rdma_shim_obj_release(module as *mut sys::opal_object_t) };
        }
    }
}

pub struct SavedAllgather<'a> {
    saved: &'a SavedCollectives,
    comm: *mut sys::ompi_communicator_t,
}

impl Exchange for SavedAllgather<'_> {
    fn allgather(&self, mine: &[u8], all: &mut [u8]) -> Result<(), TransportError> {
        // SAFETY: comm is the live communicator of the current call.
        let size = unsafe { sys::coll_rdma_shim_comm_size(self.comm) } as usize;
        if all.len() != mine.len() * size || mine.len() > c_int::MAX as usize {
            return Err(TransportError::Failed(format!(
                "allgather of {} bytes into {} for {size} ranks",
                mine.len(),
                all.len()
            )));
        }
        let allgather = self.saved.allgather.expect("checked in take_from");
        // SAFETY: MPI_BYTE is a predefined datatype; buffers are valid for
        // the byte counts given; function and module belong together.
        let rc = unsafe {
            let byte = sys::coll_rdma_shim_mpi_byte() as *mut sys::ompi_datatype_t;
            allgather(
                mine.as_ptr() as *const c_void,
                mine.len() as c_int,
                byte,
                all.as_mut_ptr() as *mut c_void,
                mine.len() as c_int,
                byte,
                self.comm,
                self.saved.allgather_module,
            )
        };
        if rc == sys::OMPI_SUCCESS as c_int {
            Ok(())
        } else {
            Err(TransportError::Failed(format!("saved allgather returned {rc}")))
        }
    }
}
