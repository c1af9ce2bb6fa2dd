//! Segment names that nobody can guess and that say who made them:
//! `/coll_rdma.<origin>.<pid>.<start>.<nonce>`, all hexadecimal. The random
//! nonce keeps another local user from pre-creating our next name (which
//! would deny the fast path); `origin` (a hash of the kernel boot id and the
//! PID namespace), `pid` and `start` (the creator's start time in clock
//! ticks since boot) let a later setup tell whether the creator still runs,
//! so a segment left by a process killed during setup can be removed
//! ([`super::reap`]).

use std::sync::OnceLock;

use crate::rng::splitmix64;

/// Every name starts with this (after the leading `/`); CI and the reaper
/// look for it in /dev/shm.
pub(crate) const NAME_PREFIX: &str = "/coll_rdma.";
const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";
const PID_NAMESPACE_PATH: &str = "/proc/self/ns/pid";

/// Who created a segment: enough to find out whether it is still running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Creator {
    /// Boot id and PID namespace, hashed: a pid means something only where
    /// both match.
    pub(crate) origin: u32,
    pub(crate) pid: u32,
    /// Field 22 of /proc/<pid>/stat, which tells a reused pid apart.
    pub(crate) start: u64,
}

impl Creator {
    /// This process, or None when /proc cannot say (then nothing may be
    /// judged dead either). Pid and start time are read each time, never
    /// cached: a forked child must not name its segments after its parent.
    pub(crate) fn current() -> Option<Creator> {
        static ORIGIN: OnceLock<Option<u32>> = OnceLock::new();
        let origin = (*ORIGIN.get_or_init(origin_here))?;
        let pid = std::process::id();
        // /proc mounted for another PID namespace numbers processes
        // differently: then no pid in it can be judged.
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        if own.split(' ').next() != Some(pid.to_string().as_str()) {
            return None;
        }
        let start = parse_stat(&own)?.start;
        Some(Creator { origin, pid, start })
    }
}

impl Creator {
    /// A creator whose liveness nobody can judge: origin 0 matches no
    /// process that can read /proc (but for a 2^-32 hash collision, which
    /// only means that segment is never reaped).
    pub(crate) fn unknown() -> Creator {
        Creator { origin: UNKNOWN_ORIGIN, pid: std::process::id(), start: 0 }
    }
}

pub(crate) const UNKNOWN_ORIGIN: u32 = 0;

/// A name for a new segment created by `creator`, with a fresh random nonce.
pub(crate) fn fresh_name(creator: Creator) -> std::io::Result<String> {
    let nonce = random_u64()?;
    Ok(format!("{NAME_PREFIX}{:08x}.{:x}.{:x}.{nonce:016x}", creator.origin, creator.pid, creator.start))
}

/// The creator named in `name` (with or without the leading `/`), if it is
/// one of ours in the current format.
pub(crate) fn creator_of(name: &str) -> Option<Creator> {
    let name = name.strip_prefix('/').unwrap_or(name);
    let rest = name.strip_prefix(&NAME_PREFIX[1..])?;
    let mut fields = rest.split('.');
    let (origin, pid, start, nonce) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
    if fields.next().is_some() || origin.len() != 8 || nonce.len() != 16 {
        return None;
    }
    let hex_u64 = |text: &str| {
        (!text.is_empty() && text.len() <= 16 && text.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(text, 16).ok())
            .flatten()
    };
    hex_u64(nonce)?;
    Some(Creator {
        origin: u32::try_from(hex_u64(origin)?).ok()?,
        pid: u32::try_from(hex_u64(pid)?).ok()?,
        start: hex_u64(start)?,
    })
}

/// What /proc says about a live (or zombie) process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcessState {
    /// Exited but not yet reaped: it will never remove its segment.
    pub(crate) zombie: bool,
    pub(crate) start: u64,
}

/// /proc/<pid>/stat's state and start time; None if there is no such
/// process (or /proc does not show it).
pub(crate) fn process_state(pid: u32) -> Option<ProcessState> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat)
}

/// The command name (field 2) may hold spaces and parentheses, so fields
/// are counted from the last `)`: state is field 3, start time field 22.
fn parse_stat(stat: &str) -> Option<ProcessState> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_ascii_whitespace();
    let state = fields.next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some(ProcessState { zombie: matches!(state, "Z" | "X" | "x"), start })
}

fn origin_here() -> Option<u32> {
    let boot_id = std::fs::read_to_string(BOOT_ID_PATH).ok()?;
    let namespace = std::fs::read_link(PID_NAMESPACE_PATH).ok()?;
    let mut hash = 0u64;
    for byte in boot_id.trim().bytes().chain(namespace.to_string_lossy().bytes()) {
        hash = splitmix64(hash ^ u64::from(byte));
    }
    Some((hash >> 32) as u32)
}

fn random_u64() -> std::io::Result<u64> {
    let mut bytes = [0u8; 8];
    // SAFETY: the buffer is writable for the length passed; getrandom
    // writes at most that many bytes.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        // Kernels before 3.17 lack the call; the device gives the same bytes.
        use std::io::Read;
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    }
    Ok(u64::from_ne_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_fit_a_setup_record_and_never_repeat() {
        let me = Creator::current().expect("/proc describes this process");
        assert_eq!(me.pid, std::process::id());
        let a = fresh_name(me).unwrap();
        let b = fresh_name(me).unwrap();
        assert_ne!(a, b);
        assert_eq!(creator_of(&a), Some(me), "{a}");
        assert_eq!(creator_of(a.trim_start_matches('/')), Some(me));
        // The setup record carries at most 63 bytes of name.
        let widest = fresh_name(Creator { origin: u32::MAX, pid: u32::MAX, start: u64::MAX }).unwrap();
        assert!(widest.len() <= 63, "{widest} is {} bytes", widest.len());
    }

    #[test]
    fn foreign_and_malformed_names_are_not_ours() {
        for name in [
            "/coll_rdma.123.4",
            "coll_rdma.0000000g.1.2.0123456789abcdef",
            "coll_rdma.00000001.1.2.0123456789abcde",
            "coll_rdma.00000001.1.2.0123456789abcdef.x",
            "coll_rdma.00000001..2.0123456789abcdef",
            "coll_rdma.00000001.100000000.2.0123456789abcdef",
            "other.00000001.1.2.0123456789abcdef",
            "coll_rdma.00000001.+1.2.0123456789abcdef",
        ] {
            assert_eq!(creator_of(name), None, "{name}");
        }
        assert_eq!(
            creator_of("coll_rdma.0000abcd.1f.2a.0123456789abcdef"),
            Some(Creator { origin: 0xabcd, pid: 0x1f, start: 0x2a })
        );
    }

    #[test]
    fn stat_lines_with_awkward_command_names_parse() {
        let line = |name: &str, state: &str| {
            format!("42 ({name}) {state} 1 42 42 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 987654 1000 50 18446744073709551615")
        };
        assert_eq!(parse_stat(&line("a) b (c", "S")), Some(ProcessState { zombie: false, start: 987_654 }));
        assert_eq!(parse_stat(&line("x", "Z")), Some(ProcessState { zombie: true, start: 987_654 }));
        assert_eq!(parse_stat("42 (truncated) S 1 2"), None);
        let me = process_state(std::process::id()).unwrap();
        assert!(!me.zombie);
        assert_eq!(Creator::current().unwrap().start, me.start);
    }
}
