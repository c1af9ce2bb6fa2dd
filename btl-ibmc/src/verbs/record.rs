//! The fixed-size records ranks exchange while establishing verbs, and
//! their little-endian encoding.
//!
//! First exchange, one record per rank (`record_len(size)` bytes):
//!
//! | bytes   | field                                                   |
//! |---------|---------------------------------------------------------|
//! | 0..8    | magic "CRVERBS" + version                               |
//! | 8..16   | communicator size                                       |
//! | 16..24  | window length                                           |
//! | 24      | 0 = ready, 1 = failed (text at 80..176)                 |
//! | 25      | port number                                             |
//! | 26      | link layer (1 InfiniBand, 2 Ethernet)                   |
//! | 27      | active MTU (verbs enum)                                 |
//! | 28..30  | LID                                                     |
//! | 32..36  | first packet sequence number of every queue pair        |
//! | 36..40  | rkey of the window                                      |
//! | 40..56  | GID                                                     |
//! | 56..64  | virtual address of the window                           |
//! | 64..72  | virtual address of the completion sink (8 bytes)        |
//! | 72..76  | rkey of the completion sink                             |
//! | 80..176 | failure text, NUL-padded                                |
//! | 176..   | per target rank t: QP number this rank created for t    |
//!
//! Second exchange (`READY_LEN` bytes): did connecting work, did the
//! multicast join, and if so where this rank's datagrams come from (UD
//! queue pair number, bound IPv4 address) and how the rank means to seal
//! them; rank 0's also carries the communicator's multicast nonce and
//! the key its datagrams are sealed under, both drawn from the OS's
//! random source. This exchange runs over Open MPI's own transports,
//! never over the fabric the key protects.
//!
//! | bytes   | field                                                   |
//! |---------|---------------------------------------------------------|
//! | 0..8    | magic "CRVERBR" + version                               |
//! | 8       | 0 = connected, 1 = failed (text at 64..)                |
//! | 9       | 1 = joined the multicast group                          |
//! | 10      | datagram protection (`Protection::code`)                |
//! | 16..24  | multicast nonce (rank 0's is used)                      |
//! | 24..28  | UD queue pair number                                    |
//! | 28..32  | IPv4 address the UD queue pair sends from               |
//! | 32..64  | datagram key (rank 0's is used; zeros elsewhere)        |
//! | 64..    | failure text, NUL-padded                                |

use crate::seal::{KEY_BYTES, Protection};

/// "CRVERBS" with a trailing version byte; bump when the encoding changes.
const RECORD_MAGIC: u64 = 0x4352_5645_5242_5301;
const READY_MAGIC: u64 = 0x4352_5645_5242_5204;
pub(crate) const TEXT_BYTES: usize = 96;
const HEADER_LEN: usize = 176;
const TEXT_AT: usize = 80;
const KEY_AT: usize = 32;
const READY_TEXT_AT: usize = KEY_AT + KEY_BYTES;
pub(crate) const READY_LEN: usize = READY_TEXT_AT + TEXT_BYTES;

pub(crate) const fn record_len(size: usize) -> usize {
    HEADER_LEN + 4 * size
}

/// How a rank's end can be reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) port: u8,
    pub(crate) link_layer: u8,
    pub(crate) mtu_code: u8,
    pub(crate) lid: u16,
    pub(crate) psn: u32,
    pub(crate) gid: [u8; 16],
    pub(crate) window_address: u64,
    pub(crate) window_rkey: u32,
    pub(crate) sink_address: u64,
    pub(crate) sink_rkey: u32,
    /// Indexed by target rank; 0 for the rank itself.
    pub(crate) qp_nums: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) size: u64,
    pub(crate) window_len: u64,
    /// The rank's endpoint, or why it could not make one.
    pub(crate) endpoint: Result<Endpoint, String>,
}

impl Record {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let size = usize::try_from(self.size).unwrap_or(0);
        let mut bytes = vec![0u8; record_len(size)];
        put_u64(&mut bytes, 0, RECORD_MAGIC);
        put_u64(&mut bytes, 8, self.size);
        put_u64(&mut bytes, 16, self.window_len);
        match &self.endpoint {
            Err(why) => {
                bytes[24] = 1;
                put_text(&mut bytes[TEXT_AT..TEXT_AT + TEXT_BYTES], why);
            }
            Ok(endpoint) => {
                bytes[25] = endpoint.port;
                bytes[26] = endpoint.link_layer;
                bytes[27] = endpoint.mtu_code;
                bytes[28..30].copy_from_slice(&endpoint.lid.to_le_bytes());
                put_u32(&mut bytes, 32, endpoint.psn);
                put_u32(&mut bytes, 36, endpoint.window_rkey);
                bytes[40..56].copy_from_slice(&endpoint.gid);
                put_u64(&mut bytes, 56, endpoint.window_address);
                put_u64(&mut bytes, 64, endpoint.sink_address);
                put_u32(&mut bytes, 72, endpoint.sink_rkey);
                for (target, &qp_num) in endpoint.qp_nums.iter().enumerate().take(size) {
                    put_u32(&mut bytes, HEADER_LEN + 4 * target, qp_num);
                }
            }
        }
        bytes
    }

    /// None if `bytes` is not a record of this version for `size` ranks.
    pub(crate) fn decode(bytes: &[u8], size: usize) -> Option<Record> {
        if bytes.len() != record_len(size) || get_u64(bytes, 0) != RECORD_MAGIC {
            return None;
        }
        let endpoint = match bytes[24] {
            0 => Ok(Endpoint {
                port: bytes[25],
                link_layer: bytes[26],
                mtu_code: bytes[27],
                lid: u16::from_le_bytes([bytes[28], bytes[29]]),
                psn: get_u32(bytes, 32),
                window_rkey: get_u32(bytes, 36),
                gid: bytes[40..56].try_into().ok()?,
                window_address: get_u64(bytes, 56),
                sink_address: get_u64(bytes, 64),
                sink_rkey: get_u32(bytes, 72),
                qp_nums: (0..size).map(|target| get_u32(bytes, HEADER_LEN + 4 * target)).collect(),
            }),
            1 => Err(get_text(&bytes[TEXT_AT..TEXT_AT + TEXT_BYTES])),
            _ => return None,
        };
        Some(Record { size: get_u64(bytes, 8), window_len: get_u64(bytes, 16), endpoint })
    }
}

