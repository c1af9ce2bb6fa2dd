//! How reliable multicast waits: spin while an answer is likely within a
//! cache-line transfer, then yield so oversubscribed nodes progress; warn
//! when a wait looks like a hang, and give up when the transport reports a
//! failed peer or at the fault timeout (or the tighter limit a test sets).

use std::time::Duration;

use super::config::RmcastConfig;
use crate::transport::{Endpoint, TransportError};
use crate::wait::StallWatch;

/// Yields between two looks at the clock and the transport's health.
const YIELDS_BETWEEN_CHECKS: u32 = 64;

pub(crate) struct Patience {
    spin_polls: u32,
    spins: u32,
    yields: u32,
    watch: Option<StallWatch>,
    give_up_after: Option<Duration>,
    config: RmcastConfig,
}

impl Patience {
    pub(crate) fn new(config: &RmcastConfig) -> Self {
        let give_up_after = match (config.give_up_after, config.wait.fault_timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Patience { spin_polls: config.wait.spin_polls, spins: 0, yields: 0, watch: None, give_up_after, config: *config }
    }

    /// Waits a little. `describe` says what for, when the wait has lasted
    /// long enough to warn about or to give up on.
    #[inline]
    pub(crate) fn pause<T, D>(&mut self, transport: &T, describe: D) -> Result<(), TransportError>
    where
        T: Endpoint + ?Sized,
        D: Fn() -> String,
    {
        if self.spins < self.spin_polls {
            self.spins += 1;
            std::hint::spin_loop();
            return Ok(());
        }
        self.yield_and_watch(transport, &describe)
    }

    #[cold]
    fn yield_and_watch<T: Endpoint + ?Sized>(&mut self, transport: &T, describe: &dyn Fn() -> String) -> Result<(), TransportError> {
        crate::idle::yield_core();
        let watch = self.watch.get_or_insert_with(|| StallWatch::new(&self.config.wait, self.give_up_after));
        self.yields = self.yields.wrapping_add(1);
        if self.yields % YIELDS_BETWEEN_CHECKS == 1 || watch.deadline_passed() {
            watch.check(transport, describe)?;
        }
        Ok(())
    }
}
