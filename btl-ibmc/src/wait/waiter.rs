//! The one loop every wait of this crate runs, whatever it waits for (a
//! flag, room in a ring or a send queue, a multicast piece): spin while
//! the answer is likely within a cache-line transfer, then yield the core
//! so that oversubscribed runs progress, or, where the data comes through
//! the kernel's sockets (udp), sleep in the kernel until something
//! arrives, so that the kernel has a core to deliver it on; once past
//! spinning, warn when the wait looks like a hang (at the stall warning,
//! then at every doubling), note itself where a hang report finds it, and
//! give up with an error naming what it waited for when the peers'
//! transport reports a failure or the fault timeout passes: MPI cannot
//! abandon a collective, but it can fail it. Nothing here allocates or
//! reads the clock until the wait yields or sleeps.

use std::time::{Duration, Instant};

use super::{WaitPolicy, process_policy, stalls};
use crate::transport::{Endpoint, Sleep, TransportError};

/// The longest a wait sleeps in the kernel at a time. What only this
/// rank's loop does runs between two sleeps: the retransmission timers
/// of the udp channel and of reliable multicast (their floor is 2 ms),
/// the side progress of other communicators, and the stall checks.
pub(crate) const LONGEST_SLEEP: Duration = Duration::from_millis(1);

/// Yields between two looks at the transport's health, which costs more
/// than a poll (the first yield looks too). The clock is read at every
/// yield: a rank descheduled for milliseconds at each one (an
/// oversubscribed, loaded node) must still warn and give up on time.
const YIELDS_BETWEEN_CHECKS: u32 = 64;

/// What a stalled wait can say about itself: which rank waits (for its
/// messages) and whether the peers it waits on can still answer.
pub(crate) trait WaitContext {
    /// `(rank, size)` of the waiting rank, where the wait knows it.
    fn waiting_rank(&self) -> Option<(usize, usize)>;
    fn health(&self) -> Result<(), TransportError>;
    /// [`Endpoint::sleeps_in_kernel`], where the wait has an endpoint.
    fn sleeps_in_kernel(&self) -> bool {
        false
    }
    /// [`Endpoint::sleep_until_arrival`], where the wait has an endpoint.
    fn sleep_until_arrival(&self, longest: Duration) -> Sleep {
        let _ = longest;
        Sleep::NotOffered
    }
}

impl<T: Endpoint + ?Sized> WaitContext for T {
    fn waiting_rank(&self) -> Option<(usize, usize)> {
        Some((self.rank(), self.size()))
    }

    fn health(&self) -> Result<(), TransportError> {
        Endpoint::health(self)
    }

    fn sleeps_in_kernel(&self) -> bool {
        Endpoint::sleeps_in_kernel(self)
    }

    fn sleep_until_arrival(&self, longest: Duration) -> Sleep {
        Endpoint::sleep_until_arrival(self, longest)
    }
}

/// The context of a wait inside a transport's own channel (room in a
/// ring, a send queue, staging): the rank that waits, so that its warning
/// names it like every other wait's (the job's checks and users' log
/// filters look for "rank R of N has waited"); the health to ask would be
/// the transport's own, which its caller checks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnChannel {
    pub(crate) rank: usize,
    pub(crate) size: usize,
}

impl WaitContext for OwnChannel {
    fn waiting_rank(&self) -> Option<(usize, usize)> {
        Some((self.rank, self.size))
    }

    fn health(&self) -> Result<(), TransportError> {
        Ok(())
    }
}

/// One wait in progress: call [`Waiter::pause`] each time the awaited
/// thing is not there yet.
pub(crate) struct Waiter {
    policy: WaitPolicy,
    /// The polls this wait spins: the policy's `spin_polls`, or its
    /// `kernel_spin_polls` once the first pause found that the wait's
    /// transport sleeps in the kernel.
    spin_polls: u32,
    fitted: bool,
    spins: u32,
    yields: u32,
    /// Set at the first yield: the wait's clock starts there.
    watch: Option<StallWatch>,
}

impl Waiter {
    pub(crate) fn new(policy: &WaitPolicy) -> Self {
        Waiter { policy: *policy, spin_polls: policy.spin_polls, fitted: false, spins: 0, yields: 0, watch: None }
    }

    /// A wait that has no communicator's policy at hand: the process's,
    /// set from the parameters (see [`super::set_process_wait_policy`]).
    pub(crate) fn for_process() -> Self {
        Self::new(&process_policy())
    }

