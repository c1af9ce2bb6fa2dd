//! Return codes (the same numbers as in include/coll_rdma_fbcast.h) and a
//! rank's own reason for one.

use std::ffi::CStr;
use std::fmt;
use std::io;

/// Why a distribution failed. Every rank returns the same code: the largest
/// any rank saw (agreed with MPI_Allreduce(MAX)), so the order below also
/// says which cause is reported when several ranks fail differently.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorCode {
    /// Invalid argument (root out of range, missing path, unknown flag bits,
    /// chunk size out of range).
    Arg = 1,
    /// The source is missing, unreadable, not a regular file (or a directory
    /// without the recursive flag), replaced after it was planned, or
    /// changed while it was sent.
    Source = 2,
    /// The destination exists with other contents and the policy is "never".
    Exists = 3,
    /// The destination cannot be written: no temporary file can be created in
    /// its directory, a path component is not a directory, a directory
    /// another user could redirect (trusted_dir.rs), the rename failed.
    Dest = 4,
    /// A write failed for lack of space (ENOSPC, EDQUOT).
    NoSpace = 5,
    /// Another I/O error while the data were read or written.
    Io = 6,
    /// The data that arrived do not have the content hash the root announced.
    Corrupt = 7,
    /// A status record could not be decoded (ranks of different versions).
    Protocol = 8,
    /// An MPI call returned an error (only under MPI_ERRORS_RETURN): the one
    /// code that other ranks may not share.
    Mpi = 9,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 9] = [
        ErrorCode::Arg,
        ErrorCode::Source,
        ErrorCode::Exists,
        ErrorCode::Dest,
        ErrorCode::NoSpace,
        ErrorCode::Io,
        ErrorCode::Corrupt,
        ErrorCode::Protocol,
        ErrorCode::Mpi,
    ];

    pub fn from_i32(code: i32) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| *c as i32 == code)
    }

    /// A short description.
    pub fn describe(self) -> &'static str {
        self.describe_c().to_str().expect("descriptions are ASCII")
    }

    /// The same, NUL-terminated, for coll_rdma_bcast_file_strerror.
    pub fn describe_c(self) -> &'static CStr {
        match self {
            ErrorCode::Arg => c"invalid argument",
            ErrorCode::Source => c"source missing, unreadable or changed",
            ErrorCode::Exists => c"destination exists with other contents (policy never)",
            ErrorCode::Dest => c"destination cannot be written",
            ErrorCode::NoSpace => c"no space left on a destination",
            ErrorCode::Io => c"I/O error during the transfer",
            ErrorCode::Corrupt => c"received data do not match the content hash",
            ErrorCode::Protocol => c"malformed status record",
            ErrorCode::Mpi => c"MPI call failed",
        }
    }

    /// The code for a failed write or flush of a destination file.
    pub fn of_write(err: &io::Error) -> ErrorCode {
        match err.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => ErrorCode::NoSpace,
            _ => ErrorCode::Io,
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// A rank's own failure: the code and what happened, with the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: ErrorCode,
    pub reason: String,
}

impl Failure {
    pub fn new(code: ErrorCode, reason: impl Into<String>) -> Failure {
        Failure { code, reason: reason.into() }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_dense() {
        for (i, code) in ErrorCode::ALL.into_iter().enumerate() {
            assert_eq!(code as i32, i as i32 + 1);
            assert_eq!(ErrorCode::from_i32(code as i32), Some(code));
        }
        assert_eq!(ErrorCode::from_i32(0), None);
        assert_eq!(ErrorCode::from_i32(10), None);
    }

    #[test]
    fn full_disk_is_told_apart_from_other_write_errors() {
        assert_eq!(ErrorCode::of_write(&io::Error::from_raw_os_error(libc::ENOSPC)), ErrorCode::NoSpace);
        assert_eq!(ErrorCode::of_write(&io::Error::from_raw_os_error(libc::EDQUOT)), ErrorCode::NoSpace);
        assert_eq!(ErrorCode::of_write(&io::Error::from_raw_os_error(libc::EIO)), ErrorCode::Io);
    }
}
