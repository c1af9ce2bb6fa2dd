//! The non-blocking and persistent collectives of the module underneath,
//! saved like the blocking ones (`saved.rs`): the calls coll rdma does not
//! serve natively go to them with their own arguments. Each is optional: a
//! module underneath without one leaves that call unserved here, and the
//! call says so rather than crash.

use std::ffi::{c_int, c_void};

use ompi_sys as sys;

use super::saved::{ReductionCall, Saved};

pub(super) type Module = *mut sys::mca_coll_base_module_t;
pub(super) type Comm = *mut sys::ompi_communicator_t;
pub(super) type Datatype = *mut sys::ompi_datatype_t;
pub(super) type Op = *mut sys::ompi_op_t;
pub(super) type Request = *mut *mut sys::ompi_request_t;
pub(super) type Info = *mut sys::ompi_info_t;

type IbarrierFn = unsafe extern "C" fn(Comm, Request, Module) -> c_int;
type IbcastFn = unsafe extern "C" fn(*mut c_void, c_int, Datatype, c_int, Comm, Request, Module) -> c_int;
type IallreduceFn = unsafe extern "C" fn(*const c_void, *mut c_void, c_int, Datatype, Op, Comm, Request, Module) -> c_int;
type IreduceFn = unsafe extern "C" fn(*const c_void, *mut c_void, c_int, Datatype, Op, c_int, Comm, Request, Module) -> c_int;
type BarrierInitFn = unsafe extern "C" fn(Comm, Info, Request, Module) -> c_int;
type BcastInitFn = unsafe extern "C" fn(*mut c_void, c_int, Datatype, c_int, Comm, Info, Request, Module) -> c_int;
type AllreduceInitFn = unsafe extern "C" fn(*const c_void, *mut c_void, c_int, Datatype, Op, Comm, Info, Request, Module) -> c_int;
type ReduceInitFn = unsafe extern "C" fn(*const c_void, *mut c_void, c_int, Datatype, Op, c_int, Comm, Info, Request, Module) -> c_int;

/// The arguments of a bcast, passed through unchanged.
#[derive(Clone, Copy)]
pub struct BcastCall {
    pub buffer: *mut c_void,
    pub count: c_int,
    pub dtype: Datatype,
    pub root: c_int,
    pub comm: Comm,
}

/// The non-blocking calls, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NonblockingKind {
    Ibarrier,
    Ibcast,
    Iallreduce,
    Ireduce,
}

pub struct SavedNonblocking {
    ibarrier: Option<Saved<IbarrierFn>>,
    ibcast: Option<Saved<IbcastFn>>,
    iallreduce: Option<Saved<IallreduceFn>>,
    ireduce: Option<Saved<IreduceFn>>,
    barrier_init: Option<Saved<BarrierInitFn>>,
    bcast_init: Option<Saved<BcastInitFn>>,
    allreduce_init: Option<Saved<AllreduceInitFn>>,
    reduce_init: Option<Saved<ReduceInitFn>>,
}

/// What a call with no function underneath returns, after saying why.
fn unserved(name: &str) -> c_int {
    tracing::error!("{name}: coll rdma does not serve this call here and no module underneath provides it");
    sys::OMPI_ERR_NOT_SUPPORTED as c_int
}

impl SavedNonblocking {
    /// Takes the functions currently installed on `comm`.
    ///
    /// # Safety
    /// As `SavedCollectives::take_from`.
    pub unsafe fn take_from(comm: Comm) -> Self {
        // SAFETY: guaranteed by the caller.
        let table = unsafe { &*(*comm).c_coll };
        SavedNonblocking {
            ibarrier: Saved::take(table.coll_ibarrier, table.coll_ibarrier_module),
            ibcast: Saved::take(table.coll_ibcast, table.coll_ibcast_module),
            iallreduce: Saved::take(table.coll_iallreduce, table.coll_iallreduce_module),
            ireduce: Saved::take(table.coll_ireduce, table.coll_ireduce_module),
            barrier_init: Saved::take(table.coll_barrier_init, table.coll_barrier_init_module),
            bcast_init: Saved::take(table.coll_bcast_init, table.coll_bcast_init_module),
            allreduce_init: Saved::take(table.coll_allreduce_init, table.coll_allreduce_init_module),
            reduce_init: Saved::take(table.coll_reduce_init, table.coll_reduce_init_module),
        }
    }

    /// Puts each saved function back into `comm`'s table where `ours`
    /// sits, adding the names of those put back to `reinstalled`.
    ///
    /// # Safety
    /// As `SavedCollectives::reinstall_into`.
    pub unsafe fn reinstall_into(&self, comm: Comm, ours: Module, reinstalled: &mut Vec<&'static str>) {
        // SAFETY: guaranteed by the caller.
        let table = unsafe { &mut *(*comm).c_coll };
        macro_rules! reinstall {
            ($($name:ident: $slot:ident, $module:ident;)*) => {$(
                if let Some(saved) = &self.$name {
                    // SAFETY: guaranteed by the caller, for each slot.
                    if unsafe { saved.reinstall(&mut table.$slot, &mut table.$module, ours) } {
                        reinstalled.push(stringify!($name));
                    }
                }
            )*};
        }
        reinstall! {
            ibarrier: coll_ibarrier, coll_ibarrier_module;
            ibcast: coll_ibcast, coll_ibcast_module;
            iallreduce: coll_iallreduce, coll_iallreduce_module;
            ireduce: coll_ireduce, coll_ireduce_module;
            barrier_init: coll_barrier_init, coll_barrier_init_module;
            bcast_init: coll_bcast_init, coll_bcast_init_module;
            allreduce_init: coll_allreduce_init, coll_allreduce_init_module;
            reduce_init: coll_reduce_init, coll_reduce_init_module;
        }
    }

