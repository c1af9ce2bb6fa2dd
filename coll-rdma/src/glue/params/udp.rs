//! The udp transport's parameters: the group range and port range are
//! text (`239.78.0.0/16`, `24000-24999`), parsed here and checked with the
//! backend's own `UdpConfig::problem`, so that the glue refuses exactly
//! what setup would refuse, and refuses it once, at start-up, with the
//! parameter's name, instead of failing every communicator.

use std::net::Ipv4Addr;

use btl_ibmc::udp::{Cipher, Protection};
use btl_ibmc::{CongestionConfig, UdpConfig, UdpFaults};

/// Validated settings of the udp transport.
#[derive(Clone, Debug, PartialEq)]
pub struct UdpSettings {
    /// `None`: the default interface (`udp_interface`'s help says which).
    pub interface: Option<String>,
    pub group_base: Ipv4Addr,
    pub group_prefix_len: u8,
    pub port_base: u16,
    pub port_count: u16,
    pub ttl: u32,
    /// UDP payload of the largest datagram, frame header included; None:
    /// what every rank's interface MTU carries, the least over ranks.
    pub datagram_bytes: Option<usize>,
    /// The initial window and threshold of rmcast's congestion control
    /// (fragments).
    pub cwnd_initial: usize,
    pub ssthresh_initial: usize,
    /// The bcast window and lazy-ACK interval over udp (fragments), in
    /// place of the general ones.
    pub window_slots: usize,
    pub ack_interval: usize,
    /// Percent of a window of fragments one receiver may report lost
    /// before the bcast's window halves (`CongestionConfig::loss_tolerance_percent`).
    pub loss_tolerance_percent: u32,
    /// How often the reliable channel's retransmission timeout and a bcast
    /// leaf's NACK repeat double while random loss defeats a repair
    /// (`UdpConfig::retransmit_doublings`, `CongestionConfig::nack_retry_doublings`).
    pub repair_backoff: u32,
    /// UDP GSO and GRO where the kernel offers them.
    pub segmentation_offload: bool,
    /// How frames are sealed on the wire.
    pub protection: Protection,
    /// The AEAD that seals them.
    pub cipher: Cipher,
    /// Testing: receive-side fault injection, in percent.
    pub loss_percent: u32,
    pub duplicate_percent: u32,
    pub reorder_percent: u32,
}

impl Default for UdpSettings {
    fn default() -> Self {
        let config = UdpConfig::default();
        let congestion = CongestionConfig::default();
        UdpSettings {
            interface: None,
            group_base: config.multicast_base,
            group_prefix_len: config.multicast_prefix_len,
            port_base: config.port_base,
            port_count: config.port_count,
            ttl: config.ttl,
            datagram_bytes: None,
            cwnd_initial: congestion.cwnd_initial,
            // Slow start up to the whole window until a loss says otherwise.
            ssthresh_initial: super::table::UDP_WINDOW as usize,
            window_slots: super::table::UDP_WINDOW as usize,
            ack_interval: super::table::UDP_ACK_INTERVAL as usize,
            loss_tolerance_percent: congestion.loss_tolerance_percent,
            repair_backoff: config.retransmit_doublings,
            segmentation_offload: config.segmentation_offload,
            protection: config.protection,
            cipher: config.cipher,
            loss_percent: 0,
            duplicate_percent: 0,
            reorder_percent: 0,
        }
    }
}

impl UdpSettings {
    /// The backend's configuration for one communicator: `multicast_id`
    /// names it, `interface` is this host's resolved address, and
    /// `fault_seed` seeds the testing-only fault injection (mixed with
    /// the rank by the backend).
    pub fn config(&self, multicast_id: u32, interface: Ipv4Addr, fault_seed: u64) -> UdpConfig {
        let percent = |p: u32| f64::from(p) / 100.0;
        UdpConfig {
            multicast_id,
            multicast_base: self.group_base,
            multicast_prefix_len: self.group_prefix_len,
            port_base: self.port_base,
            port_count: self.port_count,
            interface: Some(interface),
            ttl: self.ttl,
            datagram_bytes: self.datagram_bytes.unwrap_or(super::table::UDP_LARGEST_FITTED_DATAGRAM_BYTES),
            fit_interface_mtu: self.datagram_bytes.is_none(),
            segmentation_offload: self.segmentation_offload,
            retransmit_doublings: self.repair_backoff,
            protection: self.protection,
            cipher: self.cipher,
            faults: UdpFaults {
                drop: percent(self.loss_percent),
                duplicate: percent(self.duplicate_percent),
                reorder: percent(self.reorder_percent),
                seed: fault_seed,
                multicast_lost: false,
            },
            ..UdpConfig::default()
        }
    }
}

