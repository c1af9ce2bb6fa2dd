//! Setup's last step: proof that the group actually delivers. A
//! successful join only says that this host sent its IGMP report; a
//! network that drops multicast (many clouds), a switch snooping IGMP
//! without a querier, or the wrong interface would let setup succeed and
//! the first bcast wait until the fault timeout, or forever. So every
//! rank multicasts probe frames and listens on the group until it has
//! heard every other rank; the ranks then compare notes (`establish`) and
//! all refuse the transport if any rank missed any other.
//!
//! Every rank joined before the allgather that precedes this step, so a
//! probe sent now reaches every group socket, even one whose rank is
//! still on its way here. No other traffic can reach the group yet: a
//! rank leaves setup only after the verdict allgather that follows.
//!
//! A rank can reach the probe seconds after the others: the allgather
//! before it runs over Open MPI's own transport, and a TCP connection
//! across nodes whose SYN was lost waits 1 s, then 3 s, before it carries
//! anything. The others have given up listening by then, although the
//! late rank's probes will reach them. So the probe runs in rounds
//! (`Prober::round`) with a verdict allgather after each: what a rank heard
//! counts in every later round, and another round follows while the last
//! one heard more than those before it (`MOST_ROUNDS` at most). A network
//! that carries nothing between the ranks costs one round; one that
//! carries some pairs but not others, two.
//!
//! Every probe names its round under the seal, and a rank counts only
//! the current round's: one recorded earlier and sent again (or merely
//! late) proves nothing about the group now. Another communicator's
//! probes, or an earlier setup's, fail the seal (another key).
//!
//! A round ends whatever reaches the group: it takes at most
//! `DATAGRAMS_PER_PASS` datagrams between two looks at the clock, and at
//! most `most_datagrams_per_round` in all, far more than the ranks'
//! probes. A rank flooded past that before it heard every other gives
//! up the round as unreadable and still joins the verdict allgather, so
//! every rank refuses the transport alike (and falls back to the module
//! underneath) instead of waiting there for a rank stuck reading.

use std::time::{Duration, Instant};

use super::engine::{Wire, send_frame};
use super::frame::{self, Body, Refusal};
use super::socket::{Received, receive};
use super::source::{Origin, origin, unreadable_counter};
use super::stats::Counters;

/// Time between a rank's probes.
const PROBE_INTERVAL: Duration = Duration::from_millis(10);
/// Probes every rank sends however soon it hears the others: a peer
/// that has not heard this rank yet still has a few chances.
const LEAST_PROBES: usize = 5;
/// How long a rank listens for the others' probes in one round. A
/// healthy group answers within milliseconds; the margin is for ranks
/// that leave the previous allgather late on a loaded node.
pub(crate) const PROBE_PATIENCE: Duration = Duration::from_secs(2);

/// What a rank heard of the others' probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Heard {
    /// Ranks whose probe never arrived.
    pub(crate) missing: u32,
    /// The lowest of them (meaningless when none).
    pub(crate) first_missing: u32,
}

impl Heard {
    pub(crate) const BYTES: usize = 8;

    pub(crate) fn encode(self) -> [u8; Self::BYTES] {
        let mut bytes = [0u8; Self::BYTES];
        bytes[..4].copy_from_slice(&self.missing.to_le_bytes());
        bytes[4..].copy_from_slice(&self.first_missing.to_le_bytes());
        bytes
    }

    pub(crate) fn decode(bytes: &[u8]) -> Heard {
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
        Heard { missing: word(0), first_missing: word(4) }
    }
}

/// Datagrams a round takes from the group before it looks at the clock
/// and sends the probe it owes again.
const DATAGRAMS_PER_PASS: usize = 64;

/// Datagrams one round takes in all: four times what `size` ranks'
/// probes could be (one per `PROBE_INTERVAL` each, over `PROBE_PATIENCE`),
/// and never fewer than a few thousand, so only a flood reaches it.
pub(crate) fn most_datagrams_per_round(size: usize) -> usize {
    let probes_per_rank = (PROBE_PATIENCE.as_millis() / PROBE_INTERVAL.as_millis()) as usize + LEAST_PROBES;
    (4 * size * probes_per_rank).max(4096)
}

