//! The root's side: what to send (one file, or a directory tree walked in a
//! fixed order) and the status record of each item.
//!
//! Invariant: what is read is what was planned. The plan notes each item's
//! device and inode, and `record_for` opens with O_NOFOLLOW|O_NONBLOCK (a
//! link swapped in fails, a FIFO does not block) and checks with fstat that
//! it holds a regular file, or directory, with those numbers: an item
//! replaced after planning is a SOURCE error on every rank, never a hang
//! nor a file from outside the tree. A file that passes is read in
//! blocking mode (O_NONBLOCK cleared: FUSE may answer EAGAIN otherwise).

use crate::error::{ErrorCode, Failure};
use crate::record::{HASH_BYTES, Kind, MAX_PATH_BYTES, StatusRecord};
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// One item the root will announce.
#[derive(Debug, Clone)]
pub struct Planned {
    pub kind: Kind,
    /// Relative to the tree's top (empty for the top itself and TreeEnd).
    pub rel: PathBuf,
    /// As the user named it (shown to the destinations for File and TreeBegin).
    pub abs: PathBuf,
    /// The same without links (the user's SRC may be one): what is opened.
    pub real: PathBuf,
    /// Which file or directory was planned.
    pub dev: u64,
    pub ino: u64,
}

/// Everything the root will send, in order.
#[derive(Debug, Default)]
pub struct Plan {
    pub items: Vec<Planned>,
    pub total_bytes: u64,
    /// Symbolic links, sockets, devices... in a tree: not sent.
    pub not_regular: u64,
}

/// Plans `src`: one regular file, or (with `recursive`) a directory walked
/// depth first, entries of a directory sorted by name, each directory
/// before its contents.
pub fn plan(src: &Path, recursive: bool) -> Result<Plan, Failure> {
    let unreadable = |e: io::Error| Failure::new(ErrorCode::Source, format!("cannot read {}: {e}", src.display()));
    let real = std::fs::canonicalize(src).map_err(unreadable)?;
    let meta = std::fs::symlink_metadata(&real).map_err(unreadable)?;
    let mut plan = Plan::default();
    let top = |kind| Planned { kind, rel: PathBuf::new(), abs: src.to_path_buf(), real: real.clone(), dev: meta.dev(), ino: meta.ino() };
    if meta.is_file() {
        plan.total_bytes = meta.len();
        plan.items.push(top(Kind::File));
    } else if meta.is_dir() {
        if !recursive {
            return Err(Failure::new(ErrorCode::Source, format!("{} is a directory (the recursive flag sends directories)", src.display())));
        }
        plan.items.push(top(Kind::TreeBegin));
        walk(&real, Path::new(""), src, &mut plan)?;
        plan.items.push(top(Kind::TreeEnd));
    } else {
        return Err(Failure::new(ErrorCode::Source, format!("{} is not a regular file or a directory", src.display())));
    }
    Ok(plan)
}

fn walk(dir: &Path, rel: &Path, src: &Path, plan: &mut Plan) -> Result<(), Failure> {
    let unreadable = |e: io::Error| Failure::new(ErrorCode::Source, format!("cannot list {}: {e}", dir.display()));
    let mut entries: Vec<_> = std::fs::read_dir(dir).map_err(unreadable)?.collect::<Result<_, _>>().map_err(unreadable)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let real = entry.path();
        let entry_rel = rel.join(entry.file_name());
        let abs = src.join(&entry_rel);
        if entry_rel.as_os_str().len() > MAX_PATH_BYTES {
            return Err(Failure::new(ErrorCode::Source, format!("{}: path longer than {MAX_PATH_BYTES} bytes", abs.display())));
        }
        let meta = std::fs::symlink_metadata(&real).map_err(|e| Failure::new(ErrorCode::Source, format!("cannot read {}: {e}", abs.display())))?;
        let (dev, ino) = (meta.dev(), meta.ino());
        if meta.is_dir() {
            plan.items.push(Planned { kind: Kind::TreeDir, rel: entry_rel.clone(), abs, real: real.clone(), dev, ino });
            walk(&real, &entry_rel, src, plan)?;
        } else if meta.is_file() {
            plan.total_bytes += meta.len();
            plan.items.push(Planned { kind: Kind::TreeFile, rel: entry_rel, abs, real, dev, ino });
        } else {
            plan.not_regular += 1;
        }
    }
    Ok(())
}

