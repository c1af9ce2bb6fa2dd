//! MPI_Ibcast, MPI_Iallreduce, MPI_Ireduce and their persistent forms: the
//! slots are ours, so that every such call is counted and can be served
//! natively once their resumable schedules exist; until then each goes to
//! the module underneath's function, saying so at verbose 2.

use std::ffi::{c_int, c_void};

use ompi_sys as sys;

use super::comm_state::Collective;
use super::ffi_guard::guarded;
use super::module::with_state;
use super::saved::ReductionCall;
use super::saved_nonblocking::{BcastCall, Comm, Datatype, Info, Module, Op, Request};

/// Hands one call to the module underneath through our state (so that it
/// is counted); `fallback` builds the call from the saved functions.
///
/// # Safety
/// As `with_state`.
unsafe fn hand_over<F, R>(module: Module, collective: Collective, fallback: F) -> c_int
where
    F: Fn(&super::saved::SavedCollectives) -> R,
    R: FnOnce() -> c_int + 'static,
{
    // SAFETY: guaranteed by the caller.
    unsafe {
        with_state(
            module,
            |state| {
                let call = fallback(&state.shared.saved);
                state.shared.hand_over_until_scheduled(collective, call)
            },
            |saved| fallback(saved)(),
        )
    }
}

pub(super) unsafe extern "C" fn ibcast(
    buffer: *mut c_void,
    count: c_int,
    dtype: Datatype,
    root: c_int,
    comm: Comm,
    request: Request,
    module: Module,
) -> c_int {
    let call = BcastCall { buffer, count, dtype, root, comm };
    guarded("MPI_Ibcast", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI calls us with the module it enabled for `comm`.
        unsafe { hand_over(module, Collective::Ibcast, |saved| saved.nonblocking.ibcast(call, request)) }
    })
}

pub(super) unsafe extern "C" fn bcast_init(
    buffer: *mut c_void,
    count: c_int,
    dtype: Datatype,
    root: c_int,
    comm: Comm,
    info: Info,
    request: Request,
    module: Module,
) -> c_int {
    let call = BcastCall { buffer, count, dtype, root, comm };
    guarded("MPI_Bcast_init", sys::OMPI_ERROR as c_int, || {
        // SAFETY: as for `ibcast`.
        unsafe { hand_over(module, Collective::BcastInit, |saved| saved.nonblocking.bcast_init(call, info, request)) }
    })
}

#[allow(clippy::too_many_arguments)] // Open MPI's signature
pub(super) unsafe extern "C" fn iallreduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dtype: Datatype,
    op: Op,
    comm: Comm,
    request: Request,
    module: Module,
) -> c_int {
    let call = ReductionCall { send, recv, count, dtype, op, comm };
    guarded("MPI_Iallreduce", sys::OMPI_ERROR as c_int, || {
        // SAFETY: as for `ibcast`.
        unsafe { hand_over(module, Collective::Iallreduce, |saved| saved.nonblocking.iallreduce(call, request)) }
    })
}

#[allow(clippy::too_many_arguments)] // Open MPI's signature
pub(super) unsafe extern "C" fn allreduce_init(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dtype: Datatype,
    op: Op,
    comm: Comm,
    info: Info,
    request: Request,
    module: Module,
) -> c_int {
    let call = ReductionCall { send, recv, count, dtype, op, comm };
    guarded("MPI_Allreduce_init", sys::OMPI_ERROR as c_int, || {
        // SAFETY: as for `ibcast`.
        unsafe { hand_over(module, Collective::AllreduceInit, |saved| saved.nonblocking.allreduce_init(call, info, request)) }
    })
}

#[allow(clippy::too_many_arguments)] // Open MPI's signature
pub(super) unsafe extern "C" fn ireduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dtype: Datatype,
    op: Op,
    root: c_int,
    comm: Comm,
    request: Request,
    module: Module,
) -> c_int {
    let call = ReductionCall { send, recv, count, dtype, op, comm };
    guarded("MPI_Ireduce", sys::OMPI_ERROR as c_int, || {
        // SAFETY: as for `ibcast`.
        unsafe { hand_over(module, Collective::Ireduce, |saved| saved.nonblocking.ireduce(call, root, request)) }
    })
}

#[allow(clippy::too_many_arguments)] // Open MPI's signature
pub(super) unsafe extern "C" fn reduce_init(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dtype: Datatype,
    op: Op,
    root: c_int,
    comm: Comm,
    info: Info,
    request: Request,
    module: Module,
) -> c_int {
    let call = ReductionCall { send, recv, count, dtype, op, comm };
    guarded("MPI_Reduce_init", sys::OMPI_ERROR as c_int, || {
        // SAFETY: as for `ibcast`.
        unsafe { hand_over(module, Collective::ReduceInit, |saved| saved.nonblocking.reduce_init(call, root, info, request)) }
    })
}
