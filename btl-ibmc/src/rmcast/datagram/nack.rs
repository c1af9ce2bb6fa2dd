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
//! With suppression, a NACK whose range has not filled within the leaf's
//! RTO (SRTT + 4 RTTVAR, capped at the explicit-ACK delay like the wait)
//! is sent again for what is still missing, at most `MAX_RENACKS` times;
//! after that the collector's timeout repairs it, as before. A repair
//! lost on its way (5 % random loss over udp loses one in twenty) would
//! otherwise cost the collector's RTO, at least twice that delay.
//!
//! The leaf's SRTT comes from its own NACKs: the time until the first
//! piece a NACK asked for arrives. A NACK sent again makes its sample
//! ambiguous (which of the two was answered?), so it is dropped (Karn's
//! rule). A sample is dropped if the leaf went longer than
//! the explicit-ACK delay without progress meanwhile (it was outside MPI:
//! the sample would time the application, not the network). Before the
//! first sample, the explicit-ACK delay (timeout / 4) stands in for it.

use std::ops::Range;
use std::time::{Duration, Instant};

use crate::rmcast::congestion::RttEstimator;
use crate::rng::Rng;

/// How many times a NACK is sent again for the same range before the
/// collector's timeout is left to repair it.
pub(crate) const MAX_RENACKS: u32 = 2;

struct Waiting {
    range: Range<u64>,
    due: Instant,
}

/// A NACK sent whose range has not filled yet.
struct Unanswered {
    range: Range<u64>,
    /// When to ask again if the range is still not filled.
    due: Instant,
    renacks_left: u32,
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
    /// Oldest first; each range lies past the ones before it.
    unanswered: Vec<Unanswered>,
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
    /// A NACK sent before whose answer is overdue, sent again.
    SendAgain(Range<u64>),
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
            unanswered: Vec::new(),
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

    /// How long a NACK's answer may take before it is sent again.
    fn renack_after(suppression: &Suppression) -> Duration {
        suppression.rtt.rto().min(suppression.longest_wait)
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
        suppression.unanswered.retain(|unanswered| contiguous < unanswered.range.end);
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
        suppression.unanswered.retain(|unanswered| contiguous < unanswered.range.end);
        if let Some(range) = Self::renack_due(suppression, contiguous, now) {
            return NackStep::SendAgain(range);
        }
        match &suppression.waiting {
            Some(waiting) if now >= waiting.due => {
                let range = waiting.range.start.max(contiguous)..waiting.range.end;
                suppression.waiting = None;
                if range.is_empty() {
                    return NackStep::Suppressed;
                }
                suppression.outstanding = Some((range.start, now));
                let due = now.checked_add(Self::renack_after(suppression)).unwrap_or(now);
                suppression.unanswered.push(Unanswered { range: range.clone(), due, renacks_left: MAX_RENACKS });
                NackStep::Send(range)
            }
            _ => NackStep::Nothing,
        }
    }

