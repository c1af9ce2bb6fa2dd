//! Registered memory: page-aligned, zeroed anonymous mappings pinned and
//! registered with the protection domain. The window, the staging ring, the
//! reliable-channel receive buffers and the multicast buffers are all one
//! of these. Other threads and the adapter write into them concurrently, so
//! the CPU only touches them through raw copies under the owner's lock or
//! through atomic words.

use std::ptr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use rdma_sys::{ibv_access_flags, ibv_dereg_mr, ibv_mr, ibv_reg_mr};

use super::context::ProtectionDomain;
use super::error::VerbsSetupError;

/// Access a buffer only the local adapter writes into (staging, receives).
pub(crate) const LOCAL_ONLY: ibv_access_flags = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE;

/// Access of a window peers write and read one-sidedly.
pub(crate) fn remote_access() -> ibv_access_flags {
    ibv_access_flags::IBV_ACCESS_LOCAL_WRITE | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE | ibv_access_flags::IBV_ACCESS_REMOTE_READ
}

/// Registered memory; it holds its protection domain, and memory someone
/// else mapped stays mapped until the registration is undone.
pub(crate) struct RegisteredBuffer {
    base: *mut u8,
    /// Bytes mapped: the requested length rounded up to whole pages.
    mapped: usize,
    mr: *mut ibv_mr,
    mapping: Mapping,
    _pd: Arc<ProtectionDomain>,
}

/// Who unmaps a registered buffer's memory.
enum Mapping {
    /// Mapped by `RegisteredBuffer::new`: unmapped after deregistering.
    Ours,
    /// Mapped by another owner (a node's shared-memory segment), kept
    /// alive until after the registration is undone.
    Borrowed { _keeper: MappingKeeper },
}

/// Whatever keeps borrowed memory mapped while it is held.
pub(crate) type MappingKeeper = Arc<dyn Send + Sync>;

/// Memory mapped by someone else that a transport registers as its window.
#[derive(Clone)]
pub(crate) struct BorrowedMemory {
    pub(crate) base: *mut u8,
    /// A whole number of pages.
    pub(crate) len: usize,
    /// Keeps `base..base + len` mapped for as long as it is held.
    pub(crate) keeper: MappingKeeper,
}

// SAFETY: the mapping and the MR handle are process-wide; every access to
// the bytes goes through raw copies serialised by the owner or atomics.
unsafe impl Send for RegisteredBuffer {}
// SAFETY: as above.
unsafe impl Sync for RegisteredBuffer {}

