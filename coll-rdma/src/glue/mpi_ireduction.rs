//! MPI_Iallreduce, MPI_Ireduce and their persistent forms (MPIX_*_init on
//! Open MPI 4.1, MPI_*_init on 5.0): the blocking calls' exchange and tree,
//! resumable (`collectives::{allreduce,reduce}::run`), posted in the
//! communicator's queue (`comm_state/pending.rs`) behind its earlier runs.
//!
//! A call asks the blocking call's selector (`crate::select`), so the same
//! shape takes the same decision: served here where the blocking call
//! would take a path that has a run (the one-rank copy, the exchange, the
//! tree, the parallel reduction and its read tree, the ring reduction, a
//! reduce through the two-level allreduce), handed to the module
//! underneath's non-blocking function where the blocking call hands over
//! too, with the same reason.
//! Datatypes, ops, MPI_IN_PLACE and zero counts go through the blocking
//! calls' translation (`reduction_call.rs`).
//!
//! A run reads and writes the application's buffers until its request
//! completes (MPI forbids touching them before; the parallel reduction's
//! peers read and write them too, through the addresses it announces; the
//! ring's run sends straight from the input and reduces in the result),
//! and keeps the op and datatype retained, since MPI lets the application
//! free both once the call is posted.

use std::ptr::NonNull;
use std::ffi::{c_int, c_void};

use btl_ibmc::TransportError;
use ompi_sys as sys;

use super::comm_state::{Collective, CommState, Native, Step, Unserved};
use super::datatype::OmpiReduction;
use super::deferred::{Deferred, DeferredCall};
use super::ffi_guard::guarded;
use super::handover::Handover;
use super::module::{with_state, with_state_nonblocking, NonblockingCall};
use super::reduction_call::{contribution_is_in_receive_buffer, reduction_shape, span_bytes, span_bytes_mut, FoldOrder};
use super::nonblocking_post::{start_persistent, Planned, PostAs};
use super::request::{new_request, Persistent, PersistentCall, RequestRef};
use super::saved::ReductionCall;
use super::saved_nonblocking::{Datatype, Info, Module, Op, Request};
use super::datatype::ContiguousSpan;
use crate::collectives::allreduce::AllreduceStart;
use crate::collectives::large_reduction::buffers::Gather;
use crate::collectives::reduce::ReduceStart;
use crate::reduction::Reduction;
use super::run_home::RunHome;
use crate::schedule_queue::Lane;
use crate::select::allreduce::AllreducePath;
use crate::select::reduce::ReducePath;
use crate::select::Choice;

/// The op of a posted run, with its op and datatype retained until the run
/// is dropped where the application could free them: by the run itself for
/// a call posted now; for a persistent request's run by the request, which
/// retains both from `*_init` until after it dropped the run it keeps
/// (`request.rs`, `destruct`), so that a start pays no reference of its
/// own. Predefined ones the application cannot free: retaining those cost
/// every short call four atomic updates.
struct RetainedReduction {
    reduction: OmpiReduction,
    /// The op and datatype where this value holds a reference on them
    /// (released in `drop`).
    retained: Option<(NonNull<sys::ompi_op_t>, NonNull<sys::ompi_datatype_t>)>,
}

// SAFETY: the op and datatype are Open MPI objects kept alive by the
// references taken in `new` (or by the request, or predefined); applying
// an op (ompi_op_reduce) reads them only, from whichever thread holds the
// communicator's state, one at a time (the queue moves with that state).
unsafe impl Send for RetainedReduction {}

impl RetainedReduction {
    /// The op of a run that goes to `home`.
    fn new(call: &ReductionCall, span: &ContiguousSpan, home: &RunHome<'_>) -> Self {
        // SAFETY: MPI hands us live op and datatype objects.
        let needs_references = matches!(home, RunHome::Boxed) && unsafe { sys::coll_rdma_shim_op_and_dtype_are_predefined(call.op, call.dtype) } == 0;
        let retained = if needs_references { NonNull::new(call.op).zip(NonNull::new(call.dtype)) } else { None };
        if let Some((op, dtype)) = retained {
            // SAFETY: as above; both derive from opal_object_t (their
            // first member), so the object system counts references on
            // them as on any other. Released in `drop`.
            unsafe {
                sys::coll_rdma_shim_obj_retain(op.as_ptr() as *mut sys::opal_object_t);
                sys::coll_rdma_shim_obj_retain(dtype.as_ptr() as *mut sys::opal_object_t);
            }
        }
        RetainedReduction { reduction: OmpiReduction::new(call.op, call.dtype, span.element_bytes), retained }
    }
}

