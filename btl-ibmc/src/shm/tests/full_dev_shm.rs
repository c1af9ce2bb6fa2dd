//! Issue 33, item 9: a /dev/shm too small for the whole segment. The
//! header and windows fit in it, the rings do not: before the whole
//! segment was reserved at creation, setup succeeded and the first use of
//! a ring beyond the filesystem's room killed its rank with SIGBUS.
//!
//! The test needs a small /dev/shm of its own, so it runs itself again
//! (this same test, by name) inside a private mount namespace with a
//! 1 MiB tmpfs there (`unshare -m`, root only); `INNER` tells the copy
//! inside which side it is.

use std::process::Command;

use super::super::segment::{OsCall, SegmentError};
use super::super::{ShmSetupError, establish};
use crate::fabric::{Fabric, FabricConfig};
use crate::test_support::run_with;

const INNER: &str = "BTL_IBMC_TEST_INSIDE_SMALL_DEV_SHM";
const TEST_NAME: &str = "shm::tests::full_dev_shm::a_dev_shm_without_room_for_the_rings_fails_setup_on_every_rank";
/// Marks that the namespace and its tmpfs are in place.
const READY: &str = "small /dev/shm mounted";
/// Ranks and windows whose header and windows fit in 1 MiB while the
/// 36 rings of about 66 KiB do not.
const SIZE: usize = 6;
const WINDOW_LEN: usize = 4096;

#[test]
fn a_dev_shm_without_room_for_the_rings_fails_setup_on_every_rank() {
    if std::env::var_os(INNER).is_some() {
        return inside_small_dev_shm();
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return println!("SKIPPED: {TEST_NAME}: mounting a tmpfs in a private namespace needs root");
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let script = format!("mount -t tmpfs -o size=1m tmpfs /dev/shm || exit 77; echo '{READY}'; exec \"$0\" \"$@\"");
    let spawned = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .arg(&exe)
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads", "1"])
        .env(INNER, "1")
        .output();
    let output = match spawned {
        Ok(output) => output,
        Err(error) => return println!("SKIPPED: {TEST_NAME}: cannot run unshare: {error}"),
    };
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if !stdout.contains(READY) {
        return println!("SKIPPED: {TEST_NAME}: no private mount namespace with a small /dev/shm here ({}): {stderr}", output.status);
    }
    assert!(output.status.success(), "inside the small /dev/shm ({}):\n{stdout}\n{stderr}", output.status);
    assert!(stdout.contains("1 passed"), "the inner run did not run the test:\n{stdout}");
}

fn inside_small_dev_shm() {
    let free = free_bytes("/dev/shm");
    assert!(free <= 1 << 20, "/dev/shm here has {free} bytes free: not the 1 MiB tmpfs");
    let errors = run_with(Fabric::new(SIZE, 0, FabricConfig::default()), |rank, exchange| match establish(&exchange, rank, SIZE, WINDOW_LEN) {
        Ok(transport) => panic!(
            "rank {rank}: setup succeeded with a {}-byte segment in a 1 MiB /dev/shm: its rings are not backed",
            transport.memory_footprint().shm_segment_bytes
        ),
        Err(error) => error,
    });
    let expected = ShmSetupError::CreateFailed(SegmentError::Os { call: OsCall::Fallocate, errno: libc::ENOSPC });
    for (rank, error) in errors.iter().enumerate() {
        assert_eq!(*error, expected, "rank {rank}: {error}");
        assert!(error.to_string().contains("/dev/shm"), "rank {rank}: the message does not name /dev/shm: {error}");
    }
    let left: Vec<_> = std::fs::read_dir("/dev/shm").expect("/dev/shm").flatten().map(|entry| entry.file_name()).collect();
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
}

/// Bytes free on the filesystem holding `path`.
fn free_bytes(path: &str) -> u64 {
    let c_path = std::ffi::CString::new(path).expect("no NUL in the path");
    // SAFETY: libc::statvfs is plain old data, valid when zeroed.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is NUL-terminated and `stat` a writable statvfs.
    assert_eq!(unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) }, 0, "statvfs {path}: {}", std::io::Error::last_os_error());
    stat.f_bavail * stat.f_frsize
}
