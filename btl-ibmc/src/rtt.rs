//! The round-trip estimate that sets the retransmission timeout: SRTT and
//! RTTVAR as in RFC 6298, section 2, kept in nanoseconds so that the
//! arithmetic can be checked by hand. The clock granularity G of the RFC
//! is left to the floor, which is far above it. Karn's rule (no samples
//! from retransmitted pieces) is the caller's: it knows what it resent.
//! Used by rmcast's collectors (congestion control) and by the udp
//! reliable channel, one estimator per peer there.

use std::time::Duration;

#[derive(Clone, Debug)]
pub(crate) struct RttEstimator {
    /// (SRTT, RTTVAR) once a sample came.
    smoothed: Option<(u64, u64)>,
    rto: Duration,
    floor: Duration,
    ceiling: Duration,
}

impl RttEstimator {
    /// `initial` is the timeout until the first sample.
    pub(crate) fn new(initial: Duration, floor: Duration, ceiling: Duration) -> Self {
        RttEstimator { smoothed: None, rto: initial.clamp(floor, ceiling), floor, ceiling }
    }

    pub(crate) fn rto(&self) -> Duration {
        self.rto
    }

    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.smoothed.map(|(srtt, _)| Duration::from_nanos(srtt))
    }

    pub(crate) fn sample(&mut self, rtt: Duration) {
        let r = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX / 8);
        let (srtt, rttvar) = match self.smoothed {
            None => (r, r / 2),
            Some((srtt, rttvar)) => ((7 * srtt + r) / 8, (3 * rttvar + srtt.abs_diff(r)) / 4),
        };
        self.smoothed = Some((srtt, rttvar));
        self.rto = Duration::from_nanos(srtt.saturating_add(rttvar.saturating_mul(4))).clamp(self.floor, self.ceiling);
    }
}

/// The repeat schedule of a retransmission timer: `base` doubled once per
/// expiry so far, at most `most_doublings` times, and never beyond
/// `longest` unless `base` itself is longer (a ceiling set higher).
///
/// Why a bound on the doublings (issue 36): under random loss a repeat
/// that failed is as likely to get through as the first try, so doubling
/// per failure buys nothing, and a loaded node's inflated base makes a
/// few failures in a row cost a large part of a second. A small bound
/// (a few times the base) still spaces the repeats to a peer that is
/// only slow to be scheduled.
pub(crate) fn backed_off(base: Duration, expiries: u32, most_doublings: u32, longest: Duration) -> Duration {
    base.saturating_mul(1 << expiries.min(most_doublings).min(31)).min(longest.max(base))
}

/// A retransmission timer's timeout: the estimate's RTO, doubled at each
/// expiry (RFC 6298, 5.5) up to `longest`, until a fresh sample ends the
/// backoff. Karn's rule makes that sample one from a piece sent once, so
/// a peer answering only repairs keeps the backed-off timeout.
#[derive(Clone, Debug)]
pub(crate) struct BackedOffTimeout {
    estimate: RttEstimator,
    doublings: u32,
    most_doublings: u32,
    longest: Duration,
}

impl BackedOffTimeout {
    /// `longest` bounds the backed-off value only: an RTO above it (a
    /// ceiling set higher) is still used as is.
    pub(crate) fn new(estimate: RttEstimator, most_doublings: u32, longest: Duration) -> Self {
        BackedOffTimeout { estimate, doublings: 0, most_doublings, longest }
    }

    pub(crate) fn current(&self) -> Duration {
        backed_off(self.estimate.rto(), self.doublings, self.most_doublings, self.longest)
    }

    /// The timer ran out: the next timeout is twice as long.
    pub(crate) fn expired(&mut self) {
        self.doublings = (self.doublings + 1).min(self.most_doublings);
    }

    /// A round trip measured on a piece sent once.
    pub(crate) fn sample(&mut self, rtt: Duration) {
        self.estimate.sample(rtt);
        self.doublings = 0;
    }