impl RegisteredBuffer {
    /// Maps `len` zeroed bytes (at least one page) and registers them.
    pub(crate) fn new(pd: &Arc<ProtectionDomain>, len: usize, access: ibv_access_flags, what: &str) -> Result<Self, VerbsSetupError> {
        let page = page_size();
        let mapped = len.max(1).checked_next_multiple_of(page).ok_or_else(|| {
            VerbsSetupError::InvalidArguments(format!("the {what} of {len} bytes does not fit in memory"))
        })?;
        // SAFETY: an anonymous private mapping with no address hint; the
        // result is checked and unmapped in drop.
        let base = unsafe {
            libc::mmap(ptr::null_mut(), mapped, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if base == libc::MAP_FAILED {
            return Err(VerbsSetupError::last_os("mmap", format!("for the {what} ({mapped} bytes)")));
        }
        let base = base.cast::<u8>();
        // SAFETY: the mapping was made above, is `mapped` bytes long and is
        // unmapped only by the buffer's drop (or below, on failure).
        match unsafe { Self::register(pd, base, mapped, access, what, Mapping::Ours) } {
            Ok(buffer) => Ok(buffer),
            Err(error) => {
                // SAFETY: the mapping was made above and is not used elsewhere.
                unsafe { libc::munmap(base.cast(), mapped) };
                Err(error)
            }
        }
    }

    /// Registers memory someone else mapped; the buffer holds
    /// `memory.keeper` until it has deregistered the memory.
    ///
    /// # Safety
    /// `memory` must be readable, writable and mapped for as long as its
    /// keeper is held.
    pub(crate) unsafe fn borrow(
        pd: &Arc<ProtectionDomain>,
        memory: BorrowedMemory,
        access: ibv_access_flags,
        what: &str,
    ) -> Result<Self, VerbsSetupError> {
        if memory.base.is_null() || memory.base as usize % 8 != 0 || memory.len % page_size() != 0 || memory.len == 0 {
            return Err(VerbsSetupError::InvalidArguments(format!("the {what} is not a page-multiple of aligned memory")));
        }
        let mapping = Mapping::Borrowed { _keeper: memory.keeper };
        // SAFETY: the buffer holds the keeper, which keeps the memory mapped.
        unsafe { Self::register(pd, memory.base, memory.len, access, what, mapping) }
    }

    /// # Safety
    /// `base` points to `mapped` bytes that stay mapped until the MR is
    /// deregistered in drop (`mapping` sees to that).
    unsafe fn register(
        pd: &Arc<ProtectionDomain>,
        base: *mut u8,
        mapped: usize,
        access: ibv_access_flags,
        what: &str,
        mapping: Mapping,
    ) -> Result<Self, VerbsSetupError> {
        let access_bits = i32::try_from(access.0).unwrap_or(i32::MAX);
        // SAFETY: per this function's contract.
        let mr = unsafe { ibv_reg_mr(pd.raw(), base.cast(), mapped, access_bits) };
        if mr.is_null() {
            return Err(VerbsSetupError::last_os("ibv_reg_mr", format!("for the {what} ({mapped} bytes)")));
        }
        Ok(RegisteredBuffer { base, mapped, mr, mapping, _pd: Arc::clone(pd) })
    }

    pub(crate) fn len(&self) -> usize {
        self.mapped
    }

    /// Whether the memory belongs to another mapping (a node's segment)
    /// rather than to this registration.
    pub(crate) fn is_borrowed(&self) -> bool {
        matches!(self.mapping, Mapping::Borrowed { .. })
    }

    pub(crate) fn address(&self) -> u64 {
        self.base as u64
    }

    pub(crate) fn lkey(&self) -> u32 {
        // SAFETY: the MR is valid until drop.
        unsafe { (*self.mr).lkey }
    }

    pub(crate) fn rkey(&self) -> u32 {
        // SAFETY: the MR is valid until drop.
        unsafe { (*self.mr).rkey }
    }

    /// The whole buffer as atomic words (it is page-aligned and a whole
    /// number of pages long).
    pub(crate) fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is 8-byte aligned, `mapped` is a multiple of 8,
        // AtomicU64 has the layout of u64, and the bytes live as long as
        // `self`. Writes by the adapter are like writes by another process.
        unsafe { std::slice::from_raw_parts(self.base.cast::<AtomicU64>(), self.mapped / 8) }
    }

    /// Copies `data` to byte `offset`. The caller guarantees that no one
    /// else accesses those bytes meanwhile (a staging slot it reserved, an
    /// outgoing buffer not yet posted).
    pub(crate) fn write_at(&self, offset: usize, data: &[u8]) {
        let fits = offset.checked_add(data.len()).is_some_and(|end| end <= self.mapped);
        assert!(fits, "registered-buffer write of {} bytes at {offset} past its {} bytes", data.len(), self.mapped);
        // SAFETY: the range is inside the mapping (checked above) and the
        // caller owns it exclusively for now; the source is a separate slice.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(offset), data.len()) };
    }

    /// Copies bytes at `offset` out; the caller guarantees the adapter has
    /// finished writing them (their receive completion was polled).
    pub(crate) fn read_at(&self, offset: usize, out: &mut [u8]) {
        let fits = offset.checked_add(out.len()).is_some_and(|end| end <= self.mapped);
        assert!(fits, "registered-buffer read of {} bytes at {offset} past its {} bytes", out.len(), self.mapped);
        // SAFETY: the range is inside the mapping (checked above) and no one
        // writes it meanwhile; `out` is a separate slice.
        unsafe { ptr::copy_nonoverlapping(self.base.add(offset), out.as_mut_ptr(), out.len()) };
    }
}

impl Drop for RegisteredBuffer {
    fn drop(&mut self) {
        // SAFETY: the MR was registered in `register` and is deregistered
        // once; its owner has flushed every request that reads from it.
        let rc = unsafe { ibv_dereg_mr(self.mr) };
        if rc != 0 {
            tracing::warn!("verbs: ibv_dereg_mr failed ({rc}); leaving {} bytes mapped", self.mapped);
            return;
        }
        if !matches!(self.mapping, Mapping::Ours) {
            // A borrowed mapping's keeper is let go of after this.
            return;
        }
        // SAFETY: the mapping was made in `new` and nothing refers to it now.
        unsafe { libc::munmap(self.base.cast(), self.mapped) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).ok().filter(|&page| page >= 8).unwrap_or(4096)
}