/// Rounds of probing at most: a rank late for the first round is heard
/// in the second, after the verdict allgather waited for it; the margin
/// is for a rank that is late again.
pub(crate) const MOST_ROUNDS: usize = 4;

/// One rank's probing: whom it has heard so far, over every round.
pub(crate) struct Prober {
    rank: usize,
    /// The round under way (from 1), stamped on this rank's probes and
    /// demanded of the others': a probe recorded in one round and sent
    /// again in a later one proves nothing about the group now.
    round: u8,
    heard: Vec<bool>,
    probe: Vec<u8>,
    buffer: Vec<u8>,
    /// A test hook (a network that drops multicast): throws away
    /// everything the group socket receives.
    deaf: bool,
}

impl Prober {
    pub(crate) fn new(wire: &Wire, rank: usize, deaf: bool) -> Self {
        let mut heard = vec![false; wire.addresses.len()];
        heard[rank] = true;
        Prober { rank, round: 0, heard, probe: Vec::new(), buffer: vec![0u8; frame::MAX_UDP_PAYLOAD + 1], deaf }
    }

    /// Multicasts this rank's probes and listens on the group until every
    /// other rank was heard (and at least `LEAST_PROBES` went out in this
    /// round) or `PROBE_PATIENCE` ran out. Strays are counted as the
    /// engine counts them.
    pub(crate) fn round(&mut self, wire: &Wire, counters: &Counters) -> Result<Heard, String> {
        self.round_over(wire, counters, |buffer| receive(&wire.group_socket, buffer).map_err(|error| format!("receiving on the group socket: {error}")))
    }