    #[cfg(test)]
    pub(crate) fn estimate(&self) -> &RttEstimator {
        &self.estimate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_follows_rfc_6298_from_hand_computed_samples() {
        let ms = Duration::from_millis;
        let mut rtt = RttEstimator::new(ms(20), ms(1), ms(100));
        assert_eq!((rtt.rto(), rtt.srtt()), (ms(20), None), "the configured timeout until a sample");
        // First sample 8 ms: SRTT 8, RTTVAR 4, RTO 8 + 16 = 24.
        rtt.sample(ms(8));
        assert_eq!((rtt.srtt(), rtt.rto()), (Some(ms(8)), ms(24)));
        // 16 ms: RTTVAR = 3/4 * 4 + 1/4 * |8 - 16| = 5; SRTT = 7/8 * 8 + 2 = 9; RTO 9 + 20 = 29.
        rtt.sample(ms(16));
        assert_eq!((rtt.srtt(), rtt.rto()), (Some(ms(9)), ms(29)));
        // 1 ms: RTTVAR = 3.75 + 2 = 5.75; SRTT = 7.875 + 0.125 = 8; RTO 8 + 23 = 31.
        rtt.sample(ms(1));
        assert_eq!((rtt.srtt(), rtt.rto()), (Some(ms(8)), ms(31)));
        // Steady 8 ms: RTTVAR shrinks by 3/4 each time from 5.75 ms.
        let mut rttvar = 5.75e6_f64;
        for _ in 0..5 {
            rtt.sample(ms(8));
            rttvar *= 0.75;
        }
        let expected = 8e6 + 4.0 * rttvar;
        assert!((rtt.rto().as_nanos() as f64 - expected).abs() < 10.0, "{:?} vs {expected} ns", rtt.rto());
    }

    #[test]
    fn the_timeout_is_kept_between_floor_and_ceiling() {
        let us = Duration::from_micros;
        let mut rtt = RttEstimator::new(Duration::from_secs(5), us(2000), us(50_000));
        assert_eq!(rtt.rto(), us(50_000), "the initial value is clamped too");
        rtt.sample(us(100));
        assert_eq!(rtt.rto(), us(2000), "100 + 200 us is below the floor");
        rtt.sample(Duration::from_secs(3));
        assert_eq!(rtt.rto(), us(50_000));
    }

    #[test]
    fn timeouts_double_at_each_expiry_up_to_the_longest_and_a_fresh_sample_ends_the_backoff() {
        let ms = Duration::from_millis;
        let mut timeout = BackedOffTimeout::new(RttEstimator::new(ms(20), ms(2), ms(20)), 6, ms(1000));
        assert_eq!(timeout.current(), ms(20), "the initial timeout until a sample");
        let mut seen = Vec::new();
        for _ in 0..8 {
            timeout.expired();
            seen.push(timeout.current().as_millis());
        }
        // 20 ms doubled: 40, 80, 160, 320, 640, then 1280 is cut to 1000,
        // and six doublings is the most.
        assert_eq!(seen, [40, 80, 160, 320, 640, 1000, 1000, 1000]);
        // First sample 4 ms: SRTT 4, RTTVAR 2, RTO 4 + 8 = 12; no backoff.
        timeout.sample(ms(4));
        assert_eq!(timeout.current(), ms(12));
        timeout.expired();
        assert_eq!(timeout.current(), ms(24));
        // 1 ms: RTTVAR = 3/4 * 2 + 1/4 * 3 = 2.25, SRTT = 3.5 + 0.125 =
        // 3.625, RTO = 3.625 + 9 = 12.625 ms, the backoff ended.
        timeout.sample(ms(1));
        assert_eq!(timeout.current(), Duration::from_micros(12_625));
        assert_eq!(timeout.estimate().srtt(), Some(Duration::from_micros(3625)));
        // Samples far above the ceiling or below the floor are clamped,
        // and the backoff starts from the clamped value.
        timeout.sample(ms(500));
        assert_eq!(timeout.current(), ms(20));
        timeout.expired();
        assert_eq!(timeout.current(), ms(40));
        let mut fast = BackedOffTimeout::new(RttEstimator::new(ms(20), ms(2), ms(20)), 6, ms(1000));
        for _ in 0..40 {
            fast.sample(Duration::from_micros(100));
        }
        assert_eq!(fast.current(), ms(2), "100 us round trips sit at the floor");
    }

    /// The schedule as a table: (base ms, expiries, most doublings,
    /// longest ms) -> ms.
    #[test]
    fn the_repeat_schedule_doubles_per_expiry_within_its_bounds() {
        let ms = Duration::from_millis;
        let table = [
            // No expiry yet: the base, whatever the bounds.
            ((20, 0, 2, 2000), 20),
            ((20, 0, 0, 2000), 20),
            // Doubling per expiry up to the most doublings (2: 4x the base).
            ((20, 1, 2, 2000), 40),
            ((20, 2, 2, 2000), 80),
            ((20, 3, 2, 2000), 80),
            ((20, 40, 2, 2000), 80),
            // The bound before issue 36's change, six doublings: 1.28 s.
            ((20, 6, 6, 2000), 1280),
            ((20, 9, 6, 2000), 1280),
            // Never beyond the longest, unless the base is longer.
            ((20, 6, 6, 1000), 1000),
            ((3000, 2, 2, 2000), 3000),
            // No doubling at all.
            ((20, 5, 0, 2000), 20),
        ];
        for ((base, expiries, most, longest), expected) in table {
            assert_eq!(backed_off(ms(base), expiries, most, ms(longest)), ms(expected), "{base} ms, {expiries} expiries, {most} doublings, {longest} ms");
        }
        assert_eq!(backed_off(Duration::MAX, 3, 40, Duration::MAX), Duration::MAX, "saturates");
    }

    #[test]
    fn a_ceiling_above_the_longest_backoff_is_still_the_timeout() {
        let ms = Duration::from_millis;
        let mut timeout = BackedOffTimeout::new(RttEstimator::new(ms(3000), ms(2), ms(3000)), 6, ms(2000));
        assert_eq!(timeout.current(), ms(3000));
        timeout.expired();
        assert_eq!(timeout.current(), ms(3000));
    }
}
