//! When a leaf asks its collector for pieces it has a gap before, and when
//! it asks again.
//!
//! A gap is revealed when a piece beyond it arrives; each piece is revealed
//! missing once (pieces beyond the last revealed one start a new range).
//! By default the leaf NACKs a revealed gap at once (issue 36: the repair
//! round is the cost of a lossy bcast, and a wait shorter than a round
//! trip suppresses almost nothing, since the root's multicast repair
//! answering another member arrives a round trip after that member's
//! NACK). With a holdoff (`CongestionConfig::nack_holdoff_percent`, under
//! congestion control), the NACK waits a random time in [0, holdoff x
//! SRTT), capped at the explicit-ACK delay; if the gap fills meanwhile (a
//! reordered original, or a repair) no NACK is sent, and gaps found while
//! one waits extend it. The cap keeps the wait below the collector's RTO
//! (at least twice that delay).
//!
//! A NACK sent is remembered until its range has arrived. If the first
//! piece of it still missing has not come by the leaf's RTO (SRTT + 4
//! RTTVAR of its own NACKs, at least `RmcastConfig::nack_retry_floor`), it
//! is sent again for what is still missing, and the interval doubles for
//! that range, up to the collectors' RTO ceiling, and over udp at most
//! twice (`CongestionConfig::nack_retry_doublings`): random loss is not
//! congestion, and a repeat that failed is as likely to get through as
//! the first. This repairs a lost NACK
//! or a lost repair in a few round trips, where it otherwise waited for
//! the collector's timer (10 ms or more over udp) or, over udp, for the
//! reliable channel's own retransmission of the lost record (up to 20 ms).
//! Only the timer repeats a NACK: a range is never asked for twice within
//! one interval (duplicate NACKs are what suppression is for).
//!
//! The leaf's SRTT comes from its own NACKs: the time until the first
//! piece a NACK asked for arrives, from NACKs sent once only (Karn's
//! rule). A sample is dropped if the leaf went longer than the
//! explicit-ACK delay without progress meanwhile (it was outside MPI: the
//! sample would time the application, not the network). Before the first
//! sample, the explicit-ACK delay stands in for it.

use std::ops::Range;
use std::time::{Duration, Instant};

use crate::rmcast::congestion::RttEstimator;
use crate::rtt::backed_off;
use crate::rng::Rng;

/// A NACK waiting out its holdoff.
struct Waiting {
    range: Range<u64>,
    revealed_at: Instant,
    due: Instant,
}

/// A NACK sent whose range has not all arrived.
struct Asked {
    range: Range<u64>,
    /// When it was last sent, and how often.
    sent_at: Instant,
    times: u32,
    /// Whether it may still give an RTT sample (sent once, no pause since).
    may_sample: bool,
}

/// How a leaf NACKs: at once or after a holdoff, and when it asks again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NackPolicy {
    /// The holdoff as a fraction of SRTT; 0 NACKs at once.
    pub(crate) holdoff: f64,
    /// The explicit-ACK delay: the round trip assumed before a sample, the
    /// longest holdoff, and the longest pause between two progress calls
    /// a sample may span.
    pub(crate) ack_delay: Duration,
    /// The least interval before a NACK is sent again; None: never again.
    pub(crate) retry_floor: Option<Duration>,
    /// Bounds the estimate and the doubled retry interval (the
    /// collectors' RTO ceiling).
    pub(crate) ceiling: Duration,
    /// Bounds the doubled retry interval further: the configured RTO
    /// ceiling, which a long collector `timeout` does not raise (the
    /// estimate's bound above follows the timeout, so that a slow round
    /// trip is still sampled; the repeats of a lost NACK must not).
    pub(crate) repeat_ceiling: Duration,
    /// The most times the retry interval doubles for one range.
    pub(crate) most_doublings: u32,
}

