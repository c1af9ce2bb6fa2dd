//! The frames the udp backend puts on the wire. Every frame starts with
//! the same header, so a receiver can tell its communicator's traffic from
//! anything else that reaches the group or its port before believing a
//! byte of it.
//!
//! ```text
//! header:    [magic C5 0D | version 2 | kind | communicator u32 | counter u64 | sender rank u32 | flags | 0 0 0]
//! multicast: header, payload                          (kind 1)
//! data:      header, seq u64, fragment               (kind 2; flags bit 0: last fragment of a record)
//! ack:       header, next expected seq u64, reported u64   (kind 3; bit i of reported: fragment next + 1 + i arrived)
//! probe:     header                                  (kind 4; multicast by setup to prove the group delivers; flags: the round)
//! ```
//! All integers little-endian. The communicator is the multicast id the
//! setup derived. `seal` fills the counter (the sender's nonce counter)
//! and appends the tag; unprotected frames carry rank 0's job nonce there.
//! This module reads frames only after `seal` has opened them.

pub(crate) const HEADER_BYTES: usize = 24;
pub(crate) const DATA_HEADER_BYTES: usize = HEADER_BYTES + 8;
const ACK_BYTES: usize = DATA_HEADER_BYTES + 8;
/// The smallest datagram that carries every frame: a data frame with one
/// byte of fragment and an ACK, the larger, each sealed with
/// `seal_overhead` bytes of tag. Below it the fragment and multicast
/// payload sizes derived from the datagram would underflow.
pub(crate) const fn least_datagram_bytes(seal_overhead: usize) -> usize {
    let data = DATA_HEADER_BYTES + 1;
    (if ACK_BYTES > data { ACK_BYTES } else { data }) + seal_overhead
}
/// The largest UDP payload over IPv4.
pub(crate) const MAX_UDP_PAYLOAD: usize = 65_507;

const MAGIC: [u8; 2] = [0xC5, 0x0D];
const VERSION: u8 = 2;
const MULTICAST: u8 = 1;
const DATA: u8 = 2;
const ACK: u8 = 3;
const PROBE: u8 = 4;
const LAST_FRAGMENT: u8 = 1;

/// Who this communicator is on the wire: stamped on every frame sent,
/// demanded of every frame received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) communicator: u32,
    /// Rank 0's job nonce: written where the counter goes, which `seal`
    /// overwrites on sealed frames (only unprotected frames keep it).
    pub(crate) nonce: u64,
    pub(crate) sender: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Body<'a> {
    Multicast(&'a [u8]),
    Data { seq: u64, last: bool, fragment: &'a [u8] },
    Ack { next: u64, reported: u64 },
    /// Setup's proof that the group delivers, in probe round `round`
    /// (from 1; sealed with the header, so a copy cannot be moved to
    /// another round); late copies are ignored.
    Probe { round: u8 },
}

/// Why a frame was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not a frame of this backend (too short, another magic or version,
    /// an unknown kind, a body of the wrong length, flags where none go).
    Malformed,
    /// A frame of this backend, stamped for another communicator or job.
    WrongJob,
    /// Its tag does not verify under this communicator's key: forged,
    /// altered, or sealed by another communicator that shares the id.
    Unauthenticated,
}

/// The sender rank a frame claims, read before anything else is checked,
/// so that its source address can be compared with that rank's first.
pub(crate) fn claimed_sender(bytes: &[u8]) -> Option<u32> {
    if bytes.len() < HEADER_BYTES || bytes[..2] != MAGIC || bytes[2] != VERSION {
        return None;
    }
    Some(u32_at(bytes, 16))
}

/// Whether a frame of at least a header says it is a multicast frame:
/// read before it is opened, only to choose where its body is opened
/// into (the kind is sealed with the header, so a frame that lies about
/// it fails to open).
pub(crate) fn says_multicast(bytes: &[u8]) -> bool {
    bytes[3] == MULTICAST
}

/// The communicator a frame of at least a header names.
pub(crate) fn communicator(bytes: &[u8]) -> u32 {
    u32_at(bytes, 4)
}

/// The counter (or job nonce) a frame of at least a header carries.
pub(crate) fn counter(bytes: &[u8]) -> u64 {
    u64_at(bytes, 8)
}

/// The sender a frame of at least a header names.
pub(crate) fn sender(bytes: &[u8]) -> u32 {
    u32_at(bytes, 16)
}

/// Stamps `counter` on a frame of at least a header.
pub(crate) fn set_counter(bytes: &mut [u8], counter: u64) {
    bytes[8..16].copy_from_slice(&counter.to_le_bytes());
}

/// Reads a frame that `seal` opened (its communicator, sender and
/// counter vouched for), refusing anything this module would not send.
pub(crate) fn decode(bytes: &[u8]) -> Result<Body<'_>, Refusal> {
    if claimed_sender(bytes).is_none() || bytes[21..24] != [0, 0, 0] {
        return Err(Refusal::Malformed);
    }
    let flags = bytes[20];
    match bytes[3] {
        MULTICAST if flags == 0 => Ok(Body::Multicast(&bytes[HEADER_BYTES..])),
        DATA if bytes.len() > DATA_HEADER_BYTES && flags & !LAST_FRAGMENT == 0 => {
            Ok(Body::Data { seq: u64_at(bytes, HEADER_BYTES), last: flags & LAST_FRAGMENT != 0, fragment: &bytes[DATA_HEADER_BYTES..] })
        }
        ACK if bytes.len() == ACK_BYTES && flags == 0 => Ok(Body::Ack { next: u64_at(bytes, HEADER_BYTES), reported: u64_at(bytes, DATA_HEADER_BYTES) }),
        PROBE if bytes.len() == HEADER_BYTES && flags != 0 => Ok(Body::Probe { round: flags }),
        _ => Err(Refusal::Malformed),
    }
}

