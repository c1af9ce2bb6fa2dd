//! Forward error correction of the datagram flavour (issue 36): the root
//! follows each block of a message's data pieces with parity pieces of a
//! Reed-Solomon erasure code (`repair::parity_plan` decides how many), and
//! a receiver holding any `block` of a block's data and parity pieces
//! rebuilds the missing data pieces at once, without a round trip.
//!
//! Invariants:
//! * a rebuilt piece is encoded exactly as the root encoded its original
//!   (same header, same protection bytes), and goes through the same
//!   checks as any arrival; it is delivered only if the CRC-32 of the
//!   block's data, which every parity frame carries, matches what was
//!   rebuilt, so a corrupt parity shard costs a NACK, never a wrong byte;
//! * a receiver keeps parity only for blocks that still miss a piece,
//!   within its receive window, and at most `parity <= block` shards per
//!   block: what it holds is bounded by the window plus one block;
//! * a gap inside a protected block is not NACKed while its parity may
//!   still rebuild it (`withholds`); once it cannot (a later block's
//!   parity came, the block's parity ran out, or nothing of the block
//!   came for the leaf's NACK retry interval: `give_up_quiet`, so a block
//!   whose last parity is lost while the root waits for window room is
//!   not left to the collector's timer) it is NACKed at once, and the
//!   leaf's NACK timer repeats it as any other NACK.
//!
//! Shards are pieces padded with zeros to an even length (the code works
//! on 16-bit symbols); a parity frame carries one shard.

use std::ops::Range;
use std::time::{Duration, Instant};

use crate::rmcast::wire::{PIECE_HEADER_BYTES, ParityHeader, PieceHeader, Protection, encode_parity, encode_protected_piece};

/// Bytes of a shard for pieces of `piece_bytes`.
pub(crate) fn shard_bytes(piece_bytes: usize) -> usize {
    piece_bytes + piece_bytes % 2
}

/// The CRC-32 of `shards`, each padded with zeros to `shard_bytes`.
fn block_crc<'a>(shards: impl Iterator<Item = &'a [u8]>, shard_bytes: usize) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    let zeros = [0u8; 2];
    for shard in shards {
        hasher.update(shard);
        let pad = shard_bytes.saturating_sub(shard.len());
        hasher.update(&zeros[..pad.min(2)]);
        if pad > 2 {
            hasher.update(&vec![0u8; pad - 2]);
        }
    }
    hasher.finalize()
}

fn padded(piece: &[u8], shard_bytes: usize) -> Vec<u8> {
    let mut shard = Vec::with_capacity(shard_bytes);
    shard.extend_from_slice(piece);
    shard.resize(shard_bytes, 0);
    shard
}

/// The parity frames of one block: `pieces` are its data pieces (all of
/// `piece_bytes` but maybe the last of the message), the block starts at
/// sequence `first_seq`, piece `first_piece` of a message of
/// `message_len` bytes. Frames are appended to `out`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode_block(
    root: usize,
    nonce: u64,
    protection: Protection,
    first_seq: u64,
    first_piece: u32,
    message_len: u64,
    pieces: &[&[u8]],
    piece_bytes: usize,
    out: &mut Vec<Vec<u8>>,
) -> Result<(), String> {
    let shard_bytes = shard_bytes(piece_bytes);
    let shards: Vec<Vec<u8>> = pieces.iter().map(|piece| padded(piece, shard_bytes)).collect();
    let parity = usize::from(protection.parity);
    let recovery = reed_solomon_simd::encode(shards.len(), parity, &shards).map_err(|why| format!("parity of a block of {}: {why}", shards.len()))?;
    let crc = block_crc(shards.iter().map(Vec::as_slice), shard_bytes);
    let protection = Protection { block_pieces: protection.block_pieces, parity: protection.parity };
    for (index, shard) in recovery.iter().enumerate() {
        let header = ParityHeader { root, nonce, index: index as u8, protection, first_seq, message_len, first_piece, crc };
        let mut frame = Vec::with_capacity(PIECE_HEADER_BYTES + shard_bytes);
        encode_parity(header, shard, &mut frame);
        out.push(frame);
    }
    Ok(())
}

