//! How a run meets a word that has not arrived yet. The resumable form of a
//! collective polls it once and returns `Step::Pending` (the progress loop
//! calls again); the blocking form waits for it under the communicator's
//! policy (spin, yield or sleep, side progress, stall warnings, fault
//! timeout). Both drive the same state machine: a blocking call is the
//! resumable run with `Meet::Block`, which never leaves a step unfinished.

use std::cell::Cell;
use std::time::{Duration, Instant};

use btl_ibmc::{wait_at_least, wait_for_peer_at_least, Endpoint, PeerReads, TransportError, WaitPolicy, Waits, Windows};

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

    /// Under `Poll`, notes the local word at `offset` as awaited until it
    /// is at least `target`, as a poll that found it below would, without
    /// reading it: for a run that returns before it looks (the exchange at
    /// its post). Nothing under `Block`.
    #[inline]
    pub(crate) fn await_local(self, offset: usize, target: u64) {
        if let Meet::Poll(awaited) = self
            && awaited.get().is_none()
        {
            awaited.set(Some(AwaitedWord { offset, at_least: target }));
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
        Stuck::Quiet => Ok(step),
        Stuck::Warn(waited) => {
            warn_stuck(transport, &run.describe(), waited);
            Ok(step)
        }
        Stuck::PastFaultTimeout(stuck) => Err(TransportError::Failed(format!(
            "{} made no progress for {:.1} s (the fault timeout)",
            run.describe(),
            stuck.as_secs_f64()
        ))),
    }
}

/// The limits of a run's wait, as the blocking waits have them
/// (`WaitPolicy`): warn after `stall_warning` without progress (then at
/// every doubling), fail after `fault_timeout` (`None`: never).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallLimits {
    pub fault_timeout: Option<Duration>,
    pub stall_warning: Duration,
}

impl StallLimits {
    pub fn of(policy: &WaitPolicy) -> Self {
        StallLimits { fault_timeout: policy.fault_timeout, stall_warning: policy.stall_warning }
    }
}

/// A gap between two passes longer than this means the application was
/// away from MPI (computing), not waiting: a rank may post a call and
/// compute for minutes while a peer is as late, and only the time it then
/// spends inside MPI counts as waiting.
pub const AWAY: Duration = Duration::from_millis(100);

/// Stuck polls between two clock reads of a run without a fault timeout:
/// a poll costs a few hundred instructions, so one read per this many
/// costs a wait about 1 % more, and a wait that ends within this many
/// polls (most do) reads no clock at all. Few enough that on a loaded
/// machine, where a wait yields its core before every poll and a poll can
/// take a time slice, the clock is still read within a second or two.
const POLLS_BETWEEN_CLOCK_READS: u32 = 64;
const _: () = assert!(POLLS_BETWEEN_CLOCK_READS.is_power_of_two(), "counted with a mask");

/// What the blocking waits do between polls, for a run advanced by polls:
/// between two calls that found it stuck, the transport gets one progress
/// call and a health check (a dead peer fails the run); a run stuck for
/// the stall warning's time is reported (then at every doubling, as a
/// blocking wait is), and one stuck longer than the fault timeout fails
/// instead of pending for ever.
/// Without a fault timeout (the default) the clock is read only every
/// `POLLS_BETWEEN_CLOCK_READS` stuck polls, never for a run that is stuck
/// fewer than that: a waiting rank's MPI_Wait books every poll, and a
/// clock read was a quarter of a poll's instructions. The stuck time is
/// then counted from the first read, so a warning comes those polls late.
/// Reads further apart than `AWAY` for each poll between them (the
/// application posted and went on computing, calling MPI seldom or not at
/// all) start the stuck time again: the peers may be computing as long,
/// and no blocking call would have been waiting meanwhile.
#[derive(Debug, PartialEq)]
pub struct StallClock {
    limits: StallLimits,
    stuck_since: Option<Instant>,
    /// The last clock read while stuck (meaningful while `stuck_since` is).
    last_read: Option<Instant>,
    /// Polls that found the run stuck since it last moved.
    stuck_polls: u32,
    /// The stuck polls that read the clock are those whose count has
    /// none of these bits: every one with a fault timeout (0), else one in
    /// `POLLS_BETWEEN_CLOCK_READS`.
    polls_between_reads_mask: u32,
    /// The stuck time of the next warning.
    next_warning: Duration,
    /// The word the last poll-mode advance found missing first, while the
    /// run is pending (`Schedule::awaited`).
    awaited: Option<AwaitedWord>,
}

/// What a stuck poll found (`StallClock::stuck`).
#[derive(Debug, PartialEq)]
pub enum Stuck {
    /// Nothing to report.
    Quiet,
    /// Stuck this long, past the stall warning (or one of its doublings).
    Warn(Duration),
    /// Stuck this long, past the fault timeout.
    PastFaultTimeout(Duration),
}