/// `coll_rdma_udp_group_base`: `ADDRESS/PREFIX`, or an address alone (one
/// group); the message says why not.
pub fn parse_group_base(text: &str) -> Result<(Ipv4Addr, u8), String> {
    let (address, prefix) = match text.trim().split_once('/') {
        Some((address, prefix)) => (address.trim(), Some(prefix.trim())),
        None => (text.trim(), None),
    };
    let invalid = |why: String| format!("coll_rdma_udp_group_base=\"{text}\" is invalid ({why})");
    let address: Ipv4Addr = address.parse().map_err(|_| invalid(format!("{address:?} is not an IPv4 address; ADDRESS/PREFIX, e.g. 239.78.0.0/16")))?;
    let prefix_len = match prefix {
        None => 32,
        Some(prefix) => prefix.parse::<u8>().ok().filter(|&n| n <= 32).ok_or_else(|| invalid(format!("the prefix length {prefix:?} is not 0..=32")))?,
    };
    let config = UdpConfig { multicast_base: address, multicast_prefix_len: prefix_len, ..UdpConfig::default() };
    match config.problem() {
        Some(problem) => Err(invalid(problem)),
        None => Ok((address, prefix_len)),
    }
}

/// `coll_rdma_udp_port_range`: `FIRST-LAST`, or one port, as (first, count).
pub fn parse_port_range(text: &str) -> Result<(u16, u16), String> {
    let invalid = |why: &str| format!("coll_rdma_udp_port_range=\"{text}\" is invalid ({why}; FIRST-LAST inside 1..=65535, e.g. 24000-24999)");
    let (first, last) = match text.trim().split_once('-') {
        Some((first, last)) => (first.trim(), last.trim()),
        None => (text.trim(), text.trim()),
    };
    let port = |text: &str| text.parse::<u16>().ok().filter(|&port| port > 0);
    let (Some(first), Some(last)) = (port(first), port(last)) else {
        return Err(invalid("not two ports"));
    };
    if last < first {
        return Err(invalid("the last port is below the first"));
    }
    // 1-65535 is 65535 ports, which a u16 holds.
    Ok((first, last - first + 1))
}

/// `coll_rdma_udp_protection` or `coll_rdma_verbs_protection` (`parameter`,
/// named by the message): encrypt, authenticate or none.
pub fn parse_protection(parameter: &str, text: &str) -> Result<Protection, String> {
    let wanted = text.trim().to_ascii_lowercase();
    Protection::ALL.into_iter().find(|protection| protection.name() == wanted).ok_or_else(|| {
        format!("{parameter}=\"{text}\" is unknown (encrypt, authenticate, none)")
    })
}

