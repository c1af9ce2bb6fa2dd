//! The collective setup every rank of a communicator runs together. Each
//! rank opens its own socket; one allgather of fixed-size records tells
//! every rank every other's socket address (the only source it will
//! believe for that rank), rank 0's nonce and rank 0's key (drawn from
//! the OS RNG; it seals every frame, `seal`, and travels only in this
//! exchange over Open MPI's own transport), checks that all ranks
//! asked for the same wire format, and sets the datagram size to the
//! least any rank proposed (each fits its own interface's MTU); each then derives the group and port
//! from the communicator's id, rank 0's address and the nonce, joins, and
//! a second allgather confirms every rank joined. Joining proves nothing
//! about delivery, so every rank then multicasts probes and listens for
//! the others' (`probe`), and a third allgather confirms every rank heard
//! every other (repeated, in rounds, while a round heard more than the
//! ones before: a rank may reach the probe late). Every verdict follows
//! from exchanged data, so all ranks get a transport or all an error.
//!
//! ```text
//! record: [version u32 | opened u8 | protection u8 | cipher u8 | 0 | size u32 | multicast id u32 | window_len u64 | nonce u64 |
//!          ipv4 [4] | port u16 | datagram_bytes u16 | multicast base [4] | prefix u8 | 0 |
//!          port base u16 | port count u16 | reliable window u32 | 0 u16 | key [32]]          88 bytes
//! (the key is rank 0's; the others send zeros)
//! joined: [joined u64]
//! heard:  [ranks unheard u32 | lowest unheard rank u32]
//! ```

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64};

use super::config::UdpConfig;
use super::engine::{Engine, Wire};
use super::frame::{Stamp, least_datagram_bytes};
use super::interface::interface_mtu;
use super::probe::{Heard, MOST_ROUNDS, Prober, pairs_heard};
use super::seal::{Cipher, KEY_BYTES, Protection, Sealer, draw_key, scrub};
use super::socket::{accept_coalesced, open_group, open_own, route_source};
use super::source::RankAddresses;
use super::stats::Counters;
use super::UdpTransport;
use crate::multicast_group::{multicast_id_of, random_nonce};
use crate::transport::{Exchange, TransportError};
use crate::words::words_for;

const RECORD_VERSION: u32 = 0x5544_5003;
const RECORD_LEN: usize = 88;

/// Why a communicator got no udp transport; the same kind of answer on
/// every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UdpSetupError {
    InvalidArguments(String),
    /// This rank could not open or set up a socket.
    Socket(String),
    /// Another rank could not (its own error says why).
    PeerFailed { rank: usize, what: &'static str },
    /// The ranks do not agree on the settings.
    Inconsistent { rank: usize, detail: String },
    /// `rank` proposed datagrams of `bytes`, fewer than the `least` a
    /// frame needs (its interface's MTU is that small).
    DatagramTooSmall { rank: usize, bytes: usize, least: usize },
    /// Every rank joined, but the group did not carry `unheard`'s probes
    /// to `rank` (or could not be read there).
    MulticastNotDelivered { rank: usize, unheard: usize, missing: usize, group: SocketAddrV4 },
    Exchange(TransportError),
}

impl std::fmt::Display for UdpSetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UdpSetupError::InvalidArguments(why) => write!(f, "invalid udp settings: {why}"),
            UdpSetupError::Socket(why) => write!(f, "udp socket setup failed: {why}"),
            UdpSetupError::PeerFailed { rank, what } => write!(f, "rank {rank} could not {what} (its own log says why)"),
            UdpSetupError::Inconsistent { rank, detail } => write!(f, "rank {rank} {detail}"),
            UdpSetupError::DatagramTooSmall { rank, bytes, least } => write!(
                f,
                "rank {rank} proposed datagrams of {bytes} bytes, what its interface's MTU carries (the MTU less 28 bytes of IPv4 and UDP \
                 headers), fewer than the {least} bytes a frame needs (header, one byte of data or an ACK, and the protection's tag)"
            ),
            UdpSetupError::MulticastNotDelivered { rank, unheard, missing, group } => write!(
                f,
                "rank {rank} joined {group} but heard no probe from rank {unheard} ({missing} rank(s) unheard) in rounds of {:?} \
                 (the last heard no more than those before it): this network does not deliver the multicast (it drops multicast, \
                 snoops IGMP without a querier, or the interface is wrong)",
                super::probe::PROBE_PATIENCE
            ),
            UdpSetupError::Exchange(why) => write!(f, "the udp setup exchange failed: {why}"),
        }
    }
}

