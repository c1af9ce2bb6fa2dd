//! Temporary files next to their destination: written there, renamed into
//! place once complete and verified, removed otherwise (on drop, and by the
//! signal handler the fbcast command installs).
//!
//! Invariant: creation (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600), rename and
//! removal all go through the descriptor of the `TrustedDir` the file was
//! staged in, so they act on that directory even if its path now leads
//! elsewhere. Only the signal handler, which cannot hold descriptors in
//! its slot, removes by path (a random hidden name in a directory where
//! no other user can rename or remove it).

use crate::cleanup;
use crate::trusted_dir::TrustedDir;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Bytes of the destination's name kept in the temporary's (NAME_MAX is 255).
const NAME_BYTES_KEPT: usize = 200;
pub const TEMP_MARK: &str = ".fbcast-";
/// Random characters after the prefix, and tries before giving up on names
/// that are all taken.
const RANDOM_CHARS: usize = 8;
const NAME_TRIES: usize = 100;

/// `.NAME.fbcast-`, the start of a temporary's name for destination NAME
/// (cut to 200 bytes), followed by random characters: hidden, and
/// recognisable as ours.
pub fn temp_prefix(file_name: &OsStr) -> OsString {
    let bytes = file_name.as_bytes();
    let kept = &bytes[..bytes.len().min(NAME_BYTES_KEPT)];
    let mut prefix = Vec::with_capacity(kept.len() + 10);
    prefix.push(b'.');
    prefix.extend_from_slice(kept);
    prefix.extend_from_slice(TEMP_MARK.as_bytes());
    OsString::from_vec(prefix)
}

/// Whether `name` is one of our temporaries (for tests and clean-up tools).
pub fn is_temp_name(name: &OsStr) -> bool {
    let bytes = name.as_bytes();
    bytes.first() == Some(&b'.') && bytes.windows(TEMP_MARK.len()).any(|w| w == TEMP_MARK.as_bytes())
}

fn random_name(prefix: &OsStr) -> io::Result<OsString> {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut random = [0u8; RANDOM_CHARS];
    rustix::rand::getrandom(&mut random[..], rustix::rand::GetRandomFlags::empty())?;
    let mut name = prefix.as_bytes().to_vec();
    name.extend(random.iter().map(|b| ALPHABET[*b as usize % ALPHABET.len()]));
    Ok(OsString::from_vec(name))
}

/// A temporary file being written for `final_name` in a trusted directory,
/// created, renamed and removed through that directory's descriptor.
/// Dropped without `commit`, it is removed.
pub struct Staged {
    dir: OwnedFd,
    temp_name: OsString,
    final_name: OsString,
    file: File,
    /// For messages and the signal handler's clean-up.
    temp_shown: PathBuf,
    done: bool,
}

