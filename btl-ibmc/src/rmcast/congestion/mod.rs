//! Congestion control for the datagram flavour on a shared Ethernet: what
//! pgmcc and the seed (Brim and Sommers) add to Liu, Mamidala and Panda's
//! scheme, and what the seed lacked (an ssthresh that adapts, an RTT
//! estimate behind the timeout).
//!
//! How it fits the co-root structure: every *collector* (the root, and
//! each co-root for its subgroup) runs one [`Control`] over the ACK words
//! it already watches.
//!
//! * **Window** (`window`): in pieces, slow start then additive increase,
//!   halved on a loss, collapsed on a timeout, never wider than W nor
//!   narrower than M. At the root it limits what is sent beyond the
//!   acker's word (next piece < acker's count + cwnd, besides the flow
//!   control's least count + W); at the root and at a co-root it caps each
//!   timeout-driven retransmission burst to one member at cwnd pieces.
//! * **Loss reports** a collector sees: a member's NACK, a member's word
//!   standing still for a whole timeout, and, at the root, a co-root's
//!   word standing still (its subgroup is being repaired: congestion
//!   below it). A NACK or a co-root's silence halves the window only when
//!   the member's reports exceed the tolerated share of the last window
//!   of pieces (`loss_rate`): isolated random loss is repaired, not taken
//!   for congestion.
//! * **Acker** (`acker`): among the collector's members, the one that
//!   reported loss most recently, damped; the window grows with the
//!   acker's word. Until the first loss, the least word paces it.
//! * **RTT** (`crate::rtt`, shared with the udp reliable channel): sampled
//!   when a member's word passes a piece that was never resent (Karn),
//!   from the time the collector sent it (root) or first received it
//!   (co-root); its RTO replaces the fixed timeout of
//!   every member's retransmission timer. The RTO never goes below twice
//!   the explicit-ACK delay (`timeout` / 4): a leaf acknowledges a
//!   message's tail only after that delay, and a lower RTO timed out at
//!   nearly every tail (the resend then also hid, by Karn's rule, the one
//!   sample that would have raised it).
//!
//! A leaf's NACKs are suppressed separately (`datagram::nack`); the root
//! multicasts each NACKed piece once more, so that members sharing the
//! loss see the repair before their own NACK is due.

mod acker;
mod loss_rate;
mod window;

use std::time::{Duration, Instant};

pub(crate) use acker::AckerChoice;
pub(crate) use crate::rtt::RttEstimator;
pub(crate) use loss_rate::LossRate;
pub(crate) use window::{CongestionWindow, Reaction};

use super::config::RmcastConfig;
use super::stats::RmcastStats;

/// One collector's congestion state.
pub(crate) struct Control {
    pub(crate) window: CongestionWindow,
    pub(crate) rtt: RttEstimator,
    pub(crate) acker: AckerChoice,
    loss_rate: LossRate,
    /// The member whose word paces the window (None: the least word), and
    /// that word as last seen.
    pacer: Option<usize>,
    paced: u64,
}

impl Control {
    pub(crate) fn new(config: &RmcastConfig, members: usize) -> Self {
        let congestion = &config.congestion;
        let (least, most) = (config.effective_ack_interval(), config.window());
        Control {
            window: CongestionWindow::new(congestion.cwnd_initial as u64, congestion.ssthresh_initial as u64, least, most),
            rtt: RttEstimator::new(config.timeout, config.effective_rto_floor(), config.effective_rto_ceiling()),
            acker: AckerChoice::new(members),
            loss_rate: LossRate::new(congestion.loss_tolerance_percent, members),
            pacer: None,
            paced: 0,
        }
    }

    /// The round trip the acker's hold is counted in: the estimate, or the
    /// timeout before any sample.
    pub(crate) fn round_trip(&self) -> Duration {
        self.rtt.srtt().unwrap_or(self.rtt.rto())
    }

    /// Takes in the members' words: `word_of(index)`, and `floor`, the
    /// least of them. The acker's word paces the window, the least word
    /// before there is an acker; a new pacer's word is only a new base.
    pub(crate) fn pace(&mut self, word_of: impl Fn(usize) -> u64, floor: u64) {
        let acker = self.acker.acker();
        let word = acker.map_or(floor, word_of);
        if acker != self.pacer {
            self.pacer = acker;
        } else if word > self.paced {
            self.window.on_acknowledged(word - self.paced);
        }
        self.paced = word;
    }

    /// The highest piece count the window allows to have been sent.
    pub(crate) fn send_limit(&self) -> u64 {
        self.paced.saturating_add(self.window.cwnd())
    }

    /// Member `index` reported losing piece `seq`, by NACK (`timeout`
    /// false) or by silence; pieces below `sent` have been sent. A report
    /// within the member's tolerated loss share leaves the window alone.
    pub(crate) fn on_loss(&mut self, index: usize, seq: u64, sent: u64, timeout: bool, now: Instant, stats: &mut RmcastStats) {
        let reaction = if timeout {
            self.window.on_timeout(seq, sent)
        } else if self.loss_rate.is_congestion(index, seq, sent, self.window.cwnd()) {
            self.window.on_loss(seq, sent)
        } else {
            stats.losses_tolerated += 1;
            Reaction::Ignored
        };
        match reaction {
            Reaction::Ignored => {}
            Reaction::Halved => stats.loss_events += 1,
            Reaction::Collapsed => stats.timeout_collapses += 1,
        }
        if self.acker.on_loss(index, self.round_trip(), now) {
            stats.acker_switches += 1;
        }
    }
}
