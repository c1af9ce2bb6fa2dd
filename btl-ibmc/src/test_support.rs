//! Helpers shared by the backends' tests: ranks as scoped threads, bounded
//! waits that fail instead of hanging, recognisable payloads, and the seed
//! that makes a fault-injection failure reproducible.

use std::time::{Duration, Instant};

use crate::transport::{ReliableChannel, Windows};

/// CPU time this thread has used: what a measurement on a shared machine
/// reads instead of wall time, which the other processes stretch.
pub(crate) fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the kernel to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Long enough for a loaded 2-core CI machine, short enough to fail fast.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// The seed for this run: `BTL_IBMC_SEED` if set, else fresh. Tests put it
/// in every assertion message so a failure can be replayed.
pub(crate) fn test_seed() -> u64 {
    if let Ok(text) = std::env::var("BTL_IBMC_SEED") {
        return text.parse().expect("BTL_IBMC_SEED must be a u64");
    }
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    crate::rng::splitmix64(nanos as u64 ^ u64::from(std::process::id()))
}

/// Runs `body(rank)` on `size` threads and returns the results in rank order.
pub(crate) fn run_ranks<T, F>(size: usize, body: F) -> Vec<T>
where
    T: Send,
    F: Fn(usize) -> T + Sync,
{
    std::thread::scope(|scope| {
        let body = &body;
        let handles: Vec<_> = (0..size).map(|rank| scope.spawn(move || body(rank))).collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

/// Like `run_ranks`, handing each thread its own item (an endpoint).
pub(crate) fn run_with<I, T, F>(items: Vec<I>, body: F) -> Vec<T>
where
    I: Send,
    T: Send,
    F: Fn(usize, I) -> T + Sync,
{
    std::thread::scope(|scope| {
        let body = &body;
        let handles: Vec<_> =
            items.into_iter().enumerate().map(|(rank, item)| scope.spawn(move || body(rank, item))).collect();
        handles.into_iter().map(|handle| handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    })
}

/// Waits until the local word at `offset` is at least `target`; panics
/// after `PATIENCE` naming what it waited for.
pub(crate) fn await_flag<T: Windows + ?Sized>(transport: &T, offset: usize, target: u64, what: &str) -> u64 {
    let started = Instant::now();
    loop {
        let value = transport.local_flag(offset);
        if value >= target {
            return value;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "rank {} gave up waiting for {what}: word at {offset} is {value}, needs {target}",
            transport.rank()
        );
        std::thread::yield_now();
    }
}

/// Polls the reliable channel until a message arrives; panics after `PATIENCE`.
pub(crate) fn await_reliable<T: ReliableChannel + ?Sized>(transport: &T, out: &mut Vec<u8>) -> usize {
    let started = Instant::now();
    loop {
        if let Some(sender) = transport.poll_reliable(out) {
            return sender;
        }
        assert!(started.elapsed() < PATIENCE, "rank {} gave up waiting for a reliable message", transport.rank());
        std::thread::yield_now();
    }
}

/// A payload that differs for every (tag, position), so misplaced or stale
/// bytes show up.
pub(crate) fn pattern(tag: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| pattern_byte(tag, i)).collect()
}

pub(crate) fn pattern_byte(tag: u64, position: usize) -> u8 {
    let mixed = crate::rng::splitmix64(tag.wrapping_mul(0x1_0000_0001).wrapping_add(position as u64 / 8));
    (mixed >> ((position % 8) * 8)) as u8
}

/// The window checks both backends must share. Needs a fresh transport of
/// at least 2 ranks whose window is at least 64 bytes, a multiple of 8.
pub(crate) fn assert_rejects_bad_access<T: Windows + ?Sized>(transport: &T) {
    use crate::transport::TransportError::{Failed, OutOfRange};

    let size = transport.size();
    let len = transport.window_len();
    let me = transport.rank();
    let peer = (me + 1) % size;
    assert!(size >= 2 && len >= 64 && len % 8 == 0, "test needs 2+ ranks and a 64+ byte window");

    assert_eq!(transport.put(size, 0, &[1], 8, 1), Err(OutOfRange { peer: size, offset: 0, len: 1 }));
    assert_eq!(transport.put_flag(size, 0, 1), Err(OutOfRange { peer: size, offset: 0, len: 8 }));
    assert_eq!(transport.put(peer, len - 3, &[0; 4], 0, 1), Err(OutOfRange { peer, offset: len - 3, len: 4 }));
    assert_eq!(transport.put(peer, usize::MAX, &[0; 2], 0, 1), Err(OutOfRange { peer, offset: usize::MAX, len: 2 }));
    assert_eq!(transport.put(peer, len + 1, &[], 0, 1), Err(OutOfRange { peer, offset: len + 1, len: 0 }));
    assert_eq!(transport.put_flag(peer, len, 1), Err(OutOfRange { peer, offset: len, len: 8 }));
    assert_eq!(transport.put_flag(peer, usize::MAX - 7, 1), Err(OutOfRange { peer, offset: usize::MAX - 7, len: 8 }));
    assert_eq!(transport.put(peer, 0, &[1], len, 1), Err(OutOfRange { peer, offset: len, len: 8 }));
    assert!(matches!(transport.put_flag(peer, 4, 1), Err(Failed(why)) if why.contains("aligned")));
    assert!(matches!(transport.put(peer, 0, &[1], 12, 1), Err(Failed(why)) if why.contains("aligned")));

    // Rejected puts aimed at this rank must leave its window untouched.
    assert!(transport.put(me, len - 3, &[9; 4], 0, 1).is_err());
    assert!(transport.put(me, 0, &[9; 4], 3, 1).is_err());
    let mut window = vec![0xFFu8; len];
    transport.read_local(0, &mut window);
    assert!(window.iter().all(|&b| b == 0), "a rejected put wrote into the window");

    // The edges themselves are valid.
    transport.put(me, len, &[], len - 8, 5).expect("empty put at the end");
    transport.put(me, len - 8, &[7; 8], 0, 6).expect("put filling the last word");
    assert_eq!(transport.local_flag(0), 6);
    assert_eq!(transport.local_flag(len - 8), u64::from_ne_bytes([7; 8]));
    transport.set_local_flag(len - 8, 0);
    transport.set_local_flag(0, 0);

    let panics = |what: &str, access: &dyn Fn()| {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(access));
        assert!(outcome.is_err(), "{what} should panic rather than touch memory outside the window");
    };
    panics("local_flag at a misaligned offset", &|| {
        transport.local_flag(4);
    });
    panics("local_flag past the end", &|| {
        transport.local_flag(len);
    });
    panics("set_local_flag past the end", &|| transport.set_local_flag(len + 8, 1));
    panics("read_local past the end", &|| transport.read_local(len - 1, &mut [0; 2]));
    panics("read_local with an overflowing offset", &|| transport.read_local(usize::MAX, &mut [0; 2]));
}
