//! The order in which one communicator's resumable runs advance.
//!
//! Each collective keeps its slots, rings and credit words in its own part
//! of the window, and its cross-call arguments (why a slot is never
//! rewritten before it is read, why a flag never shows a later call than
//! its reader expects) assume what the blocking calls guarantee: a rank
//! starts touching the window for call e+1 of a collective only after it
//! finished call e. So runs go into lanes, one per collective's region:
//!
//! * within a lane, only the oldest unfinished run advances; the others
//!   are Pending behind it, in post order;
//! * lanes advance independently: their regions and sequence numbers are
//!   disjoint, and since no run ever waits inside `advance`, one lane
//!   stuck on a late peer never stops another.
//!
//! Sequence numbers and epochs are taken when a run is started (`start`
//! of each collective), which must happen in post order; MPI makes every
//! rank post a communicator's collectives in the same order, so every
//! rank numbers them alike, whichever order the application later
//! completes them in. A run whose lane is blocked does not hold its peers
//! back beyond what the blocking calls would: its peers' runs of the same
//! lane wait for the same predecessors. Hence no deadlock: every rank
//! advances every lane's oldest run at every call, and the oldest runs of
//! a lane are the same call on every rank.
//!
//! A run that fails leaves its lane's streams out of step, so the runs
//! queued behind it in that lane fail too, naming the first failure.
//!
//! A caller may advance a run of an idle lane (`lane_is_idle`: nothing of
//! that lane queued, nothing failed there) before queueing it, and keep
//! it out of the queue if that finishes it: it is then the lane's oldest,
//! as the queue would have advanced it. A failure there is recorded
//! (`record_failure`) as one in the queue would be.
//!
//! Each run carries a tag (the glue's MPI request, the tests' ticket) that
//! `advance` hands back when the run ends; runs are `Send` because the
//! queue moves with its communicator's state between threads. A run is a
//! boxed schedule unless the queue is made over another run type `R` (the
//! glue's, whose persistent requests keep their run's storage and queue a
//! handle to it, so that a start allocates nothing).

use std::collections::VecDeque;
use std::marker::PhantomData;

use btl_ibmc::TransportError;

use crate::schedule::{AwaitedWord, Schedule, Step};

/// The part of the window a run uses: runs of one lane go one at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    Barrier,
    Allreduce,
    Reduce,
    Bcast,
    /// The ring reduction's region, which allreduce and reduce share: their
    /// ring calls number one pair of streams between them.
    Ring,
}

const LANES: usize = 5;

/// Names one posted run; tickets grow in post order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

pub type Run<'a, T> = Box<dyn Schedule<T, Error = TransportError> + Send + 'a>;

struct Entry<Tag, R> {
    tag: Tag,
    lane: Lane,
    run: R,
}

/// One communicator's outstanding runs, in post order.
pub struct ScheduleQueue<'a, T: ?Sized, Tag = Ticket, R = Run<'a, T>> {
    entries: VecDeque<Entry<Tag, R>>,
    next_ticket: u64,
    /// Lanes whose streams a failed run left out of step, with why.
    broken: Vec<(Lane, String)>,
    /// The runs advance over a `T` and may borrow for `'a`.
    over: PhantomData<(&'a (), fn(&mut T))>,
}

impl<T: ?Sized, Tag, R> Default for ScheduleQueue<'_, T, Tag, R> {
    fn default() -> Self {
        ScheduleQueue { entries: VecDeque::new(), next_ticket: 0, broken: Vec::new(), over: PhantomData }
    }
}

impl<T: ?Sized, R: Schedule<T, Error = TransportError>> ScheduleQueue<'_, T, Ticket, R> {
    /// Queues `run`, which the caller has just started (its numbers taken),
    /// behind every earlier run of `lane`; its tag is a fresh ticket.
    pub fn post(&mut self, lane: Lane, run: R) -> Ticket {
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        self.post_tagged(lane, run, ticket);
        ticket
    }
}

