//! pgmcc's acker: the member whose ACKs pace a collector's window. It is
//! the member that most recently reported loss, with two dampers so that
//! members with similar losses do not take turns:
//!
//! * a challenger takes over only if it loses more often than the acker by
//!   more than a quarter (`MARGIN_*`);
//! * and not within `HOLD_RTTS` round trips of the last change.
//!
//! How often a member loses is its mean loss interval, in pieces between
//! loss reports, over its last `INTERVALS` reports (as TFRC measures it):
//! a mean rather than a decaying rate, so that the member that lost last
//! does not look worse merely for being recent. The interval still open
//! counts once it is longer than the mean, so an acker that stops losing
//! yields to the next member that loses. Members are indexes into the
//! collector's member list.

use std::time::{Duration, Instant};

/// A challenger's mean interval times 5/4 must still be below the acker's.
const MARGIN_NUMERATOR: u64 = 5;
const MARGIN_DENOMINATOR: u64 = 4;
/// Round trips an acker keeps the role at least.
pub(crate) const HOLD_RTTS: u32 = 4;
/// Loss intervals remembered per member.
const INTERVALS: usize = 8;

#[derive(Clone, Copy, Debug, Default)]
struct History {
    /// The last loss intervals, oldest overwritten first.
    intervals: [u64; INTERVALS],
    recorded: usize,
    /// Pieces acknowledged since the last loss report.
    open: u64,
}

impl History {
    /// The mean loss interval, as a fraction (sum, count); None before any loss.
    fn mean(&self) -> Option<(u64, u64)> {
        let count = self.recorded.min(INTERVALS) as u64;
        if count == 0 {
            return None;
        }
        // Saturating: a corrupt ACK word from a peer may claim any count.
        let sum = self.intervals[..count as usize].iter().fold(0u64, |sum, &interval| sum.saturating_add(interval));
        // The open interval counts once it lengthens the mean.
        let with_open = (sum.saturating_add(self.open), count + 1);
        let lengthens = u128::from(with_open.0) * u128::from(count) > u128::from(sum) * u128::from(with_open.1);
        Some(if lengthens { with_open } else { (sum, count) })
    }
}

#[derive(Clone, Debug)]
pub(crate) struct AckerChoice {
    histories: Vec<History>,
    acker: Option<usize>,
    chosen_at: Option<Instant>,
    switches: u64,
}

impl AckerChoice {
    pub(crate) fn new(members: usize) -> Self {
        AckerChoice { histories: vec![History::default(); members], acker: None, chosen_at: None, switches: 0 }
    }

    pub(crate) fn acker(&self) -> Option<usize> {
        self.acker
    }

    /// Changes of acker after the first choice.
    #[cfg(test)]
    pub(crate) fn switches(&self) -> u64 {
        self.switches
    }

    pub(crate) fn on_acknowledged(&mut self, member: usize, pieces: u64) {
        let open = &mut self.histories[member].open;
        *open = open.saturating_add(pieces);
    }

    /// `member` reported a loss; `rtt` is the collector's round-trip
    /// estimate. True if `member` became the acker in place of another.
    pub(crate) fn on_loss(&mut self, member: usize, rtt: Duration, now: Instant) -> bool {
        let history = &mut self.histories[member];
        history.intervals[history.recorded % INTERVALS] = history.open.saturating_add(1);
        history.recorded += 1;
        history.open = 0;
        let Some(acker) = self.acker else {
            self.acker = Some(member);
            self.chosen_at = Some(now);
            return false;
        };
        // A hold end beyond the clock holds for good.
        let held = self.chosen_at.is_some_and(|at| at.checked_add(rtt.saturating_mul(HOLD_RTTS)).is_none_or(|end| now < end));
        if acker == member || held || !self.loses_more(member, acker) {
            return false;
        }
        self.acker = Some(member);
        self.chosen_at = Some(now);
        self.switches += 1;
        true
    }

