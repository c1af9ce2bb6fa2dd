//! The frames reliable multicast puts on the wire. A piece travels in the
//! same bytes whether it is multicast, forwarded to a co-root or
//! retransmitted, so a receiver handles all three alike and a collector
//! keeps the encoded frame to resend it unchanged. NACKs travel only over
//! the reliable channel. ACKs are never frames: they are one-sided writes.
//!
//! ```text
//! piece: [kind 1 | 0 0 0 | root u32 | seq u64 | message length u64 | offset u64 | payload]
//! nack:  [kind 2 | 0 0 0 | root u32 | from u64 | to u64]   pieces [from, to) are wanted
//! ```
//! All integers little-endian. The message length and the offset let a
//! receiver check that a piece belongs where it is about to copy it.

pub(crate) const PIECE_HEADER_BYTES: usize = 32;
const NACK_BYTES: usize = 24;
const PIECE: u8 = 1;
const NACK: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PieceHeader {
    pub(crate) root: usize,
    pub(crate) seq: u64,
    pub(crate) message_len: u64,
    pub(crate) offset: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    Piece(PieceHeader, &'a [u8]),
    Nack { root: usize, from: u64, to: u64 },
}

/// Replaces `out` with the encoded piece.
pub(crate) fn encode_piece(header: PieceHeader, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&[PIECE, 0, 0, 0]);
    out.extend_from_slice(&root_field(header.root));
    out.extend_from_slice(&header.seq.to_le_bytes());
    out.extend_from_slice(&header.message_len.to_le_bytes());
    out.extend_from_slice(&header.offset.to_le_bytes());
    out.extend_from_slice(payload);
}

pub(crate) fn encode_nack(root: usize, from: u64, to: u64) -> [u8; NACK_BYTES] {
    let mut out = [0u8; NACK_BYTES];
    out[0] = NACK;
    out[4..8].copy_from_slice(&root_field(root));
    out[8..16].copy_from_slice(&from.to_le_bytes());
    out[16..24].copy_from_slice(&to.to_le_bytes());
    out
}

fn root_field(root: usize) -> [u8; 4] {
    // Communicators are far below 2^32 ranks; a wider rank is a caller bug.
    u32::try_from(root).expect("rank beyond 2^32").to_le_bytes()
}

/// Reads a frame, refusing anything this module would not have sent.
pub(crate) fn decode(bytes: &[u8]) -> Result<Frame<'_>, String> {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]));
    let root = |bytes: &[u8]| u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    match bytes.first() {
        Some(&PIECE) if bytes.len() >= PIECE_HEADER_BYTES => {
            let header = PieceHeader { root: root(bytes), seq: word(8), message_len: word(16), offset: word(24) };
            let payload = &bytes[PIECE_HEADER_BYTES..];
            let end = header.offset.checked_add(payload.len() as u64);
            if end.is_none_or(|end| end > header.message_len) {
                return Err(format!("piece {} of root {} overruns its message", header.seq, header.root));
            }
            Ok(Frame::Piece(header, payload))
        }
        Some(&NACK) if bytes.len() == NACK_BYTES => {
            let (from, to) = (word(8), word(16));
            if from >= to {
                return Err(format!("empty NACK range [{from}, {to})"));
            }
            Ok(Frame::Nack { root: root(bytes), from, to })
        }
        _ => Err(format!("unrecognised frame of {} bytes starting {:02x?}", bytes.len(), &bytes[..bytes.len().min(8)])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_malformed_ones_are_refused() {
        let header = PieceHeader { root: 31, seq: u64::MAX - 3, message_len: 10_000, offset: 9_000 };
        let mut bytes = Vec::new();
        encode_piece(header, &[7; 1000], &mut bytes);
        assert_eq!(bytes.len(), PIECE_HEADER_BYTES + 1000);
        assert_eq!(decode(&bytes), Ok(Frame::Piece(header, &[7; 1000][..])));
        encode_piece(PieceHeader { message_len: 0, offset: 0, ..header }, &[], &mut bytes);
        assert!(matches!(decode(&bytes), Ok(Frame::Piece(_, payload)) if payload.is_empty()));

        let nack = encode_nack(5, 17, 20);
        assert_eq!(decode(&nack), Ok(Frame::Nack { root: 5, from: 17, to: 20 }));

        encode_piece(PieceHeader { offset: 9_001, ..header }, &[7; 1000], &mut bytes);
        assert!(decode(&bytes).unwrap_err().contains("overruns"));
        encode_piece(PieceHeader { offset: u64::MAX, ..header }, &[7; 1], &mut bytes);
        assert!(decode(&bytes).is_err());
        assert!(decode(&encode_nack(5, 20, 20)).unwrap_err().contains("empty"));
        assert!(decode(&[]).is_err());
        assert!(decode(&[PIECE; 31]).is_err());
        assert!(decode(&nack[..23]).is_err());
        assert!(decode(&[9; 40]).is_err());
    }
}
