//! Reliable multicast where every rank maps every window (shared memory):
//! the root writes each piece once into a slot of its own window and every
//! reader copies it straight out. Nothing can be lost, duplicated or
//! reordered, so there are no retransmissions and no co-roots: the only
//! protocol left is flow control.
//!
//! * Slot of piece s = s mod W. The root writes the message length and
//!   offset words, then the payload, then the flag s + 1 (release).
//! * A reader waits until the flag reads s + 1 (acquire), copies the piece
//!   out, and counts it delivered. Its ACK line in the root's window
//!   carries its delivered count, written lazily (`LazyAck`).
//! * Credit rule: the root writes piece s only when every reader's line is
//!   above s - W, i.e. every reader has copied out piece s - W, the slot's
//!   previous occupant. A reader's line never exceeds what it has copied,
//!   so no slot is rewritten under a reader. A reader that nevertheless
//!   sees a flag beyond s + 1, or a flag that changed while it copied,
//!   reports an overrun.
//! * Send and receive are steps cut at their one wait each (`step_send`:
//!   no credit for the next piece; `step_receive`: the next piece's flag
//!   not up), for a resumable bcast; the blocking `send` and `receive`
//!   are the same loops (`write_pieces`, `copy_pieces`) waiting there. Readers' ACKs need no
//!   timer to keep a root moving: M <= W (`ack`), so a step that never
//!   progresses still acknowledges enough; the timed ACKs only settle a
//!   burst's tail for `drain`.

use std::time::Instant;

use super::ack::LazyAck;
use super::config::RmcastConfig;
use super::region::SharedRegion;
use super::stats::RmcastStats;
use super::transfer::Transfer;
use crate::padded::put_word_padded;
use crate::transport::{PeerReads, TransportError};

fn write_if_changed<T: PeerReads + ?Sized>(transport: &T, me: usize, word: usize, value: u64) -> Result<(), TransportError> {
    if transport.local_flag(word) != value {
        transport.put_flag(me, word, value)?;
    }
    Ok(())
}

/// What the send's and the receive's loop do where they would wait.
#[derive(Clone, Copy)]
enum Meet {
    /// Return, for the next step (a resumable run).
    Poll,
    /// Wait there (the blocking call).
    Wait,
}

struct Reader {
    delivered: u64,
    ack: LazyAck,
}

pub(crate) struct SharedFlavour {
    me: usize,
    size: usize,
    config: RmcastConfig,
    region: SharedRegion,
    next_seq: u64,
    /// The least reader line seen last time they were read.
    floor: u64,
    /// Indexed by root.
    readers: Vec<Option<Reader>>,
}

impl SharedFlavour {
    pub(crate) fn new(me: usize, size: usize, region_offset: usize, config: RmcastConfig) -> Self {
        let region = SharedRegion::new(region_offset, size, &config);
        let floor = if size > 1 { 0 } else { u64::MAX };
        SharedFlavour { me, size, config, region, next_seq: 0, floor, readers: (0..size).map(|_| None).collect() }
    }

    pub(crate) fn piece_bytes(&self) -> usize {
        self.config.slot_bytes
    }

    fn has_credit(&self) -> bool {
        self.next_seq < self.floor.saturating_add(self.config.window())
    }

    fn read_floor<T: PeerReads + ?Sized>(&mut self, transport: &T) {
        let lines = (0..self.size).filter(|&reader| reader != self.me).map(|reader| transport.local_flag(self.region.ack_line(reader)));
        self.floor = lines.min().unwrap_or(u64::MAX);
    }

    /// The blocking send: `step_send`'s loop, waiting for credit where a
    /// step would return.
    pub(crate) fn send<T: PeerReads + ?Sized>(&mut self, transport: &T, message: &[u8], stats: &mut RmcastStats) -> Result<(), TransportError> {
        let mut transfer = Transfer::new(self.me, message.len());
        self.write_pieces(transport, &mut transfer, message, stats, Meet::Wait).map(|_| ())
    }

