//! What a communicator asks of the udp backend: where its group lives, on
//! which interface, how big its datagrams and socket buffers are, how the
//! reliable channel retransmits, and (tests; the planned `make check-udp`)
//! which faults to inject.

use std::net::Ipv4Addr;
use std::time::Duration;

use super::seal::{Cipher, Protection};

/// Settings for [`establish`](super::establish). Every rank of a
/// communicator must pass the same values except `interface`, which is
/// per host; setup refuses a mismatch in what decides the wire format
/// (datagram size, multicast id, address range).
#[derive(Clone, Debug, PartialEq)]
pub struct UdpConfig {
    /// Identifies the communicator among all users of the network (the
    /// glue hashes the job and context id); mixed with rank 0's socket
    /// address, it picks the group and port and is checked on every frame.
    pub multicast_id: u32,
    /// First address of the IPv4 multicast range groups are taken from.
    pub multicast_base: Ipv4Addr,
    /// The range is `multicast_base/multicast_prefix_len`.
    pub multicast_prefix_len: u8,
    /// First UDP port of the range a communicator's group port is taken from.
    pub port_base: u16,
    /// Ports in that range.
    pub port_count: u16,
    /// IPv4 address of the interface to send, receive and join on
    /// ([`interface_address`](super::interface_address) resolves a name);
    /// None takes the address the kernel routes the group range through.
    pub interface: Option<Ipv4Addr>,
    /// Multicast TTL: 1 keeps datagrams on the local link.
    pub ttl: u32,
    /// UDP payload of the largest frame, header included. The default
    /// fills a 1500-byte Ethernet MTU (minus IPv4 and UDP headers), so
    /// nothing is fragmented by IP.
    pub datagram_bytes: usize,
    /// Lower `datagram_bytes`, on each rank, to what its interface's MTU
    /// carries without IP fragmentation (the MTU less the IPv4 and UDP
    /// headers); setup then takes the least over all ranks, so ranks on
    /// interfaces with different MTUs still agree. Off: `datagram_bytes`
    /// as given, which every rank must give alike.
    pub fit_interface_mtu: bool,
    /// Receive buffer asked of each socket (SO_RCVBUFFORCE where the
    /// process may, else SO_RCVBUF up to net.core.rmem_max). Bursts of
    /// a thousand full datagrams lost half of them with Linux's default
    /// 208 KiB and none with 16 MiB.
    pub receive_buffer_bytes: usize,
    /// Reliable-channel fragments one rank may have unacknowledged
    /// towards one peer.
    pub reliable_window: usize,
    /// The reliable channel's retransmission timeout towards a peer until
    /// a round trip to it is measured; then SRTT + 4 RTTVAR of its round
    /// trips (RFC 6298), kept within `retransmit_floor..=retransmit_ceiling`.
    /// When no ACK from the peer has advanced for that long, the oldest
    /// fragments it has not acknowledged go again, and the timeout doubles
    /// at each expiry until a fresh sample, at most `retransmit_doublings`
    /// times, never beyond 2 s (or the ceiling, if that is higher).
    pub retransmit_after: Duration,
    /// Well above a LAN's round trip, so that a peer merely slow to poll
    /// is not sent fragments again and again.
    pub retransmit_floor: Duration,
    /// The default is the default `retransmit_after`: an estimate that
    /// followed a loaded node's scheduling delays made repairs late
    /// (`reliable`'s module comment says by how much).
    pub retransmit_ceiling: Duration,
    /// How often the retransmission timeout doubles while a peer's ACKs
    /// stay away (0..=`MAX_REPEAT_DOUBLINGS`): 2 by default, at most 4x
    /// the round-trip estimate; 6 was the rule before issue 36. Random
    /// loss defeats a resend as often as the first send, so the doublings
    /// only space resends to a peer slow to be scheduled.
    pub retransmit_doublings: u32,
    /// Whether runs of multicast datagrams go out in one segmented send
    /// (UDP GSO) and arrive in one receive (UDP GRO) where the kernel
    /// offers it. On by default; either side works with the other's
    /// choice, since the datagrams on the wire are the same.
    pub segmentation_offload: bool,
    /// How frames are protected on the wire (`seal`): encrypted and
    /// authenticated by default. Every rank must choose alike.
    pub protection: Protection,
    /// The AEAD that seals them (AEGIS-128L by default). Every rank must
    /// choose alike.
    pub cipher: Cipher,
    /// Faults injected on receipt, before anything is checked; off by default.
    pub faults: UdpFaults,
}

