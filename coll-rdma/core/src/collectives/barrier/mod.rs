//! MPI_Barrier as an n-way dissemination over one-sided flag writes
//! (Hoefler et al. 2006, listing 1), for any communicator size.
//!
//! Every (round, peer index) pair has its own 64-byte slot in the receiver's
//! window, so each slot has exactly one writer: the rank at distance
//! i·(n+1)^r before the receiver. A slot holds the epoch (the 1-based count
//! of barriers this communicator has run) of the writer's latest
//! notification. Epochs are 64-bit and only grow, so "slot >= my epoch"
//! is never ambiguous, and slots need no reset: a writer that is already
//! one barrier ahead has necessarily passed the current one, which is all
//! the reader needs to know.

pub mod autotune;
pub mod run;
pub mod two_level;
pub mod two_level_run;

use std::sync::Arc;
use crate::patterns::meet::StallLimits;

use btl_ibmc::{wait_at_least, SideProgress, TransportError, WaitPolicy, Windows};
use tuning::{round_distances, round_fanouts};

/// Bytes per notification slot: one cache line, so that writers of
/// different slots never contend for the same line.
pub const SLOT_BYTES: usize = 64;

#[derive(Clone, Debug)]
pub(super) struct Notification {
    pub(super) peer: usize,
    pub(super) slot_offset: usize,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Round {
    pub(super) notify: Vec<Notification>,
    pub(super) await_from: Vec<Notification>,
}

/// One rank's precomputed barrier schedule and epoch for one communicator.
#[derive(Clone, Debug)]
pub struct DisseminationBarrier {
    radix: usize,
    /// Shared with the runs of non-blocking barriers (`run.rs`).
    rounds: Arc<[Round]>,
    epoch: u64,
    policy: WaitPolicy,
    /// Names the communicator in stall warnings.
    context: String,
}

impl DisseminationBarrier {
    /// Bytes of window the barrier needs on every rank.
    pub fn region_len(size: usize, radix: usize) -> usize {
        round_fanouts(size, radix).iter().sum::<usize>() * SLOT_BYTES
    }

    /// The schedule of `rank` among `size` ranks; slots start at
    /// `region_offset` of every rank's window.
    pub fn new(rank: usize, size: usize, radix: usize, region_offset: usize, policy: WaitPolicy) -> Self {
        assert!(rank < size, "rank {rank} outside a communicator of {size}");
        Self::build(rank, size, radix, region_offset, policy, |position| position)
    }

    /// The schedule among a sub-group of the communicator (a two-level
    /// barrier's node leaders): `members` in ascending rank order, of which
    /// this rank is `members[position]`; peers are named by their ranks.
    /// Only the members' windows hold its slots.
    pub fn among(position: usize, members: &[usize], radix: usize, region_offset: usize, policy: WaitPolicy) -> Self {
        assert!(position < members.len(), "position {position} outside a group of {}", members.len());
        Self::build(position, members.len(), radix, region_offset, policy, |index| members[index])
    }

    fn build(
        position: usize,
        count: usize,
        radix: usize,
        region_offset: usize,
        policy: WaitPolicy,
        rank_of: impl Fn(usize) -> usize,
    ) -> Self {
        let mut rounds = Vec::new();
        let mut first_slot = region_offset;
        for distances in round_distances(count, radix) {
            let mut round = Round::default();
            for (i, &distance) in distances.iter().enumerate() {
                let slot_offset = first_slot + i * SLOT_BYTES;
                round.notify.push(Notification { peer: rank_of((position + distance) % count), slot_offset });
                round.await_from.push(Notification { peer: rank_of((position + count - distance % count) % count), slot_offset });
            }
            rounds.push(round);
            first_slot += distances.len() * SLOT_BYTES;
        }
        DisseminationBarrier { radix, rounds: rounds.into(), epoch: 0, policy, context: String::new() }
    }

    /// Sets how stall warnings name the communicator (e.g. "comm 3").
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context = context.into();
        self
    }

    pub fn radix(&self) -> usize {
        self.radix
    }

    /// How this barrier's waits go (the communicator's policy).
    pub fn policy(&self) -> WaitPolicy {
        self.policy
    }

    pub fn rounds(&self) -> usize {
        self.rounds.len()
    }

    /// Barriers completed (or started) so far.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Starts a non-blocking barrier: it takes the next epoch, as `run`
    /// would, and the caller advances it (see `run.rs`). Runs of one
    /// barrier must advance in the order they were started, none after a
    /// later one, and `run` only once all of them are done: each slot's
    /// value must only grow.
    pub fn start(&mut self) -> run::BarrierRun {
        self.epoch += 1;
        run::BarrierRun::new(Arc::clone(&self.rounds), self.epoch, StallLimits::of(&self.policy))
    }

    /// Makes `finished`, an earlier run of this barrier that is over (a
    /// persistent request's last, which nothing advances any more), the
    /// run `start` would make now, in place: nothing is built, moved or
    /// shared again (a start sharing the rounds and the finished run's
    /// drop cost two locked updates of their count, and the run's moves
    /// as many instructions as its making). False, with `finished` left
    /// as it was, for a run of another barrier (another radix, after the
    /// autotune moved on): the caller then `start`s.
    pub fn restart(&mut self, finished: &mut run::BarrierRun) -> bool {
        if !finished.shares_rounds_with(&self.rounds) {
            return false;
        }
        self.epoch += 1;
        finished.restart(self.epoch, StallLimits::of(&self.policy));
        true
    }

    /// Runs one barrier: returns once every rank of the communicator has
    /// entered it. Its waits serve `side_progress` whenever they yield.
    #[inline]
    pub fn run<T: Windows + ?Sized>(&mut self, transport: &T, side_progress: &dyn SideProgress) -> Result<(), TransportError> {
        self.epoch += 1;
        let epoch = self.epoch;
        for (round_index, round) in self.rounds.iter().enumerate() {
            for to in &round.notify {
                transport.put_flag(to.peer, to.slot_offset, epoch)?;
            }
            for from in &round.await_from {
                wait_at_least(transport, from.slot_offset, epoch, self.policy.serving(side_progress), || {
                    format!("{} barrier {epoch}, round {round_index}: notification from rank {}", self.context, from.peer)
                })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restarted_run_is_the_run_a_start_would_make() {
        let mut barrier = DisseminationBarrier::new(0, 4, 1, 0, WaitPolicy::default());
        let mut twin = barrier.clone();
        let mut run = barrier.start();
        run.as_if_stuck_in_second_round();
        twin.start();
        let shares = Arc::strong_count(&barrier.rounds);
        assert!(barrier.restart(&mut run), "a run of this barrier restarts");
        assert_eq!(Arc::strong_count(&barrier.rounds), shares, "the rounds are not shared again");
        let started = twin.start();
        assert_eq!((barrier.epoch(), run.epoch()), (2, 2), "the next epoch, as a start takes it");
        assert!(run.is_fresh_as(&started), "every field as a start sets it");

        // A run of another barrier (another radix) is left alone, and
        // this barrier's epoch with it.
        let mut other = DisseminationBarrier::new(0, 4, 3, 0, WaitPolicy::default());
        let mut foreign = other.start();
        assert!(!barrier.restart(&mut foreign));
        assert_eq!((barrier.epoch(), foreign.epoch()), (2, 1));
        assert!(foreign.shares_rounds_with(&other.rounds));
    }
}
