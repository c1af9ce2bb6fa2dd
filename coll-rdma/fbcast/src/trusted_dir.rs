//! Directories a destination rank writes into, reached only through file
//! descriptors so that no other local user can steer where files land.
//!
//! Invariants of a `TrustedDir`:
//! - it was reached from / (or from another `TrustedDir`) one component at
//!   a time with O_NOFOLLOW; the only links followed are those in the
//!   user's own DST path, and there a link in a directory others may write
//!   (sticky, as /tmp) only when it is the effective user's or root's (one
//!   another user planted in /tmp is refused), a link in any other
//!   directory whatever its owner (only that directory's owner and group
//!   could have put it there, and they could as well have replaced the
//!   directory the link leads to). This is the kernel's protected_symlinks
//!   less its "link of the directory's owner" case: in a user namespace an
//!   unmapped owner shows as the overflow uid whoever it is, so another
//!   user's link in /tmp would match /tmp's shown owner;
//! - every directory on the way is not writable by others unless sticky
//!   (`check_on_path`), whoever owns it: ancestors may be root's (seen as
//!   the overflow uid 65534 in a rootless user namespace) or a PI's
//!   project directory; their owners are trusted with the path below them
//!   as with any path;
//! - the directory itself, and every directory created in or descended to
//!   below it, passes `check_target`: owned by the effective user (or by
//!   root and sticky, as /tmp is, where the sticky bit keeps others from
//!   renaming or removing what we create), not writable by others unless
//!   sticky. Group write is not refused: members of the group are trusted,
//!   as they are by everything else shared through that group.
//!
//! So once open, a directory swapped for a link, renamed or replaced by
//! its path changes nothing: creations, renames and mode changes go
//! through the descriptor. rustix gives these calls (openat, mkdirat,
//! fstat, readlinkat) as safe functions over owned descriptors, so there
//! is no `unsafe` here.

use crate::error::{ErrorCode, Failure};
use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// Links followed in the user's DST path before giving up (as the kernel's
/// MAXSYMLINKS).
const MAX_LINKS: usize = 40;

/// Descriptors that only name a directory: enough for *at calls and fstat,
/// and they need no read permission (a 0711 home directory is fine).
const DIR_FLAGS: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::NOFOLLOW).union(OFlags::CLOEXEC);

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn dest_failure(reason: String) -> Failure {
    Failure::new(ErrorCode::Dest, reason)
}

fn others_may_rename(st: &Stat) -> bool {
    st.st_mode & 0o002 != 0 && st.st_mode & 0o1000 == 0
}

/// A directory on the path to the destination, whoever owns it.
fn check_on_path(st: &Stat, shown: &Path) -> Result<(), Failure> {
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Err(dest_failure(format!("{} is not a directory", shown.display())));
    }
    if others_may_rename(st) {
        return Err(dest_failure(format!(
            "{} is writable by others without the sticky bit: refused, anyone could redirect the files",
            shown.display()
        )));
    }
    Ok(())
}

/// The directory files and directories are created in.
fn check_target(st: &Stat, shown: &Path) -> Result<(), Failure> {
    let sticky = st.st_mode & 0o1000 != 0;
    if st.st_uid != euid() && !(st.st_uid == 0 && sticky) {
        return Err(dest_failure(format!(
            "{} belongs to uid {}, not to you (uid {}): refused (fbcast writes only into your own directories, or sticky ones of root's such as /tmp)",
            shown.display(),
            st.st_uid,
            euid()
        )));
    }
    check_on_path(st, shown)
}

/// Whether a link found in `parent` may be followed (see the module header).
fn link_trusted(link: &Stat, parent: &Stat) -> bool {
    let others_write_parent = parent.st_mode & 0o002 != 0;
    !others_write_parent || link.st_uid == euid() || link.st_uid == 0
}

/// A destination directory, open and checked (see the module header).
#[derive(Debug)]
pub struct TrustedDir {
    fd: OwnedFd,
    shown: PathBuf,
}