    /// `round`, taking the group's datagrams from `take` (a test's flood).
    fn round_over(&mut self, wire: &Wire, counters: &Counters, mut take: impl FnMut(&mut [u8]) -> Result<Option<Received>, String>) -> Result<Heard, String> {
        self.round = self.round.checked_add(1).ok_or("more probe rounds than a probe can name")?;
        let started = Instant::now();
        let (mut sent, mut next_send) = (0, started);
        let most = most_datagrams_per_round(self.heard.len());
        let mut taken = 0;
        loop {
            let now = Instant::now();
            let all_heard = self.heard.iter().all(|&heard| heard);
            if (all_heard && sent >= LEAST_PROBES) || now.duration_since(started) >= PROBE_PATIENCE {
                break;
            }
            if now >= next_send {
                // Sealed afresh each time: every probe takes a new counter.
                frame::encode_probe(wire.stamp, self.round, &mut self.probe);
                wire.seal.seal_at(&mut self.probe, 0, true);
                send_frame(&wire.own_socket, &self.probe, wire.group)?;
                sent += 1;
                next_send = now + PROBE_INTERVAL;
            }
            if taken >= most {
                if self.heard.iter().all(|&heard| heard) {
                    break;
                }
                return Err(format!("{taken} datagrams reached the group in one probe round, more than every rank's probes could be: a flood"));
            }
            let mut took_this_pass = 0;
            while took_this_pass < DATAGRAMS_PER_PASS.min(most - taken) {
                let Some(received) = take(&mut self.buffer)? else { break };
                // Probes are sent one by one, never coalesced (segmented
                // sends start only once setup is over).
                let (len, from) = (received.len, received.from);
                took_this_pass += 1;
                if !self.deaf {
                    let (whole, kept) = (len <= self.buffer.len(), len.min(self.buffer.len()));
                    let round = self.round;
                    judge_probe(wire, (self.rank, round), &mut self.buffer[..kept], whole, from, counters, &mut self.heard);
                }
            }
            taken += took_this_pass;
            if took_this_pass == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let missing: Vec<usize> = (0..self.heard.len()).filter(|&peer| !self.heard[peer]).collect();
        Ok(Heard { missing: missing.len() as u32, first_missing: missing.first().map_or(0, |&peer| peer as u32) })
    }
}

/// Ordered pairs (hearer, heard) of distinct ranks that the reports of a
/// round say were heard: the measure of a round's progress, the same on
/// every rank.
pub(crate) fn pairs_heard(reports: &[u8]) -> u64 {
    let size = (reports.len() / Heard::BYTES) as u64;
    reports.chunks_exact(Heard::BYTES).map(|bytes| (size - 1).saturating_sub(u64::from(Heard::decode(bytes).missing))).sum()
}

/// Takes in one datagram from the group during probe round `round` of
/// rank `rank`.
fn judge_probe(wire: &Wire, (rank, round): (usize, u8), bytes: &mut [u8], whole: bool, from: std::net::SocketAddrV4, counters: &Counters, heard: &mut [bool]) {
    let Some(claimed) = frame::claimed_sender(bytes).filter(|_| whole) else {
        return Counters::bump(unreadable_counter(counters, from, &wire.addresses));
    };
    let sender = match origin(claimed, from, rank, &wire.addresses) {
        Origin::Rank(sender) => sender,
        Origin::OwnCopy => return,
        Origin::Stranger => return Counters::bump(&counters.strangers_dropped),
    };
    // Within a round a copy proves what the original did, so only the
    // round is checked; another communicator's probe fails the seal.
    match wire.seal.open(bytes, wire.stamp.communicator).and_then(|(plain, _)| frame::decode(plain)) {
        Ok(Body::Probe { round: sent_in }) if sent_in == round => heard[sender] = true,
        // Late, or recorded and sent again: either way not this round's.
        Ok(Body::Probe { .. }) => Counters::bump(&counters.replays_dropped),
        Err(Refusal::WrongJob) => Counters::bump(&counters.wrong_job_dropped),
        Err(Refusal::Unauthenticated) => Counters::bump(&counters.unauthenticated_dropped),
        // Nothing else of this communicator can be on the group yet.
        Ok(_) | Err(Refusal::Malformed) => Counters::bump(&counters.malformed_dropped),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_heard_count_every_rank_s_report() {
        let all = |heard: &[Heard]| heard.iter().flat_map(|heard| heard.encode()).collect::<Vec<u8>>();
        let fine = Heard { missing: 0, first_missing: 0 };
        assert_eq!(pairs_heard(&all(&[fine, fine, fine])), 6);
        assert_eq!(pairs_heard(&all(&[fine, Heard { missing: 2, first_missing: 0 }, Heard { missing: 1, first_missing: 1 }])), 3);
        // An unreadable group counts as hearing nobody, even with more
        // missing than there are peers.
        assert_eq!(pairs_heard(&all(&[Heard { missing: 3, first_missing: 0 }, Heard { missing: 3, first_missing: 0 }, fine])), 2);
    }

    /// Issue 33, item 3: strangers' datagrams arriving faster than a rank
    /// reads (here, without end). The round ends after a bounded number
    /// of them, refusing the group as flooded; before, its receive loop
    /// never let go. The flood is counted, so the bound needs no clock.
    #[test]
    fn a_flood_of_strangers_ends_the_probe_round_after_a_bounded_number_of_datagrams() {
        use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
        let socket = || UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a loopback socket");
        let addresses = crate::udp::source::RankAddresses::new(vec![SocketAddrV4::new(Ipv4Addr::LOCALHOST, 40_001), SocketAddrV4::new(Ipv4Addr::LOCALHOST, 40_002)]);
        let stamp = frame::Stamp { communicator: 7, nonce: 0x1234, sender: 0 };
        let group_socket = socket();
        // The probes go to the socket the test reads from no more.
        let std::net::SocketAddr::V4(group) = group_socket.local_addr().expect("bound") else { unreachable!("bound to IPv4") };
        let seal = crate::udp::seal::Sealer::new(crate::udp::Protection::Encrypt, crate::udp::Cipher::default(), &[7; crate::udp::seal::KEY_BYTES], 0, stamp.nonce);
        let wire = Wire { own_socket: socket(), group_socket, group, addresses, stamp, seal };
        let counters = Counters::default();
        let mut prober = Prober::new(&wire, 0, false);
        // Rank 1's own probe, but from a stranger's address.
        let mut forged = Vec::new();
        frame::encode_probe(frame::Stamp { sender: 1, ..stamp }, 1, &mut forged);
        let stranger = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 9), 40_002);
        let most = most_datagrams_per_round(2);
        let mut flooded = 0usize;
        let outcome = prober.round_over(&wire, &counters, |buffer| {
            flooded += 1;
            assert!(flooded <= 100 * most, "the probe round took {flooded} datagrams and goes on");
            buffer[..forged.len()].copy_from_slice(&forged);
            Ok(Some(Received { len: forged.len(), from: stranger, segment: None }))
        });
        assert!(flooded <= most, "{flooded} datagrams taken, {most} at most");
        let strangers = counters.snapshot().strangers_dropped;
        assert_eq!(strangers, flooded as u64, "every datagram taken was judged a stranger's");
        // The clock may end a round on a loaded machine before the flood
        // does: either way rank 1 is unheard, and the verdict refuses.
        match outcome {
            Err(why) => assert!(why.contains("flood") && flooded == most, "{why} after {flooded}"),
            Ok(heard) => assert_eq!(heard, Heard { missing: 1, first_missing: 1 }),
        }
    }

