//! The protocol, the same on every rank. For each item the root broadcasts
//! a status record (a fixed-size MPI_Bcast), each rank checks what it holds
//! and prepares a temporary, and an MPI_Allreduce(MAX) of [error, data
//! needed] makes the decision common: every rank returns the same code, and
//! no rank can wait for a broadcast the others skipped. A file's data then
//! go in chunks (MPI_Bcast of at most `chunk_bytes`), hashed on the way;
//! a second agreement precedes the renames, a third follows them.
//!
//! This module drives the records (root and receivers) and holds the public
//! types; its parts, one concern each:
//! - `agreement`: the votes and the one code every rank returns;
//! - `placement`: where a receiver puts what a record announces (record
//!   order, targets, the tree's directories, the policy's decision);
//! - `chunks`: one file's data in chunks, hashed, then the rename agreed;
//! - `commit`: the verified temporary under its final name.

mod agreement;
mod chunks;
mod commit;
mod placement;

use crate::dest::{self, CreatedDirs};
use crate::error::{ErrorCode, Failure};
use crate::modes;
use crate::mpi::Comm;
use crate::policy::Policy;
use crate::record::{FLAG_FSYNC, HASH_BYTES, Kind, MAX_CHUNK_BYTES, MIN_CHUNK_BYTES, RECORD_BYTES, StatusRecord};
use crate::source::{self, Plan};
use crate::trusted_dir::TrustedDir;
use agreement::Vote;
use placement::Receiving;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

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

enum Flow {
    Next,
    Finished,
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
}
