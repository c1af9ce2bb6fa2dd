//! Everything a transport's RC side is made of. The order verbs needs at
//! teardown (queue pairs before their completion queues and protection
//! domain, registrations before their protection domain, all of them
//! before the context) follows from ownership, each object holding what
//! it was created in (see `context`), not from the order of these fields.

use std::sync::{Arc, OnceLock};

use super::completion::CompletionQueue;
use super::device::OpenDevice;
use super::memory::RegisteredBuffer;
use super::rc::RcQueuePair;
use crate::transport::TransportError;

/// Where a peer's window and completion sink are, from its setup record.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RemoteWindow {
    pub(crate) window_address: u64,
    pub(crate) window_rkey: u32,
    pub(crate) sink_address: u64,
    pub(crate) sink_rkey: u32,
    /// The most bytes one RDMA write to the peer carries: one path MTU
    /// where the device's writes are kept to a packet
    /// (`OpenDevice::single_packet_writes`), else unbounded.
    pub(crate) write_max_bytes: usize,
}

pub(crate) struct Links {
    /// Indexed by peer; None for this rank.
    pub(crate) queue_pairs: Box<[Option<RcQueuePair>]>,
    pub(crate) remotes: Box<[RemoteWindow]>,
    pub(crate) window: RegisteredBuffer,
    /// Outgoing put and reliable-message bytes wait here until the adapter
    /// has read them.
    pub(crate) staging: RegisteredBuffer,
    /// Eight bytes every peer may write: the target of the extra signalled
    /// write that asks for a completion when none is due.
    pub(crate) sink: RegisteredBuffer,
    /// `reliable_slots` receive buffers of `RELIABLE_SLOT_BYTES` for each
    /// peer with a queue pair, in the order of `receivers`.
    pub(crate) reliable_buffers: RegisteredBuffer,
    pub(crate) receivers: ReceiveSlots,
    pub(crate) send_cq: Arc<CompletionQueue>,
    pub(crate) recv_cq: Arc<CompletionQueue>,
    pub(crate) device: OpenDevice,
    pub(crate) reliable_slots: usize,
    /// The smallest inline capacity of all queue pairs.
    pub(crate) max_inline: usize,
}

impl Links {
    pub(crate) fn queue_pair(&self, peer: usize) -> Option<&RcQueuePair> {
        self.queue_pairs.get(peer).and_then(Option::as_ref)
    }
}

/// Which peer each run of `reliable_slots` receive buffers belongs to:
/// only peers with a queue pair get one, so the buffers grow with the
/// queue pairs (the leaders' only, where only leaders connect), not with
/// the communicator.
#[derive(Debug, Default)]
pub(crate) struct ReceiveSlots {
    /// Run index to peer, ascending.
    peers: Box<[usize]>,
}

impl ReceiveSlots {
    pub(crate) fn of<T>(queue_pairs: &[Option<T>]) -> Self {
        ReceiveSlots { peers: queue_pairs.iter().enumerate().filter(|(_, queue_pair)| queue_pair.is_some()).map(|(peer, _)| peer).collect() }
    }

    pub(crate) fn peers(&self) -> &[usize] {
        &self.peers
    }

    /// The peer whose run holds buffer `slot_index`, with `slots` per run.
    pub(crate) fn peer_of(&self, slot_index: usize, slots: usize) -> Option<usize> {
        self.peers.get(slot_index / slots.max(1)).copied()
    }
}

/// The first failure a completion reported; once set, every operation
/// answers it.
#[derive(Debug, Default)]
pub(crate) struct Failure(OnceLock<String>);

impl Failure {
    /// Keeps the first failure only: later ones are usually its echoes
    /// (flushed requests).
    pub(crate) fn record(&self, why: impl std::fmt::Display) {
        let why = why.to_string();
        if self.0.set(why.clone()).is_ok() {
            tracing::error!("verbs: {why}");
        }
    }

    pub(crate) fn check(&self) -> Result<(), TransportError> {
        match self.0.get() {
            Some(why) => Err(TransportError::Failed(why.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::ReceiveSlots;

    #[test]
    fn receive_buffers_are_kept_only_for_connected_peers_in_rank_order() {
        let connected = [None, Some(()), None, None, Some(()), Some(())];
        let receivers = ReceiveSlots::of(&connected);
        assert_eq!(receivers.peers(), &[1, 4, 5]);
        let slots = 3;
        let owners: Vec<_> = (0..10).map(|slot_index| receivers.peer_of(slot_index, slots)).collect();
        assert_eq!(owners, [Some(1), Some(1), Some(1), Some(4), Some(4), Some(4), Some(5), Some(5), Some(5), None]);
    }
}
