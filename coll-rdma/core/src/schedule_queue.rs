//! The order in which one communicator's resumable runs advance.
//!
//! Each collective keeps its slots, rings and credit words in its own part
//! of the window, and its cross-call arguments (why a slot is never
//! rewritten before it is read, why a flag never shows a later call than
//! its reader expects) assume what the blocking calls guarantee: a rank
//! starts touching the window for call e+1 of a collective only after it
//! finished call e. So runs go into lanes, one per collective's region:
//!
//! * within a lane, the oldest unfinished run advances; the others are
//!   Pending behind it, in post order, except that a run that overlaps
//!   (`Schedule::overlap`: the small allreduce's exchange) takes its
//!   first step beside the earlier ones while every earlier unfinished
//!   run of its lane overlaps too and the oldest is fewer than its
//!   `depth` calls before it. Its collective's slot arguments then hold
//!   with only the calls `depth` or more before it finished (the exchange
//!   keeps `2 * depth` short slot sets, see
//!   `collectives::allreduce::exchange`). An overlapping run writes to
//!   its peers only in that first step and then only reads what they
//!   write, in the order they write it, so it is stepped again only once
//!   the runs before it finished: a pass steps each lane's oldest run and
//!   the first steps, not every pending run (8 exchange runs waiting cost
//!   8 polls a pass otherwise, where one finds what all wait for). A run
//!   that does not overlap waits for every earlier one and holds back
//!   every later one, as before;
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
//! a lane are the same call on every rank. Overlapping runs add no wait:
//! a run that may advance on one rank waits only for peers' steps of
//! itself and of older calls, which each peer takes once its own older
//! calls let it, as they let this rank (the same calls, numbered alike).
//! Every run that may advance has taken a step once a pass is over (a
//! pass visits the runs in post order after the ones that finished), so
//! a rank never holds back a peer by a run it has not stepped, and a run
//! stepped once has written all it writes.
//!
//! A run that fails leaves its lane's streams out of step, so the runs
//! queued behind it in that lane fail too, naming the first failure.
//!
//! A caller may advance a run before queueing it where the queue would
//! advance it (`may_advance_now`: its lane idle, or every run queued of
//! it overlapping and near enough), and keep it out of the queue if that
//! finishes it. A failure there is recorded (`record_failure`) as one in
//! the queue would be.
//!
//! Each run carries a tag (the glue's MPI request, the tests' ticket) that
//! `advance` hands back when the run ends; runs are `Send` because the
//! queue moves with its communicator's state between threads. A run is a
//! boxed schedule unless the queue is made over another run type `R` (the
//! glue's, whose persistent requests keep their run's storage and queue a
//! handle to it, so that a start needs no box).

use std::collections::VecDeque;
use std::marker::PhantomData;

use btl_ibmc::TransportError;

use crate::schedule::{AwaitedWord, Overlap, Schedule, Step};

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

/// What a pass (or a post) knows of one lane from its runs still queued,
/// oldest first: which of the later runs may advance.
#[derive(Clone, Copy, Debug)]
enum LaneFront {
    /// None queued: the next run is the oldest.
    Free,
    /// Every run queued overlaps; the oldest's numbers.
    Overlapping(Overlap),
    /// A run queued does not overlap: nothing after it moves.
    Closed,
}

impl LaneFront {
    /// Whether a run that overlaps as `overlap` may step behind this
    /// front, having stepped already or not.
    fn admits(self, overlap: Option<Overlap>, stepped: bool) -> bool {
        match self {
            LaneFront::Free => true,
            LaneFront::Overlapping(oldest) => !stepped && overlap.is_some_and(|run| run.may_pass(oldest)),
            LaneFront::Closed => false,
        }
    }

    /// The front once a run that overlaps as `overlap` stays queued behind it.
    fn behind(self, overlap: Option<Overlap>) -> LaneFront {
        match (self, overlap) {
            (LaneFront::Free, Some(oldest)) => LaneFront::Overlapping(oldest),
            (LaneFront::Overlapping(oldest), Some(_)) => LaneFront::Overlapping(oldest),
            _ => LaneFront::Closed,
        }
    }
}

/// Names one posted run; tickets grow in post order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

pub type Run<'a, T> = Box<dyn Schedule<T, Error = TransportError> + Send + 'a>;

