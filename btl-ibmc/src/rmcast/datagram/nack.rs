//! When a leaf asks its collector for pieces it has a gap before.
//!
//! Without suppression, a gap is NACKed the moment a piece beyond it
//! arrives, once per range (pieces beyond the last NACKed one start a new
//! range). With suppression (congestion control), the NACK waits a random
//! time in [0, min(SRTT / 2, explicit-ACK delay)): if the gap fills
//! meanwhile (a reordered original, or the root's multicast repair
//! answering another member who lost the same piece), no NACK is sent.
//! Gaps found while one waits extend it. The cap keeps the wait below the
//! collector's RTO (at least twice that delay): a longer wait would let
//! the collector's timer fill every gap first, and no NACK, hence no new
//! sample, would ever come again.
//!
//! The leaf's SRTT comes from its own NACKs: the time until the first
//! piece a NACK asked for arrives; a range is NACKed once, so the sample
//! is never ambiguous. A sample is dropped if the leaf went longer than
//! the explicit-ACK delay without progress meanwhile (it was outside MPI:
//! the sample would time the application, not the network). Before the
//! first sample, the explicit-ACK delay (timeout / 4) stands in for it.

use std::ops::Range;
use std::time::{Duration, Instant};

use crate::rmcast::congestion::RttEstimator;
use crate::rng::Rng;

struct Waiting {
    range: Range<u64>,
    due: Instant,
}

pub(crate) struct NackTimer {
    /// Pieces below this arrived, were NACKed or are waiting to be. The
    /// piece that revealed a gap is past it too: without that, each piece
    /// arriving behind an open gap NACKed the one before it, which had
    /// arrived.
    horizon: u64,
    suppression: Option<Suppression>,
}

struct Suppression {
    waiting: Option<Waiting>,
    /// The first piece of the last NACK sent, and when it was sent.
    outstanding: Option<(u64, Instant)>,
    rtt: RttEstimator,
    /// The explicit-ACK delay: the longest wait, and the longest pause
    /// between two progress calls a sample may span.
    longest_wait: Duration,
    /// When the leaf last made progress (called in here).
    last_progress: Option<Instant>,
    rng: Rng,
}

/// What a change in the gaps calls for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NackStep {
    Nothing,
    Send(Range<u64>),
    /// A waiting NACK became unnecessary.
    Suppressed,
}

impl NackTimer {
    /// `suppress` turns on the random wait; `ack_delay` is the
    /// explicit-ACK delay (the round trip assumed before a sample, and the
    /// longest wait); `ceiling` bounds the estimate (the collectors' RTO
    /// ceiling); `seed` differs per rank and root.
    pub(crate) fn new(suppress: bool, ack_delay: Duration, ceiling: Duration, seed: u64) -> Self {
        let suppression = suppress.then(|| Suppression {
            waiting: None,
            outstanding: None,
            // The floor only keeps the estimate positive: it never sets a
            // timeout here.
            rtt: RttEstimator::new(ack_delay, Duration::from_nanos(1), ceiling.max(ack_delay)),
            longest_wait: ack_delay,
            last_progress: None,
            rng: Rng::new(seed),
        });
        NackTimer { horizon: 0, suppression }
    }

    /// The bound of the random wait.
    fn wait_bound(suppression: &Suppression) -> Duration {
        (suppression.rtt.srtt().unwrap_or(suppression.rtt.rto()) / 2).min(suppression.longest_wait)
    }

    /// Notes that the leaf is making progress at `now`; a NACK's sample
    /// that would span a longer pause is dropped.
    fn progress(suppression: &mut Suppression, now: Instant) {
        if suppression.last_progress.is_some_and(|last| now.saturating_duration_since(last) > suppression.longest_wait) {
            suppression.outstanding = None;
        }
        suppression.last_progress = Some(now);
    }

    /// The pieces the arrival of `seq` shows missing that no earlier
    /// arrival showed: those from the horizon (or `contiguous`) up to `seq`.
    fn reveal(&mut self, seq: u64, contiguous: u64) -> Option<Range<u64>> {
        if seq < self.horizon || seq < contiguous {
            return None;
        }
        let from = contiguous.max(self.horizon);
        self.horizon = seq + 1;
        (from < seq).then_some(from..seq)
    }

    /// Piece `seq` arrived and pieces below `contiguous` have all arrived.
    pub(crate) fn on_arrival(&mut self, seq: u64, contiguous: u64, now: Instant) -> NackStep {
        let revealed = self.reveal(seq, contiguous);
        let Some(suppression) = &mut self.suppression else {
            return revealed.map_or(NackStep::Nothing, NackStep::Send);
        };
        Self::progress(suppression, now);
        if let Some((first, sent_at)) = suppression.outstanding
            && contiguous > first
        {
            suppression.rtt.sample(now.saturating_duration_since(sent_at));
            suppression.outstanding = None;
        }
        if let Some(gap) = revealed {
            match &mut suppression.waiting {
                Some(waiting) => waiting.range.end = gap.end,
                None => {
                    let wait = Self::wait_bound(suppression).mul_f64(suppression.rng.unit());
                    suppression.waiting = Some(Waiting { range: gap, due: now.checked_add(wait).unwrap_or(now) });
                }
            }
        }
        match &suppression.waiting {
            Some(waiting) if contiguous >= waiting.range.end => {
                suppression.waiting = None;
                NackStep::Suppressed
            }
            _ => NackStep::Nothing,
        }
    }

