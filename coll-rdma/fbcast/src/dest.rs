//! A destination's side: what it already holds, which rank writes a path
//! several ranks name, and the directories of a tree.

use crate::error::{ErrorCode, Failure};
use crate::policy::Existing;
use crate::record::{HASH_BYTES, StatusRecord};
use crate::source::hash_reader;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What `dst` holds compared with the announced file (a symbolic link is
/// not followed). Errors other than "not found" count as absent: creating
/// the temporary then reports them.
pub fn existing(dst: &Path, record: &StatusRecord) -> Existing {
    let meta = match std::fs::symlink_metadata(dst) {
        Ok(meta) => meta,
        Err(_) => return Existing::Absent,
    };
    if meta.file_type().is_symlink() {
        return Existing::Symlink;
    }
    if !meta.is_file() {
        return Existing::NotAFile;
    }
    if meta.len() != record.size {
        return Existing::Different;
    }
    let same = File::open(dst).and_then(|f| hash_reader(&mut f.take(record.size))).map(|h| h == record.hash);
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

/// The permission bits a created directory gets.
pub const DIR_MODE_KEPT: u32 = 0o1777;

/// Directories a tree transfer created, given their announced modes once
/// the files are in (a read-only directory would refuse them earlier).
#[derive(Default)]
pub struct CreatedDirs {
    dirs: Vec<(PathBuf, u32)>,
}

impl CreatedDirs {
    /// Makes `path` a directory: an existing directory is kept as it is.
    /// A symbolic link is followed only at the top of the destination
    /// (`follow_link`, the user's own DST); below it a link where a
    /// directory is expected is refused, so that no file of the tree lands
    /// outside DST. Returns whether it was created.
    pub fn ensure(&mut self, path: &Path, mode: u32, follow_link: bool) -> Result<bool, Failure> {
        let meta = if follow_link { std::fs::metadata(path) } else { std::fs::symlink_metadata(path) };
        match meta {
            Ok(meta) if meta.file_type().is_symlink() => Err(Failure::new(
                ErrorCode::Dest,
                format!("{} is a symbolic link where a directory is expected (links below DST are not followed)", path.display()),
            )),
            Ok(meta) if meta.is_dir() => Ok(false),
            Ok(_) => Err(Failure::new(ErrorCode::Dest, format!("{} exists and is not a directory", path.display()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir(path)
                    .map_err(|e| Failure::new(ErrorCode::Dest, format!("cannot create directory {}: {e}", path.display())))?;
                self.dirs.push((path.to_path_buf(), mode));
                Ok(true)
            }
            Err(e) => Err(Failure::new(ErrorCode::Dest, format!("cannot read {}: {e}", path.display()))),
        }
    }

    /// Gives the created directories their modes, deepest first (sticky
    /// kept, setuid and setgid dropped).
    pub fn apply_modes(&mut self) -> Result<(), Failure> {
        for (path, mode) in self.dirs.drain(..).rev() {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & DIR_MODE_KEPT))
                .map_err(|e| Failure::new(ErrorCode::Dest, format!("cannot set the mode of {}: {e}", path.display())))?;
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
        let f = dir.path().join("f");
        let r = record_of(b"hello");
        assert_eq!(existing(&f, &r), Existing::Absent);
        std::fs::write(&f, b"hello").unwrap();
        assert_eq!(existing(&f, &r), Existing::SameContent);
        std::fs::write(&f, b"jello").unwrap();
        assert_eq!(existing(&f, &r), Existing::Different, "same size, other content");
        std::fs::write(&f, b"hello!").unwrap();
        assert_eq!(existing(&f, &r), Existing::Different);
        assert_eq!(existing(dir.path(), &r), Existing::NotAFile);
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
        let dir = tempfile::tempdir().unwrap();
        let mut created = CreatedDirs::default();
        let top = dir.path().join("top");
        assert!(created.ensure(&top, 0o555, true).unwrap());
        assert!(created.ensure(&top.join("inner"), 0o750, false).unwrap());
        assert!(created.ensure(&top.join("shared"), 0o3777, false).unwrap());
        assert!(!created.ensure(&top, 0o555, true).unwrap());
        std::fs::write(top.join("inner/file"), b"x").unwrap();
        std::fs::write(top.join("plain"), b"x").unwrap();
        assert_eq!(created.ensure(&top.join("plain"), 0o755, false).unwrap_err().code, ErrorCode::Dest);
        created.apply_modes().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(&top), 0o555);
        assert_eq!(mode(&top.join("inner")), 0o750);
        assert_eq!(mode(&top.join("shared")), 0o1777, "sticky kept, setgid and setuid dropped");
        std::fs::set_permissions(&top, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn links_below_the_destination_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("f"), b"hello").unwrap();
        let top = dir.path().join("top");
        std::fs::create_dir(&top).unwrap();
        std::os::unix::fs::symlink(&outside, top.join("sub")).unwrap();
        let mut created = CreatedDirs::default();
        let refused = created.ensure(&top.join("sub"), 0o755, false).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Dest);
        assert!(refused.reason.contains("symbolic link"), "{}", refused.reason);
        // the user's own DST may be a link to a directory
        let top_link = dir.path().join("top-link");
        std::os::unix::fs::symlink(&top, &top_link).unwrap();
        assert!(!created.ensure(&top_link, 0o755, true).unwrap());
        // a link under the final name is reported as such, even to an identical file
        std::os::unix::fs::symlink(outside.join("f"), top.join("f")).unwrap();
        assert_eq!(existing(&top.join("f"), &record_of(b"hello")), Existing::Symlink);
        assert_eq!(existing(&outside.join("f"), &record_of(b"hello")), Existing::SameContent);
    }
}
