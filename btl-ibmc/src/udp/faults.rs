//! The receive-side fault injection of tests (and the planned `make check-udp`): each
//! arriving datagram is lost, duplicated or held back behind later ones,
//! on a seeded schedule, before the endpoint looks at it. Held datagrams
//! come out once enough later ones have passed, or at the end of a burst
//! (when the sockets are empty), so nothing is held for ever.

use std::net::SocketAddrV4;

use super::config::UdpFaults;
use super::stats::Counters;
use crate::rng::Rng;

/// How many later datagrams a held one lets pass at most.
pub const REORDER_SPAN: usize = 8;

/// A datagram as received: its bytes, its source, and whether it came to
/// the group socket (multicast) or the rank's own port.
pub(crate) struct Arrival {
    pub(crate) bytes: Vec<u8>,
    pub(crate) from: SocketAddrV4,
    pub(crate) to_group: bool,
}

pub(crate) struct FaultInjector {
    faults: UdpFaults,
    rng: Rng,
    /// Held arrivals, each with how many more arrivals may pass it.
    held: Vec<(usize, Arrival)>,
}

impl FaultInjector {
    pub(crate) fn new(faults: UdpFaults, rank: usize) -> Self {
        FaultInjector { faults, rng: Rng::new(faults.seed ^ crate::rng::splitmix64(rank as u64 + 1)), held: Vec::new() }
    }

    /// What becomes of `arrival`: appended to `out` zero, one or two
    /// times, now or later, with whatever held arrivals are due after it.
    pub(crate) fn admit(&mut self, arrival: Arrival, counters: &Counters, out: &mut Vec<Arrival>) {
        if self.rng.chance(self.faults.drop) {
            Counters::bump(&counters.injected_drops);
            return;
        }
        let twice = self.rng.chance(self.faults.duplicate);
        if self.rng.chance(self.faults.reorder) {
            Counters::bump(&counters.injected_reorders);
            let passing = 1 + self.rng.below(REORDER_SPAN as u64) as usize;
            if twice {
                Counters::bump(&counters.injected_duplicates);
                out.push(Arrival { bytes: arrival.bytes.clone(), from: arrival.from, to_group: arrival.to_group });
            }
            self.held.push((passing, arrival));
            return;
        }
        if twice {
            Counters::bump(&counters.injected_duplicates);
            out.push(Arrival { bytes: arrival.bytes.clone(), from: arrival.from, to_group: arrival.to_group });
        }
        out.push(arrival);
        self.release(false, out);
    }

    /// Lets out the held arrivals enough others have passed, or all of
    /// them at the end of a burst.
    pub(crate) fn release(&mut self, all: bool, out: &mut Vec<Arrival>) {
        let mut index = 0;
        while index < self.held.len() {
            let passing = &mut self.held[index].0;
            *passing = passing.saturating_sub(1);
            if all || *passing == 0 {
                out.push(self.held.remove(index).1);
            } else {
                index += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn arrival(index: u8) -> Arrival {
        Arrival { bytes: vec![index], from: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1), to_group: false }
    }

    #[test]
    fn injected_faults_lose_duplicate_and_reorder_but_never_invent() {
        let faults = UdpFaults { drop: 0.2, duplicate: 0.2, reorder: 0.3, seed: 7, ..UdpFaults::default() };
        let counters = Counters::default();
        let mut injector = FaultInjector::new(faults, 1);
        let mut out = Vec::new();
        for index in 0..200u8 {
            injector.admit(arrival(index), &counters, &mut out);
        }
        injector.release(true, &mut out);
        let stats = counters.snapshot();
        let seen: Vec<u8> = out.iter().map(|arrival| arrival.bytes[0]).collect();
        assert_eq!(seen.len() as u64, 200 - stats.injected_drops + stats.injected_duplicates);
        assert!(stats.injected_drops > 10 && stats.injected_duplicates > 10 && stats.injected_reorders > 10, "{stats:?}");
        assert!(seen.windows(2).any(|pair| pair[0] > pair[1]), "nothing was reordered");
        let distinct: std::collections::BTreeSet<u8> = seen.iter().copied().collect();
        assert_eq!(distinct.len() as u64, 200 - stats.injected_drops, "a datagram was lost that was not dropped, or invented");
        assert!(injector.held.is_empty());
    }

    #[test]
    fn without_faults_everything_passes_in_order() {
        let counters = Counters::default();
        let mut injector = FaultInjector::new(UdpFaults::default(), 0);
        let mut out = Vec::new();
        for index in 0..50u8 {
            injector.admit(arrival(index), &counters, &mut out);
        }
        assert_eq!(out.iter().map(|arrival| arrival.bytes[0]).collect::<Vec<_>>(), (0..50).collect::<Vec<u8>>());
    }
}
