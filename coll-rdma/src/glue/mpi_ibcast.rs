//! MPI_Ibcast and the persistent bcast (MPIX_Bcast_init on Open MPI 4.1,
//! MPI_Bcast_init on 5.0): the single-copy bcast, the multicast (through
//! the root's shared window on shm, datagrams over udp and verbs
//! multicast) or the put tree's, flat or in the two-level stages (the
//! leaders' datagram multicast included), resumable
//! (`collectives::bcast::BcastRun`), posted in the communicator's queue
//! (`comm_state/pending.rs`) behind its earlier runs.
//!
//! A call asks the blocking call's selector (`crate::select::bcast`), so
//! the same shape takes the same decision: handed to the module
//! underneath's non-blocking function with the reason where the blocking
//! call hands over, or where it would take a path without a run (above
//! 2^31 - 1 bytes). A datagram run, flat or the
//! leaders' stage, needs the bcast's side progress while it is pending
//! and after it (a root's retransmissions): the progress callback serves
//! it at every pass and so does the drain before a blocking call
//! (`ReadyComm::finish_pending_runs`). On shm the run multicasts through
//! the root's window as the blocking call does, on the same sequence
//! numbers, where ranks outnumber cores, and takes the put tree beside it
//! where they do not (`Bcast::start`).
//!
//! Every choice rests on facts every rank shares (length, root), so every
//! rank serves or hands over the same calls. A rank whose datatype is not
//! contiguous (MPI lets ranks use different datatypes of one signature)
//! runs over a packed copy: the root packs at post, a receiver unpacks
//! when the run is done (`PackedBcastRun`). Otherwise the run reads and
//! writes the application's buffer until the request completes.

use std::ffi::{c_int, c_void};

use btl_ibmc::{SelectedTransport, TransportError};
use ompi_sys as sys;

use super::comm_state::{Collective, CommState, Native, Step, Unserved};
use super::ffi_guard::guarded;
use super::handover::Handover;
use super::module::{with_state, with_state_nonblocking, NonblockingCall};
use super::mpi_bcast::{bcast_shape, pack, unpack};
use super::nonblocking_post::{start_persistent, Planned, PostAs};
use super::reduction_call::{span_bytes_mut, FoldOrder};
use super::request::{new_request, Persistent, PersistentCall, RequestRef};
use super::datatype::ContiguousSpan;
use super::deferred::DeferredCall;
use super::saved_nonblocking::{BcastCall, Comm, Datatype, Info, Module, Request};
use crate::collectives::bcast::{Bcast, BcastRun};
use crate::schedule::{Schedule, Step as RunStep};
use super::run_home::RunHome;
use crate::schedule_queue::Lane;
use crate::select::bcast::{select, BcastPath};
use crate::select::Choice;

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
        // SAFETY: Open MPI calls us with the module it enabled for `comm`
        // and the caller's request handle.
        unsafe {
            with_state_nonblocking(
                module,
                |state| state.post_bcast(&call, PostAs::Now(request), None),
                NonblockingCall { call: DeferredCall::Ibcast(call), request, agreement: false },
                |saved| saved.nonblocking.ibcast(call, request)(),
            )
        }
    })
}

#[allow(clippy::too_many_arguments)] // Open MPI's signature
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
        unsafe {
            with_state(
                module,
                |state| state.init_bcast(&call, info, request, module),
                |saved| saved.nonblocking.bcast_init(call, info, request)(),
            )
        }
    })
}

/// MPI_Start of a persistent bcast of ours.
///
/// # Safety
/// `request` must come from `init_bcast` on a communicator that is
/// still alive, with the buffer it names (MPI requires both of a started
/// request).
unsafe fn start_persistent_bcast(request: RequestRef) -> c_int {
    let (Some((_, module)), Some(PersistentCall::Bcast(call, kept))) = (request.persistent_target(), request.persistent_call()) else {
        tracing::error!("MPI_Start: a persistent request of coll rdma started as a bcast it is not");
        return sys::OMPI_ERR_BAD_PARAM as c_int;
    };
    // SAFETY: guaranteed by the caller.
    unsafe {
        start_persistent(
            module,
            request,
            |state, request| state.post_bcast(&call, PostAs::Started(request), Some(kept)),
        )
    }
}

impl CommState {
    /// A call posted now (`kept` unused) or a persistent one started
    /// (`kept` its request's decision, renewed there if the
    /// plan changed).
    pub(super) fn post_bcast(&mut self, call: &BcastCall, mut post: PostAs, kept: Option<KeptBcast>) -> Step {
        if let PostAs::Now(request_out) = post
            && let Some(queued) = self.defer_behind_setup(DeferredCall::Ibcast(*call), request_out)
        {
            return queued;
        }
        let collective = if matches!(post, PostAs::Started(_)) { Collective::BcastInit } else { Collective::Ibcast };
        let planned = match self.enter_if_set_up() {
            Ok(mut native) => {
                native.shared.count_call(collective);
                match &mut post {
                    PostAs::Started(request) => native.kept_bcast_run(call, kept, request),
                    PostAs::Now(_) | PostAs::Queued(_) => match native.bcast_to_send(call) {
                        Ok(decided) => native.bcast_run(call, decided, RunHome::Boxed),
                        Err(why) => Planned::HandOver(why.into()),
                    },
                }
            }
            Err(why) => Planned::HandOver(why),
        };
        self.post_planned(
            collective,
            FoldOrder::Any,
            call.comm,
            planned,
            post,
            |saved, request_out| Box::new(saved.nonblocking.ibcast(*call, request_out)),
        )
    }

