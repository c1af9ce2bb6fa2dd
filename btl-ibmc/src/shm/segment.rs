//! A POSIX shared-memory object mapped into this process. The mapping is
//! only ever reached as a slice of atomic words: flags and counters are
//! atomic operations on them, and payload is copied plainly under the flag
//! protocol (`crate::words` gives the ordering argument).

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use super::naming::{Creator, fresh_name};

/// Attempts at a fresh name before giving up: with 64 random bits per
/// name, a collision means someone is creating names faster than chance.
const CREATE_ATTEMPTS: u32 = 16;

/// Attempts at the reservation while signals interrupt it: tmpfs abandons
/// (and undoes) a long reservation at any pending signal, so a process
/// taking frequent signals may need more than one.
const RESERVE_ATTEMPTS: u32 = 8;

/// The system call behind a [`SegmentError::Os`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OsCall {
    ShmOpen,
    Ftruncate,
    Fallocate,
    Fstat,
    Mmap,
    /// Neither getrandom nor /dev/urandom gave a random name.
    Naming,
}

impl OsCall {
    pub(crate) fn code(self) -> u8 {
        match self {
            OsCall::ShmOpen => 1,
            OsCall::Ftruncate => 2,
            OsCall::Fallocate => 3,
            OsCall::Fstat => 4,
            OsCall::Mmap => 5,
            OsCall::Naming => 6,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => OsCall::ShmOpen,
            2 => OsCall::Ftruncate,
            3 => OsCall::Fallocate,
            4 => OsCall::Fstat,
            5 => OsCall::Mmap,
            6 => OsCall::Naming,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            OsCall::ShmOpen => "shm_open",
            OsCall::Ftruncate => "ftruncate",
            OsCall::Fallocate => "posix_fallocate",
            OsCall::Fstat => "fstat",
            OsCall::Mmap => "mmap",
            OsCall::Naming => "getrandom (for the segment name)",
        }
    }
}

/// Why a segment could not be created or attached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SegmentError {
    Os { call: OsCall, errno: i32 },
    /// The object exists but is not the length the creator announced.
    WrongSize { expected: u64, found: u64 },
    /// The name holds a NUL byte or is empty.
    BadName,
    /// The requested length cannot be mapped (zero, or larger than the
    /// address space).
    BadLength(u64),
    /// The header the creator wrote does not describe the layout this rank
    /// expects: different builds of the component, or a foreign object.
    LayoutMismatch,
}

impl std::fmt::Display for SegmentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SegmentError::Os { call, errno } => {
                write!(f, "{} failed: {}", call.name(), std::io::Error::from_raw_os_error(*errno))?;
                if *errno == libc::ENOSPC && matches!(call, OsCall::Fallocate | OsCall::Ftruncate) {
                    write!(f, " (/dev/shm has no room for the node's whole segment: every rank's window and a ring per pair of ranks)")?;
                }
                Ok(())
            }
            SegmentError::WrongSize { expected, found } => {
                write!(f, "the shared-memory object is {found} bytes, expected {expected}")
            }
            SegmentError::BadName => write!(f, "the shared-memory name is empty or holds a NUL byte"),
            SegmentError::BadLength(len) => write!(f, "a shared-memory segment of {len} bytes cannot be mapped"),
            SegmentError::LayoutMismatch => {
                write!(f, "the segment header does not match this rank's layout (mixed builds of coll rdma?)")
            }
        }
    }
}

impl std::error::Error for SegmentError {}

/// A mapped POSIX shared-memory object; unmapped on drop. Whether the name
/// still exists is the creator's business ([`ShmSegment::unlink`]).
pub struct ShmSegment {
    base: NonNull<u8>,
    len: usize,
    name: String,
}

// SAFETY: the mapping is owned by this value and reached only through
// `words()`, a slice of atomics, so sharing or moving it across threads
// cannot create a data race.
unsafe impl Send for ShmSegment {}
// SAFETY: as for Send: every access through `&ShmSegment` is atomic.
unsafe impl Sync for ShmSegment {}

