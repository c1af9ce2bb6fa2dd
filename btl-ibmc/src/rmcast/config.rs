//! What a reliable-multicast instance is configured with. Every rank of a
//! communicator must use the same values: they decide the window layout,
//! where messages are cut into pieces, and who collects whose ACKs.

use std::time::Duration;

use crate::wait::{WaitPolicy, Waiter};

#[derive(Clone, Copy, Debug)]
pub struct RmcastConfig {
    /// The sliding window: pieces a root may have sent that some receiver
    /// has not yet delivered. Also every receiver's slots per root.
    pub window_slots: usize,
    /// Payload of one slot of the ring in the root's window, i.e. one piece,
    /// on shared-window transports.
    pub slot_bytes: usize,
    /// Payload of one datagram, i.e. one piece, on datagram transports;
    /// lowered to what the transport's datagram holds after the header.
    pub fragment_bytes: usize,
    /// Ranks that, besides the root, receive every piece reliably, collect
    /// the ACKs of a subgroup and retransmit to it. Lowered to size - 1.
    /// Datagram transports only: on a shared window nothing is ever lost.
    pub co_roots: usize,
    /// M: a receiver at subgroup position i acknowledges when it delivers a
    /// piece B with B mod M = i mod M. Lowered to `window_slots`, so that a
    /// window never waits on an ACK the skew rule holds back.
    pub ack_interval: usize,
    /// Retransmission timeout. A receiver acknowledges explicitly once a
    /// delivery has waited a quarter of it, so that retransmissions answer
    /// losses rather than lazy ACKs.
    pub timeout: Duration,
    /// A receiver that sees a gap asks its collector for the missing pieces
    /// at once, instead of waiting for the collector's timeout.
    pub nack: bool,
    /// A NACK whose first missing piece has not come within the leaf's
    /// retransmission timeout (SRTT + 4 RTTVAR of its own NACKs, at least
    /// this, doubling per repeat) is sent again for what is still missing:
    /// a lost NACK or a lost repair then costs a few round trips instead of
    /// the collector's timeout. None never repeats a NACK.
    pub nack_retry_floor: Option<Duration>,
    /// The most times that interval doubles for one range that stays
    /// unanswered (`rtt::backed_off`); at most `MAX_REPEAT_DOUBLINGS`, the
    /// default. Where congestion control runs (udp, whose reliable channel
    /// loses NACKs at random), `CongestionConfig::nack_retry_doublings`
    /// replaces it: 2 there. Elsewhere (verbs) a NACK is never lost, a
    /// repeat answers only a slow root or a lost multicast repair, and the
    /// doubling keeps a loaded node's spurious repeats few.
    pub nack_retry_doublings: u32,
    /// Datagram transports: the last this many pieces of every message
    /// (every piece of a shorter one) are multicast twice, the copy after
    /// the forwards to the co-roots, so that a lost tail is repaired
    /// without the timeout (`repair`). 0 sends each piece once.
    pub tail_repeat: usize,
    /// Datagram transports: forward error correction. Each block of a
    /// message's data pieces is followed by parity pieces of a
    /// Reed-Solomon code, as many as the loss the root sees calls for
    /// (`repair::parity_plan`), at most this percentage of the block's data
    /// pieces; none while no loss is seen. 0 turns parity off.
    pub parity_percent: u32,
    /// The loss per datagram and receiver the root assumes at least when
    /// it sets the parity (0: only the loss it sees). For a network known
    /// to be lossy, and for tests that need parity from the first bcast.
    pub parity_assumed_loss: f64,
    pub wait: WaitPolicy,
    /// A wait that lasts this long fails with an error instead of going
    /// on. `None` waits for ever, warning at the policy's intervals (MPI
    /// has no way to abandon a collective); tests bound their runs with it.
    pub give_up_after: Option<Duration>,
    /// Congestion control of the datagram flavour (see `congestion`).
    pub congestion: CongestionConfig,
}

/// Whether a datagram transport gets congestion control.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CongestionMode {
    /// On over a shared Ethernet (the `udp` transport), off elsewhere:
    /// verbs UD multicast runs on fabrics with link-level flow control
    /// (InfiniBand credits, RoCE with PFC) where a drop is rare and a
    /// window would only pace a path that does not need it.
    Auto,
    On,
    Off,
}