/// The second exchange: whether a rank connected all its queue pairs, and
/// whether it joined the multicast group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ready {
    pub(crate) connected: Result<(), String>,
    pub(crate) multicast_joined: bool,
    pub(crate) multicast_nonce: u64,
    pub(crate) ud_qp_num: u32,
    pub(crate) ud_ipv4: [u8; 4],
    pub(crate) protection: Protection,
    pub(crate) key: [u8; KEY_BYTES],
}

impl Ready {
    pub(crate) fn encode(&self) -> [u8; READY_LEN] {
        let mut bytes = [0u8; READY_LEN];
        put_u64(&mut bytes, 0, READY_MAGIC);
        if let Err(why) = &self.connected {
            bytes[8] = 1;
            put_text(&mut bytes[READY_TEXT_AT..], why);
        }
        bytes[9] = u8::from(self.multicast_joined);
        put_u64(&mut bytes, 16, self.multicast_nonce);
        put_u32(&mut bytes, 24, self.ud_qp_num);
        bytes[28..32].copy_from_slice(&self.ud_ipv4);
        bytes[10] = self.protection.code();
        bytes[KEY_AT..READY_TEXT_AT].copy_from_slice(&self.key);
        bytes
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Ready> {
        if bytes.len() != READY_LEN || get_u64(bytes, 0) != READY_MAGIC {
            return None;
        }
        let connected = match bytes[8] {
            0 => Ok(()),
            1 => Err(get_text(&bytes[READY_TEXT_AT..])),
            _ => return None,
        };
        Some(Ready {
            connected,
            multicast_joined: bytes[9] == 1,
            multicast_nonce: get_u64(bytes, 16),
            ud_qp_num: get_u32(bytes, 24),
            ud_ipv4: [bytes[28], bytes[29], bytes[30], bytes[31]],
            protection: Protection::from_code(bytes[10])?,
            key: bytes[KEY_AT..READY_TEXT_AT].try_into().ok()?,
        })
    }
}

/// Writes as much of `text` as fits, cut at a character boundary.
fn put_text(field: &mut [u8], text: &str) {
    let mut len = text.len().min(field.len());
    while !text.is_char_boundary(len) {
        len -= 1;
    }
    field[..len].copy_from_slice(&text.as_bytes()[..len]);
}

fn get_text(field: &[u8]) -> String {
    let end = field.iter().position(|&byte| byte == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

pub(super) fn get_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

pub(super) fn get_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_in_both_outcomes() {
        let endpoint = Endpoint {
            port: 1,
            link_layer: 2,
            mtu_code: 3,
            lid: 0x1234,
            psn: 0x00AB_CDEF,
            gid: [7; 16],
            window_address: 0x7F00_1234_5000,
            window_rkey: 0xDEAD_BEEF,
            sink_address: 0x7F00_9999_0000,
            sink_rkey: 42,
            qp_nums: vec![17, 0, 19],
        };
        let ok = Record { size: 3, window_len: 1 << 20, endpoint: Ok(endpoint) };
        assert_eq!(Record::decode(&ok.encode(), 3), Some(ok.clone()));
        assert_eq!(Record::decode(&ok.encode(), 4), None, "length depends on the size");

        let long = "é".repeat(100);
        let failed = Record { size: 3, window_len: 8, endpoint: Err(long.clone()) };
        let decoded = Record::decode(&failed.encode(), 3).expect("decodes");
        assert_eq!(decoded.endpoint, Err("é".repeat(TEXT_BYTES / 2)));
        assert_eq!(Record::decode(&[0u8; record_len(3)], 3), None);
    }

    #[test]
    fn ready_records_round_trip() {
        for ready in [
            Ready {
                connected: Ok(()),
                multicast_joined: true,
                multicast_nonce: u64::MAX - 5,
                ud_qp_num: 0x00AB_CDEF,
                ud_ipv4: [10, 1, 2, 3],
                protection: Protection::Encrypt,
                key: std::array::from_fn(|i| i as u8 + 1),
            },
            Ready {
                connected: Ok(()),
                multicast_joined: false,
                multicast_nonce: 0,
                ud_qp_num: 0,
                ud_ipv4: [0; 4],
                protection: Protection::None,
                key: [0; KEY_BYTES],
            },
            Ready {
                connected: Err("ibv_modify_qp failed".into()),
                multicast_joined: false,
                multicast_nonce: 7,
                ud_qp_num: 0,
                ud_ipv4: [0; 4],
                protection: Protection::Authenticate,
                key: [0; KEY_BYTES],
            },
        ] {
            assert_eq!(Ready::decode(&ready.encode()), Some(ready));
        }
        assert_eq!(Ready::decode(&[0u8; READY_LEN]), None);
    }
}