impl TrustedDir {
    /// Opens `path`, walking from / (or the working directory's real path)
    /// and checking each directory on the way.
    pub fn open(path: &Path) -> Result<TrustedDir, Failure> {
        let unreadable = |e: std::io::Error| dest_failure(format!("cannot open directory {}: {e}", path.display()));
        let absolute = std::path::absolute(if path.as_os_str().is_empty() { Path::new(".") } else { path }).map_err(unreadable)?;
        let root = rustix::fs::openat(CWD, "/", DIR_FLAGS, Mode::empty()).map_err(|e| unreadable(e.into()))?;
        let mut stack = vec![(root, PathBuf::from("/"))];
        check_on_path(&fstat(&stack[0].0, &stack[0].1)?, &stack[0].1)?;
        let mut pending: VecDeque<OsString> = components(&absolute);
        let mut links = 0;
        while let Some(name) = pending.pop_front() {
            if name == "." {
                continue;
            }
            if name == ".." {
                if stack.len() > 1 {
                    stack.pop();
                }
                continue;
            }
            let (parent, parent_shown) = stack.last().expect("the stack keeps /");
            let shown = parent_shown.join(&name);
            let st = rustix::fs::statat(parent, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| dest_failure(format!("cannot open directory {}: {}", shown.display(), std::io::Error::from(e))))?;
            if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
                if !link_trusted(&st, &fstat(parent, parent_shown)?) {
                    return Err(dest_failure(format!(
                        "{} is a symbolic link of uid {}'s in a directory others can write: not followed (only your own links or root's are)",
                        shown.display(),
                        st.st_uid
                    )));
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(dest_failure(format!("too many symbolic links in {}", path.display())));
                }
                let target = rustix::fs::readlinkat(parent, name.as_os_str(), Vec::new())
                    .map_err(|e| dest_failure(format!("cannot read the link {}: {}", shown.display(), std::io::Error::from(e))))?;
                let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                if target.is_absolute() {
                    stack.truncate(1);
                }
                for part in components(&target).into_iter().rev() {
                    pending.push_front(part);
                }
                continue;
            }
            let fd = open_dir_at(parent, &name, &shown)?;
            if !pending.is_empty() {
                // the last one gets `check_target` below, its owner named first
                check_on_path(&fstat(&fd, &shown)?, &shown)?;
            }
            stack.push((fd, shown));
        }
        let (fd, shown) = stack.pop().expect("the stack keeps /");
        check_target(&fstat(&fd, &shown)?, &shown)?;
        Ok(TrustedDir { fd, shown })
    }

    /// The directory `name` below this one (never through a link), or None
    /// when there is nothing of that name.
    pub fn child(&self, name: &OsStr) -> Result<Option<TrustedDir>, Failure> {
        let shown = self.shown.join(name);
        plain_name(name, &shown)?;
        match rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty()) {
            Err(Errno::NOENT) => Ok(None),
            Err(Errno::LOOP) | Err(Errno::NOTDIR) => Err(self.not_a_dir(name, &shown)),
            Err(e) => Err(dest_failure(format!("cannot open directory {}: {}", shown.display(), std::io::Error::from(e)))),
            Ok(fd) => {
                check_target(&fstat(&fd, &shown)?, &shown)?;
                Ok(Some(TrustedDir { fd, shown }))
            }
        }
    }

    /// The directory `name` below this one, created (mode 0700 until the
    /// transfer sets its own) when absent; whether it was created.
    pub fn ensure_child(&self, name: &OsStr) -> Result<(TrustedDir, bool), Failure> {
        let shown = self.shown.join(name);
        plain_name(name, &shown)?;
        let created = match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o700)) {
            Ok(()) => true,
            Err(Errno::EXIST) => false,
            Err(e) => return Err(dest_failure(format!("cannot create directory {}: {}", shown.display(), std::io::Error::from(e)))),
        };
        match self.child(name)? {
            Some(dir) => Ok((dir, created)),
            None => Err(dest_failure(format!("{} vanished as it was created", shown.display()))),
        }
    }

    /// The directory `rel` (plain names only) below this one, which must exist.
    pub fn descend(&self, rel: &Path) -> Result<TrustedDir, Failure> {
        let mut dir = self.try_clone()?;
        for component in rel.components() {
            let Component::Normal(name) = component else {
                return Err(dest_failure(format!("{}: not a plain relative path", rel.display())));
            };
            dir = dir.child(name)?.ok_or_else(|| dest_failure(format!("{} vanished", dir.shown.join(name).display())))?;
        }
        Ok(dir)
    }

    pub fn try_clone(&self) -> Result<TrustedDir, Failure> {
        let fd = self.fd.try_clone().map_err(|e| dest_failure(format!("cannot duplicate {}: {e}", self.shown.display())))?;
        Ok(TrustedDir { fd, shown: self.shown.clone() })
    }

    /// The device and inode: which directory this is.
    pub fn identity(&self) -> Result<(u64, u64), Failure> {
        let st = fstat(&self.fd, &self.shown)?;
        Ok((st.st_dev, st.st_ino))
    }

    /// Sets the permission bits through the descriptor.
    pub fn set_mode(&self, mode: u32) -> Result<(), Failure> {
        let cannot = |e: Errno| dest_failure(format!("cannot set the mode of {}: {}", self.shown.display(), std::io::Error::from(e)));
        // a path-only descriptor cannot fchmod: reopen this very directory
        let readable = rustix::fs::openat(&self.fd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()).map_err(cannot)?;
        rustix::fs::fchmod(&readable, Mode::from_raw_mode(mode)).map_err(cannot)
    }

    /// For messages only: the path this directory was reached by.
    pub fn shown(&self) -> &Path {
        &self.shown
    }

    fn not_a_dir(&self, name: &OsStr, shown: &Path) -> Failure {
        match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => dest_failure(format!(
                "{} is a symbolic link where a directory is expected (links below DST are not followed)",
                shown.display()
            )),
            _ => dest_failure(format!("{} exists and is not a directory", shown.display())),
        }
    }
}

