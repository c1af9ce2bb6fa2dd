//! The temporary file being written, kept where a signal handler can find
//! it: the fbcast command installs handlers for SIGTERM, SIGINT and SIGHUP
//! (mpirun sends SIGTERM to the ranks left when one dies) that remove it
//! before the process ends. Library users may call `install_signal_handlers`
//! too. One slot: the temporary of the transfer in progress on this process.

use std::cell::UnsafeCell;
use std::os::raw::c_int;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

const EMPTY: u8 = 0;
const WRITING: u8 = 1;
const READY: u8 = 2;
/// A handler took the path: nothing may change it any more.
const TAKEN: u8 = 3;
const PATH_CAPACITY: usize = 4096;

struct Slot {
    state: AtomicU8,
    path: UnsafeCell<[u8; PATH_CAPACITY + 1]>,
}

// SAFETY: `path` is written only in state WRITING (by the one thread that
// moved the state there) and read only by a handler that moved it from
// READY to TAKEN, so no read overlaps a write.
unsafe impl Sync for Slot {}

static SLOT: Slot = Slot { state: AtomicU8::new(EMPTY), path: UnsafeCell::new([0; PATH_CAPACITY + 1]) };

/// Records `path` as the temporary in progress (a longer path than 4 KiB is
/// not recorded: it is then only removed on drop).
pub fn remember(path: &Path) {
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() > PATH_CAPACITY {
        forget();
        return;
    }
    loop {
        let state = SLOT.state.load(Ordering::Acquire);
        if state == TAKEN || state == WRITING {
            return;
        }
        if SLOT.state.compare_exchange(state, WRITING, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            break;
        }
    }
    // SAFETY: this thread moved the state to WRITING; see `impl Sync for Slot`.
    let buf = unsafe { &mut *SLOT.path.get() };
    buf[..bytes.len()].copy_from_slice(bytes);
    buf[bytes.len()] = 0;
    SLOT.state.store(READY, Ordering::Release);
}

/// The temporary was renamed or removed: nothing for a handler to do.
pub fn forget() {
    let _ = SLOT.state.compare_exchange(READY, EMPTY, Ordering::AcqRel, Ordering::Acquire);
}

extern "C" fn remove_temp_and_die(signal: c_int) {
    if SLOT.state.compare_exchange(READY, TAKEN, Ordering::AcqRel, Ordering::Acquire).is_ok() {
        // SAFETY: the state is TAKEN, so the buffer holds a complete
        // NUL-terminated path no one writes any more; unlink is
        // async-signal-safe.
        unsafe { libc::unlink(SLOT.path.get() as *const libc::c_char) };
    }
    // SAFETY: SA_RESETHAND restored the default action, so raising the
    // signal again (delivered when this handler returns) ends the process
    // with the status the sender expects.
    unsafe { libc::raise(signal) };
}

/// Installs handlers that remove the temporary in progress on SIGTERM,
/// SIGINT and SIGHUP, then end the process by the same signal.
pub fn install_signal_handlers() {
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler
        // only uses async-signal-safe calls and atomics.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = remove_temp_and_die as *const () as usize;
            action.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
pub(crate) fn remembered() -> Option<std::path::PathBuf> {
    if SLOT.state.load(Ordering::Acquire) != READY {
        return None;
    }
    // SAFETY: test-only read in state READY, on the thread that wrote it.
    let buf = unsafe { &*SLOT.path.get() };
    let len = buf.iter().position(|b| *b == 0).unwrap();
    Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(&buf[..len])))
}

/// Tests that create staged files hold this, so that the one slot is theirs.
#[cfg(test)]
pub(crate) static TEST_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
