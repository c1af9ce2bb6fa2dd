//! The root's side: copy each piece into the window's next slot, multicast
//! it, hand it to the first co-roots of the binomial tree, and keep it
//! until the whole communicator has room past it.
//!
//! Credit rule: piece s may be sent only when s < floor + W, where floor
//! is the least word among the root's members (its leaves' delivered
//! counts and its co-roots' subgroup counts, see `receiver`). Each word
//! bounds its writer's slots from below, so every receiver still has a
//! free slot for s: nothing sent can overrun a receiver. Congestion
//! control may hold s back further (s < the acker's count + cwnd), never
//! let it go earlier. Parity pieces (`parity`) take no sequence number
//! and no slot: receivers keep them outside their window of pieces, so
//! they need no credit.
//!
//! The root's loss estimate (`repair::LossEstimate`), which sets the
//! parity, counts the pieces its leaf members NACK per piece sent to
//! them; a NACK of a protected block adds the block's parity count as
//! well, since that member lost more than the parity.

use std::time::Instant;

use super::collector::{Collector, Held};
use super::ring::PieceRing;
use crate::rmcast::config::RmcastConfig;
use crate::rmcast::repair::{LossEstimate, ParityPlan, parity_plan};
use crate::rmcast::groups::Groups;
use crate::rmcast::region::DatagramRegion;
use crate::rmcast::stats::RmcastStats;
use crate::rmcast::wire::{PieceHeader, Protection, encode_protected_piece, protection_of};
use super::parity::encode_block;
use crate::transport::{Datagrams, ReliableChannel, TransportError, Windows};

pub(crate) struct Sender {
    me: usize,
    nonce: u64,
    window: u64,
    next_seq: u64,
    /// Pieces below this have been sent; those from it to `next_seq` are
    /// queued in the ring, waiting for `flush`.
    sent_below: u64,
    ring: PieceRing,
    collector: Collector,
    forward_to: Vec<usize>,
    /// Whether NACKed pieces are multicast once more (congestion control:
    /// members that lost them too then need not NACK).
    multicast_repairs: bool,
    /// Queued pieces to multicast a second time at the flush (`repair`).
    repeats: Vec<u64>,
    /// Parity frames to multicast at the flush, after the pieces.
    parity: Vec<Vec<u8>>,
    loss: LossEstimate,
    /// Since the last estimate: pieces sent, pieces reported lost.
    pieces_since_estimate: u64,
    lost_reported: u64,
    /// Parity pieces per block of the last message.
    parity_in_force: u64,
}

impl Sender {
    pub(crate) fn new(me: usize, size: usize, nonce: u64, config: &RmcastConfig, congestion: bool, region: &DatagramRegion, now: Instant) -> Self {
        let groups = Groups::new(me, size, config.co_roots_for(size));
        let collector = Collector::new(groups.members(me), |position| region.ack_word(me, position), config, congestion, now);
        Sender {
            me,
            nonce,
            window: config.window(),
            next_seq: 0,
            sent_below: 0,
            ring: PieceRing::new(config.window(), now),
            collector,
            forward_to: groups.forward_to(me),
            multicast_repairs: congestion,
            repeats: Vec::new(),
            parity: Vec::new(),
            loss: LossEstimate::default(),
            pieces_since_estimate: 0,
            lost_reported: 0,
            parity_in_force: 0,
        }
    }

    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    pub(crate) fn has_credit(&self) -> bool {
        self.next_seq < self.collector.floor().saturating_add(self.window) && self.next_seq < self.collector.send_limit()
    }

    /// The congestion window and RTO, when congestion control runs.
    pub(crate) fn congestion_gauges(&self) -> Option<(u64, std::time::Duration)> {
        self.collector.congestion_gauges()
    }