struct Entry<Tag, R> {
    tag: Tag,
    lane: Lane,
    run: R,
    /// Whether the run took its first step (at its post or in a pass).
    stepped: bool,
    /// `run.overlap()`, read once at post (it never changes).
    overlap: Option<Overlap>,
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
        let overlap = run.overlap();
        self.entries.push_back(Entry { tag, lane, run, stepped: false, overlap });
    }

    /// `post_tagged` for a run the caller stepped already, where
    /// `may_advance_now` let it: an overlapping run is not stepped again
    /// until the runs before it finished.
    pub fn post_stepped(&mut self, lane: Lane, run: R, tag: Tag) {
        let overlap = run.overlap();
        self.entries.push_back(Entry { tag, lane, run, stepped: true, overlap });
    }

    /// Whether a run of `lane` posted now would be the lane's oldest and
    /// may advance: none of the lane is queued and none failed.
    pub fn lane_is_idle(&self, lane: Lane) -> bool {
        !self.is_broken(lane) && !self.entries.iter().any(|entry| entry.lane == lane)
    }

    /// Whether a run of `lane` that overlaps as `overlap` says, posted now,
    /// may advance at once as the queue would advance it: its lane idle,
    /// or every run queued of it overlapping and the oldest near enough
    /// (`Overlap::may_pass`); never in a failed lane.
    pub fn may_advance_now(&self, lane: Lane, overlap: Option<Overlap>) -> bool {
        if self.is_broken(lane) {
            return false;
        }
        let front = self.entries.iter().filter(|entry| entry.lane == lane).fold(LaneFront::Free, |front, entry| front.behind(entry.overlap));
        front.admits(overlap, false)
    }

    fn is_broken(&self, lane: Lane) -> bool {
        self.broken.iter().any(|(broken, _)| *broken == lane)
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
    /// when every queued run is of its lane and no lane failed: no run can
    /// finish before the word arrives (the others wait behind the oldest,
    /// or, overlapping, for contributions their senders put after the one
    /// awaited; transports deliver one sender's puts in order), and every
    /// run that may advance took its step in the last pass, so a waiter
    /// may poll the word instead of calling `advance` until then. `None`
    /// when runs of several lanes are queued (each lane's oldest must get
    /// its turn), or none.
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
    /// the one before it finishes, or for its first step where it
    /// overlaps the ones before it (`Schedule::overlap`); `finished` hears
    /// of every run that ended (done or failed), in the order they ended.
    pub fn advance<F>(&mut self, transport: &mut T, mut finished: F)
    where
        F: FnMut(Tag, Result<(), TransportError>),
    {
        self.advance_returning(transport, |tag, run, outcome| {
            finished(tag, outcome);
            drop(run);
        });
    }

    /// `advance`, handing every run that ended back with its tag: the
    /// caller may keep its memory for a later run (`finished` drops it
    /// otherwise).
    pub fn advance_returning<F>(&mut self, transport: &mut T, mut finished: F)
    where
        F: FnMut(Tag, R, Result<(), TransportError>),
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
                finished(entry.tag, entry.run, outcome.map(|_| ()));
            }
            return;
        }
        // Each lane's runs left queued so far in this pass.
        let mut fronts = [LaneFront::Free; LANES];
        let mut index = 0;
        while index < self.entries.len() {
            let lane = self.entries[index].lane;
            let front = &mut fronts[lane as usize];
            let entry = &mut self.entries[index];
            let overlap = entry.overlap;
            let outcome = match self.broken.iter().find(|(broken, _)| *broken == lane) {
                Some((_, why)) => Err(TransportError::Failed(format!("an earlier run of this communicator failed: {why}"))),
                None if !front.admits(overlap, entry.stepped) => Ok(false),
                None => {
                    entry.stepped = true;
                    entry.run.advance(transport).map(|step| step == Step::Done)
                }
            };
            match outcome {
                Ok(false) => {
                    *front = front.behind(overlap);
                    index += 1;
                }
                Ok(true) => {
                    let entry = self.entries.remove(index).expect("index within the queue");
                    finished(entry.tag, entry.run, Ok(()));
                }
                Err(error) => {
                    self.record_failure(lane, &error);
                    let entry = self.entries.remove(index).expect("index within the queue");
                    finished(entry.tag, entry.run, Err(error));
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

    /// A `Countdown` with a name, to tell which run came back.
    struct Named {
        name: &'static str,
        countdown: Countdown,
    }

    impl Schedule<()> for Named {
        type Error = TransportError;

        fn advance(&mut self, transport: &mut ()) -> Result<Step, TransportError> {
            self.countdown.advance(transport)
        }
    }

    fn named(name: &'static str, pending: u32) -> Named {
        Named { name, countdown: Countdown { pending } }
    }

    #[test]
    fn the_runs_that_end_come_back_with_their_tags_alone_or_among_others() {
        let mut queue: ScheduleQueue<'_, (), Ticket, Named> = ScheduleQueue::default();
        let mut ended = Vec::new();
        let lone = queue.post(Lane::Barrier, named("lone", 0));
        queue.advance_returning(&mut (), |tag, run, outcome| ended.push((tag, run.name, outcome.is_ok())));
        assert_eq!(ended, vec![(lone, "lone", true)], "the lone run, through the short way");

        ended.clear();
        let slow = queue.post(Lane::Barrier, named("slow", 1));
        let quick = queue.post(Lane::Bcast, named("quick", 0));
        queue.advance_returning(&mut (), |tag, run, outcome| ended.push((tag, run.name, outcome.is_ok())));
        queue.advance_returning(&mut (), |tag, run, outcome| ended.push((tag, run.name, outcome.is_ok())));
        assert_eq!(ended, vec![(quick, "quick", true), (slow, "slow", true)], "each run with its own tag, in the order they ended");
        assert!(queue.is_empty());
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

    /// Call `name`, overlapping as `overlap`: done after `pending`
    /// advances that returned Pending; logs its name at every advance.
    struct Logged {
        name: u64,
        overlap: Option<Overlap>,
        pending: u32,
        log: std::sync::Arc<std::sync::Mutex<Vec<u64>>>,
    }

    impl Schedule<()> for Logged {
        type Error = TransportError;

        fn advance(&mut self, _transport: &mut ()) -> Result<Step, TransportError> {
            self.log.lock().expect("the log").push(self.name);
            if self.pending == 0 {
                return Ok(Step::Done);
            }
            self.pending -= 1;
            Ok(Step::Pending)
        }

        fn overlap(&self) -> Option<Overlap> {
            self.overlap
        }
    }

    #[test]
    fn overlapping_runs_step_beside_the_oldest_within_its_depth_and_once_until_it_finishes() {
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let run = |name: u64, depth: Option<u64>, pending: u32| -> Run<'static, ()> {
            let overlap = depth.map(|depth| Overlap { number: name, depth });
            Box::new(Logged { name, overlap, pending, log: log.clone() })
        };
        let mut queue: ScheduleQueue<'_, ()> = ScheduleQueue::default();
        let oldest = queue.post(Lane::Allreduce, run(1, Some(2), 2));
        let near = Some(Overlap { number: 2, depth: 2 });
        assert!(queue.may_advance_now(Lane::Allreduce, near), "one call behind the oldest, depth 2");
        assert!(!queue.may_advance_now(Lane::Allreduce, Some(Overlap { number: 3, depth: 2 })), "two calls behind: too far");
        assert!(!queue.may_advance_now(Lane::Allreduce, None), "a run that does not overlap waits");
        let beside = queue.post(Lane::Allreduce, run(2, Some(2), 3));
        let far = queue.post(Lane::Allreduce, run(3, Some(2), 0));
        let closed = queue.post(Lane::Allreduce, run(4, None, 0));
        let after_closed = queue.post(Lane::Allreduce, run(5, Some(2), 0));
        assert!(!queue.may_advance_now(Lane::Allreduce, Some(Overlap { number: 6, depth: 8 })), "behind a run that does not overlap");
        let mut finished = Vec::new();
        for _ in 0..3 {
            queue.advance(&mut (), |tag, outcome| finished.push((tag, outcome.is_ok())));
        }
        // Pass 1: the oldest, and call 2's first step (call 3 is 2 behind).
        // Pass 2: the oldest alone (call 2 stepped already). Pass 3: the
        // oldest finishes, then call 2 (now the oldest) steps, still
        // pending, and call 3 takes its first step beside it and finishes;
        // call 4 does not overlap: it waits for call 2.
        assert_eq!(*log.lock().expect("the log"), vec![1, 2, 1, 1, 2, 3]);
        assert_eq!(finished, vec![(oldest, true), (far, true)]);
        queue.drain(&mut (), |_| Ok(()), |tag, outcome| finished.push((tag, outcome.is_ok()))).expect("no failure");
        assert_eq!(finished[2..], [(beside, true), (closed, true), (after_closed, true)]);
        assert_eq!(log.lock().expect("the log")[6..], [2, 2, 4, 5], "call 2 to its end, then 4, then 5");
    }
}