impl<T: ?Sized, Tag, R: Schedule<T, Error = TransportError>> ScheduleQueue<'_, T, Tag, R> {
    /// Queues `run` (just started: its numbers taken) behind every earlier
    /// run of `lane`, with `tag` to hand back when it ends.
    pub fn post_tagged(&mut self, lane: Lane, run: R, tag: Tag) {
        self.entries.push_back(Entry { tag, lane, run });
    }

    /// Whether a run of `lane` posted now would be the lane's oldest and
    /// may advance: none of the lane is queued and none failed.
    pub fn lane_is_idle(&self, lane: Lane) -> bool {
        !self.broken.iter().any(|(broken, _)| *broken == lane) && !self.entries.iter().any(|entry| entry.lane == lane)
    }

    /// Puts `lane` out of step after a run of it failed with `error`
    /// (whether the run was queued or not): every later run of the lane
    /// fails, naming the first failure.
    pub fn record_failure(&mut self, lane: Lane, error: &TransportError) {
        if !self.broken.iter().any(|(broken, _)| *broken == lane) {
            self.broken.push((lane, error.to_string()));
        }
    }

    /// Runs posted and not yet reported finished.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The word the queue's oldest run waits for (`Schedule::awaited`),
    /// when every queued run is of its lane and no lane failed: only that
    /// run can move before the word arrives (the others wait behind it),
    /// so a waiter may poll the word instead of calling `advance` until
    /// then. `None` when runs of several lanes are queued (each lane's
    /// oldest must get its turn), or none.
    pub fn sole_lane_awaits(&self) -> Option<AwaitedWord> {
        let oldest = self.entries.front()?;
        if !self.broken.is_empty() || self.entries.iter().skip(1).any(|entry| entry.lane != oldest.lane) {
            return None;
        }
        oldest.run.awaited()
    }

    /// Drops every run unfinished, handing back their tags (the
    /// communicator is going away after a failure).
    pub fn abandon(&mut self) -> impl Iterator<Item = Tag> + '_ {
        self.entries.drain(..).map(|entry| entry.tag)
    }

    /// Advances the oldest run of every lane, and each next one as soon as
    /// the one before it finishes; `finished` hears of every run that ended
    /// (done or failed), in the order they ended.
    pub fn advance<F>(&mut self, transport: &mut T, mut finished: F)
    where
        F: FnMut(Tag, Result<(), TransportError>),
    {
        if self.entries.len() == 1 && self.broken.is_empty() {
            // One run under way (a waiting rank's every poll, mostly): the
            // loop below without its bookkeeping, which cost as much as
            // the run's own look at its flag.
            let outcome = self.entries[0].run.advance(transport);
            if !matches!(outcome, Ok(Step::Pending)) {
                let entry = self.entries.pop_front().expect("one run queued");
                if let Err(error) = &outcome {
                    self.record_failure(entry.lane, error);
                }
                finished(entry.tag, outcome.map(|_| ()));
            }
            return;
        }
        let mut blocked = [false; LANES];
        let mut index = 0;
        while index < self.entries.len() {
            let lane = self.entries[index].lane;
            if blocked[lane as usize] {
                index += 1;
                continue;
            }
            let outcome = match self.broken.iter().find(|(broken, _)| *broken == lane) {
                Some((_, why)) => Err(TransportError::Failed(format!("an earlier run of this communicator failed: {why}"))),
                None => self.entries[index].run.advance(transport).map(|step| step == Step::Done),
            };
            match outcome {
                Ok(false) => {
                    blocked[lane as usize] = true;
                    index += 1;
                }
                Ok(true) => {
                    let entry = self.entries.remove(index).expect("index within the queue");
                    finished(entry.tag, Ok(()));
                }
                Err(error) => {
                    self.record_failure(lane, &error);
                    let entry = self.entries.remove(index).expect("index within the queue");
                    finished(entry.tag, Err(error));
                }
            }
        }
    }

    /// Advances every run to its end (before a blocking collective or the
    /// communicator's teardown), calling `side_progress` before each pass:
    /// work a run's peer may wait for that no queued run of this rank
    /// does (a root's retransmissions). Returns the first failure: a
    /// run's, once `finished` heard of every run that ended in that pass,
    /// or the side progress's, which ends the drain with the runs still
    /// queued (a rank that cannot serve its peers would otherwise spin
    /// until the fault timeout, which may be unset, repeating the error).
    /// Bounded as the runs are: each fails after its fault timeout.
    pub fn drain<P, F>(&mut self, transport: &mut T, mut side_progress: P, mut finished: F) -> Result<(), TransportError>
    where
        P: FnMut(&mut T) -> Result<(), TransportError>,
        F: FnMut(Tag, Result<(), TransportError>),
    {
        let mut passes = 0u32;
        loop {
            side_progress(transport)?;
            let mut first_failure = None;
            self.advance(transport, |tag, outcome| {
                if let Err(why) = &outcome {
                    first_failure.get_or_insert_with(|| why.clone());
                }
                finished(tag, outcome);
            });
            if let Some(why) = first_failure {
                return Err(why);
            }
            if self.entries.is_empty() {
                return Ok(());
            }
            passes += 1;
            if passes % DRAIN_PASSES_BEFORE_YIELD == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// Passes of a drain between yields of the core (ranks may share cores).
const DRAIN_PASSES_BEFORE_YIELD: u32 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    /// Done after `pending` advances that returned Pending.
    struct Countdown {
        pending: u32,
    }

    impl Schedule<()> for Countdown {
        type Error = TransportError;

        fn advance(&mut self, _transport: &mut ()) -> Result<Step, TransportError> {
            if self.pending == 0 {
                return Ok(Step::Done);
            }
            self.pending -= 1;
            Ok(Step::Pending)
        }
    }

    #[test]
    fn a_lane_is_idle_until_a_run_of_it_is_queued_or_fails() {
        let mut queue: ScheduleQueue<'_, ()> = ScheduleQueue::default();
        assert!(queue.lane_is_idle(Lane::Barrier) && queue.lane_is_idle(Lane::Bcast));
        let ticket = queue.post(Lane::Barrier, Box::new(Countdown { pending: 1 }));
        assert!(!queue.lane_is_idle(Lane::Barrier), "a queued barrier run is the lane's oldest");
        assert!(queue.lane_is_idle(Lane::Bcast), "lanes are independent");
        let mut finished = Vec::new();
        queue.advance(&mut (), |tag, outcome| finished.push((tag, outcome.is_ok())));
        queue.advance(&mut (), |tag, outcome| finished.push((tag, outcome.is_ok())));
        assert_eq!(finished, vec![(ticket, true)]);
        assert!(queue.lane_is_idle(Lane::Barrier), "idle again once its runs finished");

        queue.record_failure(Lane::Bcast, &TransportError::Failed("a run outside the queue".into()));
        assert!(!queue.lane_is_idle(Lane::Bcast), "a failed lane is never idle again");
        let later = queue.post(Lane::Bcast, Box::new(Countdown { pending: 0 }));
        let why = one_advance_ends(&mut queue, later).expect_err("a run behind a failure fails");
        assert!(why.contains("a run outside the queue"), "{why}");
    }

    /// Advances `queue` once, which must end exactly the run `ticket`:
    /// its outcome, an error as its message.
    fn one_advance_ends(queue: &mut ScheduleQueue<'_, ()>, ticket: Ticket) -> Result<(), String> {
        let mut ended = Vec::new();
        queue.advance(&mut (), |tag, outcome| ended.push((tag, outcome.map_err(|why| why.to_string()))));
        assert_eq!(ended.len(), 1, "one run ends");
        let (tag, outcome) = ended.pop().expect("one run ended");
        assert_eq!(tag, ticket);
        outcome
    }

    /// Fails at its first advance.
    struct Failing;

    impl Schedule<()> for Failing {
        type Error = TransportError;

        fn advance(&mut self, _transport: &mut ()) -> Result<Step, TransportError> {
            Err(TransportError::Failed("a lone run's fault".into()))
        }
    }

    #[test]
    fn a_lone_run_finishes_or_fails_as_one_among_others_would() {
        // One run queued takes the short way through `advance`; it must
        // end, fail and break its lane exactly as the loop does.
        let mut queue: ScheduleQueue<'_, ()> = ScheduleQueue::default();
        let done = queue.post(Lane::Reduce, Box::new(Countdown { pending: 2 }));
        let mut finished = Vec::new();
        for _ in 0..3 {
            queue.advance(&mut (), |tag, outcome| finished.push((tag, outcome.is_ok())));
        }
        assert_eq!(finished, vec![(done, true)], "done at its third advance, reported once");
        assert!(queue.is_empty() && queue.lane_is_idle(Lane::Reduce));

        let failed = queue.post(Lane::Reduce, Box::new(Failing));
        let why = one_advance_ends(&mut queue, failed).expect_err("the lone run fails");
        assert!(why.contains("a lone run's fault"), "{why}");
        assert!(queue.is_empty());
        assert!(!queue.lane_is_idle(Lane::Reduce), "the failure broke the lane");
        let behind = queue.post(Lane::Reduce, Box::new(Countdown { pending: 0 }));
        let why = one_advance_ends(&mut queue, behind).expect_err("a run behind a failure fails");
        assert!(why.contains("a lone run's fault"), "{why}");
    }

    /// Pending for ever on word `offset` of the own window.
    struct Watching {
        offset: usize,
    }

    impl Schedule<()> for Watching {
        type Error = TransportError;

        fn advance(&mut self, _transport: &mut ()) -> Result<Step, TransportError> {
            Ok(Step::Pending)
        }

        fn awaited(&self) -> Option<AwaitedWord> {
            Some(AwaitedWord { offset: self.offset, at_least: 1 })
        }
    }

    #[test]
    fn only_the_oldest_of_a_sole_lane_names_its_awaited_word() {
        // A waiter that polled one run's word while another lane's oldest
        // run needed advancing would starve that run.
        let mut queue: ScheduleQueue<'_, ()> = ScheduleQueue::default();
        assert_eq!(queue.sole_lane_awaits(), None, "nothing queued");
        queue.post(Lane::Barrier, Box::new(Watching { offset: 8 }));
        assert_eq!(queue.sole_lane_awaits(), Some(AwaitedWord { offset: 8, at_least: 1 }));
        queue.post(Lane::Barrier, Box::new(Watching { offset: 24 }));
        assert_eq!(queue.sole_lane_awaits(), Some(AwaitedWord { offset: 8, at_least: 1 }), "the later run waits behind the oldest");
        queue.post(Lane::Allreduce, Box::new(Watching { offset: 16 }));
        assert_eq!(queue.sole_lane_awaits(), None, "two lanes under way");

        let mut other: ScheduleQueue<'_, ()> = ScheduleQueue::default();
        other.post(Lane::Reduce, Box::new(Countdown { pending: 5 }));
        assert_eq!(other.sole_lane_awaits(), None, "a run that names no word");

        let mut failed: ScheduleQueue<'_, ()> = ScheduleQueue::default();
        failed.record_failure(Lane::Bcast, &TransportError::Failed("earlier".into()));
        failed.post(Lane::Barrier, Box::new(Watching { offset: 8 }));
        assert_eq!(failed.sole_lane_awaits(), None, "a failed lane: the advance must report it");
    }

    #[test]
    fn a_boxed_run_advances_as_the_run_inside() {
        let mut boxed: Run<'_, ()> = Box::new(Countdown { pending: 1 });
        let mut outer: Box<Run<'_, ()>> = Box::new(boxed);
        assert_eq!(outer.advance(&mut ()).ok(), Some(Step::Pending));
        assert_eq!(outer.advance(&mut ()).ok(), Some(Step::Done));
        boxed = *outer;
        assert_eq!(boxed.advance(&mut ()).ok(), Some(Step::Done));
    }

    #[test]
    fn a_drain_runs_every_run_to_its_end_serving_the_side_progress_at_every_pass() {
        let mut queue: ScheduleQueue<'_, ()> = ScheduleQueue::default();
        let first = queue.post(Lane::Barrier, Box::new(Countdown { pending: 3 }));
        let second = queue.post(Lane::Bcast, Box::new(Countdown { pending: 5 }));
        let (mut passes, mut ended) = (0, Vec::new());
        let drained = queue.drain(&mut (), |_| Ok(passes += 1), |tag, outcome| ended.push((tag, outcome.is_ok())));
        assert_eq!(drained, Ok(()));
        assert!(queue.is_empty());
        assert_eq!(ended, vec![(first, true), (second, true)]);
        assert_eq!(passes, 6, "one side progress before each pass: the longest run's 5 pending advances and its last");
    }

    /// A side progress that fails ends the drain at once with its error
    /// (it used to be logged and the drain spun on, with no bound where no
    /// fault timeout is set), and the runs stay queued, unfinished.
    #[test]
    fn a_drain_stops_at_a_failing_side_progress_with_its_error() {
        let mut queue: ScheduleQueue<'_, ()> = ScheduleQueue::default();
        queue.post(Lane::Allreduce, Box::new(Countdown { pending: u32::MAX }));
        let mut calls = 0;
        let mut ended = 0;
        let drained = queue.drain(
            &mut (),
            |_| {
                calls += 1;
                if calls < 3 { Ok(()) } else { Err(TransportError::Failed("the multicast is gone".into())) }
            },
            |_, _| ended += 1,
        );
        assert_eq!(drained, Err(TransportError::Failed("the multicast is gone".into())));
        assert_eq!((calls, ended, queue.len()), (3, 0, 1));
    }

    #[test]
    fn a_drain_returns_a_run_s_failure_after_finishing_the_pass() {
        let mut queue: ScheduleQueue<'_, ()> = ScheduleQueue::default();
        let failing = queue.post(Lane::Barrier, Box::new(Failing));
        let done = queue.post(Lane::Bcast, Box::new(Countdown { pending: 0 }));
        let mut ended = Vec::new();
        let drained = queue.drain(&mut (), |_| Ok(()), |tag, outcome| ended.push((tag, outcome.is_ok())));
        assert_eq!(drained, Err(TransportError::Failed("a lone run's fault".into())));
        assert_eq!(ended, vec![(failing, false), (done, true)]);
    }
}