    /// Writes every piece of `message` the ring has credit for, rereading
    /// the readers' lines once where the cached floor says it is full;
    /// returns whether every piece is written. Never waits.
    pub(crate) fn step_send<T: PeerReads + ?Sized>(
        &mut self,
        transport: &T,
        transfer: &mut Transfer,
        message: &[u8],
        stats: &mut RmcastStats,
    ) -> Result<bool, TransportError> {
        self.write_pieces(transport, transfer, message, stats, Meet::Poll)
    }

    /// The send's one loop, for both: where the ring is full, a step
    /// returns (`Meet::Poll`) and the blocking send waits (`Meet::Wait`).
    /// Inlined into each, so that the blocking send pays nothing for the
    /// step (a call of its own cost it 30 of about 830 instructions per
    /// 4-byte bcast at np=2, callgrind).
    #[inline(always)]
    fn write_pieces<T: PeerReads + ?Sized>(
        &mut self,
        transport: &T,
        transfer: &mut Transfer,
        message: &[u8],
        stats: &mut RmcastStats,
        meet: Meet,
    ) -> Result<bool, TransportError> {
        let (me, piece_bytes) = (self.me, self.config.slot_bytes);
        let count = message.len().div_ceil(piece_bytes);
        for index in transfer.pieces_done..count {
            if !self.has_credit() {
                self.read_floor(transport);
                if !self.has_credit() {
                    if !transfer.stalled {
                        transfer.stalled = true;
                        stats.window_full_stalls += 1;
                        tracing::debug!("rank {me}: shared-window ring full at piece {}", self.next_seq);
                    }
                    match meet {
                        Meet::Poll => return Ok(false),
                        Meet::Wait => self.wait_for_credit(transport, stats)?,
                    }
                }
            }
            let offset = index * piece_bytes;
            let piece = &message[offset..(offset + piece_bytes).min(message.len())];
            let seq = self.next_seq;
            // Readers poll the flag in the same line as these words: every
            // store there can pull the line back from them, so a word that
            // already holds the value (back-to-back messages of one size)
            // is left alone.
            write_if_changed(transport, me, self.region.message_len_word(seq), message.len() as u64)?;
            write_if_changed(transport, me, self.region.offset_word(seq), offset as u64)?;
            put_word_padded(transport, me, self.region.payload(seq, piece.len()), piece, self.region.flag(seq), seq + 1)?;
            self.next_seq += 1;
            stats.pieces_sent += 1;
            transfer.pieces_done = index + 1;
            transfer.stalled = false;
        }
        Ok(true)
    }

    #[cold]
    fn wait_for_credit<T: PeerReads + ?Sized>(&mut self, transport: &T, stats: &mut RmcastStats) -> Result<(), TransportError> {
        let mut waiter = self.config.waiter();
        loop {
            self.progress(transport, stats)?;
            if self.has_credit() {
                return Ok(());
            }
            waiter.pause(transport, || self.describe_full_ring(transport))?;
        }
    }

    fn describe_full_ring<T: PeerReads + ?Sized>(&self, transport: &T) -> String {
        let needed = (self.next_seq + 1).saturating_sub(self.config.window());
        format!("room in the shared-window ring for piece {}; readers below {needed}: {:?} (rank, count)", self.next_seq, self.readers_below(transport, needed))
    }

    /// The readers whose ACK line is below `count`, with their lines.
    fn readers_below<T: PeerReads + ?Sized>(&self, transport: &T, count: u64) -> Vec<(usize, u64)> {
        (0..self.size)
            .filter(|&reader| reader != self.me)
            .map(|reader| (reader, transport.local_flag(self.region.ack_line(reader))))
            .filter(|&(_, line)| line < count)
            .collect()
    }

    pub(crate) fn describe_own_stream<T: PeerReads + ?Sized>(&self, transport: &T) -> String {
        format!("root {}: {} piece(s) written, readers below: {:?} (rank, count)", self.me, self.next_seq, self.readers_below(transport, self.next_seq))
    }