impl std::error::Error for UdpSetupError {}

/// What one rank tells the others.
#[derive(Clone, PartialEq, Eq)]
struct Record {
    opened: bool,
    size: u32,
    multicast_id: u32,
    window_len: u64,
    nonce: u64,
    address: SocketAddrV4,
    datagram_bytes: u16,
    multicast_base: Ipv4Addr,
    prefix_len: u8,
    port_base: u16,
    port_count: u16,
    reliable_window: u32,
    protection: Protection,
    cipher: Cipher,
    key: [u8; KEY_BYTES],
}

/// Every field but the key, which would open every frame of the
/// communicator to whoever reads a log: only whether one is carried.
impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let key = if self.key.iter().all(|&byte| byte == 0) { "none" } else { "redacted" };
        f.debug_struct("Record")
            .field("opened", &self.opened)
            .field("size", &self.size)
            .field("multicast_id", &self.multicast_id)
            .field("window_len", &self.window_len)
            .field("nonce", &self.nonce)
            .field("address", &self.address)
            .field("datagram_bytes", &self.datagram_bytes)
            .field("multicast_base", &self.multicast_base)
            .field("prefix_len", &self.prefix_len)
            .field("port_base", &self.port_base)
            .field("port_count", &self.port_count)
            .field("reliable_window", &self.reliable_window)
            .field("protection", &self.protection)
            .field("cipher", &self.cipher)
            .field("key", &format_args!("{key}"))
            .finish()
    }
}

impl Record {
    fn encode(&self) -> [u8; RECORD_LEN] {
        let mut bytes = [0u8; RECORD_LEN];
        bytes[0..4].copy_from_slice(&RECORD_VERSION.to_le_bytes());
        bytes[4] = u8::from(self.opened);
        bytes[5] = self.protection.code();
        bytes[6] = self.cipher.code();
        bytes[8..12].copy_from_slice(&self.size.to_le_bytes());
        bytes[12..16].copy_from_slice(&self.multicast_id.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.window_len.to_le_bytes());
        bytes[24..32].copy_from_slice(&self.nonce.to_le_bytes());
        bytes[32..36].copy_from_slice(&self.address.ip().octets());
        bytes[36..38].copy_from_slice(&self.address.port().to_le_bytes());
        bytes[38..40].copy_from_slice(&self.datagram_bytes.to_le_bytes());
        bytes[40..44].copy_from_slice(&self.multicast_base.octets());
        bytes[44] = self.prefix_len;
        bytes[46..48].copy_from_slice(&self.port_base.to_le_bytes());
        bytes[48..50].copy_from_slice(&self.port_count.to_le_bytes());
        bytes[50..54].copy_from_slice(&self.reliable_window.to_le_bytes());
        bytes[56..88].copy_from_slice(&self.key);
        bytes
    }

    fn decode(bytes: &[u8]) -> Option<Record> {
        let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
        let ipv4_at = |at: usize| Ipv4Addr::new(bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]);
        if bytes.len() != RECORD_LEN || u32_at(0) != RECORD_VERSION || bytes[4] > 1 {
            return None;
        }
        let protection = Protection::from_code(bytes[5])?;
        let cipher = Cipher::from_code(bytes[6])?;
        let mut key = [0u8; KEY_BYTES];
        key.copy_from_slice(&bytes[56..88]);
        Some(Record {
            opened: bytes[4] == 1,
            size: u32_at(8),
            multicast_id: u32_at(12),
            window_len: u64_at(16),
            nonce: u64_at(24),
            address: SocketAddrV4::new(ipv4_at(32), u16_at(36)),
            datagram_bytes: u16_at(38),
            multicast_base: ipv4_at(40),
            prefix_len: bytes[44],
            port_base: u16_at(46),
            port_count: u16_at(48),
            reliable_window: u32_at(50),
            protection,
            cipher,
            key,
        })
    }

    /// What every rank must agree on, with rank 0's values. Not the
    /// datagram size: each rank proposes what its interface carries, and
    /// all take the least.
    fn disagreement(&self, leader: &Record) -> Option<String> {
        let settings = |record: &Record| {
            (
                record.size,
                record.multicast_id,
                record.window_len,
                record.multicast_base,
                record.prefix_len,
                record.port_base,
                record.port_count,
                record.reliable_window,
                record.protection.name(),
                record.cipher.name(),
            )
        };
        (settings(self) != settings(leader)).then(|| {
            format!(
                "asked for (size, multicast id, window, group base, prefix, port base, port count, reliable window, protection, cipher) = {:?}, rank 0 for {:?} (mixed settings or builds?)",
                settings(self),
                settings(leader)
            )
        })
    }
}

