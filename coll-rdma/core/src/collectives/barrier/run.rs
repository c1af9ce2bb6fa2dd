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
//! for ever (warned about at the stall warning, as a blocking wait is).

use std::sync::Arc;

use btl_ibmc::{TransportError, Windows};

use super::Round;
use crate::patterns::meet::{warn_stuck, StallClock, StallLimits, Stuck};
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
    /// How long the current round has waited (its stuck time starts
    /// again at every round).
    stall: StallClock,
    /// The notification the last `Pending` found missing first.
    awaited: Option<AwaitedWord>,
}

impl BarrierRun {
    pub(super) fn new(rounds: Arc<[Round]>, epoch: u64, limits: StallLimits) -> Self {
        BarrierRun { rounds, epoch, round: 0, notified: false, stall: StallClock::new(limits), awaited: None }
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
    pub(super) fn restart(&mut self, epoch: u64, limits: StallLimits) {
        let BarrierRun { rounds: _, epoch: run_epoch, round, notified, stall, awaited } = self;
        (*run_epoch, *round, *notified, *stall, *awaited) = (epoch, 0, false, StallClock::new(limits), None);
    }

    /// As a run part-way through: notified, and waiting, in its second round.
    #[cfg(test)]
    pub(super) fn as_if_stuck_in_second_round(&mut self) {
        (self.round, self.notified) = (1, true);
        for _ in 0..3 {
            self.stall.stuck();
        }
        self.awaited = Some(AwaitedWord { offset: 8, at_least: self.epoch });
    }

    #[cfg(test)]
    pub(super) fn is_fresh_as(&self, started: &BarrierRun) -> bool {
        let BarrierRun { rounds, epoch, round, notified, stall, awaited } = started;
        Arc::ptr_eq(&self.rounds, rounds)
            && (self.epoch, self.round, self.notified, &self.stall, self.awaited) == (*epoch, *round, *notified, stall, *awaited)
    }

    /// The first of `round`'s notifications that has not arrived yet.
    fn missing_notification<T: Windows + ?Sized>(&self, transport: &T, round: &Round) -> Option<AwaitedWord> {
        round
            .await_from
            .iter()
            .map(|from| AwaitedWord { offset: from.slot_offset, at_least: self.epoch })
            .find(|word| !word.arrived(transport))
    }

    /// After a poll that found the round's notifications incomplete: the
    /// stall warning, or the fault timeout's error.
    fn book_stuck<T: Windows + ?Sized>(&mut self, transport: &T) -> Result<(), TransportError> {
        let what = || format!("barrier {} (round {} of its notifications)", self.epoch, self.round);
        match self.stall.stuck() {
            Stuck::Quiet => Ok(()),
            Stuck::Warn(waited) => {
                warn_stuck(transport, &what(), waited);
                Ok(())
            }
            Stuck::PastFaultTimeout(waited) => Err(TransportError::Failed(format!(
                "non-blocking {} made no progress for {:.1} s (the fault timeout)",
                what(),
                waited.as_secs_f64()
            ))),
        }
    }
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
                self.book_stuck(&*transport)?;
                return Ok(Step::Pending);
            }
            self.round += 1;
            self.notified = false;
            self.stall.moved();
        }
        Ok(Step::Done)
    }

    fn awaited(&self) -> Option<AwaitedWord> {
        self.awaited
    }
}