/// Test hook (ci/fbcast-tests.sh): a directory where the root, once it has
/// planned, creates `planned` and then waits (at most two minutes) for
/// `go`, so that a test can replace planned files in between.
pub const TEST_PAUSE_ENV: &str = "COLL_RDMA_FBCAST_TEST_PAUSE_AFTER_PLAN";
const TEST_PAUSE_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

pub fn test_pause_after_plan() {
    let Some(dir) = std::env::var_os(TEST_PAUSE_ENV).map(PathBuf::from) else { return };
    if std::fs::write(dir.join("planned"), b"").is_err() {
        return;
    }
    let start = std::time::Instant::now();
    while !dir.join("go").exists() && start.elapsed() < TEST_PAUSE_LIMIT {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The content hash of `reader`'s remaining bytes.
pub fn hash_reader(reader: &mut impl Read) -> io::Result<[u8; HASH_BYTES]> {
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(reader)?;
    Ok(*hasher.finalize().as_bytes())
}

fn metadata_fields(record: &mut StatusRecord, meta: &Metadata) {
    record.mode = meta.permissions().mode() & 0o7777;
    record.mtime_sec = meta.mtime();
    record.mtime_nsec = meta.mtime_nsec().clamp(0, 999_999_999) as u32;
}

/// Opens what `item` planned without following a link in its last
/// component and without blocking on a FIFO (O_NONBLOCK changes nothing
/// for a regular file's reads).
fn open_planned(item: &Planned) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    options.open(&item.real).map_err(|e| match e.raw_os_error() {
        Some(libc::ELOOP) => io::Error::new(e.kind(), "a symbolic link now (not followed)"),
        _ => e,
    })
}

/// Clears O_NONBLOCK, set only so that opening a FIFO could not block:
/// some file systems (FUSE) may return EAGAIN from a non-blocking read of
/// a regular file, which would end the transfer.
fn blocking_reads(file: &File) -> io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(file)?;
    rustix::fs::fcntl_setfl(file, flags - rustix::fs::OFlags::NONBLOCK)?;
    Ok(())
}