/// `coll_rdma_udp_cipher`: aegis-128l or aes-256-gcm.
pub fn parse_cipher(text: &str) -> Result<Cipher, String> {
    let wanted = text.trim().to_ascii_lowercase();
    Cipher::ALL.into_iter().find(|cipher| cipher.name() == wanted).ok_or_else(|| {
        let names: Vec<&str> = Cipher::ALL.iter().map(|cipher| cipher.name()).collect();
        format!("coll_rdma_udp_cipher=\"{text}\" is unknown ({})", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ciphers_parse_by_name_and_others_are_refused() {
        assert_eq!(parse_cipher("aegis-128l"), Ok(Cipher::Aegis128L));
        assert_eq!(parse_cipher(" AES-256-GCM "), Ok(Cipher::Aes256Gcm));
        let why = parse_cipher("aes").unwrap_err();
        assert!(why.contains("coll_rdma_udp_cipher=\"aes\" is unknown (aegis-128l, aes-256-gcm)"), "{why}");
        assert_eq!(UdpSettings::default().cipher, Cipher::Aegis128L, "the default");
    }

    #[test]
    fn protections_parse_by_name_and_others_are_refused() {
        assert_eq!(parse_protection("coll_rdma_udp_protection", "encrypt"), Ok(Protection::Encrypt));
        assert_eq!(parse_protection("coll_rdma_udp_protection", " Authenticate "), Ok(Protection::Authenticate));
        assert_eq!(parse_protection("coll_rdma_verbs_protection", "none"), Ok(Protection::None));
        let why = parse_protection("coll_rdma_verbs_protection", "aes").unwrap_err();
        assert!(why.contains("coll_rdma_verbs_protection=\"aes\" is unknown (encrypt, authenticate, none)"), "{why}");
    }

    #[test]
    fn group_bases_parse_with_or_without_a_prefix() {
        assert_eq!(parse_group_base("239.78.0.0/16"), Ok((Ipv4Addr::new(239, 78, 0, 0), 16)));
        assert_eq!(parse_group_base(" 239.1.2.3 / 24 "), Ok((Ipv4Addr::new(239, 1, 2, 3), 24)));
        assert_eq!(parse_group_base("239.1.2.3"), Ok((Ipv4Addr::new(239, 1, 2, 3), 32)));
    }

    #[test]
    fn bad_group_bases_are_refused_with_why() {
        let why = |text| parse_group_base(text).unwrap_err();
        assert!(why("").contains("is not an IPv4 address"), "{}", why(""));
        assert!(why("239.78.0/16").contains("\"239.78.0\" is not an IPv4 address"), "{}", why("239.78.0/16"));
        assert!(why("239.78.0.0/33").contains("prefix length \"33\""), "{}", why("239.78.0.0/33"));
        assert!(why("239.78.0.0/x").contains("prefix length"), "{}", why("239.78.0.0/x"));
        assert!(why("10.0.0.0/8").contains("not an IPv4 multicast address"), "{}", why("10.0.0.0/8"));
        assert!(why("224.0.0.0/16").contains("224.0.0.0/24 (link-local control)"), "{}", why("224.0.0.0/16"));
        assert!(why("232.1.0.0/16").contains("source-specific"), "{}", why("232.1.0.0/16"));
        assert!(why("224.0.0.0/3").contains("prefix length 3"), "{}", why("224.0.0.0/3"));
        assert!(why("10.0.0.0/8").starts_with("coll_rdma_udp_group_base=\"10.0.0.0/8\" is invalid ("));
    }

    #[test]
    fn port_ranges_parse_as_first_and_count() {
        assert_eq!(parse_port_range("24000-24999"), Ok((24_000, 1000)));
        assert_eq!(parse_port_range(" 5000 - 5000 "), Ok((5000, 1)));
        assert_eq!(parse_port_range("7000"), Ok((7000, 1)));
        assert_eq!(parse_port_range("1-65535"), Ok((1, 65_535)));
    }

    #[test]
    fn bad_port_ranges_are_refused_with_why() {
        for (text, why) in [
            ("", "not two ports"),
            ("0-10", "not two ports"),
            ("100-65536", "not two ports"),
            ("a-b", "not two ports"),
            ("24000-", "not two ports"),
            ("2000-1000", "the last port is below the first"),
        ] {
            let message = parse_port_range(text).unwrap_err();
            assert!(message.starts_with(&format!("coll_rdma_udp_port_range=\"{text}\" is invalid ({why};")), "{message}");
        }
    }

    #[test]
    fn every_parsed_range_is_one_the_backend_accepts() {
        for text in ["24000-24999", "1-65535", "65535", "1"] {
            let (port_base, port_count) = parse_port_range(text).unwrap();
            assert_eq!(UdpConfig { port_base, port_count, ..UdpConfig::default() }.problem(), None, "{text}");
        }
    }

    #[test]
    fn defaults_are_the_backends_and_its_config_carries_the_settings() {
        let settings = UdpSettings::default();
        let config = settings.config(7, Ipv4Addr::new(10, 0, 0, 1), 99);
        let expected = UdpConfig {
            multicast_id: 7,
            interface: Some(Ipv4Addr::new(10, 0, 0, 1)),
            datagram_bytes: btl_ibmc::udp::JUMBO_DATAGRAM_BYTES,
            ..UdpConfig::default()
        };
        assert_eq!(config, UdpConfig { faults: UdpFaults { seed: 99, ..UdpFaults::default() }, ..expected });
        assert!(config.fit_interface_mtu, "fitted to the MTU, up to a jumbo frame");
        let fixed = UdpSettings { datagram_bytes: Some(4000), ..UdpSettings::default() }.config(7, Ipv4Addr::LOCALHOST, 1);
        assert_eq!((fixed.datagram_bytes, fixed.fit_interface_mtu), (4000, false));
        let faulty = UdpSettings { loss_percent: 5, duplicate_percent: 100, reorder_percent: 20, ..settings }.config(7, Ipv4Addr::LOCALHOST, 1);
        assert_eq!((faulty.faults.drop, faulty.faults.duplicate, faulty.faults.reorder), (0.05, 1.0, 0.2));
        assert_eq!(faulty.problem(), None);
    }
}