impl AsFd for TrustedDir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn plain_name(name: &OsStr, shown: &Path) -> Result<(), Failure> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(dest_failure(format!("{}: not a plain file name", shown.display())));
    }
    Ok(())
}

fn open_dir_at(parent: &OwnedFd, name: &OsStr, shown: &Path) -> Result<OwnedFd, Failure> {
    rustix::fs::openat(parent, name, DIR_FLAGS, Mode::empty()).map_err(|e| match e {
        Errno::NOTDIR | Errno::LOOP => dest_failure(format!("{} is not a directory (or was just replaced)", shown.display())),
        e => dest_failure(format!("cannot open directory {}: {}", shown.display(), std::io::Error::from(e))),
    })
}

fn fstat(fd: &OwnedFd, shown: &Path) -> Result<Stat, Failure> {
    rustix::fs::fstat(fd).map_err(|e| dest_failure(format!("cannot read {}: {}", shown.display(), std::io::Error::from(e))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn chown(path: &Path, uid: u32) {
        std::os::unix::fs::lchown(path, Some(uid), None).unwrap();
    }

    /// uid nobody's: another local user (only root can give files away)
    const OTHER_UID: u32 = 65534;

    fn running_as_root() -> bool {
        euid() == 0
    }

    #[test]
    fn own_directories_open_and_foreign_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mine = dir.path().join("mine");
        std::fs::create_dir_all(mine.join("below")).unwrap();
        let opened = TrustedDir::open(&mine).unwrap();
        assert_eq!(opened.identity().unwrap().1, std::fs::metadata(&mine).unwrap().ino());
        // writable by everyone, not sticky: refused even when ours
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = TrustedDir::open(&mine).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Dest);
        assert!(refused.reason.contains("writable by others"), "{}", refused.reason);
        assert!(TrustedDir::open(&mine.join("below")).is_err(), "nor anything reached through it");
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o1777)).unwrap();
        TrustedDir::open(&mine).expect("sticky: others cannot rename what is ours");
        if !running_as_root() {
            println!("SKIPPED foreign-owned part: giving a directory away needs root");
            return;
        }
        // root too refuses another user's directory, sticky or not
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        chown(&theirs, OTHER_UID);
        for mode in [0o755, 0o1777, 0o777] {
            std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(mode)).unwrap();
            let refused = TrustedDir::open(&theirs).unwrap_err();
            assert!(refused.reason.contains("belongs to uid 65534"), "mode {mode:o}: {}", refused.reason);
        }
        // an existing directory of theirs below ours is refused as a child too
        let top = TrustedDir::open(dir.path()).unwrap();
        assert!(top.child(OsStr::new("theirs")).unwrap_err().reason.contains("belongs to uid"));
        assert!(top.ensure_child(OsStr::new("theirs")).is_err());
    }

    /// A directory of another user's (a PI's project directory, or root's
    /// seen as uid 65534 in a rootless user namespace) may lead to ours,
    /// but is never written into.
    #[test]
    fn foreign_ancestors_lead_to_our_directories_but_are_not_written_into() {
        if !running_as_root() {
            println!("SKIPPED: giving a directory away needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        let mine = project.join("mine");
        std::fs::create_dir_all(&mine).unwrap();
        chown(&project, OTHER_UID);
        for (mode, accepted) in [(0o755, true), (0o2770, true), (0o1777, true), (0o777, false)] {
            std::fs::set_permissions(&project, std::fs::Permissions::from_mode(mode)).unwrap();
            let below = TrustedDir::open(&mine);
            if accepted {
                let below = below.unwrap_or_else(|f| panic!("ancestor mode {mode:o}: {}", f.reason));
                assert_eq!(below.identity().unwrap().1, std::fs::metadata(&mine).unwrap().ino());
            } else {
                assert!(below.unwrap_err().reason.contains("writable by others"), "ancestor mode {mode:o}");
            }
            let refused = TrustedDir::open(&project).unwrap_err();
            assert!(refused.reason.contains("belongs to uid 65534, not to you"), "as destination, mode {mode:o}: {}", refused.reason);
            let above = TrustedDir::open(dir.path()).unwrap();
            assert!(above.child(OsStr::new("project")).is_err(), "as a tree's directory, mode {mode:o}");
        }
    }

    #[test]
    fn links_in_the_path_are_followed_only_when_ours() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("real", &link).unwrap();
        let via_link = TrustedDir::open(&link.join(".")).unwrap();
        assert_eq!(via_link.identity().unwrap().1, std::fs::metadata(&real).unwrap().ino());
        let top = TrustedDir::open(dir.path()).unwrap();
        let refused = top.child(OsStr::new("link")).unwrap_err();
        assert!(refused.reason.contains("symbolic link"), "{}", refused.reason);
        assert!(top.descend(Path::new("../real")).is_err(), "only plain names below DST");
        if !running_as_root() {
            println!("SKIPPED foreign link part: giving a link away needs root");
            return;
        }
        chown(&link, OTHER_UID);
        // in a directory only we write, whoever owns the link put it there through us
        let via_foreign_link = TrustedDir::open(&link).unwrap();
        assert_eq!(via_foreign_link.identity().unwrap().1, std::fs::metadata(&real).unwrap().ino());
        // in one everyone writes (sticky, as /tmp), another user's link is not followed
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let refused = TrustedDir::open(&link).unwrap_err();
        assert!(refused.reason.contains("not followed"), "{}", refused.reason);
        chown(&link, euid());
        TrustedDir::open(&link).expect("our own link in a sticky directory");
    }

    #[test]
    fn created_children_are_private_until_the_transfer_sets_their_mode() {
        let dir = tempfile::tempdir().unwrap();
        let top = TrustedDir::open(dir.path()).unwrap();
        let (child, created) = top.ensure_child(OsStr::new("sub")).unwrap();
        assert!(created);
        let meta = std::fs::metadata(dir.path().join("sub")).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o700);
        let (_, created) = top.ensure_child(OsStr::new("sub")).unwrap();
        assert!(!created);
        child.set_mode(0o750).unwrap();
        assert_eq!(std::fs::metadata(dir.path().join("sub")).unwrap().mode() & 0o7777, 0o750);
        std::fs::write(dir.path().join("file"), b"x").unwrap();
        assert!(top.ensure_child(OsStr::new("file")).unwrap_err().reason.contains("not a directory"));
    }
}
