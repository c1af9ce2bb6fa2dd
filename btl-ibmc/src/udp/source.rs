//! Which rank a datagram came from, judged by its source address rather
//! than by what it says. Anyone who can reach the group or a rank's port
//! can send bytes there; only this communicator's ranks send from the
//! socket addresses exchanged at setup.

use std::net::SocketAddrV4;
use std::sync::atomic::AtomicU64;

use super::stats::Counters;

/// What to make of a datagram that claims to come from rank `claimed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// That rank, from its own socket.
    Rank(usize),
    /// This rank's own multicast, looped back.
    OwnCopy,
    /// Not from the rank it names (or from no rank at all).
    Stranger,
}

pub(crate) fn origin(claimed: u32, from: SocketAddrV4, me: usize, addresses: &[SocketAddrV4]) -> Origin {
    let Ok(rank) = usize::try_from(claimed) else { return Origin::Stranger };
    match addresses.get(rank) {
        Some(&address) if address == from && rank == me => Origin::OwnCopy,
        Some(&address) if address == from => Origin::Rank(rank),
        _ => Origin::Stranger,
    }
}

/// Every rank's socket address, indexed by rank (it derefs to that
/// slice), with a sorted copy so that asking whether a datagram came from
/// any rank costs O(log ranks), not a scan a stranger's flood could drive.
pub(crate) struct RankAddresses {
    by_rank: Vec<SocketAddrV4>,
    sorted: Vec<SocketAddrV4>,
}

impl RankAddresses {
    pub(crate) fn new(by_rank: Vec<SocketAddrV4>) -> Self {
        let mut sorted = by_rank.clone();
        sorted.sort_unstable();
        RankAddresses { by_rank, sorted }
    }

    /// Whether some rank's socket is bound to `address`.
    pub(crate) fn contains(&self, address: &SocketAddrV4) -> bool {
        self.sorted.binary_search(address).is_ok()
    }
}

impl std::ops::Deref for RankAddresses {
    type Target = [SocketAddrV4];

    fn deref(&self) -> &[SocketAddrV4] {
        &self.by_rank
    }
}

/// The counter for a datagram too broken to name its sender (no header,
/// or longer than any frame): malformed only when it came from one of
/// this communicator's sockets (a bug of ours), a stranger's otherwise.
/// So what other jobs or runs send never counts as this job's malformed.
pub(crate) fn unreadable_counter<'a>(counters: &'a Counters, from: SocketAddrV4, addresses: &RankAddresses) -> &'a AtomicU64 {
    if addresses.contains(&from) { &counters.malformed_dropped } else { &counters.strangers_dropped }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn only_a_ranks_own_address_and_port_vouch_for_it() {
        let at = |host: u8, port: u16| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, host), port);
        let addresses = [at(1, 5000), at(1, 5001), at(2, 5000)];
        assert_eq!(origin(1, at(1, 5001), 0, &addresses), Origin::Rank(1));
        assert_eq!(origin(2, at(2, 5000), 0, &addresses), Origin::Rank(2));
        assert_eq!(origin(0, at(1, 5000), 0, &addresses), Origin::OwnCopy);
        assert_eq!(origin(1, at(1, 5000), 0, &addresses), Origin::Stranger, "rank 0 claiming to be rank 1");
        assert_eq!(origin(1, at(1, 5002), 0, &addresses), Origin::Stranger, "another port of the same host");
        assert_eq!(origin(2, at(3, 5000), 0, &addresses), Origin::Stranger, "another host, same port");
        assert_eq!(origin(3, at(2, 5000), 0, &addresses), Origin::Stranger, "no such rank");
        assert_eq!(origin(u32::MAX, at(2, 5000), 0, &addresses), Origin::Stranger);
    }

    #[test]
    fn unreadable_datagrams_are_malformed_only_from_a_ranks_socket() {
        let at = |host: u8, port: u16| SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, host), port);
        // Out of order, so that the sorted copy differs from the ranks' order.
        let addresses = RankAddresses::new(vec![at(2, 5000), at(1, 5000), at(1, 4000)]);
        let counters = Counters::default();
        assert!(std::ptr::eq(unreadable_counter(&counters, at(1, 4000), &addresses), &counters.malformed_dropped));
        assert!(std::ptr::eq(unreadable_counter(&counters, at(1, 5000), &addresses), &counters.malformed_dropped));
        assert!(std::ptr::eq(unreadable_counter(&counters, at(2, 5000), &addresses), &counters.malformed_dropped));
        assert!(std::ptr::eq(unreadable_counter(&counters, at(2, 5001), &addresses), &counters.strangers_dropped));
        assert!(std::ptr::eq(unreadable_counter(&counters, at(3, 5000), &addresses), &counters.strangers_dropped));
    }
}
