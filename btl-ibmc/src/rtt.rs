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
}
