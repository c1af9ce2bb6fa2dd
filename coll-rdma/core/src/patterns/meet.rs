//! How a run meets a word that has not arrived yet. The resumable form of a
//! collective polls it once and returns `Step::Pending` (the progress loop
//! calls again); the blocking form waits for it under the communicator's
//! policy (spin, yield or sleep, side progress, stall warnings, fault
//! timeout). Both drive the same state machine: a blocking call is the
//! resumable run with `Meet::Block`, which never leaves a step unfinished.

use std::cell::Cell;
use std::time::{Duration, Instant};

use btl_ibmc::{wait_at_least, wait_for_peer_at_least, Endpoint, PeerReads, TransportError, Waits, Windows};

use crate::schedule::{AwaitedWord, Step};

#[derive(Clone, Copy)]
pub(crate) enum Meet<'a> {
    /// Look once; a word below its target leaves the step for later. The
    /// first own-window word found below its target is noted in the cell
    /// (`Schedule::awaited`: what a waiter may poll alone).
    Poll(&'a Cell<Option<AwaitedWord>>),
    /// Wait until the word is there.
    Block(Waits<'a>),
}

impl Meet<'_> {
    /// The local word at `offset` once it is at least `target`; `None` when
    /// a poll found it below. `describe` explains a stall.
    #[inline]
    pub(crate) fn local_at_least<T, D>(self, transport: &T, offset: usize, target: u64, describe: D) -> Result<Option<u64>, TransportError>
    where
        T: Windows + ?Sized,
        D: Fn() -> String,
    {
        match self {
            Meet::Poll(awaited) => {
                let value = transport.local_flag(offset);
                if value >= target {
                    return Ok(Some(value));
                }
                if awaited.get().is_none() {
                    awaited.set(Some(AwaitedWord { offset, at_least: target }));
                }
                Ok(None)
            }
            Meet::Block(waits) => wait_at_least(transport, offset, target, waits, describe).map(Some),
        }
    }

    /// `peer`'s word at `offset` once it is at least `target` (acquire),
    /// as `local_at_least` for a word read out of a peer's window.
    #[inline]
    pub(crate) fn peer_at_least<T, D>(self, transport: &T, peer: usize, offset: usize, target: u64, describe: D) -> Result<Option<u64>, TransportError>
    where
        T: PeerReads + ?Sized,
        D: Fn() -> String,
    {
        match self {
            Meet::Poll(_) => {
                let value = transport.peer_flag(peer, offset)?;
                Ok((value >= target).then_some(value))
            }
            Meet::Block(waits) => wait_for_peer_at_least(transport, peer, offset, target, waits, describe).map(Some),
        }
    }
}

/// A run whose steps `Meet` drives: `resume` under `Meet::Block` is the
/// blocking call, `advance_by_polling` the run's `Schedule::advance`.
pub(crate) trait Resumable<T: ?Sized> {
    /// Where the run stands, to tell a poll that moved from one that did not.
    type Position: PartialEq;

    /// Takes every step that `meet` lets it; returns whether the call is
    /// finished (always, under `Meet::Block`).
    fn resume(&mut self, transport: &T, meet: Meet<'_>) -> Result<bool, TransportError>;

    fn position(&self) -> Self::Position;

    fn stall_clock(&mut self) -> &mut StallClock;

    /// The call and where it stands, for a run that stopped moving.
    fn describe(&self) -> String;
}

/// `Schedule::advance` of every run: one `resume` by polls, booked on the
/// run's stall clock.
pub(crate) fn advance_by_polling<T, S>(run: &mut S, transport: &T) -> Result<Step, TransportError>
where
    T: Endpoint + ?Sized,
    S: Resumable<T>,
{
    let before = run.position();
    let awaited = Cell::new(None);
    let step = if run.resume(transport, Meet::Poll(&awaited))? { Step::Done } else { Step::Pending };
    let moved = run.position() != before;
    let clock = run.stall_clock();
    clock.awaited = awaited.get().filter(|_| step == Step::Pending);
    match clock.book(transport, step, moved)? {
        None => Ok(step),
        Some(stuck) => Err(TransportError::Failed(format!(
            "{} made no progress for {:.1} s (the fault timeout)",
            run.describe(),
            stuck.as_secs_f64()
        ))),
    }
}

/// What the blocking waits do between polls, for a run advanced by polls:
/// between two calls that found it stuck, the transport gets one progress
/// call and a health check (a dead peer fails the run), and a run stuck
/// longer than the fault timeout fails instead of pending for ever.
/// Without a fault timeout (the default) the clock is never read, as in
/// the barrier runs (`past_fault_timeout`): a waiting rank's MPI_Wait
/// books every poll, and a clock read was a quarter of a poll's
/// instructions.
#[derive(Debug)]
pub(crate) struct StallClock {
    fault_timeout: Option<Duration>,
    stuck_since: Option<Instant>,
    /// The word the last poll-mode advance found missing first, while the
    /// run is pending (`Schedule::awaited`).
    awaited: Option<AwaitedWord>,
}

impl StallClock {
    pub(crate) fn new(fault_timeout: Option<Duration>) -> Self {
        StallClock { fault_timeout, stuck_since: None, awaited: None }
    }

    /// What the run's `Schedule::awaited` answers: the first own-window
    /// word its last advance found missing.
    pub(crate) fn awaited(&self) -> Option<AwaitedWord> {
        self.awaited
    }

    /// Books the outcome of one poll-mode advance; `moved` says whether it
    /// got anything done (a stuck run's clock keeps running). Returns how
    /// long the run has been stuck once that passes the fault timeout.
    fn book<T: Endpoint + ?Sized>(&mut self, transport: &T, step: Step, moved: bool) -> Result<Option<Duration>, TransportError> {
        if step == Step::Done || moved {
            self.stuck_since = None;
            if step == Step::Done {
                return Ok(None);
            }
        }
        transport.progress();
        transport.health()?;
        let Some(limit) = self.fault_timeout else { return Ok(None) };
        let stuck = self.stuck_since.get_or_insert_with(Instant::now).elapsed();
        Ok((stuck > limit).then_some(stuck))
    }
}
