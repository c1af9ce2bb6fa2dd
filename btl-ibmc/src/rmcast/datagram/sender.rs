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
//! let it go earlier.

use std::time::Instant;

use super::collector::{Collector, Held};
use super::ring::PieceRing;
use crate::rmcast::config::RmcastConfig;
use crate::rmcast::groups::Groups;
use crate::rmcast::region::DatagramRegion;
use crate::rmcast::stats::RmcastStats;
use crate::rmcast::wire::{PieceHeader, encode_piece};
use crate::transport::{Datagrams, ReliableChannel, TransportError, Windows};

pub(crate) struct Sender {
    me: usize,
    nonce: u64,
    window: u64,
    next_seq: u64,
    ring: PieceRing,
    collector: Collector,
    forward_to: Vec<usize>,
    /// Whether NACKed pieces are multicast once more (congestion control:
    /// members that lost them too then need not NACK).
    multicast_repairs: bool,
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
            ring: PieceRing::new(config.window(), now),
            collector,
            forward_to: groups.forward_to(me),
            multicast_repairs: congestion,
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

    /// Sends the next piece; the caller has checked `has_credit`.
    pub(crate) fn send<T: Datagrams + ReliableChannel + ?Sized>(
        &mut self,
        transport: &T,
        message_len: usize,
        offset: usize,
        payload: &[u8],
        now: Instant,
        stats: &mut RmcastStats,
    ) -> Result<(), TransportError> {
        debug_assert!(self.has_credit(), "piece {} sent without credit", self.next_seq);
        let header = PieceHeader { root: self.me, nonce: self.nonce, seq: self.next_seq, message_len: message_len as u64, offset: offset as u64 };
        let frame = self.ring.store(self.next_seq, now, |out| encode_piece(header, payload, out));
        transport.multicast(frame)?;
        for &co_root in &self.forward_to {
            transport.send_reliable(co_root, frame)?;
            stats.forwarded += 1;
        }
        self.next_seq += 1;
        stats.pieces_sent += 1;
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
        let repairs = wanted.start..wanted.end.min(self.next_seq);
        if !self.collector.serve_nack(transport, Held { ring: &self.ring, high: self.next_seq }, asker, wanted, now, stats)? {
            return Ok(false);
        }
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
