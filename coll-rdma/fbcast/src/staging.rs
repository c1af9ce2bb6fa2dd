//! Temporary files next to their destination: written there, renamed into
//! place once complete and verified, removed otherwise (on drop, and by the
//! signal handler the fbcast command installs).

use crate::cleanup;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use tempfile::NamedTempFile;

/// Bytes of the destination's name kept in the temporary's (NAME_MAX is 255).
const NAME_BYTES_KEPT: usize = 200;
pub const TEMP_MARK: &str = ".fbcast-";

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

/// A temporary file being written for `dst`. Dropped without `commit`, it is
/// removed.
pub struct Staged {
    temp: Option<NamedTempFile>,
    dst: PathBuf,
}

impl Staged {
    pub fn create(dst: &Path) -> io::Result<Staged> {
        let name = dst.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "destination has no file name"))?;
        let dir = match dst.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let temp = tempfile::Builder::new().prefix(&temp_prefix(name)).rand_bytes(8).tempfile_in(dir)?;
        cleanup::remember(temp.path());
        Ok(Staged { temp: Some(temp), dst: dst.to_path_buf() })
    }

    pub fn file(&mut self) -> &mut File {
        self.temp.as_mut().expect("staged file already committed").as_file_mut()
    }

    pub fn temp_path(&self) -> &Path {
        self.temp.as_ref().expect("staged file already committed").path()
    }

    /// Reserves `size` bytes, so that a full disk shows before any data
    /// move; file systems without fallocate are left to fail on write.
    pub fn preallocate(&mut self, size: u64) -> io::Result<()> {
        if size == 0 {
            return Ok(());
        }
        let fd = self.file().as_raw_fd();
        let len = libc::off_t::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
        // SAFETY: fd is the open temporary this value owns.
        if unsafe { libc::fallocate(fd, 0, 0, len) } == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) | Some(libc::EINVAL) => Ok(()),
            _ => Err(err),
        }
    }

    /// Renames the temporary to the destination; with `no_clobber`, fails
    /// (EEXIST) instead of replacing a file that appeared meanwhile.
    pub fn commit(mut self, no_clobber: bool) -> io::Result<()> {
        let temp = self.temp.take().expect("staged file committed twice");
        let result = if no_clobber { temp.persist_noclobber(&self.dst) } else { temp.persist(&self.dst) };
        let result = match result {
            Ok(_) => Ok(()),
            Err(tempfile::PersistError { error, file }) => {
                drop(file); // removes the temporary; only then may a handler forget it
                Err(error)
            }
        };
        cleanup::forget();
        result
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take() {
            drop(temp); // removes the file; only then may a handler forget it
            cleanup::forget();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
        let mut staged = Staged::create(&dst).unwrap();
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
            let mut staged = Staged::create(&dst).unwrap();
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
        let mut staged = Staged::create(&dst).unwrap();
        staged.file().write_all(b"ours").unwrap();
        std::fs::write(&dst, b"theirs").unwrap();
        let err = staged.commit(true).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&dst).unwrap(), b"theirs");
        assert_eq!(names_in(dir.path()), vec![OsString::from("f")]);
    }

    #[test]
    fn missing_directory_fails_to_create() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Staged::create(&dir.path().join("missing-dir/f")).is_err());
    }
}
