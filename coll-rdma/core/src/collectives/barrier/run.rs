//! The dissemination barrier (`barrier.rs`) as a resumable schedule, for
//! MPI_Ibarrier and the persistent barrier: the same rounds, slots and
//! epochs as the blocking barrier, so the two can follow each other on one
//! communicator. Each `advance` writes the current round's notifications
//! once, then moves on through every round whose notifications have all
//! arrived, and returns `Pending` at the first that still lacks one.
//!
//! Invariants: a run writes its epoch into a slot only after every earlier
//! run of the same barrier has written its own there (the caller advances
//! runs in the order they were started, see `DisseminationBarrier::start`),
//! so a slot's value never goes back; and a run that has waited longer than
//! the fault timeout in one round ends with an error rather than pending
//! for ever.

use std::sync::Arc;
use std::time::{Duration, Instant};

use btl_ibmc::{TransportError, Windows};

use super::Round;
use crate::schedule::{AwaitedWord, Schedule, Step};

/// One non-blocking barrier under way.
#[derive(Debug)]
pub struct BarrierRun {
    rounds: Arc<[Round]>,
    epoch: u64,
    /// The round whose notifications are awaited next.
    round: usize,
    /// Whether this round's notifications are written already.
    notified: bool,
    fault_timeout: Option<Duration>,
    /// When the current round started to wait (on its first `Pending`).
    waiting_since: Option<Instant>,
    /// The notification the last `Pending` found missing first.
    awaited: Option<AwaitedWord>,
}

impl BarrierRun {
    pub(super) fn new(rounds: Arc<[Round]>, epoch: u64, fault_timeout: Option<Duration>) -> Self {
        BarrierRun { rounds, epoch, round: 0, notified: false, fault_timeout, waiting_since: None, awaited: None }
    }

    /// The barrier's epoch (1-based count of the barrier's runs so far).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether this run goes through `rounds` (a run of that barrier).
    pub(super) fn shares_rounds_with(&self, rounds: &Arc<[Round]>) -> bool {
        Arc::ptr_eq(&self.rounds, rounds)
    }

    /// Makes this run, over, its barrier's next one (`restart` of the
    /// barrier): every field as `new` sets it, the rounds kept.
    pub(super) fn restart(&mut self, epoch: u64, fault_timeout: Option<Duration>) {
        let BarrierRun { rounds: _, epoch: run_epoch, round, notified, fault_timeout: run_timeout, waiting_since, awaited } = self;
        (*run_epoch, *round, *notified, *run_timeout, *waiting_since, *awaited) = (epoch, 0, false, fault_timeout, None, None);
    }

    /// As a run part-way through: notified, and waiting, in its second round.
    #[cfg(test)]
    pub(super) fn as_if_stuck_in_second_round(&mut self) {
        (self.round, self.notified, self.waiting_since) = (1, true, Some(Instant::now()));
        self.awaited = Some(AwaitedWord { offset: 8, at_least: self.epoch });
    }

    #[cfg(test)]
    pub(super) fn is_fresh_as(&self, started: &BarrierRun) -> bool {
        let BarrierRun { rounds, epoch, round, notified, fault_timeout, waiting_since, awaited } = started;
        Arc::ptr_eq(&self.rounds, rounds)
            && (self.epoch, self.round, self.notified, self.fault_timeout, self.waiting_since, self.awaited)
                == (*epoch, *round, *notified, *fault_timeout, *waiting_since, *awaited)
    }

    /// The first of `round`'s notifications that has not arrived yet.
    fn missing_notification<T: Windows + ?Sized>(&self, transport: &T, round: &Round) -> Option<AwaitedWord> {
        round
            .await_from
            .iter()
            .map(|from| AwaitedWord { offset: from.slot_offset, at_least: self.epoch })
            .find(|word| !word.arrived(transport))
    }

    fn check_fault_timeout(&mut self) -> Result<(), TransportError> {
        match past_fault_timeout(&mut self.waiting_since, self.fault_timeout) {
            Some(limit) => Err(TransportError::Failed(format!(
                "non-blocking barrier {}: round {} waited more than the fault timeout ({limit:?}) for its notifications",
                self.epoch, self.round
            ))),
            None => Ok(()),
        }
    }
}

/// The fault timeout, once the current wait (started at `waiting_since`,
/// which its first call sets) has lasted longer than it; None meanwhile
/// or without one. Shared by the barrier runs, flat and two-level.
/// Without a timeout the clock is never read: a run that goes on pending
/// at its start (most do, as one rank arrives first) would pay a clock
/// read on every start for nothing.
pub(super) fn past_fault_timeout(waiting_since: &mut Option<Instant>, fault_timeout: Option<Duration>) -> Option<Duration> {
    let limit = fault_timeout?;
    let since = *waiting_since.get_or_insert_with(Instant::now);
    (since.elapsed() > limit).then_some(limit)
}

impl<T: Windows + ?Sized> Schedule<T> for BarrierRun {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        transport.progress();
        while let Some(round) = self.rounds.get(self.round) {
            if !self.notified {
                for to in &round.notify {
                    transport.put_flag(to.peer, to.slot_offset, self.epoch)?;
                }
                self.notified = true;
            }
            if let Some(missing) = self.missing_notification(&*transport, round) {
                self.awaited = Some(missing);
                self.check_fault_timeout()?;
                return Ok(Step::Pending);
            }
            self.round += 1;
            self.notified = false;
            self.waiting_since = None;
        }
        Ok(Step::Done)
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        self.awaited
    }
}