/// Replaces `out` with a multicast frame carrying `payload`.
pub(crate) fn encode_multicast(stamp: Stamp, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    append_multicast(stamp, payload, out);
}

/// Appends a multicast frame carrying `payload` to `out`: frames laid
/// end to end for one segmented send.
pub(crate) fn append_multicast(stamp: Stamp, payload: &[u8], out: &mut Vec<u8>) {
    append_header(stamp, MULTICAST, 0, out);
    out.extend_from_slice(payload);
}

/// Replaces `out` with a data frame carrying one fragment of a record.
pub(crate) fn encode_data(stamp: Stamp, seq: u64, last: bool, fragment: &[u8], out: &mut Vec<u8>) {
    header(stamp, DATA, if last { LAST_FRAGMENT } else { 0 }, out);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(fragment);
}

/// Replaces `out` with an ACK of every fragment below `next` and of
/// those after it that `reported` marks.
pub(crate) fn encode_ack(stamp: Stamp, next: u64, reported: u64, out: &mut Vec<u8>) {
    header(stamp, ACK, 0, out);
    out.extend_from_slice(&next.to_le_bytes());
    out.extend_from_slice(&reported.to_le_bytes());
}

/// Replaces `out` with a probe frame of probe round `round` (from 1).
pub(crate) fn encode_probe(stamp: Stamp, round: u8, out: &mut Vec<u8>) {
    debug_assert!(round != 0, "probe rounds count from 1");
    header(stamp, PROBE, round, out);
}

fn header(stamp: Stamp, kind: u8, flags: u8, out: &mut Vec<u8>) {
    out.clear();
    append_header(stamp, kind, flags, out);
}

fn append_header(stamp: Stamp, kind: u8, flags: u8, out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[VERSION, kind]);
    out.extend_from_slice(&stamp.communicator.to_le_bytes());
    out.extend_from_slice(&stamp.nonce.to_le_bytes());
    out.extend_from_slice(&stamp.sender.to_le_bytes());
    out.extend_from_slice(&[flags, 0, 0, 0]);
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAMP: Stamp = Stamp { communicator: 0xDEAD_BEEF, nonce: 0x0123_4567_89AB_CDEF, sender: 3 };

    #[test]
    fn frames_round_trip() {
        let mut bytes = Vec::new();
        encode_multicast(STAMP, b"payload", &mut bytes);
        assert_eq!(bytes.len(), HEADER_BYTES + 7);
        assert_eq!(claimed_sender(&bytes), Some(3));
        assert_eq!((communicator(&bytes), counter(&bytes), sender(&bytes)), (STAMP.communicator, STAMP.nonce, 3));
        set_counter(&mut bytes, 99);
        assert_eq!(counter(&bytes), 99);
        assert_eq!(decode(&bytes), Ok(Body::Multicast(b"payload")));
        encode_multicast(STAMP, b"", &mut bytes);
        assert_eq!(decode(&bytes), Ok(Body::Multicast(b"")));
        encode_data(STAMP, u64::MAX - 1, true, b"frag", &mut bytes);
        assert_eq!(decode(&bytes), Ok(Body::Data { seq: u64::MAX - 1, last: true, fragment: b"frag" }));
        encode_data(STAMP, 7, false, b"x", &mut bytes);
        assert_eq!(decode(&bytes), Ok(Body::Data { seq: 7, last: false, fragment: b"x" }));
        encode_ack(STAMP, 42, 0b101, &mut bytes);
        assert_eq!(decode(&bytes), Ok(Body::Ack { next: 42, reported: 0b101 }));
        encode_probe(STAMP, 3, &mut bytes);
        assert_eq!(decode(&bytes), Ok(Body::Probe { round: 3 }));
        bytes.push(0);
        assert_eq!(decode(&bytes), Err(Refusal::Malformed), "a probe with a body");
    }

    #[test]
    fn malformed_frames_are_refused() {
        let mut bytes = Vec::new();
        encode_multicast(STAMP, b"payload", &mut bytes);
        let refused = |bytes: &[u8]| decode(bytes) == Err(Refusal::Malformed);
        assert!(refused(&bytes[..HEADER_BYTES - 1]) && claimed_sender(&bytes[..HEADER_BYTES - 1]).is_none());
        assert!(refused(&[]));
        let mut other = bytes.clone();
        other[0] ^= 1;
        assert!(refused(&other) && claimed_sender(&other).is_none());
        other = bytes.clone();
        other[3] = 9;
        assert!(refused(&other), "unknown kind");
        other = bytes.clone();
        other[20] = 1;
        assert!(refused(&other), "flags on a multicast frame");
        encode_data(STAMP, 1, true, b"", &mut bytes);
        assert!(refused(&bytes), "a data frame without a fragment");
        encode_ack(STAMP, 1, 0, &mut bytes);
        bytes.push(0);
        assert!(refused(&bytes), "an ACK with a tail");
        assert!(refused(&bytes[..ACK_BYTES - 1]), "a truncated ACK");
    }
}