    /// What keeps this rank from being idle: its own ring's readers that
    /// lag, and every root it still owes an ACK.
    pub(crate) fn describe_pending<T: PeerReads + ?Sized>(&self, transport: &T) -> String {
        let own = (!self.own_stream_acknowledged()).then(|| self.describe_own_stream(transport));
        let owed = self.readers.iter().enumerate().filter_map(|(root, reader)| {
            let reader = reader.as_ref()?;
            (reader.ack.published() < reader.delivered).then(|| format!("ACK owed to root {root}: {} of {} published", reader.ack.published(), reader.delivered))
        });
        own.into_iter().chain(owed).collect::<Vec<_>>().join("; ")
    }

    fn reader(&mut self, root: usize) -> &mut Reader {
        let (me, config) = (self.me, &self.config);
        self.readers[root].get_or_insert_with(|| Reader { delivered: 0, ack: LazyAck::new(me, config.effective_ack_interval(), config.ack_delay()) })
    }

    /// The blocking receive: `step_receive`'s loop, waiting for the next
    /// piece's flag where a step would return.
    pub(crate) fn receive<T: PeerReads + ?Sized>(
        &mut self,
        transport: &T,
        root: usize,
        message: &mut [u8],
        stats: &mut RmcastStats,
    ) -> Result<(), TransportError> {
        let mut transfer = Transfer::new(root, message.len());
        self.copy_pieces(transport, &mut transfer, message, stats, Meet::Wait).map(|_| ())
    }

    /// Copies out every piece of `root`'s message whose flag is up, in
    /// order; returns whether every piece is in. Never waits.
    pub(crate) fn step_receive<T: PeerReads + ?Sized>(
        &mut self,
        transport: &T,
        transfer: &mut Transfer,
        message: &mut [u8],
        stats: &mut RmcastStats,
    ) -> Result<bool, TransportError> {
        self.copy_pieces(transport, transfer, message, stats, Meet::Poll)
    }

    /// The receive's one loop, for both, as `write_pieces` is the send's
    /// (a call of its own cost the blocking receive 57 of about 1,010
    /// instructions per 4-byte bcast at np=2, and a step taken again after
    /// each wait 5 % in time).
    #[inline(always)]
    fn copy_pieces<T: PeerReads + ?Sized>(
        &mut self,
        transport: &T,
        transfer: &mut Transfer,
        message: &mut [u8],
        stats: &mut RmcastStats,
        meet: Meet,
    ) -> Result<bool, TransportError> {
        let (root, message_len, piece_bytes) = (transfer.root, message.len(), self.config.slot_bytes);
        let count = message_len.div_ceil(piece_bytes);
        while transfer.pieces_done < count {
            let offset = transfer.pieces_done * piece_bytes;
            let piece = &mut message[offset..(offset + piece_bytes).min(message_len)];
            let seq = self.reader(root).delivered;
            let flag = self.region.flag(seq);
            let mut announced = transport.peer_flag(root, flag)?;
            if announced <= seq {
                match meet {
                    Meet::Poll => return Ok(false),
                    Meet::Wait => announced = self.wait_for_piece(transport, root, seq, stats)?,
                }
            }
            self.check_not_lapped(root, seq, announced, stats)?;
            let length = transport.peer_flag(root, self.region.message_len_word(seq))?;
            let at = transport.peer_flag(root, self.region.offset_word(seq))?;
            if length != message_len as u64 || at != offset as u64 {
                return Err(TransportError::Failed(format!(
                    "bcast from root {root} disagrees on the message: piece {seq} is at offset {at} of {length} bytes \
                     at the root, this rank expects offset {offset} of {message_len}"
                )));
            }
            transport.read_peer(root, self.region.payload(seq, piece.len()), piece)?;
            let after = transport.peer_flag(root, flag)?;
            self.check_not_lapped(root, seq, after, stats)?;
            let reader = self.reader(root);
            reader.delivered += 1;
            stats.pieces_delivered += 1;
            if let Some(count) = reader.ack.after_delivery(reader.delivered) {
                stats.acks_published += 1;
                transport.put_flag(root, self.region.ack_line(self.me), count)?;
            }
            transfer.pieces_done += 1;
        }
        Ok(true)
    }

