//! Cross-memory attach: copying straight out of (`process_vm_readv`) and
//! into (`process_vm_writev`) another process's memory (Linux; no kernel
//! module, unlike XPMEM). The
//! kernel allows it where ptrace would be allowed: the same user, and Yama's
//! `ptrace_scope` permitting (scope 1 refuses siblings such as MPI ranks).
//! So it is never assumed: [`CrossMemory::establish`] probes every peer
//! once at setup and all ranks adopt one verdict.

use std::io;

use crate::transport::{Exchange, TransportError};

/// Bytes per `process_vm_readv`/`writev` call: each call pins the pages it copies,
/// so a bounded call keeps one copy from holding many pages at once.
const CHUNK_BYTES: usize = 4 << 20;

/// Copies `out.len()` bytes at `address` in process `pid` into `out`.
pub fn read_process(pid: libc::pid_t, address: u64, out: &mut [u8]) -> io::Result<()> {
    let base = out.as_mut_ptr();
    in_chunks(out.len(), address, |done, want, remote_at| {
        // SAFETY: `done..done + want` lies within `out`, which we borrow
        // exclusively; the kernel only reads the remote range (in the other
        // process, checked by the kernel) and writes the local one.
        let local = libc::iovec { iov_base: unsafe { base.add(done) }.cast(), iov_len: want };
        let remote = libc::iovec { iov_base: remote_at as usize as *mut libc::c_void, iov_len: want };
        // SAFETY: both iovecs describe `want` bytes as said above.
        unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) }
    })
}

/// Copies `data` to `address` in process `pid`.
pub fn write_process(pid: libc::pid_t, address: u64, data: &[u8]) -> io::Result<()> {
    let base = data.as_ptr();
    in_chunks(data.len(), address, |done, want, remote_at| {
        // SAFETY: `done..done + want` lies within `data`, which the kernel
        // only reads (the iovec type is shared with readv, hence the
        // mutable pointer); the remote range is in the other process,
        // checked by the kernel.
        let local = libc::iovec { iov_base: unsafe { base.add(done) }.cast_mut().cast(), iov_len: want };
        let remote = libc::iovec { iov_base: remote_at as usize as *mut libc::c_void, iov_len: want };
        // SAFETY: both iovecs describe `want` bytes as said above.
        unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) }
    })
}

/// Runs `copy(done, want, remote address)` (a process_vm_readv/writev of
/// `want` bytes, returning what the call returned) until `len` bytes at
/// `address` are copied, `CHUNK_BYTES` at most per call.
fn in_chunks(len: usize, address: u64, mut copy: impl FnMut(usize, usize, u64) -> isize) -> io::Result<()> {
    let mut done = 0;
    while done < len {
        let want = (len - done).min(CHUNK_BYTES);
        let remote_at = address.checked_add(done as u64).ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
        match copy(done, want, remote_at) {
            -1 => return Err(io::Error::last_os_error()),
            0 => return Err(io::Error::from_raw_os_error(libc::EFAULT)),
            n => done += n as usize,
        }
    }
    Ok(())
}

/// Every rank's process id, once every rank has shown it can read every
/// other rank's memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrossMemory {
    pids: Box<[libc::pid_t]>,
}

/// Why ranks do not read each other's memory; the same on every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CrossMemoryRefusal {
    /// `rank` could not read `peer`'s memory (`errno`; 0 when a test
    /// pretended it could not).
    Refused { rank: usize, peer: usize, errno: i32 },
    /// The setup exchange failed (a local failure).
    Exchange(TransportError),
}

impl std::fmt::Display for CrossMemoryRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CrossMemoryRefusal::Refused { rank, peer, errno: 0 } => {
                write!(f, "rank {rank} pretends it cannot read rank {peer}'s memory (test setting)")
            }
            CrossMemoryRefusal::Refused { rank, peer, errno } => write!(
                f,
                "rank {rank} cannot read rank {peer}'s memory with process_vm_readv ({}; see /proc/sys/kernel/yama/ptrace_scope)",
                io::Error::from_raw_os_error(*errno)
            ),
            CrossMemoryRefusal::Exchange(error) => write!(f, "the cross-memory setup exchange failed: {error}"),
        }
    }
}