/// Sets up udp for one communicator; every rank calls it with the same
/// `size`, `window_len` and (except `interface`) `config`.
pub fn establish(exchange: &dyn Exchange, rank: usize, size: usize, window_len: usize, config: &UdpConfig) -> Result<UdpTransport, UdpSetupError> {
    if size == 0 || rank >= size || u32::try_from(size).is_err() {
        return Err(UdpSetupError::InvalidArguments(format!("rank {rank} of {size}")));
    }
    if let Some(problem) = config.problem() {
        return Err(UdpSetupError::InvalidArguments(problem));
    }
    // Rank 0's key, drawn before its socket so that a failing RNG fails
    // setup on every rank as a socket that cannot open does.
    let key = if rank == 0 { draw_key().map_err(UdpSetupError::Socket) } else { Ok([0; KEY_BYTES]) };
    let own = key.and_then(|key| open_own_socket(config).map(|own| (own, key)));
    let (own, mut key) = match own {
        Ok((own, key)) => (Ok(own), key),
        Err(error) => (Err(error), [0; KEY_BYTES]),
    };
    let own_mtu = own.as_ref().ok().filter(|_| config.fit_interface_mtu).map(|(socket, address, _)| interface_mtu(*address.ip(), socket));
    if let Some(Err(why)) = &own_mtu {
        tracing::info!("udp: rank {rank}: no MTU for the interface ({why}); proposing datagrams of {} bytes", config.datagram_bytes);
    }
    let own_mtu = own_mtu.and_then(Result::ok);
    let proposed = config.datagram_bytes_for_mtu(own_mtu.as_ref().map(|(_, mtu)| *mtu));
    let mut mine = Record {
        opened: own.is_ok(),
        size: size as u32,
        multicast_id: config.multicast_id,
        window_len: window_len as u64,
        nonce: if rank == 0 { random_nonce() } else { 0 },
        address: own.as_ref().map_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), |(_, address, _)| *address),
        datagram_bytes: proposed as u16,
        multicast_base: config.multicast_base,
        prefix_len: config.multicast_prefix_len,
        port_base: config.port_base,
        port_count: config.port_count,
        reliable_window: u32::try_from(config.reliable_window).unwrap_or(u32::MAX),
        protection: config.protection,
        cipher: config.cipher,
        key,
    };
    let mut gathered = vec![0u8; size * RECORD_LEN];
    let mut sent = mine.encode();
    exchange.allgather(&sent, &mut gathered).map_err(UdpSetupError::Exchange)?;
    let records = judge_records(&gathered);
    let (own_socket, _, own_buffer) = own?;
    let mut records = records?;
    let datagram_choice = DatagramChoice { bytes: agreed_datagram_bytes(&records), most: config.datagram_bytes, proposed, own_mtu, fitted: config.fit_interface_mtu };

    let leader = &records[0];
    let communicator = multicast_id_of([
        &config.multicast_id.to_le_bytes()[..],
        &leader.address.ip().octets(),
        &leader.address.port().to_le_bytes(),
        &leader.nonce.to_le_bytes(),
    ]);
    let group = SocketAddrV4::new(config.group_address(communicator), config.group_port(communicator));
    let interface = *records[rank].address.ip();
    let joined = open_group(group, interface, config.receive_buffer_bytes)
        .map_err(|error| format!("joining {group} on {interface}: {error}"));
    let mut confirmations = vec![0u8; size * 8];
    exchange.allgather(&u64::from(joined.is_ok()).to_le_bytes(), &mut confirmations).map_err(UdpSetupError::Exchange)?;
    let (group_socket, group_buffer) = joined.map_err(UdpSetupError::Socket)?;
    if let Some(rank) = confirmations.chunks_exact(8).position(|joined| joined != 1u64.to_le_bytes()) {
        return Err(UdpSetupError::PeerFailed { rank, what: "join the multicast group" });
    }

    let wire = Wire {
        own_socket,
        group_socket,
        group,
        addresses: RankAddresses::new(records.iter().map(|record| record.address).collect()),
        stamp: Stamp { communicator, nonce: leader.nonce, sender: rank as u32 },
        seal: Sealer::new(config.protection, config.cipher, &leader.key, rank as u32, leader.nonce),
    };
    // The sealer holds the key now. A setup that fails before here never
    // seals under its key, so only this path wipes the copies.
    for copy in [&mut key[..], &mut mine.key[..], &mut sent[..], &mut gathered[..]] {
        scrub(copy);
    }
    records.iter_mut().for_each(|record| scrub(&mut record.key));
    let counters = Counters::default();
    let mut prober = Prober::new(&wire, rank, config.faults.multicast_lost);
    let mut pairs_before = 0;
    for round in 1..=MOST_ROUNDS {
        let heard = prober.round(&wire, &counters);
        let told = match &heard {
            Ok(heard) => *heard,
            // Unreadable counts as hearing nobody, so every rank refuses.
            Err(_) => Heard { missing: size as u32, first_missing: 0 },
        };
        let mut reports = vec![0u8; size * Heard::BYTES];
        exchange.allgather(&told.encode(), &mut reports).map_err(UdpSetupError::Exchange)?;
        if let Err(why) = &heard {
            tracing::warn!("udp: rank {rank}: the multicast probe failed: {why}");
        }
        let verdict = judge_probes(&reports, group);
        let pairs = pairs_heard(&reports);
        if verdict.is_ok() || round == MOST_ROUNDS || pairs <= pairs_before {
            verdict?;
            if round > 1 {
                tracing::debug!("udp: rank {rank}: every rank heard every other's probes in round {round} (some rank reached the probe late)");
            }
            break;
        }
        pairs_before = pairs;
    }
    // After the probe round, which reads the group socket one datagram
    // at a time.
    let segmenting = config.segmentation_offload && accept_coalesced(&wire.group_socket);

    let receive_buffer = own_buffer.min(group_buffer);
    if receive_buffer < config.receive_buffer_bytes {
        tracing::info!(
            "udp: rank {rank} got {receive_buffer} bytes of socket receive buffer of the {} asked (raise net.core.rmem_max, or run with CAP_NET_ADMIN); bursts may be lost",
            config.receive_buffer_bytes
        );
    }
    tracing::debug!("udp: rank {rank} of {size} on {} joined {group}", records[rank].address);
    let config = &UdpConfig { datagram_bytes: datagram_choice.bytes, ..config.clone() };
    Ok(UdpTransport {
        rank,
        size,
        window_len,
        config: config.clone(),
        wire,
        window: (0..words_for(window_len)).map(|_| AtomicU64::new(0)).collect(),
        engine: Mutex::new(Engine::new(rank, size, window_len, config)),
        record_turn: super::record_turn::RecordTurn::new(),
        counters,
        receive_buffer,
        segmenting: AtomicBool::new(segmenting),
        datagram_choice,
    })
}

