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
//! acker choice over the same words; a leaf's timeout resends only M
//! pieces and shrinks the window only once the member's next words show
//! the silence was a loss (`Suspect`). Without it, the timeout is the
//! configured one and bursts are uncapped, as before.

use std::time::{Duration, Instant};

use super::Room;
use super::ring::PieceRing;
use crate::rmcast::config::{BACKOFF_LIMIT, RmcastConfig};
use crate::rmcast::congestion::Control;
use crate::rmcast::groups::Member;
use crate::rmcast::stats::{RmcastStats, micros};
use crate::transport::{ReliableChannel, TransportError, Windows};

struct Watched {
    member: Member,
    word: usize,
    acked: u64,
    changed_at: Instant,
    timeout: Duration,
    /// Congestion control, leaf members: a timeout whose verdict is open.
    suspect: Option<Suspect>,
}

/// A leaf member's timer ran out and pieces up to `resent_to` went to it
/// again. Over udp a receiver acknowledges only from inside MPI, so its
/// silence is as likely a rank busy outside MPI (fbcast hashing and
/// writing a chunk) as a loss, and only what follows tells them apart: a
/// word that moves past `resent_to` had the originals (the silence was
/// spurious, the window stays); one that came back (`heard_since`) but
/// still stands within `resent_to` at the next expiry got only the
/// repairs: a loss, and the window collapses then, as TCP's does.
#[derive(Clone, Copy, Debug)]
struct Suspect {
    resent_to: u64,
    heard_since: bool,
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
            .map(|member| Watched { word: word_of(member.position), member, acked: 0, changed_at: now, timeout, suspect: None })
            .collect::<Vec<_>>();
        let floor = if watched.is_empty() { u64::MAX } else { 0 };
        let control = (congestion && !watched.is_empty()).then(|| Box::new(Control::new(config, watched.len())));
        let backoff_ceiling = if control.is_some() { config.effective_rto_ceiling().max(timeout) } else { timeout.saturating_mul(BACKOFF_LIMIT) };
        Collector { watched, floor, timeout, backoff_ceiling, control }
    }

    pub(crate) fn floor(&self) -> u64 {
        self.floor
    }

    /// Members that are leaves: those that NACK to this collector.
    pub(crate) fn leaf_members(&self) -> usize {
        self.watched.iter().filter(|watched| !watched.member.is_co_root).count()
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
    pub(crate) fn poll_acks<T: Windows + ReliableChannel + ?Sized>(&mut self, transport: &T, ring: &PieceRing, now: Instant, stats: &mut RmcastStats) {
        let mut floor = u64::MAX;
        let mut fresh_timeout = self.fresh_timeout();
        for (index, watched) in self.watched.iter_mut().enumerate() {
            let acked = transport.local_flag(watched.word);
            if acked > watched.acked {
                if let Some(control) = &mut self.control {
                    if let Some(rtt) = round_trip_sample(watched, acked, ring, now) {
                        control.rtt.sample(rtt);
                        stats.rtt_samples += 1;
                        fresh_timeout = control.rtt.rto();
                    }
                    control.acker.on_acknowledged(index, acked - watched.acked);
                }
                if let Some(suspect) = &mut watched.suspect {
                    if acked > suspect.resent_to {
                        watched.suspect = None;
                    } else {
                        suspect.heard_since = true;
                    }
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
            if watched.acked >= held.high {
                // Caught up with everything sent: whatever the silence was, it is over.
                watched.suspect = None;
                continue;
            }
            if watched.member.is_co_root && self.control.is_none() {
                continue;
            }
            if !overdue(watched, held.ring, now) {
                continue;
            }
            let burst_end = match &mut self.control {
                None => held.high,
                // A co-root's silence: its subgroup is being repaired.
                Some(control) if watched.member.is_co_root => {
                    control.on_loss(index, watched.acked, held.high, false, now, stats);
                    held.high
                }
                Some(control) => {
                    if watched.suspect.is_some_and(|suspect| suspect.heard_since && watched.acked <= suspect.resent_to) {
                        control.on_loss(index, watched.acked, held.high, true, now, stats);
                    }
                    // A probe of M pieces, not the window: the member may only be away.
                    let burst_end = held.high.min(watched.acked.saturating_add(control.window.least()));
                    watched.suspect = Some(Suspect { resent_to: burst_end, heard_since: false });
                    burst_end
                }
            };
            if !watched.member.is_co_root {
                stats.timeout_resends += 1;
                stats.longest_timeout_resend_micros = stats.longest_timeout_resend_micros.max(micros(watched.timeout));
                resend(transport, held.ring, watched.member.rank, watched.acked..burst_end, Room::StopWithout, stats)?;
            }
            watched.changed_at = now;
            watched.timeout = watched.timeout.saturating_mul(2).min(self.backoff_ceiling);
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
        // The asker is inside MPI, taking in what the channel carries.
        resend(transport, held.ring, asker, wanted.start..wanted.end.min(held.high), Room::WaitFor, stats)?;
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

/// Whether `watched`'s timer has run out: its word stood still for its
/// timeout, counted from the later of its last advance and the sending of
/// the first piece it lacks. Never, if that moment is beyond the clock.
fn overdue(watched: &Watched, ring: &PieceRing, now: Instant) -> bool {
    let first_missing_since = ring.stamp(watched.acked).unwrap_or(watched.changed_at);
    watched.changed_at.max(first_missing_since).checked_add(watched.timeout).is_some_and(|due| now >= due)
}

/// The round trip `watched`'s word, advancing to `acked`, times: from the
/// stamp of the newest piece it covers. None when that would mislead:
/// * Karn's rule: a piece the advance covers was resent (a repair of
///   piece 5 lets the word jump past 6..12, and their sample would include
///   the recovery);
/// * the word was overdue: it stood still past its timeout, so the sample
///   spans a stall (a member or this collector away from progress).
fn round_trip_sample(watched: &Watched, acked: u64, ring: &PieceRing, now: Instant) -> Option<Duration> {
    let stamp = ring.stamp(acked - 1)?;
    if ring.any_resent(watched.acked..acked) || overdue(watched, ring, now) {
        return None;
    }
    Some(now.saturating_duration_since(stamp))
}

fn resend<T: Windows + ReliableChannel + ?Sized>(
    transport: &T,
    ring: &PieceRing,
    to: usize,
    pieces: std::ops::Range<u64>,
    how: Room,
    stats: &mut RmcastStats,
) -> Result<(), TransportError> {
    // A NACK or a word may name any range; only the last W can be held.
    let pieces = ring.holdable(pieces);
    for seq in pieces.clone() {
        // Held unless the member already moved past it (a stale NACK).
        if let Some(frame) = ring.frame(seq) {
            if how == Room::StopWithout && !transport.has_room_for(to, frame.len()) {
                stats.resends_held_back += pieces.end - seq;
                break;
            }
            transport.send_reliable(to, frame)?;
            ring.mark_resent(seq);
            stats.retransmissions += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{Fabric, FabricConfig};
    use crate::rmcast::config::{CongestionConfig, CongestionMode};
    use crate::rmcast::groups::Groups;
    use crate::rmcast::region::DatagramRegion;
    use crate::rmcast::region_len;

    const MS: Duration = Duration::from_millis(1);

    /// Pieces 0..12 sent at once; the member's word reaches 5 after 1 ms
    /// (SRTT 1 ms, RTTVAR 0.5 ms: RTO 3 ms). Piece 5 is lost, NACKed 20 ms
    /// later and resent, and the word jumps to 12 at 21 ms. Piece 11 was
    /// never resent, but a sample from it (21 ms) would time the recovery:
    /// it must be skipped, leaving the RTO at 3 ms.
    #[test]
    fn a_word_jumping_past_a_repaired_piece_times_no_round_trip() {
        let config = RmcastConfig {
            // ack_delay 1 ms: the RTO's floor is 2 ms.
            timeout: 4 * MS,
            congestion: CongestionConfig { mode: CongestionMode::On, rto_floor: Duration::from_micros(1), ..CongestionConfig::default() },
            ..RmcastConfig::default()
        };
        let endpoints = Fabric::new(2, region_len(2, &config), FabricConfig::default());
        let (root, member) = (&endpoints[0], &endpoints[1]);
        let region = DatagramRegion::new(0, 2, &config);
        let start = Instant::now();
        let mut collector = Collector::new(Groups::new(0, 2, 0).members(0), |position| region.ack_word(0, position), &config, true, start);
        let mut ring = PieceRing::new(config.window(), start);
        for seq in 0..12 {
            ring.store(seq, start, |frame| frame.extend_from_slice(&seq.to_le_bytes()));
        }
        let mut stats = RmcastStats::default();
        let word = region.ack_word(0, 0);
        root.set_local_flag(word, 5);
        collector.poll_acks(root, &ring, start + MS, &mut stats);
        assert_eq!((stats.rtt_samples, collector.congestion_gauges().map(|(_, rto)| rto)), (1, Some(3 * MS)));

        let held = Held { ring: &ring, high: 12 };
        assert!(collector.serve_nack(root, held, 1, 5..6, start + 20 * MS, &mut stats).expect("resend"));
        assert_eq!(stats.retransmissions, 1);
        let mut resent = Vec::new();
        assert_eq!(member.poll_reliable(&mut resent), Some(0));
        assert_eq!(resent, 5u64.to_le_bytes());

        root.set_local_flag(word, 12);
        collector.poll_acks(root, &ring, start + 21 * MS, &mut stats);
        assert_eq!(collector.floor(), 12);
        assert_eq!((stats.rtt_samples, collector.congestion_gauges().map(|(_, rto)| rto)), (1, Some(3 * MS)), "the recovery was timed");
    }

    /// A timeout near Duration's limit (validate bounds only the RTO
    /// ceiling) once overflowed the backoff (timeout x 64, or x 2) and the
    /// deadline (changed_at + timeout), which panic in std; now a member
    /// is simply never due.
    #[test]
    fn a_huge_timeout_never_comes_due_and_does_not_overflow() {
        let huge = Duration::from_secs(u64::MAX / 4);
        for congestion in [false, true] {
            let config = RmcastConfig { timeout: huge, ..RmcastConfig::default() };
            let endpoints = Fabric::new(2, region_len(2, &config), FabricConfig::default());
            let region = DatagramRegion::new(0, 2, &config);
            let start = Instant::now();
            let mut collector = Collector::new(Groups::new(0, 2, 0).members(0), |position| region.ack_word(0, position), &config, congestion, start);
            let mut ring = PieceRing::new(config.window(), start);
            ring.store(0, start, |frame| frame.push(0));
            let mut stats = RmcastStats::default();
            collector.poll_acks(&endpoints[0], &ring, start + MS, &mut stats);
            collector.retransmit_due(&endpoints[0], Held { ring: &ring, high: 1 }, start + Duration::from_secs(3600), &mut stats).expect("no resend");
            assert_eq!(stats.retransmissions, 0, "congestion {congestion}");
        }
    }
}