impl ShmSegment {
    /// Creates a new object of `len` bytes under a fresh unguessable name
    /// ([`super::naming`]), never one that existed before (`O_EXCL`),
    /// zero-filled, and guarantees that its first `reserve` bytes are backed
    /// now, so that a full /dev/shm fails here rather than with SIGBUS at
    /// the first touch (where the filesystem cannot reserve, the segment
    /// is made without the guarantee and a warning says so, once per
    /// process). `len` must be a multiple of 8.
    pub fn create(len: usize, reserve: usize) -> Result<ShmSegment, SegmentError> {
        check_length(len)?;
        let mut attempts = 0;
        // Without /proc the name cannot say who made it: never reaped then.
        let creator = Creator::current().unwrap_or_else(Creator::unknown);
        let (fd, name) = loop {
            let name = fresh_name(creator)
                .map_err(|e| SegmentError::Os { call: OsCall::Naming, errno: e.raw_os_error().unwrap_or(libc::EIO) })?;
            let c_name = CString::new(name.as_str()).map_err(|_| SegmentError::BadName)?;
            // SAFETY: c_name is a valid NUL-terminated string; the call only reads it.
            let fd = unsafe { libc::shm_open(c_name.as_ptr(), libc::O_CREAT | libc::O_EXCL | libc::O_RDWR, 0o600) };
            if fd >= 0 {
                break (fd, name);
            }
            let errno = last_errno();
            attempts += 1;
            if errno != libc::EEXIST || attempts >= CREATE_ATTEMPTS {
                return Err(SegmentError::Os { call: OsCall::ShmOpen, errno });
            }
        };
        let sized = size_and_map(fd, len, reserve.min(len));
        close(fd);
        match sized {
            Ok(base) => Ok(ShmSegment { base, len, name }),
            Err(error) => {
                let _ = ShmSegment::unlink(&name);
                Err(error)
            }
        }
    }

    /// Maps an existing object, which must be exactly `len` bytes long.
    pub fn attach(name: &str, len: usize) -> Result<ShmSegment, SegmentError> {
        check_length(len)?;
        if name.is_empty() {
            return Err(SegmentError::BadName);
        }
        let c_name = CString::new(name).map_err(|_| SegmentError::BadName)?;
        // SAFETY: c_name is a valid NUL-terminated string; the call only reads it.
        let fd = unsafe { libc::shm_open(c_name.as_ptr(), libc::O_RDWR, 0) };
        if fd < 0 {
            return Err(SegmentError::Os { call: OsCall::ShmOpen, errno: last_errno() });
        }
        let mapped = check_size(fd, len).and_then(|()| map(fd, len));
        close(fd);
        Ok(ShmSegment { base: mapped?, len, name: name.to_owned() })
    }

