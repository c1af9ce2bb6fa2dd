//! The fabric's unreliable multicast: one queue per receiver, and a fault
//! decision per receiver copy, so each rank sees its own pattern of loss,
//! duplication and reordering, as with real multicast.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::config::FabricConfig;
use crate::poison::lock;
use super::stats::Counters;
use crate::rng::Rng;

/// How far back in a receiver's queue a reordered copy may land.
pub const REORDER_SPAN: usize = 8;

/// A datagram waiting in a receiver's queue, with the rank it came from.
type Arrival = (usize, Vec<u8>);

pub(crate) struct DatagramQueues {
    inboxes: Box<[Mutex<VecDeque<Arrival>>]>,
}

impl DatagramQueues {
    pub(crate) fn new(size: usize) -> Self {
        DatagramQueues { inboxes: (0..size).map(|_| Mutex::new(VecDeque::new())).collect() }
    }

    /// Hands a copy of `datagram` to every rank except `sender`, each copy
    /// independently subject to the configured faults.
    pub(crate) fn deliver(&self, sender: usize, datagram: &[u8], config: &FabricConfig, rng: &mut Rng, counters: &Counters) {
        Counters::bump(&counters.datagrams_sent);
        for (receiver, inbox) in self.inboxes.iter().enumerate() {
            if receiver == sender {
                continue;
            }
            Counters::bump(&counters.copies);
            if rng.chance(config.multicast_drop) {
                Counters::bump(&counters.dropped);
                continue;
            }
            let arrivals = if rng.chance(config.multicast_duplicate) {
                Counters::bump(&counters.duplicated);
                2
            } else {
                1
            };
            for _ in 0..arrivals {
                let overtake = rng.chance(config.multicast_reorder);
                let mut queue = lock(inbox);
                if overtake && !queue.is_empty() {
                    let back = 1 + rng.below(queue.len().min(REORDER_SPAN) as u64) as usize;
                    let position = queue.len() - back;
                    queue.insert(position, (sender, datagram.to_vec()));
                    Counters::bump(&counters.reordered);
                } else {
                    queue.push_back((sender, datagram.to_vec()));
                }
            }
        }
    }

    /// Puts `datagram` at the back of `receiver`'s queue as if `sender`
    /// had sent it, free of faults.
    pub(crate) fn inject(&self, receiver: usize, sender: usize, datagram: &[u8]) {
        lock(&self.inboxes[receiver]).push_back((sender, datagram.to_vec()));
    }

    pub(crate) fn take(&self, receiver: usize) -> Option<Arrival> {
        lock(&self.inboxes[receiver]).pop_front()
    }
}
