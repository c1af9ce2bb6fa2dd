//! Waiting for room in a bounded channel: spin while the consumer is likely
//! to drain a slot within a cache-line transfer, then yield so that
//! oversubscribed nodes progress, warn when the wait looks like a hang, and
//! give up after the process's fault timeout (a consumer that died never
//! drains). Nothing here allocates until a warning is due.

use std::time::{Duration, Instant};

use crate::transport::TransportError;
use crate::wait::{process_limits, stalls};

const SPINS_BEFORE_YIELDING: u32 = 1000;

pub(crate) struct Backoff {
    spins: u32,
    yielding_since: Option<Instant>,
    next_warning: Duration,
    give_up_after: Option<Duration>,
    /// Where a hang report finds this wait, once it has lasted a while.
    noted: Option<stalls::Note>,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        let (stall_warning, give_up_after) = process_limits();
        Self::with_limits(stall_warning, give_up_after)
    }

    fn with_limits(stall_warning: Duration, give_up_after: Option<Duration>) -> Self {
        Backoff { spins: 0, yielding_since: None, next_warning: stall_warning, give_up_after, noted: None }
    }

    /// Waits a little; `describe` explains the wait if it has lasted long
    /// enough to warn about, or to fail as hung.
    #[inline]
    pub(crate) fn snooze(&mut self, describe: impl Fn() -> String) -> Result<(), TransportError> {
        if self.spins < SPINS_BEFORE_YIELDING {
            self.spins += 1;
            std::hint::spin_loop();
            return Ok(());
        }
        self.yield_and_watch(&describe)
    }

    /// One clock read a yield: cheap beside the yield, and a rank
    /// descheduled at every yield still warns and gives up on time.
    #[cold]
    fn yield_and_watch(&mut self, describe: &dyn Fn() -> String) -> Result<(), TransportError> {
        crate::idle::yield_core();
        let since = *self.yielding_since.get_or_insert_with(Instant::now);
        let waited = since.elapsed();
        if self.noted.is_none() && waited >= stalls::NOTE_AFTER {
            self.noted = Some(stalls::Note::new(describe()));
        }
        if let Some(limit) = self.give_up_after
            && waited >= limit
        {
            return Err(TransportError::Failed(format!(
                "gave up after {:.1} s without progress waiting for {}; the job looks hung \
                 (the peer may have died or stopped polling; see coll_rdma_fault_timeout_s)",
                waited.as_secs_f64(),
                describe()
            )));
        }
        if waited >= self.next_warning {
            tracing::warn!("waited {:.1} s for {}; the peer may have died or stopped polling", waited.as_secs_f64(), describe());
            self.next_warning = self.next_warning.saturating_mul(2);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Snoozes until the backoff gives up or `patience` runs out.
    fn snooze_until_refused(backoff: &mut Backoff, patience: Duration) -> Option<TransportError> {
        let started = Instant::now();
        while started.elapsed() < patience {
            if let Err(failure) = backoff.snooze(|| "room in a ring nobody drains".into()) {
                return Some(failure);
            }
        }
        None
    }

    #[test]
    fn a_wait_nobody_ends_gives_up_at_the_fault_timeout_saying_what_it_waited_for() {
        let limit = Duration::from_millis(300);
        let started = Instant::now();
        let failure = snooze_until_refused(&mut Backoff::with_limits(Duration::MAX, Some(limit)), Duration::from_secs(120))
            .expect("the wait went on past its fault timeout");
        assert!(started.elapsed() >= limit, "gave up after {:?}, before the {limit:?} timeout", started.elapsed());
        let text = failure.to_string();
        assert!(text.contains("room in a ring nobody drains") && text.contains("coll_rdma_fault_timeout_s"), "{text}");
    }

    #[test]
    fn without_a_fault_timeout_a_wait_goes_on() {
        assert!(snooze_until_refused(&mut Backoff::with_limits(Duration::MAX, None), Duration::from_millis(500)).is_none());
    }
}