    /// Review of issue 33: a probe is bound to its round. Rank 1's probe
    /// of round 1, recorded and sent again from rank 1's address during
    /// round 2, must not count as rank 1 heard there (nor may a probe
    /// that never reached this rank in round 1 make the group look as if
    /// it delivers); rank 1's probe of round 3 still counts.
    #[test]
    fn a_probe_recorded_in_one_round_is_dropped_in_a_later_one() {
        use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
        use crate::udp::seal::{KEY_BYTES, Sealer};
        let socket = || UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a loopback socket");
        let rank_one = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 40_002);
        let addresses = crate::udp::source::RankAddresses::new(vec![SocketAddrV4::new(Ipv4Addr::LOCALHOST, 40_001), rank_one]);
        let stamp = frame::Stamp { communicator: 7, nonce: 0x1234, sender: 0 };
        let group_socket = socket();
        let std::net::SocketAddr::V4(group) = group_socket.local_addr().expect("bound") else { unreachable!("bound to IPv4") };
        let key = [7; KEY_BYTES];
        let seal = Sealer::new(crate::udp::Protection::Encrypt, crate::udp::Cipher::default(), &key, 0, stamp.nonce);
        let wire = Wire { own_socket: socket(), group_socket, group, addresses, stamp, seal };
        let rank_one_sealer = Sealer::new(crate::udp::Protection::Encrypt, crate::udp::Cipher::default(), &key, 1, stamp.nonce);
        let probe_of_round = |round: u8| {
            let mut probe = Vec::new();
            frame::encode_probe(frame::Stamp { sender: 1, ..stamp }, round, &mut probe);
            rank_one_sealer.seal_at(&mut probe, 0, true);
            probe
        };
        let recorded = probe_of_round(1);
        let counters = Counters::default();
        let mut prober = Prober::new(&wire, 0, false);
        let feed = |prober: &mut Prober, datagram: Option<Vec<u8>>| {
            let mut pending = datagram;
            prober.round_over(&wire, &counters, |buffer| {
                Ok(pending.take().map(|bytes| {
                    buffer[..bytes.len()].copy_from_slice(&bytes);
                    Received { len: bytes.len(), from: rank_one, segment: None }
                }))
            })
        };
        // Round 1: the probe never arrives.
        assert_eq!(feed(&mut prober, None), Ok(Heard { missing: 1, first_missing: 1 }));
        // Round 2: round 1's probe, sent again.
        assert_eq!(feed(&mut prober, Some(recorded)), Ok(Heard { missing: 1, first_missing: 1 }), "a replayed probe counted");
        assert_eq!(counters.snapshot().replays_dropped, 1);
        // Round 3: rank 1's probe of this round.
        assert_eq!(feed(&mut prober, Some(probe_of_round(3))), Ok(Heard { missing: 0, first_missing: 0 }));
        assert_eq!(counters.snapshot().refused(), 1, "{:?}", counters.snapshot());
    }

    #[test]
    fn what_a_rank_heard_round_trips() {
        for heard in [Heard { missing: 0, first_missing: 0 }, Heard { missing: 3, first_missing: u32::MAX - 1 }] {
            assert_eq!(Heard::decode(&heard.encode()), heard);
        }
    }
}
