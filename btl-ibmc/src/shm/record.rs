//! The fixed-size records ranks exchange while establishing shared memory,
//! and their byte encoding. Little-endian throughout, so a record means the
//! same to every rank regardless of how it was built.

use super::node::{BOOT_ID_BYTES, HOSTNAME_BYTES, NodeIdentity};
use super::segment::{OsCall, SegmentError};

/// "CRSHMREC" with a trailing version byte; bump when the encoding changes.
const RECORD_MAGIC: u64 = 0x4352_5348_4D52_4501;
const NAME_BYTES: usize = 64;
pub(crate) const OUTCOME_LEN: usize = 24;

const MAGIC_AT: usize = 0;
const SIZE_AT: usize = 8;
const WINDOW_LEN_AT: usize = 16;
const HOSTNAME_AT: usize = 24;
const BOOT_ID_AT: usize = HOSTNAME_AT + HOSTNAME_BYTES;
const NAME_AT: usize = BOOT_ID_AT + BOOT_ID_BYTES;
const SEGMENT_LEN_AT: usize = NAME_AT + NAME_BYTES;
const CREATE_OUTCOME_AT: usize = SEGMENT_LEN_AT + 8;
pub(crate) const RECORD_LEN: usize = CREATE_OUTCOME_AT + OUTCOME_LEN;

/// What one rank announces in the first exchange.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) size: u64,
    pub(crate) window_len: u64,
    pub(crate) node: NodeIdentity,
    /// Meaningful in rank 0's record only.
    pub(crate) segment_name: String,
    pub(crate) segment_len: u64,
    /// Whether rank 0 managed to create the segment.
    pub(crate) create_outcome: Result<(), SegmentError>,
}

impl Record {
    pub(crate) fn encode(&self) -> [u8; RECORD_LEN] {
        let mut bytes = [0u8; RECORD_LEN];
        put_u64(&mut bytes, MAGIC_AT, RECORD_MAGIC);
        put_u64(&mut bytes, SIZE_AT, self.size);
        put_u64(&mut bytes, WINDOW_LEN_AT, self.window_len);
        bytes[HOSTNAME_AT..BOOT_ID_AT].copy_from_slice(&self.node.hostname);
        bytes[BOOT_ID_AT..NAME_AT].copy_from_slice(&self.node.boot_id);
        let name = self.segment_name.as_bytes();
        let name_len = name.len().min(NAME_BYTES - 1);
        bytes[NAME_AT..NAME_AT + name_len].copy_from_slice(&name[..name_len]);
        put_u64(&mut bytes, SEGMENT_LEN_AT, self.segment_len);
        bytes[CREATE_OUTCOME_AT..].copy_from_slice(&encode_outcome(&self.create_outcome));
        bytes
    }

    /// None if `bytes` is not a record of this version.
    pub(crate) fn decode(bytes: &[u8]) -> Option<Record> {
        if bytes.len() != RECORD_LEN || get_u64(bytes, MAGIC_AT) != RECORD_MAGIC {
            return None;
        }
        let mut node = NodeIdentity { hostname: [0; HOSTNAME_BYTES], boot_id: [0; BOOT_ID_BYTES] };
        node.hostname.copy_from_slice(&bytes[HOSTNAME_AT..BOOT_ID_AT]);
        node.boot_id.copy_from_slice(&bytes[BOOT_ID_AT..NAME_AT]);
        Some(Record {
            size: get_u64(bytes, SIZE_AT),
            window_len: get_u64(bytes, WINDOW_LEN_AT),
            node,
            segment_name: super::node::text_until_nul(&bytes[NAME_AT..SEGMENT_LEN_AT]),
            segment_len: get_u64(bytes, SEGMENT_LEN_AT),
            create_outcome: decode_outcome(&bytes[CREATE_OUTCOME_AT..]),
        })
    }
}

/// Success or a [`SegmentError`], in `OUTCOME_LEN` bytes. This is also the
/// whole record of the second exchange (did attaching work?).
pub(crate) fn encode_outcome(outcome: &Result<(), SegmentError>) -> [u8; OUTCOME_LEN] {
    let mut bytes = [0u8; OUTCOME_LEN];
    match outcome {
        Ok(()) => {}
        Err(SegmentError::Os { call, errno }) => {
            bytes[0] = 1;
            bytes[1] = call.code();
            bytes[4..8].copy_from_slice(&errno.to_le_bytes());
        }
        Err(SegmentError::WrongSize { expected, found }) => {
            bytes[0] = 2;
            put_u64(&mut bytes, 8, *expected);
            put_u64(&mut bytes, 16, *found);
        }
        Err(SegmentError::BadName) => bytes[0] = 3,
        Err(SegmentError::BadLength(len)) => {
            bytes[0] = 4;
            put_u64(&mut bytes, 8, *len);
        }
        Err(SegmentError::LayoutMismatch) => bytes[0] = 5,
    }
    bytes
}

/// Anything undecodable was sent by an incompatible build: a layout mismatch.
pub(crate) fn decode_outcome(bytes: &[u8]) -> Result<(), SegmentError> {
    if bytes.len() != OUTCOME_LEN {
        return Err(SegmentError::LayoutMismatch);
    }
    match bytes[0] {
        0 => Ok(()),
        1 => match OsCall::from_code(bytes[1]) {
            Some(call) => {
                let errno = i32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
                Err(SegmentError::Os { call, errno })
            }
            None => Err(SegmentError::LayoutMismatch),
        },
        2 => Err(SegmentError::WrongSize { expected: get_u64(bytes, 8), found: get_u64(bytes, 16) }),
        3 => Err(SegmentError::BadName),
        4 => Err(SegmentError::BadLength(get_u64(bytes, 8))),
        _ => Err(SegmentError::LayoutMismatch),
    }
}

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

fn get_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_outcomes_round_trip() {
        let outcomes = [
            Ok(()),
            Err(SegmentError::Os { call: OsCall::Mmap, errno: libc::ENOMEM }),
            Err(SegmentError::WrongSize { expected: 8192, found: 4096 }),
            Err(SegmentError::BadName),
            Err(SegmentError::BadLength(12)),
            Err(SegmentError::LayoutMismatch),
        ];
        for outcome in outcomes {
            let record = Record {
                size: 5,
                window_len: 65536,
                node: NodeIdentity::current(),
                segment_name: "/coll_rdma.123.4".into(),
                segment_len: 1 << 20,
                create_outcome: outcome.clone(),
            };
            assert_eq!(Record::decode(&record.encode()), Some(record));
            assert_eq!(decode_outcome(&encode_outcome(&outcome)), outcome);
        }
        assert_eq!(Record::decode(&[0u8; RECORD_LEN]), None);
        assert_eq!(Record::decode(&[0u8; 3]), None);
    }
}
