//! The receiving side of the reliable channel. Each RC queue pair has
//! `reliable_slots` receive buffers of `RELIABLE_SLOT_BYTES` posted; a
//! message lands in the next one in order, and RC delivers each exactly
//! once and in order per pair. A sender finding no buffer posted is made
//! to retry by the adapter (RNR retry without limit), which is the
//! channel's only flow control.
//!
//! Arrived messages are copied out of their buffers and the buffers are
//! reposted at once, during `progress` as well as `poll_reliable`: a
//! receiver that only waits for a flag must not stall a peer whose flag
//! write is queued behind a send to it.
//!
//! Every message arrives sealed with its length and a CRC
//! (`reliable_frame`); one that does not open is never delivered: it fails
//! the transport, so the collective waiting for it returns an error.

use std::collections::VecDeque;

use super::RELIABLE_SLOT_BYTES;
use super::completion::Completion;
use super::error::{VerbsError, VerbsSetupError};
use super::links::{Failure, Links};
use super::reliable_frame;
use super::work_request::{RecvRequest, Segment};

#[derive(Default)]
pub(crate) struct ReliableInbox {
    /// Messages taken off the adapter but not yet asked for: (sender, bytes).
    arrived: VecDeque<(usize, Vec<u8>)>,
    /// Emptied message vectors, reused to spare allocations.
    spare: Vec<Vec<u8>>,
    completions: Vec<Completion>,
}

impl ReliableInbox {
    /// A message to this rank itself, which never touches the adapter.
    pub(crate) fn push_own(&mut self, rank: usize, message: &[u8]) {
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(message);
        self.arrived.push_back((rank, bytes));
    }

    /// The oldest arrived message, into `out` (whose old buffer is kept for reuse).
    pub(crate) fn take(&mut self, links: &Links, failure: &Failure, out: &mut Vec<u8>) -> Option<usize> {
        if self.arrived.is_empty() {
            self.drain(links, failure);
        }
        let (sender, mut bytes) = self.arrived.pop_front()?;
        std::mem::swap(out, &mut bytes);
        bytes.clear();
        self.spare.push(bytes);
        Some(sender)
    }

    /// Copies every arrived message out and reposts its buffer.
    pub(crate) fn drain(&mut self, links: &Links, failure: &Failure) {
        loop {
            if let Err(why) = links.recv_cq.poll(&mut self.completions) {
                failure.record(why);
                return;
            }
            if self.completions.is_empty() {
                return;
            }
            for index in 0..self.completions.len() {
                let completion = self.completions[index];
                let slot_index = completion.wr_id as usize;
                let Some(sender) = links.receivers.peer_of(slot_index, links.reliable_slots) else {
                    failure.record(format!("a receive completion names buffer {slot_index}, which this rank never posted"));
                    continue;
                };
                if !completion.succeeded() {
                    failure.record(format!("a reliable message from rank {sender} failed: {}", completion.status_text()));
                    continue;
                }
                let len = (completion.byte_len as usize).min(RELIABLE_SLOT_BYTES);
                let mut bytes = self.spare.pop().unwrap_or_default();
                bytes.resize(len, 0);
                links.reliable_buffers.read_at(slot_index * RELIABLE_SLOT_BYTES, &mut bytes);
                if let Err(why) = post_receive(links, slot_index) {
                    failure.record(why);
                }
                match reliable_frame::open(&bytes) {
                    Ok(message) => {
                        let message_len = message.len();
                        bytes.truncate(message_len);
                        self.arrived.push_back((sender, bytes));
                    }
                    Err(damage) => {
                        failure.record(format!(
                            "a reliable message from rank {sender} arrived damaged ({damage}): the adapter delivered \
                             bytes its sender did not post, so this transport stops rather than use them"
                        ));
                        self.spare.push(bytes);
                    }
                }
            }
        }
    }
}

/// Posts every receive buffer of every queue pair (during setup).
pub(crate) fn post_all_receives(links: &Links) -> Result<(), VerbsSetupError> {
    for run in 0..links.receivers.peers().len() {
        for slot in 0..links.reliable_slots {
            post_receive(links, run * links.reliable_slots + slot)
                .map_err(|why| VerbsSetupError::Verbs { call: "ibv_post_recv", errno: 0, detail: why.to_string() })?;
        }
    }
    Ok(())
}

fn post_receive(links: &Links, slot_index: usize) -> Result<(), VerbsError> {
    let peer = links.receivers.peer_of(slot_index, links.reliable_slots);
    let Some(queue_pair) = peer.and_then(|peer| links.queue_pair(peer)) else {
        return Err(VerbsError::NoReceiveSlot { slot: slot_index });
    };
    let mut request = RecvRequest::new(
        slot_index as u64,
        Segment {
            address: links.reliable_buffers.address() + (slot_index * RELIABLE_SLOT_BYTES) as u64,
            len: RELIABLE_SLOT_BYTES as u32,
            lkey: links.reliable_buffers.lkey(),
        },
    );
    // SAFETY: the slot lies inside the registered receive buffers, and
    // nothing reads it until this receive's completion is polled.
    unsafe { queue_pair.post_recv(&mut request) }
}
