//! How reliable multicast waits: spin while an answer is likely within a
//! cache-line transfer, then yield so oversubscribed nodes progress; warn
//! when a wait looks like a hang, and give up only where the configuration
//! asks for it (tests).

use std::time::{Duration, Instant};

use super::config::RmcastConfig;
use crate::transport::{Transport, TransportError};
use crate::wait::WaitPolicy;

pub(crate) struct Patience {
    policy: WaitPolicy,
    give_up_after: Option<Duration>,
    spins: u32,
    yielding_since: Option<Instant>,
    next_warning: Duration,
}

impl Patience {
    pub(crate) fn new(config: &RmcastConfig) -> Self {
        Patience {
            policy: config.wait,
            give_up_after: config.give_up_after,
            spins: 0,
            yielding_since: None,
            next_warning: config.wait.stall_warning,
        }
    }

    /// Waits a little. `describe` says what for, when the wait has lasted
    /// long enough to warn about or to give up on.
    #[inline]
    pub(crate) fn pause<T, D>(&mut self, transport: &T, describe: D) -> Result<(), TransportError>
    where
        T: Transport + ?Sized,
        D: Fn() -> String,
    {
        if self.spins < self.policy.spin_polls {
            self.spins += 1;
            std::hint::spin_loop();
            return Ok(());
        }
        self.yield_and_watch(transport, &describe)
    }

    #[cold]
    fn yield_and_watch<T: Transport + ?Sized>(&mut self, transport: &T, describe: &dyn Fn() -> String) -> Result<(), TransportError> {
        crate::idle::yield_core();
        let waited = self.yielding_since.get_or_insert_with(Instant::now).elapsed();
        if self.give_up_after.is_some_and(|limit| waited >= limit) {
            return Err(TransportError::Failed(format!(
                "rank {} of {} gave up after {:.1} s waiting for {}",
                transport.rank(),
                transport.size(),
                waited.as_secs_f64(),
                describe()
            )));
        }
        if waited >= self.next_warning {
            tracing::warn!(
                "rank {} of {} has waited {:.1} s for {}; a peer may have died or be stuck outside MPI",
                transport.rank(),
                transport.size(),
                waited.as_secs_f64(),
                describe()
            );
            self.next_warning = self.next_warning.saturating_mul(2);
        }
        Ok(())
    }
}