    /// Puts the next piece in the window; it goes out with the next
    /// `flush`, which must come before anything else (a wait, a progress)
    /// touches this stream. The caller has checked `has_credit`;
    /// `repeat`: the flush multicasts it twice (`repair::repeated`).
    /// `protection`: its block's parity (`repair::ParityPlan`), named in
    /// the frame.
    pub(crate) fn queue(&mut self, message_len: usize, offset: usize, payload: &[u8], repeat: bool, protection: Protection, now: Instant) {
        debug_assert!(self.has_credit(), "piece {} sent without credit", self.next_seq);
        let header = PieceHeader { root: self.me, nonce: self.nonce, seq: self.next_seq, message_len: message_len as u64, offset: offset as u64 };
        self.ring.store(self.next_seq, now, |out| encode_protected_piece(header, protection, payload, out));
        if repeat {
            self.repeats.push(self.next_seq);
        }
        self.next_seq += 1;
    }

    /// Queues the parity of the block just queued: `pieces`, the last
    /// queued, are pieces `first_piece..` of a message of `message_len`.
    pub(crate) fn queue_parity(&mut self, protection: Protection, first_piece: u32, message_len: usize, pieces: &[&[u8]], piece_bytes: usize) -> Result<(), TransportError> {
        let first_seq = self.next_seq - pieces.len() as u64;
        encode_block(self.me, self.nonce, protection, first_seq, first_piece, message_len as u64, pieces, piece_bytes, &mut self.parity)
            .map_err(TransportError::Failed)
    }

    /// The parity for the next message, of `pieces`, to `receivers`, at
    /// most `most_percent` % of a block; first takes the NACKs since the
    /// last message into the loss estimate.
    pub(crate) fn plan_parity(&mut self, pieces: usize, receivers: usize, most_percent: u32, assumed_loss: f64) -> ParityPlan {
        let nackers = self.collector.leaf_members() as u64;
        self.loss.observe(self.pieces_since_estimate * nackers, self.lost_reported);
        self.pieces_since_estimate = pieces as u64;
        self.lost_reported = 0;
        let plan = parity_plan(pieces, self.loss.rate().max(assumed_loss), receivers, most_percent);
        self.parity_in_force = plan.parity as u64;
        plan
    }

    /// Pieces queued and not yet sent.
    pub(crate) fn queued(&self) -> u64 {
        self.next_seq - self.sent_below
    }

    /// Multicasts every queued piece, as one batch (which a transport may
    /// hand to the network at once), hands each to the first co-roots
    /// of the binomial tree, then multicasts the repeated ones again: the
    /// forwards space a copy from its original, so that a burst of loss
    /// takes one of them, not both.
    pub(crate) fn flush<T: Datagrams + ReliableChannel + ?Sized>(&mut self, transport: &T, stats: &mut RmcastStats) -> Result<(), TransportError> {
        let queued = self.sent_below..self.next_seq;
        if queued.is_empty() {
            return Ok(());
        }
        let frames: Vec<&[u8]> = queued.clone().filter_map(|seq| self.ring.frame(seq)).collect();
        debug_assert_eq!(frames.len() as u64, queued.end - queued.start, "a queued piece left the window");
        transport.multicast_batch(&frames)?;
        for frame in &frames {
            for &co_root in &self.forward_to {
                transport.send_reliable(co_root, frame)?;
                stats.forwarded += 1;
            }
        }
        stats.pieces_sent += frames.len() as u64;
        self.sent_below = queued.end;
        if !self.parity.is_empty() {
            let parity: Vec<&[u8]> = self.parity.iter().map(Vec::as_slice).collect();
            transport.multicast_batch(&parity)?;
            stats.parity_sent += parity.len() as u64;
            self.parity.clear();
        }
        for seq in self.repeats.drain(..) {
            if let Some(frame) = self.ring.frame(seq) {
                transport.multicast(frame)?;
                stats.tail_repeats += 1;
            }
        }
        Ok(())
    }

    /// Reads the ACK words and resends what has timed out.
    pub(crate) fn tick<T: Windows + ReliableChannel + ?Sized>(&mut self, transport: &T, now: Instant, stats: &mut RmcastStats) -> Result<(), TransportError> {
        self.collector.poll_acks(transport, &self.ring, now, stats);
        self.collector.retransmit_due(transport, Held { ring: &self.ring, high: self.next_seq }, now, stats)
    }

