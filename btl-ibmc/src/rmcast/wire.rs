//! The frames reliable multicast puts on the wire. A piece travels in the
//! same bytes whether it is multicast, forwarded to a co-root or
//! retransmitted, so a receiver handles all three alike and a collector
//! keeps the encoded frame to resend it unchanged. NACKs travel only over
//! the reliable channel. ACKs are never frames: they are one-sided writes.
//!
//! ```text
//! piece: [kind 1 | 0 0 0 | root u32 | nonce u64 | seq u64 | message length u64 | offset u64 | payload]
//! nack:  [kind 2 | 0 0 0 | root u32 | nonce u64 | from u64 | to u64]   pieces [from, to) are wanted
//! parity: [kind 3 | index u8 | block u8 | parity u8 | root u32 | nonce u64 | first seq u64 | message length u64 |
//!          first piece u32 | crc32 u32 | shard]
//! ```
//! A piece's bytes 1 and 2 give its block's protection (`repair::ParityPlan`):
//! data pieces per block and parity pieces per block, 0 0 without parity
//! (frames of the wire before parity had zeros there). A parity frame is
//! parity piece `index` of the block of `block` data pieces from sequence
//! `first seq`, which starts at piece `first piece` of its message; its
//! shard is as long as a piece padded to an even length, and the CRC-32 is
//! that of the block's data pieces, each padded so, one after another: a
//! receiver checks what it rebuilt against it before it delivers anything.
//! All integers little-endian. The nonce is the communicator's, drawn at
//! random when its transport was set up ([`Datagrams::multicast_nonce`]):
//! a frame without it (another job's or user's traffic on the same group,
//! a stale frame of an earlier communicator) is refused before anything
//! in it is believed. The message length and the offset let a receiver
//! check that a piece belongs where it is about to copy it.
//!
//! [`Datagrams::multicast_nonce`]: crate::transport::Datagrams::multicast_nonce

pub(crate) const PIECE_HEADER_BYTES: usize = 40;
pub(crate) const NACK_BYTES: usize = 32;
const PIECE: u8 = 1;
const NACK: u8 = 2;
const PARITY: u8 = 3;
pub(crate) const PARITY_HEADER_BYTES: usize = 40;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PieceHeader {
    pub(crate) root: usize,
    pub(crate) nonce: u64,
    pub(crate) seq: u64,
    pub(crate) message_len: u64,
    pub(crate) offset: u64,
}

/// A piece's block protection: 0 0 for none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Protection {
    pub(crate) block_pieces: u8,
    pub(crate) parity: u8,
}

impl Protection {
    pub(crate) fn is_some(self) -> bool {
        self.block_pieces > 0 && self.parity > 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParityHeader {
    pub(crate) root: usize,
    pub(crate) nonce: u64,
    pub(crate) index: u8,
    pub(crate) protection: Protection,
    pub(crate) first_seq: u64,
    pub(crate) message_len: u64,
    pub(crate) first_piece: u32,
    pub(crate) crc: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    Piece(PieceHeader, &'a [u8]),
    Nack { root: usize, from: u64, to: u64 },
    Parity(ParityHeader, &'a [u8]),
}

/// Why a frame was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Well formed, but not stamped with this communicator's nonce.
    Stranger,
    /// Not something this module would have sent.
    Malformed(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Stranger => f.write_str("a frame without this communicator's nonce"),
            Refusal::Malformed(why) => f.write_str(why),
        }
    }
}

/// Replaces `out` with the encoded piece.
#[cfg(test)]
pub(crate) fn encode_piece(header: PieceHeader, payload: &[u8], out: &mut Vec<u8>) {
    encode_protected_piece(header, Protection::default(), payload, out);
}

/// Replaces `out` with the encoded piece of a block with `protection`.
pub(crate) fn encode_protected_piece(header: PieceHeader, protection: Protection, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[PIECE, protection.block_pieces, protection.parity, 0]);
    out.extend_from_slice(&root_field(header.root));
    out.extend_from_slice(&header.nonce.to_le_bytes());
    out.extend_from_slice(&header.seq.to_le_bytes());
    out.extend_from_slice(&header.message_len.to_le_bytes());
    out.extend_from_slice(&header.offset.to_le_bytes());
    out.extend_from_slice(payload);
}

pub(crate) fn encode_nack(root: usize, nonce: u64, from: u64, to: u64) -> [u8; NACK_BYTES] {
    let mut out = [0u8; NACK_BYTES];
    out[0] = NACK;
    out[4..8].copy_from_slice(&root_field(root));
    out[8..16].copy_from_slice(&nonce.to_le_bytes());
    out[16..24].copy_from_slice(&from.to_le_bytes());
    out[24..32].copy_from_slice(&to.to_le_bytes());
    out
}

/// Replaces `out` with the encoded parity frame.
pub(crate) fn encode_parity(header: ParityHeader, shard: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[PARITY, header.index, header.protection.block_pieces, header.protection.parity]);
    out.extend_from_slice(&root_field(header.root));
    out.extend_from_slice(&header.nonce.to_le_bytes());
    out.extend_from_slice(&header.first_seq.to_le_bytes());
    out.extend_from_slice(&header.message_len.to_le_bytes());
    out.extend_from_slice(&header.first_piece.to_le_bytes());
    out.extend_from_slice(&header.crc.to_le_bytes());
    out.extend_from_slice(shard);
}