/// The datagram size every rank uses: the least proposed (never too
/// small for a frame: `judge_records` refuses such a proposal).
fn agreed_datagram_bytes(records: &[Record]) -> usize {
    records.iter().map(|record| usize::from(record.datagram_bytes)).min().unwrap_or(0)
}

/// How the datagram size came about, for the component's verbose line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatagramChoice {
    /// What every rank uses.
    pub bytes: usize,
    /// The most a rank would propose (`UdpConfig::datagram_bytes`).
    pub most: usize,
    /// What this rank proposed.
    pub proposed: usize,
    /// This rank's interface and its MTU, where fitted and known.
    pub own_mtu: Option<(String, usize)>,
    /// Whether the size was fitted to the interfaces' MTUs.
    pub fitted: bool,
}

impl std::fmt::Display for DatagramChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.fitted {
            return write!(f, "{} bytes, as set", self.bytes);
        }
        write!(f, "{} bytes, the least the ranks proposed, each what its interface's MTU carries up to {} (this rank: ", self.bytes, self.most)?;
        match &self.own_mtu {
            Some((name, mtu)) => write!(f, "{name}, MTU {mtu}, proposed {})", self.proposed),
            None => write!(f, "MTU unreadable, proposed {})", self.proposed),
        }
    }
}

