//! The verified temporary under its final name: mode, mtime and fsync set
//! before the rename, which replaces a symbolic link and never follows it.
//! Invariant: under policy never nothing that appeared meanwhile is
//! overwritten; an identical copy there counts as done.

use super::placement::Target;
use crate::dest;
use crate::error::{ErrorCode, Failure};
use crate::modes;
use crate::policy::{self, Policy};
use crate::record::{FLAG_FSYNC, StatusRecord};
use crate::staging::{Commit, Staged};
use std::fs::{File, FileTimes, Permissions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, SystemTime};

/// How a verified temporary ended up under its final name.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Committed {
    Written,
    /// Policy never: the file appeared meanwhile with the same contents,
    /// e.g. written by another host to the same path of a shared file
    /// system (the first rename wins; the others find its identical copy).
    Identical,
}

/// Renames the temporary over `target` (a symbolic link there is replaced,
/// never followed); under policy never, only if nothing appeared meanwhile.
pub(super) fn commit(staged: Staged, target: &Target, record: &StatusRecord) -> Result<Committed, Failure> {
    match staged.commit(record.policy == Policy::Never) {
        Ok(Commit::Renamed) => Ok(Committed::Written),
        Ok(Commit::TemporaryNameLeft { temp, error }) => {
            // written all the same: a stray second name is not worth failing every rank
            eprintln!("coll_rdma_bcast_file: {} written, but its temporary name {} remains: {error}", target.shown().display(), temp.display());
            Ok(Committed::Written)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match dest::existing(&target.dir, &target.name, record) {
            policy::Existing::SameContent => Ok(Committed::Identical),
            _ => Err(Failure::new(
                ErrorCode::Exists,
                format!("{} appeared during the transfer with other contents (policy never)", target.shown().display()),
            )),
        },
        Err(e) => Err(Failure::new(ErrorCode::Dest, format!("cannot rename into {}: {e}", target.shown().display()))),
    }
}

/// The announced mode (see `modes::file_mode`) and mtime, and fsync if
/// asked, before the rename.
pub(super) fn finish_file(file: &mut File, record: &StatusRecord, umask: u32) -> std::io::Result<()> {
    file.flush()?;
    file.set_permissions(Permissions::from_mode(modes::file_mode(record.mode, umask)))?;
    let out_of_range = || std::io::Error::new(std::io::ErrorKind::InvalidData, "mtime out of range");
    let since_epoch = Duration::from_secs(record.mtime_sec.unsigned_abs());
    let seconds = if record.mtime_sec >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(since_epoch)
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(since_epoch)
    };
    let mtime = seconds.and_then(|t| t.checked_add(Duration::from_nanos(record.mtime_nsec as u64))).ok_or_else(out_of_range)?;
    file.set_times(FileTimes::new().set_modified(mtime))?;
    if record.flags & FLAG_FSYNC != 0 {
        file.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Kind;
    use crate::trusted_dir::TrustedDir;
    use super::super::placement::split_name;
    use std::path::Path;
    use std::os::unix::fs::MetadataExt;

    fn record_of(data: &[u8], policy: Policy) -> StatusRecord {
        let mut r = StatusRecord::new(Kind::File, policy);
        r.size = data.len() as u64;
        r.hash = *blake3::hash(data).as_bytes();
        r
    }

    fn target_of(dst: &Path) -> Target {
        let (parent, name) = split_name(dst).unwrap();
        Target { dir: TrustedDir::open(parent).unwrap(), name: name.to_os_string() }
    }

    fn staged_with(dst: &Path, data: &[u8]) -> Staged {
        let target = target_of(dst);
        let mut staged = Staged::create_in(&target.dir, &target.name).unwrap();
        staged.file().write_all(data).unwrap();
        staged
    }

    #[test]
    fn policy_never_loses_a_rename_race_to_an_identical_copy_without_failing() {
        let _slot = crate::cleanup::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("f");
        let record = record_of(b"payload", Policy::Never);
        // another host of a shared file system renamed its copy first
        let staged = staged_with(&dst, b"payload");
        std::fs::write(&dst, b"payload").unwrap();
        let winner_inode = std::fs::metadata(&dst).unwrap().ino();
        assert_eq!(commit(staged, &target_of(&dst), &record), Ok(Committed::Identical));
        assert_eq!(std::fs::metadata(&dst).unwrap().ino(), winner_inode, "the first rename's file stays");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "our temporary is removed");
        // a different file that appeared meanwhile is still refused
        let staged = staged_with(&dst, b"payload");
        std::fs::write(&dst, b"PAYLOAD").unwrap();
        let refused = commit(staged, &target_of(&dst), &record).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Exists);
        assert_eq!(std::fs::read(&dst).unwrap(), b"PAYLOAD");
        // nothing there: written
        std::fs::remove_file(&dst).unwrap();
        assert_eq!(commit(staged_with(&dst, b"payload"), &target_of(&dst), &record), Ok(Committed::Written));
        assert_eq!(std::fs::read(&dst).unwrap(), b"payload");
    }

    #[test]
    fn commit_replaces_a_link_and_leaves_its_target_alone() {
        let _slot = crate::cleanup::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"not ours").unwrap();
        let dst = dir.path().join("f");
        std::os::unix::fs::symlink(&target, &dst).unwrap();
        let record = record_of(b"payload", Policy::IfDifferent);
        assert_eq!(commit(staged_with(&dst, b"payload"), &target_of(&dst), &record), Ok(Committed::Written));
        assert!(std::fs::symlink_metadata(&dst).unwrap().is_file(), "the link itself was replaced");
        assert_eq!(std::fs::read(&dst).unwrap(), b"payload");
        assert_eq!(std::fs::read(&target).unwrap(), b"not ours");
    }

    #[test]
    fn received_files_lose_setuid_setgid_and_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut file = File::create(&path).unwrap();
        let mut record = record_of(b"", Policy::IfDifferent);
        record.mode = 0o6755;
        record.mtime_sec = 1_700_000_000;
        finish_file(&mut file, &record, 0).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o755);
        assert_eq!(meta.mtime(), 1_700_000_000);
        // umask 077, as cp applies it: a 0666 source gives 0600
        record.mode = 0o666;
        finish_file(&mut file, &record, 0o077).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o600);
    }

    #[test]
    fn extreme_mtimes_do_not_panic() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = File::create(dir.path().join("f")).unwrap();
        for sec in [i64::MIN, i64::MAX] {
            let mut record = record_of(b"", Policy::IfDifferent);
            record.mtime_sec = sec;
            record.mtime_nsec = 999_999_999;
            // whether the file system takes it or not, no overflow panics
            let _ = finish_file(&mut file, &record, 0o022);
        }
        let mut record = record_of(b"", Policy::IfDifferent);
        record.mtime_sec = -86_400;
        finish_file(&mut file, &record, 0o022).unwrap();
        assert_eq!(file.metadata().unwrap().mtime(), -86_400);
    }
}