impl NackPolicy {
    /// The policy `config` sets; the holdoff only where congestion control
    /// runs (`congestion`).
    pub(crate) fn for_config(config: &crate::rmcast::config::RmcastConfig, congestion: bool) -> Self {
        NackPolicy {
            holdoff: if congestion { f64::from(config.congestion.nack_holdoff_percent) / 100.0 } else { 0.0 },
            ack_delay: config.ack_delay(),
            retry_floor: config.nack_retry_floor,
            ceiling: config.effective_rto_ceiling(),
            repeat_ceiling: config.congestion.rto_ceiling,
            most_doublings: config.congestion.nack_retry_doublings.filter(|_| congestion).unwrap_or(config.nack_retry_doublings),
        }
    }
}

pub(crate) struct NackTimer {
    /// Pieces below this arrived, were NACKed or are waiting to be. The
    /// piece that revealed a gap is past it too: without that, each piece
    /// arriving behind an open gap NACKed the one before it, which had
    /// arrived.
    horizon: u64,
    policy: NackPolicy,
    waiting: Option<Waiting>,
    asked: Vec<Asked>,
    rtt: RttEstimator,
    /// When the leaf last made progress (called in here).
    last_progress: Option<Instant>,
    /// The longest a NACK waited before it was repeated (for the stats).
    longest_repeat_wait: Duration,
    rng: Rng,
}

/// What a change in the gaps calls for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NackStep {
    Nothing,
    /// A first NACK, after waiting `waited_rtt_percent` of the SRTT
    /// estimate since the gap was revealed.
    Send { range: Range<u64>, waited_rtt_percent: u64 },
    /// A NACK sent before whose pieces have not come: ask again.
    Again(Range<u64>),
    /// A waiting NACK became unnecessary.
    Suppressed,
}

impl NackTimer {
    /// `seed` differs per rank and root.
    pub(crate) fn new(policy: NackPolicy, seed: u64) -> Self {
        let ceiling = policy.ceiling.max(policy.ack_delay);
        // The floor keeps the estimate positive, and bounds the retry
        // interval from below.
        let floor = policy.retry_floor.unwrap_or(Duration::from_nanos(1)).clamp(Duration::from_nanos(1), ceiling);
        let repeat_ceiling = policy.repeat_ceiling.clamp(floor, ceiling);
        NackTimer {
            horizon: 0,
            policy: NackPolicy { ceiling, repeat_ceiling, ..policy },
            waiting: None,
            asked: Vec::new(),
            rtt: RttEstimator::new(policy.ack_delay, floor, ceiling),
            last_progress: None,
            longest_repeat_wait: Duration::ZERO,
            rng: Rng::new(seed),
        }
    }

    /// The round trip assumed: SRTT, or the explicit-ACK delay before a sample.
    fn srtt(&self) -> Duration {
        self.rtt.srtt().unwrap_or(self.policy.ack_delay)
    }