/// Receive-side fault injection: each arriving datagram (multicast or
/// unicast, data or ACK) is lost, duplicated or held back behind up to
/// [`REORDER_SPAN`](super::REORDER_SPAN) later ones with these
/// probabilities, drawn from a generator seeded by `seed` and the rank.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UdpFaults {
    pub drop: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub seed: u64,
    /// Every datagram the group socket receives is lost, setup's probes
    /// included: a network that drops multicast, which setup must refuse.
    pub multicast_lost: bool,
}

impl UdpFaults {
    pub(crate) fn any(&self) -> bool {
        self.drop > 0.0 || self.duplicate > 0.0 || self.reorder > 0.0
    }
}

/// IPv4 (20) and UDP (8) headers: what an MTU carries of UDP payload is
/// the MTU less this.
pub const IPV4_UDP_HEADER_BYTES: usize = 28;
/// The UDP payload of a 1500-byte Ethernet MTU.
pub const ETHERNET_DATAGRAM_BYTES: usize = 1500 - IPV4_UDP_HEADER_BYTES;
/// The UDP payload of a 9000-byte MTU, the usual jumbo frame.
pub const JUMBO_DATAGRAM_BYTES: usize = 9000 - IPV4_UDP_HEADER_BYTES;

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            multicast_id: 0,
            multicast_base: Ipv4Addr::new(239, 78, 0, 0),
            multicast_prefix_len: 16,
            port_base: 24_000,
            port_count: 1000,
            interface: None,
            ttl: 1,
            datagram_bytes: ETHERNET_DATAGRAM_BYTES,
            fit_interface_mtu: true,
            receive_buffer_bytes: 16 << 20,
            reliable_window: 256,
            retransmit_after: Duration::from_millis(20),
            retransmit_floor: Duration::from_millis(2),
            retransmit_ceiling: Duration::from_millis(20),
            retransmit_doublings: crate::rmcast::DEFAULT_REPEAT_DOUBLINGS,
            segmentation_offload: true,
            protection: Protection::default(),
            cipher: Cipher::default(),
            faults: UdpFaults::default(),
        }
    }
}

impl UdpConfig {
    /// Why these settings cannot work, if they cannot.
    pub fn problem(&self) -> Option<String> {
        if !self.multicast_base.is_multicast() {
            return Some(format!("the multicast base {} is not an IPv4 multicast address", self.multicast_base));
        }
        if self.multicast_prefix_len < 4 || self.multicast_prefix_len > 32 {
            return Some(format!("the multicast prefix length {} is outside 4..=32 (224.0.0.0/4 is all of IPv4 multicast)", self.multicast_prefix_len));
        }
        if let Some(reserved) = self.reserved_overlap() {
            return Some(format!(
                "the multicast range {}/{} overlaps {reserved}, which is not for application data (use a range inside 239.0.0.0/8)",
                self.multicast_base, self.multicast_prefix_len
            ));
        }
        if self.port_base == 0 || self.port_count == 0 || u32::from(self.port_base) + u32::from(self.port_count) > 65_536 {
            return Some(format!("the port range {}+{} is not inside 1..=65535", self.port_base, self.port_count));
        }
        let least = super::frame::least_datagram_bytes(self.protection.overhead());
        if self.datagram_bytes < least || self.datagram_bytes > super::frame::MAX_UDP_PAYLOAD {
            return Some(format!("datagram_bytes {} must lie in {least}..={}", self.datagram_bytes, super::frame::MAX_UDP_PAYLOAD));
        }
        if self.ttl == 0 || self.ttl > 255 {
            return Some(format!("the multicast TTL {} is outside 1..=255", self.ttl));
        }
        if self.reliable_window == 0 {
            return Some("the reliable window must hold at least one fragment".into());
        }
        if self.retransmit_after.is_zero() || self.retransmit_floor.is_zero() {
            return Some("the retransmission timeout and its floor must be positive".into());
        }
        if self.retransmit_ceiling < self.retransmit_floor {
            return Some(format!(
                "the retransmission timeout's ceiling {:?} is below its floor {:?}",
                self.retransmit_ceiling, self.retransmit_floor
            ));
        }
        if self.retransmit_doublings > crate::rmcast::MAX_REPEAT_DOUBLINGS {
            return Some(format!(
                "the retransmission timeout may double at most {} times, not {}",
                crate::rmcast::MAX_REPEAT_DOUBLINGS,
                self.retransmit_doublings
            ));
        }
        for (name, p) in [("drop", self.faults.drop), ("duplicate", self.faults.duplicate), ("reorder", self.faults.reorder)] {
            if !(0.0..=1.0).contains(&p) {
                return Some(format!("the injected {name} probability {p} is not in [0, 1]"));
            }
        }
        if self.faults.drop >= 1.0 {
            return Some("an injected drop probability of 1 loses everything".into());
        }
        None
    }

