//! How ranks wait: the policy (spin, then yield, or sleep in the kernel
//! where the data comes through it; warn; give up), the
//! process-wide policy of the waits that have no communicator's at hand,
//! and the wait for a word in the local window that every collective
//! uses. The loop itself is [`waiter`]'s, shared by every wait.

mod side_progress;
pub(crate) mod stalls;
mod waiter;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::transport::{Endpoint, PeerReads, TransportError, Windows};

pub use side_progress::{NoSideProgress, SideProgress, Waits};
pub use stalls::stalled_waits;
pub(crate) use waiter::{OwnChannel, Waiter};


/// Polls a wait without a communicator's policy spins before yielding when
/// `coll_rdma_spin_polls` is automatic: such a wait (room in a ring or a
/// send queue) cannot tell whether the node is oversubscribed, and a
/// consumer that is running drains a slot within about this many polls.
pub const PROCESS_DEFAULT_SPIN_POLLS: u32 = 1000;

/// Polls a wait spins before sleeping where the data comes through the
/// kernel (udp), when `coll_rdma_spin_polls` is automatic: none. Every
/// spin there keeps the core the kernel's delivery needs, and on the veth
/// bed (2 hosts, a core each, `coll_latency -c bcast -m 8:8`) each
/// measured spin count cost latency: 0 polls 25-38 us a call, 10 polls
/// 42-62, 50 polls 52-97, 200 polls 53-56, 1000 polls 72-94, 2000 (the
/// shared-memory default) 85-87 (docs/udp-transport.md).
pub const KERNEL_DEFAULT_SPIN_POLLS: u32 = 0;

/// The policy of the waits that have no communicator's policy at hand
/// (room in a shared-memory ring, a verbs send queue or staging): the
/// process's `coll_rdma_spin_polls`, `coll_rdma_stall_warning` and
/// `coll_rdma_fault_timeout_s`, set once when the parameters are read.
/// Milliseconds; `u64::MAX` = never.
static PROCESS_SPIN_POLLS: AtomicU32 = AtomicU32::new(PROCESS_DEFAULT_SPIN_POLLS);
static PROCESS_KERNEL_SPIN_POLLS: AtomicU32 = AtomicU32::new(KERNEL_DEFAULT_SPIN_POLLS);
static PROCESS_STALL_WARNING_MS: AtomicU64 = AtomicU64::new(10_000);
// No fault timeout unless the user sets one (`coll_rdma_fault_timeout_s`):
// a healthy job may keep ranks waiting for minutes (rank 0 reading the
// input before a bcast, a checkpoint before a barrier), and stock Open MPI
// waits for them; the stall warnings say meanwhile what is awaited.
static PROCESS_FAULT_TIMEOUT_MS: AtomicU64 = AtomicU64::new(u64::MAX);

/// Sets the policy of the waits that take no [`WaitPolicy`] of their own;
/// a `stall_warning` of `Duration::MAX` never warns.
pub fn set_process_wait_policy(policy: &WaitPolicy) {
    let millis = |limit: Duration| u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
    PROCESS_SPIN_POLLS.store(policy.spin_polls, Ordering::Relaxed);
    PROCESS_KERNEL_SPIN_POLLS.store(policy.kernel_spin_polls, Ordering::Relaxed);
    PROCESS_STALL_WARNING_MS.store(millis(policy.stall_warning), Ordering::Relaxed);
    PROCESS_FAULT_TIMEOUT_MS.store(policy.fault_timeout.map_or(u64::MAX, millis), Ordering::Relaxed);
}

/// The policy of the waits that take no [`WaitPolicy`] of their own.
pub(crate) fn process_policy() -> WaitPolicy {
    let stall_warning = match PROCESS_STALL_WARNING_MS.load(Ordering::Relaxed) {
        u64::MAX => Duration::MAX,
        millis => Duration::from_millis(millis),
    };
    let fault_timeout = match PROCESS_FAULT_TIMEOUT_MS.load(Ordering::Relaxed) {
        u64::MAX => None,
        millis => Some(Duration::from_millis(millis)),
    };
    WaitPolicy {
        spin_polls: PROCESS_SPIN_POLLS.load(Ordering::Relaxed),
        kernel_spin_polls: PROCESS_KERNEL_SPIN_POLLS.load(Ordering::Relaxed),
        stall_warning,
        fault_timeout,
    }
}

/// How a rank waits for a flag.
#[derive(Clone, Copy, Debug)]
pub struct WaitPolicy {
    /// Polls before the first `sched_yield`; 0 yields at once (oversubscribed).
    pub spin_polls: u32,
    /// Polls before the first sleep, where the transport's data comes
    /// through the kernel ([`crate::Endpoint::sleeps_in_kernel`]).
    pub kernel_spin_polls: u32,
    /// After this long without the flag, warn (then again at every doubling).
    pub stall_warning: Duration,
    /// After this long without the flag, fail the wait as hung; `None`
    /// waits for ever.
    pub fault_timeout: Option<Duration>,
}

impl Default for WaitPolicy {
    fn default() -> Self {
        WaitPolicy {
            spin_polls: 2000,
            kernel_spin_polls: KERNEL_DEFAULT_SPIN_POLLS,
            stall_warning: Duration::from_secs(10),
            fault_timeout: None,
        }
    }
}

impl WaitPolicy {
    /// The policy for `local_ranks` processes sharing `cores` cores: spinning
    /// only helps while every waiting rank has a core of its own.
    pub fn for_occupancy(local_ranks: usize, cores: usize, stall_warning: Duration) -> Self {
        let spin_polls = if local_ranks > cores { 0 } else { WaitPolicy::default().spin_polls };
        WaitPolicy { spin_polls, stall_warning, ..WaitPolicy::default() }
    }

