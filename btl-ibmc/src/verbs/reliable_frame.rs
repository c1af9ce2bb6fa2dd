//! What a reliable message carries on the wire besides its bytes: its
//! length and a CRC-32 of both, checked on arrival. RC promises exactly
//! once and in order, but Soft-RoCE was seen to break that after a
//! retransmission (docs/testbed.md: a message delivered one path MTU too
//! long, another with a previous message's bytes). A damaged message must
//! stop the transport with an error rather than reach a collective as
//! data: a wrong answer is worse than a failed call.

use std::fmt;

/// Bytes the frame adds after the message: its length, then the CRC.
pub(crate) const TRAILER_BYTES: usize = 8;

/// How a delivered frame differs from anything a sender sealed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Damage {
    /// Fewer bytes than a trailer.
    Truncated { delivered: usize },
    /// The trailer's length does not match the bytes delivered.
    Length { delivered: usize, declared: usize },
    /// Length right, contents not.
    Checksum,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::Truncated { delivered } => write!(f, "{delivered} bytes, shorter than any message"),
            Damage::Length { delivered, declared } => {
                write!(f, "{delivered} bytes delivered for a message of {declared}")
            }
            Damage::Checksum => write!(f, "its checksum does not match its bytes"),
        }
    }
}

fn checksum(message: &[u8], length: [u8; 4]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(message);
    hasher.update(&length);
    hasher.finalize()
}

/// Writes `message` and its trailer into `frame` (cleared first).
pub(crate) fn seal(message: &[u8], frame: &mut Vec<u8>) {
    let length = u32::try_from(message.len()).expect("reliable messages are a few KiB").to_le_bytes();
    frame.clear();
    frame.reserve(message.len() + TRAILER_BYTES);
    frame.extend_from_slice(message);
    frame.extend_from_slice(&length);
    frame.extend_from_slice(&checksum(message, length).to_le_bytes());
}

/// The message inside a delivered frame, if the frame is what a sender
/// sealed.
pub(crate) fn open(frame: &[u8]) -> Result<&[u8], Damage> {
    let Some(body_len) = frame.len().checked_sub(TRAILER_BYTES) else {
        return Err(Damage::Truncated { delivered: frame.len() });
    };
    let (message, trailer) = frame.split_at(body_len);
    let length: [u8; 4] = trailer[..4].try_into().expect("the trailer holds a length");
    let declared = u32::from_le_bytes(length) as usize;
    if declared != message.len() {
        return Err(Damage::Length { delivered: message.len(), declared });
    }
    let crc = u32::from_le_bytes(trailer[4..].try_into().expect("the trailer holds a checksum"));
    if crc != checksum(message, length) {
        return Err(Damage::Checksum);
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    #[test]
    fn a_sealed_message_opens_to_itself_at_every_length() {
        let mut frame = Vec::new();
        for len in [0, 1, 7, 8, 1016, 1024, 2967, 4088] {
            let message = pattern(len, 3);
            seal(&message, &mut frame);
            assert_eq!(frame.len(), len + TRAILER_BYTES);
            assert_eq!(open(&frame), Ok(&message[..]), "{len} bytes");
        }
    }

    /// The Soft-RoCE defect seen in the test bed: the right message with
    /// one more path-MTU packet after it, or with a packet of another
    /// message in its middle.
    #[test]
    fn the_damage_seen_on_soft_roce_is_refused() {
        let mut frame = Vec::new();
        seal(&pattern(2967, 1), &mut frame);
        let mut one_packet_too_long = frame.clone();
        one_packet_too_long.extend_from_slice(&frame[..1024]);
        assert!(matches!(open(&one_packet_too_long), Err(Damage::Length { .. }) | Err(Damage::Checksum)));

        let mut other = Vec::new();
        seal(&pattern(2967, 2), &mut other);
        let mut mixed = frame.clone();
        mixed[1024..2048].copy_from_slice(&other[1024..2048]);
        assert_eq!(open(&mixed), Err(Damage::Checksum));

        assert_eq!(open(&frame[..5]), Err(Damage::Truncated { delivered: 5 }));
        assert!(open(&frame[..frame.len() - 1]).is_err());
    }

    #[test]
    fn every_single_bit_flip_is_refused() {
        let mut frame = Vec::new();
        seal(&pattern(300, 9), &mut frame);
        for bit in 0..frame.len() * 8 {
            let mut flipped = frame.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(open(&flipped).is_err(), "bit {bit} flipped went unnoticed");
        }
    }
}
