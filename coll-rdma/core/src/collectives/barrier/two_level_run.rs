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
//! in one part ends with an error rather than pending for ever.

use std::sync::Arc;
use std::time::{Duration, Instant};

use btl_ibmc::{TransportError, Windows};

use super::run::{past_fault_timeout, BarrierRun};
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
    fault_timeout: Option<Duration>,
    /// When the current wait started (on its first `Pending`).
    waiting_since: Option<Instant>,
}

impl TwoLevelBarrierRun {
    pub(super) fn member(leader: usize, arrival_slot: usize, release_slot: usize, epoch: u64, fault_timeout: Option<Duration>) -> Self {
        let part = Part::Member { leader, arrival_slot, reported: false };
        TwoLevelBarrierRun { part, release_slot, epoch, fault_timeout, waiting_since: None }
    }

    /// A leader's run; `leaders` is the leaders' dissemination started for
    /// the same barrier (its epoch is this one's).
    pub(super) fn leader(
        members: Arc<[Arrival]>,
        leaders: BarrierRun,
        release_slot: usize,
        epoch: u64,
        fault_timeout: Option<Duration>,
    ) -> Self {
        debug_assert_eq!(leaders.epoch(), epoch, "the leaders' dissemination runs the same barrier");
        let part = Part::Leader { members, next_arrival: 0, leaders, released: false };
        TwoLevelBarrierRun { part, release_slot, epoch, fault_timeout, waiting_since: None }
    }

    /// The barrier's epoch (1-based count of the barrier's runs so far).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// Pending, or the fault timeout's error once the current wait, started at
/// `waiting_since` (set on its first call), exceeds `fault_timeout`.
fn pending_unless_timed_out(
    waiting_since: &mut Option<Instant>,
    fault_timeout: Option<Duration>,
    epoch: u64,
    what: impl FnOnce() -> String,
) -> Result<Step, TransportError> {
    match past_fault_timeout(waiting_since, fault_timeout) {
        Some(limit) => Err(TransportError::Failed(format!(
            "non-blocking two-level barrier {epoch}: waited more than the fault timeout ({limit:?}) for {}",
            what()
        ))),
        None => Ok(Step::Pending),
    }
}

impl<T: Windows + ?Sized> Schedule<T> for TwoLevelBarrierRun {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        transport.progress();
        let epoch = self.epoch;
        let (waiting_since, fault_timeout) = (&mut self.waiting_since, self.fault_timeout);
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
                pending_unless_timed_out(waiting_since, fault_timeout, epoch, || format!("the release by node leader {leader}"))
            }
            Part::Leader { members, next_arrival, leaders, released } => {
                while let Some(arrival) = members.get(*next_arrival) {
                    if transport.local_flag(arrival.slot) < epoch {
                        let member = arrival.member;
                        return pending_unless_timed_out(waiting_since, fault_timeout, epoch, || {
                            format!("the arrival of rank {member} on this node")
                        });
                    }
                    *next_arrival += 1;
                    *waiting_since = None;
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