/// The record of a planned item; for a file, also the open file (hashed
/// once, then rewound for sending). `template` holds the policy, flags and
/// chunk size.
pub fn record_for(item: &Planned, template: &StatusRecord) -> Result<(StatusRecord, Option<File>), Failure> {
    let mut record = template.clone();
    record.kind = item.kind;
    let shown = if item.kind == Kind::File || item.kind == Kind::TreeBegin { item.abs.as_os_str() } else { item.rel.as_os_str() };
    if shown.len() > MAX_PATH_BYTES {
        return Err(Failure::new(ErrorCode::Source, format!("{}: path longer than {MAX_PATH_BYTES} bytes", item.abs.display())));
    }
    record.path = shown.as_bytes().to_vec();
    if item.kind == Kind::TreeEnd {
        return Ok((record, None));
    }
    let unreadable = |e: io::Error| Failure::new(ErrorCode::Source, format!("cannot read {}: {e}", item.abs.display()));
    let mut file = open_planned(item).map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    let same_kind = if item.kind.carries_data() { meta.is_file() } else { meta.is_dir() };
    if !same_kind || meta.dev() != item.dev || meta.ino() != item.ino {
        return Err(Failure::new(ErrorCode::Source, format!("{} was replaced after it was planned: not sent", item.abs.display())));
    }
    metadata_fields(&mut record, &meta);
    if !item.kind.carries_data() {
        return Ok((record, None));
    }
    blocking_reads(&file).map_err(unreadable)?;
    record.size = meta.len();
    let mut exact = (&mut file).take(record.size);
    record.hash = hash_reader(&mut exact).map_err(unreadable)?;
    if exact.limit() != 0 {
        return Err(Failure::new(ErrorCode::Source, format!("{} shrank while it was read", item.abs.display())));
    }
    io::Seek::rewind(&mut file).map_err(unreadable)?;
    Ok((record, Some(file)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn tree_plan_is_sorted_depth_first_and_skips_links() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("top");
        std::fs::create_dir_all(top.join("b/inner")).unwrap();
        std::fs::create_dir_all(top.join("a")).unwrap();
        std::fs::write(top.join("b/inner/z"), b"zz").unwrap();
        std::fs::write(top.join("a/y"), b"y").unwrap();
        std::fs::write(top.join("c"), b"ccc").unwrap();
        std::os::unix::fs::symlink("c", top.join("link")).unwrap();
        let planned = plan(&top, true).unwrap();
        let listed: Vec<_> = planned.items.iter().map(|i| (i.kind, i.rel.to_string_lossy().into_owned())).collect();
        let want = [
            (Kind::TreeBegin, ""),
            (Kind::TreeDir, "a"),
            (Kind::TreeFile, "a/y"),
            (Kind::TreeDir, "b"),
            (Kind::TreeDir, "b/inner"),
            (Kind::TreeFile, "b/inner/z"),
            (Kind::TreeFile, "c"),
            (Kind::TreeEnd, ""),
        ];
        assert_eq!(listed, want.map(|(k, p)| (k, p.to_string())));
        assert_eq!(planned.total_bytes, 6);
        assert_eq!(planned.not_regular, 1);
        assert_eq!(plan(&top, false).unwrap_err().code, ErrorCode::Source);
        assert_eq!(plan(&dir.path().join("missing"), true).unwrap_err().code, ErrorCode::Source);
    }

    #[test]
    fn file_record_has_size_mode_and_a_hash_computed_another_way() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mut template = StatusRecord::new(Kind::File, Policy::Never);
        template.chunk_bytes = 1 << 20;
        let planned = plan(&path, false).unwrap();
        let (record, file) = record_for(&planned.items[0], &template).unwrap();
        assert_eq!(record.size, data.len() as u64);
        assert_eq!(record.mode, 0o640);
        assert_eq!(record.hash, *blake3::hash(&data).as_bytes());
        assert_eq!(record.path, path.as_os_str().as_bytes());
        let mut file = file.unwrap();
        let flags = rustix::fs::fcntl_getfl(&file).unwrap();
        assert!(!flags.contains(rustix::fs::OFlags::NONBLOCK), "reads block again once it is known to be a file: {flags:?}");
        let mut back = Vec::new();
        file.read_to_end(&mut back).unwrap();
        assert_eq!(back, data, "the file is rewound for sending");
        assert!(StatusRecord::decode(&record.encode().unwrap()).is_ok());
    }

    /// After planning, a file is replaced by a FIFO, by a link to a file
    /// outside the tree, or its directory by a link to another directory:
    /// each is refused at once (a FIFO opened for reading would block).
    #[test]
    fn items_replaced_after_planning_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().join("top");
        std::fs::create_dir_all(top.join("sub")).unwrap();
        for name in ["fifo", "link", "sub/f"] {
            std::fs::write(top.join(name), b"planned").unwrap();
        }
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("f"), b"secret").unwrap();
        let planned = plan(&top, true).unwrap();
        let item = |rel: &str| planned.items.iter().find(|i| i.rel == Path::new(rel)).unwrap().clone();
        let template = StatusRecord::new(Kind::File, Policy::IfDifferent);

        std::fs::remove_file(top.join("fifo")).unwrap();
        rustix::fs::mknodat(rustix::fs::CWD, top.join("fifo").as_path(), rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o600), 0).unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let fifo = item("fifo");
        let template_copy = template.clone();
        std::thread::spawn(move || {
            let _ = done_tx.send(record_for(&fifo, &template_copy).map(|(r, _)| r));
        });
        // bounded: the old code blocked in open() here for good
        let refused = done_rx.recv_timeout(std::time::Duration::from_secs(60)).expect("opening a FIFO blocked").unwrap_err();
        assert_eq!(refused.code, ErrorCode::Source);
        assert!(refused.reason.contains("replaced"), "{}", refused.reason);

        std::fs::remove_file(top.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("f"), top.join("link")).unwrap();
        let refused = record_for(&item("link"), &template).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Source);
        assert!(refused.reason.contains("symbolic link"), "{}", refused.reason);

        std::fs::rename(top.join("sub"), dir.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&outside, top.join("sub")).unwrap();
        let refused = record_for(&item("sub/f"), &template).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Source, "not the outside file of the same name");
        assert!(refused.reason.contains("replaced"), "{}", refused.reason);
        let refused = record_for(&item("sub"), &template).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Source, "nor the outside directory's mode");
    }
}
