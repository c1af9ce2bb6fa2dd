//! A collective that advances without blocking: each `advance` does what can be done now and returns.
//! Invariant: once `advance` has returned `Done`, it is not called again for that run.

/// What one call of [`Schedule::advance`] left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Waiting on peers; call again later (from the progress loop).
    Pending,
    /// Finished; results are in the caller's buffers.
    Done,
}

/// A resumable collective over a transport `T`.
pub trait Schedule<T: ?Sized> {
    /// Error a run can end with (a peer that died, a transport fault).
    type Error;
    /// Does every step that needs no waiting.
    fn advance(&mut self, transport: &mut T) -> Result<Step, Self::Error>;
}

/// A boxed run is a run: the queue's runs are boxed, and a caller that
/// tries a run before queueing it (`ScheduleQueue::lane_is_idle`) may hold
/// one boxed already.
impl<T: ?Sized, S: Schedule<T> + ?Sized> Schedule<T> for Box<S> {
    type Error = S::Error;

    fn advance(&mut self, transport: &mut T) -> Result<Step, Self::Error> {
        (**self).advance(transport)
    }
}
