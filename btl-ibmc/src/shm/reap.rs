//! Removing segments whose creator died before it could remove the name (a
//! SIGKILL between creating the segment and every rank attaching it): each
//! node's creator runs this before creating its own, so a killed job's
//! memory is returned at the next job's setup on that node.
//!
//! Only names in our format, owned by our user, made on this boot in this
//! PID namespace, whose creator no longer runs (no such process, a zombie,
//! or a reused pid with another start time) are removed. A name whose
//! creator cannot be judged is left alone.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::naming::{Creator, NAME_PREFIX, UNKNOWN_ORIGIN, creator_of, process_state};
use super::segment::ShmSegment;

const SHM_DIR: &str = "/dev/shm";

/// Removes every orphaned segment of ours; returns how many.
pub(crate) fn reap_orphans() -> usize {
    let Some(here) = Creator::current() else { return 0 };
    let Ok(entries) = std::fs::read_dir(SHM_DIR) else { return 0 };
    // SAFETY: geteuid cannot fail and has no preconditions.
    let my_uid = unsafe { libc::geteuid() };
    let mut removed = 0;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(name) = file_name.to_str() else { continue };
        let Some(creator) = creator_of(name) else { continue };
        if !is_gone(creator, here) || !owned_file(&entry.path(), my_uid) {
            continue;
        }
        let shm_name = format!("/{name}");
        debug_assert!(shm_name.starts_with(NAME_PREFIX));
        match ShmSegment::unlink(&shm_name) {
            Ok(()) => {
                removed += 1;
                tracing::info!(
                    "removed shared-memory segment {shm_name}: its creator (pid {}) died before removing it",
                    creator.pid
                );
            }
            // Another node-local setup reaped it first.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => tracing::warn!("could not remove orphaned shared-memory segment {shm_name}: {error}"),
        }
    }
    removed
}

/// Whether the process that made a segment can no longer remove it. Pids
/// only mean something on the boot and in the PID namespace `here` is in.
pub(crate) fn is_gone(creator: Creator, here: Creator) -> bool {
    if creator.origin != here.origin || creator.origin == UNKNOWN_ORIGIN || creator.pid == here.pid {
        return false;
    }
    match process_state(creator.pid) {
        None => true,
        Some(state) => state.zombie || state.start != creator.start,
    }
}

fn owned_file(path: &Path, uid: libc::uid_t) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => meta.uid() == uid && meta.file_type().is_file(),
        Err(_) => false,
    }
}
