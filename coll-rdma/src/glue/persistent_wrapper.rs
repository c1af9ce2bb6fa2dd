//! Persistent collectives made before their communicator is set up
//! (`MPIX_*_init` on Open MPI 4.1, `MPI_*_init` on 5.0, before the
//! communicator's first blocking collective): coll rdma's own request,
//! wrapping the request the module underneath's `*_init` made.
//!
//! A communicator is set up by its first blocking collective, never by a
//! non-blocking or persistent call (`comm_state/mod.rs`). A persistent
//! request lives on, though: OSU's persistent benchmarks make theirs before
//! any blocking call and start it for every size. So the request decides
//! its path at its starts, not at `*_init`:
//! - while the communicator is not set up, a start starts the wrapped
//!   request, and the wrapper completes when it does (its completion
//!   callback; the wrapper's status carries its error);
//! - the first start that finds it set up and the call served here (the
//!   same verdict `*_init` gives on a set-up communicator) makes the
//!   request coll rdma's for good: that start and every later one run
//!   here, as a request made after the setup does;
//! - the first start that finds a reason to hand the call over (no
//!   transport, a datatype, a limit) counts it handed over once, and every
//!   start from then on uses the wrapped request.
//!
//! Every rank decides alike: all set up at the same blocking call, and MPI
//! makes every rank start a communicator's persistent collectives in the
//! same order relative to its other collectives.
//!
//! A start does not set the communicator up itself. MPI_Start is local:
//! a program may start on one rank, then send to a peer that starts only
//! once it received. The setup is a blocking exchange among all ranks, so
//! a start that made it would wait for that peer, which waits for this
//! rank's send: a deadlock in a correct program.
//!
//! Invariants:
//! - the wrapped request is started only by a wrapper's start while the
//!   wrapper is inactive, and the wrapper completes only from the wrapped
//!   one's completion callback, after `coll_rdma_shim_request_settle`
//!   marked that one complete and inactive: so it is never started while
//!   active (MPI forbids restarting the wrapper before it completed), and
//!   it is complete whenever the wrapper is freed;
//! - while the wrapped request runs, its callback data holds a reference
//!   on the wrapper (`RequestRef::into_raw`), given up by the callback: a
//!   wrapper the application frees while active (erroneous in MPI, and
//!   refused by libnbc's own requests, yet harmless here) lives until
//!   then, and the wrapped request is freed by the wrapper's destructor
//!   (`Wrapped`'s drop), possibly inside that callback, which therefore
//!   tells Open MPI to touch the request no more (returns 1);
//! - the path only ever moves from undecided to ours or to underneath, at
//!   a start, by the thread that starts (MPI lets one thread start a
//!   request at a time).

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU8, Ordering};

use ompi_sys as sys;

use super::comm_state::{Collective, CommState, Step, Unserved};
use super::ffi_guard::guarded;
use super::module::with_state;
use super::reduction_call::FoldOrder;
use super::request::{new_wrapper, Persistent, PersistentCall, RequestRef};
use super::saved_nonblocking::Request;

/// Which request a wrapper's starts run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Path {
    /// Not set up yet (or the state could not be entered): this start runs
    /// the wrapped request, the next one asks again.
    Undecided = 0,
    /// coll rdma's run, from now on.
    Ours = 1,
    /// The wrapped request, from now on.
    Underneath = 2,
}

impl Path {
    fn from_u8(value: u8) -> Path {
        match value {
            1 => Path::Ours,
            2 => Path::Underneath,
            _ => Path::Undecided,
        }
    }
}

/// The module underneath's persistent request inside one of ours, and the
/// path decided for it.
pub(super) struct Wrapped {
    inner: *mut sys::ompi_request_t,
    path: AtomicU8,
}

impl Wrapped {
    /// # Safety
    /// `inner` must be a persistent request of the module underneath,
    /// inactive, owned by the caller (it is freed with this value).
    pub(super) unsafe fn new(inner: *mut sys::ompi_request_t) -> Self {
        Wrapped { inner, path: AtomicU8::new(Path::Undecided as u8) }
    }

    /// MPI_Start of the wrapper whose `persistent` this is; `run` is the
    /// reference its run holds (the wrapper is already activated).
    ///
    /// # Safety
    /// `persistent` must be the wrapper's own, its communicator alive.
    pub(super) unsafe fn start(&self, persistent: Persistent, run: RequestRef) -> c_int {
        let mut path = Path::from_u8(self.path.load(Ordering::Relaxed));
        if path == Path::Undecided {
            // SAFETY: guaranteed by the caller.
            path = unsafe { decide(&persistent) };
            self.path.store(path as u8, Ordering::Relaxed);
        }
        match path {
            // SAFETY: the start function was chosen together with the
            // communicator and module it serves (guaranteed by the caller).
            Path::Ours => unsafe { (persistent.start)(persistent, run) },
            Path::Underneath | Path::Undecided => self.start_inner(run),
        }
    }

    /// Starts the wrapped request; the wrapper completes when it does.
    fn start_inner(&self, run: RequestRef) -> c_int {
        // Nothing of ours to poll in MPI_Wait: Open MPI's loop drives the
        // module underneath.
        run.spin_in_wait(0);
        let wrapper = run.into_raw();
        let mut inner = self.inner;
        // SAFETY: `inner` is inactive (see the invariants); the callback
        // takes the reference `wrapper` carries, exactly once, and only if
        // the start returned 0.
        let rc = unsafe { sys::coll_rdma_shim_request_start_watched(&mut inner, Some(inner_completed), wrapper as *mut c_void) };
        match rc {
            0 => sys::OMPI_SUCCESS as c_int,
            1 => {
                // SAFETY: the reference `into_raw` gave, not taken by any
                // callback (none was set).
                unsafe { RequestRef::from_raw(wrapper) }.finish(sys::MPI_SUCCESS as c_int);
                sys::OMPI_SUCCESS as c_int
            }
            error => {
                tracing::error!("MPI_Start: the module underneath could not start the persistent request coll rdma wraps (error {error})");
                // SAFETY: as above: the shim took the callback off.
                unsafe { RequestRef::from_raw(wrapper) }.finish(sys::MPI_ERR_OTHER as c_int);
                error
            }
        }
    }
}

