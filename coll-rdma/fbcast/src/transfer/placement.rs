//! Where a receiving rank puts what a record announces. Invariants: records
//! come in the order File, or TreeBegin (TreeDir|TreeFile)* TreeEnd, and
//! one out of order is a protocol error; every target is a name inside a
//! `TrustedDir` (the tree's entries are reached from its opened top, never
//! through a path walked anew); the directories a tree creates get their
//! announced modes only at TreeEnd, once nothing more is written in them.

use super::Session;
use crate::dest;
use crate::error::{ErrorCode, Failure};
use crate::modes;
use crate::policy::{self, Action};
use crate::record::{Kind, StatusRecord};
use crate::staging::Staged;
use crate::trusted_dir::TrustedDir;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// What a receiving rank does with the file announced.
pub(super) enum Receiving {
    Nothing,
    Identical,
    Write(Staged, Target),
}

/// Where a received file goes: a name in a checked directory.
pub(super) struct Target {
    pub(super) dir: TrustedDir,
    pub(super) name: OsString,
}

impl Target {
    pub(super) fn shown(&self) -> PathBuf {
        self.dir.shown().join(&self.name)
    }
}

pub(super) fn split_name(path: &Path) -> Result<(&Path, &OsStr), Failure> {
    let name = path.file_name().ok_or_else(|| Failure::new(ErrorCode::Dest, format!("{} names no file", path.display())))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((parent, name))
}

/// A file's target: inside DST when DST is a directory (like cp, under
/// the name it was sent as), else DST itself.
fn file_target(dst: &Path, sent_as: &[u8]) -> Result<Target, Failure> {
    if dst.is_dir() {
        let name = Path::new(OsStr::from_bytes(sent_as))
            .file_name()
            .ok_or_else(|| Failure::new(ErrorCode::Protocol, "the file was announced without a name"))?;
        return Ok(Target { dir: TrustedDir::open(dst)?, name: name.to_os_string() });
    }
    let (parent, name) = split_name(dst)?;
    Ok(Target { dir: TrustedDir::open(parent)?, name: name.to_os_string() })
}

/// A tree's DST, opened (through a link only if the link may be followed)
/// or created; whether it was created.
fn tree_top(dst: &Path) -> Result<(TrustedDir, bool), Failure> {
    match std::fs::symlink_metadata(dst) {
        Ok(_) => Ok((TrustedDir::open(dst)?, false)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let (parent, name) = split_name(dst)?;
            TrustedDir::open(parent)?.ensure_child(name)
        }
        Err(e) => Err(Failure::new(ErrorCode::Dest, format!("cannot read {}: {e}", dst.display()))),
    }
}

impl Session<'_, '_> {
    /// Records arrive in the order File, or TreeBegin (TreeDir|TreeFile)* TreeEnd.
    pub(super) fn in_sequence(&mut self, kind: Kind) -> Result<(), Failure> {
        let fits = match kind {
            Kind::File | Kind::TreeBegin => !self.in_tree,
            Kind::TreeDir | Kind::TreeFile | Kind::TreeEnd => self.in_tree,
            Kind::Failed => true,
        };
        if !fits {
            return Err(Failure::new(ErrorCode::Protocol, format!("status record {kind:?} out of sequence")));
        }
        self.in_tree = matches!(kind, Kind::TreeBegin | Kind::TreeDir | Kind::TreeFile);
        Ok(())
    }

    pub(super) fn prepare(&mut self, record: &StatusRecord, dst: Option<&Path>) -> Result<Receiving, Failure> {
        let Some(dst) = dst else { return Ok(Receiving::Nothing) };
        let target = match record.kind {
            Kind::File => file_target(dst, &record.path)?,
            Kind::TreeBegin => {
                let (top, created) = tree_top(dst)?;
                if created {
                    self.dirs.push(Path::new(""), &top, modes::dir_mode(record.mode, self.umask))?;
                    self.local.dirs_created += 1;
                }
                self.tree_top = Some(top);
                return Ok(Receiving::Nothing);
            }
            Kind::TreeDir | Kind::TreeFile => {
                let rel = Path::new(OsStr::from_bytes(&record.path));
                let top = self.tree_top.as_ref().ok_or_else(|| Failure::new(ErrorCode::Dest, "the tree's destination is not open"))?;
                let (parent, name) = split_name(rel)?;
                let parent = if parent == Path::new(".") { Path::new("") } else { parent };
                let dir = match &self.last_parent {
                    Some((rel, dir)) if rel == parent => dir.try_clone()?,
                    _ => {
                        let dir = top.descend(parent)?;
                        self.last_parent = Some((parent.to_path_buf(), dir.try_clone()?));
                        dir
                    }
                };
                if record.kind == Kind::TreeDir {
                    let (child, created) = dir.ensure_child(name)?;
                    if created {
                        self.dirs.push(rel, &child, modes::dir_mode(record.mode, self.umask))?;
                        self.local.dirs_created += 1;
                    }
                    return Ok(Receiving::Nothing);
                }
                Target { dir, name: name.to_os_string() }
            }
            Kind::TreeEnd => {
                self.last_parent = None;
                if let Some(top) = self.tree_top.take() {
                    self.dirs.apply_modes(&top)?;
                }
                return Ok(Receiving::Nothing);
            }
            Kind::Failed => return Ok(Receiving::Nothing),
        };
        let existing = dest::existing(&target.dir, &target.name, record);
        match policy::decide(record.policy, existing) {
            Action::KeepIdentical => Ok(Receiving::Identical),
            Action::Refuse(ErrorCode::Exists) if existing == policy::Existing::Symlink => Err(Failure::new(
                ErrorCode::Exists,
                format!("{} is a symbolic link (policy never: not replaced, not followed)", target.shown().display()),
            )),
            Action::Refuse(ErrorCode::Exists) => Err(Failure::new(
                ErrorCode::Exists,
                format!("{} exists with other contents (policy never)", target.shown().display()),
            )),
            Action::Refuse(code) => Err(Failure::new(code, format!("{} exists and is not a regular file", target.shown().display()))),
            Action::Write => {
                let dir_shown = target.dir.shown().display();
                let mut staged = Staged::create_in(&target.dir, &target.name)
                    .map_err(|e| Failure::new(ErrorCode::Dest, format!("cannot create a temporary file in {dir_shown}: {e}")))?;
                staged.preallocate(record.size).map_err(|e| {
                    Failure::new(ErrorCode::of_write(&e), format!("cannot reserve {} bytes in {dir_shown}: {e}", record.size))
                })?;
                Ok(Receiving::Write(staged, target))
            }
        }
    }
}
