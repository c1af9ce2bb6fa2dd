//! Waiting for a word in the local window: spin while the peer is likely to
//! answer within a cache-line transfer, then yield the core so that
//! oversubscribed runs (more ranks than cores) still progress, say so when
//! a wait lasts long enough to look like a hang, and give up with an error
//! when the transport reports a failed peer or the wait outlasts the fault
//! timeout: MPI cannot abandon a collective, but it can fail it.

mod side_progress;
pub(crate) mod stalls;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::transport::{Endpoint, TransportError, Windows};

pub use side_progress::{NoSideProgress, SideProgress, Waits};
pub use stalls::stalled_waits;

/// A wait's silence after which the job is reported hung, unless the
/// user sets another (`coll_rdma_fault_timeout_s`): long enough for any
/// straggler a healthy job has, short enough that a dead job ends.
pub const DEFAULT_FAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Yielding polls between two looks at the transport's health, which
/// costs more than a poll. The clock is read at every yielding poll: a
/// rank descheduled for milliseconds at each yield (an oversubscribed,
/// loaded node) must still warn and give up on time.
const POLLS_BETWEEN_CHECKS: u32 = 256;

/// The stall warning and fault timeout of the waits that have no
/// communicator's policy at hand (room in a shared-memory ring, a verbs
/// send queue or staging): the process's `coll_rdma_stall_warning` and
/// `coll_rdma_fault_timeout_s`, set once when the parameters are read.
/// Milliseconds; `u64::MAX` = never.
static PROCESS_STALL_WARNING_MS: AtomicU64 = AtomicU64::new(10_000);
static PROCESS_FAULT_TIMEOUT_MS: AtomicU64 = AtomicU64::new(DEFAULT_FAULT_TIMEOUT.as_millis() as u64);

/// Sets the limits of the waits that take no [`WaitPolicy`] (see
/// [`process_limits`]); `None` or `Duration::MAX` means never.
pub fn set_process_wait_limits(stall_warning: Duration, fault_timeout: Option<Duration>) {
    let millis = |limit: Duration| u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
    PROCESS_STALL_WARNING_MS.store(millis(stall_warning), Ordering::Relaxed);
    PROCESS_FAULT_TIMEOUT_MS.store(fault_timeout.map_or(u64::MAX, millis), Ordering::Relaxed);
}

/// The stall warning and the fault timeout (`None`: never give up) of the
/// waits that take no [`WaitPolicy`].
pub(crate) fn process_limits() -> (Duration, Option<Duration>) {
    let stall_warning = match PROCESS_STALL_WARNING_MS.load(Ordering::Relaxed) {
        u64::MAX => Duration::MAX,
        millis => Duration::from_millis(millis),
    };
    let fault_timeout = match PROCESS_FAULT_TIMEOUT_MS.load(Ordering::Relaxed) {
        u64::MAX => None,
        millis => Some(Duration::from_millis(millis)),
    };
    (stall_warning, fault_timeout)
}

/// How a rank waits for a flag.
#[derive(Clone, Copy, Debug)]
pub struct WaitPolicy {
    /// Polls before the first `sched_yield`; 0 yields at once (oversubscribed).
    pub spin_polls: u32,
    /// After this long without the flag, warn (then again at every doubling).
    pub stall_warning: Duration,
    /// After this long without the flag, fail the wait as hung; `None`
    /// waits for ever.
    pub fault_timeout: Option<Duration>,
}

impl Default for WaitPolicy {
    fn default() -> Self {
        WaitPolicy { spin_polls: 2000, stall_warning: Duration::from_secs(10), fault_timeout: Some(DEFAULT_FAULT_TIMEOUT) }
    }
}

impl WaitPolicy {
    /// The policy for `local_ranks` processes sharing `cores` cores: spinning
    /// only helps while every waiting rank has a core of its own.
    pub fn for_occupancy(local_ranks: usize, cores: usize, stall_warning: Duration) -> Self {
        let spin_polls = if local_ranks > cores { 0 } else { WaitPolicy::default().spin_polls };
        WaitPolicy { spin_polls, stall_warning, ..WaitPolicy::default() }
    }
}

