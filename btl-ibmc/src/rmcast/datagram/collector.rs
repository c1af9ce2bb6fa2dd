//! A collector's side of the ACKs: the root and every co-root watch one
//! word per subgroup member in their own window, and resend over the
//! reliable channel exactly what a silent member has not acknowledged.
//!
//! A member is due a retransmission when its word has stood still for its
//! current timeout, counted from the later of its last advance and the
//! moment the first piece it lacks was sent: a member that was quiet only
//! because nothing was sent is not punished for it. Each retransmission
//! to a member that stays silent doubles its timeout (a skewed member is
//! not flooded), and any advance restores it.
//!
//! With congestion control (`congestion`) the collector also runs a
//! window, an RTT estimate whose RTO replaces the fixed timeout, and the
//! acker choice over the same words; without it, the timeout is the
//! configured one and bursts are uncapped, as before.

use std::time::{Duration, Instant};

use super::ring::PieceRing;
use crate::rmcast::config::{BACKOFF_LIMIT, RmcastConfig};
use crate::rmcast::congestion::Control;
use crate::rmcast::groups::Member;
use crate::rmcast::stats::RmcastStats;
use crate::transport::{ReliableChannel, TransportError, Windows};

struct Watched {
    member: Member,
    word: usize,
    acked: u64,
    changed_at: Instant,
    timeout: Duration,
}

/// The pieces a collector can resend: those in `ring` below `high`.
#[derive(Clone, Copy)]
pub(crate) struct Held<'a> {
    pub(crate) ring: &'a PieceRing,
    pub(crate) high: u64,
}

pub(crate) struct Collector {
    watched: Vec<Watched>,
    /// The least count among the members' words; u64::MAX with no members.
    floor: u64,
    /// The fixed timeout, or the RTO before the first RTT sample.
    timeout: Duration,
    /// Where a silent member's doubling timeout stops.
    backoff_ceiling: Duration,
    /// Boxed: most collectors run without it, and the sender lives inline.
    control: Option<Box<Control>>,
}

impl Collector {
    /// `word_of(position)` is the member's ACK word in this rank's window;
    /// `congestion` whether this collector runs congestion control.
    pub(crate) fn new(members: Vec<Member>, word_of: impl Fn(usize) -> usize, config: &RmcastConfig, congestion: bool, now: Instant) -> Self {
        let timeout = config.timeout;
        let watched = members
            .into_iter()
            .map(|member| Watched { word: word_of(member.position), member, acked: 0, changed_at: now, timeout })
            .collect::<Vec<_>>();
        let floor = if watched.is_empty() { u64::MAX } else { 0 };
        let control = (congestion && !watched.is_empty()).then(|| Box::new(Control::new(config, watched.len())));
        let backoff_ceiling = if control.is_some() { config.congestion.rto_ceiling.max(timeout) } else { timeout * BACKOFF_LIMIT };
        Collector { watched, floor, timeout, backoff_ceiling, control }
    }

    pub(crate) fn floor(&self) -> u64 {
        self.floor
    }

    /// The highest piece count congestion control lets the root have sent.
    pub(crate) fn send_limit(&self) -> u64 {
        self.control.as_ref().map_or(u64::MAX, |control| control.send_limit())
    }

    /// The congestion window and the RTO, when congestion control runs.
    pub(crate) fn congestion_gauges(&self) -> Option<(u64, Duration)> {
        self.control.as_ref().map(|control| (control.window.cwnd(), control.rtt.rto()))
    }

    /// A member's timer after an advance: the RTO, or the fixed timeout.
    fn fresh_timeout(&self) -> Duration {
        self.control.as_ref().map_or(self.timeout, |control| control.rtt.rto())
    }

