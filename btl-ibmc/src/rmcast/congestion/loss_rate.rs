//! Whether a member's loss report is congestion or random loss.
//!
//! TCP halves its window on every loss episode, which at a random loss
//! rate p holds the window near 1.2 / sqrt(p) pieces whatever the path
//! could carry: at 5 % loss about 5, below a 64 KiB bcast's 47 pieces, so
//! the root stalled on ACKs inside every bcast (issue 36). Here a report
//! counts as congestion only when the reporting member's reports over the
//! last span of sent pieces, `max(cwnd, LOSS_SPAN_LEAST)`, exceed the
//! tolerated share of that span. Reports are counted, not pieces: a NACK
//! covers every gap its sender found while it waited, so its length
//! overstates the loss. A burst that nothing follows (a queue overflowing
//! at the end of a window) is not reported by NACK at all; the timeout
//! that repairs it still collapses the window (`window`).
//!
//! A report naming the same first piece as one still counted is the
//! member's NACK repeated (its answer was late or lost, `datagram::nack`):
//! it is neither counted again nor taken for congestion.
//!
//! Invariant: a member's list holds only distinct report positions within the
//! current span, at most one span's worth.

use std::collections::VecDeque;

/// The least span a loss share is measured over, in pieces: with a
/// window of a few pieces, one or two random losses would already be a
/// large share.
pub(crate) const LOSS_SPAN_LEAST: u64 = 64;

pub(crate) struct LossRate {
    tolerance_percent: u64,
    /// Per member, the pieces its recent loss reports named.
    reports: Vec<VecDeque<u64>>,
}

impl LossRate {
    pub(crate) fn new(tolerance_percent: u32, members: usize) -> Self {
        LossRate { tolerance_percent: u64::from(tolerance_percent.min(100)), reports: vec![VecDeque::new(); members] }
    }

    /// Member `index` reported piece `seq` lost; pieces below `sent` have
    /// been sent and the window is `cwnd`. True if its reports, this one
    /// included, exceed the tolerated share of the span: congestion.
    pub(crate) fn is_congestion(&mut self, index: usize, seq: u64, sent: u64, cwnd: u64) -> bool {
        if self.tolerance_percent == 0 {
            return true;
        }
        let Some(reports) = self.reports.get_mut(index) else {
            return true;
        };
        let span = cwnd.max(LOSS_SPAN_LEAST);
        let since = sent.saturating_sub(span);
        reports.retain(|&reported| reported >= since);
        if reports.contains(&seq) {
            // A repeated NACK (its answer was late or lost) is the same
            // loss, already counted.
            return false;
        }
        if seq >= since {
            reports.push_back(seq);
        }
        while reports.len() as u64 > span {
            reports.pop_front();
        }
        (reports.len() as u64).saturating_mul(100) > self.tolerance_percent.saturating_mul(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tolerance 10 %, window 32 (span 64, the least): 6 reports within
    /// 64 pieces are 9.4 %, tolerated; a 7th is 10.9 %, congestion.
    /// Reports older than the span no longer count.
    #[test]
    fn reports_above_the_tolerated_share_of_the_span_are_congestion() {
        let mut rate = LossRate::new(10, 2);
        for seq in [100, 105, 110, 115, 120, 125] {
            assert!(!rate.is_congestion(0, seq, seq + 1, 32), "report at {seq}");
        }
        assert!(rate.is_congestion(0, 130, 131, 32), "7 reports in 64 pieces");
        assert!(!rate.is_congestion(1, 130, 131, 32), "another member's reports are its own");
        // At 200 sent the span starts at 136: only this report is in it.
        assert!(!rate.is_congestion(0, 199, 200, 32));
        // A wider window widens the span: 1000 pieces tolerate 100 reports.
        let mut wide = LossRate::new(10, 1);
        let verdicts: Vec<bool> = (0..101).map(|seq| wide.is_congestion(0, 1000 + seq, 2000, 1000)).collect();
        assert_eq!(verdicts.iter().position(|&congested| congested), Some(100));
    }

    #[test]
    fn no_tolerance_and_an_unknown_member_are_always_congestion() {
        let mut rate = LossRate::new(0, 1);
        assert!(rate.is_congestion(0, 5, 10, 8));
        let mut rate = LossRate::new(10, 1);
        assert!(rate.is_congestion(3, 5, 10, 8));
    }

    #[test]
    fn a_member_keeps_at_most_one_span_of_reports() {
        let mut rate = LossRate::new(100, 1);
        for seq in 0..1000 {
            rate.is_congestion(0, seq, 1000, 8);
        }
        assert_eq!(rate.reports[0].len() as u64, LOSS_SPAN_LEAST);
    }

    /// 6 reports in a span of 64 are tolerated at 10 %; the same six
    /// repeated (NACKs asked again) stay six, where a 7th new one is
    /// congestion.
    #[test]
    fn a_repeated_report_is_not_a_new_loss() {
        let mut rate = LossRate::new(10, 1);
        for round in 0..3 {
            for seq in [100, 105, 110, 115, 120, 125] {
                assert!(!rate.is_congestion(0, seq, 130, 32), "round {round}, report at {seq}");
            }
        }
        assert_eq!(rate.reports[0].len(), 6);
        assert!(rate.is_congestion(0, 129, 130, 32));
    }
}