impl Drop for Wrapped {
    fn drop(&mut self) {
        // SAFETY: ours since `new`, complete (see the invariants).
        let rc = unsafe { sys::coll_rdma_shim_request_free(&mut self.inner) };
        if rc != sys::OMPI_SUCCESS as c_int {
            tracing::error!("freeing the module underneath's persistent request that coll rdma wrapped failed (error {rc})");
        }
    }
}

/// The wrapped request's completion callback: completes the wrapper with
/// its error and gives up the reference its start took.
unsafe extern "C" fn inner_completed(inner: *mut sys::ompi_request_t) -> c_int {
    guarded("the completion of a wrapped persistent request", 1, || {
        // SAFETY: Open MPI calls this once per start, with the request the
        // start watched; its data is the wrapper whose reference that
        // start gave (`start_inner`).
        unsafe {
            let wrapper = sys::coll_rdma_shim_request_watch_data(inner) as *mut sys::ompi_request_t;
            let error = sys::coll_rdma_shim_request_settle(inner);
            RequestRef::from_raw(wrapper).finish(mpi_error_class(error));
        }
        // Done: Open MPI must not touch `inner` again (freed already if
        // the wrapper was).
        1
    })
}

/// The MPI error class for a request status the module underneath wrote
/// (an MPI class, or one of Open MPI's negative codes).
fn mpi_error_class(status_error: c_int) -> c_int {
    match status_error {
        0 => sys::MPI_SUCCESS as c_int,
        class if class > 0 => class,
        _ => sys::MPI_ERR_OTHER as c_int,
    }
}

/// The path for this start of a wrapper still undecided: asks the
/// communicator's state.
///
/// # Safety
/// As `Wrapped::start`.
unsafe fn decide(persistent: &Persistent) -> Path {
    let path = Cell::new(Path::Undecided);
    // SAFETY: the module was enabled on the request's communicator, which
    // MPI keeps alive while it is started. Nested in our own call or after
    // a failure, the state is not entered and the path stays undecided.
    unsafe { with_state(persistent.module, |state| state.decide_wrapped(&persistent.call, &path), |_| sys::OMPI_SUCCESS as c_int) };
    path.get()
}

impl PersistentCall {
    fn collective(&self) -> Collective {
        match self {
            PersistentCall::Barrier => Collective::BarrierInit,
            PersistentCall::Reduction { root: None, .. } => Collective::AllreduceInit,
            PersistentCall::Reduction { root: Some(_), .. } => Collective::ReduceInit,
            PersistentCall::Bcast(..) => Collective::BcastInit,
        }
    }

    fn order(&self) -> FoldOrder {
        match self {
            PersistentCall::Reduction { call, .. } => FoldOrder::of(call.op),
            PersistentCall::Barrier | PersistentCall::Bcast(..) => FoldOrder::Any,
        }
    }
}

impl CommState {
    /// Decides a wrapper's path where it is decided (see the module
    /// header): a hand-over is counted, with its reason, once per request;
    /// a start before the setup is said as any call before it is.
    fn decide_wrapped(&mut self, call: &PersistentCall, path: &Cell<Path>) -> Step {
        let verdict = match call {
            PersistentCall::Barrier => self.barrier_init_verdict(),
            PersistentCall::Reduction { call, root, .. } => self.reduction_init_verdict(call, *root),
            PersistentCall::Bcast(call, _) => self.bcast_init_verdict(call),
        };
        let why = match verdict {
            Ok(()) => {
                path.set(Path::Ours);
                return Step::Done(sys::OMPI_SUCCESS as c_int);
            }
            Err(why) => why,
        };
        if !matches!(why, Unserved::BeforeSetup) {
            path.set(Path::Underneath);
        }
        self.shared.decline(call.collective(), why, call.order(), || sys::OMPI_SUCCESS as c_int)
    }

    /// `*_init` on a communicator not set up yet: `underneath_init` makes
    /// the module underneath's request in the caller's handle, and coll
    /// rdma's wrapper takes its place there.
    pub(super) fn wrap_persistent_init(
        &mut self,
        persistent: Persistent,
        request_out: Request,
        underneath_init: impl FnOnce() -> c_int + 'static,
    ) -> Step {
        tracing::debug!(
            "comm {} rank {}: {} made before the communicator is set up: coll rdma's request wraps the module underneath's \
             and decides at each start",
            self.shared.id.cid,
            self.shared.id.rank,
            persistent.call.collective().name()
        );
        Step::HandOver(Box::new(move || {
            let rc = underneath_init();
            if rc != sys::OMPI_SUCCESS as c_int {
                return rc;
            }
            // SAFETY: Open MPI passed the caller's handle, where the module
            // underneath just wrote its new, inactive persistent request.
            let inner = unsafe { *request_out };
            // SAFETY: that request is ours to own from here.
            match unsafe { new_wrapper(persistent, inner) } {
                Some(wrapper) => {
                    // SAFETY: as above.
                    unsafe { *request_out = wrapper };
                    sys::OMPI_SUCCESS as c_int
                }
                None => {
                    // SAFETY: as above; nobody else has it.
                    unsafe { sys::coll_rdma_shim_request_free(request_out) };
                    sys::OMPI_ERR_OUT_OF_RESOURCE as c_int
                }
            }
        }))
    }
}