    /// Reads every member's word; `ring` holds what this collector sent
    /// (root) or received (co-root), stamped, for RTT samples.
    pub(crate) fn poll_acks<T: Windows + ReliableChannel + ?Sized>(&mut self, transport: &T, ring: &PieceRing, now: Instant) {
        let mut floor = u64::MAX;
        let mut fresh_timeout = self.fresh_timeout();
        for (index, watched) in self.watched.iter_mut().enumerate() {
            let acked = transport.local_flag(watched.word);
            if acked > watched.acked {
                if let Some(control) = &mut self.control {
                    // Karn: only a piece sent once times a round trip.
                    let newest = acked - 1;
                    if let (Some(stamp), false) = (ring.stamp(newest), ring.resent(newest)) {
                        control.rtt.sample(now.saturating_duration_since(stamp));
                        fresh_timeout = control.rtt.rto();
                    }
                    control.acker.on_acknowledged(index, acked - watched.acked);
                }
                watched.acked = acked;
                watched.changed_at = now;
                watched.timeout = fresh_timeout;
            }
            floor = floor.min(watched.acked);
        }
        self.floor = floor;
        if let Some(control) = &mut self.control {
            let watched = &self.watched;
            control.pace(|index| watched[index].acked, floor);
        }
    }

    /// Resends pieces [acked, high) to every leaf member whose timeout has
    /// run out. With congestion control, a burst is at most cwnd pieces,
    /// the silence is a loss report, and a co-root's silence (its subgroup
    /// is being repaired) is one too, without a resend.
    pub(crate) fn retransmit_due<T: Windows + ReliableChannel + ?Sized>(
        &mut self,
        transport: &T,
        held: Held<'_>,
        now: Instant,
        stats: &mut RmcastStats,
    ) -> Result<(), TransportError> {
        for (index, watched) in self.watched.iter_mut().enumerate() {
            if watched.acked >= held.high || (watched.member.is_co_root && self.control.is_none()) {
                continue;
            }
            let first_missing_since = held.ring.stamp(watched.acked).unwrap_or(watched.changed_at);
            if now < watched.changed_at.max(first_missing_since) + watched.timeout {
                continue;
            }
            let burst_end = match &mut self.control {
                None => held.high,
                Some(control) => {
                    control.on_loss(index, watched.acked, held.high, !watched.member.is_co_root, now, stats);
                    held.high.min(watched.acked.saturating_add(control.window.cwnd()))
                }
            };
            if !watched.member.is_co_root {
                resend(transport, held.ring, watched.member.rank, watched.acked..burst_end, stats)?;
            }
            watched.changed_at = now;
            watched.timeout = (watched.timeout * 2).min(self.backoff_ceiling);
        }
        Ok(())
    }

    /// Answers `asker`'s NACK for pieces `wanted` with those held. False
    /// if `asker` is not a leaf member.
    pub(crate) fn serve_nack<T: Windows + ReliableChannel + ?Sized>(
        &mut self,
        transport: &T,
        held: Held<'_>,
        asker: usize,
        wanted: std::ops::Range<u64>,
        now: Instant,
        stats: &mut RmcastStats,
    ) -> Result<bool, TransportError> {
        let Some((index, watched)) = self.watched.iter_mut().enumerate().find(|(_, w)| w.member.rank == asker && !w.member.is_co_root) else {
            return Ok(false);
        };
        stats.nacks_served += 1;
        if let Some(control) = &mut self.control {
            control.on_loss(index, wanted.start, held.high, false, now, stats);
        }
        resend(transport, held.ring, asker, wanted.start..wanted.end.min(held.high), stats)?;
        // What was just resent needs no timeout-driven copy right behind it.
        watched.changed_at = now;
        Ok(true)
    }

    /// Members whose word is below `count`, with their words, for stall
    /// warnings.
    pub(crate) fn lagging(&self, count: u64) -> Vec<(usize, u64)> {
        self.watched.iter().filter(|w| w.acked < count).map(|w| (w.member.rank, w.acked)).collect()
    }
}

fn resend<T: Windows + ReliableChannel + ?Sized>(
    transport: &T,
    ring: &PieceRing,
    to: usize,
    pieces: std::ops::Range<u64>,
    stats: &mut RmcastStats,
) -> Result<(), TransportError> {
    for seq in pieces {
        // Held unless the member already moved past it (a stale NACK).
        if let Some(frame) = ring.frame(seq) {
            transport.send_reliable(to, frame)?;
            ring.mark_resent(seq);
            stats.retransmissions += 1;
        }
    }
    Ok(())
}
