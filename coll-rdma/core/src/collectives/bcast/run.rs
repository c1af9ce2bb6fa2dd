//! The resumable run of one bcast (`Bcast::start`): the path the blocking
//! call's choice names, as a `Schedule`: a flat path's (`FlatBcastRun`),
//! or the two-level stages' (`two_level_run`), each stage a flat run over
//! its subset.

use btl_ibmc::{Transport, TransportError};

use super::multicast_run::MulticastRun;
use super::put_tree::PutTreeRun;
use super::single_copy_run::SingleCopyRun;
use super::two_level_run::TwoLevelBcastRun;
use crate::schedule::{AwaitedWord, Schedule, Step};

pub enum BcastRun<'a> {
    Flat(FlatBcastRun<'a>),
    TwoLevel(Box<TwoLevelBcastRun<'a>>),
}

impl<T: Transport + ?Sized> Schedule<T> for BcastRun<'_> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        match self {
            BcastRun::Flat(run) => run.advance(transport),
            BcastRun::TwoLevel(run) => run.advance(transport),
        }
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        match self {
            BcastRun::Flat(run) => Schedule::<T>::awaited(run),
            BcastRun::TwoLevel(_) => None,
        }
    }
}

/// One flat path's run, over the communicator or one two-level stage.
///
/// A two-level run starts all its stages' runs at post (their numbers
/// taken in post order) but only one of them holds the message buffer at
/// a time: `take_buffer` parks a run (its buffer empty) and `lend_buffer`
/// gives the buffer back before the run's first advance. Starting a run
/// reads only the buffer's length, so a run parked right after its start
/// is the run its start made.
pub enum FlatBcastRun<'a> {
    PutTree(PutTreeRun<'a>),
    SingleCopy(SingleCopyRun<'a>),
    Multicast(MulticastRun<'a>),
}

impl<'a> FlatBcastRun<'a> {
    /// The run's buffer, which it no longer holds: it must get it back
    /// (`lend_buffer`) before it advances again.
    pub(super) fn take_buffer(&mut self) -> &'a mut [u8] {
        match self {
            FlatBcastRun::PutTree(run) => std::mem::take(&mut run.buf),
            FlatBcastRun::SingleCopy(run) => std::mem::take(&mut run.buf),
            FlatBcastRun::Multicast(run) => std::mem::take(&mut run.buf),
        }
    }

    /// Gives a parked run its buffer back: the one `take_buffer` took, or
    /// one of the same length.
    pub(super) fn lend_buffer(&mut self, buf: &'a mut [u8]) {
        let parked = match self {
            FlatBcastRun::PutTree(run) => &mut run.buf,
            FlatBcastRun::SingleCopy(run) => &mut run.buf,
            FlatBcastRun::Multicast(run) => &mut run.buf,
        };
        debug_assert!(parked.is_empty(), "a run lent a buffer while it holds one");
        *parked = buf;
    }

    /// Turns a run at its root that has not begun into one that tells
    /// its receivers the message will not come (as `abandon_at_root` of
    /// its path), then fails: for a two-level stage this rank roots after
    /// an earlier stage failed.
    pub(super) fn abandon_at_root(&mut self) {
        match self {
            FlatBcastRun::PutTree(run) => run.abandon_at_root(),
            FlatBcastRun::SingleCopy(run) => run.abandon_at_root(),
            FlatBcastRun::Multicast(run) => run.abandon_at_root(),
        }
    }
}

impl<T: Transport + ?Sized> Schedule<T> for FlatBcastRun<'_> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        match self {
            FlatBcastRun::PutTree(run) => run.advance(transport),
            FlatBcastRun::SingleCopy(run) => run.advance(transport),
            FlatBcastRun::Multicast(run) => run.advance(transport),
        }
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        match self {
            FlatBcastRun::PutTree(run) => Schedule::<T>::awaited(run),
            FlatBcastRun::SingleCopy(_) | FlatBcastRun::Multicast(_) => None,
        }
    }
}