    /// The policy spinning `polls` before yielding or sleeping alike: a
    /// count the user chose (`coll_rdma_spin_polls`) holds on every transport.
    pub fn spinning(self, polls: u32) -> Self {
        WaitPolicy { spin_polls: polls, kernel_spin_polls: polls, ..self }
    }

    /// The polls a wait spins before it yields or sleeps: the kernel's
    /// count where the transport's data comes through the kernel.
    pub fn spin_polls_where(&self, sleeps_in_kernel: bool) -> u32 {
        if sleeps_in_kernel { self.kernel_spin_polls } else { self.spin_polls }
    }

    /// How waits go on a transport, in a sentence for verbose output.
    pub fn describe(&self, transport: &(impl Endpoint + ?Sized)) -> String {
        if transport.sleeps_in_kernel() {
            format!(
                "spin {} polls (coll_rdma_spin_polls), then sleep on the {} sockets until something arrives (at most {} us at a time)",
                self.kernel_spin_polls,
                transport.name(),
                waiter::LONGEST_SLEEP.as_micros()
            )
        } else {
            format!("spin {} polls (coll_rdma_spin_polls), then yield the core", self.spin_polls)
        }
    }
}

/// Polls `done` until it reports true, as every wait of this crate does
/// (spin, yield, warn at the stall warning and its doublings, give up at
/// the fault timeout), under the process's policy: for waits on something
/// outside the transports, such as a request of the module underneath.
/// `rank` of `size` names the waiting rank in its warnings; `describe`
/// says what it waits for and is only called to explain a stall.
pub fn wait_until<P, D>(rank: usize, size: usize, mut done: P, describe: D) -> Result<(), TransportError>
where
    P: FnMut() -> Result<bool, TransportError>,
    D: Fn() -> String,
{
    let mut waiter = Waiter::for_process();
    let context = OwnChannel { rank, size };
    while !done()? {
        waiter.pause(&context, &describe)?;
    }
    Ok(())
}

/// [`wait_at_least`] for a word of `peer`'s window, read with acquire
/// ordering where every window is mapped ([`PeerReads`]): for a reader that
/// polls what a writer publishes in its own window.
pub fn wait_for_peer_at_least<T, D>(
    transport: &T,
    peer: usize,
    flag_offset: usize,
    target: u64,
    waits: Waits<'_>,
    describe: D,
) -> Result<u64, TransportError>
where
    T: PeerReads + ?Sized,
    D: Fn() -> String,
{
    let read = || transport.peer_flag(peer, flag_offset);
    wait_for_word(transport, read, target, waits, |value| {
        format!("{} (word at offset {flag_offset} of rank {peer} is {value}, needs {target})", describe())
    })
}

/// Waits until the word at `flag_offset` of at least one of `peers`'
/// windows is at least `target` (the peers' [`wait_for_peer_at_least`],
/// for a caller that can serve whichever peer is ready first).
pub fn wait_for_any_peer_at_least<T, D>(
    transport: &T,
    peers: &[usize],
    flag_offset: usize,
    target: u64,
    waits: Waits<'_>,
    describe: D,
) -> Result<(), TransportError>
where
    T: PeerReads + ?Sized,
    D: Fn() -> String,
{
    let any_ready = || -> Result<u64, TransportError> {
        for &peer in peers {
            if transport.peer_flag(peer, flag_offset)? >= target {
                return Ok(1);
            }
        }
        Ok(0)
    };
    wait_for_word(transport, any_ready, 1, waits, |_| format!("{} (word at offset {flag_offset} of ranks {peers:?} below {target})", describe()))?;
    Ok(())
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
    let read = || Ok(transport.local_flag(flag_offset));
    wait_for_word(transport, read, target, waits, |value| format!("{} (word at offset {flag_offset} is {value}, needs {target})", describe()))
}

/// The loop of both waits above: polls `read` (progressing the transport
/// and the side progress between polls once past spinning) until it gives
/// at least `target`.
#[inline]
fn wait_for_word<T, R, D>(transport: &T, read: R, target: u64, waits: Waits<'_>, describe: D) -> Result<u64, TransportError>
where
    T: Windows + ?Sized,
    R: Fn() -> Result<u64, TransportError>,
    D: Fn(u64) -> String,
{
    // Where peers keep up the word is there at the first look: that look
    // costs no waiter (a copy of the policy) and no progress.
    let value = read()?;
    if value >= target {
        return Ok(value);
    }
    let mut waiter = Waiter::new(waits.policy);
    loop {
        if !waiter.is_spinning() {
            transport.progress();
            waits.side_progress.progress_others();
        }
        let value = read()?;
        if value >= target {
            return Ok(value);
        }
        waiter.pause(transport, || describe(value))?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_until_returns_once_the_poll_says_done() {
        let mut polls = 0;
        let done = || {
            polls += 1;
            Ok(polls == 5000)
        };
        assert!(wait_until(0, 2, done, || "the fifth thousand poll".to_string()).is_ok());
        assert_eq!(polls, 5000);
    }

    #[test]
    fn wait_until_passes_on_the_polls_failure() {
        let failing = || Err(TransportError::Failed("the request failed".to_string()));
        let failure = wait_until(1, 2, failing, || "nothing".to_string()).unwrap_err();
        assert!(failure.to_string().contains("the request failed"), "{failure}");
    }
}
