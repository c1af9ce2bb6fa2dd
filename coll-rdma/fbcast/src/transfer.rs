//! The protocol, the same on every rank. For each item the root broadcasts
//! a status record (a fixed-size MPI_Bcast), each rank checks what it holds
//! and prepares a temporary, and an MPI_Allreduce(MAX) of [error, data
//! needed] makes the decision common: every rank returns the same code, and
//! no rank can wait for a broadcast the others skipped. A file's data then
//! go in chunks (MPI_Bcast of at most `chunk_bytes`), hashed on the way;
//! a second agreement precedes the renames, a third follows them.

use crate::dest::{self, CreatedDirs};
use crate::modes;
use crate::error::{ErrorCode, Failure};
use crate::mpi::Comm;
use crate::policy::{self, Action, Policy};
use crate::read_ahead::ReadAhead;
use crate::record::{FLAG_FSYNC, HASH_BYTES, Kind, MAX_CHUNK_BYTES, MIN_CHUNK_BYTES, RECORD_BYTES, StatusRecord};
use crate::source::{self, Plan};
use crate::staging::{Commit, Staged};
use crate::trusted_dir::TrustedDir;
use crate::write_behind::WriteBehind;
use std::ffi::{OsStr, OsString};
use std::fs::{File, FileTimes, Permissions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub const DEFAULT_CHUNK_BYTES: usize = 4 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// The root's applies on every rank.
    pub policy: Policy,
    /// Bytes per MPI_Bcast, MIN_CHUNK_BYTES..=INT_MAX; the root's applies.
    pub chunk_bytes: usize,
    /// fsync each file before renaming it into place.
    pub fsync: bool,
    /// Send a directory source as a tree (else it is an error).
    pub recursive: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { policy: Policy::IfDifferent, chunk_bytes: DEFAULT_CHUNK_BYTES, fsync: false, recursive: false }
    }
}

impl Options {
    fn check(&self) -> Result<(), Failure> {
        if !(MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&self.chunk_bytes) {
            return Err(Failure::new(
                ErrorCode::Arg,
                format!("chunk size {} outside {MIN_CHUNK_BYTES}..={MAX_CHUNK_BYTES} bytes", self.chunk_bytes),
            ));
        }
        Ok(())
    }
}

/// Where the root stands, after each chunk it sent.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// The file being sent (relative to the tree for a directory).
    pub path: &'a Path,
    pub file_done: u64,
    pub file_bytes: u64,
    pub done: u64,
    pub total: u64,
}

/// What this rank did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalReport {
    pub files_written: u64,
    pub files_identical: u64,
    pub bytes_written: u64,
    pub dirs_created: u64,
    /// Root: files and bytes sent, entries of a tree that were not sent
    /// (symbolic links, devices, sockets...).
    pub files_sent: u64,
    pub bytes_sent: u64,
    pub not_regular_skipped: u64,
    /// Another (lower) rank writes the same destination file on this machine.
    pub shares_with: Option<i32>,
    /// This rank's own failure, if it had one (the root's is also what
    /// every rank saw in the status record).
    pub failure: Option<Failure>,
}

/// The outcome: `result` is the same on every rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub result: Result<(), ErrorCode>,
    pub local: LocalReport,
}

/// Sends `src` (read on `root` only) to `dst` on every other rank. `dst` is
/// not used on the root, `src` not on the others; `options` must be the
/// same on every rank (the root's policy and chunk size apply). Collective
/// over `comm`.
pub fn bcast_path(
    comm: &Comm,
    root: i32,
    src: Option<&Path>,
    dst: Option<&Path>,
    options: &Options,
    progress: Option<&mut dyn FnMut(&Progress)>,
) -> Report {
    bcast_path_after(comm, root, src, dst, options, None, progress)
}

