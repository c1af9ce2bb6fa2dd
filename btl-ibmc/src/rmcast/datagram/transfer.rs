//! One message of the datagram flavour as resumable steps: a root's send
//! and a receiver's take, each cut at the one point where it waits (the
//! root: no credit for its next piece; a receiver: its next piece not
//! here). A step does every piece it can, takes in arrivals once when it
//! meets the wait, and returns; it never waits. The blocking `send` and
//! `receive` (in `mod.rs`) are these steps with a `Waiter` between them,
//! so both paths share one protocol: the same credit, parity, tail
//! repeats, flushes, ACKs and NACKs, and the same frames.
//!
//! Invariants:
//! * A step leaves nothing queued at the root: pieces are flushed before
//!   the stream is progressed (the sender's rule, `Sender::queue`) and
//!   before the step returns.
//! * A message's pieces are numbered by its root's stream when queued,
//!   not when the transfer is made: transfers of one stream must be
//!   stepped one at a time, in the communicator's call order (the
//!   caller's queue guarantees it), like the blocking calls.
//! * The parity plan is taken at the first step, when the message's turn
//!   has come, so it sees the NACKs of every message before it.

use std::time::Instant;

use super::DatagramFlavour;
use super::sender::Sender;
use crate::rmcast::repair::repeated;
use crate::rmcast::stats::RmcastStats;
use crate::rmcast::wire::{Frame, Protection, decode};
use crate::rmcast::protocol_error;
use crate::rmcast::transfer::Transfer;
use crate::transport::{Datagrams, ReliableChannel, TransportError, Windows};

impl DatagramFlavour {
    /// Queues and sends every piece of `message` the window has credit
    /// for; returns whether all are out. `message` is the one `transfer`
    /// was made for.
    pub(crate) fn step_send<T: Windows + Datagrams + ReliableChannel + ?Sized>(
        &mut self,
        transport: &T,
        transfer: &mut Transfer,
        message: &[u8],
        stats: &mut RmcastStats,
    ) -> Result<bool, TransportError> {
        let (count, piece_bytes) = (message.len().div_ceil(self.piece_bytes), self.piece_bytes);
        let tail_repeat = self.config.tail_repeat;
        let plan = match transfer.parity {
            Some(plan) => plan,
            None => *transfer.parity.insert(self.plan_parity(count)),
        };
        let protection = Protection { block_pieces: plan.block_pieces as u8, parity: plan.parity as u8 };
        for index in transfer.pieces_done..count {
            let offset = index * piece_bytes;
            let piece = &message[offset..(offset + piece_bytes).min(message.len())];
            if !self.sender().has_credit() && !self.find_credit(transport, transfer, stats)? {
                return Ok(false);
            }
            let sender = self.sender();
            sender.queue(message.len(), offset, piece, repeated(index, count, tail_repeat), protection, Instant::now());
            transfer.pieces_done = index + 1;
            if protection.is_some() && ((index + 1) % plan.block_pieces == 0 || index + 1 == count) {
                let first = index - index % plan.block_pieces;
                let block: Vec<&[u8]> = message[first * piece_bytes..(offset + piece.len())].chunks(piece_bytes).collect();
                sender.queue_parity(protection, first as u32, message.len(), &block, piece_bytes)?;
                // Out at once, before any piece of the next block: a
                // receiver's slots of this block's delivered pieces are
                // reused only by pieces W later (W >= a block), so they are
                // still held when the parity comes to rebuild from them.
                sender.flush(transport, stats)?;
            }
            if sender.queued() >= super::MOST_QUEUED_PIECES {
                sender.flush(transport, stats)?;
            }
        }
        self.sender().flush(transport, stats)?;
        Ok(true)
    }

    /// The window is full: sends what is queued, takes in arrivals (ACKs
    /// open it) and says whether there is credit now.
    fn find_credit<T: Windows + Datagrams + ReliableChannel + ?Sized>(
        &mut self,
        transport: &T,
        transfer: &mut Transfer,
        stats: &mut RmcastStats,
    ) -> Result<bool, TransportError> {
        self.sender().flush(transport, stats)?;
        self.progress(transport, stats)?;
        if self.sender().has_credit() {
            transfer.stalled = false;
            return Ok(true);
        }
        if !transfer.stalled {
            transfer.stalled = true;
            stats.window_full_stalls += 1;
            let me = self.me;
            tracing::debug!("rank {me}: window full, waiting for {}", self.sender().describe_full_window());
        }
        Ok(false)
    }

    /// Delivers every piece of `root`'s message that has arrived, in
    /// order, into `message`; returns whether all are in. Takes in
    /// arrivals once when the next piece is missing.
    pub(crate) fn step_receive<T: Windows + Datagrams + ReliableChannel + ?Sized>(
        &mut self,
        transport: &T,
        transfer: &mut Transfer,
        message: &mut [u8],
        stats: &mut RmcastStats,
    ) -> Result<bool, TransportError> {
        let (root, message_len, nonce, piece_bytes) = (transfer.root, message.len(), self.nonce, self.piece_bytes);
        let count = message_len.div_ceil(piece_bytes);
        let mut progressed = false;
        while transfer.pieces_done < count {
            if self.receiver(root).next_frame().is_none() {
                if progressed {
                    return Ok(false);
                }
                self.progress(transport, stats)?;
                progressed = true;
                continue;
            }
            let offset = transfer.pieces_done * piece_bytes;
            let piece = &mut message[offset..(offset + piece_bytes).min(message_len)];
            let receiver = self.receiver(root);
            let seq = receiver.delivered();
            let frame = receiver.next_frame().ok_or_else(|| protocol_error(root, seq, "vanished from its slot"))?;
            let Ok(Frame::Piece(header, payload)) = decode(frame, nonce) else {
                return Err(protocol_error(root, seq, "holds a frame that is not a piece"));
            };
            if header.seq != seq || header.message_len != message_len as u64 || header.offset != offset as u64 || payload.len() != piece.len() {
                return Err(TransportError::Failed(format!(
                    "bcast from root {root} disagrees on the message: piece {seq} is bytes {}..{} of {} at the root, \
                     this rank expects bytes {offset}..{} of {message_len}",
                    header.offset,
                    header.offset + payload.len() as u64,
                    header.message_len,
                    offset + piece.len()
                )));
            }
            piece.copy_from_slice(payload);
            receiver.delivered_one(transport, stats)?;
            transfer.pieces_done += 1;
        }
        Ok(true)
    }

    /// What `transfer` waits for, for a stalled wait or run.
    pub(crate) fn describe_transfer(&self, transfer: &Transfer) -> String {
        if transfer.root == self.me {
            return self.sender.as_ref().map_or_else(|| "nothing (no piece sent yet)".to_string(), Sender::describe_full_window);
        }
        match self.receivers.get(transfer.root).and_then(Option::as_ref) {
            Some(receiver) => format!("piece {} from root {} (pieces below {} have arrived)", receiver.delivered(), transfer.root, receiver.contiguous()),
            None => format!("the first piece from root {}", transfer.root),
        }
    }
}