    /// Gives up at `limit` too, if that comes before the fault timeout.
    pub(crate) fn giving_up_by(mut self, limit: Option<Duration>) -> Self {
        self.policy.fault_timeout = match (limit, self.policy.fault_timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self
    }

    /// Whether the wait still spins: callers that progress the transport
    /// between polls do so only once it yields, since progressing would
    /// delay noticing an answer that comes within the spin.
    #[inline]
    pub(crate) fn is_spinning(&self) -> bool {
        self.spins < self.spin_polls
    }

    /// Waits a little. `describe` says what for, when the wait has lasted
    /// long enough to note, warn about or give up on.
    #[inline]
    pub(crate) fn pause<C, D>(&mut self, context: &C, describe: D) -> Result<(), TransportError>
    where
        C: WaitContext + ?Sized,
        D: Fn() -> String,
    {
        if !self.fitted {
            self.fit_to(context);
        }
        if self.is_spinning() {
            self.spins += 1;
            std::hint::spin_loop();
            return Ok(());
        }
        self.yield_and_watch(context, &describe)
    }

    #[cold]
    fn fit_to<C: WaitContext + ?Sized>(&mut self, context: &C) {
        self.fitted = true;
        self.spin_polls = self.policy.spin_polls_where(context.sleeps_in_kernel());
    }

    #[cold]
    fn yield_and_watch<C: WaitContext + ?Sized>(&mut self, context: &C, describe: &dyn Fn() -> String) -> Result<(), TransportError> {
        match context.sleep_until_arrival(LONGEST_SLEEP) {
            Sleep::NotOffered => crate::idle::yield_core(),
            Sleep::Woken => crate::idle::run_idle_hook(),
            // A quiet millisecond: the rest of the process may be owed
            // work (counting polls, the hook would wait a second here).
            Sleep::TimedOut => crate::idle::run_idle_hook_now(),
        }
        let policy = &self.policy;
        let watch = self.watch.get_or_insert_with(|| StallWatch::new(policy));
        let due = self.yields.is_multiple_of(YIELDS_BETWEEN_CHECKS);
        self.yields = self.yields.wrapping_add(1);
        if due || watch.deadline_passed(policy) {
            watch.check(policy, context, describe)?;
        }
        Ok(())
    }
}

/// The yielding part of a wait: when it started, when it warns next, and
/// its entry in the stalled-wait registry once it has one.
struct StallWatch {
    started: Instant,
    next_warning: Duration,
    noted: Option<stalls::Note>,
}

impl StallWatch {
    fn new(policy: &WaitPolicy) -> Self {
        StallWatch { started: Instant::now(), next_warning: policy.stall_warning, noted: None }
    }

    /// Whether the wait is due to be noted, warned about or given up: one
    /// clock read, cheap beside the yield every caller just made.
    fn deadline_passed(&self, policy: &WaitPolicy) -> bool {
        let waited = self.started.elapsed();
        waited >= self.next_warning
            || policy.fault_timeout.is_some_and(|limit| waited >= limit)
            || (self.noted.is_none() && waited >= stalls::NOTE_AFTER)
    }