/// `bcast_path` on a rank that already failed (`early`, e.g. bad flags in
/// the C API): it still takes part, and its failure is agreed on.
pub(crate) fn bcast_path_after(
    comm: &Comm,
    root: i32,
    src: Option<&Path>,
    dst: Option<&Path>,
    options: &Options,
    early: Option<Failure>,
    progress: Option<&mut dyn FnMut(&Progress)>,
) -> Report {
    let mut local = LocalReport::default();
    let (rank, size) = match (comm.rank(), comm.size()) {
        (Ok(r), Ok(s)) => (r, s),
        _ => return Report { result: Err(ErrorCode::Mpi), local },
    };
    // Only a root out of range stops a rank before any communication: MPI
    // requires the same root everywhere, so then every rank stops here.
    if root < 0 || root >= size {
        local.failure = Some(Failure::new(ErrorCode::Arg, format!("root {root} outside 0..{size}")));
        return Report { result: Err(ErrorCode::Arg), local };
    }
    let mut session = Session {
        comm,
        root,
        is_root: rank == root,
        buf: Vec::new(),
        local,
        progress,
        done: 0,
        total: 0,
        dirs: CreatedDirs::default(),
        tree_top: None,
        last_parent: None,
        umask: modes::current_umask(),
        in_tree: false,
    };
    let result = session.run(rank as usize, src, dst, options, early);
    Report { result, local: session.local }
}

struct Session<'a, 'p> {
    comm: &'a Comm,
    root: i32,
    is_root: bool,
    buf: Vec<u8>,
    local: LocalReport,
    progress: Option<&'p mut dyn FnMut(&Progress)>,
    done: u64,
    total: u64,
    dirs: CreatedDirs,
    /// The tree's DST, once its TreeBegin record is prepared.
    tree_top: Option<TrustedDir>,
    /// The directory the previous tree entry went into, kept open: entries
    /// come depth first, so most share it (saves a walk from the top).
    last_parent: Option<(PathBuf, TrustedDir)>,
    /// Taken away from every mode set, as cp does.
    umask: u32,
    in_tree: bool,
}

/// A rank's contribution to an agreement.
#[derive(Clone, Copy, Default)]
struct Vote {
    error: i32,
    needs_data: bool,
    /// Set by the root when it could not send the file as announced (a
    /// read error, or the source changed while it was sent): the copies
    /// then cannot match the hash, and every rank reports SOURCE, not the
    /// receivers' CORRUPT.
    root_source_failed: bool,
}

enum Flow {
    Next,
    Finished,
}

/// What a receiving rank does with the file announced.
enum Receiving {
    Nothing,
    Identical,
    Write(Staged, Target),
}

/// Where a received file goes: a name in a checked directory.
struct Target {
    dir: TrustedDir,
    name: OsString,
}

impl Target {
    fn shown(&self) -> PathBuf {
        self.dir.shown().join(&self.name)
    }
}