/// The congestion window, the RTT estimate and NACK suppression of the
/// datagram flavour. Windows are counted in pieces (fragments).
#[derive(Clone, Copy, Debug)]
pub struct CongestionConfig {
    pub mode: CongestionMode,
    /// The window a collector starts with; raised to the lazy-ACK interval
    /// M and lowered to `window_slots` where used.
    pub cwnd_initial: usize,
    /// Slow start ends here until the first loss sets it; clamped like
    /// `cwnd_initial`.
    pub ssthresh_initial: usize,
    /// The retransmission timeout computed from RTT samples is kept
    /// between these; `RmcastConfig::timeout` is its value before the
    /// first sample.
    pub rto_floor: Duration,
    pub rto_ceiling: Duration,
    /// Where congestion control runs, the flow-control window W and the
    /// lazy-ACK interval M in place of `RmcastConfig::window_slots` and
    /// `ack_interval` (None keeps those). A shared Ethernet wants a wider
    /// window than a verbs fabric: receivers acknowledge only from inside
    /// MPI, so W must cover a receiver's scheduling delays, not just the
    /// wire's round trip, and every ACK is a datagram the root must take
    /// in, so M sets the ACK load the root carries per piece.
    pub window_slots: Option<usize>,
    pub ack_interval: Option<usize>,
    /// A member's loss reports halve the window only once they exceed this
    /// share, in percent, of the last window of pieces (at least
    /// `congestion::LOSS_SPAN_LEAST`): random loss on a path that is not
    /// congested is repaired, not answered by slowing down. 0 halves on
    /// every report of a new episode, as TCP does. At most 100.
    pub loss_tolerance_percent: u32,
    /// How long a leaf holds a NACK back, as a percentage of its SRTT: a
    /// random wait in [0, this % of SRTT), capped at the explicit-ACK
    /// delay, during which a repair multicast for another member may fill
    /// the gap. 0 (the default) NACKs at once; 50 was the rule before
    /// issue 36. At most 1000.
    pub nack_holdoff_percent: u32,
    /// Where congestion control runs, `RmcastConfig::nack_retry_doublings`
    /// in place of the general one (None keeps it): `DEFAULT_REPEAT_DOUBLINGS`
    /// (2) by default, since random loss is not congestion and a repeat
    /// that failed is as likely to get through as the first (issue 36;
    /// docs/rmcast-tail.md). The glue sets it from
    /// `coll_rdma_udp_repair_backoff`, with the udp reliable channel's.
    pub nack_retry_doublings: Option<u32>,
}

impl Default for CongestionConfig {
    /// One lazy-ACK interval to start with, slow start up to the whole
    /// default window, and a timeout between 2 ms (well above a LAN's round
    /// trip, below a loaded node's scheduling delay) and 1 s.
    fn default() -> Self {
        CongestionConfig {
            mode: CongestionMode::Auto,
            cwnd_initial: 8,
            ssthresh_initial: 64,
            rto_floor: Duration::from_millis(2),
            rto_ceiling: Duration::from_secs(1),
            window_slots: None,
            ack_interval: None,
            loss_tolerance_percent: DEFAULT_LOSS_TOLERANCE_PERCENT,
            nack_holdoff_percent: 0,
            nack_retry_doublings: Some(DEFAULT_REPEAT_DOUBLINGS),
        }
    }
}

/// Measured (docs/rmcast-congestion.md, "Random loss"): 5 % independent
/// loss per datagram and receiver makes a member report loss for about 2 %
/// of the pieces (one NACK covers the gaps found while it waits); 10 %
/// stays clear of that, while a congested path that drops a burst of a
/// window still collapses the window by timeout.
pub const DEFAULT_LOSS_TOLERANCE_PERCENT: u32 = 10;