    /// A waiting NACK whose time has come, for what is still missing.
    pub(crate) fn when_due(&mut self, contiguous: u64, now: Instant) -> NackStep {
        let Some(suppression) = &mut self.suppression else {
            return NackStep::Nothing;
        };
        Self::progress(suppression, now);
        match &suppression.waiting {
            Some(waiting) if now >= waiting.due => {
                let range = waiting.range.start.max(contiguous)..waiting.range.end;
                suppression.waiting = None;
                if range.is_empty() {
                    return NackStep::Suppressed;
                }
                suppression.outstanding = Some((range.start, now));
                NackStep::Send(range)
            }
            _ => NackStep::Nothing,
        }
    }

    /// Whether a NACK is waiting.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> bool {
        self.suppression.as_ref().is_some_and(|s| s.waiting.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const CEILING: Duration = Duration::from_secs(1);

    #[test]
    fn without_suppression_each_gap_is_nacked_at_once_and_only_once() {
        let mut nack = NackTimer::new(false, MS, CEILING, 1);
        let now = Instant::now();
        assert_eq!(nack.on_arrival(0, 1, now), NackStep::Nothing);
        assert_eq!(nack.on_arrival(3, 1, now), NackStep::Send(1..3));
        assert_eq!(nack.on_arrival(2, 1, now), NackStep::Nothing, "inside the NACKed range");
        assert_eq!(nack.on_arrival(4, 1, now), NackStep::Nothing, "right behind the piece that revealed the gap");
        assert_eq!(nack.on_arrival(6, 1, now), NackStep::Send(5..6), "only what was neither asked for nor seen");
        assert_eq!(nack.when_due(1, now + MS * 100), NackStep::Nothing);
    }

    #[test]
    fn a_gap_filled_before_the_wait_ends_is_never_nacked() {
        let now = Instant::now();
        let mut nack = NackTimer::new(true, 8 * MS, CEILING, 7);
        assert_eq!(nack.on_arrival(4, 2, now), NackStep::Nothing);
        assert!(nack.waiting());
        assert_eq!(nack.on_arrival(6, 2, now), NackStep::Nothing, "extends the waiting range to 2..6");
        assert_eq!(nack.on_arrival(2, 5, now), NackStep::Nothing, "piece 5 is still missing");
        assert_eq!(nack.on_arrival(5, 7, now), NackStep::Suppressed);
        assert!(!nack.waiting());
        assert_eq!(nack.when_due(7, now + MS * 100), NackStep::Nothing);
    }

    #[test]
    fn a_nack_waits_at_most_half_the_round_trip_and_asks_only_for_what_is_missing() {
        for seed in 0..50 {
            let now = Instant::now();
            let mut nack = NackTimer::new(true, 8 * MS, CEILING, seed);
            assert_eq!(nack.on_arrival(10, 3, now), NackStep::Nothing);
            // 8 ms / 2: due by 4 ms at the latest.
            assert_eq!(nack.when_due(5, now + 4 * MS), NackStep::Send(5..10), "seed {seed}");
            // Its answer arrives 6 ms later: SRTT 6 ms, so the next wait is below 3 ms.
            assert_eq!(nack.on_arrival(5, 10, now + 10 * MS), NackStep::Nothing);
            // Piece 10 revealed the first gap; 11 is missing now.
            assert_eq!(nack.on_arrival(12, 10, now + 10 * MS), NackStep::Nothing);
            assert_eq!(nack.when_due(10, now + 13 * MS), NackStep::Send(11..12), "seed {seed}");
        }
    }

    /// Due by `bound` after the gap is revealed at `at`, whatever the seed.
    fn nack_due_by(nack: &mut NackTimer, at: Instant, bound: Duration, seed: u64) {
        assert_eq!(nack.on_arrival(102, 100, at), NackStep::Nothing);
        assert_eq!(nack.when_due(100, at + bound), NackStep::Send(100..102), "seed {seed}: not due within {bound:?}");
    }

    /// A NACK whose answer came only after 1 s, as when the leaf sent it
    /// and then left MPI for a second: before, that sample set SRTT to 1 s
    /// and every later NACK waited up to 0.5 s, long enough for the
    /// collector's timer to fill the gap first (suppressed, so no new
    /// sample ever came).
    #[test]
    fn a_one_second_sample_taken_outside_progress_is_dropped() {
        for seed in 0..50 {
            let now = Instant::now();
            let mut nack = NackTimer::new(true, 8 * MS, CEILING, seed);
            assert_eq!(nack.on_arrival(10, 3, now), NackStep::Nothing);
            assert_eq!(nack.when_due(3, now + 4 * MS), NackStep::Send(3..10));
            // No progress for a second, then the answer.
            let later = now + Duration::from_secs(1);
            assert_eq!(nack.on_arrival(3, 11, later), NackStep::Nothing);
            // Still the first estimate (8 ms): due within 4 ms.
            nack_due_by(&mut nack, later, 4 * MS, seed);
        }
    }

    /// A 1 s round trip taken while progressing (a congested collector)
    /// counts, but a wait never exceeds the explicit-ACK delay.
    #[test]
    fn a_long_round_trip_never_makes_a_nack_wait_beyond_the_ack_delay() {
        for seed in 0..50 {
            let now = Instant::now();
            let mut nack = NackTimer::new(true, 8 * MS, CEILING, seed);
            assert_eq!(nack.on_arrival(10, 3, now), NackStep::Nothing);
            assert_eq!(nack.when_due(3, now + 4 * MS), NackStep::Send(3..10));
            let mut at = now + 4 * MS;
            while at < now + Duration::from_secs(1) {
                at += MS;
                assert_eq!(nack.when_due(3, at), NackStep::Nothing);
            }
            assert_eq!(nack.on_arrival(3, 11, at), NackStep::Nothing);
            nack_due_by(&mut nack, at, 8 * MS, seed);
        }
    }
}
