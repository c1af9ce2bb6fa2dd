//! Serving the rest of a communicator while a wait yields. Carried with
//! the wait policy rather than by a transport wrapper, so that a collective
//! names only the transport capabilities it uses, and its spinning polls
//! stay free of the extra call.

use super::WaitPolicy;

/// What a rank does for the rest of its communicator while one of its
/// waits yields: another collective on the same communicator may owe work
/// that only this rank can do (over datagram multicast, a bcast root's
/// retransmissions), and the rank's only chance to do it is while it waits.
pub trait SideProgress {
    fn progress_others(&self);
}

/// Nothing to serve besides the wait itself.
pub struct NoSideProgress;

impl SideProgress for NoSideProgress {
    fn progress_others(&self) {}
}

/// How one call's waits go: the communicator's policy, and the side
/// progress they serve at every yielding poll. The side progress is an
/// indirect call on the yielding path only, after the spinning is over,
/// where it costs nothing beside the yield.
#[derive(Clone, Copy)]
pub struct Waits<'a> {
    pub policy: &'a WaitPolicy,
    pub side_progress: &'a dyn SideProgress,
}

impl WaitPolicy {
    /// Waits under this policy that serve `side_progress` while they yield.
    pub fn serving<'a>(&'a self, side_progress: &'a dyn SideProgress) -> Waits<'a> {
        Waits { policy: self, side_progress }
    }

    /// Waits under this policy that serve nothing else.
    pub fn without_side_progress(&self) -> Waits<'_> {
        self.serving(&NoSideProgress)
    }
}

/// Side progress that may not be due: `None` serves nothing.
impl<S: SideProgress> SideProgress for Option<S> {
    fn progress_others(&self) {
        if let Some(side_progress) = self {
            side_progress.progress_others();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::fabric::{Fabric, FabricConfig};
    use crate::transport::Windows;
    use crate::wait::wait_at_least;

    /// Side progress that does what the wait waits for, as a bcast's
    /// retransmission ends the wait of the rank that lacked it.
    struct RaisesTheFlag<'a, T: Windows> {
        transport: &'a T,
        calls: Cell<u32>,
    }

    impl<T: Windows> SideProgress for RaisesTheFlag<'_, T> {
        fn progress_others(&self) {
            self.calls.set(self.calls.get() + 1);
            self.transport.set_local_flag(0, 1);
        }
    }

    #[test]
    fn a_yielding_wait_serves_its_side_progress_and_a_plain_one_does_not() {
        let endpoints = Fabric::new(1, 64, FabricConfig::default());
        let endpoint = &endpoints[0];
        let policy = WaitPolicy { spin_polls: 0, ..WaitPolicy::default() };
        let side = RaisesTheFlag { transport: endpoint, calls: Cell::new(0) };
        let value = wait_at_least(endpoint, 0, 1, policy.serving(&side), || "a flag only side progress raises".into());
        assert_eq!(value, Ok(1));
        assert_eq!(side.calls.get(), 1);

        endpoint.set_local_flag(0, 2);
        let spinning = WaitPolicy { spin_polls: 1, ..WaitPolicy::default() };
        assert_eq!(wait_at_least(endpoint, 0, 2, spinning.serving(&side), || "a raised flag".into()), Ok(2));
        assert_eq!(side.calls.get(), 1, "a wait answered while spinning served side progress");
        assert_eq!(wait_at_least(endpoint, 0, 2, policy.without_side_progress(), || "a raised flag".into()), Ok(2));
    }
}