impl CongestionConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.cwnd_initial == 0 {
            return Err("the initial congestion window must be at least 1 fragment".to_string());
        }
        if self.ssthresh_initial == 0 {
            return Err("the initial slow-start threshold must be at least 1 fragment".to_string());
        }
        if self.rto_floor.is_zero() {
            return Err("the retransmission-timeout floor must be positive".to_string());
        }
        if self.window_slots == Some(0) {
            return Err("the window under congestion control must be at least 1 fragment".to_string());
        }
        if self.ack_interval == Some(0) {
            return Err("the ACK interval under congestion control must be at least 1 fragment".to_string());
        }
        if self.loss_tolerance_percent > 100 {
            return Err(format!("the loss tolerance ({} %) is above 100 %", self.loss_tolerance_percent));
        }
        if self.nack_holdoff_percent > 1000 {
            return Err(format!("the NACK holdoff ({} % of SRTT) is above 1000 %", self.nack_holdoff_percent));
        }
        if self.rto_ceiling > MAX_RTO_CEILING {
            return Err(format!("the retransmission-timeout ceiling ({:?}) is above {MAX_RTO_CEILING:?}", self.rto_ceiling));
        }
        if self.rto_ceiling < self.rto_floor {
            return Err(format!(
                "the retransmission-timeout ceiling ({:?}) is below its floor ({:?})",
                self.rto_ceiling, self.rto_floor
            ));
        }
        Ok(())
    }

    /// Whether congestion control runs over the transport named
    /// `transport_name` ([`crate::transport::Endpoint::name`]).
    pub fn enabled_for(&self, transport_name: &str) -> bool {
        match self.mode {
            CongestionMode::On => true,
            CongestionMode::Off => false,
            CongestionMode::Auto => transport_name == "udp",
        }
    }
}

/// The largest RTO ceiling accepted: a silent member is retried at least
/// this often, and timer arithmetic stays far from overflow.
pub(crate) const MAX_RTO_CEILING: Duration = Duration::from_secs(60);

/// The repeat the simulator chose (docs/scale, "Repairing a lost tail"):
/// one copy of the last piece meets the loss goals at 1024 to 16384 nodes
/// of 32 ranks, costing one datagram per message.
pub const DEFAULT_TAIL_REPEAT: usize = 1;

/// The least interval before a leaf repeats a NACK: many LAN round trips,
/// and above most scheduling delays of a loaded node's ranks (at 400 us,
/// 6 ranks on the shared 2-core machine repeated 2.75 NACKs per 64 KiB
/// bcast for nothing: the fabric's channel never loses), yet half the udp
/// reliable channel's 2 ms floor and a tenth of the collector's 10 ms,
/// which a lost NACK waited for before.
pub const DEFAULT_NACK_RETRY_FLOOR: Duration = Duration::from_millis(1);

/// How often a repeat timer that random loss defeats doubles, by default
/// (a leaf's NACK repeat under congestion control, i.e. over udp, and the
/// udp reliable channel's retransmission timer): twice, so a third
/// failure in a row waits 4x the base.
/// Doubling without a bound (up to a second) made a few losses in a row
/// cost a large part of a second on a loaded node (issue 36).
pub const DEFAULT_REPEAT_DOUBLINGS: u32 = 2;
/// The most doublings a repeat timer may be given: 2^16 times its base;
/// the NACK repeat's rule where congestion control does not run (its
/// doubling then stops at the RTO ceiling, as before issue 36).
pub const MAX_REPEAT_DOUBLINGS: u32 = 16;

/// `RmcastConfig::parity_percent` by default: at most a quarter of a block
/// (5 % loss at 3 receivers calls for 8 parity pieces per 47,
/// `repair::parity_plan`). Parity is sent only once the root has seen
/// loss, so a loss-free network carries none; over udp at 5 % loss it
/// took the 64 KiB bcast's mean from 4.4-5.5x its loss-free median to
/// 2.3-2.5x (docs/rmcast-tail.md, "Parity").
pub const DEFAULT_PARITY_PERCENT: u32 = 25;

/// Retransmission timeouts double while a receiver stays silent, up to this
/// many times the configured timeout.
pub(crate) const BACKOFF_LIMIT: u32 = 64;