impl StallClock {
    pub fn new(limits: StallLimits) -> Self {
        let polls_between_reads_mask = if limits.fault_timeout.is_some() { 0 } else { POLLS_BETWEEN_CLOCK_READS - 1 };
        StallClock {
            limits,
            stuck_since: None,
            last_read: None,
            stuck_polls: 0,
            polls_between_reads_mask,
            next_warning: limits.stall_warning,
            awaited: None,
        }
    }

    /// What the run's `Schedule::awaited` answers: the first own-window
    /// word its last advance found missing.
    pub(crate) fn awaited(&self) -> Option<AwaitedWord> {
        self.awaited
    }

    /// The run got something done: its stuck time starts again.
    #[inline]
    pub(crate) fn moved(&mut self) {
        (self.stuck_since, self.stuck_polls) = (None, 0);
    }

    /// A poll found the run stuck (as the one before, unless `moved` came
    /// between): whether that is worth a warning, or past the fault timeout.
    #[inline]
    pub fn stuck(&mut self) -> Stuck {
        self.stuck_polls = self.stuck_polls.wrapping_add(1);
        if self.stuck_polls & self.polls_between_reads_mask != 0 {
            return Stuck::Quiet;
        }
        self.read_clock()
    }

    #[cold]
    fn read_clock(&mut self) -> Stuck {
        let now = Instant::now();
        let polls_since_last_read = self.polls_between_reads_mask + 1;
        if self.last_read.is_some_and(|last| now.duration_since(last) > AWAY * polls_since_last_read) {
            self.stuck_since = None;
        }
        self.last_read = Some(now);
        let since = *self.stuck_since.get_or_insert_with(|| {
            // A new stuck time (the first, the first since the run moved,
            // or the first after the application was away): warned at the
            // stall warning again.
            self.next_warning = self.limits.stall_warning;
            now
        });
        let stuck = now.duration_since(since);
        if self.limits.fault_timeout.is_some_and(|limit| stuck > limit) {
            return Stuck::PastFaultTimeout(stuck);
        }
        if stuck >= self.next_warning {
            self.next_warning = self.next_warning.saturating_mul(2);
            return Stuck::Warn(stuck);
        }
        Stuck::Quiet
    }

    /// Books the outcome of one poll-mode advance; `moved` says whether it
    /// got anything done (a stuck run's clock keeps running).
    fn book<T: Endpoint + ?Sized>(&mut self, transport: &T, step: Step, moved: bool) -> Result<Stuck, TransportError> {
        if step == Step::Done || moved {
            self.moved();
            if step == Step::Done {
                return Ok(Stuck::Quiet);
            }
        }
        transport.progress();
        transport.health()?;
        Ok(self.stuck())
    }
}

