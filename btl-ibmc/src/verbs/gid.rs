//! Choosing the GID a port is addressed by. On RoCE the GID table holds one
//! entry per IP address and RoCE version; RoCE v2 with an IPv4-mapped GID is
//! the one routable over plain IP networks and the one rdma_cm multicast
//! joins use, so it is preferred. The GID type and its netdev are read from
//! sysfs, which every kernel with RDMA support provides.

use std::net::Ipv4Addr;

/// One GID table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GidEntry {
    pub(crate) index: u32,
    pub(crate) raw: [u8; 16],
}

impl GidEntry {
    pub(crate) fn is_zero(&self) -> bool {
        self.raw.iter().all(|&byte| byte == 0)
    }

    /// The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d).
    pub(crate) fn ipv4(&self) -> Option<Ipv4Addr> {
        ipv4_mapped(&self.raw)
    }
}

pub(crate) fn ipv4_mapped(raw: &[u8; 16]) -> Option<Ipv4Addr> {
    let mapped = raw[..10].iter().all(|&byte| byte == 0) && raw[10] == 0xff && raw[11] == 0xff;
    mapped.then(|| Ipv4Addr::new(raw[12], raw[13], raw[14], raw[15]))
}

/// Text form of a GID: IPv4-mapped ones as "::ffff:a.b.c.d", others as
/// eight colon-separated groups.
pub(crate) fn gid_text(raw: &[u8; 16]) -> String {
    if let Some(ipv4) = ipv4_mapped(raw) {
        return format!("::ffff:{ipv4}");
    }
    raw.chunks_exact(2).map(|pair| format!("{:02x}{:02x}", pair[0], pair[1])).collect::<Vec<_>>().join(":")
}

/// "RoCE v2", "IB/RoCE v1" or None when the kernel does not say.
pub(crate) fn gid_type(device: &str, port: u8, index: u32) -> Option<String> {
    read_sysfs(&format!("/sys/class/infiniband/{device}/ports/{port}/gid_attrs/types/{index}"))
}

/// The network device a RoCE GID belongs to (e.g. "eth0").
pub(crate) fn gid_netdev(device: &str, port: u8, index: u32) -> Option<String> {
    read_sysfs(&format!("/sys/class/infiniband/{device}/ports/{port}/gid_attrs/ndevs/{index}"))
}

fn read_sysfs(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The automatic choice among `entries` (non-zero GIDs in table order):
/// the first RoCE v2 IPv4-mapped one, else the first RoCE v2 one, else
/// index 0 (or the first entry when index 0 is empty).
pub(crate) fn choose_gid(entries: &[(GidEntry, Option<String>)]) -> Option<GidEntry> {
    let is_v2 = |kind: &Option<String>| kind.as_deref().is_some_and(|kind| kind.eq_ignore_ascii_case("RoCE v2"));
    entries
        .iter()
        .find(|(entry, kind)| is_v2(kind) && entry.ipv4().is_some())
        .or_else(|| entries.iter().find(|(_, kind)| is_v2(kind)))
        .or_else(|| entries.iter().find(|(entry, _)| entry.index == 0))
        .or_else(|| entries.first())
        .map(|(entry, _)| *entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapped(index: u32, last: u8) -> GidEntry {
        let mut raw = [0u8; 16];
        raw[10] = 0xff;
        raw[11] = 0xff;
        raw[12..].copy_from_slice(&[10, 77, 0, last]);
        GidEntry { index, raw }
    }

    fn link_local(index: u32) -> GidEntry {
        let mut raw = [0u8; 16];
        raw[0] = 0xfe;
        raw[1] = 0x80;
        raw[15] = 7;
        GidEntry { index, raw }
    }

    #[test]
    fn roce_v2_ipv4_mapped_gids_are_preferred() {
        let v1 = Some("IB/RoCE v1".to_string());
        let v2 = Some("RoCE v2".to_string());
        let table = [(link_local(0), v1.clone()), (link_local(1), v2.clone()), (mapped(2, 1), v1), (mapped(3, 1), v2)];
        assert_eq!(choose_gid(&table).map(|entry| entry.index), Some(3));
        assert_eq!(choose_gid(&table[..3]).map(|entry| entry.index), Some(1));
        assert_eq!(choose_gid(&[(link_local(0), None)]).map(|entry| entry.index), Some(0));
        assert_eq!(choose_gid(&[]), None);
    }

    #[test]
    fn gids_print_readably() {
        assert_eq!(gid_text(&mapped(0, 2).raw), "::ffff:10.77.0.2");
        assert_eq!(gid_text(&link_local(0).raw), "fe80:0000:0000:0000:0000:0000:0000:0007");
        assert_eq!(mapped(0, 9).ipv4(), Some(Ipv4Addr::new(10, 77, 0, 9)));
        assert_eq!(link_local(0).ipv4(), None);
    }
}