    /// How many of `comm`'s non-blocking and persistent slots hold `ours`.
    ///
    /// # Safety
    /// As `SavedCollectives::slots_held`.
    pub unsafe fn slots_held(comm: Comm, ours: Module) -> usize {
        // SAFETY: guaranteed by the caller.
        let table = unsafe { &*(*comm).c_coll };
        [
            table.coll_ibarrier_module,
            table.coll_ibcast_module,
            table.coll_iallreduce_module,
            table.coll_ireduce_module,
            table.coll_barrier_init_module,
            table.coll_bcast_init_module,
            table.coll_allreduce_init_module,
            table.coll_reduce_init_module,
        ]
        .into_iter()
        .filter(|&module| module == ours)
        .count()
    }

    /// Whether the module underneath has the non-blocking call `kind`.
    pub fn provides(&self, kind: NonblockingKind) -> bool {
        match kind {
            NonblockingKind::Ibarrier => self.ibarrier.is_some(),
            NonblockingKind::Ibcast => self.ibcast.is_some(),
            NonblockingKind::Iallreduce => self.iallreduce.is_some(),
            NonblockingKind::Ireduce => self.ireduce.is_some(),
        }
    }

    // As in `saved.rs`, each returns a closure run after our state is
    // released, but for the posts of calls queued behind the setup, made
    // holding it (a post waits for nobody); function and module were
    // installed together.

    pub fn ibarrier(&self, comm: Comm, request: Request) -> impl FnOnce() -> c_int + use<> {
        let saved = self.ibarrier.as_ref().map(|s| (s.function, s.module));
        move || match saved {
            // SAFETY: see above; the arguments are the caller's own.
            Some((function, module)) => unsafe { function(comm, request, module) },
            None => unserved("MPI_Ibarrier"),
        }
    }

    pub fn barrier_init(&self, comm: Comm, info: Info, request: Request) -> impl FnOnce() -> c_int + use<> {
        let saved = self.barrier_init.as_ref().map(|s| (s.function, s.module));
        move || match saved {
            // SAFETY: see above; the arguments are the caller's own.
            Some((function, module)) => unsafe { function(comm, info, request, module) },
            None => unserved("MPI_Barrier_init"),
        }
    }

    pub fn ibcast(&self, call: BcastCall, request: Request) -> impl FnOnce() -> c_int + use<> {
        let saved = self.ibcast.as_ref().map(|s| (s.function, s.module));
        move || match saved {
            // SAFETY: see above; the arguments are the caller's own.
            Some((function, module)) => unsafe { function(call.buffer, call.count, call.dtype, call.root, call.comm, request, module) },
            None => unserved("MPI_Ibcast"),
        }
    }

    pub fn bcast_init(&self, call: BcastCall, info: Info, request: Request) -> impl FnOnce() -> c_int + use<> {
        let saved = self.bcast_init.as_ref().map(|s| (s.function, s.module));
        move || match saved {
            // SAFETY: see above; the arguments are the caller's own.
            Some((function, module)) => unsafe {
                function(call.buffer, call.count, call.dtype, call.root, call.comm, info, request, module)
            },
            None => unserved("MPI_Bcast_init"),
        }
    }

    pub fn iallreduce(&self, call: ReductionCall, request: Request) -> impl FnOnce() -> c_int + use<> {
        let saved = self.iallreduce.as_ref().map(|s| (s.function, s.module));
        move || match saved {
            // SAFETY: see above; the arguments are the caller's own.
            Some((function, module)) => unsafe {
                function(call.send, call.recv, call.count, call.dtype, call.op, call.comm, request, module)
            },
            None => unserved("MPI_Iallreduce"),
        }
    }

    pub fn allreduce_init(&self, call: ReductionCall, info: Info, request: Request) -> impl FnOnce() -> c_int + use<> {
        let saved = self.allreduce_init.as_ref().map(|s| (s.function, s.module));
        move || match saved {
            // SAFETY: see above; the arguments are the caller's own.
            Some((function, module)) => unsafe {
                function(call.send, call.recv, call.count, call.dtype, call.op, call.comm, info, request, module)
            },
            None => unserved("MPI_Allreduce_init"),
        }
    }

    pub fn ireduce(&self, call: ReductionCall, root: c_int, request: Request) -> impl FnOnce() -> c_int + use<> {
        let saved = self.ireduce.as_ref().map(|s| (s.function, s.module));
        move || match saved {
            // SAFETY: see above; the arguments are the caller's own.
            Some((function, module)) => unsafe {
                function(call.send, call.recv, call.count, call.dtype, call.op, root, call.comm, request, module)
            },
            None => unserved("MPI_Ireduce"),
        }
    }

    pub fn reduce_init(&self, call: ReductionCall, root: c_int, info: Info, request: Request) -> impl FnOnce() -> c_int + use<> {
        let saved = self.reduce_init.as_ref().map(|s| (s.function, s.module));
        move || match saved {
            // SAFETY: see above; the arguments are the caller's own.
            Some((function, module)) => unsafe {
                function(call.send, call.recv, call.count, call.dtype, call.op, root, call.comm, info, request, module)
            },
            None => unserved("MPI_Reduce_init"),
        }
    }
}