const RECORD_LEN: usize = 24;

/// A value no other process holds: what a rank's probe word contains and
/// what its peers must read there. A shared constant would also be found in
/// the wrong process (ranks in different pid namespaces that share
/// /dev/shm, where a peer's pid names another process of the same binary),
/// and later copies would then read that process silently.
fn probe_token(rank: usize) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the operating system's randomness per process.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_usize(rank);
    hasher.finish() | 1
}

/// Whether process `pid` holds `token` at `address` and lets this process
/// write there (the token itself, so the word does not change): `Err(errno)`
/// if not.
fn probe_peer(pid: libc::pid_t, address: u64, token: u64) -> Result<(), i32> {
    let mut seen = [0u8; 8];
    let errno = |error: io::Error| error.raw_os_error().unwrap_or(libc::EIO);
    read_process(pid, address, &mut seen).map_err(errno)?;
    if u64::from_ne_bytes(seen) != token {
        return Err(libc::EIO);
    }
    write_process(pid, address, &seen).map_err(errno)
}

impl CrossMemory {
    /// Collective over the communicator's `size` ranks: each rank publishes
    /// its pid, a token of its own and where it keeps it, reads every peer's
    /// token (unless `pretend_refused`, a test setting), and a second
    /// exchange makes the first refusal everyone's verdict.
    pub fn establish(exchange: &dyn Exchange, rank: usize, size: usize, pretend_refused: bool) -> Result<Self, CrossMemoryRefusal> {
        // Boxed so that its address is stable, and kept until the verdict
        // exchange below, after which no peer reads it.
        let probe_word = Box::new(probe_token(rank));
        let mut mine = [0u8; RECORD_LEN];
        mine[..8].copy_from_slice(&u64::from(std::process::id()).to_le_bytes());
        mine[8..16].copy_from_slice(&(std::ptr::addr_of!(*probe_word) as usize as u64).to_le_bytes());
        mine[16..].copy_from_slice(&probe_word.to_le_bytes());
        let mut records = vec![0u8; size * RECORD_LEN];
        exchange.allgather(&mine, &mut records).map_err(CrossMemoryRefusal::Exchange)?;
        let word = |record: &[u8], at: usize| u64::from_le_bytes(record[at..at + 8].try_into().expect("8 bytes"));
        let peers: Vec<(libc::pid_t, u64, u64)> = records
            .chunks_exact(RECORD_LEN)
            .map(|record| (word(record, 0) as libc::pid_t, word(record, 8), word(record, 16)))
            .collect();

        let my_failure = (0..size).filter(|&peer| peer != rank).find_map(|peer| {
            if pretend_refused {
                return Some((peer, 0));
            }
            let (pid, address, token) = peers[peer];
            probe_peer(pid, address, token).err().map(|errno| (peer, errno))
        });
        let mut verdict = [0u8; RECORD_LEN];
        if let Some((peer, errno)) = my_failure {
            verdict[0] = 1;
            verdict[1..5].copy_from_slice(&(peer as u32).to_le_bytes());
            verdict[5..9].copy_from_slice(&errno.to_le_bytes());
        }
        let mut verdicts = vec![0u8; size * RECORD_LEN];
        exchange.allgather(&verdict, &mut verdicts).map_err(CrossMemoryRefusal::Exchange)?;
        drop(probe_word);
        for (failed_rank, verdict) in verdicts.chunks_exact(RECORD_LEN).enumerate() {
            if verdict[0] != 0 {
                let peer = u32::from_le_bytes(verdict[1..5].try_into().expect("4 bytes")) as usize;
                let errno = i32::from_le_bytes(verdict[5..9].try_into().expect("4 bytes"));
                return Err(CrossMemoryRefusal::Refused { rank: failed_rank, peer, errno });
            }
        }
        Ok(CrossMemory { pids: peers.into_iter().map(|(pid, _, _)| pid).collect() })
    }

    /// Copies `out.len()` bytes at `address` in `peer`'s memory into `out`.
    pub fn read(&self, peer: usize, address: u64, out: &mut [u8]) -> Result<(), TransportError> {
        let pid = self.pid(peer, out.len())?;
        read_process(pid, address, out).map_err(|error| {
            TransportError::Failed(format!("process_vm_readv of {} bytes at {address:#x} in rank {peer} (pid {pid}): {error}", out.len()))
        })
    }

