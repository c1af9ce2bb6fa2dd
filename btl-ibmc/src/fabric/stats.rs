//! Counters of what the fabric did, for tests that check fault injection
//! happened at the configured rates and that nothing was lost or invented.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of the whole fabric's counters (all ranks together).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// `multicast` calls that were accepted.
    pub datagrams_sent: u64,
    /// Receiver copies those calls produced (sent × other ranks).
    pub copies: u64,
    /// Copies lost.
    pub dropped: u64,
    /// Copies delivered a second time.
    pub duplicated: u64,
    /// Copies that overtook an earlier datagram in a receiver's queue.
    pub reordered: u64,
    /// Datagrams taken by `poll_multicast`.
    pub datagrams_received: u64,
    /// Messages handed to `send_reliable`.
    pub reliable_sent: u64,
    /// Puts (data or flag) between ranks of different nodes
    /// (`FabricConfig::nodes`).
    pub inter_node_puts: u64,
    /// Puts between ranks of one node, or every put without nodes.
    pub intra_node_puts: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) datagrams_sent: AtomicU64,
    pub(crate) copies: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) duplicated: AtomicU64,
    pub(crate) reordered: AtomicU64,
    pub(crate) datagrams_received: AtomicU64,
    pub(crate) reliable_sent: AtomicU64,
    pub(crate) inter_node_puts: AtomicU64,
    pub(crate) intra_node_puts: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> FabricStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        FabricStats {
            datagrams_sent: read(&self.datagrams_sent),
            copies: read(&self.copies),
            dropped: read(&self.dropped),
            duplicated: read(&self.duplicated),
            reordered: read(&self.reordered),
            datagrams_received: read(&self.datagrams_received),
            reliable_sent: read(&self.reliable_sent),
            inter_node_puts: read(&self.inter_node_puts),
            intra_node_puts: read(&self.intra_node_puts),
        }
    }
}
