//! The two-level barrier (`two_level.rs`) as a resumable schedule, for
//! MPI_Ibarrier and the persistent barrier on a communicator across nodes:
//! the same slots and epochs as the blocking two-level barrier, so the two
//! can follow each other on one communicator.
//!
//! A member reports to its leader on its first `advance` and is done once
//! the leader's release shows its epoch. A leader goes through three parts,
//! each resumed where the last `advance` left it: collect (every member's
//! arrival shows the epoch), the leaders' dissemination (a `BarrierRun`
//! among the leaders), release (one flag per member).
//!
//! Invariants: those of the blocking barrier (a leader releases only after
//! the dissemination, which no leader leaves before every node arrived);
//! runs of one barrier advance in the order they were started, so a slot's
//! value never goes back; a run that waits longer than the fault timeout
//! in one part ends with an error rather than pending for ever (warned
//! about at the stall warning, as a blocking wait is).

use std::sync::Arc;

use btl_ibmc::{TransportError, Windows};

use super::run::BarrierRun;
use crate::patterns::meet::{warn_stuck, StallClock, StallLimits, Stuck};
use crate::schedule::{Schedule, Step};

/// A member of a leader's node and the slot in the leader's window where
/// it reports.
#[derive(Clone, Copy, Debug)]
pub(super) struct Arrival {
    pub(super) member: usize,
    pub(super) slot: usize,
}

#[derive(Debug)]
enum Part {
    Member { leader: usize, arrival_slot: usize, reported: bool },
    /// Collects `members` from `next_arrival` on (those before it
    /// arrived), then runs the leaders' dissemination, then releases.
    Leader { members: Arc<[Arrival]>, next_arrival: usize, leaders: BarrierRun, released: bool },
}

/// One non-blocking two-level barrier under way.
#[derive(Debug)]
pub struct TwoLevelBarrierRun {
    part: Part,
    release_slot: usize,
    epoch: u64,
    /// How long the current wait has lasted (it starts again with every
    /// arrival collected).
    stall: StallClock,
}

impl TwoLevelBarrierRun {
    pub(super) fn member(leader: usize, arrival_slot: usize, release_slot: usize, epoch: u64, limits: StallLimits) -> Self {
        let part = Part::Member { leader, arrival_slot, reported: false };
        TwoLevelBarrierRun { part, release_slot, epoch, stall: StallClock::new(limits) }
    }

    /// A leader's run; `leaders` is the leaders' dissemination started for
    /// the same barrier (its epoch is this one's).
    pub(super) fn leader(
        members: Arc<[Arrival]>,
        leaders: BarrierRun,
        release_slot: usize,
        epoch: u64,
        limits: StallLimits,
    ) -> Self {
        debug_assert_eq!(leaders.epoch(), epoch, "the leaders' dissemination runs the same barrier");
        let part = Part::Leader { members, next_arrival: 0, leaders, released: false };
        TwoLevelBarrierRun { part, release_slot, epoch, stall: StallClock::new(limits) }
    }

    /// The barrier's epoch (1-based count of the barrier's runs so far).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// Pending after a poll that found the wait still on (warned about at the
/// stall warning), or the fault timeout's error.
fn pending_unless_timed_out<T: Windows + ?Sized>(
    transport: &T,
    stall: &mut StallClock,
    epoch: u64,
    what: impl FnOnce() -> String,
) -> Result<Step, TransportError> {
    let what = || format!("two-level barrier {epoch} (waiting for {})", what());
    match stall.stuck() {
        Stuck::Quiet => Ok(Step::Pending),
        Stuck::Warn(waited) => {
            warn_stuck(transport, &what(), waited);
            Ok(Step::Pending)
        }
        Stuck::PastFaultTimeout(waited) => Err(TransportError::Failed(format!(
            "non-blocking {} made no progress for {:.1} s (the fault timeout)",
            what(),
            waited.as_secs_f64()
        ))),
    }
}

impl<T: Windows + ?Sized> Schedule<T> for TwoLevelBarrierRun {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        transport.progress();
        let epoch = self.epoch;
        let stall = &mut self.stall;
        match &mut self.part {
            Part::Member { leader, arrival_slot, reported } => {
                if !*reported {
                    transport.put_flag(*leader, *arrival_slot, epoch)?;
                    *reported = true;
                }
                if transport.local_flag(self.release_slot) >= epoch {
                    return Ok(Step::Done);
                }
                let leader = *leader;
                pending_unless_timed_out(&*transport, stall, epoch, || format!("the release by node leader {leader}"))
            }
            Part::Leader { members, next_arrival, leaders, released } => {
                while let Some(arrival) = members.get(*next_arrival) {
                    if transport.local_flag(arrival.slot) < epoch {
                        let member = arrival.member;
                        return pending_unless_timed_out(&*transport, stall, epoch, || {
                            format!("the arrival of rank {member} on this node")
                        });
                    }
                    *next_arrival += 1;
                    stall.moved();
                }
                if !*released {
                    // The dissemination keeps its own fault timeout; it is
                    // not advanced again once done.
                    if leaders.advance(transport)? == Step::Pending {
                        return Ok(Step::Pending);
                    }
                    for arrival in members.iter() {
                        transport.put_flag(arrival.member, self.release_slot, epoch)?;
                    }
                    *released = true;
                }
                Ok(Step::Done)
            }
        }
    }
}