    /// Notes that the leaf is making progress at `now`; a NACK's sample
    /// that would span a longer pause is dropped.
    fn progress(&mut self, now: Instant) {
        if self.last_progress.is_some_and(|last| now.saturating_duration_since(last) > self.policy.ack_delay) {
            self.asked.iter_mut().for_each(|asked| asked.may_sample = false);
        }
        self.last_progress = Some(now);
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

    /// Samples the round trip of NACKs whose first piece came, and forgets
    /// those whose range has all come.
    fn settle(&mut self, contiguous: u64, now: Instant) {
        for asked in &mut self.asked {
            if asked.may_sample && contiguous > asked.range.start {
                asked.may_sample = false;
                self.rtt.sample(now.saturating_duration_since(asked.sent_at));
            }
        }
        self.asked.retain(|asked| asked.range.end > contiguous);
    }

    /// Records a NACK for `range` sent at `now`.
    fn asking(&mut self, range: Range<u64>, now: Instant) -> Range<u64> {
        self.asked.push(Asked { range: range.clone(), sent_at: now, times: 1, may_sample: true });
        range
    }

    /// When a NACK sent `times` times, last at `sent_at`, is due again:
    /// the current RTO doubled per repeat so far, at most `most_doublings`
    /// times and at most the repeat ceiling.
    /// From the current estimate, not the one at sending: NACKs sent
    /// before the first sample would otherwise keep the initial guess.
    fn again_at(&self, asked: &Asked) -> Option<Instant> {
        self.policy.retry_floor?;
        let interval = backed_off(self.rtt.rto(), asked.times - 1, self.policy.most_doublings, self.policy.repeat_ceiling).min(self.policy.repeat_ceiling);
        asked.sent_at.checked_add(interval)
    }

    /// `waited` as a percentage of the SRTT estimate.
    fn in_rtt_percent(&self, waited: Duration) -> u64 {
        (waited.as_nanos() * 100 / self.srtt().as_nanos().max(1)) as u64
    }

    /// Piece `seq` arrived and pieces below `contiguous` have all arrived.
    pub(crate) fn on_arrival(&mut self, seq: u64, contiguous: u64, now: Instant) -> NackStep {
        let revealed = self.reveal(seq, contiguous);
        self.progress(now);
        self.settle(contiguous, now);
        if let Some(gap) = revealed {
            match &mut self.waiting {
                Some(waiting) => waiting.range.end = gap.end,
                None if self.policy.holdoff <= 0.0 => {
                    return NackStep::Send { range: self.asking(gap, now), waited_rtt_percent: 0 };
                }
                None => {
                    let bound = self.srtt().mul_f64(self.policy.holdoff).min(self.policy.ack_delay);
                    let wait = bound.mul_f64(self.rng.unit());
                    self.waiting = Some(Waiting { range: gap, revealed_at: now, due: now.checked_add(wait).unwrap_or(now) });
                }
            }
        }
        match &self.waiting {
            Some(waiting) if contiguous >= waiting.range.end => {
                self.waiting = None;
                NackStep::Suppressed
            }
            _ => NackStep::Nothing,
        }
    }

    /// A waiting NACK whose time has come, or one to send again, for what
    /// is still missing; at most one per call.
    pub(crate) fn when_due(&mut self, contiguous: u64, now: Instant) -> NackStep {
        self.progress(now);
        self.settle(contiguous, now);
        if let Some(waiting) = self.waiting.as_ref().filter(|waiting| now >= waiting.due) {
            let (range, revealed_at) = (waiting.range.start.max(contiguous)..waiting.range.end, waiting.revealed_at);
            self.waiting = None;
            if range.is_empty() {
                return NackStep::Suppressed;
            }
            let waited_rtt_percent = self.in_rtt_percent(now.saturating_duration_since(revealed_at));
            return NackStep::Send { range: self.asking(range, now), waited_rtt_percent };
        }
        let Some(index) = self.asked.iter().position(|asked| self.again_at(asked).is_some_and(|at| now >= at)) else {
            return NackStep::Nothing;
        };
        let asked = &mut self.asked[index];
        self.longest_repeat_wait = self.longest_repeat_wait.max(now.saturating_duration_since(asked.sent_at));
        asked.times = asked.times.saturating_add(1);
        asked.sent_at = now;
        asked.may_sample = false;
        NackStep::Again(asked.range.start.max(contiguous)..asked.range.end)
    }

    /// How long before a NACK is first repeated: the leaf's RTO, at least
    /// the retry floor. A block withheld for its parity that hears nothing
    /// this long is given up (`parity`).
    pub(crate) fn retry_interval(&self) -> Duration {
        self.rtt.rto().max(self.policy.retry_floor.unwrap_or(Duration::ZERO))
    }

    /// Forgets the NACK just decided (by `on_arrival` or `when_due`):
    /// the leaf did not send it, since parity may still rebuild its
    /// pieces (`parity`). It is neither repeated nor sampled.
    pub(crate) fn withdraw_last(&mut self) {
        self.asked.pop();
    }

    /// Records a NACK for `range` the leaf sent at `now` on its own (a
    /// block its parity could not rebuild), to be repeated like any other.
    pub(crate) fn sent_outside(&mut self, range: Range<u64>, now: Instant) {
        self.asking(range, now);
    }

    /// The longest a NACK waited before it was repeated.
    pub(crate) fn longest_repeat_wait(&self) -> Duration {
        self.longest_repeat_wait
    }

    /// Whether a NACK is waiting.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> bool {
        self.waiting.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const CEILING: Duration = Duration::from_secs(1);

    /// `holdoff` in fractions of SRTT; no repeats unless `retry_floor`.
    fn timer(holdoff: f64, ack_delay: Duration, retry_floor: Option<Duration>, seed: u64) -> NackTimer {
        NackTimer::new(NackPolicy { holdoff, ack_delay, retry_floor, ceiling: CEILING, repeat_ceiling: CEILING, most_doublings: 16 }, seed)
    }

    /// The range of a first NACK, whatever it waited.
    fn sent(step: NackStep) -> Option<Range<u64>> {
        match step {
            NackStep::Send { range, .. } => Some(range),
            _ => None,
        }
    }

    #[test]
    fn without_a_holdoff_each_gap_is_nacked_at_once_and_only_once() {
        let mut nack = timer(0.0, MS, None, 1);
        let now = Instant::now();
        assert_eq!(nack.on_arrival(0, 1, now), NackStep::Nothing);
        assert_eq!(nack.on_arrival(3, 1, now), NackStep::Send { range: 1..3, waited_rtt_percent: 0 });
        assert_eq!(nack.on_arrival(2, 1, now), NackStep::Nothing, "inside the NACKed range");
        assert_eq!(nack.on_arrival(4, 1, now), NackStep::Nothing, "right behind the piece that revealed the gap");
        assert_eq!(nack.on_arrival(6, 1, now), NackStep::Send { range: 5..6, waited_rtt_percent: 0 }, "only what was neither asked for nor seen");
        assert_eq!(nack.when_due(1, now + MS * 100), NackStep::Nothing, "repeats are off");
    }

    /// Issue 36: under congestion control (udp) a leaf waited a random
    /// time up to SRTT / 2 before every NACK, a wait a lossy 64 KiB bcast
    /// paid in nearly every call while suppressing almost nothing. The
    /// policy the receiver builds from the defaults NACKs at once.
    #[test]
    fn by_default_a_gap_is_nacked_at_once_with_congestion_control_too() {
        let config = crate::rmcast::config::RmcastConfig::default();
        for congestion in [false, true] {
            for seed in 0..20 {
                let mut nack = NackTimer::new(NackPolicy::for_config(&config, congestion), seed);
                let now = Instant::now();
                assert_eq!(nack.on_arrival(5, 2, now), NackStep::Send { range: 2..5, waited_rtt_percent: 0 }, "congestion {congestion}, seed {seed}");
            }
        }
    }

    #[test]
    fn a_gap_filled_before_the_holdoff_ends_is_never_nacked() {
        let now = Instant::now();
        let mut nack = timer(0.5, 8 * MS, None, 7);
        assert_eq!(nack.on_arrival(4, 2, now), NackStep::Nothing);
        assert!(nack.waiting());
        assert_eq!(nack.on_arrival(6, 2, now), NackStep::Nothing, "extends the waiting range to 2..6");
        assert_eq!(nack.on_arrival(2, 5, now), NackStep::Nothing, "piece 5 is still missing");
        assert_eq!(nack.on_arrival(5, 7, now), NackStep::Suppressed);
        assert!(!nack.waiting());
        assert_eq!(nack.when_due(7, now + MS * 100), NackStep::Nothing);
    }

    #[test]
    fn a_nack_holds_back_at_most_half_the_round_trip_and_asks_only_for_what_is_missing() {
        for seed in 0..50 {
            let now = Instant::now();
            let mut nack = timer(0.5, 8 * MS, None, seed);
            assert_eq!(nack.on_arrival(10, 3, now), NackStep::Nothing);
            // 8 ms / 2: due by 4 ms at the latest, having waited at most half the assumed round trip.
            match nack.when_due(5, now + 4 * MS) {
                NackStep::Send { range, waited_rtt_percent } => assert_eq!((range, waited_rtt_percent), (5..10, 50), "seed {seed}"),
                other => panic!("seed {seed}: {other:?}"),
            }
            // Its answer arrives 6 ms later: SRTT 6 ms, so the next wait is below 3 ms.
            assert_eq!(nack.on_arrival(5, 10, now + 10 * MS), NackStep::Nothing);
            // Piece 10 revealed the first gap; 11 is missing now.
            assert_eq!(nack.on_arrival(12, 10, now + 10 * MS), NackStep::Nothing);
            assert_eq!(sent(nack.when_due(10, now + 13 * MS)), Some(11..12), "seed {seed}");
        }
    }

    /// A NACK (or its repair) lost: the leaf asks again once its RTO has
    /// passed (here SRTT 1 ms, RTTVAR 0.5 ms: 3 ms), then after twice
    /// that, and only for what is still missing. Before issue 36's change a
    /// range was NACKed once, and a lost NACK waited for the collector's
    /// timeout (10 ms or more over udp, 10 RTTs here and far more on a
    /// LAN).
    #[test]
    fn a_nack_whose_pieces_do_not_come_is_repeated_after_the_leafs_rto() {
        let now = Instant::now();
        let mut nack = timer(0.0, 8 * MS, Some(MS / 10), 3);
        // One answered NACK: a 1 ms sample.
        assert_eq!(sent(nack.on_arrival(4, 2, now)), Some(2..4));
        assert_eq!(nack.on_arrival(2, 5, now + MS), NackStep::Nothing);
        assert_eq!(nack.rtt.rto(), 3 * MS);
        // A NACK whose answer is lost.
        let start = now + 2 * MS;
        assert_eq!(sent(nack.on_arrival(9, 5, start)), Some(5..9));
        assert_eq!(nack.when_due(5, start + 2 * MS), NackStep::Nothing, "before the RTO");
        assert_eq!(nack.when_due(5, start + 3 * MS), NackStep::Again(5..9), "at the RTO");
        assert_eq!(nack.when_due(5, start + 4 * MS), NackStep::Nothing, "once per interval");
        // Pieces 5 and 6 came meanwhile: only 7..9 is asked for, after 2 RTO more.
        assert_eq!(nack.on_arrival(5, 6, start + 5 * MS), NackStep::Nothing);
        assert_eq!(nack.on_arrival(6, 7, start + 5 * MS), NackStep::Nothing);
        assert_eq!(nack.when_due(7, start + 8 * MS), NackStep::Nothing);
        assert_eq!(nack.when_due(7, start + 9 * MS), NackStep::Again(7..9), "doubled interval");
        // The repeat's answer gives no sample (Karn): the RTO stays 3 ms.
        assert_eq!(nack.on_arrival(7, 10, start + 30 * MS), NackStep::Nothing);
        assert_eq!(nack.rtt.rto(), 3 * MS);
        assert_eq!(nack.when_due(10, start + Duration::from_secs(5)), NackStep::Nothing, "all came: nothing left to ask");
    }

    /// Issue 36: a range whose NACK or repair random loss takes k times
    /// in a row. Its repeats come at the leaf's RTO (3 ms here) doubled
    /// per failure but at most `DEFAULT_REPEAT_DOUBLINGS` (2) times, so
    /// every later one is 12 ms after the last. Before, the interval
    /// doubled up to the ceiling (1 s): 3, 6, 12, 24, 48, 96 ... ms, and
    /// six failures in a row, which 5 % loss on the NACK and on its
    /// repair makes a few per million ranges, cost 0.19 s instead of 51 ms.
    #[test]
    fn a_range_lost_again_and_again_is_asked_for_at_most_four_rtos_apart() {
        let now = Instant::now();
        let policy = NackPolicy {
            holdoff: 0.0,
            ack_delay: 8 * MS,
            retry_floor: Some(MS / 10),
            ceiling: CEILING,
            repeat_ceiling: CEILING,
            most_doublings: crate::rmcast::config::DEFAULT_REPEAT_DOUBLINGS,
        };
        let mut nack = NackTimer::new(policy, 3);
        assert_eq!(sent(nack.on_arrival(4, 2, now)), Some(2..4));
        assert_eq!(nack.on_arrival(2, 5, now + MS), NackStep::Nothing);
        assert_eq!(nack.rtt.rto(), 3 * MS);
        let start = now + 2 * MS;
        assert_eq!(sent(nack.on_arrival(9, 5, start)), Some(5..9));
        // Each repeat's wait from the one before, in ms: the schedule.
        let mut waits = Vec::new();
        let (mut last, mut at) = (start, start);
        while waits.len() < 7 {
            at += MS / 2;
            match nack.when_due(5, at) {
                NackStep::Again(range) => {
                    assert_eq!(range, 5..9);
                    waits.push((at - last).as_micros() / 500 * 500);
                    last = at;
                }
                NackStep::Nothing => {}
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(waits, [3000, 6000, 12_000, 12_000, 12_000, 12_000, 12_000], "in us");
        assert_eq!(nack.longest_repeat_wait(), 12 * MS);
    }

    #[test]
    fn a_repeat_waits_at_least_the_floor() {
        let now = Instant::now();
        let mut nack = timer(0.0, 8 * MS, Some(2 * MS), 3);
        assert_eq!(sent(nack.on_arrival(4, 2, now)), Some(2..4));
        // A 10 us sample would set an RTO of 30 us; the floor holds it at 2 ms.
        assert_eq!(nack.on_arrival(2, 5, now + Duration::from_micros(10)), NackStep::Nothing);
        assert_eq!(sent(nack.on_arrival(9, 5, now + MS)), Some(5..9));
        assert_eq!(nack.when_due(5, now + 2 * MS), NackStep::Nothing);
        assert_eq!(nack.when_due(5, now + 3 * MS), NackStep::Again(5..9));
    }

    /// A long collector timeout raises the estimate's ceiling (a slow
    /// sample is still taken) but not the repeats': a lost NACK is asked
    /// again within the configured RTO ceiling however often it was lost.
    #[test]
    fn repeats_stay_within_the_repeat_ceiling_under_a_long_timeout() {
        let now = Instant::now();
        let long = Duration::from_secs(600);
        let policy = NackPolicy { holdoff: 0.0, ack_delay: long / 4, retry_floor: Some(MS), ceiling: long, repeat_ceiling: 10 * MS, most_doublings: 16 };
        let mut nack = NackTimer::new(policy, 3);
        // One answered NACK whose answer took 2 s (a starved process): the
        // RTO grows to seconds, within the estimate's ceiling.
        assert_eq!(sent(nack.on_arrival(4, 2, now)), Some(2..4));
        assert_eq!(nack.on_arrival(2, 5, now + Duration::from_secs(2)), NackStep::Nothing);
        assert!(nack.rtt.rto() >= Duration::from_secs(2), "{:?}", nack.rtt.rto());
        // A NACK lost again and again: each repeat within 10 ms of the last.
        let mut at = now + Duration::from_secs(3);
        assert_eq!(sent(nack.on_arrival(9, 5, at)), Some(5..9));
        for repeat in 1..=20 {
            at += 10 * MS;
            assert_eq!(nack.when_due(5, at), NackStep::Again(5..9), "repeat {repeat}");
        }
    }

    /// Due by `bound` after the gap is revealed at `at`, whatever the seed.
    fn nack_due_by(nack: &mut NackTimer, at: Instant, bound: Duration, seed: u64) {
        assert_eq!(nack.on_arrival(102, 100, at), NackStep::Nothing);
        assert_eq!(sent(nack.when_due(100, at + bound)), Some(100..102), "seed {seed}: not due within {bound:?}");
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
            let mut nack = timer(0.5, 8 * MS, None, seed);
            assert_eq!(nack.on_arrival(10, 3, now), NackStep::Nothing);
            assert_eq!(sent(nack.when_due(3, now + 4 * MS)), Some(3..10));
            // No progress for a second, then the answer.
            let later = now + Duration::from_secs(1);
            assert_eq!(nack.on_arrival(3, 11, later), NackStep::Nothing);
            // Still the first estimate (8 ms): due within 4 ms.
            nack_due_by(&mut nack, later, 4 * MS, seed);
        }
    }

    /// A 1 s round trip taken while progressing (a congested collector)
    /// counts, but a holdoff never exceeds the explicit-ACK delay.
    #[test]
    fn a_long_round_trip_never_makes_a_nack_wait_beyond_the_ack_delay() {
        for seed in 0..50 {
            let now = Instant::now();
            let mut nack = timer(0.5, 8 * MS, None, seed);
            assert_eq!(nack.on_arrival(10, 3, now), NackStep::Nothing);
            assert_eq!(sent(nack.when_due(3, now + 4 * MS)), Some(3..10));
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
