//! The root's side: what to send (one file, or a directory tree walked in a
//! fixed order) and the status record of each item.

use crate::error::{ErrorCode, Failure};
use crate::record::{HASH_BYTES, Kind, MAX_PATH_BYTES, StatusRecord};
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// One item the root will announce.
#[derive(Debug, Clone)]
pub struct Planned {
    pub kind: Kind,
    /// Relative to the tree's top (empty for the top itself and TreeEnd).
    pub rel: PathBuf,
    pub abs: PathBuf,
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
    let meta = std::fs::metadata(src).map_err(|e| Failure::new(ErrorCode::Source, format!("cannot read {}: {e}", src.display())))?;
    let mut plan = Plan::default();
    if meta.is_file() {
        plan.total_bytes = meta.len();
        plan.items.push(Planned { kind: Kind::File, rel: PathBuf::new(), abs: src.to_path_buf() });
    } else if meta.is_dir() {
        if !recursive {
            return Err(Failure::new(ErrorCode::Source, format!("{} is a directory (the recursive flag sends directories)", src.display())));
        }
        plan.items.push(Planned { kind: Kind::TreeBegin, rel: PathBuf::new(), abs: src.to_path_buf() });
        walk(src, Path::new(""), &mut plan)?;
        plan.items.push(Planned { kind: Kind::TreeEnd, rel: PathBuf::new(), abs: src.to_path_buf() });
    } else {
        return Err(Failure::new(ErrorCode::Source, format!("{} is not a regular file or a directory", src.display())));
    }
    Ok(plan)
}

fn walk(dir: &Path, rel: &Path, plan: &mut Plan) -> Result<(), Failure> {
    let unreadable = |e: io::Error| Failure::new(ErrorCode::Source, format!("cannot list {}: {e}", dir.display()));
    let mut entries: Vec<_> = std::fs::read_dir(dir).map_err(unreadable)?.collect::<Result<_, _>>().map_err(unreadable)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let abs = entry.path();
        let entry_rel = rel.join(entry.file_name());
        if entry_rel.as_os_str().len() > MAX_PATH_BYTES {
            return Err(Failure::new(ErrorCode::Source, format!("{}: path longer than {MAX_PATH_BYTES} bytes", abs.display())));
        }
        let meta = std::fs::symlink_metadata(&abs).map_err(|e| Failure::new(ErrorCode::Source, format!("cannot read {}: {e}", abs.display())))?;
        if meta.is_dir() {
            plan.items.push(Planned { kind: Kind::TreeDir, rel: entry_rel.clone(), abs: abs.clone() });
            walk(&abs, &entry_rel, plan)?;
        } else if meta.is_file() {
            plan.total_bytes += meta.len();
            plan.items.push(Planned { kind: Kind::TreeFile, rel: entry_rel, abs });
        } else {
            plan.not_regular += 1;
        }
    }
    Ok(())
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
    if !item.kind.carries_data() {
        let meta = std::fs::metadata(&item.abs).map_err(unreadable)?;
        metadata_fields(&mut record, &meta);
        return Ok((record, None));
    }
    let mut file = File::open(&item.abs).map_err(unreadable)?;
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(Failure::new(ErrorCode::Source, format!("{} is no longer a regular file", item.abs.display())));
    }
    metadata_fields(&mut record, &meta);
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
        let mut back = Vec::new();
        file.unwrap().read_to_end(&mut back).unwrap();
        assert_eq!(back, data, "the file is rewound for sending");
        assert!(StatusRecord::decode(&record.encode().unwrap()).is_ok());
    }
}