/// Where a block lies: its data pieces are sequences `first_seq..first_seq
/// + pieces`, pieces `first_piece..` of a message of `message_len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Geometry {
    first_seq: u64,
    pieces: u64,
    first_piece: u64,
    message_len: u64,
    protection: Protection,
}

impl Geometry {
    /// The block of a protected piece at `offset` of its message; None if
    /// the piece is not protected or does not sit where pieces are cut.
    fn of_piece(header: &PieceHeader, protection: Protection, piece_bytes: usize) -> Option<Geometry> {
        let piece_bytes = piece_bytes as u64;
        if !protection.is_some() || header.offset % piece_bytes != 0 {
            return None;
        }
        let index = header.offset / piece_bytes;
        let within = index % u64::from(protection.block_pieces);
        Self::new(header.seq.checked_sub(within)?, index - within, header.message_len, protection, piece_bytes)
    }

    fn of_parity(header: &ParityHeader, piece_bytes: usize) -> Option<Geometry> {
        let first_piece = u64::from(header.first_piece);
        if first_piece % u64::from(header.protection.block_pieces) != 0 {
            return None;
        }
        Self::new(header.first_seq, first_piece, header.message_len, header.protection, piece_bytes as u64)
    }

    fn new(first_seq: u64, first_piece: u64, message_len: u64, protection: Protection, piece_bytes: u64) -> Option<Geometry> {
        let total = message_len.div_ceil(piece_bytes);
        let pieces = u64::from(protection.block_pieces).min(total.checked_sub(first_piece).filter(|&left| left > 0)?);
        first_seq.checked_add(pieces)?;
        Some(Geometry { first_seq, pieces, first_piece, message_len, protection })
    }

    fn seqs(&self) -> Range<u64> {
        self.first_seq..self.first_seq + self.pieces
    }

    fn piece_len(&self, index: u64, piece_bytes: usize) -> usize {
        let offset = (self.first_piece + index) * piece_bytes as u64;
        (self.message_len - offset).min(piece_bytes as u64) as usize
    }
}

struct Block {
    geometry: Geometry,
    /// From the first parity frame; later ones must agree.
    crc: Option<u32>,
    shards: Vec<Option<Vec<u8>>>,
    /// The highest parity index that arrived: frames go out in order, so
    /// one below it that has not come was lost.
    highest: Option<u8>,
    /// Past hope of a rebuild (or refused one): NACKed, and not withheld.
    given_up: bool,
    /// When a piece or parity of it last arrived.
    last_heard: Instant,
}

impl Block {
    fn new(geometry: Geometry, now: Instant) -> Self {
        Block { geometry, crc: None, shards: vec![None; usize::from(geometry.protection.parity)], highest: None, given_up: false, last_heard: now }
    }

    fn parity_held(&self) -> usize {
        self.shards.iter().flatten().count()
    }

    /// Parity frames that may still come.
    fn parity_to_come(&self) -> usize {
        let sent = usize::from(self.geometry.protection.parity);
        self.highest.map_or(sent, |highest| sent - 1 - usize::from(highest))
    }
}

/// What a parity frame did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ParityOutcome {
    /// Kept (or not needed: its block is complete already).
    Kept,
    /// Refused: its block disagrees with what this stream knows of it, or
    /// lies outside the window.
    Refused(String),
}

/// What a receiver must do after a parity frame: deliver `rebuilt` frames
/// as arrivals, NACK `hopeless` ranges, count `corrupt` blocks.
#[derive(Debug, Default)]
pub(crate) struct ParityWork {
    pub(crate) rebuilt: Vec<Vec<u8>>,
    pub(crate) hopeless: Vec<Range<u64>>,
    pub(crate) corrupt: u64,
}

/// One stream's blocks that still miss a piece, for a receiver.
pub(crate) struct ParityBlocks {
    root: usize,
    nonce: u64,
    piece_bytes: usize,
    blocks: Vec<Block>,
}

impl ParityBlocks {
    pub(crate) fn new(root: usize, nonce: u64, piece_bytes: usize) -> Self {
        ParityBlocks { root, nonce, piece_bytes, blocks: Vec::new() }
    }

    /// Blocks held, for tests of the bound.
    #[cfg(test)]
    pub(crate) fn blocks_held(&self) -> usize {
        self.blocks.len()
    }