    fn init_bcast(&mut self, call: &BcastCall, info: Info, request_out: Request, module: Module) -> Step {
        // The path is settled here, once, by the selector the starts ask
        // again: the same shape gives the same answer. The first `*_init`
        // sets the communicator up if nothing did before.
        self.set_up(call.comm);
        let decided = match self.enter_if_set_up() {
            Ok(mut native) => native.bcast_to_keep(call).map_err(Unserved::from),
            Err(why) => Err(why),
        };
        let kept = match decided {
            Ok(kept) => kept,
            Err(why) => {
                let underneath = self.shared.saved.nonblocking.bcast_init(*call, info, request_out);
                return self.shared.decline(Collective::BcastInit, why, FoldOrder::Any, underneath);
            }
        };
        let persistent = Persistent { comm: call.comm, module, call: PersistentCall::Bcast(*call, kept), start: start_persistent_bcast };
        let Some(request) = new_request(call.comm, Some(persistent)) else {
            return Step::Done(sys::OMPI_ERR_OUT_OF_RESOURCE as c_int);
        };
        // SAFETY: Open MPI passes the caller's handle.
        unsafe { *request_out = request };
        Step::Done(sys::OMPI_SUCCESS as c_int)
    }
}

/// What a bcast run sends: `bytes` (0: nothing), from the application's
/// buffer where `span` describes it, else from a packed copy.
#[derive(Clone, Copy, Debug)]
struct BcastToSend {
    bytes: usize,
    span: Option<ContiguousSpan>,
}

/// A persistent bcast's decision, made at `*_init` and kept in its
/// request, as a persistent reduction keeps its path (`KeptPath`): valid
/// while the communicator's decisions are of the generation it was made
/// in. Every rank decides on the same agreed plan and the same length, so
/// every rank keeps the same.
#[derive(Clone, Copy, Debug)]
pub(super) struct KeptBcast {
    generation: u64,
    decided: BcastToSend,
}

impl Native<'_> {
    /// What a run sends for the call (a length of 0: nothing), else why it
    /// is handed over.
    fn bcast_to_send(&mut self, call: &BcastCall) -> Result<BcastToSend, Handover> {
        let (shape, span) = bcast_shape(call);
        let bytes = match select(&shape, self.ready.decisions.plan()) {
            Choice::HandOver(why) => return Err(why),
            Choice::Native(BcastPath::Empty) => 0,
            Choice::Native(BcastPath::Send { agree_on_packing: true, .. }) => {
                return Err(Handover::NoResumableSchedule("a bcast of more than 2^31 - 1 bytes"));
            }
            Choice::Native(BcastPath::Send { bytes, .. }) => bytes,
        };
        Ok(BcastToSend { bytes, span: span.ok() })
    }

    /// `bcast_to_send`'s decision, to keep with the generation of the plan
    /// it was made on.
    fn bcast_to_keep(&mut self, call: &BcastCall) -> Result<KeptBcast, Handover> {
        let generation = self.ready.decisions.generation();
        self.bcast_to_send(call).map(|decided| KeptBcast { generation, decided })
    }

    /// A persistent request's run, on the decision it kept while the plan
    /// it was made on stands; after a change of plan decided again, and
    /// kept in `request` for the next starts. The run goes into the
    /// request's storage (`run_home.rs`).
    fn kept_bcast_run(&mut self, call: &BcastCall, kept: Option<KeptBcast>, request: &mut RequestRef) -> Planned {
        if let Some(kept) = kept.filter(|kept| kept.generation == self.ready.decisions.generation()) {
            return self.bcast_run(call, kept.decided, request.run_home());
        }
        match self.bcast_to_keep(call) {
            Ok(renewed) => {
                request.keep_for_next_starts(PersistentCall::Bcast(*call, renewed));
                self.bcast_run(call, renewed.decided, request.run_home())
            }
            Err(why) => Planned::HandOver(why.into()),
        }
    }

    /// The run that sends `decided` for the call, placed in `home`.
    fn bcast_run(&mut self, call: &BcastCall, decided: BcastToSend, home: RunHome<'_>) -> Planned {
        let BcastToSend { bytes, span } = decided;
        if bytes == 0 {
            return Planned::Nothing;
        }
        let root = call.root as usize;
        let ready = &mut *self.ready;
        let run = match span {
            Some(span) => {
                // SAFETY: MPI guarantees the buffer holds `count` elements
                // of `dtype`, which `span` describes, and that the
                // application leaves it alone until the request completes;
                // the run ends no later.
                let buffer = unsafe { span_bytes_mut(call.buffer, &span) };
                let (bcast, transport) = (&mut ready.bcast, &ready.transport);
                home.place_made(ready.pending_runs.spare_boxes(), |slot| bcast.start_into(transport, root, buffer, slot))
            }
            None => return self.packed_bcast_run(call, root, bytes, home),
        };
        match run {
            Ok(run) => Planned::Run(Lane::Bcast, run),
            Err(why) => Planned::Failed(why),
        }
    }

    fn packed_bcast_run(&mut self, call: &BcastCall, root: usize, bytes: usize, home: RunHome<'_>) -> Planned {
        let ready = &mut *self.ready;
        let at_root = root == ready.id.rank;
        let mut packed = vec![0u8; bytes].into_boxed_slice();
        if at_root && let Err(rc) = pack(call, &mut packed) {
            // The receivers' runs wait for this message: after the earlier
            // runs, the run's path tells them it will not come.
            let told = ready.finish_pending_runs().and_then(|()| ready.bcast.abandon_run_at_root(&ready.transport, root, bytes));
            return Planned::Failed(TransportError::Failed(format!(
                "the bcast root could not pack its {bytes}-byte message (error {rc}); its receivers were told ({})",
                match told {
                    Ok(()) => "sent".to_string(),
                    Err(why) => format!("failed: {why}"),
                }
            )));
        }
        let unpack_into = (!at_root).then(|| RetainedCall::new(*call));
        match PackedBcastRun::start(&mut ready.bcast, &ready.transport, root, packed, unpack_into) {
            Ok(run) => Planned::Run(Lane::Bcast, home.place(run, ready.pending_runs.spare_boxes())),
            Err(why) => Planned::Failed(why),
        }
    }
}

