//! The C API (include/coll_rdma_fbcast.h). No panic crosses it: one would
//! leave the ranks out of step, so it ends the job with MPI_Abort.

use crate::error::{ErrorCode, Failure};
use crate::mpi::{self, Comm, MPI_Comm};
use crate::policy::Policy;
use crate::transfer::{DEFAULT_CHUNK_BYTES, Options, bcast_path_after};
use std::ffi::{CStr, OsStr};
use std::os::raw::{c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

pub const FLAG_POLICY_MASK: c_int = 3;
pub const FLAG_RECURSIVE: c_int = 4;
pub const FLAG_FSYNC: c_int = 8;
const KNOWN_FLAGS: c_int = FLAG_POLICY_MASK | FLAG_RECURSIVE | FLAG_FSYNC;

/// The options the C flags (and chunk size, 0 = default) stand for.
pub fn options_from_flags(flags: c_int, chunk_bytes: usize) -> Result<Options, Failure> {
    let bad = |what: String| Failure::new(ErrorCode::Arg, what);
    if flags & !KNOWN_FLAGS != 0 {
        return Err(bad(format!("unknown flag bits {:#x}", flags & !KNOWN_FLAGS)));
    }
    let policy = Policy::from_u8((flags & FLAG_POLICY_MASK) as u8).ok_or_else(|| bad("overwrite policy 3 does not exist".into()))?;
    Ok(Options {
        policy,
        chunk_bytes: if chunk_bytes == 0 { DEFAULT_CHUNK_BYTES } else { chunk_bytes },
        fsync: flags & FLAG_FSYNC != 0,
        recursive: flags & FLAG_RECURSIVE != 0,
    })
}

/// # Safety
/// `text` is NULL or a NUL-terminated string.
unsafe fn path_arg<'a>(text: *const c_char) -> Option<&'a Path> {
    if text.is_null() {
        return None;
    }
    // SAFETY: non-NULL and NUL-terminated (caller's contract).
    let bytes = unsafe { CStr::from_ptr(text) }.to_bytes();
    Some(Path::new(OsStr::from_bytes(bytes)))
}

/// # Safety
/// See coll_rdma_bcast_file_chunked.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coll_rdma_bcast_file(comm: MPI_Comm, root: c_int, src: *const c_char, dst: *const c_char, flags: c_int) -> c_int {
    // SAFETY: same contract.
    unsafe { coll_rdma_bcast_file_chunked(comm, root, src, dst, flags, 0) }
}

/// # Safety
/// `comm` is a valid intracommunicator; `src` and `dst` are NULL or
/// NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coll_rdma_bcast_file_chunked(
    comm: MPI_Comm,
    root: c_int,
    src: *const c_char,
    dst: *const c_char,
    flags: c_int,
    chunk_bytes: usize,
) -> c_int {
    if comm.is_null() {
        return ErrorCode::Arg as c_int;
    }
    // SAFETY: valid communicator (caller's contract).
    let comm = unsafe { Comm::from_raw(comm) };
    // SAFETY: NULL or NUL-terminated (caller's contract).
    let (src, dst) = unsafe { (path_arg(src), path_arg(dst)) };
    let outcome = std::panic::catch_unwind(|| {
        // Bad flags on one rank must not stop it before the others: it
        // takes part with a default policy and its error is agreed on.
        let (options, bad_flags) = match options_from_flags(flags, chunk_bytes) {
            Ok(o) => (o, None),
            Err(f) => (Options::default(), Some(f)),
        };
        bcast_path_after(&comm, root, src, dst, &options, bad_flags, None).result
    });
    match outcome {
        Ok(Ok(())) => 0,
        Ok(Err(code)) => code as c_int,
        Err(_) => {
            eprintln!("coll_rdma_bcast_file: internal error (panic); ending the job");
            mpi::abort(&comm, ErrorCode::Protocol as c_int)
        }
    }
}

/// A static description of a return code.
#[unsafe(no_mangle)]
pub extern "C" fn coll_rdma_bcast_file_strerror(code: c_int) -> *const c_char {
    let description = match code {
        0 => c"success",
        _ => ErrorCode::from_i32(code).map_or(c"unknown coll_rdma_bcast_file code", ErrorCode::describe_c),
    };
    description.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_map_to_options_and_unknown_bits_are_refused() {
        let o = options_from_flags(0, 0).unwrap();
        assert_eq!((o.policy, o.recursive, o.fsync, o.chunk_bytes), (Policy::IfDifferent, false, false, DEFAULT_CHUNK_BYTES));
        let o = options_from_flags(1 | FLAG_RECURSIVE | FLAG_FSYNC, 65536).unwrap();
        assert_eq!((o.policy, o.recursive, o.fsync, o.chunk_bytes), (Policy::Never, true, true, 65536));
        assert_eq!(options_from_flags(2, 0).unwrap().policy, Policy::Always);
        assert_eq!(options_from_flags(3, 0).unwrap_err().code, ErrorCode::Arg);
        assert_eq!(options_from_flags(16, 0).unwrap_err().code, ErrorCode::Arg);
    }

    #[test]
    fn descriptions_match_the_rust_ones() {
        for code in ErrorCode::ALL {
            // SAFETY: strerror returns a static NUL-terminated string.
            let text = unsafe { CStr::from_ptr(coll_rdma_bcast_file_strerror(code as c_int)) };
            assert_eq!(text.to_str().unwrap(), code.describe());
        }
        // SAFETY: as above.
        let unknown = unsafe { CStr::from_ptr(coll_rdma_bcast_file_strerror(99)) };
        assert!(unknown.to_str().unwrap().starts_with("unknown"));
    }

    #[test]
    fn header_matches_the_library() {
        let header = include_str!("../include/coll_rdma_fbcast.h");
        let value = |name: &str| -> c_int {
            let prefix = format!("#define {name} ");
            let line = header.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{name} missing"));
            line[prefix.len()..].split_whitespace().next().unwrap().parse().unwrap()
        };
        assert_eq!(value("COLL_RDMA_BCAST_FILE_OK"), 0);
        let suffixes = ["ARG", "SOURCE", "EXISTS", "DEST", "NOSPACE", "IO", "CORRUPT", "PROTOCOL", "MPI"];
        for (code, suffix) in ErrorCode::ALL.into_iter().zip(suffixes) {
            assert_eq!(value(&format!("COLL_RDMA_BCAST_FILE_ERR_{suffix}")), code as c_int, "{code:?}");
        }
        assert_eq!(value("COLL_RDMA_BCAST_FILE_IF_DIFFERENT"), Policy::IfDifferent as c_int);
        assert_eq!(value("COLL_RDMA_BCAST_FILE_NEVER"), Policy::Never as c_int);
        assert_eq!(value("COLL_RDMA_BCAST_FILE_ALWAYS"), Policy::Always as c_int);
        assert_eq!(value("COLL_RDMA_BCAST_FILE_POLICY_MASK"), FLAG_POLICY_MASK);
        assert_eq!(value("COLL_RDMA_BCAST_FILE_RECURSIVE"), FLAG_RECURSIVE);
        assert_eq!(value("COLL_RDMA_BCAST_FILE_FSYNC"), FLAG_FSYNC);
    }
}
