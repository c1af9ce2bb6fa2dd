//! The congestion window of one collector, in pieces: TCP's slow start and
//! congestion avoidance with an ssthresh that follows the losses.
//!
//! Below ssthresh each acknowledged piece widens the window by one (it
//! doubles per round trip); at or above it the window widens by one per
//! window's worth of acknowledged pieces (one per round trip). A loss
//! halves the window and sets ssthresh to the halved value; a timeout sets
//! ssthresh the same way and drops the window to its least value. Only one
//! loss per window of sent pieces is reacted to: losses of pieces sent
//! before the last reaction belong to the same congestion episode.
//!
//! The window stays within [least, most]: most is rmcast's flow-control
//! window W, least the lazy-ACK interval M, because a window narrower than
//! M could wait for an ACK the skew rule holds back (see `ack`).

#[derive(Clone, Debug)]
pub(crate) struct CongestionWindow {
    cwnd: u64,
    ssthresh: u64,
    least: u64,
    most: u64,
    /// Pieces acknowledged in congestion avoidance since the last widening.
    avoidance_credit: u64,
    /// Losses of pieces below this were already reacted to.
    recovered_below: u64,
}

/// What a loss or timeout did to the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reaction {
    /// Part of a congestion episode already reacted to.
    Ignored,
    Halved,
    Collapsed,
}

impl CongestionWindow {
    pub(crate) fn new(initial: u64, ssthresh: u64, least: u64, most: u64) -> Self {
        debug_assert!(1 <= least && least <= most);
        CongestionWindow {
            cwnd: initial.clamp(least, most),
            ssthresh: ssthresh.clamp(least, most),
            least,
            most,
            avoidance_credit: 0,
            recovered_below: 0,
        }
    }

    /// The least window, M: also what a timeout resends.
    pub(crate) fn least(&self) -> u64 {
        self.least
    }

    pub(crate) fn cwnd(&self) -> u64 {
        self.cwnd
    }

    #[cfg(test)]
    pub(crate) fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    /// `pieces` more were acknowledged by the pacing member.
    pub(crate) fn on_acknowledged(&mut self, mut pieces: u64) {
        while pieces > 0 && self.cwnd < self.ssthresh && self.cwnd < self.most {
            self.cwnd += 1;
            pieces -= 1;
        }
        if self.cwnd >= self.most {
            self.avoidance_credit = 0;
            return;
        }
        self.avoidance_credit = self.avoidance_credit.saturating_add(pieces);
        while self.avoidance_credit >= self.cwnd && self.cwnd < self.most {
            self.avoidance_credit -= self.cwnd;
            self.cwnd += 1;
        }
    }

    /// Piece `seq` was reported lost (a NACK, a stalled co-root); pieces
    /// below `sent` have been sent.
    pub(crate) fn on_loss(&mut self, seq: u64, sent: u64) -> Reaction {
        if seq < self.recovered_below {
            return Reaction::Ignored;
        }
        self.halve(sent);
        Reaction::Halved
    }

    /// A member stayed silent for a whole timeout about piece `seq`. The
    /// window always collapses; ssthresh halves once per episode.
    pub(crate) fn on_timeout(&mut self, seq: u64, sent: u64) -> Reaction {
        if seq >= self.recovered_below {
            self.halve(sent);
        }
        self.cwnd = self.least;
        self.avoidance_credit = 0;
        Reaction::Collapsed
    }

    fn halve(&mut self, sent: u64) {
        self.ssthresh = (self.cwnd / 2).max(self.least);
        self.cwnd = self.ssthresh;
        self.avoidance_credit = 0;
        self.recovered_below = sent;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window after each step of a scripted run, computed by hand in
    /// the comments: least 2, most 64, start 2, ssthresh 16.
    #[test]
    fn slow_start_doubles_avoidance_adds_one_per_window_and_losses_halve() {
        let mut window = CongestionWindow::new(2, 16, 2, 64);
        let mut after = |step: &dyn Fn(&mut CongestionWindow)| {
            step(&mut window);
            (window.cwnd(), window.ssthresh())
        };
        // Slow start: a round trip acknowledges a whole window, which doubles it.
        assert_eq!(after(&|w| w.on_acknowledged(2)), (4, 16));
        assert_eq!(after(&|w| w.on_acknowledged(4)), (8, 16));
        // 8 -> 16 uses 8 of the 12; the other 4 are avoidance credit (< 16).
        assert_eq!(after(&|w| w.on_acknowledged(12)), (16, 16));
        // Avoidance: 16 + 4 credit = 20 >= 16 -> 17, credit 4; then 17 -> 18 needs 13 more.
        assert_eq!(after(&|w| w.on_acknowledged(16)), (17, 16));
        assert_eq!(after(&|w| w.on_acknowledged(12)), (17, 16));
        assert_eq!(after(&|w| w.on_acknowledged(1)), (18, 16));
        // A loss at piece 100 with 120 sent: 18 / 2 = 9 for both.
        assert_eq!(after(&|w| assert_eq!(w.on_loss(100, 120), Reaction::Halved)), (9, 9));
        // Another loss from the same episode (piece 110 < 120) is ignored.
        assert_eq!(after(&|w| assert_eq!(w.on_loss(110, 125), Reaction::Ignored)), (9, 9));
        // Above ssthresh already: 9 pieces -> 10.
        assert_eq!(after(&|w| w.on_acknowledged(9)), (10, 9));
        // A new episode (piece 130 >= 120): 10 / 2 = 5.
        assert_eq!(after(&|w| assert_eq!(w.on_loss(130, 140), Reaction::Halved)), (5, 5));
        // A timeout: ssthresh 5 / 2 = 2, window to the least (2); slow start again.
        assert_eq!(after(&|w| assert_eq!(w.on_timeout(150, 160), Reaction::Collapsed)), (2, 2));
        assert_eq!(after(&|w| w.on_acknowledged(2)), (3, 2));
        // 30 more: credit 30 widens 3->4->5->6->7->8 using 3+4+5+6+7 = 25, 5 left.
        // A second timeout in the same episode collapses but keeps ssthresh.
        assert_eq!(after(&|w| w.on_acknowledged(30)), (8, 2));
        assert_eq!(after(&|w| assert_eq!(w.on_timeout(155, 170), Reaction::Collapsed)), (2, 2));
    }

    #[test]
    fn the_window_stays_between_its_least_and_the_flow_control_window() {
        let mut window = CongestionWindow::new(1, 1000, 8, 64);
        assert_eq!((window.cwnd(), window.ssthresh()), (8, 64), "both raised to M and lowered to W");
        window.on_acknowledged(10_000);
        assert_eq!(window.cwnd(), 64);
        for seq in 0..10 {
            window.on_loss(seq * 1000, seq * 1000 + 1);
        }
        assert_eq!((window.cwnd(), window.ssthresh()), (8, 8), "never below M");
    }
}
