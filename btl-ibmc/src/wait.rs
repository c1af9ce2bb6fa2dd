//! Waiting for a word in the local window: spin while the peer is likely to
//! answer within a cache-line transfer, then yield the core so that
//! oversubscribed runs (more ranks than cores) still progress, and say so
//! when a wait lasts long enough to look like a hang.

use std::time::{Duration, Instant};

use crate::transport::Transport;

/// How a rank waits for a flag.
#[derive(Clone, Copy, Debug)]
pub struct WaitPolicy {
    /// Polls before the first `sched_yield`; 0 yields at once (oversubscribed).
    pub spin_polls: u32,
    /// After this long without the flag, warn (then again at every doubling).
    pub stall_warning: Duration,
}

impl Default for WaitPolicy {
    fn default() -> Self {
        WaitPolicy { spin_polls: 2000, stall_warning: Duration::from_secs(10) }
    }
}

impl WaitPolicy {
    /// The policy for `local_ranks` processes sharing `cores` cores: spinning
    /// only helps while every waiting rank has a core of its own.
    pub fn for_occupancy(local_ranks: usize, cores: usize, stall_warning: Duration) -> Self {
        let spin_polls = if local_ranks > cores { 0 } else { WaitPolicy::default().spin_polls };
        WaitPolicy { spin_polls, stall_warning }
    }
}

/// Waits until the word at `flag_offset` of the local window is at least
/// `target`, and returns its value. `describe` is only called to explain a
/// stall in the warning.
#[inline]
pub fn wait_at_least<T, D>(transport: &T, flag_offset: usize, target: u64, policy: &WaitPolicy, describe: D) -> u64
where
    T: Transport + ?Sized,
    D: Fn() -> String,
{
    for _ in 0..policy.spin_polls {
        let value = transport.local_flag(flag_offset);
        if value >= target {
            return value;
        }
        std::hint::spin_loop();
    }
    wait_yielding(transport, flag_offset, target, policy, &describe)
}

#[cold]
fn wait_yielding<T: Transport + ?Sized>(
    transport: &T,
    flag_offset: usize,
    target: u64,
    policy: &WaitPolicy,
    describe: &dyn Fn() -> String,
) -> u64 {
    let started = Instant::now();
    let mut next_warning = policy.stall_warning;
    let mut polls: u32 = 0;
    loop {
        transport.progress();
        let value = transport.local_flag(flag_offset);
        if value >= target {
            return value;
        }
        crate::idle::yield_core();
        polls = polls.wrapping_add(1);
        if polls % 256 == 0 {
            let waited = started.elapsed();
            if waited >= next_warning {
                tracing::warn!(
                    "rank {} of {} has waited {:.1} s for {} (word at offset {} is {}, needs {}); \
                     a peer may have died or be stuck outside MPI",
                    transport.rank(),
                    transport.size(),
                    waited.as_secs_f64(),
                    describe(),
                    flag_offset,
                    value,
                    target
                );
                next_warning = next_warning.saturating_mul(2);
            }
        }
    }
}
