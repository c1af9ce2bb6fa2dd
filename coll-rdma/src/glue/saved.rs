//! The lower-priority collectives our module replaces. Open MPI enables
//! modules in increasing priority, so when ours is enabled the
//! communicator's table holds what would have run without us: we keep those
//! functions (and a reference on their modules) as fallbacks and as the
//! means to exchange transport addresses, and put them back into the table
//! once a communicator falls back for good.

use std::ffi::{c_int, c_void};

use btl_ibmc::{Exchange, TransportError};
use ompi_sys as sys;

use super::nested::NestedInSetup;
use super::saved_nonblocking::SavedNonblocking;

type Module = *mut sys::mca_coll_base_module_t;
type Comm = *mut sys::ompi_communicator_t;
type Datatype = *mut sys::ompi_datatype_t;
type Op = *mut sys::ompi_op_t;

/// A function of the collective table together with the module it must be
/// called with; holds a reference on the module while it lives.
pub(super) struct Saved<F> {
    pub(super) function: F,
    pub(super) module: Module,
}

impl<F: Copy> Saved<F> {
    /// `None` unless both the function and its module are present.
    pub(super) fn take(function: Option<F>, module: Module) -> Option<Self> {
        let function = function?;
        if module.is_null() {
            return None;
        }
        // SAFETY: a live module installed on the communicator; the
        // reference is dropped in Drop, exactly once.
        unsafe { sys::coll_rdma_shim_obj_retain(module as *mut sys::opal_object_t) };
        Some(Saved { function, module })
    }

    /// Puts this function back into a slot of a communicator's table where
    /// `ours` sits, moving the slot's reference from `ours` to the saved
    /// module. False (nothing changed) when the slot holds another module.
    ///
    /// # Safety
    /// The slot must be one of a live communicator's table, and `ours` must
    /// keep another reference besides the slot's.
    pub(super) unsafe fn reinstall(&self, function: &mut Option<F>, module: &mut Module, ours: Module) -> bool {
        if *module != ours {
            return false;
        }
        // SAFETY: the saved module is alive (we hold a reference); Open MPI
        // releases the slot's module when the communicator is freed, so the
        // slot takes a reference of its own, and gives back the one it held
        // on ours, which is not the last (guaranteed by the caller).
        unsafe {
            sys::coll_rdma_shim_obj_retain(self.module as *mut sys::opal_object_t);
            *function = Some(self.function);
            *module = self.module;
            sys::coll_rdma_shim_obj_release(ours as *mut sys::opal_object_t);
        }
        true
    }
}

impl<F> Drop for Saved<F> {
    fn drop(&mut self) {
        // SAFETY: retained in `take`.
        unsafe { sys::coll_rdma_shim_obj_release(self.module as *mut sys::opal_object_t) };
    }
}

type BarrierFn = unsafe extern "C" fn(Comm, Module) -> c_int;
type AllgatherFn = unsafe extern "C" fn(*const c_void, c_int, Datatype, *mut c_void, c_int, Datatype, Comm, Module) -> c_int;
type AllreduceFn = unsafe extern "C" fn(*const c_void, *mut c_void, c_int, Datatype, Op, Comm, Module) -> c_int;
type BcastFn = unsafe extern "C" fn(*mut c_void, c_int, Datatype, c_int, Comm, Module) -> c_int;
type ReduceFn = unsafe extern "C" fn(*const c_void, *mut c_void, c_int, Datatype, Op, c_int, Comm, Module) -> c_int;
type IallgatherFn =
    unsafe extern "C" fn(*const c_void, c_int, Datatype, *mut c_void, c_int, Datatype, Comm, *mut *mut sys::ompi_request_t, Module) -> c_int;

/// The arguments of an MPI reduction call, passed through unchanged to a
/// fallback.
#[derive(Clone, Copy)]
pub struct ReductionCall {
    pub send: *const c_void,
    pub recv: *mut c_void,
    pub count: c_int,
    pub dtype: Datatype,
    pub op: Op,
    pub comm: Comm,
}

pub struct SavedCollectives {
    barrier: Saved<BarrierFn>,
    allgather: Saved<AllgatherFn>,
    allreduce: Saved<AllreduceFn>,
    reduce: Saved<ReduceFn>,
    bcast: Saved<BcastFn>,
    /// The setup exchange's allgather, where the module underneath has a
    /// non-blocking one: a wait that warns instead of hanging silently.
    iallgather: Option<Saved<IallgatherFn>>,
    /// The non-blocking and persistent forms, each optional.
    pub nonblocking: SavedNonblocking,
    /// Non-blocking calls nested inside the communicator's setup, bound
    /// for the functions above once it ended.
    pub(super) nested_in_setup: NestedInSetup,
}