    #[cold]
    fn check<C: WaitContext + ?Sized>(&mut self, policy: &WaitPolicy, context: &C, describe: &dyn Fn() -> String) -> Result<(), TransportError> {
        // "rank 2 of 4 " where the wait knows its rank, else nothing.
        let who = || context.waiting_rank().map_or_else(String::new, |(rank, size)| format!("rank {rank} of {size} "));
        if let Err(failure) = context.health() {
            return Err(TransportError::Failed(format!("{}stopped waiting for {}: {}", who(), describe(), reason(&failure))));
        }
        let waited = self.started.elapsed();
        if self.noted.is_none() && waited >= stalls::NOTE_AFTER {
            self.noted = Some(stalls::Note::new(format!("{}waits for {}", who(), describe())));
        }
        if let Some(limit) = policy.fault_timeout
            && waited >= limit
        {
            return Err(TransportError::Failed(format!(
                "{}gave up after {:.1} s without progress waiting for {}; the job looks hung \
                 (a peer may have died or be stuck outside MPI; see coll_rdma_fault_timeout_s)",
                who(),
                waited.as_secs_f64(),
                describe()
            )));
        }
        if waited >= self.next_warning {
            tracing::warn!(
                "{}has waited {:.1} s for {}; a peer may have died or be stuck outside MPI",
                who(),
                waited.as_secs_f64(),
                describe()
            );
            self.next_warning = self.next_warning.saturating_mul(2);
        }
        Ok(())
    }
}

/// The failure's own words, without a second "transport failure:" prefix.
fn reason(failure: &TransportError) -> String {
    match failure {
        TransportError::Failed(why) => why.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rank of its own: nobody else can answer its waits.
    const ALONE: OwnChannel = OwnChannel { rank: 0, size: 1 };

    fn policy(spin_polls: u32, stall_warning: Duration, fault_timeout: Option<Duration>) -> WaitPolicy {
        WaitPolicy { spin_polls, stall_warning, fault_timeout, ..WaitPolicy::default() }
    }

    /// A context whose data comes through the kernel, counting its sleeps.
    struct Kernel {
        sleeps: std::cell::Cell<u32>,
    }

    impl WaitContext for Kernel {
        fn waiting_rank(&self) -> Option<(usize, usize)> {
            None
        }

        fn health(&self) -> Result<(), TransportError> {
            Ok(())
        }

        fn sleeps_in_kernel(&self) -> bool {
            true
        }

        fn sleep_until_arrival(&self, _longest: Duration) -> Sleep {
            self.sleeps.set(self.sleeps.get() + 1);
            Sleep::TimedOut
        }
    }

    #[test]
    fn a_wait_on_a_kernel_transport_spins_its_own_count_then_sleeps_instead_of_yielding() {
        let kernel = Kernel { sleeps: std::cell::Cell::new(0) };
        let mut waiter = Waiter::new(&WaitPolicy { spin_polls: 1000, kernel_spin_polls: 2, ..policy(0, Duration::MAX, None) });
        for _ in 0..2 {
            waiter.pause(&kernel, String::new).unwrap();
        }
        assert_eq!(kernel.sleeps.get(), 0, "slept while spinning");
        assert!(!waiter.is_spinning(), "spun on past the kernel transport's count");
        for _ in 0..3 {
            waiter.pause(&kernel, String::new).unwrap();
        }
        assert_eq!(kernel.sleeps.get(), 3, "a pause past spinning did not sleep");

        // The same policy on a transport that does not sleep spins its full count.
        let mut waiter = Waiter::new(&WaitPolicy { spin_polls: 1000, kernel_spin_polls: 2, ..policy(0, Duration::MAX, None) });
        for _ in 0..3 {
            waiter.pause(&ALONE, String::new).unwrap();
        }
        assert!(waiter.is_spinning());
    }

    #[test]
    fn a_chosen_spin_count_holds_on_every_transport() {
        let chosen = WaitPolicy::default().spinning(7);
        assert_eq!((chosen.spin_polls, chosen.kernel_spin_polls), (7, 7));
        let automatic = WaitPolicy::for_occupancy(2, 2, Duration::MAX);
        assert_eq!((automatic.spin_polls, automatic.kernel_spin_polls), (2000, crate::wait::KERNEL_DEFAULT_SPIN_POLLS));
    }

    /// Pauses until the waiter gives up or `patience` runs out.
    fn pause_until_refused(waiter: &mut Waiter, patience: Duration) -> Option<TransportError> {
        let started = Instant::now();
        while started.elapsed() < patience {
            if let Err(failure) = waiter.pause(&ALONE, || "room in a ring nobody drains".into()) {
                return Some(failure);
            }
        }
        None
    }

    #[test]
    fn a_wait_nobody_ends_gives_up_at_the_fault_timeout_saying_what_it_waited_for() {
        let limit = Duration::from_millis(300);
        let started = Instant::now();
        let mut waiter = Waiter::new(&policy(1000, Duration::MAX, Some(limit)));
        let failure = pause_until_refused(&mut waiter, Duration::from_secs(120)).expect("the wait went on past its fault timeout");
        assert!(started.elapsed() >= limit, "gave up after {:?}, before the {limit:?} timeout", started.elapsed());
        let text = failure.to_string();
        assert!(text.contains("room in a ring nobody drains") && text.contains("coll_rdma_fault_timeout_s"), "{text}");
    }

    #[test]
    fn without_a_fault_timeout_a_wait_goes_on() {
        let mut waiter = Waiter::new(&policy(1000, Duration::MAX, None));
        assert!(pause_until_refused(&mut waiter, Duration::from_millis(500)).is_none());
    }

    #[test]
    fn a_wait_spins_exactly_the_policys_polls_before_yielding() {
        let mut waiter = Waiter::new(&policy(3, Duration::MAX, None));
        for _ in 0..3 {
            assert!(waiter.is_spinning());
            waiter.pause(&ALONE, String::new).unwrap();
        }
        assert!(!waiter.is_spinning());
        assert!(waiter.watch.is_none(), "the clock started while spinning");
        waiter.pause(&ALONE, String::new).unwrap();
        assert!(waiter.watch.is_some(), "the fourth pause did not yield");
    }

    #[test]
    fn the_tighter_of_a_callers_limit_and_the_fault_timeout_ends_the_wait() {
        let (short, long) = (Duration::from_millis(1), Duration::from_secs(1));
        let tighter = |limit, timeout| Waiter::new(&policy(0, Duration::MAX, timeout)).giving_up_by(limit).policy.fault_timeout;
        assert_eq!(tighter(Some(short), Some(long)), Some(short));
        assert_eq!(tighter(Some(long), Some(short)), Some(short));
        assert_eq!(tighter(None, Some(long)), Some(long));
        assert_eq!(tighter(Some(long), None), Some(long));
        assert_eq!(tighter(None, None), None);
    }
}