fn split_name(path: &Path) -> Result<(&Path, &OsStr), Failure> {
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
    fn run(
        &mut self,
        rank: usize,
        src: Option<&Path>,
        dst: Option<&Path>,
        options: &Options,
        early: Option<Failure>,
    ) -> Result<(), ErrorCode> {
        // failures before the first record: voted on with it
        let mut early_vote = Vote::default();
        let mut failures = Vec::new();
        failures.extend(early);
        failures.extend(options.check().err());
        let dst = match dst {
            _ if self.is_root => None,
            Some(d) => Some(d),
            None => {
                failures.push(Failure::new(ErrorCode::Arg, "no destination path given"));
                None
            }
        };
        if let Some(first) = failures.into_iter().next() {
            early_vote.error = self.fail(first);
        }
        let key = dst.map(dest::dest_key).unwrap_or([0; HASH_BYTES]);
        let keys: Vec<[u8; HASH_BYTES]> = self
            .comm
            .allgather_bytes(&key)
            .map_err(|_| ErrorCode::Mpi)?
            .chunks_exact(HASH_BYTES)
            .map(|k| k.try_into().unwrap())
            .collect();
        let leader = dest::leader_of(&keys, rank);
        self.local.shares_with = leader.map(|r| r as i32);
        let writes_here = if leader.is_none() { dst } else { None };

        if self.is_root {
            self.run_root(src, options, early_vote)
        } else {
            self.run_receiver(writes_here, early_vote)
        }
    }

    fn run_root(&mut self, src: Option<&Path>, options: &Options, early_vote: Vote) -> Result<(), ErrorCode> {
        let mut template = StatusRecord::new(Kind::File, options.policy);
        template.chunk_bytes = options.chunk_bytes as u32;
        template.flags = if options.fsync { FLAG_FSYNC } else { 0 };
        let plan = if let Some(f) = self.local.failure.clone() {
            Err(f)
        } else if let Some(src) = src {
            source::plan(src, options.recursive)
        } else {
            Err(Failure::new(ErrorCode::Arg, "no source path given on the root"))
        };
        let plan = match plan {
            Ok(plan) => plan,
            Err(f) => {
                let record = StatusRecord::failed(options.policy, f.code, &f.reason);
                self.local.failure.get_or_insert(f);
                let record = self.send_record(record)?;
                return self.announce_and_transfer(Ok(record), None, None, early_vote).map(|_| ());
            }
        };
        source::test_pause_after_plan();
        let Plan { items, total_bytes, not_regular } = plan;
        self.total = total_bytes;
        self.local.not_regular_skipped = not_regular;
        for item in &items {
            let (record, file) = match source::record_for(item, &template) {
                Ok(r) => r,
                Err(f) => {
                    let record = StatusRecord::failed(options.policy, f.code, &f.reason);
                    self.local.failure.get_or_insert(f);
                    (record, None)
                }
            };
            let record = self.send_record(record)?;
            match self.announce_and_transfer(Ok(record), file, None, Vote::default())? {
                Flow::Next => {}
                Flow::Finished => return Ok(()),
            }
        }
        self.fail(Failure::new(ErrorCode::Protocol, "the root's plan ended without a final record"));
        Err(ErrorCode::Protocol)
    }

    fn run_receiver(&mut self, dst: Option<&Path>, early_vote: Vote) -> Result<(), ErrorCode> {
        let mut vote = early_vote;
        loop {
            let mut bytes = vec![0u8; RECORD_BYTES];
            self.comm.bcast_bytes(&mut bytes, self.root).map_err(|_| ErrorCode::Mpi)?;
            let record = StatusRecord::decode(&bytes)
                .map_err(|e| Failure::new(ErrorCode::Protocol, format!("status record from the root rejected: {e}")));
            match self.announce_and_transfer(record, None, dst, vote)? {
                Flow::Next => vote = Vote::default(),
                Flow::Finished => return Ok(()),
            }
        }
    }

    /// Broadcasts `record`, or a failure record when it cannot be encoded
    /// (the receivers wait for one either way); returns what was sent.
    fn send_record(&mut self, record: StatusRecord) -> Result<StatusRecord, ErrorCode> {
        let (record, mut bytes) = match record.encode() {
            Ok(bytes) => (record, bytes),
            Err(e) => {
                let reason = format!("cannot encode the status record of {}: {e}", String::from_utf8_lossy(&record.path));
                let failed = StatusRecord::failed(record.policy, ErrorCode::Protocol, &reason);
                self.fail(Failure::new(ErrorCode::Protocol, reason.clone()));
                let bytes = failed.encode().map_err(|_| ErrorCode::Protocol)?;
                (failed, bytes)
            }
        };
        self.comm.bcast_bytes(&mut bytes, self.root).map_err(|_| ErrorCode::Mpi)?;
        Ok(record)
    }

    /// Records a local failure; returns its code for the vote.
    fn fail(&mut self, failure: Failure) -> i32 {
        let code = failure.code as i32;
        self.local.failure.get_or_insert(failure);
        code
    }

    fn agree(&self, vote: Vote) -> Result<Vote, ErrorCode> {
        let mut values = [vote.error, vote.needs_data as i32, vote.root_source_failed as i32];
        self.comm.allreduce_max(&mut values).map_err(|_| ErrorCode::Mpi)?;
        Ok(Vote { error: values[0], needs_data: values[1] != 0, root_source_failed: values[2] != 0 })
    }

    fn agreed_ok(&self, vote: Vote) -> Result<Vote, ErrorCode> {
        self.agreed_ok_after(self.agree(vote)?)
    }

    /// The agreed vote, or the code every rank returns.
    fn agreed_ok_after(&self, agreed: Vote) -> Result<Vote, ErrorCode> {
        if agreed.root_source_failed {
            return Err(ErrorCode::Source);
        }
        match ErrorCode::from_i32(agreed.error) {
            None => Ok(agreed),
            Some(code) => Err(code),
        }
    }

    /// One record on any rank: `dst` is this rank's destination when it
    /// writes (None on the root and on ranks sharing another's file).
    fn announce_and_transfer(
        &mut self,
        record: Result<StatusRecord, Failure>,
        source: Option<File>,
        dst: Option<&Path>,
        mut vote: Vote,
    ) -> Result<Flow, ErrorCode> {
        let record = match record {
            Ok(r) => r,
            Err(f) => {
                vote.error = vote.error.max(self.fail(f));
                self.agreed_ok(vote)?;
                return Err(ErrorCode::Protocol);
            }
        };
        if let Err(f) = self.in_sequence(record.kind) {
            vote.error = vote.error.max(self.fail(f));
        }
        let mut receiving = Receiving::Nothing;
        if vote.error == 0 {
            match self.prepare(&record, dst) {
                Ok(r) => receiving = r,
                Err(f) => vote.error = self.fail(f),
            }
        }
        if record.kind == Kind::Failed {
            vote.error = vote.error.max(record.error);
        }
        vote.needs_data = matches!(receiving, Receiving::Write(..));
        let agreed = self.agreed_ok(vote)?;
        if record.kind.carries_data() {
            if let Receiving::Identical = receiving {
                self.local.files_identical += 1;
            }
            if agreed.needs_data {
                self.send_or_receive(&record, source, receiving)?;
            } else if self.is_root {
                // every copy was identical: the progress counts it as done
                self.done += record.size;
                let shown = PathBuf::from(OsStr::from_bytes(&record.path));
                if let Some(report) = self.progress.as_mut() {
                    report(&Progress { path: &shown, file_done: record.size, file_bytes: record.size, done: self.done, total: self.total });
                }
            }
            if self.is_root {
                self.local.files_sent += agreed.needs_data as u64;
            }
        }
        Ok(match record.kind {
            Kind::File | Kind::TreeEnd => Flow::Finished,
            _ => Flow::Next,
        })
    }

    /// Records arrive in the order File, or TreeBegin (TreeDir|TreeFile)* TreeEnd.
    fn in_sequence(&mut self, kind: Kind) -> Result<(), Failure> {
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

    fn prepare(&mut self, record: &StatusRecord, dst: Option<&Path>) -> Result<Receiving, Failure> {
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

    /// The data of one file, then the agreements before and after the rename.
    fn send_or_receive(&mut self, record: &StatusRecord, source: Option<File>, receiving: Receiving) -> Result<(), ErrorCode> {
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

/// How a verified temporary ended up under its final name.
#[derive(Debug, PartialEq, Eq)]
enum Committed {
    Written,
    /// Policy never: the file appeared meanwhile with the same contents,
    /// e.g. written by another host to the same path of a shared file
    /// system (the first rename wins; the others find its identical copy).
    Identical,
}

/// Renames the temporary over `target` (a symbolic link there is replaced,
/// never followed); under policy never, only if nothing appeared meanwhile.
fn commit(staged: Staged, target: &Target, record: &StatusRecord) -> Result<Committed, Failure> {
    match staged.commit(record.policy == Policy::Never) {
        Ok(Commit::Renamed) => Ok(Committed::Written),
        Ok(Commit::TemporaryNameLeft { temp, error }) => {
            // written all the same: a stray second name is not worth failing every rank
            eprintln!("coll_rdma_bcast_file: {} written, but its temporary name {} remains: {error}", target.shown().display(), temp.display());
            Ok(Committed::Written)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match dest::existing(&target.dir, &target.name, record) {
            policy::Existing::SameContent => Ok(Committed::Identical),
            _ => Err(Failure::new(
                ErrorCode::Exists,
                format!("{} appeared during the transfer with other contents (policy never)", target.shown().display()),
            )),
        },
        Err(e) => Err(Failure::new(ErrorCode::Dest, format!("cannot rename into {}: {e}", target.shown().display()))),
    }
}

/// The announced mode (see `modes::file_mode`) and mtime, and fsync if
/// asked, before the rename.
fn finish_file(file: &mut File, record: &StatusRecord, umask: u32) -> std::io::Result<()> {
    file.flush()?;
    file.set_permissions(Permissions::from_mode(modes::file_mode(record.mode, umask)))?;
    let out_of_range = || std::io::Error::new(std::io::ErrorKind::InvalidData, "mtime out of range");
    let since_epoch = Duration::from_secs(record.mtime_sec.unsigned_abs());
    let seconds = if record.mtime_sec >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(since_epoch)
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(since_epoch)
    };
    let mtime = seconds.and_then(|t| t.checked_add(Duration::from_nanos(record.mtime_nsec as u64))).ok_or_else(out_of_range)?;
    file.set_times(FileTimes::new().set_modified(mtime))?;
    if record.flags & FLAG_FSYNC != 0 {
        file.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn record_of(data: &[u8], policy: Policy) -> StatusRecord {
        let mut r = StatusRecord::new(Kind::File, policy);
        r.size = data.len() as u64;
        r.hash = *blake3::hash(data).as_bytes();
        r
    }

    fn target_of(dst: &Path) -> Target {
        let (parent, name) = split_name(dst).unwrap();
        Target { dir: TrustedDir::open(parent).unwrap(), name: name.to_os_string() }
    }

    fn staged_with(dst: &Path, data: &[u8]) -> Staged {
        let target = target_of(dst);
        let mut staged = Staged::create_in(&target.dir, &target.name).unwrap();
        staged.file().write_all(data).unwrap();
        staged
    }

    #[test]
    fn policy_never_loses_a_rename_race_to_an_identical_copy_without_failing() {
        let _slot = crate::cleanup::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let dst = dir.path().join("f");
        let record = record_of(b"payload", Policy::Never);
        // another host of a shared file system renamed its copy first
        let staged = staged_with(&dst, b"payload");
        std::fs::write(&dst, b"payload").unwrap();
        let winner_inode = std::fs::metadata(&dst).unwrap().ino();
        assert_eq!(commit(staged, &target_of(&dst), &record), Ok(Committed::Identical));
        assert_eq!(std::fs::metadata(&dst).unwrap().ino(), winner_inode, "the first rename's file stays");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "our temporary is removed");
        // a different file that appeared meanwhile is still refused
        let staged = staged_with(&dst, b"payload");
        std::fs::write(&dst, b"PAYLOAD").unwrap();
        let refused = commit(staged, &target_of(&dst), &record).unwrap_err();
        assert_eq!(refused.code, ErrorCode::Exists);
        assert_eq!(std::fs::read(&dst).unwrap(), b"PAYLOAD");
        // nothing there: written
        std::fs::remove_file(&dst).unwrap();
        assert_eq!(commit(staged_with(&dst, b"payload"), &target_of(&dst), &record), Ok(Committed::Written));
        assert_eq!(std::fs::read(&dst).unwrap(), b"payload");
    }

    #[test]
    fn commit_replaces_a_link_and_leaves_its_target_alone() {
        let _slot = crate::cleanup::TEST_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"not ours").unwrap();
        let dst = dir.path().join("f");
        std::os::unix::fs::symlink(&target, &dst).unwrap();
        let record = record_of(b"payload", Policy::IfDifferent);
        assert_eq!(commit(staged_with(&dst, b"payload"), &target_of(&dst), &record), Ok(Committed::Written));
        assert!(std::fs::symlink_metadata(&dst).unwrap().is_file(), "the link itself was replaced");
        assert_eq!(std::fs::read(&dst).unwrap(), b"payload");
        assert_eq!(std::fs::read(&target).unwrap(), b"not ours");
    }

    #[test]
    fn received_files_lose_setuid_setgid_and_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut file = File::create(&path).unwrap();
        let mut record = record_of(b"", Policy::IfDifferent);
        record.mode = 0o6755;
        record.mtime_sec = 1_700_000_000;
        finish_file(&mut file, &record, 0).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o755);
        assert_eq!(meta.mtime(), 1_700_000_000);
        // umask 077, as cp applies it: a 0666 source gives 0600
        record.mode = 0o666;
        finish_file(&mut file, &record, 0o077).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o600);
    }

    #[test]
    fn extreme_mtimes_do_not_panic() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = File::create(dir.path().join("f")).unwrap();
        for sec in [i64::MIN, i64::MAX] {
            let mut record = record_of(b"", Policy::IfDifferent);
            record.mtime_sec = sec;
            record.mtime_nsec = 999_999_999;
            // whether the file system takes it or not, no overflow panics
            let _ = finish_file(&mut file, &record, 0o022);
        }
        let mut record = record_of(b"", Policy::IfDifferent);
        record.mtime_sec = -86_400;
        finish_file(&mut file, &record, 0o022).unwrap();
        assert_eq!(file.metadata().unwrap().mtime(), -86_400);
    }
}