// SAFETY: the entries are Open MPI's functions and the modules they belong
// to, retained. Any thread may call a communicator's collectives (one at a
// time per communicator, which the module's entry lock keeps for the calls
// made from here), and Open MPI's reference counts are atomic once threads
// are enabled, so the last release may come from any thread.
unsafe impl Send for SavedCollectives {}
// SAFETY: as for Send; the entries are never written after `take_from`
// (`nested_in_setup` is a lock and a flag, and its calls are `Send`).
unsafe impl Sync for SavedCollectives {}

impl SavedCollectives {
    /// Takes the functions currently installed on `comm`; `None` if a
    /// collective we replace or need has no lower-priority provider.
    ///
    /// # Safety
    /// `comm` must be a valid communicator whose `c_coll` table is set up
    /// (true inside module enable).
    pub unsafe fn take_from(comm: Comm) -> Option<Self> {
        // SAFETY: guaranteed by the caller.
        let table = unsafe { &*(*comm).c_coll };
        // Each `take` retains as it succeeds; an early `?` drops (and so
        // releases) exactly the ones already taken.
        Some(SavedCollectives {
            barrier: Saved::take(table.coll_barrier, table.coll_barrier_module)?,
            allgather: Saved::take(table.coll_allgather, table.coll_allgather_module)?,
            allreduce: Saved::take(table.coll_allreduce, table.coll_allreduce_module)?,
            reduce: Saved::take(table.coll_reduce, table.coll_reduce_module)?,
            bcast: Saved::take(table.coll_bcast, table.coll_bcast_module)?,
            iallgather: Saved::take(table.coll_iallgather, table.coll_iallgather_module),
            // SAFETY: guaranteed by the caller.
            nonblocking: unsafe { SavedNonblocking::take_from(comm) },
            nested_in_setup: NestedInSetup::new(),
        })
    }

    /// Puts the saved barrier, allreduce, reduce and bcast (and the
    /// non-blocking and persistent forms underneath) back into
    /// `comm`'s table wherever `ours` provides them; returns the names of
    /// those put back.
    ///
    /// # Safety
    /// `comm` must be the live communicator `ours` is enabled on, no call of
    /// `comm` may be reading its table concurrently, and `ours` must keep a
    /// reference besides those of the slots it fills.
    pub unsafe fn reinstall_into(&self, comm: Comm, ours: Module) -> Vec<&'static str> {
        // SAFETY: guaranteed by the caller.
        let table = unsafe { &mut *(*comm).c_coll };
        let mut reinstalled = Vec::new();
        // SAFETY: as above, for each slot.
        unsafe {
            if self.barrier.reinstall(&mut table.coll_barrier, &mut table.coll_barrier_module, ours) {
                reinstalled.push("barrier");
            }
            if self.allreduce.reinstall(&mut table.coll_allreduce, &mut table.coll_allreduce_module, ours) {
                reinstalled.push("allreduce");
            }
            if self.reduce.reinstall(&mut table.coll_reduce, &mut table.coll_reduce_module, ours) {
                reinstalled.push("reduce");
            }
            if self.bcast.reinstall(&mut table.coll_bcast, &mut table.coll_bcast_module, ours) {
                reinstalled.push("bcast");
            }
            self.nonblocking.reinstall_into(comm, ours, &mut reinstalled);
        }
        reinstalled
    }

    /// How many slots of `comm`'s table hold `ours`.
    ///
    /// # Safety
    /// `comm` must be a live communicator whose table is set up.
    pub unsafe fn slots_held(comm: Comm, ours: Module) -> usize {
        // SAFETY: guaranteed by the caller.
        let table = unsafe { &*(*comm).c_coll };
        let blocking = [table.coll_barrier_module, table.coll_allreduce_module, table.coll_reduce_module, table.coll_bcast_module]
            .into_iter()
            .filter(|&module| module == ours)
            .count();
        // SAFETY: guaranteed by the caller.
        blocking + unsafe { SavedNonblocking::slots_held(comm, ours) }
    }

    // The fallbacks are returned as closures to be run after our state is
    // released: the module underneath may call back into our entry points
    // (tuned's allreduce runs the communicator's reduce and bcast).
    // Function and module were installed together by Open MPI for this
    // communicator and stay alive through our reference.

    pub fn barrier(&self, comm: Comm) -> impl FnOnce() -> c_int + 'static {
        let (function, module) = (self.barrier.function, self.barrier.module);
        // SAFETY: see above; the arguments are the caller's own.
        move || unsafe { function(comm, module) }
    }

    pub fn allreduce(&self, call: ReductionCall) -> impl FnOnce() -> c_int + 'static {
        let (function, module) = (self.allreduce.function, self.allreduce.module);
        // SAFETY: see above; the arguments are the caller's own.
        move || unsafe { function(call.send, call.recv, call.count, call.dtype, call.op, call.comm, module) }
    }

    pub fn reduce(&self, call: ReductionCall, root: c_int) -> impl FnOnce() -> c_int + 'static {
        let (function, module) = (self.reduce.function, self.reduce.module);
        // SAFETY: see above; the arguments are the caller's own.
        move || unsafe { function(call.send, call.recv, call.count, call.dtype, call.op, root, call.comm, module) }
    }

    pub fn bcast(&self, buffer: *mut c_void, count: c_int, dtype: Datatype, root: c_int, comm: Comm) -> impl FnOnce() -> c_int + 'static {
        let (function, module) = (self.bcast.function, self.bcast.module);
        // SAFETY: see above; the arguments are the caller's own.
        move || unsafe { function(buffer, count, dtype, root, comm, module) }
    }

    /// An `Exchange` over the saved allgather on `comm`.
    pub fn exchange(&self, comm: Comm) -> SavedAllgather<'_> {
        SavedAllgather { saved: self, comm }
    }
}

