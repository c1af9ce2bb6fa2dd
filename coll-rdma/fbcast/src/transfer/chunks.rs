//! One file's data: the root reads ahead and broadcasts chunks of at most
//! `chunk_bytes`, the writing receivers hash and write them behind. Invariant:
//! every rank takes part in every chunk's MPI_Bcast whatever failed locally
//! (a root that cannot read sends zeros), and the failures are only voted
//! on after the last chunk; the rename is agreed before and after.

use super::agreement::Vote;
use super::commit::{Committed, commit, finish_file};
use super::placement::Receiving;
use super::{Progress, Session};
use crate::error::{ErrorCode, Failure};
use crate::read_ahead::ReadAhead;
use crate::record::StatusRecord;
use crate::staging::Staged;
use crate::write_behind::WriteBehind;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

impl Session<'_, '_> {
    /// The data of one file, then the agreements before and after the rename.
    pub(super) fn send_or_receive(&mut self, record: &StatusRecord, source: Option<File>, receiving: Receiving) -> Result<(), ErrorCode> {
        let (mut staged, target) = match receiving {
            Receiving::Write(staged, target) => (Some(staged), Some(target)),
            _ => (None, None),
        };
        let shown = PathBuf::from(OsStr::from_bytes(&record.path));
        let chunk = record.chunk_bytes as usize;
        let first = usize::try_from(record.size).unwrap_or(usize::MAX).min(chunk);
        if self.buf.len() < first {
            self.buf.resize(first, 0);
        }
        let mut local: Option<Failure> = None;
        let unreadable = |e: std::io::Error| Failure::new(ErrorCode::Source, format!("read error in {}: {e}", shown.display()));
        let reader = match source.map(|file| ReadAhead::start(file, record.size, chunk)).transpose() {
            Ok(reader) => reader,
            Err(e) => {
                local = Some(unreadable(e));
                None
            }
        };
        // receivers that write hash and write what arrives on a thread of
        // their own while the next chunk comes in; the root's reader hashes
        // what it reads
        let cannot_write = |s: &Staged, e: &std::io::Error| {
            Failure::new(ErrorCode::of_write(e), format!("cannot write {}: {e}", s.temp_path().display()))
        };
        let mut writer = None;
        if let Some(s) = staged.as_mut() {
            match s.file().try_clone().and_then(|file| WriteBehind::start(file, first)) {
                Ok(w) => writer = Some(w),
                Err(e) => local = Some(cannot_write(s, &e)),
            }
        }
        let mut offset = 0u64;
        while offset < record.size {
            let len = (record.size - offset).min(chunk as u64) as usize;
            let mut from_reader = None;
            if let Some(r) = reader.as_ref()
                && local.is_none()
            {
                match r.next_chunk() {
                    Ok(b) => from_reader = Some(b),
                    Err(e) => local = Some(unreadable(e)),
                }
            }
            let mut to_write = writer.as_ref().map(|w| w.buffer(len));
            let buf: &mut [u8] = if let Some(b) = from_reader.as_mut() {
                &mut b[..len]
            } else if let Some(b) = to_write.as_mut() {
                &mut b[..]
            } else {
                let b = &mut self.buf[..len];
                if self.is_root {
                    b.fill(0); // after a read error: the chunk must still go out
                }
                b
            };
            self.comm.bcast_bytes(buf, self.root).map_err(|_| ErrorCode::Mpi)?;
            if let (Some(w), Some(b)) = (writer.as_ref(), to_write) {
                w.submit(b);
            }
            if let (Some(r), Some(b)) = (reader.as_ref(), from_reader) {
                r.recycle(b);
            }
            offset += len as u64;
            if self.is_root {
                self.done += len as u64;
                if let Some(report) = self.progress.as_mut() {
                    report(&Progress { path: &shown, file_done: offset, file_bytes: record.size, done: self.done, total: self.total });
                }
            }
        }
        let read_hash = reader.and_then(ReadAhead::finish);
        if local.is_none() && self.is_root && read_hash != Some(record.hash) {
            local = Some(Failure::new(ErrorCode::Source, format!("{} changed while it was sent", shown.display())));
        }
        let written = writer.map(WriteBehind::finish);
        if local.is_none()
            && let (Some(s), Some((_, Err(e)))) = (staged.as_ref(), written.as_ref())
        {
            local = Some(cannot_write(s, e));
        }
        if local.is_none()
            && let Some((hash, _)) = written
            && hash != record.hash
        {
            local = Some(Failure::new(
                ErrorCode::Corrupt,
                format!("{}: the data received do not match the content hash", shown.display()),
            ));
        }
        if local.is_none()
            && let Some(s) = staged.as_mut()
            && let Err(e) = finish_file(s.file(), record, self.umask)
        {
            local = Some(Failure::new(ErrorCode::of_write(&e), format!("cannot complete {}: {e}", s.temp_path().display())));
        }
        let root_source_failed = self.is_root && matches!(&local, Some(f) if f.code == ErrorCode::Source);
        let vote = Vote { error: local.as_ref().map_or(0, |f| f.code as i32), needs_data: false, root_source_failed };
        let agreed = self.agree(vote);
        // a receiver's hash mismatch is the root's changed source, not its own failure
        if let Some(f) = local
            && !(matches!(agreed, Ok(a) if a.root_source_failed) && f.code == ErrorCode::Corrupt)
        {
            self.fail(f);
        }
        self.agreed_ok_after(agreed?)?;
        let mut vote = Vote::default();
        if let (Some(s), Some(target)) = (staged, target) {
            match commit(s, &target, record) {
                Ok(Committed::Written) => {
                    self.local.files_written += 1;
                    self.local.bytes_written += record.size;
                }
                Ok(Committed::Identical) => self.local.files_identical += 1,
                Err(f) => vote.error = self.fail(f),
            }
        }
        if self.is_root {
            self.local.bytes_sent += record.size;
        }
        self.agreed_ok(vote).map(|_| ())
    }
}
