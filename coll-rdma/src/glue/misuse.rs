//! Erroneous MPI use that coll rdma can see but not repair: two threads in
//! collectives on one communicator at once (MPI requires the application
//! to order them). Going in would corrupt the communicator's protocol
//! state; waiting could hang, since the collective inside may wait for
//! peers that are themselves blocked in the second one. The job ends with
//! a message naming the communicator.

use std::ffi::c_int;

use ompi_sys as sys;

use super::component::comm_name;
use super::entry::ConcurrentCollective;

/// The status the job ends with, so that a script can tell this apart.
const ABORT_STATUS: c_int = 70;

/// Reports the concurrent collectives on `comm` and aborts the job; returns
/// an MPI error only if MPI_Abort does.
///
/// # Safety
/// `comm` must be a live communicator of the current call.
pub(super) unsafe fn end_job_for_concurrent_collectives(comm: *mut sys::ompi_communicator_t, concurrent: &ConcurrentCollective) -> c_int {
    // SAFETY: guaranteed by the caller.
    let (cid, rank) = unsafe { (sys::coll_rdma_shim_comm_cid(comm), sys::coll_rdma_shim_comm_rank(comm)) };
    tracing::error!(
        "comm {cid} \"{}\" rank {rank}: two threads called collectives on this communicator at the same time \
         (another thread's collective, thread token {}, is still inside coll rdma); MPI forbids concurrent \
         collectives on one communicator, so the job is ended (MPI_Abort with status {ABORT_STATUS})",
        comm_name(comm),
        concurrent.holder_token
    );
    // SAFETY: MPI_Abort may be called from any thread at MPI_THREAD_MULTIPLE
    // (the only level at which two threads can be in collectives at once).
    unsafe { sys::MPI_Abort(comm, ABORT_STATUS) };
    sys::OMPI_ERROR as c_int
}
