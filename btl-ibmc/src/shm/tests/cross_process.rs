//! Two real processes: the test forks, parent and child set up shared
//! memory through a socket pair, and prove that puts, flags and the
//! reliable ring (including its full-ring wait) work across address spaces.
//! The child never returns into the test harness: it reports through its
//! exit status and leaves with `_exit`.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::super::segment::dev_shm_path;
use super::super::{RELIABLE_MAX, ShmTransport, establish};
use crate::test_support::{PATIENCE, await_flag, await_reliable, pattern, pattern_byte};
use crate::transport::{Exchange, ReliableChannel, TransportError, Windows};

const DATA_FLAG: usize = 0;
const ACK_FLAG: usize = 8;
const DATA_AT: usize = 64;
const WINDOW_LEN: usize = DATA_AT + 65_536;
const SIZES: [usize; 8] = [1, 7, 8, 9, 4095, 4097, 65_535, 65_536];
/// More than a ring holds, so the child's sends must wait for the parent.
const MESSAGES: u32 = 40;

/// A two-rank allgather over a connected socket.
pub(super) struct SocketExchange {
    pub(super) stream: UnixStream,
    pub(super) rank: usize,
}

impl Exchange for SocketExchange {
    fn allgather(&self, mine: &[u8], all: &mut [u8]) -> Result<(), TransportError> {
        let failed = |e: std::io::Error| TransportError::Failed(format!("socket exchange: {e}"));
        if all.len() != 2 * mine.len() {
            return Err(TransportError::Failed("socket exchange is for two ranks".into()));
        }
        let (own, other) = if self.rank == 0 { (0, 1) } else { (1, 0) };
        let n = mine.len();
        (&self.stream).write_all(mine).map_err(failed)?;
        (&self.stream).read_exact(&mut all[other * n..(other + 1) * n]).map_err(failed)?;
        all[own * n..(own + 1) * n].copy_from_slice(mine);
        Ok(())
    }
}

fn message(index: u32, from_child: bool) -> Vec<u8> {
    let len = (index as usize * 1543) % (RELIABLE_MAX + 1);
    pattern(u64::from(index) | (u64::from(from_child) << 40), len)
}

/// Kills and reaps the child if the parent's side of the test fails.
pub(super) struct Child {
    pub(super) pid: libc::pid_t,
    pub(super) reaped: bool,
}

impl Child {
    /// The child's exit code, or None if it did not exit normally in time.
    pub(super) fn wait(&mut self, patience: Duration) -> Option<i32> {
        let started = Instant::now();
        let mut status = 0;
        loop {
            // SAFETY: `status` is a valid out-pointer; pid is our own child.
            let reaped = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            if reaped == self.pid {
                self.reaped = true;
                return libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            }
            if reaped < 0 || started.elapsed() > patience {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            // SAFETY: signalling and reaping our own, not yet reaped, child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

#[test]
fn puts_and_reliable_messages_cross_a_fork() {
    let (parent_end, child_end) = UnixStream::pair().expect("socketpair");
    for end in [&parent_end, &child_end] {
        end.set_read_timeout(Some(PATIENCE)).unwrap();
    }

    // SAFETY: the child only runs `child_side`, which touches nothing another
    // thread of the harness could have left locked except the allocator
    // (which glibc's fork makes safe), and it leaves through `_exit` without
    // running the harness's destructors or atexit handlers.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
    if pid == 0 {
        drop(parent_end);
        let code = std::panic::catch_unwind(move || child_side(child_end)).unwrap_or(99);
        // SAFETY: ends the child at once, as a forked test child must.
        unsafe { libc::_exit(code) };
    }
    drop(child_end);
    let mut child = Child { pid, reaped: false };

    let shm = establish(&SocketExchange { stream: parent_end, rank: 0 }, 0, 2, WINDOW_LEN).expect("parent setup");
    assert!(!dev_shm_path(shm.segment_name()).exists(), "segment name left in /dev/shm");

    for (round, &len) in SIZES.iter().enumerate() {
        let epoch = round as u64 + 1;
        shm.put(1, DATA_AT, &pattern(epoch, len), DATA_FLAG, epoch).unwrap();
        let acknowledged = await_flag(&shm, ACK_FLAG, epoch, "the child's acknowledgement");
        assert_eq!(acknowledged, epoch, "the child saw a damaged {len}-byte put");
    }

    // Let the child fill the ring and block on it before draining.
    std::thread::sleep(Duration::from_millis(30));
    let mut out = Vec::new();
    for index in 0..MESSAGES {
        assert_eq!(await_reliable(&shm, &mut out), 1);
        assert!(out == message(index, true), "message {index} from the child is out of order or damaged");
    }
    for index in 0..MESSAGES {
        shm.send_reliable(1, &message(index, false)).unwrap();
    }

    let code = child.wait(PATIENCE);
    assert_eq!(code, Some(0), "child failed: {}", explain(code));
}

fn explain(code: Option<i32>) -> &'static str {
    match code {
        None => "killed, crashed or hung",
        Some(0) => "ok",
        Some(10) => "setup failed",
        Some(20) => "timed out waiting for a put",
        Some(30) => "a put arrived damaged",
        Some(40) => "send_reliable failed",
        Some(50) => "timed out waiting for a reliable message",
        Some(60) => "a reliable message arrived damaged or out of order",
        Some(99) => "panicked",
        Some(_) => "unknown exit code",
    }
}

/// Rank 1 in the child; returns the exit code.
fn child_side(stream: UnixStream) -> i32 {
    let Ok(shm) = establish(&SocketExchange { stream, rank: 1 }, 1, 2, WINDOW_LEN) else {
        return 10;
    };
    let mut received = vec![0u8; 65_536];
    for (round, &len) in SIZES.iter().enumerate() {
        let epoch = round as u64 + 1;
        if !wait_until(|| shm.local_flag(DATA_FLAG) >= epoch) {
            return 20;
        }
        shm.read_local(DATA_AT, &mut received[..len]);
        if (0..len).any(|i| received[i] != pattern_byte(epoch, i)) {
            let _ = shm.put_flag(0, ACK_FLAG, u64::MAX);
            return 30;
        }
        let _ = shm.put_flag(0, ACK_FLAG, epoch);
    }
    for index in 0..MESSAGES {
        if shm.send_reliable(0, &message(index, true)).is_err() {
            return 40;
        }
    }
    receive_all(&shm)
}

fn receive_all(shm: &ShmTransport) -> i32 {
    let mut out = Vec::new();
    for index in 0..MESSAGES {
        let mut sender = None;
        if !wait_until(|| {
            sender = shm.poll_reliable(&mut out);
            sender.is_some()
        }) {
            return 50;
        }
        if sender != Some(0) || out != message(index, false) {
            return 60;
        }
    }
    0
}

fn wait_until(mut ready: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while !ready() {
        if started.elapsed() > PATIENCE {
            return false;
        }
        std::thread::yield_now();
    }
    true
}