    /// What `transfer` waits for, for a run that stopped moving: the
    /// root's floor as last read, or the receiver's next piece.
    pub(crate) fn describe_transfer(&self, transfer: &Transfer) -> String {
        if transfer.root == self.me {
            let needed = (self.next_seq + 1).saturating_sub(self.config.window());
            return format!("room in the shared-window ring for piece {} (every reader's line at {needed} or more; the least read was {})", self.next_seq, self.floor);
        }
        let delivered = self.readers[transfer.root].as_ref().map_or(0, |reader| reader.delivered);
        format!("piece {delivered} in the shared window of root {}", transfer.root)
    }

    #[cold]
    fn wait_for_piece<T: PeerReads + ?Sized>(&mut self, transport: &T, root: usize, seq: u64, stats: &mut RmcastStats) -> Result<u64, TransportError> {
        // A tight spin first: the piece usually lands within a cache-line
        // transfer, and progressing between polls would delay noticing it.
        for _ in 0..self.config.wait.spin_polls {
            let announced = transport.peer_flag(root, self.region.flag(seq))?;
            if announced > seq {
                return Ok(announced);
            }
            std::hint::spin_loop();
        }
        let mut waiter = self.config.waiter();
        loop {
            let announced = transport.peer_flag(root, self.region.flag(seq))?;
            if announced > seq {
                return Ok(announced);
            }
            self.progress(transport, stats)?;
            waiter.pause(transport, || format!("piece {seq} in the shared window of root {root} (its flag reads {announced})"))?;
        }
    }

    fn check_not_lapped(&self, root: usize, seq: u64, flag: u64, stats: &mut RmcastStats) -> Result<(), TransportError> {
        if flag == seq + 1 {
            return Ok(());
        }
        stats.overruns += 1;
        Err(TransportError::Failed(format!(
            "rank {}: the slot of piece {seq} of root {root} was rewritten (flag {flag}) before this rank copied it; flow control failed",
            self.me
        )))
    }

    /// Writes the ACKs that waited long enough, and rereads the readers'
    /// lines so a root learns of room without being asked.
    pub(crate) fn progress<T: PeerReads + ?Sized>(&mut self, transport: &T, stats: &mut RmcastStats) -> Result<(), TransportError> {
        transport.progress();
        let now = Instant::now();
        for (root, reader) in self.readers.iter_mut().enumerate() {
            let Some(reader) = reader else { continue };
            if let Some(count) = reader.ack.when_due(reader.delivered, now) {
                stats.explicit_acks += 1;
                stats.acks_published += 1;
                transport.put_flag(root, self.region.ack_line(self.me), count)?;
            }
        }
        if self.floor < self.next_seq {
            self.read_floor(transport);
        }
        Ok(())
    }

    pub(crate) fn flush_acks<T: PeerReads + ?Sized>(&mut self, transport: &T, stats: &mut RmcastStats) -> Result<(), TransportError> {
        for (root, reader) in self.readers.iter_mut().enumerate() {
            let Some(reader) = reader else { continue };
            if let Some(count) = reader.ack.flush(reader.delivered) {
                stats.acks_published += 1;
                transport.put_flag(root, self.region.ack_line(self.me), count)?;
            }
        }
        Ok(())
    }

    pub(crate) fn idle(&self) -> bool {
        self.own_stream_acknowledged() && self.readers.iter().flatten().all(|reader| reader.ack.published() == reader.delivered)
    }

    /// Every reader has acknowledged every piece this rank wrote as a root.
    pub(crate) fn own_stream_acknowledged(&self) -> bool {
        self.floor >= self.next_seq
    }

    pub(crate) fn sent(&self) -> u64 {
        self.next_seq
    }
}
