//! Where the events go: the file coll_rdma_events_file names, opened once
//! per process.
//!
//! Invariant: coll rdma never writes into a file it did not just create.
//! The file is created with O_CREAT|O_EXCL|O_NOFOLLOW and mode 0600, so a
//! name that already exists (a file, or a symbolic link planted by another
//! user of a shared directory, dangling or not) is refused rather than
//! followed or truncated. Directories on the way are the user's choice and
//! are followed as the user named them.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

/// The path for this process: `%r` becomes `world_rank`, `%p` the process
/// id, `%%` a `%`; without `%r`, `.<rank>` is appended so that the ranks
/// of one job never ask for the same file. An unknown `%x` stays as it is.
pub(super) fn expand(pattern: &str, world_rank: &str, pid: u32) -> PathBuf {
    let mut path = String::with_capacity(pattern.len() + 8);
    let mut has_rank = false;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            path.push(c);
            continue;
        }
        match chars.peek() {
            Some('r') => {
                has_rank = true;
                path.push_str(world_rank);
            }
            Some('p') => path.push_str(&pid.to_string()),
            Some('%') => path.push('%'),
            _ => {
                path.push('%');
                continue;
            }
        }
        chars.next();
    }
    if !has_rank {
        path.push('.');
        path.push_str(world_rank);
    }
    PathBuf::from(path)
}

/// This process's rank in MPI_COMM_WORLD as the launcher gives it (Open
/// MPI 4 and 5 both set OMPI_COMM_WORLD_RANK), else `pid<pid>` (a
/// singleton run without a launcher).
pub(super) fn world_rank() -> String {
    std::env::var("OMPI_COMM_WORLD_RANK")
        .ok()
        .filter(|rank| !rank.is_empty() && rank.bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or_else(|| format!("pid{}", std::process::id()))
}

/// Creates `path` for writing, refusing any name that exists already.
pub(super) fn create(path: &std::path::Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(0o600)
        .open(path)
}

/// The events file at `path` if this process created it in an earlier
/// load of the component: Open MPI 5 unloads components when a session
/// ends and loads them again for the next, which resets every static, but
/// the descriptor of the file stays open. A file is taken only when one of
/// this process's descriptors is that very file (same device and inode),
/// so a file left by an earlier job, or planted by someone else, is still
/// refused. Opened again for appending, through the descriptor's entry in
/// /proc (Linux), so that no byte written before is overwritten.
pub(super) fn reopen_own(path: &std::path::Path) -> Option<File> {
    use std::os::unix::fs::MetadataExt;
    let named = std::fs::symlink_metadata(path).ok()?;
    if !named.file_type().is_file() {
        return None;
    }
    let descriptors = std::fs::read_dir("/proc/self/fd").ok()?;
    for entry in descriptors.flatten() {
        let own = entry.path();
        let Ok(open) = std::fs::metadata(&own) else { continue };
        if open.dev() == named.dev() && open.ino() == named.ino() {
            return OpenOptions::new().append(true).custom_flags(libc::O_CLOEXEC).open(own).ok();
        }
    }
    None
}

/// What to tell the user when `create` failed, and what happens next.
pub(super) fn refusal(path: &std::path::Path, why: &io::Error) -> String {
    let hint = match why.kind() {
        io::ErrorKind::AlreadyExists => {
            " (coll rdma only writes events into a file it creates: remove it, or name another, e.g. with %p in coll_rdma_events_file)"
        }
        io::ErrorKind::NotFound => " (the directory must exist)",
        _ => "",
    };
    format!("coll_rdma_events_file: cannot create {}: {why}{hint}; running on without events", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn placeholders_expand_and_a_rank_is_always_in_the_name() {
        assert_eq!(expand("/tmp/ev-%r.jsonl", "3", 99), PathBuf::from("/tmp/ev-3.jsonl"));
        assert_eq!(expand("/tmp/ev-%p-%r", "0", 99), PathBuf::from("/tmp/ev-99-0"));
        assert_eq!(expand("/tmp/ev", "12", 99), PathBuf::from("/tmp/ev.12"));
        assert_eq!(expand("/tmp/100%%-%p", "1", 5), PathBuf::from("/tmp/100%-5.1"));
        assert_eq!(expand("/tmp/a%xb%", "1", 5), PathBuf::from("/tmp/a%xb%.1"));
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("coll-rdma-events-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        dir
    }

    #[test]
    fn creates_a_private_file_once() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch_dir("create");
        let path = dir.join("events.0");
        let mut file = create(&path).expect("a new name is created");
        file.write_all(b"{}\n").expect("writable");
        let mode = std::fs::metadata(&path).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = create(&path).expect_err("an existing file is never reused");
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        assert!(refusal(&path, &again).contains("running on without events"));
        assert_eq!(std::fs::read(&path).expect("readable"), b"{}\n", "the refused open left the file alone");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn never_follows_a_symbolic_link() {
        let dir = scratch_dir("symlink");
        let target = dir.join("victim");
        std::fs::write(&target, b"keep").expect("target");
        let planted = dir.join("events.0");
        std::os::unix::fs::symlink(&target, &planted).expect("symlink");
        assert!(create(&planted).is_err(), "a link to an existing file is refused");
        let dangling = dir.join("events.1");
        std::os::unix::fs::symlink(dir.join("absent"), &dangling).expect("symlink");
        assert!(create(&dangling).is_err(), "a dangling link is refused, not followed");
        assert!(!dir.join("absent").exists(), "nothing was created through the link");
        assert_eq!(std::fs::read(&target).expect("readable"), b"keep");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_this_process_holds_open_is_taken_again_and_appended_to() {
        let dir = scratch_dir("reopen");
        let path = dir.join("events.0");
        // as the component's earlier load left it: created, written, its
        // descriptor still open while nothing refers to it any more
        let mut earlier = create(&path).expect("created");
        earlier.write_all(b"{\"first\":1}\n").expect("writable");
        let mut again = reopen_own(&path).expect("the process's own file is taken again");
        again.write_all(b"{\"second\":2}\n").expect("writable");
        assert_eq!(std::fs::read(&path).expect("readable"), b"{\"first\":1}\n{\"second\":2}\n");
        drop((earlier, again));
        // closed, it is a file of the past (an earlier job): refused
        assert!(reopen_own(&path).is_none(), "a file no descriptor of this process holds is not taken");
        // another file with the same name, even one linked to ours, is not ours
        std::fs::remove_file(&path).expect("removed");
        let keep = create(&dir.join("kept")).expect("created");
        std::os::unix::fs::symlink(dir.join("kept"), &path).expect("symlink");
        assert!(reopen_own(&path).is_none(), "a symbolic link is never taken, even to a file of ours");
        drop(keep);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_directory_is_named_in_the_message() {
        let path = PathBuf::from("/nonexistent-coll-rdma-dir/events.0");
        let why = create(&path).expect_err("no such directory");
        assert!(refusal(&path, &why).contains("the directory must exist"));
    }
}
