//! MPI_Ibcast and its persistent form: the slots are ours, so that every
//! such call is counted and can be served natively once the glue posts the
//! put tree's resumable run; until then each goes to the module
//! underneath's function, saying so at verbose 2.

use std::ffi::{c_int, c_void};

use ompi_sys as sys;

use super::comm_state::Collective;
use super::ffi_guard::guarded;
use super::module::with_state;
use super::saved_nonblocking::{BcastCall, Comm, Datatype, Info, Module, Request};

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
