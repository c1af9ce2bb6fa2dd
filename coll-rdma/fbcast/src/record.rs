//! The status record the root broadcasts before each item: a fixed-size
//! block (so every rank takes part in the same MPI_Bcast even when a record
//! turns out malformed), little-endian, validated field by field on decode.
//!
//! Layout (bytes): 0 magic "fbcS", 4 version u16, 6 kind u8, 7 policy u8,
//! 8 flags u32, 12 error i32, 16 mode u32, 20 chunk bytes u32, 24 size u64,
//! 32 mtime seconds i64, 40 mtime nanoseconds u32, 44 path length u16,
//! 46 reason length u16, 48 content hash [32], 80 path, then the reason
//! (UTF-8); zeros up to RECORD_BYTES.

use crate::error::ErrorCode;
use crate::policy::Policy;
use std::fmt;

pub const RECORD_BYTES: usize = 8192;
pub const MAX_PATH_BYTES: usize = 4096;
pub const MAX_REASON_BYTES: usize = 1024;
pub const HASH_BYTES: usize = 32;
const MAGIC: [u8; 4] = *b"fbcS";
const VERSION: u16 = 1;
const HEADER_BYTES: usize = 80;
/// Flag bit: fsync each file before it is renamed into place.
pub const FLAG_FSYNC: u32 = 1;
/// Smallest and largest chunk (one MPI_Bcast count must fit an int).
pub const MIN_CHUNK_BYTES: usize = 4096;
pub const MAX_CHUNK_BYTES: usize = i32::MAX as usize;

#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The source is one regular file; `path` is the root's source (for messages).
    File = 1,
    /// The source is a directory; `path` is the root's source (for messages).
    TreeBegin = 2,
    /// A directory inside the tree; `path` relative to the tree.
    TreeDir = 3,
    /// A regular file inside the tree; `path` relative to the tree.
    TreeFile = 4,
    /// The tree is complete.
    TreeEnd = 5,
    /// The root failed (`error`, `reason`); nothing follows.
    Failed = 6,
}

impl Kind {
    fn from_u8(value: u8) -> Option<Kind> {
        [Kind::File, Kind::TreeBegin, Kind::TreeDir, Kind::TreeFile, Kind::TreeEnd, Kind::Failed]
            .into_iter()
            .find(|k| *k as u8 == value)
    }

    pub fn carries_data(self) -> bool {
        matches!(self, Kind::File | Kind::TreeFile)
    }