pub struct SavedAllgather<'a> {
    saved: &'a SavedCollectives,
    comm: Comm,
}

impl Exchange for SavedAllgather<'_> {
    fn allgather(&self, mine: &[u8], all: &mut [u8]) -> Result<(), TransportError> {
        // SAFETY: comm is the live communicator of the current call.
        let (rank, size) = unsafe { (sys::coll_rdma_shim_comm_rank(self.comm), sys::coll_rdma_shim_comm_size(self.comm)) };
        let (rank, size) = (rank as usize, size as usize);
        if all.len() != mine.len() * size || mine.len() > c_int::MAX as usize {
            return Err(TransportError::Failed(format!(
                "allgather of {} bytes into {} for {size} ranks",
                mine.len(),
                all.len()
            )));
        }
        if self.can_post() { self.allgather_watched(mine, all, (rank, size)) } else { self.allgather_blocking(mine, all) }
    }
}

impl SavedAllgather<'_> {
    /// Whether the module underneath has a non-blocking allgather, which a
    /// setup that must not block (`PostedGather`) needs.
    pub fn can_post(&self) -> bool {
        self.saved.iallgather.is_some()
    }

    /// Posts the module underneath's non-blocking allgather of `mine`
    /// into a buffer of `all_len` bytes; `PostedGather::finish` copies
    /// the result out once it completed.
    pub fn post(&self, mine: &[u8], all_len: usize) -> Result<PostedGather, TransportError> {
        let Some(iallgather) = &self.saved.iallgather else {
            return Err(TransportError::Failed("the module underneath has no non-blocking allgather".to_string()));
        };
        let send = mine.to_vec();
        let mut gathered = vec![0u8; all_len];
        let mut request: *mut sys::ompi_request_t = std::ptr::null_mut();
        // SAFETY: MPI_BYTE is a predefined datatype; both buffers are
        // moved into the `PostedGather`, which keeps them until the
        // request completed (or leaves them allocated); function and
        // module belong together.
        let rc = unsafe {
            let byte = sys::coll_rdma_shim_mpi_byte() as Datatype;
            (iallgather.function)(
                send.as_ptr() as *const c_void,
                send.len() as c_int,
                byte,
                gathered.as_mut_ptr() as *mut c_void,
                send.len() as c_int,
                byte,
                self.comm,
                &mut request,
                iallgather.module,
            )
        };
        if rc != sys::OMPI_SUCCESS as c_int {
            return Err(TransportError::Failed(format!("saved iallgather returned {rc}")));
        }
        Ok(PostedGather { request, buffers: Some((send, gathered)) })
    }

    /// The exchange through the module underneath's non-blocking
    /// allgather, waited for like any wait of ours. A rank that never joins
    /// (coll rdma not selected for this communicator on every rank, e.g.
    /// `coll_rdma_priority` or `--mca coll` set per rank) would otherwise
    /// hang the job inside the module underneath without a word.
    fn allgather_watched(&self, mine: &[u8], all: &mut [u8], (rank, size): (usize, usize)) -> Result<(), TransportError> {
        let posted = self.post(mine, all.len())?;
        let test = || {
            if !posted.is_complete() {
                // SAFETY: Open MPI's progress, as MPI_Test runs it for a
                // request not complete yet; no lock of ours is taken.
                unsafe { sys::opal_progress() };
            }
            Ok(posted.is_complete())
        };
        let waited = btl_ibmc::wait::wait_until(rank, size, test, || SETUP_EXCHANGE_AWAITED.to_string());
        if let Err(failure) = waited {
            // SAFETY: comm is the live communicator of the current call.
            unsafe { end_job_for_abandoned_setup(self.comm, rank, &failure) };
            return Err(failure);
        }
        posted.finish(all)
    }

    fn allgather_blocking(&self, mine: &[u8], all: &mut [u8]) -> Result<(), TransportError> {
        let allgather = &self.saved.allgather;
        // SAFETY: MPI_BYTE is a predefined datatype; buffers are valid for
        // the byte counts given; function and module belong together.
        let rc = unsafe {
            let byte = sys::coll_rdma_shim_mpi_byte() as Datatype;
            (allgather.function)(
                mine.as_ptr() as *const c_void,
                mine.len() as c_int,
                byte,
                all.as_mut_ptr() as *mut c_void,
                mine.len() as c_int,
                byte,
                self.comm,
                allgather.module,
            )
        };
        if rc == sys::OMPI_SUCCESS as c_int {
            Ok(())
        } else {
            Err(TransportError::Failed(format!("saved allgather returned {rc}")))
        }
    }
}

