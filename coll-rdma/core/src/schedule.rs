//! A collective that advances without blocking: each `advance` does what can be done now and returns.
//! Invariants: once `advance` has returned `Done`, it is not called again
//! for that run; `awaited` only names a word, it never consumes anything,
//! so `advance` stays the one place where a run moves.

/// What one call of [`Schedule::advance`] left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Waiting on peers; call again later (from the progress loop).
    Pending,
    /// Finished; results are in the caller's buffers.
    Done,
}

/// A word of this rank's own window that a pending run waits for: its
/// next `advance` can get nothing done while the word is below `at_least`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AwaitedWord {
    pub offset: usize,
    pub at_least: u64,
}

impl AwaitedWord {
    /// Whether the word has reached its target (one acquire load).
    #[inline]
    pub fn arrived<T: btl_ibmc::Windows + ?Sized>(&self, transport: &T) -> bool {
        transport.local_flag(self.offset) >= self.at_least
    }
}

/// How far a run may go beside the earlier runs of its lane
/// (`Schedule::overlap`): it is call `number` of its collective, and needs
/// only every call numbered `number - depth` or lower finished on this
/// rank, not all earlier ones. Runs of a lane that overlap number their
/// calls from one counter, in post order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlap {
    pub number: u64,
    pub depth: u64,
}

impl Overlap {
    /// Whether this run may advance while `oldest` (the oldest unfinished
    /// run of its lane, an overlapping one) is still unfinished.
    pub fn may_pass(&self, oldest: Overlap) -> bool {
        self.number.saturating_sub(oldest.number) < self.depth
    }
}

/// A resumable collective over a transport `T`.
pub trait Schedule<T: ?Sized> {
    /// Error a run can end with (a peer that died, a transport fault).
    type Error;
    /// Does every step that needs no waiting.
    fn advance(&mut self, transport: &mut T) -> Result<Step, Self::Error>;

    /// After an `advance` that returned `Pending`: the first word of the
    /// own window the run found missing, if it waits on one (not on a
    /// peer's memory, a datagram or the transport). A waiter may poll that
    /// word alone, a few loads, and call `advance` once it arrived (or
    /// every so often anyway: the transport's own progress and the fault
    /// timeout live in `advance`).
    fn awaited(&self) -> Option<AwaitedWord> {
        None
    }

    /// Whether this run may take its first step before the earlier runs
    /// of its lane finished, and how far ahead of them (`schedule_queue`):
    /// `None`, the default, waits for every earlier run of its lane; a run
    /// that says `Some` must keep its collective's slot arguments with
    /// only the calls `depth` or more before it finished, write to its
    /// peers only in its first step, and then only read what they write
    /// (a short allreduce's exchange, whose slot sets go round every
    /// `2 * depth` calls). The same answer from the run's start until it
    /// finished: the queue reads it once, at post.
    fn overlap(&self) -> Option<Overlap> {
        None
    }

    /// Takes over the scratch storage of `finished`, an earlier run of the
    /// same kind that is over (a persistent request's previous start), so
    /// that this run grows no buffer it already had: no allocation per
    /// start once the first has sized them. Storage only, never state: a
    /// run is whole without it.
    fn reuse_storage_of(&mut self, finished: &mut Self)
    where
        Self: Sized,
    {
        let _ = finished;
    }
}

/// A boxed run is a run: the queue's runs are boxed, and a caller that
/// tries a run before queueing it (`ScheduleQueue::may_advance_now`) may hold
/// one boxed already.
impl<T: ?Sized, S: Schedule<T> + ?Sized> Schedule<T> for Box<S> {
    type Error = S::Error;

    fn advance(&mut self, transport: &mut T) -> Result<Step, Self::Error> {
        (**self).advance(transport)
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        (**self).awaited()
    }

    fn overlap(&self) -> Option<Overlap> {
        (**self).overlap()
    }
}

/// Where a `start_into` builds a run: the memory it stays in. A caller
/// that keeps runs on the heap hands in the heap's block
/// (`MaybeUninit`), so that the run is built there instead of being
/// returned and then moved: each move of a short run was a memcpy call of
/// about 170-250 bytes, two or three per non-blocking post. Callers that
/// want the run back as a value hand in an `Option`.
pub trait RunSlot<'s, S> {
    /// Puts `run` here; the run, in its place.
    fn fill(self, run: S) -> &'s mut S;
}

impl<'s, S> RunSlot<'s, S> for &'s mut std::mem::MaybeUninit<S> {
    #[inline(always)]
    fn fill(self, run: S) -> &'s mut S {
        self.write(run)
    }
}

impl<'s, S> RunSlot<'s, S> for &'s mut Option<S> {
    #[inline(always)]
    fn fill(self, run: S) -> &'s mut S {
        self.insert(run)
    }
}

/// The run `start_into` builds, as a value: built in an `Option` slot
/// (`RunSlot`) and taken out of it.
#[inline(always)]
pub fn built<S>(
    start_into: impl FnOnce(&mut Option<S>) -> Result<&mut S, btl_ibmc::TransportError>,
) -> Result<S, btl_ibmc::TransportError> {
    let mut slot = None;
    start_into(&mut slot)?;
    slot.ok_or_else(|| btl_ibmc::TransportError::Failed("a start returned without its run".into()))
}