    /// Whether `challenger`'s mean loss interval, lengthened by the margin,
    /// is still shorter than the acker's.
    fn loses_more(&self, challenger: usize, acker: usize) -> bool {
        match (self.histories[challenger].mean(), self.histories[acker].mean()) {
            (Some((c_sum, c_count)), Some((a_sum, a_count))) => {
                // c_sum / c_count * 5/4 < a_sum / a_count, without dividing.
                (c_sum as u128) * (a_count as u128) * (MARGIN_NUMERATOR as u128)
                    < (a_sum as u128) * (c_count as u128) * (MARGIN_DENOMINATOR as u128)
            }
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: Duration = Duration::from_millis(1);

    #[test]
    fn two_members_alternating_equal_losses_do_not_flap() {
        for acked_per_round in [1, 5, 20, 100] {
            let mut choice = AckerChoice::new(3);
            let start = Instant::now();
            for round in 0..400u32 {
                // Well past the hold each time: only the margin stops a switch.
                let now = start + RTT * (10 * round);
                let member = 1 + (round % 2) as usize;
                choice.on_acknowledged(member, acked_per_round);
                choice.on_acknowledged(3 - member, acked_per_round);
                choice.on_loss(member, RTT, now);
            }
            assert_eq!(choice.acker(), Some(1), "the first to lose keeps the role");
            assert_eq!(choice.switches(), 0, "{acked_per_round} pieces per round");
        }
    }

    #[test]
    fn a_clearly_worse_member_takes_over_but_not_within_the_hold() {
        let mut choice = AckerChoice::new(2);
        let start = Instant::now();
        choice.on_acknowledged(0, 100);
        assert!(!choice.on_loss(0, RTT, start), "the first choice is not a switch");
        // Member 1 loses every 10th piece against member 0's one in 101:
        // worse, but within HOLD_RTTS round trips of the choice.
        for _ in 0..3 {
            choice.on_acknowledged(1, 9);
            assert!(!choice.on_loss(1, RTT, start + RTT * (HOLD_RTTS - 1)));
        }
        assert_eq!(choice.acker(), Some(0));
        choice.on_acknowledged(1, 9);
        assert!(choice.on_loss(1, RTT, start + RTT * HOLD_RTTS));
        assert_eq!((choice.acker(), choice.switches()), (Some(1), 1));
        // Member 0 losing again after 60 pieces (mean 80.5) does not take it back.
        choice.on_acknowledged(0, 59);
        assert!(!choice.on_loss(0, RTT, start + RTT * 100));
        assert_eq!(choice.acker(), Some(1));
    }

    #[test]
    fn an_acker_that_stops_losing_yields_to_the_next_member_that_loses() {
        let mut choice = AckerChoice::new(2);
        let start = Instant::now();
        for _ in 0..4 {
            choice.on_acknowledged(0, 4);
            choice.on_loss(0, RTT, start);
        }
        choice.on_acknowledged(1, 60);
        assert!(!choice.on_loss(1, RTT, start + RTT * 10), "one loss in 61 is rarer than one in 5");
        choice.on_acknowledged(0, 1000);
        choice.on_acknowledged(1, 60);
        assert!(choice.on_loss(1, RTT, start + RTT * 20), "member 0's open interval of 1000 now counts");
    }

    /// A corrupt ACK word from a peer may claim nearly 2^64 pieces: the
    /// count saturates, where it wrapped to a short loss interval that made
    /// the peer look like the worst member.
    #[test]
    fn a_corrupt_ack_count_saturates_instead_of_wrapping() {
        let mut choice = AckerChoice::new(2);
        let start = Instant::now();
        choice.on_acknowledged(0, 99);
        choice.on_loss(0, RTT, start);
        choice.on_acknowledged(1, u64::MAX);
        choice.on_acknowledged(1, 4);
        assert!(!choice.on_loss(1, RTT, start + RTT * 100), "member 1 took over with a wrapped interval");
        for _ in 0..INTERVALS {
            choice.on_acknowledged(1, u64::MAX);
            choice.on_loss(1, RTT, start + RTT * 200);
        }
        assert_eq!(choice.acker(), Some(0));
    }
}
