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

use std::time::{Duration, Instant};

use super::ring::PieceRing;
use crate::rmcast::config::BACKOFF_LIMIT;
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
    timeout: Duration,
}

impl Collector {
    /// `word_of(position)` is the member's ACK word in this rank's window.
    pub(crate) fn new(members: Vec<Member>, word_of: impl Fn(usize) -> usize, timeout: Duration, now: Instant) -> Self {
        let watched = members
            .into_iter()
            .map(|member| Watched { word: word_of(member.position), member, acked: 0, changed_at: now, timeout })
            .collect::<Vec<_>>();
        let floor = if watched.is_empty() { u64::MAX } else { 0 };
        Collector { watched, floor, timeout }
    }

    pub(crate) fn floor(&self) -> u64 {
        self.floor
    }

    /// Reads every member's word.
    pub(crate) fn poll_acks<T: Windows + ReliableChannel + ?Sized>(&mut self, transport: &T, now: Instant) {
        let mut floor = u64::MAX;
        for watched in &mut self.watched {
            let acked = transport.local_flag(watched.word);
            if acked > watched.acked {
                watched.acked = acked;
                watched.changed_at = now;
                watched.timeout = self.timeout;
            }
            floor = floor.min(watched.acked);
        }
        self.floor = floor;
    }

    /// Resends pieces [acked, high) to every leaf member whose timeout has
    /// run out.
    pub(crate) fn retransmit_due<T: Windows + ReliableChannel + ?Sized>(
        &mut self,
        transport: &T,
        held: Held<'_>,
        now: Instant,
        stats: &mut RmcastStats,
    ) -> Result<(), TransportError> {
        for watched in &mut self.watched {
            if watched.member.is_co_root || watched.acked >= held.high {
                continue;
            }
            let first_missing_since = held.ring.stamp(watched.acked).unwrap_or(watched.changed_at);
            if now < watched.changed_at.max(first_missing_since) + watched.timeout {
                continue;
            }
            resend(transport, held.ring, watched.member.rank, watched.acked..held.high, stats)?;
            watched.changed_at = now;
            watched.timeout = (watched.timeout * 2).min(self.timeout * BACKOFF_LIMIT);
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
        let Some(watched) = self.watched.iter_mut().find(|w| w.member.rank == asker && !w.member.is_co_root) else {
            return Ok(false);
        };
        stats.nacks_served += 1;
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
            stats.retransmissions += 1;
        }
    }
    Ok(())
}
