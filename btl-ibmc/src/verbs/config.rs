//! What a communicator asks of the verbs backend: which device, port and
//! GID, how much to pre-register, and which multicast group to join.

use std::net::Ipv4Addr;
use std::time::Duration;

pub use crate::multicast_group::multicast_id_of;
use crate::seal::Protection;

/// Settings for [`establish`](super::establish) and [`probe`](super::probe).
/// Every rank of a communicator must pass the same values except `device`,
/// `port`, `gid_index` and `local_address`, which are per host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerbsConfig {
    /// RDMA device name (e.g. "mlx5_0", "rxe0"); None takes the first device.
    pub device: Option<String>,
    /// Port of that device, counted from 1.
    pub port: u8,
    /// GID table index; None picks the first RoCE v2 IPv4-mapped GID, or
    /// index 0 when there is none (InfiniBand, RoCE v1 only).
    pub gid_index: Option<u32>,

    /// Whether to try UD multicast at all.
    pub multicast: bool,
    /// Identifies the communicator among all users of the fabric; it picks
    /// the multicast group and is checked on every datagram, so two
    /// communicators that land on the same group address still do not see
    /// each other's datagrams. Mix the job id in when deriving it.
    pub multicast_id: u32,
    /// First address of the IPv4 multicast range groups are taken from.
    pub multicast_base: Ipv4Addr,
    /// The range is `multicast_base/multicast_prefix_len`; the id's low
    /// `32 - prefix_len` bits select the group inside it.
    pub multicast_prefix_len: u8,
    /// IPv4 address the rdma_cm id binds to for the multicast join; None
    /// takes the address in the chosen GID (RoCE v2 IPv4-mapped GIDs).
    pub local_address: Option<Ipv4Addr>,
    /// How long to wait for the join to complete (a subnet manager may
    /// answer slowly on InfiniBand; RoCE joins complete locally).
    pub join_timeout: Duration,

    /// Bytes of registered staging memory outgoing put data is copied into.
    pub staging_bytes: usize,
    /// Every this many work requests on a queue pair, one asks for a
    /// completion; the others are covered by it.
    pub signal_interval: u32,
    /// Send-queue depth of each RC queue pair.
    pub send_queue_depth: u32,
    /// Receive buffers pre-posted per peer for the reliable channel.
    pub reliable_receive_slots: u32,
    /// Receive buffers pre-posted on the multicast queue pair.
    pub multicast_receive_slots: u32,
    /// How multicast datagrams are sealed (docs/security.md): encrypted
    /// and authenticated by default, so that others who can open the
    /// device and join the group neither read nor forge bcast pieces.
    pub protection: Protection,
}

impl Default for VerbsConfig {
    fn default() -> Self {
        VerbsConfig {
            device: None,
            port: 1,
            gid_index: None,
            multicast: true,
            multicast_id: 0,
            multicast_base: Ipv4Addr::new(239, 77, 0, 0),
            multicast_prefix_len: 16,
            local_address: None,
            join_timeout: Duration::from_secs(5),
            staging_bytes: 4 << 20,
            signal_interval: 16,
            send_queue_depth: 256,
            reliable_receive_slots: 32,
            multicast_receive_slots: 256,
            protection: Protection::Encrypt,
        }
    }
}

impl VerbsConfig {
    /// The IPv4 multicast group of this communicator.
    pub fn multicast_group(&self) -> Ipv4Addr {
        crate::multicast_group::group_in_range(self.multicast_base, self.multicast_prefix_len, self.multicast_id)
    }

    /// Why these settings cannot work, if they cannot.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.port == 0 {
            return Some("port numbers start at 1".into());
        }
        if self.signal_interval == 0 || self.signal_interval * 2 > self.send_queue_depth {
            return Some(format!(
                "signal_interval ({}) must be at least 1 and at most half of send_queue_depth ({})",
                self.signal_interval, self.send_queue_depth
            ));
        }
        if self.staging_bytes < super::staging::MIN_STAGING_BYTES {
            return Some(format!("staging_bytes must be at least {}", super::staging::MIN_STAGING_BYTES));
        }
        if self.reliable_receive_slots == 0 {
            return Some("reliable_receive_slots must be at least 1".into());
        }
        if self.multicast && !self.multicast_base.is_multicast() {
            return Some(format!("multicast_base {} is not an IPv4 multicast address", self.multicast_base));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_keeps_the_base_prefix_and_takes_the_id_low_bits() {
        let mut config = VerbsConfig { multicast_id: 0x0001_0203, ..VerbsConfig::default() };
        assert_eq!(config.multicast_group(), Ipv4Addr::new(239, 77, 2, 3));
        config.multicast_prefix_len = 8;
        config.multicast_base = Ipv4Addr::new(239, 0, 0, 0);
        assert_eq!(config.multicast_group(), Ipv4Addr::new(239, 1, 2, 3));
        config.multicast_prefix_len = 32;
        assert_eq!(config.multicast_group(), Ipv4Addr::new(239, 0, 0, 0));
    }

    #[test]
    fn the_defaults_are_valid_and_bad_values_are_explained() {
        assert_eq!(VerbsConfig::default().problem(), None);
        let bad = VerbsConfig { signal_interval: 200, ..VerbsConfig::default() };
        assert!(bad.problem().is_some_and(|why| why.contains("signal_interval")));
        let bad = VerbsConfig { multicast_base: Ipv4Addr::new(10, 0, 0, 0), ..VerbsConfig::default() };
        assert!(bad.problem().is_some_and(|why| why.contains("not an IPv4 multicast")));
    }
}