/// Waits until the word at `flag_offset` of the local window is at least
/// `target`, and returns its value. Fails if the transport reports a failed
/// peer, or after the policy's fault timeout. `describe` is only called to
/// explain a stall.
#[inline]
pub fn wait_at_least<T, D>(transport: &T, flag_offset: usize, target: u64, waits: Waits<'_>, describe: D) -> Result<u64, TransportError>
where
    T: Windows + ?Sized,
    D: Fn() -> String,
{
    for _ in 0..waits.policy.spin_polls {
        let value = transport.local_flag(flag_offset);
        if value >= target {
            return Ok(value);
        }
        std::hint::spin_loop();
    }
    wait_yielding(transport, flag_offset, target, waits, &describe)
}

#[cold]
fn wait_yielding<T: Windows + ?Sized>(
    transport: &T,
    flag_offset: usize,
    target: u64,
    waits: Waits<'_>,
    describe: &dyn Fn() -> String,
) -> Result<u64, TransportError> {
    let policy = waits.policy;
    let mut watch = StallWatch::new(policy, policy.fault_timeout);
    let mut polls: u32 = 0;
    loop {
        transport.progress();
        waits.side_progress.progress_others();
        let value = transport.local_flag(flag_offset);
        if value >= target {
            return Ok(value);
        }
        crate::idle::yield_core();
        polls = polls.wrapping_add(1);
        if polls % POLLS_BETWEEN_CHECKS == 0 || watch.deadline_passed() {
            watch.check(transport, &|| format!("{} (word at offset {flag_offset} is {value}, needs {target})", describe()))?;
        }
    }
}

/// What every yielding wait does now and then: looks at the transport's
/// health, warns at the policy's intervals, notes itself where a hang
/// report can find it, and gives up at its limit.
pub(crate) struct StallWatch {
    started: Instant,
    next_warning: Duration,
    give_up_after: Option<Duration>,
    noted: Option<stalls::Note>,
}

impl StallWatch {
    pub(crate) fn new(policy: &WaitPolicy, give_up_after: Option<Duration>) -> Self {
        StallWatch { started: Instant::now(), next_warning: policy.stall_warning, give_up_after, noted: None }
    }

    /// Whether the wait is due to be noted, warned about or given up: one
    /// clock read, cheap beside the yield every caller just made.
    pub(crate) fn deadline_passed(&self) -> bool {
        let waited = self.started.elapsed();
        waited >= self.next_warning
            || self.give_up_after.is_some_and(|limit| waited >= limit)
            || (self.noted.is_none() && waited >= stalls::NOTE_AFTER)
    }

    #[cold]
    pub(crate) fn check<T: Endpoint + ?Sized>(&mut self, transport: &T, describe: &dyn Fn() -> String) -> Result<(), TransportError> {
        let who = || format!("rank {} of {}", transport.rank(), transport.size());
        if let Err(failure) = transport.health() {
            return Err(TransportError::Failed(format!("{} stopped waiting for {}: {}", who(), describe(), reason(&failure))));
        }
        let waited = self.started.elapsed();
        if self.noted.is_none() && waited >= stalls::NOTE_AFTER {
            self.noted = Some(stalls::Note::new(format!("{} waits for {}", who(), describe())));
        }
        if let Some(limit) = self.give_up_after
            && waited >= limit
        {
            return Err(TransportError::Failed(format!(
                "{} gave up after {:.1} s without progress waiting for {}; the job looks hung \
                 (a peer may have died or be stuck outside MPI; see coll_rdma_fault_timeout_s)",
                who(),
                waited.as_secs_f64(),
                describe()
            )));
        }
        if waited >= self.next_warning {
            tracing::warn!(
                "{} has waited {:.1} s for {}; a peer may have died or be stuck outside MPI",
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

