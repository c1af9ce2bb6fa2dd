//! When a receiver tells its collector how far it has delivered.
//!
//! The paper's lazy ACK: acknowledge every M pieces, skewed so that
//! subgroup members do not all write at once (the member at position i
//! acknowledges on delivering piece B with B mod M = i mod M), plus an
//! explicit ACK once a delivery has gone unacknowledged for a while, so
//! the tail of a burst is acknowledged too. Each ACK carries the full
//! count delivered, so one ACK covers every piece before it and a lost or
//! late one costs nothing: the words only grow.
//!
//! Why M <= W keeps a window from stalling on lazy ACKs: if a member has
//! delivered pieces 0..s, its last skew point is some B >= s - M, so its
//! word holds at least s - M + 1 > s - W, which is all the root needs to
//! send piece s (see `sender`).

use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub(crate) struct LazyAck {
    residue: u64,
    interval: u64,
    delay: Duration,
    published: u64,
    /// When the oldest delivery not yet acknowledged happened.
    pending_since: Option<Instant>,
}

impl LazyAck {
    pub(crate) fn new(position: usize, interval: u64, delay: Duration) -> Self {
        debug_assert!(interval >= 1);
        LazyAck { residue: position as u64 % interval, interval, delay, published: 0, pending_since: None }
    }

    /// The count last published.
    pub(crate) fn published(&self) -> u64 {
        self.published
    }

    /// Called after each delivery; the count to publish now, if the skew
    /// rule says so.
    pub(crate) fn after_delivery(&mut self, delivered: u64) -> Option<u64> {
        let skew_point = self.published + (self.residue + self.interval - self.published % self.interval) % self.interval;
        if delivered > skew_point {
            return self.publish(delivered);
        }
        if delivered > self.published && self.pending_since.is_none() {
            self.pending_since = Some(Instant::now());
        }
        None
    }

    /// Called while progressing; the count to publish if deliveries have
    /// waited long enough.
    pub(crate) fn when_due(&mut self, delivered: u64, now: Instant) -> Option<u64> {
        match self.pending_since {
            Some(since) if delivered > self.published && now.duration_since(since) >= self.delay => self.publish(delivered),
            _ => None,
        }
    }

    /// The count to publish before going quiet (draining).
    pub(crate) fn flush(&mut self, delivered: u64) -> Option<u64> {
        if delivered > self.published { self.publish(delivered) } else { None }
    }

    fn publish(&mut self, delivered: u64) -> Option<u64> {
        self.published = delivered;
        self.pending_since = None;
        Some(delivered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn published_after_each(position: usize, interval: u64, count: u64) -> Vec<u64> {
        let mut ack = LazyAck::new(position, interval, Duration::from_secs(3600));
        (1..=count).filter_map(|delivered| ack.after_delivery(delivered)).collect()
    }

    #[test]
    fn members_acknowledge_on_their_own_residue() {
        // Position i acknowledges piece B (count B + 1) when B mod M = i mod M.
        assert_eq!(published_after_each(0, 4, 12), vec![1, 5, 9]);
        assert_eq!(published_after_each(2, 4, 12), vec![3, 7, 11]);
        assert_eq!(published_after_each(7, 4, 12), vec![4, 8, 12]);
        assert_eq!(published_after_each(5, 1, 4), vec![1, 2, 3, 4]);
        for position in 0..6 {
            for interval in 1..=6u64 {
                let counts = published_after_each(position, interval, 60);
                assert!(counts.windows(2).all(|pair| pair[1] - pair[0] == interval), "{counts:?}");
                assert!(counts[0] <= interval, "the first ACK comes within M pieces");
            }
        }
    }

    #[test]
    fn a_skew_point_jumped_over_still_acknowledges_and_idle_tails_are_flushed() {
        let mut ack = LazyAck::new(3, 8, Duration::from_millis(5));
        assert_eq!(ack.after_delivery(2), None);
        assert_eq!(ack.when_due(2, Instant::now()), None, "not due yet");
        assert_eq!(ack.when_due(2, Instant::now() + Duration::from_millis(6)), Some(2));
        assert_eq!(ack.after_delivery(20), Some(20), "piece 3 was passed without stopping on it");
        assert_eq!(ack.when_due(20, Instant::now() + Duration::from_secs(1)), None, "nothing pending");
        assert_eq!(ack.flush(20), None);
        assert_eq!(ack.after_delivery(21), None);
        assert_eq!(ack.flush(21), Some(21));
        assert_eq!(ack.published(), 21);
    }
}