/// The block protection a piece frame names (0 0 for any other frame).
pub(crate) fn protection_of(frame: &[u8]) -> Protection {
    match frame {
        [PIECE, block_pieces, parity, ..] if *block_pieces > 0 && *parity > 0 => Protection { block_pieces: *block_pieces, parity: *parity },
        _ => Protection::default(),
    }
}

fn root_field(root: usize) -> [u8; 4] {
    // Communicators are far below 2^32 ranks; a wider rank is a caller bug.
    u32::try_from(root).expect("rank beyond 2^32").to_le_bytes()
}

/// Reads a frame, refusing anything this module would not have sent
/// with `nonce`. The bytes may come from anyone: nothing here trusts them.
pub(crate) fn decode(bytes: &[u8], nonce: u64) -> Result<Frame<'_>, Refusal> {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    let root = |bytes: &[u8]| u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    let frame = match bytes.first() {
        Some(&PIECE) if bytes.len() >= PIECE_HEADER_BYTES => {
            let header = PieceHeader { root: root(bytes), nonce: word(8), seq: word(16), message_len: word(24), offset: word(32) };
            let payload = &bytes[PIECE_HEADER_BYTES..];
            let end = header.offset.checked_add(payload.len() as u64);
            if header.nonce == nonce && end.is_none_or(|end| end > header.message_len) {
                return Err(Refusal::Malformed(format!("piece {} of root {} overruns its message", header.seq, header.root)));
            }
            (header.nonce, Frame::Piece(header, payload))
        }
        Some(&NACK) if bytes.len() == NACK_BYTES => {
            let (from, to) = (word(16), word(24));
            if word(8) == nonce && from >= to {
                return Err(Refusal::Malformed(format!("empty NACK range [{from}, {to})")));
            }
            (word(8), Frame::Nack { root: root(bytes), from, to })
        }
        Some(&PARITY) if bytes.len() > PARITY_HEADER_BYTES => {
            let half = |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
            let protection = Protection { block_pieces: bytes[2], parity: bytes[3] };
            let header = ParityHeader {
                root: root(bytes),
                nonce: word(8),
                index: bytes[1],
                protection,
                first_seq: word(16),
                message_len: word(24),
                first_piece: half(32),
                crc: half(36),
            };
            let shard = &bytes[PARITY_HEADER_BYTES..];
            if header.nonce == nonce
                && (!protection.is_some() || header.index >= protection.parity || protection.parity > protection.block_pieces || shard.len() % 2 != 0)
            {
                return Err(Refusal::Malformed(format!(
                    "parity {} of {} for a block of {} from piece {} of root {}, with a shard of {} bytes",
                    header.index,
                    protection.parity,
                    protection.block_pieces,
                    header.first_seq,
                    header.root,
                    shard.len()
                )));
            }
            (header.nonce, Frame::Parity(header, shard))
        }
        _ => {
            return Err(Refusal::Malformed(format!(
                "unrecognised frame of {} bytes starting {:02x?}",
                bytes.len(),
                &bytes[..bytes.len().min(8)]
            )));
        }
    };
    match frame {
        (stamped, frame) if stamped == nonce => Ok(frame),
        _ => Err(Refusal::Stranger),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_malformed_ones_are_refused() {
        const NONCE: u64 = 0x0123_4567_89AB_CDEF;
        let header = PieceHeader { root: 31, nonce: NONCE, seq: u64::MAX - 3, message_len: 10_000, offset: 9_000 };
        let mut bytes = Vec::new();
        encode_piece(header, &[7; 1000], &mut bytes);
        assert_eq!(bytes.len(), PIECE_HEADER_BYTES + 1000);
        assert_eq!(decode(&bytes, NONCE), Ok(Frame::Piece(header, &[7; 1000][..])));
        encode_piece(PieceHeader { message_len: 0, offset: 0, ..header }, &[], &mut bytes);
        assert!(matches!(decode(&bytes, NONCE), Ok(Frame::Piece(_, payload)) if payload.is_empty()));

        let nack = encode_nack(5, NONCE, 17, 20);
        assert_eq!(decode(&nack, NONCE), Ok(Frame::Nack { root: 5, from: 17, to: 20 }));

        let malformed = |bytes: &[u8]| matches!(decode(bytes, NONCE), Err(Refusal::Malformed(_)));
        encode_piece(PieceHeader { offset: 9_001, ..header }, &[7; 1000], &mut bytes);
        assert!(decode(&bytes, NONCE).unwrap_err().to_string().contains("overruns"));
        encode_piece(PieceHeader { offset: u64::MAX, ..header }, &[7; 1], &mut bytes);
        assert!(malformed(&bytes));
        assert!(decode(&encode_nack(5, NONCE, 20, 20), NONCE).unwrap_err().to_string().contains("empty"));
        assert!(malformed(&[]));
        assert!(malformed(&[PIECE; PIECE_HEADER_BYTES - 1]));
        assert!(malformed(&nack[..NACK_BYTES - 1]));
        assert!(malformed(&[9; 40]));
    }

    #[test]
    fn parity_frames_and_protected_pieces_round_trip_and_malformed_parity_is_refused() {
        const NONCE: u64 = 77;
        let protection = Protection { block_pieces: 47, parity: 8 };
        let header = ParityHeader { root: 3, nonce: NONCE, index: 7, protection, first_seq: 1 << 40, message_len: 65_536, first_piece: 0, crc: 0xDEAD_BEEF };
        let mut bytes = Vec::new();
        encode_parity(header, &[5; 1400], &mut bytes);
        assert_eq!(bytes.len(), PARITY_HEADER_BYTES + 1400);
        assert_eq!(decode(&bytes, NONCE), Ok(Frame::Parity(header, &[5; 1400][..])));
        assert_eq!(decode(&bytes, NONCE + 1), Err(Refusal::Stranger));
        assert_eq!(protection_of(&bytes), Protection::default(), "a parity frame is no protected piece");
        for bad in [
            ParityHeader { index: 8, ..header },
            ParityHeader { protection: Protection { block_pieces: 4, parity: 5 }, index: 0, ..header },
            ParityHeader { protection: Protection { block_pieces: 4, parity: 0 }, index: 0, ..header },
        ] {
            encode_parity(bad, &[5; 1400], &mut bytes);
            assert!(matches!(decode(&bytes, NONCE), Err(Refusal::Malformed(_))), "{bad:?}");
        }
        encode_parity(header, &[5; 1399], &mut bytes);
        assert!(matches!(decode(&bytes, NONCE), Err(Refusal::Malformed(_))), "an odd shard");
        encode_parity(header, &[], &mut bytes);
        assert!(matches!(decode(&bytes, NONCE), Err(Refusal::Malformed(_))), "no shard");

        let piece = PieceHeader { root: 3, nonce: NONCE, seq: 9, message_len: 100, offset: 0 };
        encode_protected_piece(piece, protection, &[1; 100], &mut bytes);
        assert_eq!(decode(&bytes, NONCE), Ok(Frame::Piece(piece, &[1; 100][..])));
        assert_eq!(protection_of(&bytes), protection);
        encode_piece(piece, &[1; 100], &mut bytes);
        assert_eq!(protection_of(&bytes), Protection::default());
    }

    #[test]
    fn frames_stamped_with_another_nonce_are_strangers() {
        let header = PieceHeader { root: 1, nonce: 41, seq: 0, message_len: 4, offset: 0 };
        let mut bytes = Vec::new();
        encode_piece(header, &[1, 2, 3, 4], &mut bytes);
        assert_eq!(decode(&bytes, 42), Err(Refusal::Stranger));
        assert_eq!(decode(&encode_nack(1, 41, 0, 3), 42), Err(Refusal::Stranger));
        // Even a stranger's nonsense is only a stranger's, not this communicator's error.
        encode_piece(PieceHeader { offset: 99, ..header }, &[1], &mut bytes);
        assert_eq!(decode(&bytes, 42), Err(Refusal::Stranger));
    }
}