    /// The oldest sent NACK whose answer is overdue and that may be sent
    /// again, trimmed to what is still missing below its end; those out of
    /// repeats are given up to the collector's timeout.
    fn renack_due(suppression: &mut Suppression, contiguous: u64, now: Instant) -> Option<Range<u64>> {
        suppression.unanswered.retain(|unanswered| unanswered.renacks_left > 0 || now < unanswered.due);
        let retry_after = Self::renack_after(suppression);
        let unanswered = suppression.unanswered.iter_mut().find(|unanswered| now >= unanswered.due)?;
        unanswered.renacks_left -= 1;
        unanswered.due = now.checked_add(retry_after).unwrap_or(now);
        // Its answer, when it comes, may answer either NACK.
        suppression.outstanding = None;
        Some(unanswered.range.start.max(contiguous)..unanswered.range.end)
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

    /// A leaf with an 8 ms explicit-ACK delay and no sample yet that has
    /// NACKed pieces 3..10, and when the gap was revealed.
    fn nack_sent_for_3_to_10(seed: u64) -> (NackTimer, Instant) {
        let now = Instant::now();
        let mut nack = NackTimer::new(true, 8 * MS, CEILING, seed);
        assert_eq!(nack.on_arrival(10, 3, now), NackStep::Nothing);
        assert_eq!(nack.when_due(3, now + 4 * MS), NackStep::Send(3..10), "seed {seed}");
        (nack, now)
    }

    /// A NACK whose answer came only after 1 s, as when the leaf sent it
    /// and then left MPI for a second: before, that sample set SRTT to 1 s
    /// and every later NACK waited up to 0.5 s, long enough for the
    /// collector's timer to fill the gap first (suppressed, so no new
    /// sample ever came).
    #[test]
    fn a_one_second_sample_taken_outside_progress_is_dropped() {
        for seed in 0..50 {
            let (mut nack, now) = nack_sent_for_3_to_10(seed);
            // No progress for a second, then the answer.
            let later = now + Duration::from_secs(1);
            assert_eq!(nack.on_arrival(3, 11, later), NackStep::Nothing);
            // Still the first estimate (8 ms): due within 4 ms.
            nack_due_by(&mut nack, later, 4 * MS, seed);
        }
    }

    /// An answer that takes 1 s while the leaf progresses (a congested
    /// collector): the NACK is sent again `MAX_RENACKS` times, each an
    /// explicit-ACK delay (the RTO before any sample) after the one
    /// before, then left to the collector's timeout; the late answer is an
    /// ambiguous sample, so the next wait still follows the first estimate.
    #[test]
    fn an_unanswered_nack_is_sent_again_a_bounded_number_of_times() {
        for seed in 0..50 {
            let (mut nack, now) = nack_sent_for_3_to_10(seed);
            let mut sent_again = Vec::new();
            let mut at = now + 4 * MS;
            while at < now + Duration::from_secs(1) {
                at += MS;
                match nack.when_due(3, at) {
                    NackStep::Nothing => {}
                    NackStep::SendAgain(range) => sent_again.push((range, at - now)),
                    other => panic!("seed {seed}: {other:?} at {:?}", at - now),
                }
            }
            assert_eq!(sent_again, vec![(3..10, 12 * MS), (3..10, 20 * MS)], "seed {seed}");
            assert_eq!(nack.on_arrival(3, 11, at), NackStep::Nothing);
            nack_due_by(&mut nack, at, 4 * MS, seed);
        }
    }

    /// The repair of a NACK is lost: the leaf asks again about one RTO
    /// later for what is still missing, and not once the gap has filled.
    #[test]
    fn a_nack_whose_repair_is_lost_is_sent_again_after_the_round_trip_timeout() {
        for seed in 0..50 {
            let now = Instant::now();
            let mut nack = NackTimer::new(true, 8 * MS, CEILING, seed);
            // A first NACK answered in 2 ms: SRTT 2 ms, RTTVAR 1 ms, RTO 6 ms.
            assert_eq!(nack.on_arrival(4, 2, now), NackStep::Nothing);
            assert_eq!(nack.when_due(2, now + 4 * MS), NackStep::Send(2..4));
            assert_eq!(nack.on_arrival(2, 5, now + 6 * MS), NackStep::Nothing);
            // Pieces 5..8 lost; their NACK goes out within SRTT / 2.
            let start = now + 6 * MS;
            assert_eq!(nack.on_arrival(8, 5, start), NackStep::Nothing);
            assert_eq!(nack.when_due(5, start + MS), NackStep::Send(5..8), "seed {seed}");
            // Its repair of piece 5 arrives, 6 and 7 are lost again.
            assert_eq!(nack.on_arrival(5, 6, start + 3 * MS), NackStep::Nothing);
            assert_eq!(nack.when_due(6, start + 6 * MS), NackStep::Nothing, "seed {seed}: before the RTO");
            assert_eq!(nack.when_due(6, start + 7 * MS), NackStep::SendAgain(6..8), "seed {seed}: one RTO after the NACK");
            // The second repair fills the gap: nothing more.
            assert_eq!(nack.on_arrival(6, 9, start + 9 * MS), NackStep::Nothing);
            assert_eq!(nack.when_due(9, start + 100 * MS), NackStep::Nothing, "seed {seed}");
        }
    }
}