    fn path_is_relative_entry(self) -> bool {
        matches!(self, Kind::TreeDir | Kind::TreeFile)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusRecord {
    pub kind: Kind,
    pub policy: Policy,
    pub flags: u32,
    /// The root's error code (Failed records only, else 0).
    pub error: i32,
    pub mode: u32,
    pub chunk_bytes: u32,
    pub size: u64,
    pub mtime_sec: i64,
    pub mtime_nsec: u32,
    pub hash: [u8; HASH_BYTES],
    /// Raw bytes of a Unix path.
    pub path: Vec<u8>,
    /// The root's reason (Failed records only).
    pub reason: String,
}

impl StatusRecord {
    /// A record of `kind` with every other field empty.
    pub fn new(kind: Kind, policy: Policy) -> StatusRecord {
        StatusRecord {
            kind,
            policy,
            flags: 0,
            error: 0,
            mode: 0,
            chunk_bytes: 0,
            size: 0,
            mtime_sec: 0,
            mtime_nsec: 0,
            hash: [0; HASH_BYTES],
            path: Vec::new(),
            reason: String::new(),
        }
    }

    pub fn failed(policy: Policy, code: ErrorCode, reason: &str) -> StatusRecord {
        let mut record = StatusRecord::new(Kind::Failed, policy);
        record.error = code as i32;
        record.reason = truncate_utf8(reason, MAX_REASON_BYTES).to_string();
        record
    }

    pub fn encode(&self) -> Result<Vec<u8>, DecodeError> {
        self.validate()?;
        let mut buf = vec![0u8; RECORD_BYTES];
        buf[0..4].copy_from_slice(&MAGIC);
        buf[4..6].copy_from_slice(&VERSION.to_le_bytes());
        buf[6] = self.kind as u8;
        buf[7] = self.policy as u8;
        buf[8..12].copy_from_slice(&self.flags.to_le_bytes());
        buf[12..16].copy_from_slice(&self.error.to_le_bytes());
        buf[16..20].copy_from_slice(&self.mode.to_le_bytes());
        buf[20..24].copy_from_slice(&self.chunk_bytes.to_le_bytes());
        buf[24..32].copy_from_slice(&self.size.to_le_bytes());
        buf[32..40].copy_from_slice(&self.mtime_sec.to_le_bytes());
        buf[40..44].copy_from_slice(&self.mtime_nsec.to_le_bytes());
        buf[44..46].copy_from_slice(&(self.path.len() as u16).to_le_bytes());
        buf[46..48].copy_from_slice(&(self.reason.len() as u16).to_le_bytes());
        buf[48..80].copy_from_slice(&self.hash);
        let path_end = HEADER_BYTES + self.path.len();
        buf[HEADER_BYTES..path_end].copy_from_slice(&self.path);
        buf[path_end..path_end + self.reason.len()].copy_from_slice(self.reason.as_bytes());
        Ok(buf)
    }

    pub fn decode(buf: &[u8]) -> Result<StatusRecord, DecodeError> {
        if buf.len() != RECORD_BYTES {
            return Err(DecodeError::Length(buf.len()));
        }
        if buf[0..4] != MAGIC {
            return Err(DecodeError::Magic);
        }
        let u16_at = |at: usize| u16::from_le_bytes([buf[at], buf[at + 1]]);
        let u32_at = |at: usize| u32::from_le_bytes(buf[at..at + 4].try_into().unwrap());
        let version = u16_at(4);
        if version != VERSION {
            return Err(DecodeError::Version(version));
        }
        let kind = Kind::from_u8(buf[6]).ok_or(DecodeError::Kind(buf[6]))?;
        let policy = Policy::from_u8(buf[7]).ok_or(DecodeError::Policy(buf[7]))?;
        let path_len = u16_at(44) as usize;
        let reason_len = u16_at(46) as usize;
        if path_len > MAX_PATH_BYTES || reason_len > MAX_REASON_BYTES {
            return Err(DecodeError::Lengths);
        }
        let path_end = HEADER_BYTES + path_len;
        let reason_end = path_end + reason_len;
        if buf[reason_end..].iter().any(|b| *b != 0) {
            return Err(DecodeError::TrailingBytes);
        }
        let reason = std::str::from_utf8(&buf[path_end..reason_end]).map_err(|_| DecodeError::Reason)?.to_string();
        let record = StatusRecord {
            kind,
            policy,
            flags: u32_at(8),
            error: i32::from_le_bytes(buf[12..16].try_into().unwrap()),
            mode: u32_at(16),
            chunk_bytes: u32_at(20),
            size: u64::from_le_bytes(buf[24..32].try_into().unwrap()),
            mtime_sec: i64::from_le_bytes(buf[32..40].try_into().unwrap()),
            mtime_nsec: u32_at(40),
            hash: buf[48..80].try_into().unwrap(),
            path: buf[HEADER_BYTES..path_end].to_vec(),
            reason,
        };
        record.validate()?;
        Ok(record)
    }

    /// The rules both ends enforce, so that a root never sends what a
    /// destination would reject.
    fn validate(&self) -> Result<(), DecodeError> {
        if self.flags & !FLAG_FSYNC != 0 {
            return Err(DecodeError::Flags(self.flags));
        }
        match (self.kind, ErrorCode::from_i32(self.error)) {
            (Kind::Failed, Some(_)) => {}
            (Kind::Failed, None) => return Err(DecodeError::Error(self.error)),
            (_, _) if self.error != 0 => return Err(DecodeError::Error(self.error)),
            _ => {}
        }
        if self.mode > 0o7777 || self.mtime_nsec >= 1_000_000_000 {
            return Err(DecodeError::Metadata);
        }
        if self.kind.carries_data() && !(MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&(self.chunk_bytes as usize)) {
            return Err(DecodeError::Chunk(self.chunk_bytes));
        }
        if self.path.len() > MAX_PATH_BYTES || self.reason.len() > MAX_REASON_BYTES {
            return Err(DecodeError::Lengths);
        }
        if self.path.contains(&0) {
            return Err(DecodeError::Path);
        }
        if self.kind.path_is_relative_entry() && !is_safe_relative_path(&self.path) {
            return Err(DecodeError::Path);
        }
        Ok(())
    }
}

/// A path inside the destination tree: not empty, not absolute, no empty,
/// `.` or `..` component, so that it can never leave the tree.
pub fn is_safe_relative_path(path: &[u8]) -> bool {
    !path.is_empty() && path[0] != b'/' && path.split(|b| *b == b'/').all(|c| !c.is_empty() && c != b"." && c != b"..")
}

pub fn truncate_utf8(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    Length(usize),
    Magic,
    Version(u16),
    Kind(u8),
    Policy(u8),
    Flags(u32),
    Error(i32),
    Metadata,
    Chunk(u32),
    Lengths,
    TrailingBytes,
    Path,
    Reason,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Length(n) => write!(f, "record of {n} bytes, expected {RECORD_BYTES}"),
            DecodeError::Magic => f.write_str("not a status record (bad magic)"),
            DecodeError::Version(v) => write!(f, "status record version {v}, this build speaks {VERSION}"),
            DecodeError::Kind(k) => write!(f, "unknown record kind {k}"),
            DecodeError::Policy(p) => write!(f, "unknown overwrite policy {p}"),
            DecodeError::Flags(x) => write!(f, "unknown flags {x:#x}"),
            DecodeError::Error(e) => write!(f, "error code {e} does not fit the record kind"),
            DecodeError::Metadata => f.write_str("mode or mtime out of range"),
            DecodeError::Chunk(c) => write!(f, "chunk size {c} out of range"),
            DecodeError::Lengths => f.write_str("path or reason too long"),
            DecodeError::TrailingBytes => f.write_str("bytes after the record's end"),
            DecodeError::Path => f.write_str("path unsafe or malformed"),
            DecodeError::Reason => f.write_str("reason is not UTF-8"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_record() -> StatusRecord {
        let mut r = StatusRecord::new(Kind::TreeFile, Policy::Never);
        r.flags = FLAG_FSYNC;
        r.mode = 0o640;
        r.chunk_bytes = 4 << 20;
        r.size = 64 << 20;
        r.mtime_sec = 1_700_000_000;
        r.mtime_nsec = 123_456_789;
        r.hash = [7; HASH_BYTES];
        r.path = b"sub/dir/file.bin".to_vec();
        r
    }

    #[test]
    fn round_trip() {
        let records = [
            file_record(),
            StatusRecord::failed(Policy::Always, ErrorCode::Source, "cannot open /x: No such file or directory"),
            StatusRecord::new(Kind::TreeEnd, Policy::IfDifferent),
            {
                let mut r = StatusRecord::new(Kind::TreeBegin, Policy::IfDifferent);
                r.path = b"/abs/source dir".to_vec();
                r.mode = 0o755;
                r
            },
        ];
        for r in records {
            let bytes = r.encode().unwrap();
            assert_eq!(bytes.len(), RECORD_BYTES);
            assert_eq!(StatusRecord::decode(&bytes).unwrap(), r);
        }
    }

    #[test]
    fn malformed_records_are_rejected() {
        let good = file_record().encode().unwrap();
        let broken = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            edit(&mut b);
            StatusRecord::decode(&b).unwrap_err()
        };
        assert_eq!(StatusRecord::decode(&good[..100]).unwrap_err(), DecodeError::Length(100));
        assert_eq!(broken(&|b| b[0] = b'X'), DecodeError::Magic);
        assert_eq!(broken(&|b| b[4] = 2), DecodeError::Version(2));
        assert_eq!(broken(&|b| b[6] = 0), DecodeError::Kind(0));
        assert_eq!(broken(&|b| b[6] = 7), DecodeError::Kind(7));
        assert_eq!(broken(&|b| b[7] = 3), DecodeError::Policy(3));
        assert_eq!(broken(&|b| b[8] = 2), DecodeError::Flags(2));
        assert_eq!(broken(&|b| b[12] = 2), DecodeError::Error(2));
        assert_eq!(broken(&|b| b[17] = 0x10), DecodeError::Metadata);
        assert_eq!(broken(&|b| b[43] = 0x40), DecodeError::Metadata);
        assert_eq!(broken(&|b| b[20..24].copy_from_slice(&100u32.to_le_bytes())), DecodeError::Chunk(100));
        assert_eq!(broken(&|b| b[20..24].copy_from_slice(&u32::MAX.to_le_bytes())), DecodeError::Chunk(u32::MAX));
        assert_eq!(broken(&|b| b[44..46].copy_from_slice(&5000u16.to_le_bytes())), DecodeError::Lengths);
        assert_eq!(broken(&|b| b[46..48].copy_from_slice(&2000u16.to_le_bytes())), DecodeError::Lengths);
        assert_eq!(broken(&|b| b[RECORD_BYTES - 1] = 1), DecodeError::TrailingBytes);
        // the path's length shortened: its last byte is then trailing garbage
        assert_eq!(broken(&|b| b[44] -= 1), DecodeError::TrailingBytes);
        assert_eq!(broken(&|b| b[80 + 3] = 0), DecodeError::Path);
        // a failure record whose code is unknown, a reason that is not UTF-8
        let mut failed = StatusRecord::failed(Policy::Never, ErrorCode::Io, "read error").encode().unwrap();
        failed[12] = 42;
        assert_eq!(StatusRecord::decode(&failed).unwrap_err(), DecodeError::Error(42));
        let mut failed = StatusRecord::failed(Policy::Never, ErrorCode::Io, "read error").encode().unwrap();
        failed[80] = 0xff;
        assert_eq!(StatusRecord::decode(&failed).unwrap_err(), DecodeError::Reason);
    }

    #[test]
    fn entries_cannot_leave_the_tree() {
        for bad in [&b""[..], b"/etc/passwd", b"../x", b"a/../../x", b"a//b", b"a/./b", b"a/", b".", b".."] {
            assert!(!is_safe_relative_path(bad), "{}", String::from_utf8_lossy(bad));
            let mut r = file_record();
            r.path = bad.to_vec();
            assert_eq!(r.encode().unwrap_err(), DecodeError::Path);
        }
        for good in [&b"a"[..], b"a/b/c", b"..a", b"a..", b".hidden/x"] {
            assert!(is_safe_relative_path(good));
        }
        // the top record's path is the root's source, for messages: absolute is fine
        let mut top = StatusRecord::new(Kind::File, Policy::Never);
        top.chunk_bytes = MIN_CHUNK_BYTES as u32;
        top.path = b"/data/../x".to_vec();
        assert!(top.encode().is_ok());
    }

    #[test]
    fn long_reasons_are_cut_at_a_character_boundary() {
        let reason = "é".repeat(MAX_REASON_BYTES);
        let r = StatusRecord::failed(Policy::Never, ErrorCode::Source, &reason);
        assert!(r.reason.len() <= MAX_REASON_BYTES && r.reason.len() >= MAX_REASON_BYTES - 1);
        assert_eq!(StatusRecord::decode(&r.encode().unwrap()).unwrap(), r);
    }
}