/// The warning of a non-blocking run stuck for `waited` (`Stuck::Warn`),
/// in the blocking waits' words (whoever reads the output, tests
/// included, tells the two apart only by the call's description): `what`
/// says what the run waits for.
#[cold]
pub(crate) fn warn_stuck<T: Endpoint + ?Sized>(transport: &T, what: &str, waited: Duration) {
    tracing::warn!(
        "rank {} of {} has waited {:.1} s for {what} (a non-blocking call); a peer may have died or be stuck outside MPI \
         (coll_rdma_stall_warning, coll_rdma_fault_timeout_s)",
        transport.rank(),
        transport.size(),
        waited.as_secs_f64()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(fault_timeout: Option<Duration>, stall_warning: Duration) -> StallClock {
        StallClock::new(StallLimits { fault_timeout, stall_warning })
    }

    /// Polls `polls` stuck polls, sleeping `pause` before the last one;
    /// every outcome that is not `Quiet`, with the poll that gave it.
    fn poll_stuck(clock: &mut StallClock, polls: u32, pause: Duration) -> Vec<(u32, Stuck)> {
        let mut reports = Vec::new();
        for poll in 1..=polls {
            if poll == polls {
                std::thread::sleep(pause);
            }
            match clock.stuck() {
                Stuck::Quiet => {}
                report => reports.push((poll, report)),
            }
        }
        reports
    }

    #[test]
    fn a_stuck_run_without_a_fault_timeout_warns_at_the_stall_warning_and_its_doublings() {
        let warning = Duration::from_millis(20);
        let mut clock = clock(None, warning);
        // The first clock read starts the stuck time: nothing to say yet,
        // however long the polls before it took.
        assert_eq!(poll_stuck(&mut clock, POLLS_BETWEEN_CLOCK_READS, warning * 3), vec![]);
        let warned = poll_stuck(&mut clock, POLLS_BETWEEN_CLOCK_READS, warning);
        assert!(matches!(warned.as_slice(), [(_, Stuck::Warn(waited))] if *waited >= warning), "{warned:?}");
        // The next warning waits for the doubling: stuck at least 40 ms.
        let again = (0..1000).find_map(|_| poll_stuck(&mut clock, POLLS_BETWEEN_CLOCK_READS, Duration::from_millis(5)).pop());
        assert!(matches!(again, Some((_, Stuck::Warn(waited))) if waited >= warning * 2), "{again:?}");
    }

    #[test]
    fn progress_starts_the_stuck_time_again() {
        let warning = Duration::from_millis(20);
        let mut clock = clock(None, warning);
        poll_stuck(&mut clock, POLLS_BETWEEN_CLOCK_READS, Duration::ZERO);
        clock.moved();
        // Stuck for longer than the warning in all, but the run moved in
        // between: the clock's first read after that starts afresh.
        assert_eq!(poll_stuck(&mut clock, POLLS_BETWEEN_CLOCK_READS, warning * 2), vec![]);
        let warned = poll_stuck(&mut clock, POLLS_BETWEEN_CLOCK_READS, warning);
        assert!(matches!(warned.as_slice(), [(_, Stuck::Warn(_))]), "warned from the first read after the move: {warned:?}");
    }

    #[test]
    fn a_wait_that_ends_within_the_polls_between_reads_reads_no_clock() {
        let mut clock = clock(None, Duration::ZERO);
        assert_eq!(poll_stuck(&mut clock, POLLS_BETWEEN_CLOCK_READS - 1, Duration::ZERO), vec![]);
        assert_eq!(clock.stuck_since, None, "no clock read");
    }

    #[test]
    fn with_a_fault_timeout_every_stuck_poll_reads_the_clock_and_fails_past_it() {
        let timeout = Duration::from_millis(20);
        let mut clock = clock(Some(timeout), Duration::MAX);
        assert_eq!(clock.stuck(), Stuck::Quiet);
        assert!(clock.stuck_since.is_some(), "the first stuck poll starts the clock");
        std::thread::sleep(timeout * 2);
        assert!(matches!(clock.stuck(), Stuck::PastFaultTimeout(waited) if waited > timeout));
    }

    #[test]
    fn time_away_from_mpi_between_stuck_polls_is_not_waiting() {
        let timeout = Duration::from_millis(150);
        let mut clock = clock(Some(timeout), Duration::MAX);
        assert_eq!(clock.stuck(), Stuck::Quiet, "the post's poll");
        // The application computes for longer than the fault timeout, then
        // waits: only the wait counts.
        std::thread::sleep(timeout * 2);
        assert_eq!(clock.stuck(), Stuck::Quiet, "the wait's first poll starts the stuck time");
        // Stuck in the wait (polls well within `AWAY`) past the timeout. A
        // loaded machine may stretch one gap past `AWAY`, which only starts
        // the clock again, so the loop runs until the clock gives up.
        let started = Instant::now();
        let outcome = loop {
            match clock.stuck() {
                Stuck::Quiet if started.elapsed() < Duration::from_secs(60) => std::thread::sleep(Duration::from_millis(1)),
                outcome => break outcome,
            }
        };
        assert!(matches!(outcome, Stuck::PastFaultTimeout(waited) if waited > timeout && waited < started.elapsed() + AWAY), "{outcome:?}");
    }

    #[test]
    fn polls_far_apart_without_a_fault_timeout_never_warn() {
        // One read in `POLLS_BETWEEN_CLOCK_READS` polls: the reads may be
        // that many `AWAY`s apart before they count as away.
        let warning = Duration::from_millis(20);
        let mut clock = clock(None, warning);
        assert_eq!(poll_stuck(&mut clock, POLLS_BETWEEN_CLOCK_READS, Duration::ZERO), vec![]);
        clock.last_read = clock.last_read.map(|read| read.checked_sub(AWAY * (POLLS_BETWEEN_CLOCK_READS + 1)).expect("up for seconds"));
        assert_eq!(poll_stuck(&mut clock, POLLS_BETWEEN_CLOCK_READS, warning), vec![], "away between the reads");
        let warned = poll_stuck(&mut clock, POLLS_BETWEEN_CLOCK_READS, warning);
        assert!(matches!(warned.as_slice(), [(_, Stuck::Warn(_))]), "close reads count again: {warned:?}");
    }

    #[test]
    fn a_stall_warning_of_never_stays_quiet() {
        let mut clock = clock(None, Duration::MAX);
        assert_eq!(poll_stuck(&mut clock, 3 * POLLS_BETWEEN_CLOCK_READS, Duration::from_millis(5)), vec![]);
    }
}