impl Drop for RetainedReduction {
    fn drop(&mut self) {
        if let Some((op, dtype)) = self.retained {
            // SAFETY: the references taken in `new`.
            unsafe {
                sys::coll_rdma_shim_obj_release(op.as_ptr() as *mut sys::opal_object_t);
                sys::coll_rdma_shim_obj_release(dtype.as_ptr() as *mut sys::opal_object_t);
            }
        }
    }
}

impl Reduction for RetainedReduction {
    fn element_size(&self) -> usize {
        self.reduction.element_size()
    }

    fn is_commutative(&self) -> bool {
        self.reduction.is_commutative()
    }

    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        self.reduction.combine(lower, higher)
    }
}

#[allow(clippy::too_many_arguments)] // Open MPI's signature
pub(super) unsafe extern "C" fn iallreduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dtype: Datatype,
    op: Op,
    comm: *mut sys::ompi_communicator_t,
    request: Request,
    module: Module,
) -> c_int {
    let call = ReductionCall { send, recv, count, dtype, op, comm };
    guarded("MPI_Iallreduce", sys::OMPI_ERROR as c_int, || {
        // SAFETY: Open MPI calls us with the module it enabled for `comm`
        // and the caller's request handle.
        unsafe {
            with_state_nonblocking(
                module,
                |state| state.post_reduction(&call, None, PostAs::Now(request), None),
                NonblockingCall { call: DeferredCall::Ireduction { call, root: None }, request, agreement: has_agreement_shape(&call) },
                |saved| saved.nonblocking.iallreduce(call, request)(),
            )
        }
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
    comm: *mut sys::ompi_communicator_t,
    request: Request,
    module: Module,
) -> c_int {
    let call = ReductionCall { send, recv, count, dtype, op, comm };
    guarded("MPI_Ireduce", sys::OMPI_ERROR as c_int, || {
        // SAFETY: as for `iallreduce`.
        unsafe {
            with_state_nonblocking(
                module,
                |state| state.post_reduction(&call, Some(root), PostAs::Now(request), None),
                NonblockingCall { call: DeferredCall::Ireduction { call, root: Some(root) }, request, agreement: false },
                |saved| saved.nonblocking.ireduce(call, root, request)(),
            )
        }
    })
}

#[allow(clippy::too_many_arguments)] // Open MPI's signature
pub(super) unsafe extern "C" fn allreduce_init(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dtype: Datatype,
    op: Op,
    comm: *mut sys::ompi_communicator_t,
    info: Info,
    request: Request,
    module: Module,
) -> c_int {
    let call = ReductionCall { send, recv, count, dtype, op, comm };
    guarded("MPI_Allreduce_init", sys::OMPI_ERROR as c_int, || {
        // SAFETY: as for `iallreduce`.
        unsafe {
            with_state(
                module,
                |state| state.init_reduction(&call, None, info, request, module),
                |saved| saved.nonblocking.allreduce_init(call, info, request)(),
            )
        }
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
    comm: *mut sys::ompi_communicator_t,
    info: Info,
    request: Request,
    module: Module,
) -> c_int {
    let call = ReductionCall { send, recv, count, dtype, op, comm };
    guarded("MPI_Reduce_init", sys::OMPI_ERROR as c_int, || {
        // SAFETY: as for `iallreduce`.
        unsafe {
            with_state(
                module,
                |state| state.init_reduction(&call, Some(root), info, request, module),
                |saved| saved.nonblocking.reduce_init(call, root, info, request)(),
            )
        }
    })
}

/// MPI_Start of a persistent allreduce or reduce of ours.
///
/// # Safety
/// `request` must come from `init_reduction` on a communicator that is
/// still alive, with the buffers it names (MPI requires both of a started
/// request).
pub(super) unsafe fn start_persistent_reduction(request: RequestRef) -> c_int {
    let (Some((_, module)), Some(PersistentCall::Reduction { call, root, kept })) = (request.persistent_target(), request.persistent_call()) else {
        tracing::error!("MPI_Start: a persistent request of coll rdma started as a reduction it is not");
        return sys::OMPI_ERR_BAD_PARAM as c_int;
    };
    // SAFETY: guaranteed by the caller.
    unsafe {
        start_persistent(
            module,
            request,
            |state, request| state.post_reduction(&call, root, PostAs::Started(request), Some(kept)),
        )
    }
}

/// A persistent reduction's decision (`Native::resumable_path`), made at
/// `*_init` and kept in its request: its starts take it without asking the
/// selector or translating the datatype again, as long as the
/// communicator's decisions are of the generation it was made in
/// (`Decisions::generation`: every change of the plan moves it, and the
/// first start after that decides again and keeps the new answer). Every
/// rank asks the same selector on the same agreed plan, so every rank
/// keeps the same path.
#[derive(Clone, Copy, Debug)]
pub(super) struct KeptPath {
    generation: u64,
    /// `None`: nothing to exchange (a zero count).
    decided: Option<(ContiguousSpan, RunPath)>,
}

/// What serves a call that has a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunPath {
    /// The collective's own path (`Allreduce::start`, `Reduce::start`:
    /// exchange, tree, parallel reduction and its read tree, one rank).
    Window,
    /// The ring reduction both collectives share (`reduction_paths.rs`).
    Ring,
    /// A reduce whose root only the two-level allreduce reaches
    /// (`LeadersOnly::reduce`): an allreduce run on every rank, whose
    /// result the root keeps and the others drop.
    ThroughAllreduce,
}

/// Whether an MPI_Iallreduce has the shape of one of Open MPI's own
/// agreements: a context id's (MPI_Comm_idup, MPI_Comm_dup: one MPI_INT,
/// MPI_MAX or MPI_MIN, two buffers), or MPIX_Comm_iagree's where coll
/// ftagree does not serve it (one MPI_INT, MPI_BAND, in place). Open MPI
/// posts the former on the parent communicator from its progress loop: on
/// one rank inside a blocking collective's wait, on another in MPI_Wait
/// after that collective; ULFM's users place the latter apart from the
/// blocking calls too (mpi4py's testIAgree: an MPI_Barrier before it on
/// some ranks and after it on the others). Served here they
/// would take a place in the sequence the blocking calls share with the
/// runs, a different one on each rank, and meet a peer's blocking call
/// (a wrong result, or a hang); the module underneath numbers its
/// non-blocking calls apart from the blocking ones, where every rank's
/// agreements meet each other. So every call of that shape goes there,
/// the application's own too (on every rank alike, as they all see the
/// same shape).
fn has_agreement_shape(call: &ReductionCall) -> bool {
    // SAFETY: compares the arguments with Open MPI's predefined handles.
    call.count == 1 && unsafe { sys::coll_rdma_shim_has_agreement_shape(call.send, call.count, call.dtype, call.op) } != 0
}

/// Which call a reduction is: `root` is `None` for an allreduce.
fn collective_of(root: Option<c_int>, persistent: bool) -> Collective {
    match (root, persistent) {
        (None, false) => Collective::Iallreduce,
        (None, true) => Collective::AllreduceInit,
        (Some(_), false) => Collective::Ireduce,
        (Some(_), true) => Collective::ReduceInit,
    }
}

impl CommState {
    /// A call posted now (`kept` unused) or a persistent one started
    /// (`kept` its request's decision, renewed there if the
    /// plan changed).
    pub(super) fn post_reduction(&mut self, call: &ReductionCall, root: Option<c_int>, mut post: PostAs, kept: Option<KeptPath>) -> Step {
        if let PostAs::Now(request_out) = post
            && let Some(queued) = self.defer_behind_setup(DeferredCall::Ireduction { call: *call, root }, request_out)
        {
            return queued;
        }
        if root.is_none() && !matches!(post, PostAs::Started(_)) && has_agreement_shape(call) {
            return self.leave_agreement_underneath(call, post);
        }
        let collective = collective_of(root, matches!(post, PostAs::Started(_)));
        let order = FoldOrder::of(call.op);
        let planned = match self.enter_if_set_up() {
            Ok(mut native) => {
                native.shared.count_call(collective);
                match &mut post {
                    PostAs::Started(request) => native.kept_reduction_run(call, root, order, kept, request),
                    PostAs::Now(_) | PostAs::Queued(_) => native.reduction_run(call, root, order),
                }
            }
            Err(why) => Planned::HandOver(why),
        };
        self.post_planned(
            collective,
            order,
            call.comm,
            planned,
            post,
            |saved, request_out| match root {
                Some(root) => Box::new(saved.nonblocking.ireduce(*call, root, request_out)),
                None => Box::new(saved.nonblocking.iallreduce(*call, request_out)),
            },
        )
    }

    /// Posts an MPI_Iallreduce of an agreement's shape
    /// (`has_agreement_shape`) in the module underneath: counted apart, as
    /// a rule rather than a reason of this communicator's, and said at
    /// debug level only (every MPI_Comm_dup makes some).
    fn leave_agreement_underneath(&mut self, call: &ReductionCall, post: PostAs) -> Step {
        self.shared.agreement_underneath();
        let call = *call;
        match post {
            PostAs::Now(request_out) => {
                let saved = std::sync::Arc::clone(&self.shared.saved);
                Step::HandOver(Box::new(move || saved.nonblocking.iallreduce(call, request_out)()))
            }
            PostAs::Queued(request) => {
                Deferred::new(DeferredCall::Ireduction { call, root: None }, request).post_underneath(&self.shared.saved);
                Step::Done(sys::OMPI_SUCCESS as c_int)
            }
            // Unreachable: the caller keeps persistent starts out.
            PostAs::Started(request) => {
                drop(request);
                Step::Done(sys::OMPI_ERROR as c_int)
            }
        }
    }

    fn init_reduction(
        &mut self,
        call: &ReductionCall,
        root: Option<c_int>,
        info: Info,
        request_out: Request,
        module: Module,
    ) -> Step {
        // The path is settled here, once, and kept in the request for its
        // starts (`KeptPath`). The first `*_init` sets the communicator up
        // if nothing did before.
        let order = FoldOrder::of(call.op);
        self.set_up(call.comm);
        let decided = match self.enter_if_set_up() {
            Ok(mut native) => {
                if root.is_none()
                    && let Err(why) = native.degree_trial_at_init(call, order)
                {
                    return self.shared.finish(Collective::AllreduceInit, Err(why));
                }
                native.path_to_keep(call, root, order).map_err(Unserved::from)
            }
            Err(why) => Err(why),
        };
        let kept = match decided {
            Ok(kept) => kept,
            Err(why) => {
                let nonblocking = &self.shared.saved.nonblocking;
                let underneath: Box<dyn FnOnce() -> c_int> = match root {
                    Some(root) => Box::new(nonblocking.reduce_init(*call, root, info, request_out)),
                    None => Box::new(nonblocking.allreduce_init(*call, info, request_out)),
                };
                return self.shared.decline(collective_of(root, true), why, order, underneath);
            }
        };
        let reduction = PersistentCall::Reduction { call: *call, root, kept };
        let persistent = Persistent { comm: call.comm, module, call: reduction, start: start_persistent_reduction };
        let Some(request) = new_request(call.comm, Some(persistent)) else {
            return Step::Done(sys::OMPI_ERR_OUT_OF_RESOURCE as c_int);
        };
        // SAFETY: Open MPI passes the caller's handle.
        unsafe { *request_out = request };
        Step::Done(sys::OMPI_SUCCESS as c_int)
    }
}

impl Native<'_> {
    /// The allreduce's degree trial (blocking barriers, once per
    /// communicator), where this `*_init` is the communicator's first
    /// tree-length allreduce, as a blocking one would be: `*_init` is a
    /// nonlocal call and may wait, where a post or a start is local and
    /// may not (they take the degree as it stands).
    fn degree_trial_at_init(&mut self, call: &ReductionCall, order: FoldOrder) -> Result<(), TransportError> {
        let ready = &mut *self.ready;
        if ready.allreduce_trial.is_none() {
            return Ok(());
        }
        let (_, span) = reduction_shape(call, 0, order);
        let Ok(span) = span else { return Ok(()) };
        // The trial changes the tree, which no run may be using.
        ready.finish_pending_runs()?;
        ready.tune_degree_before(span.bytes)
    }

    /// `resumable_path`'s decision, to keep with the generation of the
    /// plan it was made on.
    fn path_to_keep(&mut self, call: &ReductionCall, root: Option<c_int>, order: FoldOrder) -> Result<KeptPath, Handover> {
        let generation = self.ready.decisions.generation();
        self.resumable_path(call, root, order).map(|decided| KeptPath { generation, decided })
    }

    /// The selector's decision for the call, as far as a run can follow
    /// it: `Ok(None)` for nothing to exchange, `Ok(Some(..))` for a run on
    /// the path named.
    fn resumable_path(&mut self, call: &ReductionCall, root: Option<c_int>, order: FoldOrder) -> Result<Option<(ContiguousSpan, RunPath)>, Handover> {
        // A negative root is left to the tree, which refuses it; MPI checks
        // roots before calling us.
        let root_index = root.map_or(0, |root| usize::try_from(root).unwrap_or(usize::MAX));
        let (shape, span) = reduction_shape(call, root_index, order);
        let decisions = &mut self.ready.decisions;
        let has_run = match root {
            None => match decisions.allreduce(&shape) {
                Choice::HandOver(why) => return Err(why),
                Choice::Native(AllreducePath::Empty) => return Ok(None),
                Choice::Native(AllreducePath::Alone | AllreducePath::Exchange | AllreducePath::Tree | AllreducePath::Parallel) => Ok(RunPath::Window),
                Choice::Native(AllreducePath::Ring) => Ok(RunPath::Ring),
            },
            Some(_) => match decisions.reduce(&shape) {
                Choice::HandOver(why) => return Err(why),
                Choice::Native(ReducePath::Empty) => return Ok(None),
                Choice::Native(ReducePath::Alone | ReducePath::Tree | ReducePath::Parallel) => Ok(RunPath::Window),
                Choice::Native(ReducePath::Ring) => Ok(RunPath::Ring),
                Choice::Native(ReducePath::ThroughAllreduce) => Ok(RunPath::ThroughAllreduce),
            },
        };
        let path = has_run.map_err(Handover::NoResumableSchedule)?;
        // The selector hands every datatype without a span over.
        let span = span.map_err(Handover::Datatype)?;
        // Unreachable today: only a transport that connects just the
        // leaders sends a reduce through the allreduce, and none of those
        // reads peers' memory (`Allreduce::start_result_dropped`).
        let plan = self.ready.decisions.plan();
        if path == RunPath::ThroughAllreduce && plan.allreduce.parallel_takes(plan.size, span.bytes) {
            return Err(Handover::NoResumableSchedule("a reduce through the parallel allreduce"));
        }
        Ok(Some((span, path)))
    }

    /// The call's run, on the selector's path (or its hand-over).
    fn reduction_run(&mut self, call: &ReductionCall, root: Option<c_int>, order: FoldOrder) -> Planned {
        match self.resumable_path(call, root, order) {
            Ok(decided) => self.run_on(call, root, decided, RunHome::Boxed),
            Err(why) => Planned::HandOver(why.into()),
        }
    }

    /// A persistent request's run, on the path it kept while the plan it
    /// was decided on stands; after a change of plan decided again, and
    /// kept in `request` for the next starts. The run goes into
    /// the request's storage (`run_home.rs`).
    fn kept_reduction_run(&mut self, call: &ReductionCall, root: Option<c_int>, order: FoldOrder, kept: Option<KeptPath>, request: &mut RequestRef) -> Planned {
        if let Some(kept) = kept.filter(|kept| kept.generation == self.ready.decisions.generation()) {
            return self.run_on(call, root, kept.decided, request.run_home());
        }
        match self.path_to_keep(call, root, order) {
            Ok(renewed) => {
                request.keep_for_next_starts(PersistentCall::Reduction { call: *call, root, kept: renewed });
                self.run_on(call, root, renewed.decided, request.run_home())
            }
            Err(why) => Planned::HandOver(why.into()),
        }
    }

    /// The run of the path `decided` (`None`: nothing to exchange), placed
    /// in `home`.
    fn run_on(&mut self, call: &ReductionCall, root: Option<c_int>, decided: Option<(ContiguousSpan, RunPath)>, home: RunHome<'_>) -> Planned {
        let Some((span, path)) = decided else { return Planned::Nothing };
        match (path, root) {
            (RunPath::Ring, root) => {
                let gather = root.map_or(Gather::All, |root| Gather::Root(root as usize));
                let reduction = RetainedReduction::new(call, &span, &home);
                self.ring_run(call, &span, gather, reduction, home)
            }
            (RunPath::Window | RunPath::ThroughAllreduce, None) => self.allreduce_run(call, &span, home),
            (RunPath::Window, Some(root)) => self.reduce_run(call, root as usize, &span, home),
            (RunPath::ThroughAllreduce, Some(root)) => self.reduce_through_allreduce_run(call, root as usize, &span, home),
        }
    }

    /// The run of a reduce that goes through the two-level allreduce (the
    /// blocking call's `reduce_through_allreduce`): the root's allreduce
    /// run reduces into its receive buffer (in place where MPI_IN_PLACE),
    /// every other rank's into a buffer the run owns and drops, so their
    /// receive buffers stay untouched. In the allreduce's lane: it is an
    /// allreduce call, numbered and ordered among the others. No degree
    /// trial first, as in the blocking call (the two-level tree keeps its
    /// degree).
    fn reduce_through_allreduce_run(&mut self, call: &ReductionCall, root: usize, span: &ContiguousSpan, home: RunHome<'_>) -> Planned {
        let ready = &mut *self.ready;
        let transport = &ready.transport;
        let reduction = RetainedReduction::new(call, span, &home);
        let run = if root == ready.id.rank {
            // SAFETY: at the root MPI guarantees recv holds `count`
            // elements of `dtype`, left alone until the request completes.
            let recv = unsafe { span_bytes_mut(call.recv, span) };
            if contribution_is_in_receive_buffer(call, span) {
                ready.allreduce.start_in_place(transport, reduction, recv).map(|run| home.place(run, ready.pending_runs.spare_boxes()))
            } else {
                // SAFETY: as for recv; send is neither MPI_IN_PLACE nor
                // overlapping recv.
                let send = unsafe { span_bytes(call.send, span) };
                ready.allreduce.start(transport, reduction, send, recv).map(|run| home.place(run, ready.pending_runs.spare_boxes()))
            }
        } else {
            // SAFETY: MPI guarantees send holds `count` elements of
            // `dtype`, left alone until the request completes (not
            // MPI_IN_PLACE: that is only allowed at the root).
            let send = unsafe { span_bytes(call.send, span) };
            ready.allreduce.start_result_dropped(transport, reduction, send).map(|run| home.place(run, ready.pending_runs.spare_boxes()))
        };
        match run {
            Ok(run) => Planned::Run(Lane::Allreduce, run),
            Err(why) => Planned::Failed(why),
        }
    }

    /// No degree trial here: its barriers would make a local call wait
    /// for the other ranks. The first blocking tree-length allreduce or
    /// `*_init` runs it (`degree_trial_at_init`).
    fn allreduce_run(&mut self, call: &ReductionCall, span: &ContiguousSpan, mut home: RunHome<'_>) -> Planned {
        let ready = &mut *self.ready;
        let (allreduce, transport) = (&mut ready.allreduce, &ready.transport);
        if let Some(restarted) = home.restarted::<AllreduceStart<'static, RetainedReduction>>(Lane::Allreduce, |finished| allreduce.restart(transport, finished)) {
            return restarted;
        }
        let reduction = RetainedReduction::new(call, span, &home);
        // SAFETY: MPI guarantees recv holds `count` elements of `dtype`,
        // which `span` describes, and that the application leaves it alone
        // until the request completes; the run ends no later.
        let recv = unsafe { span_bytes_mut(call.recv, span) };
        // SAFETY: as for recv; send is neither MPI_IN_PLACE nor
        // overlapping recv where it is read.
        let send = (!contribution_is_in_receive_buffer(call, span)).then(|| unsafe { span_bytes(call.send, span) });
        let run = home.place_made(ready.pending_runs.spare_boxes(), |slot| allreduce.start_into(transport, reduction, send, recv, slot));
        match run {
            Ok(run) => Planned::Run(Lane::Allreduce, run),
            Err(why) => Planned::Failed(why),
        }
    }

    fn reduce_run(&mut self, call: &ReductionCall, root: usize, span: &ContiguousSpan, mut home: RunHome<'_>) -> Planned {
        let ready = &mut *self.ready;
        let (reduce, transport) = (&mut ready.reduce, &ready.transport);
        if let Some(restarted) = home.restarted::<ReduceStart<'static, RetainedReduction>>(Lane::Reduce, |finished| reduce.restart(transport, finished)) {
            return restarted;
        }
        let reduction = RetainedReduction::new(call, span, &home);
        let at_root = root == ready.id.rank;
        // The receive buffer is significant only at the root; MPI_IN_PLACE
        // likewise only means something there.
        let in_place = at_root && contribution_is_in_receive_buffer(call, span);
        // SAFETY: at the root MPI guarantees recv holds `count` elements of
        // `dtype`, left alone until the request completes; elsewhere it is
        // not touched.
        let recv = at_root.then(|| unsafe { span_bytes_mut(call.recv, span) });
        // SAFETY: MPI guarantees send holds `count` elements of `dtype`,
        // left alone until the request completes, where it is not
        // MPI_IN_PLACE (only allowed at the root).
        let send = (!in_place).then(|| unsafe { span_bytes(call.send, span) });
        let run = home.place_made(ready.pending_runs.spare_boxes(), |slot| reduce.start_into(transport, reduction, root, send, recv, slot));
        match run {
            Ok(run) => Planned::Run(Lane::Reduce, run),
            Err(why) => Planned::Failed(why),
        }
    }
}
