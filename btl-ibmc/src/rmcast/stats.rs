//! What one rank's reliable multicast has done, for verbose reports and for
//! tests that must see the loss paths exercised.

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RmcastStats {
    /// Messages this rank sent as a root, and received from other roots.
    pub messages_sent: u64,
    pub messages_received: u64,
    /// Pieces this rank sent as a root.
    pub pieces_sent: u64,
    /// Pieces this rank delivered to its caller.
    pub pieces_delivered: u64,
    /// Pieces resent over the reliable channel after a timeout or a NACK.
    pub retransmissions: u64,
    /// Pieces a co-root passed on along the binomial tree.
    pub forwarded: u64,
    pub nacks_sent: u64,
    pub nacks_served: u64,
    /// Copies of pieces that arrived again and were dropped.
    pub duplicates_dropped: u64,
    /// Times a root found its window full and had to wait for ACKs.
    pub window_full_stalls: u64,
    /// Pieces that arrived beyond the receive window. Flow control makes
    /// this impossible; a non-zero count is a protocol bug.
    pub overruns: u64,
    /// Frames dropped unread: without this communicator's nonce, from a
    /// rank that does not carry that root's pieces to this one, truncated
    /// or garbage, or a NACK that did not come over the reliable channel
    /// from a member. Forged or foreign traffic lands here; it is never an
    /// error.
    pub frames_rejected: u64,
    /// ACK words written, of which explicit ones after a quiet spell.
    pub acks_published: u64,
    pub explicit_acks: u64,
    /// Congestion control (zero without it). The root's congestion window
    /// in pieces and its retransmission timeout, as of the last progress:
    /// gauges, which `sum` takes the largest of.
    pub cwnd: u64,
    pub rto_micros: u64,
    /// Loss reports that halved a collector's window, and timeouts that
    /// collapsed it.
    pub loss_events: u64,
    pub timeout_collapses: u64,
    /// Loss reports within the tolerated loss share (random loss, not
    /// congestion), which left the window alone.
    pub losses_tolerated: u64,
    /// Times a collector's acker changed after its first choice.
    pub acker_switches: u64,
    /// Round-trip samples a collector took (Karn's rule and stalls skip
    /// some).
    pub rtt_samples: u64,
    /// NACKs a leaf did not send because the gap filled while it waited.
    pub nacks_suppressed: u64,
    /// First NACK decisions (a split NACK counts once), and the waits
    /// before them from the gap's discovery, summed in percent of the
    /// leaf's SRTT estimate.
    pub nack_first_asks: u64,
    pub nack_wait_rtt_percent: u64,
    /// NACK messages (of `nacks_sent`) that repeated an earlier NACK
    /// whose pieces had not come within the leaf's RTO.
    pub nacks_repeated: u64,
    /// Bursts a collector resent because a member's word stood still for
    /// its timeout.
    pub timeout_resends: u64,
    /// Pieces a timeout-driven burst left unsent because the reliable
    /// channel to the member was full: the member is away from MPI and the
    /// channel still carries earlier copies, which it delivers itself.
    pub resends_held_back: u64,
    /// NACK repeats a leaf left out because the reliable channel to its
    /// collector was full (the collector away from MPI).
    pub nack_repeats_held_back: u64,
    /// Gauges (`sum` takes the largest), in microseconds: the longest a
    /// leaf waited before repeating a NACK, and the longest (backed-off)
    /// timeout a collector's timer ran before a burst. Issue 36: which
    /// timer sets a lossy bcast's slow calls.
    pub longest_nack_repeat_micros: u64,
    pub longest_timeout_resend_micros: u64,
    /// NACKed pieces the root multicast once more.
    pub repairs_multicast: u64,
    /// Second multicasts of a message's last pieces (`RmcastConfig::tail_repeat`).
    pub tail_repeats: u64,
    /// Forward error correction (`repair::parity_plan`): parity pieces a
    /// root multicast, data pieces a receiver rebuilt from parity, blocks
    /// whose parity could not rebuild them (NACKed instead), of which
    /// refused by the CRC check, and parity frames refused outright.
    pub parity_sent: u64,
    pub pieces_rebuilt: u64,
    pub parity_blocks_given_up: u64,
    pub parity_blocks_corrupt: u64,
    pub parity_refused: u64,
}

/// `duration` in whole microseconds, saturating, for the gauges above.
pub(crate) fn micros(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

impl RmcastStats {
    /// The counters of several ranks added up.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a RmcastStats>) -> RmcastStats {
        all.into_iter().fold(RmcastStats::default(), |total, one| RmcastStats {
            messages_sent: total.messages_sent + one.messages_sent,
            messages_received: total.messages_received + one.messages_received,
            pieces_sent: total.pieces_sent + one.pieces_sent,
            pieces_delivered: total.pieces_delivered + one.pieces_delivered,
            retransmissions: total.retransmissions + one.retransmissions,
            forwarded: total.forwarded + one.forwarded,
            nacks_sent: total.nacks_sent + one.nacks_sent,
            nacks_served: total.nacks_served + one.nacks_served,
            duplicates_dropped: total.duplicates_dropped + one.duplicates_dropped,
            window_full_stalls: total.window_full_stalls + one.window_full_stalls,
            overruns: total.overruns + one.overruns,
            frames_rejected: total.frames_rejected + one.frames_rejected,
            acks_published: total.acks_published + one.acks_published,
            explicit_acks: total.explicit_acks + one.explicit_acks,
            cwnd: total.cwnd.max(one.cwnd),
            rto_micros: total.rto_micros.max(one.rto_micros),
            loss_events: total.loss_events + one.loss_events,
            timeout_collapses: total.timeout_collapses + one.timeout_collapses,
            losses_tolerated: total.losses_tolerated + one.losses_tolerated,
            acker_switches: total.acker_switches + one.acker_switches,
            rtt_samples: total.rtt_samples + one.rtt_samples,
            nacks_suppressed: total.nacks_suppressed + one.nacks_suppressed,
            nack_first_asks: total.nack_first_asks + one.nack_first_asks,
            nack_wait_rtt_percent: total.nack_wait_rtt_percent + one.nack_wait_rtt_percent,
            nacks_repeated: total.nacks_repeated + one.nacks_repeated,
            timeout_resends: total.timeout_resends + one.timeout_resends,
            resends_held_back: total.resends_held_back + one.resends_held_back,
            nack_repeats_held_back: total.nack_repeats_held_back + one.nack_repeats_held_back,
            longest_nack_repeat_micros: total.longest_nack_repeat_micros.max(one.longest_nack_repeat_micros),
            longest_timeout_resend_micros: total.longest_timeout_resend_micros.max(one.longest_timeout_resend_micros),
            repairs_multicast: total.repairs_multicast + one.repairs_multicast,
            tail_repeats: total.tail_repeats + one.tail_repeats,
            parity_sent: total.parity_sent + one.parity_sent,
            pieces_rebuilt: total.pieces_rebuilt + one.pieces_rebuilt,
            parity_blocks_given_up: total.parity_blocks_given_up + one.parity_blocks_given_up,
            parity_blocks_corrupt: total.parity_blocks_corrupt + one.parity_blocks_corrupt,
            parity_refused: total.parity_refused + one.parity_refused,
        })
    }
}