    /// Removes `name` from the namespace; existing mappings stay valid.
    pub fn unlink(name: &str) -> std::io::Result<()> {
        let c_name = CString::new(name).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: c_name is a valid NUL-terminated string; the call only reads it.
        if unsafe { libc::shm_unlink(c_name.as_ptr()) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole mapping as words. Every byte of it may change at any time
    /// under another process's hand, which atomics permit.
    #[inline]
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: `base` is the start of a live mapping of `len` bytes
        // (page-aligned, so aligned for AtomicU64; `len` is a multiple of 8
        // by `check_length`) that stays mapped until `self` drops, which the
        // returned borrow cannot outlive. AtomicU64 permits mutation through
        // shared references, so concurrent writers elsewhere are allowed.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().cast::<AtomicU64>(), self.len / 8) }
    }

    /// Stores one word with release ordering; used for headers written once.
    pub(crate) fn store_word(&self, index: usize, value: u64) {
        self.words()[index].store(value, Ordering::Release);
    }

    pub(crate) fn load_word(&self, index: usize) -> u64 {
        self.words()[index].load(Ordering::Acquire)
    }
}

impl Drop for ShmSegment {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` describe the mapping this value created and
        // no borrow of it (`words()`) can outlive `self`.
        let result = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
        if result != 0 {
            tracing::warn!("munmap of shared-memory segment {} failed: {}", self.name, std::io::Error::last_os_error());
        }
    }
}

impl std::fmt::Debug for ShmSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmSegment").field("name", &self.name).field("len", &self.len).finish()
    }
}

fn check_length(len: usize) -> Result<(), SegmentError> {
    if len == 0 || len % 8 != 0 || libc::off_t::try_from(len).is_err() {
        return Err(SegmentError::BadLength(len as u64));
    }
    Ok(())
}

fn size_and_map(fd: libc::c_int, len: usize, reserve: usize) -> Result<NonNull<u8>, SegmentError> {
    // check_length proved that len fits off_t, and reserve <= len.
    let (len_off, reserve_off) = (len as libc::off_t, reserve as libc::off_t);
    // SAFETY: fd is an open descriptor this function's caller owns.
    if unsafe { libc::ftruncate(fd, len_off) } != 0 {
        return Err(SegmentError::Os { call: OsCall::Ftruncate, errno: last_errno() });
    }
    if reserve_off > 0 {
        // SAFETY: as above; posix_fallocate reports errors by return value.
        let backing = reserve_backing(|| unsafe { libc::posix_fallocate(fd, 0, reserve_off) })?;
        if let Backing::Unreserved(errno) = backing {
            warn_unreserved_once(errno);
        }
    }
    map(fd, len)
}

/// What the reservation left behind a mapping that works either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backing {
    Reserved,
    /// The filesystem cannot preallocate (this errno): pages are backed
    /// only when first touched.
    Unreserved(i32),
}

/// Runs `fallocate` (posix_fallocate on the whole reservation; it returns
/// the errno) until it is not interrupted by a signal, a bounded number
/// of times.
fn reserve_backing(mut fallocate: impl FnMut() -> libc::c_int) -> Result<Backing, SegmentError> {
    let mut attempts = 1;
    loop {
        match fallocate() {
            0 => return Ok(Backing::Reserved),
            libc::EINTR if attempts < RESERVE_ATTEMPTS => attempts += 1,
            errno @ (libc::EOPNOTSUPP | libc::EINVAL) => return Ok(Backing::Unreserved(errno)),
            errno => return Err(SegmentError::Os { call: OsCall::Fallocate, errno }),
        }
    }
}

/// Said once per process: every segment after the first would say the same.
fn warn_unreserved_once(errno: i32) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "posix_fallocate of a shared-memory segment: {}: this filesystem cannot reserve it, so a /dev/shm that fills up \
             later kills a rank with SIGBUS mid-collective instead of failing setup (said once)",
            std::io::Error::from_raw_os_error(errno)
        );
    }
}

fn check_size(fd: libc::c_int, len: usize) -> Result<(), SegmentError> {
    // SAFETY: libc::stat is plain old data, valid when zeroed.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open and `stat` is a valid, writable stat buffer.
    if unsafe { libc::fstat(fd, &mut stat) } != 0 {
        return Err(SegmentError::Os { call: OsCall::Fstat, errno: last_errno() });
    }
    let found = u64::try_from(stat.st_size).unwrap_or(0);
    if found != len as u64 {
        return Err(SegmentError::WrongSize { expected: len as u64, found });
    }
    Ok(())
}

fn map(fd: libc::c_int, len: usize) -> Result<NonNull<u8>, SegmentError> {
    // SAFETY: a fresh shared mapping chosen by the kernel (null hint) of an
    // object at least `len` bytes long; it aliases no Rust-owned memory.
    let address = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
    };
    if address == libc::MAP_FAILED {
        return Err(SegmentError::Os { call: OsCall::Mmap, errno: last_errno() });
    }
    NonNull::new(address.cast::<u8>()).ok_or(SegmentError::Os { call: OsCall::Mmap, errno: libc::EINVAL })
}

fn close(fd: libc::c_int) {
    // SAFETY: fd was opened by this module and is closed exactly once; the
    // mapping made from it stays valid after the close.
    unsafe { libc::close(fd) };
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// Where the object named `name` appears in the filesystem on Linux.
#[cfg(test)]
pub(crate) fn dev_shm_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new("/dev/shm").join(name.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_attach_share_and_unlink() {
        let created = ShmSegment::create(3 * 4096, 4096).expect("create");
        let name = created.name().to_owned();
        assert!(name.starts_with(super::super::naming::NAME_PREFIX), "{name}");
        assert!(dev_shm_path(&name).exists(), "{name} missing from /dev/shm after create");
        assert!(created.words().iter().all(|w| w.load(Ordering::Relaxed) == 0), "new segment not zeroed");

        let attached = ShmSegment::attach(&name, 3 * 4096).expect("attach");
        created.store_word(100, 0xDEAD_BEEF);
        assert_eq!(attached.load_word(100), 0xDEAD_BEEF);
        assert_ne!(created.words().as_ptr(), attached.words().as_ptr(), "second mapping expected");

        assert_eq!(
            ShmSegment::attach(&name, 4096).unwrap_err(),
            SegmentError::WrongSize { expected: 4096, found: 3 * 4096 }
        );

        ShmSegment::unlink(&name).expect("unlink");
        assert!(!dev_shm_path(&name).exists(), "{name} still in /dev/shm after unlink");
        attached.store_word(101, 7);
        assert_eq!(created.load_word(101), 7, "mappings must outlive the name");

        let missing = ShmSegment::attach(&name, 3 * 4096).unwrap_err();
        assert_eq!(missing, SegmentError::Os { call: OsCall::ShmOpen, errno: libc::ENOENT });
        assert!(missing.to_string().starts_with("shm_open failed"), "{missing}");
    }

    /// `reserve_backing` over a scripted posix_fallocate: the errnos it
    /// returns in turn, and how many calls were made.
    fn reserve_with(script: &[i32]) -> (Result<Backing, SegmentError>, usize) {
        let mut calls = 0;
        let result = reserve_backing(|| {
            calls += 1;
            script[(calls - 1).min(script.len() - 1)]
        });
        (result, calls)
    }

    #[test]
    fn the_reservation_retries_signals_a_bounded_number_of_times() {
        let eintr = libc::EINTR;
        assert_eq!(reserve_with(&[0]), (Ok(Backing::Reserved), 1));
        assert_eq!(reserve_with(&[eintr, eintr, 0]), (Ok(Backing::Reserved), 3));
        assert_eq!(reserve_with(&[eintr, libc::ENOSPC]), (Err(SegmentError::Os { call: OsCall::Fallocate, errno: libc::ENOSPC }), 2));
        // A signal storm ends in an error, after exactly the bounded attempts.
        let storm = reserve_with(&[eintr]);
        assert_eq!(storm, (Err(SegmentError::Os { call: OsCall::Fallocate, errno: eintr }), RESERVE_ATTEMPTS as usize));
        // A filesystem that cannot preallocate is accepted, and told apart from a reservation.
        assert_eq!(reserve_with(&[libc::EOPNOTSUPP]), (Ok(Backing::Unreserved(libc::EOPNOTSUPP)), 1));
        assert_eq!(reserve_with(&[eintr, libc::EINVAL]), (Ok(Backing::Unreserved(libc::EINVAL)), 2));
        let full = reserve_with(&[libc::ENOSPC]).0.unwrap_err();
        assert!(full.to_string().contains("/dev/shm has no room"), "{full}");
    }

    #[test]
    fn names_are_unique_and_bad_arguments_are_rejected() {
        let a = ShmSegment::create(4096, 0).unwrap();
        let b = ShmSegment::create(4096, 0).unwrap();
        assert_ne!(a.name(), b.name());
        ShmSegment::unlink(a.name()).unwrap();
        ShmSegment::unlink(b.name()).unwrap();

        assert_eq!(ShmSegment::create(0, 0).unwrap_err(), SegmentError::BadLength(0));
        assert_eq!(ShmSegment::create(12, 0).unwrap_err(), SegmentError::BadLength(12));
        assert_eq!(ShmSegment::attach("", 4096).unwrap_err(), SegmentError::BadName);
        assert_eq!(ShmSegment::attach("/a\0b", 4096).unwrap_err(), SegmentError::BadName);
    }
}