    /// A protected piece arrived: its block becomes known, so a gap in it
    /// waits for the parity.
    pub(crate) fn note_piece(&mut self, header: &PieceHeader, protection: Protection, now: Instant) {
        let Some(geometry) = Geometry::of_piece(header, protection, self.piece_bytes) else {
            return;
        };
        match self.blocks.iter_mut().find(|block| block.geometry.first_seq == geometry.first_seq) {
            Some(block) => block.last_heard = now,
            None => self.blocks.push(Block::new(geometry, now)),
        }
    }

    /// Gives up the blocks still withheld of which nothing came for
    /// `patience`, returning those that miss a piece, to NACK.
    pub(crate) fn give_up_quiet<'a>(&mut self, now: Instant, patience: Duration, held: impl Fn(u64) -> Option<&'a [u8]>) -> Vec<Range<u64>> {
        let mut quiet = Vec::new();
        for block in self.blocks.iter_mut().filter(|block| !block.given_up && now.saturating_duration_since(block.last_heard) >= patience) {
            block.given_up = true;
            if block.geometry.seqs().any(|seq| held(seq).is_none()) {
                quiet.push(block.geometry.seqs());
            }
        }
        quiet
    }

    /// Whether a NACK for piece `seq` should wait: its block's parity may
    /// still rebuild it.
    pub(crate) fn withholds(&self, seq: u64) -> bool {
        self.blocks.iter().any(|block| !block.given_up && block.geometry.seqs().contains(&seq))
    }

    /// Drops blocks wholly below `contiguous`: complete, nothing to rebuild.
    pub(crate) fn forget_below(&mut self, contiguous: u64) {
        self.blocks.retain(|block| block.geometry.seqs().end > contiguous);
    }

    /// Takes in a parity frame of this stream, whose receive window is
    /// `window` (pieces below its start have all arrived); `held(seq)`
    /// gives a data piece's payload if the stream holds it. Rebuilds what
    /// it can.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn take<'a>(
        &mut self,
        header: &ParityHeader,
        shard: &[u8],
        window: Range<u64>,
        now: Instant,
        held: impl Fn(u64) -> Option<&'a [u8]>,
        work: &mut ParityWork,
    ) -> ParityOutcome {
        let Some(geometry) = Geometry::of_parity(header, self.piece_bytes) else {
            return ParityOutcome::Refused(format!("parity for piece {} of a message of {} bytes", header.first_piece, header.message_len));
        };
        if shard.len() != shard_bytes(self.piece_bytes) {
            return ParityOutcome::Refused(format!("a parity shard of {} bytes for pieces of {}", shard.len(), self.piece_bytes));
        }
        self.forget_below(window.start);
        if geometry.seqs().end <= window.start {
            return ParityOutcome::Kept;
        }
        if geometry.seqs().end > window.end {
            return ParityOutcome::Refused(format!("parity for pieces {:?}, beyond the window {window:?}", geometry.seqs()));
        }
        // A later block's parity: an earlier block's parity, sent before it, is over.
        for block in self.blocks.iter_mut().filter(|block| block.geometry.first_seq < geometry.first_seq && !block.given_up) {
            block.given_up = true;
            if block.geometry.seqs().any(|seq| held(seq).is_none()) {
                work.hopeless.push(block.geometry.seqs());
            }
        }
        let at = match self.blocks.iter().position(|block| block.geometry.first_seq == geometry.first_seq) {
            Some(at) => at,
            // A block none of whose pieces came can be rebuilt from parity
            // alone only if it has as many parity pieces as data pieces;
            // otherwise it is not kept, so parity frames naming blocks no
            // piece named (forged, where frames are not sealed) hold no
            // state.
            None if u64::from(geometry.protection.parity) < geometry.seqs().end - geometry.seqs().start => return ParityOutcome::Kept,
            None => {
                self.blocks.push(Block::new(geometry, now));
                self.blocks.len() - 1
            }
        };
        let block = &mut self.blocks[at];
        if block.geometry != geometry || block.crc.is_some_and(|crc| crc != header.crc) {
            return ParityOutcome::Refused(format!("parity for pieces {:?} that disagrees with its block", geometry.seqs()));
        }
        // Only parity that agrees with its block keeps it withheld: a
        // stream of refused frames must not put off its NACK.
        block.last_heard = now;
        if block.given_up {
            // NACKed already: its parity is of no use any more.
            return ParityOutcome::Kept;
        }
        block.crc = Some(header.crc);
        block.highest = block.highest.max(Some(header.index));
        let slot = &mut block.shards[usize::from(header.index)];
        if slot.is_none() {
            *slot = Some(shard.to_vec());
        }
        self.rebuild(at, &held, work);
        ParityOutcome::Kept
    }

    /// Rebuilds block `at` if enough of it is held; gives it up if it
    /// cannot be any more.
    fn rebuild<'a>(&mut self, at: usize, held: &impl Fn(u64) -> Option<&'a [u8]>, work: &mut ParityWork) {
        let (root, nonce, piece_bytes) = (self.root, self.nonce, self.piece_bytes);
        let shard_bytes = shard_bytes(piece_bytes);
        let block = &mut self.blocks[at];
        let geometry = block.geometry;
        let data: Vec<Option<&[u8]>> = geometry.seqs().map(held).collect();
        if data.iter().all(Option::is_some) {
            return;
        }
        let have = data.iter().flatten().count() + block.parity_held();
        let needed = geometry.pieces as usize;
        if have < needed {
            if have + block.parity_to_come() < needed {
                block.given_up = true;
                work.hopeless.push(geometry.seqs());
            }
            return;
        }
        let originals = data.iter().enumerate().filter_map(|(index, piece)| piece.map(|piece| (index, padded(piece, shard_bytes))));
        let recovery = block.shards.iter().enumerate().filter_map(|(index, shard)| shard.as_deref().map(|shard| (index, shard)));
        let parity = usize::from(geometry.protection.parity);
        let restored = match reed_solomon_simd::decode(needed, parity, originals, recovery) {
            Ok(restored) => restored,
            Err(_) => {
                block.given_up = true;
                work.corrupt += 1;
                work.hopeless.push(geometry.seqs());
                return;
            }
        };
        let whole = data.iter().enumerate().map(|(index, piece)| piece.or_else(|| restored.get(&index).map(Vec::as_slice)).unwrap_or(&[]));
        let padding_clean = restored.iter().all(|(&index, shard)| shard[geometry.piece_len(index as u64, piece_bytes)..].iter().all(|&byte| byte == 0));
        if !padding_clean || Some(block_crc(whole, shard_bytes)) != block.crc {
            block.given_up = true;
            work.corrupt += 1;
            work.hopeless.push(geometry.seqs());
            return;
        }
        for (index, shard) in restored {
            let index = index as u64;
            let header = PieceHeader {
                root,
                nonce,
                seq: geometry.first_seq + index,
                message_len: geometry.message_len,
                offset: (geometry.first_piece + index) * piece_bytes as u64,
            };
            let mut frame = Vec::with_capacity(PIECE_HEADER_BYTES + piece_bytes);
            encode_protected_piece(header, geometry.protection, &shard[..geometry.piece_len(index, piece_bytes)], &mut frame);
            work.rebuilt.push(frame);
        }
        // Nothing more to do for it; its state goes once it is contiguous.
        block.given_up = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rmcast::wire::{Frame, decode};

    const PIECE: usize = 9;
    const NONCE: u64 = 5;

    /// A message of `len` bytes from sequence 100, protected by `protection`:
    /// its data frames and each block's parity frames.
    fn message(len: usize, protection: Protection) -> (Vec<u8>, Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let bytes: Vec<u8> = (0..len).map(|at| (at * 7 + 3) as u8).collect();
        let pieces: Vec<&[u8]> = bytes.chunks(PIECE).collect();
        let mut data = Vec::new();
        let mut parity = Vec::new();
        for (index, piece) in pieces.iter().enumerate() {
            let header = PieceHeader { root: 0, nonce: NONCE, seq: 100 + index as u64, message_len: len as u64, offset: (index * PIECE) as u64 };
            let mut frame = Vec::new();
            encode_protected_piece(header, protection, piece, &mut frame);
            data.push(frame);
        }
        for (block, chunk) in pieces.chunks(usize::from(protection.block_pieces)).enumerate() {
            let first = block * usize::from(protection.block_pieces);
            encode_block(0, NONCE, protection, 100 + first as u64, first as u32, len as u64, chunk, PIECE, &mut parity).expect("encoded");
        }
        (bytes, data, parity)
    }

    fn parity_header(frame: &[u8]) -> (ParityHeader, &[u8]) {
        match decode(frame, NONCE) {
            Ok(Frame::Parity(header, shard)) => (header, shard),
            other => panic!("not parity: {other:?}"),
        }
    }

    /// Feeds `lost` data pieces' absence and every parity frame but
    /// `parity_lost`; returns the work done.
    fn run(len: usize, protection: Protection, lost: &[u64], parity_lost: &[usize]) -> (Vec<u8>, Vec<Vec<u8>>, ParityWork) {
        let (bytes, data, parity) = message(len, protection);
        let mut blocks = ParityBlocks::new(0, NONCE, PIECE);
        let held_frames: Vec<Option<&Vec<u8>>> = data.iter().enumerate().map(|(index, frame)| (!lost.contains(&(100 + index as u64))).then_some(frame)).collect();
        for frame in held_frames.iter().flatten() {
            let Ok(Frame::Piece(header, _)) = decode(frame, NONCE) else { unreachable!() };
            blocks.note_piece(&header, protection, Instant::now());
        }
        let held = |seq: u64| held_frames.get(seq.checked_sub(100)? as usize).copied().flatten().map(|frame| &frame[PIECE_HEADER_BYTES..]);
        let mut work = ParityWork::default();
        for (_, frame) in parity.iter().enumerate().filter(|(index, _)| !parity_lost.contains(index)) {
            let (header, shard) = parity_header(frame);
            assert_eq!(blocks.take(&header, shard, 100..10_000, Instant::now(), held, &mut work), ParityOutcome::Kept);
        }
        (bytes, data, work)
    }

    #[test]
    fn up_to_parity_losses_per_block_are_rebuilt_byte_for_byte() {
        let protection = Protection { block_pieces: 4, parity: 2 };
        // 10 pieces (the last short): blocks 100..104, 104..108, 108..110.
        let (_, data, work) = run(85, protection, &[101, 103, 104, 108, 109], &[]);
        let mut rebuilt = work.rebuilt.clone();
        rebuilt.sort();
        let mut expected: Vec<Vec<u8>> = [1, 3, 4, 8, 9].iter().map(|&index| data[index].clone()).collect();
        expected.sort();
        assert_eq!(rebuilt, expected, "rebuilt frames equal the originals");
        assert!(work.hopeless.is_empty() && work.corrupt == 0, "{work:?}");
    }

    #[test]
    fn more_losses_than_parity_give_the_block_up_for_a_nack() {
        let protection = Protection { block_pieces: 4, parity: 2 };
        let (_, _, work) = run(85, protection, &[100, 101, 102], &[]);
        assert!(work.rebuilt.is_empty());
        assert_eq!(work.hopeless, vec![100..104]);
        // One parity lost and two data: the second parity's arrival tells.
        let (_, _, work) = run(85, protection, &[100, 101], &[0]);
        assert_eq!(work.hopeless, vec![100..104]);
        // Block 0's parity lost whole: block 1's parity says it is over.
        let (_, _, work) = run(85, protection, &[100], &[0, 1]);
        assert_eq!(work.hopeless, vec![100..104]);
    }

    #[test]
    fn a_withheld_block_of_which_nothing_comes_is_given_up_after_the_patience() {
        let protection = Protection { block_pieces: 4, parity: 2 };
        let (_, data, _) = message(36, protection);
        let start = Instant::now();
        let mut blocks = ParityBlocks::new(0, NONCE, PIECE);
        let held = |seq: u64| (seq != 101).then(|| &data[(seq - 100) as usize][PIECE_HEADER_BYTES..]);
        for seq in [100, 102, 103] {
            let Ok(Frame::Piece(header, _)) = decode(&data[seq - 100], NONCE) else { unreachable!() };
            blocks.note_piece(&header, protection, start);
        }
        assert!(blocks.withholds(101));
        let patience = Duration::from_millis(5);
        assert!(blocks.give_up_quiet(start + Duration::from_millis(4), patience, held).is_empty());
        assert_eq!(blocks.give_up_quiet(start + patience, patience, held), vec![100..104]);
        assert!(!blocks.withholds(101) && blocks.give_up_quiet(start + patience * 2, patience, held).is_empty(), "given up once");
    }

    #[test]
    fn a_corrupt_parity_shard_is_refused_by_the_crc_and_nothing_is_rebuilt() {
        let protection = Protection { block_pieces: 4, parity: 2 };
        let (_, data, parity) = message(36, protection);
        let mut blocks = ParityBlocks::new(0, NONCE, PIECE);
        let held = |seq: u64| (seq != 101).then(|| &data[(seq - 100) as usize][PIECE_HEADER_BYTES..]);
        for frame in data.iter().filter(|frame| held(decode(frame, NONCE).map(|f| if let Frame::Piece(h, _) = f { h.seq } else { 0 }).unwrap()).is_some()) {
            let Ok(Frame::Piece(header, _)) = decode(frame, NONCE) else { unreachable!() };
            blocks.note_piece(&header, protection, Instant::now());
        }
        let mut corrupt = parity[0].clone();
        corrupt[PIECE_HEADER_BYTES + 3] ^= 0x40;
        let (header, shard) = parity_header(&corrupt);
        let mut work = ParityWork::default();
        assert_eq!(blocks.take(&header, shard, 100..200, Instant::now(), held, &mut work), ParityOutcome::Kept);
        assert!(work.rebuilt.is_empty(), "a corrupt shard rebuilt {:?}", work.rebuilt);
        assert_eq!((work.corrupt, work.hopeless.clone()), (1, vec![100..104]));
        assert!(!blocks.withholds(101), "a refused block is NACKed, not withheld");
        // A parity frame whose CRC disagrees with the block's first is refused.
        let (header, shard) = parity_header(&parity[1]);
        let forged = ParityHeader { crc: header.crc ^ 1, ..header };
        assert!(matches!(blocks.take(&forged, shard, 100..200, Instant::now(), held, &mut ParityWork::default()), ParityOutcome::Refused(_)));
    }

    #[test]
    fn parity_outside_the_window_or_of_another_geometry_is_refused_and_state_stays_bounded() {
        let protection = Protection { block_pieces: 4, parity: 2 };
        let (_, data, parity) = message(85, protection);
        let none = |_seq: u64| None;
        let mut blocks = ParityBlocks::new(0, NONCE, PIECE);
        let (header, shard) = parity_header(&parity[2]);
        assert!(matches!(blocks.take(&header, shard, 100..105, Instant::now(), none, &mut ParityWork::default()), ParityOutcome::Refused(_)), "beyond the window");
        assert!(matches!(blocks.take(&header, &shard[1..], 100..200, Instant::now(), none, &mut ParityWork::default()), ParityOutcome::Refused(_)), "short shard");
        let odd = ParityHeader { first_piece: 3, ..header };
        assert!(matches!(blocks.take(&odd, shard, 100..200, Instant::now(), none, &mut ParityWork::default()), ParityOutcome::Refused(_)), "not a block start");
        assert_eq!(blocks.blocks_held(), 0);
        // Fewer parity than data pieces cannot rebuild a block of which no
        // piece came: such parity (forged, where frames are not sealed)
        // holds no state.
        assert_eq!(blocks.take(&header, shard, 100..200, Instant::now(), none, &mut ParityWork::default()), ParityOutcome::Kept, "parity of an unnamed block");
        assert_eq!(blocks.blocks_held(), 0, "parity of a block no piece named is not kept");
        for frame in &data {
            let Ok(Frame::Piece(header, _)) = decode(frame, NONCE) else { unreachable!() };
            blocks.note_piece(&header, protection, Instant::now());
        }
        assert_eq!(blocks.blocks_held(), 3);
        assert!(blocks.withholds(105) && !blocks.withholds(110));
        blocks.forget_below(108);
        assert_eq!(blocks.blocks_held(), 1, "complete blocks are dropped");
        assert_eq!(blocks.take(&header, shard, 110..200, Instant::now(), none, &mut ParityWork::default()), ParityOutcome::Kept, "stale parity");
        assert_eq!(blocks.blocks_held(), 0);
    }
}
