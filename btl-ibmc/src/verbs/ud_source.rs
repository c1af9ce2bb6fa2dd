//! Which rank a multicast datagram came from, judged by what the adapter
//! saw rather than by what the datagram says. Anyone who can reach the
//! group address can put bytes on it; only the ranks of this communicator
//! send from the UD queue pairs, and from the addresses, exchanged at
//! setup. Free of verbs calls so it can be tested anywhere.

use super::gid::ipv4_mapped;

/// Bytes the adapter puts before every received UD payload.
pub(crate) const GRH_BYTES: usize = 40;

/// Where one rank's datagrams come from, as its setup records say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UdSource {
    /// Its UD queue pair.
    pub(crate) qp_num: u32,
    /// The IPv4 address its rdma_cm id is bound to (RoCE).
    pub(crate) ipv4: [u8; 4],
    /// Its port's GID (InfiniBand, where the GRH carries it as is).
    pub(crate) gid: [u8; 16],
}

/// The rank that sent a datagram whose header claims `claimed`, if the
/// completion's source queue pair and the packet's network header (`grh`,
/// present when the completion says so) match that rank's setup records;
/// None for this rank's own loopback copies and for everything else.
pub(crate) fn vouch(claimed: u32, me: usize, sources: &[UdSource], src_qp: u32, grh: Option<&[u8; GRH_BYTES]>) -> Option<usize> {
    let rank = usize::try_from(claimed).ok().filter(|&rank| rank != me)?;
    let source = sources.get(rank)?;
    if source.qp_num != src_qp {
        return None;
    }
    let Some(grh) = grh else { return Some(rank) };
    let from_source = if grh[20] >> 4 == 4 {
        // RoCE v2 over IPv4: the last 20 bytes hold the IPv4 header.
        grh[32..36] == source.ipv4
    } else {
        let mut sgid = [0u8; 16];
        sgid.copy_from_slice(&grh[8..24]);
        match ipv4_mapped(&sgid) {
            Some(address) => address.octets() == source.ipv4,
            None => sgid == source.gid,
        }
    };
    from_source.then_some(rank)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources() -> Vec<UdSource> {
        (0..3u8)
            .map(|rank| UdSource { qp_num: 0x100 + u32::from(rank), ipv4: [10, 0, 0, 10 + rank], gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, rank] })
            .collect()
    }

    /// A RoCE v2 receive buffer: 20 unused bytes, then the IPv4 header.
    fn roce_v2(from: [u8; 4]) -> [u8; GRH_BYTES] {
        let mut grh = [0u8; GRH_BYTES];
        grh[20] = 0x45;
        grh[32..36].copy_from_slice(&from);
        grh
    }

    /// A GRH (InfiniBand, RoCE v1) with source GID `sgid`.
    fn grh(sgid: [u8; 16]) -> [u8; GRH_BYTES] {
        let mut grh = [0u8; GRH_BYTES];
        grh[0] = 0x60;
        grh[8..24].copy_from_slice(&sgid);
        grh
    }

    #[test]
    fn only_the_claimed_ranks_queue_pair_and_address_are_vouched_for() {
        let sources = sources();
        assert_eq!(vouch(1, 0, &sources, 0x101, Some(&roce_v2([10, 0, 0, 11]))), Some(1));
        assert_eq!(vouch(1, 0, &sources, 0x102, Some(&roce_v2([10, 0, 0, 11]))), None, "another queue pair");
        assert_eq!(vouch(1, 0, &sources, 0x101, Some(&roce_v2([10, 0, 0, 99]))), None, "another host, same queue pair number");
        assert_eq!(vouch(2, 0, &sources, 0x101, Some(&roce_v2([10, 0, 0, 11]))), None, "rank 1 claiming to be rank 2");
        assert_eq!(vouch(0, 0, &sources, 0x100, Some(&roce_v2([10, 0, 0, 10]))), None, "own loopback copy");
        assert_eq!(vouch(7, 0, &sources, 0x101, None), None, "no such rank");
        assert_eq!(vouch(2, 0, &sources, 0x102, Some(&grh(sources[2].gid))), Some(2), "InfiniBand");
        assert_eq!(vouch(2, 0, &sources, 0x102, Some(&grh(sources[1].gid))), None, "InfiniBand, another port");
        let mut mapped = [0u8; 16];
        mapped[10..].copy_from_slice(&[0xff, 0xff, 10, 0, 0, 12]);
        assert_eq!(vouch(2, 1, &sources, 0x102, Some(&grh(mapped))), Some(2), "RoCE v1 with an IPv4-mapped GID");
        mapped[15] = 13;
        assert_eq!(vouch(2, 1, &sources, 0x102, Some(&grh(mapped))), None);
        assert_eq!(vouch(2, 1, &sources, 0x102, None), Some(2), "no GRH: the queue pair alone");
    }
}