    pub(crate) fn serve_nack<T: Windows + Datagrams + ReliableChannel + ?Sized>(
        &mut self,
        transport: &T,
        asker: usize,
        wanted: std::ops::Range<u64>,
        now: Instant,
        stats: &mut RmcastStats,
    ) -> Result<bool, TransportError> {
        let repairs = self.ring.holdable(wanted.start..wanted.end.min(self.next_seq));
        let resent_before = stats.retransmissions;
        if !self.collector.serve_nack(transport, Held { ring: &self.ring, high: self.next_seq }, asker, wanted, now, stats)? {
            return Ok(false);
        }
        let resent = stats.retransmissions - resent_before;
        let protected = self.parity_in_force > 0 && self.ring.frame(repairs.start).is_some_and(|frame| protection_of(frame).is_some());
        self.lost_reported += resent + if protected && resent > 0 { self.parity_in_force } else { 0 };
        if self.multicast_repairs {
            for seq in repairs {
                if self.ring.first_multicast_again(seq)
                    && let Some(frame) = self.ring.frame(seq)
                {
                    transport.multicast(frame)?;
                    stats.repairs_multicast += 1;
                }
            }
        }
        Ok(true)
    }

    /// Every member has acknowledged every piece sent.
    pub(crate) fn idle(&self) -> bool {
        self.collector.floor() >= self.next_seq
    }

    /// Who has not acknowledged every piece sent, for a drain that stalls.
    pub(crate) fn describe_unacknowledged(&self) -> String {
        format!("root {}: {} piece(s) sent, members below: {:?} (rank, count)", self.me, self.next_seq, self.collector.lagging(self.next_seq))
    }

    pub(crate) fn describe_full_window(&self) -> String {
        let needed = (self.next_seq + 1).saturating_sub(self.window);
        format!(
            "room in the window of root {} for piece {} (W = {}); members below {needed}: {:?} (rank, count)",
            self.me,
            self.next_seq,
            self.window,
            self.collector.lagging(needed)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{Fabric, FabricConfig};
    use crate::rmcast::config::{CongestionConfig, CongestionMode};
    use crate::rmcast::region_len;

    /// Issue 33, item 4: a NACK for [0, 2^64) after 2^36 pieces (the
    /// counters are set there, not counted up) answers with the W pieces
    /// held, and looks at no more slots than a few times W: before, it
    /// walked all 2^36 sequence numbers, twice.
    #[test]
    fn a_nack_for_every_piece_ever_sent_costs_the_window_not_the_range() {
        const W: u64 = 64;
        let config = RmcastConfig {
            window_slots: W as usize,
            congestion: CongestionConfig { mode: CongestionMode::On, ..CongestionConfig::default() },
            ..RmcastConfig::default()
        };
        let endpoints = Fabric::new(2, region_len(2, &config), FabricConfig::default());
        let region = DatagramRegion::new(0, 2, &config);
        let now = Instant::now();
        let mut sender = Sender::new(0, 2, 7, &config, true, &region, now);
        assert_eq!(sender.window, W);
        let sent = 1u64 << 36;
        for seq in sent - W..sent {
            sender.ring.store(seq, now, |frame| frame.extend_from_slice(&seq.to_le_bytes()));
        }
        (sender.next_seq, sender.sent_below) = (sent, sent);
        let mut stats = RmcastStats::default();
        assert!(sender.serve_nack(&endpoints[0], 1, 0..u64::MAX, now, &mut stats).expect("served"));
        assert_eq!((stats.retransmissions, stats.repairs_multicast), (W, W), "{stats:?}");
        let lookups = sender.ring.lookups();
        println!("a NACK for [0, 2^64) after 2^36 pieces: {lookups} slot lookups, {stats:?}");
        assert!(lookups <= 4 * W, "{lookups} slot lookups for a window of {W}");
        let mut resent = Vec::new();
        let mut first = None;
        while endpoints[1].poll_reliable(&mut resent).is_some() {
            first.get_or_insert_with(|| resent.clone());
        }
        assert_eq!(first.as_deref(), Some(&(sent - W).to_le_bytes()[..]), "the oldest piece held goes first");
    }
}