/// The verdict on the probe round, the same on every rank: the first
/// rank that missed another's probes fails them all.
fn judge_probes(reports: &[u8], group: SocketAddrV4) -> Result<(), UdpSetupError> {
    for (rank, bytes) in reports.chunks_exact(Heard::BYTES).enumerate() {
        let heard = Heard::decode(bytes);
        if heard.missing > 0 {
            return Err(UdpSetupError::MulticastNotDelivered {
                rank,
                unheard: heard.first_missing as usize,
                missing: heard.missing as usize,
                group,
            });
        }
    }
    Ok(())
}

/// This rank's own socket, its address, and the receive buffer granted.
fn open_own_socket(config: &UdpConfig) -> Result<(std::net::UdpSocket, SocketAddrV4, usize), UdpSetupError> {
    let probe_group = SocketAddrV4::new(config.multicast_base, config.port_base);
    let interface = match config.interface {
        Some(interface) => interface,
        None => route_source(probe_group).map_err(|error| UdpSetupError::Socket(format!("finding the interface towards {probe_group}: {error}")))?,
    };
    let (socket, granted) =
        open_own(interface, config.ttl, config.receive_buffer_bytes).map_err(|error| UdpSetupError::Socket(format!("opening a socket on {interface}: {error}")))?;
    let address = match socket.local_addr() {
        Ok(std::net::SocketAddr::V4(address)) => address,
        Ok(other) => return Err(UdpSetupError::Socket(format!("the socket on {interface} is bound to {other}"))),
        Err(error) => return Err(UdpSetupError::Socket(format!("reading the socket's address: {error}"))),
    };
    Ok((socket, address, granted))
}

/// The verdict on the first exchange, the same on every rank: every
/// rank's record, or the first reason not to go on.
fn judge_records(gathered: &[u8]) -> Result<Vec<Record>, UdpSetupError> {
    let mut records = Vec::with_capacity(gathered.len() / RECORD_LEN);
    for (rank, bytes) in gathered.chunks_exact(RECORD_LEN).enumerate() {
        let record = Record::decode(bytes).ok_or_else(|| UdpSetupError::Inconsistent {
            rank,
            detail: "sent a udp setup record this build does not understand (mixed builds of coll rdma?)".into(),
        })?;
        if !record.opened {
            return Err(UdpSetupError::PeerFailed { rank, what: "open its udp socket" });
        }
        if let Some(detail) = records.first().and_then(|leader| record.disagreement(leader)) {
            return Err(UdpSetupError::Inconsistent { rank, detail });
        }
        records.push(record);
    }
    if let Some(rank) = loopback_mismatch(&records) {
        let detail = format!(
            "is on {} and rank 0 on {}: a loopback address reaches only its own host, so it serves only ranks that all share it",
            records[rank].address.ip(),
            records[0].address.ip()
        );
        return Err(UdpSetupError::Inconsistent { rank, detail });
    }
    // Every rank agreed on the protection above, so they all judge the
    // least datagram alike.
    let least = records.first().map_or(0, |leader| least_datagram_bytes(leader.protection.overhead()));
    if let Some((rank, record)) = records.iter().enumerate().find(|(_, record)| usize::from(record.datagram_bytes) < least) {
        return Err(UdpSetupError::DatagramTooSmall { rank, bytes: usize::from(record.datagram_bytes), least });
    }
    Ok(records)
}

