//! A destination's side: what it already holds, which rank writes a path
//! several ranks name, and the directories of a tree.

use crate::error::{ErrorCode, Failure};
use crate::policy::Existing;
use crate::record::{HASH_BYTES, StatusRecord};
use crate::source::hash_reader;
use crate::trusted_dir::TrustedDir;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What `name` in `dir` holds compared with the announced file (a symbolic
/// link is not followed, a FIFO is not opened). Errors other than "not
/// found" count as absent: creating the temporary then reports them.
pub fn existing(dir: &TrustedDir, name: &OsStr, record: &StatusRecord) -> Existing {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(_) => return Existing::Absent,
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Symlink => return Existing::Symlink,
        FileType::RegularFile => {}
        _ => return Existing::NotAFile,
    }
    if st.st_size as u64 != record.size {
        return Existing::Different;
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let same = rustix::fs::openat(dir, name, flags, Mode::empty())
        .map_err(std::io::Error::from)
        .and_then(|fd| {
            let mut file = File::from(fd);
            // replaced between the two looks: compare what was looked at
            let now = file.metadata()?;
            if !now.is_file() || now.ino() != st.st_ino || now.dev() != st.st_dev {
                return Ok(false);
            }
            hash_reader(&mut (&mut file).take(record.size)).map(|h| h == record.hash)
        });
    if matches!(same, Ok(true)) { Existing::SameContent } else { Existing::Different }
}

/// Test hook: ranks given different values count as different machines,
/// as hosts sharing a network file system do (ci/fbcast-tests.sh).
pub const TEST_MACHINE_ENV: &str = "COLL_RDMA_FBCAST_TEST_MACHINE";

/// Identifies the file `dst` names on this machine: the kernel's boot id,
/// the parent directory's device and inode, and the file name (the
/// absolute path when the parent cannot be read). Ranks with equal keys
/// would write the same file: only the lowest does.
pub fn dest_key(dst: &Path) -> [u8; HASH_BYTES] {
    let mut hasher = blake3::Hasher::new();
    let boot_id = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    hasher.update(&boot_id);
    hasher.update(b"\0");
    let hostname = crate::host::name();
    hasher.update(hostname.as_bytes());
    hasher.update(b"\0");
    if let Some(machine) = std::env::var_os(TEST_MACHINE_ENV) {
        hasher.update(machine.as_bytes());
    }
    hasher.update(b"\0");
    let parent = match dst.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match (std::fs::metadata(parent), dst.file_name()) {
        (Ok(meta), Some(name)) => {
            hasher.update(&meta.dev().to_le_bytes());
            hasher.update(&meta.ino().to_le_bytes());
            hasher.update(name.as_bytes());
        }
        _ => {
            let absolute = std::path::absolute(dst).unwrap_or_else(|_| dst.to_path_buf());
            hasher.update(absolute.as_os_str().as_bytes());
        }
    }
    let key = *hasher.finalize().as_bytes();
    // all zeros means "writes nothing" (the root, a rank without a destination)
    if key == [0; HASH_BYTES] { [1; HASH_BYTES] } else { key }
}

/// The lowest rank whose key equals `rank`'s, if lower than `rank` (keys
/// of all ranks in order; all-zero keys never match).
pub fn leader_of(keys: &[[u8; HASH_BYTES]], rank: usize) -> Option<usize> {
    let mine = keys[rank];
    if mine == [0; HASH_BYTES] {
        return None;
    }
    keys[..rank].iter().position(|k| *k == mine)
}

/// Directories a tree transfer created below its top (the top too when
/// created), given their announced modes once the files are in (a
/// read-only directory would refuse them earlier).
#[derive(Default)]
pub struct CreatedDirs {
    /// Relative to the top (empty: the top), which directory it was, and
    /// the mode to give it.
    dirs: Vec<(PathBuf, (u64, u64), u32)>,
}

impl CreatedDirs {
    pub fn push(&mut self, rel: &Path, dir: &TrustedDir, mode: u32) -> Result<(), Failure> {
        self.dirs.push((rel.to_path_buf(), dir.identity()?, mode));
        Ok(())
    }

    /// Gives the created directories their modes (already masked), deepest
    /// first, each reached from `top` through descriptors and only if it is
    /// still the directory created (one renamed away and replaced keeps
    /// 0700, and what replaced it is not touched).
    pub fn apply_modes(&mut self, top: &TrustedDir) -> Result<(), Failure> {
        for (rel, identity, mode) in self.dirs.drain(..).rev() {
            let dir = top.descend(&rel)?;
            if dir.identity()? != identity {
                return Err(Failure::new(ErrorCode::Dest, format!("{} was replaced during the transfer", dir.shown().display())));
            }
            dir.set_mode(mode)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use crate::record::Kind;

    fn record_of(data: &[u8]) -> StatusRecord {
        let mut r = StatusRecord::new(Kind::File, Policy::IfDifferent);
        r.size = data.len() as u64;
        r.hash = *blake3::hash(data).as_bytes();
        r
    }

    #[test]
    fn existing_compares_size_then_content() {
        let dir = tempfile::tempdir().unwrap();
        let top = TrustedDir::open(dir.path()).unwrap();
        let f = OsStr::new("f");
        let r = record_of(b"hello");
        assert_eq!(existing(&top, f, &r), Existing::Absent);
        std::fs::write(dir.path().join(f), b"hello").unwrap();
        assert_eq!(existing(&top, f, &r), Existing::SameContent);
        std::fs::write(dir.path().join(f), b"jello").unwrap();
        assert_eq!(existing(&top, f, &r), Existing::Different, "same size, other content");
        std::fs::write(dir.path().join(f), b"hello!").unwrap();
        assert_eq!(existing(&top, f, &r), Existing::Different);
        std::fs::create_dir(dir.path().join("d")).unwrap();
        assert_eq!(existing(&top, OsStr::new("d"), &r), Existing::NotAFile);
        // a FIFO is told apart without being opened (opening it would block)
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(rustix::fs::CWD, fifo.as_path(), FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
        assert_eq!(existing(&top, OsStr::new("fifo"), &r), Existing::NotAFile);
    }

    #[test]
    fn ranks_naming_one_file_elect_the_lowest() {
        let dir = tempfile::tempdir().unwrap();
        let a = dest_key(&dir.path().join("f"));
        let same = dest_key(&dir.path().join(".").join("f"));
        let other = dest_key(&dir.path().join("g"));
        assert_ne!(a, other);
        let zero = [0; HASH_BYTES];
        let keys = [zero, a, other, same, a, zero];
        assert_eq!(leader_of(&keys, 0), None, "the root writes nothing");
        assert_eq!(leader_of(&keys, 1), None);
        assert_eq!(leader_of(&keys, 2), None);
        assert_eq!(same, a, "dir/./f names dir/f");
        assert_eq!(leader_of(&keys, 3), Some(1), "the same file through another spelling");
        assert_eq!(leader_of(&keys, 4), Some(1));
        assert_eq!(leader_of(&keys, 5), None, "ranks without a destination never share");
    }

    #[test]
    fn created_dirs_get_their_modes_last_and_existing_ones_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mut created = CreatedDirs::default();
        let (top, made) = TrustedDir::open(dir.path()).unwrap().ensure_child(OsStr::new("top")).unwrap();
        assert!(made);
        created.push(Path::new(""), &top, 0o555).unwrap();
        let (inner, _) = top.ensure_child(OsStr::new("inner")).unwrap();
        created.push(Path::new("inner"), &inner, 0o750).unwrap();
        let (shared, _) = top.ensure_child(OsStr::new("shared")).unwrap();
        created.push(Path::new("shared"), &shared, 0o1777).unwrap();
        let top_path = dir.path().join("top");
        std::fs::write(top_path.join("inner/file"), b"x").unwrap();
        created.apply_modes(&top).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&top_path), 0o555);
        assert_eq!(mode(&top_path.join("inner")), 0o750);
        assert_eq!(mode(&top_path.join("shared")), 0o1777);
        std::fs::set_permissions(&top_path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A created directory renamed away and replaced by a link to another
    /// directory between its creation and the end of the tree: neither the
    /// files nor the mode go through the link.
    #[test]
    fn a_directory_swapped_for_a_link_steers_nothing() {
        use std::os::unix::fs::PermissionsExt;
        let _slot = crate::cleanup::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o700)).unwrap();
        let top_path = dir.path().join("top");
        std::fs::create_dir(&top_path).unwrap();
        let top = TrustedDir::open(&top_path).unwrap();
        let mut created = CreatedDirs::default();
        let (sub, _) = top.ensure_child(OsStr::new("sub")).unwrap();
        created.push(Path::new("sub"), &sub, 0o777).unwrap();
        // planned: a file in sub; then sub is swapped for a link
        let mut staged = crate::staging::Staged::create_in(&sub, OsStr::new("f")).unwrap();
        std::io::Write::write_all(staged.file(), b"payload").unwrap();
        std::fs::rename(top_path.join("sub"), top_path.join("moved")).unwrap();
        std::os::unix::fs::symlink(&outside, top_path.join("sub")).unwrap();
        staged.commit(false).unwrap();
        assert_eq!(std::fs::read(top_path.join("moved/f")).unwrap(), b"payload", "landed where it was planned");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "nothing outside the destination");
        let refused = created.apply_modes(&top).unwrap_err();
        assert!(refused.reason.contains("symbolic link"), "{}", refused.reason);
        assert_eq!(std::fs::metadata(&outside).unwrap().permissions().mode() & 0o7777, 0o700, "the link's target keeps its mode");
        // the next file of the tree is refused rather than sent through the link
        assert!(top.descend(Path::new("sub")).is_err());
    }
}