impl Staged {
    /// Creates the temporary in `dir` (mode 0600 until the transfer sets
    /// the file's own).
    pub fn create_in(dir: &TrustedDir, final_name: &OsStr) -> io::Result<Staged> {
        let prefix = temp_prefix(final_name);
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        for _ in 0..NAME_TRIES {
            let temp_name = random_name(&prefix)?;
            match rustix::fs::openat(dir, temp_name.as_os_str(), flags, Mode::from_raw_mode(0o600)) {
                Ok(fd) => {
                    let temp_shown = dir.shown().join(&temp_name);
                    cleanup::remember(&temp_shown);
                    let dir = dir.as_fd().try_clone_to_owned()?;
                    return Ok(Staged { dir, temp_name, final_name: final_name.to_os_string(), file: File::from(fd), temp_shown, done: false });
                }
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::new(io::ErrorKind::AlreadyExists, "no free temporary name"))
    }

    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    pub fn temp_path(&self) -> &Path {
        &self.temp_shown
    }

    /// Reserves `size` bytes, so that a full disk shows before any data
    /// move; file systems without fallocate are left to fail on write.
    pub fn preallocate(&mut self, size: u64) -> io::Result<()> {
        if size == 0 {
            return Ok(());
        }
        if i64::try_from(size).is_err() {
            return Err(io::Error::from_raw_os_error(libc::EFBIG));
        }
        match rustix::fs::fallocate(&self.file, rustix::fs::FallocateFlags::empty(), 0, size) {
            Ok(()) | Err(Errno::OPNOTSUPP) | Err(Errno::NOSYS) | Err(Errno::INVAL) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Renames the temporary to the destination name in the same
    /// directory; with `no_clobber`, fails (EEXIST) instead of replacing a
    /// file that appeared meanwhile. Ok means the file is under its final
    /// name, even when a temporary name could not be removed afterwards.
    pub fn commit(mut self, no_clobber: bool) -> io::Result<Commit> {
        let result = if no_clobber {
            self.rename_no_clobber()
        } else {
            self.rename(RenameFlags::empty()).map(|()| Commit::Renamed).map_err(io::Error::from)
        };
        if result.is_ok() {
            self.done = true;
            cleanup::forget();
        }
        result // on error, drop removes the temporary
    }

    fn rename(&self, flags: RenameFlags) -> Result<(), Errno> {
        rustix::fs::renameat_with(&self.dir, self.temp_name.as_os_str(), &self.dir, self.final_name.as_os_str(), flags)
    }

    fn rename_no_clobber(&self) -> io::Result<Commit> {
        match self.rename(RenameFlags::NOREPLACE) {
            // file systems without renameat2's flags: a hard link fails
            // just as well when the name is taken
            Err(Errno::INVAL) | Err(Errno::NOSYS) | Err(Errno::OPNOTSUPP) => {
                rustix::fs::linkat(&self.dir, self.temp_name.as_os_str(), &self.dir, self.final_name.as_os_str(), AtFlags::empty())?;
                Ok(self.unlink_temp_name_after_link())
            }
            other => other.map(|()| Commit::Renamed).map_err(io::Error::from),
        }
    }

    /// Once linked under the final name the file is committed: failing to
    /// remove the temporary name leaves a second name of the same file.
    fn unlink_temp_name_after_link(&self) -> Commit {
        match rustix::fs::unlinkat(&self.dir, self.temp_name.as_os_str(), AtFlags::empty()) {
            Ok(()) => Commit::Renamed,
            Err(e) => Commit::TemporaryNameLeft { temp: self.temp_shown.clone(), error: e.into() },
        }
    }
}

/// How a successful `commit` ended.
#[derive(Debug)]
pub enum Commit {
    Renamed,
    /// Linked under the final name (file systems without RENAME_NOREPLACE),
    /// but the temporary name `temp` of the same file could not be removed.
    TemporaryNameLeft { temp: PathBuf, error: io::Error },
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = rustix::fs::unlinkat(&self.dir, self.temp_name.as_os_str(), AtFlags::empty());
            cleanup::forget(); // only once removed may a handler forget it
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn stage(dst: &Path) -> io::Result<Staged> {
        let dir = TrustedDir::open(dst.parent().unwrap()).map_err(|f| io::Error::other(f.reason))?;
        Staged::create_in(&dir, dst.file_name().unwrap())
    }

    fn names_in(dir: &Path) -> Vec<OsString> {
        let mut names: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        names
    }

    #[test]
    fn prefix_is_hidden_marked_and_short_enough() {
        assert_eq!(temp_prefix(OsStr::new("data.bin")), OsString::from(".data.bin.fbcast-"));
        let long = OsString::from("x".repeat(255));
        let prefix = temp_prefix(&long);
        assert!(prefix.len() + 8 <= 255, "{} bytes", prefix.len());
        assert!(is_temp_name(&prefix));
        assert!(!is_temp_name(OsStr::new("data.bin")));
        assert!(!is_temp_name(OsStr::new("fbcast-notes")));
    }

    #[test]
    fn committed_file_replaces_the_destination_and_leaves_no_temporary() {
        let _slot = crate::cleanup::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("f");
        std::fs::write(&dst, b"old").unwrap();
        let mut staged = stage(&dst).unwrap();
        let temp = staged.temp_path().to_path_buf();
        assert_eq!(crate::cleanup::remembered().as_deref(), Some(temp.as_path()), "a signal handler would find it");
        assert_eq!(temp.parent(), Some(dir.path()));
        assert!(is_temp_name(temp.file_name().unwrap()));
        staged.file().write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&dst).unwrap(), b"old", "destination untouched until commit");
        staged.commit(false).unwrap();
        assert_eq!(crate::cleanup::remembered(), None);
        assert_eq!(std::fs::read(&dst).unwrap(), b"new");
        assert_eq!(names_in(dir.path()), vec![OsString::from("f")]);
    }

    #[test]
    fn dropped_file_is_removed_and_destination_untouched() {
        let _slot = crate::cleanup::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("f");
        {
            let mut staged = stage(&dst).unwrap();
            staged.file().write_all(b"partial").unwrap();
            assert_eq!(names_in(dir.path()).len(), 1);
        }
        assert!(names_in(dir.path()).is_empty());
        assert_eq!(crate::cleanup::remembered(), None);
    }

    #[test]
    fn no_clobber_commit_keeps_a_file_that_appeared_and_removes_the_temporary() {
        let _slot = crate::cleanup::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("f");
        let mut staged = stage(&dst).unwrap();
        staged.file().write_all(b"ours").unwrap();
        std::fs::write(&dst, b"theirs").unwrap();
        let err = staged.commit(true).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&dst).unwrap(), b"theirs");
        assert_eq!(names_in(dir.path()), vec![OsString::from("f")]);
    }

    /// The link fallback of a no-clobber commit (file systems without
    /// RENAME_NOREPLACE) when the temporary name cannot be removed after
    /// the link: the file is committed, and the leftover name reported.
    #[test]
    fn a_temporary_name_left_after_the_link_is_not_a_failed_commit() {
        let _slot = crate::cleanup::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("f");
        let mut staged = stage(&dst).unwrap();
        staged.file().write_all(b"linked").unwrap();
        let temp = staged.temp_path().to_path_buf();
        // as the fallback's linkat does; then the temporary name vanishes so that unlinkat fails
        std::fs::hard_link(&temp, &dst).unwrap();
        std::fs::remove_file(&temp).unwrap();
        match staged.unlink_temp_name_after_link() {
            Commit::TemporaryNameLeft { temp: left, error } => {
                assert_eq!(left, temp);
                assert_eq!(error.kind(), io::ErrorKind::NotFound);
            }
            Commit::Renamed => panic!("the failed unlink is not reported"),
        }
        assert_eq!(std::fs::read(&dst).unwrap(), b"linked");
        // and when the name can be removed, a clean commit that leaves only the file
        let mut staged = stage(&dir.path().join("g")).unwrap();
        staged.file().write_all(b"second").unwrap();
        std::fs::hard_link(staged.temp_path(), dir.path().join("g")).unwrap();
        assert!(matches!(staged.unlink_temp_name_after_link(), Commit::Renamed));
        assert_eq!(names_in(dir.path()), vec![OsString::from("f"), OsString::from("g")]);
    }

    #[test]
    fn missing_directory_fails_to_create() {
        let dir = tempfile::tempdir().unwrap();
        assert!(stage(&dir.path().join("missing-dir/f")).is_err());
    }
}