/// A receiver's call, its datatype retained until the unpack: MPI lets
/// the application free the datatype once the call is posted.
struct RetainedCall(BcastCall);

impl RetainedCall {
    fn new(call: BcastCall) -> Self {
        // SAFETY: MPI hands us a live datatype, derived from opal_object_t;
        // released in `drop`.
        unsafe { sys::coll_rdma_shim_obj_retain(call.dtype as *mut sys::opal_object_t) };
        RetainedCall(call)
    }
}

impl Drop for RetainedCall {
    fn drop(&mut self) {
        // SAFETY: the reference taken in `new`.
        unsafe { sys::coll_rdma_shim_obj_release(self.0.dtype as *mut sys::opal_object_t) };
    }
}

/// A bcast run over a packed copy of the message, for a rank whose
/// datatype is not contiguous: it owns the copy the run borrows, and a receiver unpacks from it once the run is done.
///
/// Invariant: `packed` is a leaked `Box<[u8]>`, freed in `drop` only
/// after `run`, the one borrower, is gone.
struct PackedBcastRun {
    run: Option<BcastRun<'static>>,
    packed: *mut [u8],
    unpack_into: Option<RetainedCall>,
}

// SAFETY: the packed copy is owned by this value alone (the run's borrow
// included), and the receiver's buffer and datatype are the application's,
// which MPI leaves to the call until its request completes; the queue
// moves with its communicator's state, one thread at a time.
unsafe impl Send for PackedBcastRun {}

impl PackedBcastRun {
    fn start(
        bcast: &mut Bcast,
        transport: &SelectedTransport,
        root: usize,
        packed: Box<[u8]>,
        unpack_into: Option<RetainedCall>,
    ) -> Result<Self, TransportError> {
        let mut this = PackedBcastRun { run: None, packed: Box::into_raw(packed), unpack_into };
        // SAFETY: the allocation lives until `drop`, which drops the run
        // first (see the invariant).
        let buffer: &'static mut [u8] = unsafe { &mut *this.packed };
        this.run = Some(bcast.start(transport, root, buffer)?);
        Ok(this)
    }
}

impl Schedule<SelectedTransport> for PackedBcastRun {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut SelectedTransport) -> Result<RunStep, TransportError> {
        if let Some(run) = self.run.as_mut() {
            if run.advance(transport)? == RunStep::Pending {
                return Ok(RunStep::Pending);
            }
            self.run = None;
        }
        if let Some(RetainedCall(call)) = self.unpack_into.take() {
            // SAFETY: the run that wrote into the copy is gone.
            let packed: &[u8] = unsafe { &*self.packed };
            unpack(&call, packed)
                .map_err(|rc| TransportError::Failed(format!("unpacking a {}-byte bcast into the receiver's datatype failed (error {rc})", packed.len())))?;
        }
        Ok(RunStep::Done)
    }
}

impl Drop for PackedBcastRun {
    fn drop(&mut self) {
        self.run = None;
        // SAFETY: leaked in `start`, its borrower dropped just above.
        drop(unsafe { Box::from_raw(self.packed) });
    }
}