    /// Copies `data` to `address` in `peer`'s memory.
    pub fn write(&self, peer: usize, address: u64, data: &[u8]) -> Result<(), TransportError> {
        let pid = self.pid(peer, data.len())?;
        write_process(pid, address, data).map_err(|error| {
            TransportError::Failed(format!("process_vm_writev of {} bytes at {address:#x} in rank {peer} (pid {pid}): {error}", data.len()))
        })
    }

    fn pid(&self, peer: usize, len: usize) -> Result<libc::pid_t, TransportError> {
        self.pids.get(peer).copied().ok_or(TransportError::OutOfRange { peer, offset: 0, len })
    }
}

/// `write_peer_memory` for a transport that may have cross-memory attach:
/// the copy where it was enabled at setup, an error otherwise.
pub fn write_if_enabled(cross_memory: Option<&CrossMemory>, peer: usize, address: u64, data: &[u8]) -> Result<(), TransportError> {
    match cross_memory {
        Some(cross_memory) => cross_memory.write(peer, address, data),
        None => Err(TransportError::Unsupported("writing a peer's memory (cross-memory attach was not enabled)")),
    }
}

/// `read_peer_memory` for a transport that may have cross-memory attach:
/// the copy where it was enabled at setup, an error otherwise.
pub fn read_if_enabled(cross_memory: Option<&CrossMemory>, peer: usize, address: u64, out: &mut [u8]) -> Result<(), TransportError> {
    match cross_memory {
        Some(cross_memory) => cross_memory.read(peer, address, out),
        None => Err(TransportError::Unsupported("reading a peer's memory (cross-memory attach was not enabled)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{Fabric, FabricConfig};
    use crate::test_support::{pattern, run_with};

    #[test]
    fn a_process_reads_its_own_memory_across_chunk_boundaries() {
        let source = pattern(7, 2 * CHUNK_BYTES + 13);
        let mut copy = vec![0u8; source.len()];
        read_process(std::process::id() as libc::pid_t, source.as_ptr() as usize as u64, &mut copy).unwrap();
        assert!(copy == source);
    }

    #[test]
    fn a_process_writes_its_own_memory_across_chunk_boundaries() {
        let source = pattern(9, 2 * CHUNK_BYTES + 13);
        let mut target = vec![0u8; source.len()];
        write_process(std::process::id() as libc::pid_t, target.as_mut_ptr() as usize as u64, &source).unwrap();
        assert!(std::hint::black_box(&target) == &source);
        assert!(write_process(std::process::id() as libc::pid_t, 8, &source[..8]).is_err());
    }

    #[test]
    fn a_bad_address_is_an_error_not_a_crash() {
        let mut copy = [0u8; 8];
        assert!(read_process(std::process::id() as libc::pid_t, 8, &mut copy).is_err());
    }

    #[test]
    fn a_probe_finds_only_the_token_its_peer_published() {
        let published = Box::new(probe_token(1));
        let pid = std::process::id() as libc::pid_t;
        let address = std::ptr::addr_of!(*published) as usize as u64;
        assert_eq!(probe_peer(pid, address, *published), Ok(()));
        // Another process of the same binary holds another token (a
        // shared constant would have matched here).
        assert_eq!(probe_peer(pid, address, probe_token(1)), Err(libc::EIO));
        assert_ne!(probe_token(1), probe_token(1));
    }

    #[test]
    fn ranks_agree_and_one_pretended_refusal_refuses_everyone() {
        let exchanges = Fabric::new(3, 0, FabricConfig::default());
        let verdicts = run_with(exchanges, |rank, exchange| CrossMemory::establish(&exchange, rank, 3, false));
        assert!(verdicts.iter().all(Result::is_ok), "{verdicts:?}");

        let exchanges = Fabric::new(3, 0, FabricConfig::default());
        let verdicts = run_with(exchanges, |rank, exchange| CrossMemory::establish(&exchange, rank, 3, rank == 2));
        for verdict in verdicts {
            assert_eq!(verdict, Err(CrossMemoryRefusal::Refused { rank: 2, peer: 0, errno: 0 }));
        }
    }
}