/// The first rank whose interface differs from rank 0's when any rank is
/// on a loopback address (peers elsewhere could never reach it).
fn loopback_mismatch(records: &[Record]) -> Option<usize> {
    let leader = *records.first()?.address.ip();
    if !records.iter().any(|record| record.address.ip().is_loopback()) {
        return None;
    }
    records.iter().position(|record| *record.address.ip() != leader)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record {
        Record {
            opened: true,
            size: 4,
            multicast_id: 0xABCD_0123,
            window_len: 1 << 20,
            nonce: u64::MAX - 9,
            address: SocketAddrV4::new(Ipv4Addr::new(10, 1, 2, 3), 40_001),
            datagram_bytes: 1472,
            multicast_base: Ipv4Addr::new(239, 78, 0, 0),
            prefix_len: 16,
            port_base: 24_000,
            port_count: 1000,
            reliable_window: 256,
            protection: Protection::Encrypt,
            cipher: Cipher::Aegis128L,
            key: [0xA5; KEY_BYTES],
        }
    }

    #[test]
    fn records_round_trip_and_foreign_bytes_are_refused() {
        let original = record();
        assert_eq!(Record::decode(&original.encode()), Some(original.clone()));
        let failed = Record { opened: false, ..record() };
        assert_eq!(Record::decode(&failed.encode()), Some(failed));
        let authenticated = Record { protection: Protection::Authenticate, ..record() };
        assert_eq!(Record::decode(&authenticated.encode()), Some(authenticated));
        let by_gcm = Record { cipher: Cipher::Aes256Gcm, ..record() };
        assert_eq!(Record::decode(&by_gcm.encode()), Some(by_gcm));
        // A record naming no cipher (a zero, as the version before had there) is foreign.
        let mut no_cipher = original.encode();
        no_cipher[6] = 0;
        assert_eq!(Record::decode(&no_cipher), None);
        let mut bytes = original.encode();
        bytes[0] ^= 1;
        assert_eq!(Record::decode(&bytes), None);
        assert_eq!(Record::decode(&original.encode()[..RECORD_LEN - 1]), None);
    }

    #[test]
    fn a_record_in_a_log_shows_no_key() {
        let key: [u8; KEY_BYTES] = std::array::from_fn(|i| 0xC0 + i as u8);
        let carrying = Record { key, ..record() };
        for shown in [format!("{carrying:?}"), format!("{carrying:#?}"), format!("{:?}", Some(carrying.clone()))] {
            assert!(shown.contains("key: redacted") && shown.contains("datagram_bytes: 1472"), "{shown}");
            // No run of two key bytes, in decimal or hex, appears.
            for pair in key.windows(2) {
                for text in [format!("{}, {}", pair[0], pair[1]), format!("{:x}{:x}", pair[0], pair[1]), format!("{:#x}, {:#x}", pair[0], pair[1])] {
                    assert!(!shown.contains(&text), "key bytes {text} in {shown}");
                }
            }
        }
        assert!(format!("{:?}", Record { key: [0; KEY_BYTES], ..record() }).contains("key: none"));
    }

    #[test]
    fn every_rank_reaches_the_same_verdict_on_the_records() {
        let all = |records: &[Record]| records.iter().flat_map(Record::encode).collect::<Vec<u8>>();
        let agreeing = [record(), Record { address: SocketAddrV4::new(Ipv4Addr::new(10, 1, 2, 4), 5), nonce: 0, ..record() }];
        assert_eq!(judge_records(&all(&agreeing)).map(|records| records.len()), Ok(2));
        let failed = [record(), Record { opened: false, ..record() }];
        assert_eq!(judge_records(&all(&failed)), Err(UdpSetupError::PeerFailed { rank: 1, what: "open its udp socket" }));
        let loopback = |host: u8| SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, host), 40_000 + u16::from(host));
        let all_on_lo = [Record { address: loopback(1), ..record() }, Record { address: loopback(1), nonce: 0, ..record() }];
        assert_eq!(judge_records(&all(&all_on_lo)).map(|records| records.len()), Ok(2));
        let one_on_lo = [record(), Record { address: loopback(1), ..record() }, record()];
        assert!(matches!(judge_records(&all(&one_on_lo)), Err(UdpSetupError::Inconsistent { rank: 1, detail }) if detail.contains("loopback")));
        let lo_leader = [Record { address: loopback(1), ..record() }, record()];
        assert!(matches!(judge_records(&all(&lo_leader)), Err(UdpSetupError::Inconsistent { rank: 1, .. })));
        let mixed = [record(), Record { reliable_window: 9000, ..record() }];
        assert!(matches!(judge_records(&all(&mixed)), Err(UdpSetupError::Inconsistent { rank: 1, detail }) if detail.contains("9000")));
        // Only rank 0's key counts; a rank asking for another protection is refused, by name.
        let keys = [record(), Record { key: [0; KEY_BYTES], ..record() }];
        assert_eq!(judge_records(&all(&keys)).map(|records| records.len()), Ok(2));
        let unprotected = [record(), record(), Record { protection: Protection::None, ..record() }];
        assert!(
            matches!(judge_records(&all(&unprotected)), Err(UdpSetupError::Inconsistent { rank: 2, detail }) if detail.contains("\"none\"") && detail.contains("\"encrypt\"")),
            "{:?}",
            judge_records(&all(&unprotected))
        );
        // Ranks whose interfaces carry different datagrams all take the least.
        let mtus = [record(), Record { datagram_bytes: 8972, ..record() }, Record { datagram_bytes: 1372, ..record() }];
        assert_eq!(judge_records(&all(&mtus)).map(|records| agreed_datagram_bytes(&records)), Ok(1372));
    }

    #[test]
    fn a_datagram_too_small_for_a_frame_is_refused_by_every_rank() {
        let all = |records: &[Record]| records.iter().flat_map(Record::encode).collect::<Vec<u8>>();
        // IPv4's least MTU, 68, carries 40-byte datagrams: an ACK's 40 bytes with no tag, not with one.
        let tiny = UdpConfig::default().datagram_bytes_for_mtu(Some(68));
        assert_eq!(tiny, 40);
        for protection in [Protection::Encrypt, Protection::Authenticate, Protection::None] {
            let least = crate::udp::frame::DATA_HEADER_BYTES + 8 + protection.overhead();
            let proposing = |bytes: usize| {
                let records = [record(), Record { datagram_bytes: bytes as u16, ..record() }, record()].map(|record| Record { protection, ..record });
                judge_records(&all(&records)).map(|records| agreed_datagram_bytes(&records))
            };
            let refused = Err(UdpSetupError::DatagramTooSmall { rank: 1, bytes: least - 1, least });
            assert_eq!(proposing(least - 1), refused, "{protection:?}");
            assert_eq!(proposing(least), Ok(least), "{protection:?}");
            assert_eq!(proposing(0).map_err(|error| error.to_string()), Err(format!(
                "rank 1 proposed datagrams of 0 bytes, what its interface's MTU carries (the MTU less 28 bytes of IPv4 and UDP headers), \
                 fewer than the {least} bytes a frame needs (header, one byte of data or an ACK, and the protection's tag)"
            )));
            assert_eq!(proposing(tiny).is_ok(), protection == Protection::None, "{protection:?}");
            // What the transport derives from the least it accepts stays positive.
            let agreed = UdpConfig { datagram_bytes: least, protection, ..UdpConfig::default() };
            assert_eq!(agreed.problem(), None, "{protection:?}");
            assert_eq!(super::super::engine::record_limits(&agreed, 4096).fragment, 8, "{protection:?}");
        }
    }

    #[test]
    fn the_datagram_choice_says_how_it_came_about() {
        let fitted = DatagramChoice { bytes: 1372, most: 8972, proposed: 1472, own_mtu: Some(("eth1".into(), 1500)), fitted: true };
        assert_eq!(
            fitted.to_string(),
            "1372 bytes, the least the ranks proposed, each what its interface's MTU carries up to 8972 (this rank: eth1, MTU 1500, proposed 1472)"
        );
        let unread = DatagramChoice { own_mtu: None, ..fitted.clone() };
        assert!(unread.to_string().ends_with("(this rank: MTU unreadable, proposed 1472)"), "{unread}");
        let set = DatagramChoice { bytes: 4000, most: 4000, proposed: 4000, own_mtu: None, fitted: false };
        assert_eq!(set.to_string(), "4000 bytes, as set");
    }

    #[test]
    fn every_rank_reaches_the_same_verdict_on_the_probes() {
        let group = SocketAddrV4::new(Ipv4Addr::new(239, 78, 1, 2), 24_001);
        let all = |heard: &[Heard]| heard.iter().flat_map(|heard| heard.encode()).collect::<Vec<u8>>();
        let fine = Heard { missing: 0, first_missing: 0 };
        assert_eq!(judge_probes(&all(&[fine, fine, fine]), group), Ok(()));
        let deaf = Heard { missing: 2, first_missing: 0 };
        assert_eq!(
            judge_probes(&all(&[fine, deaf, Heard { missing: 1, first_missing: 1 }]), group),
            Err(UdpSetupError::MulticastNotDelivered { rank: 1, unheard: 0, missing: 2, group })
        );
    }
}