/// A setup exchange's allgather posted in the module underneath, with the
/// buffers it reads and writes. Dropped before it completed (its wait gave
/// up, or a resumable setup was dropped with its communicator), it leaves
/// the buffers and the request allocated: the module underneath may still
/// write into them.
pub struct PostedGather {
    request: *mut sys::ompi_request_t,
    /// What this rank sends and where every rank's part lands.
    buffers: Option<(Vec<u8>, Vec<u8>)>,
}

impl PostedGather {
    /// Whether the allgather completed (it advances in Open MPI's progress
    /// only: this call runs none).
    pub fn is_complete(&self) -> bool {
        // SAFETY: the request `post` made, not freed before `finish`.
        unsafe { sys::coll_rdma_shim_request_is_complete(self.request) != 0 }
    }

    /// Frees the completed request and copies every rank's part into
    /// `all`; the request's own error if it failed.
    pub fn finish(mut self, all: &mut [u8]) -> Result<(), TransportError> {
        debug_assert!(self.is_complete());
        // SAFETY: the request `post` made, complete; freed once, here.
        let error = unsafe { free_completed(&mut self.request) };
        self.request = std::ptr::null_mut();
        let (_, gathered) = self.buffers.take().unwrap_or_default();
        if error != sys::MPI_SUCCESS as c_int {
            return Err(TransportError::Failed(format!("the setup exchange's iallgather failed with MPI error {error}")));
        }
        all.copy_from_slice(&gathered);
        Ok(())
    }
}

impl Drop for PostedGather {
    fn drop(&mut self) {
        if self.request.is_null() {
            return;
        }
        if self.is_complete() {
            // SAFETY: complete, and not freed by `finish` (which nulls it).
            unsafe { sys::coll_rdma_shim_request_free(&mut self.request) };
        } else {
            std::mem::forget(self.buffers.take());
        }
    }
}

/// Frees a completed request of the module underneath and gives its MPI
/// error (its status is final once it completed).
///
/// # Safety
/// `request` must be a live, complete request, freed nowhere else.
pub(super) unsafe fn free_completed(request: &mut *mut sys::ompi_request_t) -> c_int {
    // SAFETY: guaranteed by the caller.
    unsafe {
        let error = (**request).req_status.MPI_ERROR;
        sys::coll_rdma_shim_request_free(request);
        error
    }
}

/// What a wait for the setup exchange waits for, as its stall warning says.
pub(super) const SETUP_EXCHANGE_AWAITED: &str = "every rank of the communicator to join coll rdma's setup exchange (a rank that \
     does not select coll rdma for it, e.g. with coll_rdma_priority or --mca coll set differently per rank, never joins)";

/// The status a job ends with when a setup exchange was abandoned.
const ABANDONED_SETUP_STATUS: c_int = 71;

/// Ends the job after a setup exchange was given up: the exchange is still
/// posted in the module underneath, and the ranks that did finish it have
/// set coll rdma up while this one has not, so no later collective on the
/// communicator could match; a message beats a hang.
///
/// # Safety
/// `comm` must be the live communicator of the current call.
pub(super) unsafe fn end_job_for_abandoned_setup(comm: Comm, rank: usize, failure: &TransportError) {
    // SAFETY: guaranteed by the caller.
    let cid = unsafe { sys::coll_rdma_shim_comm_cid(comm) };
    tracing::error!(
        "comm {cid} rank {rank}: {failure}; the ranks can no longer agree on how this communicator's collectives \
         run, so the job is ended (MPI_Abort with status {ABANDONED_SETUP_STATUS})"
    );
    // SAFETY: MPI_Abort may be called from any thread that may call MPI.
    unsafe { sys::MPI_Abort(comm, ABANDONED_SETUP_STATUS) };
}