impl Default for RmcastConfig {
    /// The paper's 64-slot window and ACK every 8 pieces, one UD MTU of
    /// payload per datagram, 4 KiB slots on shared memory, no co-roots (the
    /// caller picks them with `tuning::choose_co_roots`), and a timeout well
    /// above a node's scheduling noise.
    fn default() -> Self {
        RmcastConfig {
            window_slots: 64,
            slot_bytes: 4096,
            fragment_bytes: 4096,
            co_roots: 0,
            ack_interval: 8,
            timeout: Duration::from_millis(20),
            nack: true,
            nack_retry_floor: Some(DEFAULT_NACK_RETRY_FLOOR),
            nack_retry_doublings: MAX_REPEAT_DOUBLINGS,
            tail_repeat: DEFAULT_TAIL_REPEAT,
            parity_percent: DEFAULT_PARITY_PERCENT,
            parity_assumed_loss: 0.0,
            wait: WaitPolicy::default(),
            give_up_after: None,
            congestion: CongestionConfig::default(),
        }
    }
}

impl RmcastConfig {
    /// Says what is wrong with values read from the user, before any
    /// instance is built from them.
    pub fn validate(&self) -> Result<(), String> {
        for (name, value) in [
            ("window_slots", self.window_slots),
            ("slot_bytes", self.slot_bytes),
            ("fragment_bytes", self.fragment_bytes),
            ("ack_interval", self.ack_interval),
        ] {
            if value == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        if self.parity_percent > 100 {
            return Err(format!("parity is at most 100 % of a block, not {} %", self.parity_percent));
        }
        if !(0.0..=1.0).contains(&self.parity_assumed_loss) {
            return Err(format!("the assumed loss must be a share between 0 and 1, not {}", self.parity_assumed_loss));
        }
        if self.timeout.is_zero() {
            return Err("the retransmission timeout must be positive".to_string());
        }
        if self.nack_retry_floor.is_some_and(|floor| floor.is_zero()) {
            return Err("the NACK retry floor must be positive (None turns repeats off)".to_string());
        }
        if let Some(doublings) = Some(self.nack_retry_doublings).into_iter().chain(self.congestion.nack_retry_doublings).find(|&d| d > MAX_REPEAT_DOUBLINGS) {
            return Err(format!("a NACK repeat may double at most {MAX_REPEAT_DOUBLINGS} times, not {doublings}"));
        }
        self.congestion.validate()
    }

    /// The configuration the datagram flavour runs with: the window and
    /// ACK interval of `congestion` replace the general ones where
    /// congestion control runs.
    pub(crate) fn for_datagrams(&self, congestion: bool) -> RmcastConfig {
        if !congestion {
            return *self;
        }
        RmcastConfig {
            window_slots: self.congestion.window_slots.unwrap_or(self.window_slots),
            ack_interval: self.congestion.ack_interval.unwrap_or(self.ack_interval),
            ..*self
        }
    }

    /// The M actually used.
    pub fn effective_ack_interval(&self) -> u64 {
        self.ack_interval.min(self.window_slots) as u64
    }

    pub(crate) fn window(&self) -> u64 {
        self.window_slots as u64
    }

    /// How long a delivery may wait for its ACK before one is sent anyway.
    pub fn ack_delay(&self) -> Duration {
        self.timeout / 4
    }

    /// The least RTO congestion control uses: the configured floor, but at
    /// least twice the explicit-ACK delay, since a leaf acknowledges a
    /// message's tail only after that delay and anything shorter would time
    /// out at every tail.
    pub(crate) fn effective_rto_floor(&self) -> Duration {
        self.congestion.rto_floor.max(self.ack_delay() * 2)
    }

    /// The largest RTO: the configured ceiling, raised to the effective
    /// floor if a long `timeout` put that above it.
    pub(crate) fn effective_rto_ceiling(&self) -> Duration {
        self.congestion.rto_ceiling.max(self.effective_rto_floor())
    }

    /// Co-roots actually used among `size` ranks.
    pub(crate) fn co_roots_for(&self, size: usize) -> usize {
        self.co_roots.min(size.saturating_sub(1))
    }

    /// How every wait of the multicast waits: the policy, and whichever
    /// comes first of the fault timeout and the tighter limit a test sets.
    pub(crate) fn waiter(&self) -> Waiter {
        Waiter::new(&self.wait).giving_up_by(self.give_up_after)
    }

    /// How long a wait of the multicast lasts before it fails, the same
    /// limit as `waiter`'s: for a resumable run's stall clock.
    pub fn stall_limit(&self) -> Option<Duration> {
        match (self.wait.fault_timeout, self.give_up_after) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_counts_and_timeouts_are_refused_and_m_never_exceeds_the_window() {
        assert!(RmcastConfig::default().validate().is_ok());
        let zero_window = RmcastConfig { window_slots: 0, ..RmcastConfig::default() };
        assert!(zero_window.validate().unwrap_err().contains("window_slots"));
        let zero_m = RmcastConfig { ack_interval: 0, ..RmcastConfig::default() };
        assert!(zero_m.validate().unwrap_err().contains("ack_interval"));
        let no_timeout = RmcastConfig { timeout: Duration::ZERO, ..RmcastConfig::default() };
        assert!(no_timeout.validate().unwrap_err().contains("timeout"));

        let narrow = RmcastConfig { window_slots: 3, ack_interval: 16, ..RmcastConfig::default() };
        assert_eq!(narrow.effective_ack_interval(), 3);
        assert_eq!(RmcastConfig::default().effective_ack_interval(), 8);
        let many = RmcastConfig { co_roots: 10, ..RmcastConfig::default() };
        assert_eq!((many.co_roots_for(4), many.co_roots_for(40), many.co_roots_for(1)), (3, 10, 0));
    }

    #[test]
    fn the_window_under_congestion_control_replaces_the_general_one_only_there() {
        let config = RmcastConfig {
            congestion: CongestionConfig { window_slots: Some(1024), ack_interval: Some(32), ..CongestionConfig::default() },
            ..RmcastConfig::default()
        };
        let udp = config.for_datagrams(true);
        assert_eq!((udp.window_slots, udp.effective_ack_interval()), (1024, 32));
        let verbs = config.for_datagrams(false);
        assert_eq!((verbs.window_slots, verbs.effective_ack_interval()), (64, 8));
        let unset = RmcastConfig::default().for_datagrams(true);
        assert_eq!((unset.window_slots, unset.effective_ack_interval()), (64, 8), "None keeps the general values");
        let zero = CongestionConfig { window_slots: Some(0), ..CongestionConfig::default() };
        assert!(RmcastConfig { congestion: zero, ..RmcastConfig::default() }.validate().unwrap_err().contains("window"));
    }

    #[test]
    fn congestion_settings_are_checked_and_auto_means_udp_only() {
        let with = |congestion: CongestionConfig| RmcastConfig { congestion, ..RmcastConfig::default() }.validate();
        let base = CongestionConfig::default();
        assert!(with(CongestionConfig { cwnd_initial: 0, ..base }).unwrap_err().contains("congestion window"));
        assert!(with(CongestionConfig { ssthresh_initial: 0, ..base }).unwrap_err().contains("slow-start"));
        assert!(with(CongestionConfig { rto_floor: Duration::ZERO, ..base }).unwrap_err().contains("floor"));
        assert!(with(CongestionConfig { loss_tolerance_percent: 100, ..base }).is_ok());
        assert!(with(CongestionConfig { loss_tolerance_percent: 101, ..base }).unwrap_err().contains("loss tolerance"));
        let inverted = CongestionConfig { rto_floor: Duration::from_millis(5), rto_ceiling: Duration::from_millis(4), ..base };
        assert!(with(inverted).unwrap_err().contains("ceiling"));
        // Anything longer is no timeout, and a huge one overflowed timer arithmetic.
        assert!(with(CongestionConfig { rto_ceiling: MAX_RTO_CEILING, ..base }).is_ok());
        let huge = CongestionConfig { rto_ceiling: Duration::from_secs(u64::MAX / 4), ..base };
        assert!(with(huge).unwrap_err().contains("above"));
        assert!(base.enabled_for("udp") && !base.enabled_for("verbs") && !base.enabled_for("fabric"));
        assert!(CongestionConfig { mode: CongestionMode::On, ..base }.enabled_for("verbs"));
        assert!(!CongestionConfig { mode: CongestionMode::Off, ..base }.enabled_for("udp"));
    }
}