    /// The reserved block the group range overlaps, if any: the link-local
    /// control block (224.0.0.1 is every host, 224.0.0.251 mDNS, ...),
    /// which a bcast would flood, and source-specific multicast, which an
    /// any-source join does not get.
    fn reserved_overlap(&self) -> Option<&'static str> {
        const RESERVED: [(Ipv4Addr, u8, &str); 2] = [
            (Ipv4Addr::new(224, 0, 0, 0), 24, "224.0.0.0/24 (link-local control)"),
            (Ipv4Addr::new(232, 0, 0, 0), 8, "232.0.0.0/8 (source-specific multicast)"),
        ];
        let span = |base: Ipv4Addr, prefix: u8| {
            let host = u32::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
            (u32::from(base) & !host, u32::from(base) | host)
        };
        let (first, last) = span(self.multicast_base, self.multicast_prefix_len);
        RESERVED.iter().find_map(|&(base, prefix, name)| {
            let (reserved_first, reserved_last) = span(base, prefix);
            (first <= reserved_last && reserved_first <= last).then_some(name)
        })
    }

    /// How the reliable channel times its retransmissions.
    pub(crate) fn retransmit_timing(&self) -> super::reliable::RetransmitTiming {
        super::reliable::RetransmitTiming {
            initial: self.retransmit_after,
            floor: self.retransmit_floor,
            ceiling: self.retransmit_ceiling,
            most_doublings: self.retransmit_doublings,
        }
    }

    /// The datagram size this rank proposes at setup, on an interface
    /// whose MTU is `mtu` (None: unknown, `datagram_bytes` stands).
    pub(crate) fn datagram_bytes_for_mtu(&self, mtu: Option<usize>) -> usize {
        match mtu {
            Some(mtu) if self.fit_interface_mtu => self.datagram_bytes.min(mtu.saturating_sub(IPV4_UDP_HEADER_BYTES)),
            _ => self.datagram_bytes,
        }
    }

    /// The group of the communicator whose multicast id is `id`.
    pub(crate) fn group_address(&self, id: u32) -> Ipv4Addr {
        crate::multicast_group::group_in_range(self.multicast_base, self.multicast_prefix_len, id)
    }

    /// The group port of the communicator whose multicast id is `id`:
    /// from other bits of the id than the address takes, so that two
    /// communicators whose addresses collide still likely differ here.
    pub(crate) fn group_port(&self, id: u32) -> u16 {
        let spread = crate::rng::splitmix64(u64::from(id)) % u64::from(self.port_count.max(1));
        self.port_base + spread as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_groups_and_ports_stay_in_their_ranges() {
        let config = UdpConfig::default();
        assert_eq!(config.problem(), None);
        let mut ports = std::collections::BTreeSet::new();
        for id in (0..2000u32).map(|i| i.wrapping_mul(0x9E37_79B9)) {
            let group = config.group_address(id);
            assert_eq!(group.octets()[..2], [239, 78], "{group} for id {id:#x}");
            let port = config.group_port(id);
            assert!((24_000..25_000).contains(&port), "port {port} for id {id:#x}");
            ports.insert(port);
        }
        assert!(ports.len() > 500, "2000 ids used only {} ports", ports.len());
    }

    #[test]
    fn bad_values_are_explained() {
        let problem = |config: UdpConfig| config.problem().unwrap_or_default();
        assert!(problem(UdpConfig { multicast_base: Ipv4Addr::new(10, 0, 0, 0), ..UdpConfig::default() }).contains("not an IPv4 multicast"));
        assert!(problem(UdpConfig { port_base: 65_000, port_count: 1000, ..UdpConfig::default() }).contains("port range"));
        let range = |octets: [u8; 4], prefix: u8| UdpConfig { multicast_base: Ipv4Addr::from(octets), multicast_prefix_len: prefix, ..UdpConfig::default() };
        // 224.0.0.0/16 would derive 224.0.0.1 (all hosts) and 224.0.0.251 (mDNS).
        assert!(problem(range([224, 0, 0, 0], 16)).contains("link-local"));
        assert!(problem(range([224, 0, 0, 251], 32)).contains("link-local"));
        assert!(problem(range([224, 0, 0, 0], 4)).contains("224.0.0.0/24"));
        assert!(problem(range([232, 1, 0, 0], 16)).contains("source-specific"));
        assert!(problem(range([232, 0, 0, 0], 5)).contains("source-specific"), "232/5 spans 232..239");
        for fine in [range([224, 0, 1, 0], 24), range([239, 0, 0, 0], 8), range([233, 0, 0, 0], 8), range([231, 255, 255, 255], 32)] {
            assert_eq!(fine.problem(), None, "{}/{}", fine.multicast_base, fine.multicast_prefix_len);
        }
        assert!(problem(UdpConfig { datagram_bytes: 10, ..UdpConfig::default() }).contains("datagram_bytes"));
        assert!(problem(UdpConfig { datagram_bytes: 70_000, ..UdpConfig::default() }).contains("datagram_bytes"));
        // The least datagram carries an ACK (40 bytes) and its tag.
        assert_eq!(problem(UdpConfig { datagram_bytes: 55, ..UdpConfig::default() }), "datagram_bytes 55 must lie in 56..=65507");
        assert_eq!(UdpConfig { datagram_bytes: 56, ..UdpConfig::default() }.problem(), None);
        let untagged = |bytes: usize| UdpConfig { datagram_bytes: bytes, protection: Protection::None, ..UdpConfig::default() }.problem();
        assert_eq!((untagged(39).is_some(), untagged(40)), (true, None));
        assert!(problem(UdpConfig { ttl: 0, ..UdpConfig::default() }).contains("TTL"));
        let ms = Duration::from_millis;
        assert!(problem(UdpConfig { retransmit_floor: ms(0), ..UdpConfig::default() }).contains("floor must be positive"));
        assert!(problem(UdpConfig { retransmit_floor: ms(30), ..UdpConfig::default() }).contains("ceiling 20ms is below its floor 30ms"));
        let faults = UdpFaults { drop: 1.5, ..UdpFaults::default() };
        assert!(problem(UdpConfig { faults, ..UdpConfig::default() }).contains("drop"));
    }

    #[test]
    fn the_datagram_fits_the_interface_mtu_unless_told_not_to() {
        let fitting = UdpConfig::default();
        assert_eq!(fitting.datagram_bytes_for_mtu(Some(1500)), 1472);
        assert_eq!(fitting.datagram_bytes_for_mtu(Some(1400)), 1372, "this VM's eth0");
        assert_eq!(fitting.datagram_bytes_for_mtu(Some(65_536)), 1472, "never above datagram_bytes (lo)");
        assert_eq!(fitting.datagram_bytes_for_mtu(None), 1472, "an unknown MTU leaves datagram_bytes");
        let jumbo = UdpConfig { datagram_bytes: JUMBO_DATAGRAM_BYTES, ..UdpConfig::default() };
        assert_eq!((jumbo.datagram_bytes_for_mtu(Some(9000)), jumbo.datagram_bytes_for_mtu(Some(65_536))), (8972, 8972));
        let fixed = UdpConfig { datagram_bytes: 4000, fit_interface_mtu: false, ..UdpConfig::default() };
        assert_eq!(fixed.datagram_bytes_for_mtu(Some(1500)), 4000);
    }
}
