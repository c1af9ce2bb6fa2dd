//! Waiting for room in a bounded channel: spin while the consumer is likely
//! to drain a slot within a cache-line transfer, then yield so that
//! oversubscribed nodes progress, and warn when the wait looks like a hang.
//! Nothing here allocates until a warning is due.

use std::time::{Duration, Instant};

use crate::wait::stalls;

const SPINS_BEFORE_YIELDING: u32 = 1000;
const YIELDS_BETWEEN_CLOCK_READS: u32 = 256;
const FIRST_STALL_WARNING: Duration = Duration::from_secs(10);

pub(crate) struct Backoff {
    spins: u32,
    yields: u32,
    yielding_since: Option<Instant>,
    next_warning: Duration,
    /// Where a hang report finds this wait, once it has lasted a while.
    noted: Option<stalls::Note>,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff { spins: 0, yields: 0, yielding_since: None, next_warning: FIRST_STALL_WARNING, noted: None }
    }

    /// Waits a little; `describe` explains the wait if it has lasted long
    /// enough to warn about.
    #[inline]
    pub(crate) fn snooze(&mut self, describe: impl Fn() -> String) {
        if self.spins < SPINS_BEFORE_YIELDING {
            self.spins += 1;
            std::hint::spin_loop();
            return;
        }
        self.yield_and_watch(&describe);
    }

    #[cold]
    fn yield_and_watch(&mut self, describe: &dyn Fn() -> String) {
        crate::idle::yield_core();
        self.yields = self.yields.wrapping_add(1);
        if self.yields % YIELDS_BETWEEN_CLOCK_READS != 0 {
            return;
        }
        let since = *self.yielding_since.get_or_insert_with(Instant::now);
        let waited = since.elapsed();
        if self.noted.is_none() && waited >= stalls::NOTE_AFTER {
            self.noted = Some(stalls::Note::new(describe()));
        }
        if waited >= self.next_warning {
            tracing::warn!("waited {:.1} s for {}; the peer may have died or stopped polling", waited.as_secs_f64(), describe());
            self.next_warning = self.next_warning.saturating_mul(2);
        }
    }
}
