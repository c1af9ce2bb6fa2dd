//! The module object Open MPI attaches to each communicator we claim: an
//! Open MPI object (allocated, retained and released by Open MPI's object
//! system) whose first member is the base module and whose second points at
//! our Rust state.

use std::ffi::c_int;
use std::mem::size_of;
use std::ptr::{addr_of_mut, null_mut};

use ompi_sys as sys;

use super::comm_state::CommState;
use super::ffi_guard::guarded;
use super::params;
use super::saved::SavedCollectives;

#[repr(C)]
pub struct RdmaModule {
    base: sys::mca_coll_base_module_t,
    state: *mut CommState,
}

// Open MPI's class descriptor; its object system writes the initialisation
// fields on first use, so it must be a mutable static.
static mut RDMA_MODULE_CLASS: sys::opal_class_t = sys::opal_class_t {
    cls_name: c"mca_coll_rdma_module_t".as_ptr(),
    cls_parent: &raw mut sys::mca_coll_base_module_t_class,
    cls_construct: Some(construct),
    cls_destruct: Some(destruct),
    cls_initialized: 0,
    cls_depth: 0,
    cls_construct_array: null_mut(),
    cls_destruct_array: null_mut(),
    cls_sizeof: size_of::<RdmaModule>(),
};

unsafe extern "C" fn construct(object: *mut sys::opal_object_t) {
    // SAFETY: Open MPI calls this on a freshly allocated object of our
    // class's size; the parent constructor only initialised `base`.
    unsafe { (*(object as *mut RdmaModule)).state = null_mut() };
}

unsafe extern "C" fn destruct(object: *mut sys::opal_object_t) {
    guarded("module destructor", (), || {
        let module = object as *mut RdmaModule;
        // SAFETY: called once by Open MPI when the last reference goes;
        // `state` is null or came from Box::into_raw in enable.
        unsafe {
            let state = std::mem::replace(&mut (*module).state, null_mut());
            if !state.is_null() {
                drop(Box::from_raw(state));
            }
        }
    })
}

/// A new module with our entry points; Open MPI owns the reference.
pub fn new_module() -> *mut sys::mca_coll_base_module_t {
    // SAFETY: the class is a valid descriptor derived from the base module
    // class; opal_obj_new allocates cls_sizeof bytes and runs constructors.
    let module = unsafe { sys::coll_rdma_shim_obj_new(addr_of_mut!(RDMA_MODULE_CLASS)) } as *mut RdmaModule;
    if module.is_null() {
        return null_mut();
    }
    // SAFETY: freshly constructed, not yet shared.
    unsafe {
        (*module).base.coll_module_enable = Some(enable);
        (*module).base.coll_barrier = Some(super::barrier::barrier);
        (*module).base.coll_allreduce = Some(super::allreduce::allreduce);
        (*module).base.coll_reduce = Some(super::reduce::reduce);
    }
    module as *mut sys::mca_coll_base_module_t
}

unsafe extern "C" fn enable(module: *mut sys::mca_coll_base_module_t, comm: *mut sys::ompi_communicator_t) -> c_int {
    guarded("module enable", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI passes our module and a communicator whose
        // collective table holds the lower-priority functions.
        let (cid, rank, size) = unsafe {
            (
                sys::coll_rdma_shim_comm_cid(comm),
                sys::coll_rdma_shim_comm_rank(comm) as usize,
                sys::coll_rdma_shim_comm_size(comm) as usize,
            )
        };
        // SAFETY: as above.
        let Some(saved) = (unsafe { SavedCollectives::take_from(comm) }) else {
            tracing::info!(
                "comm {cid}: not enabled: no lower-priority barrier, allgather, allreduce and reduce to fall back on \
                 (keep e.g. tuned or basic in --mca coll)"
            );
            return sys::OMPI_ERROR as c_int;
        };
        let state = Box::new(CommState::new(cid, rank, size, saved, params::settings()));
        // SAFETY: our module, enabled once per communicator.
        unsafe { (*(module as *mut RdmaModule)).state = Box::into_raw(state) };
        sys::OMPI_SUCCESS as c_int
    })
}

/// Our per-communicator state behind a module Open MPI hands back to us.
///
/// # Safety
/// `module` must be a module created by `new_module` and enabled on the
/// communicator of the current call. MPI forbids concurrent collectives on
/// one communicator, so the state is not aliased while the call runs.
pub(super) unsafe fn state_of<'a>(module: *mut sys::mca_coll_base_module_t) -> &'a mut CommState {
    // SAFETY: guaranteed by the caller; enable stored a live Box pointer.
    unsafe { &mut *(*(module as *mut RdmaModule)).state }
}
