//! coll rdma's structured events: what it decided and counted, one JSON
//! object per line in the file coll_rdma_events_file names (schema:
//! docs/events.md), for the tests and the tuner to read instead of the
//! prose of verbose output.
//!
//! Invariants: with no file asked for (the default) an event costs one
//! relaxed atomic load, its fields are never built; a file that cannot be
//! created or written gives one warning and the run goes on without
//! events, never a failed call; each event is written whole with one
//! write, so a crash loses at most the event being written.

mod record;
mod sink;

use std::fs::File;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

pub(in crate::glue) use record::{bytes_or_null, Origin};
pub(in crate::glue) use serde_json::{json, Value};

static ENABLED: AtomicBool = AtomicBool::new(false);
static SINK: Mutex<Sink> = Mutex::new(Sink::Off);

enum Sink {
    Off,
    /// Asked for, not created yet: the first event creates it, so that a
    /// process that never has a communicator (ompi_info) leaves no file.
    Pending { pattern: String },
    /// Writing to `file`, created for the parameter value `pattern`.
    Open { pattern: String, file: File },
    /// `pattern` could not be used; said once, not tried again.
    Refused { pattern: String },
}

impl Sink {
    fn pattern(&self) -> Option<&str> {
        match self {
            Sink::Off => None,
            Sink::Pending { pattern } | Sink::Open { pattern, .. } | Sink::Refused { pattern } => Some(pattern),
        }
    }
}

/// Takes coll_rdma_events_file's value, read at each component open. The
/// file of an earlier open of the same process stays in use while the value
/// is unchanged (each MPI 4 session opens the component again; where Open
/// MPI loaded it afresh, `sink::reopen_own` finds the file again).
pub(in crate::glue) fn configure(pattern: &str) {
    let mut sink = SINK.lock().unwrap_or_else(PoisonError::into_inner);
    if sink.pattern() == Some(pattern) {
        return;
    }
    if pattern.is_empty() {
        ENABLED.store(false, Ordering::Relaxed);
        *sink = Sink::Off;
        return;
    }
    *sink = Sink::Pending { pattern: pattern.to_string() };
    ENABLED.store(true, Ordering::Relaxed);
}

/// Creates the pending file; says why not and turns events off if it
/// cannot.
fn open_pending(sink: &mut Sink) {
    let Sink::Pending { pattern } = sink else { return };
    let pattern = std::mem::take(pattern);
    let path = sink::expand(&pattern, &sink::world_rank(), std::process::id());
    let created = sink::create(&path);
    let reopened = match &created {
        Err(why) if why.kind() == std::io::ErrorKind::AlreadyExists => sink::reopen_own(&path),
        _ => None,
    };
    *sink = match reopened.map_or(created, Ok) {
        Ok(file) => Sink::Open { pattern, file },
        Err(why) => {
            tracing::warn!("{}", sink::refusal(&path, &why));
            ENABLED.store(false, Ordering::Relaxed);
            Sink::Refused { pattern }
        }
    };
}

/// Whether events are being written (for a caller whose fields cost
/// something to gather even before `emit`).
pub(in crate::glue) fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Writes event `name` about `origin`, its fields built by `fields` only
/// when events are on.
pub(in crate::glue) fn emit(name: &str, origin: Origin, fields: impl FnOnce() -> Value) {
    if !enabled() {
        return;
    }
    let mut line = record::encode(name, origin, fields());
    line.push('\n');
    let mut sink = SINK.lock().unwrap_or_else(PoisonError::into_inner);
    open_pending(&mut sink);
    let Sink::Open { pattern, file } = &mut *sink else { return };
    if let Err(why) = file.write_all(line.as_bytes()) {
        tracing::warn!("coll_rdma_events_file: writing an event failed: {why}; running on without events");
        ENABLED.store(false, Ordering::Relaxed);
        *sink = Sink::Refused { pattern: std::mem::take(pattern) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process-wide sink, end to end (the only test that touches it):
    /// nothing before the first event, the file then, one parseable line
    /// per event, nothing once off, and a refused name turns events off.
    #[test]
    fn the_sink_writes_lines_from_the_first_event_and_refuses_existing_files() {
        let dir = std::env::temp_dir().join(format!("coll-rdma-events-sink-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        let pattern = format!("{}/ev-%r", dir.display());
        let path = sink::expand(&pattern, &sink::world_rank(), std::process::id());
        let origin = Origin { cid: 0, rank: 1, size: 2 };

        configure(&pattern);
        assert!(enabled());
        assert!(!path.exists(), "no file before the first event");
        emit("comm_claimed", origin, || Value::Null);
        emit("fault", origin, || json!({ "collective": "bcast", "error": "peer \"2\" gone\n" }));
        configure(&pattern); // a second component open keeps the file
        emit("comm_freed", origin, || json!({ "failed": true }));
        configure("");
        assert!(!enabled());
        emit("comm_freed", origin, || panic!("no fields are built while events are off"));

        let text = std::fs::read_to_string(&path).expect("the events file");
        let events: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).expect("JSON")).collect();
        let names: Vec<&str> = events.iter().filter_map(|event| event["event"].as_str()).collect();
        assert_eq!(names, ["comm_claimed", "fault", "comm_freed"]);
        assert_eq!(events[1]["error"], "peer \"2\" gone\n");
        assert!(events.iter().all(|event| event["v"] == record::SCHEMA_VERSION && event["rank"] == 1));

        // The same name again (a later job reusing the path): refused.
        configure(&pattern);
        emit("comm_claimed", origin, || Value::Null);
        assert!(!enabled(), "a file that exists turns events off");
        assert_eq!(std::fs::read_to_string(&path).expect("still there"), text, "the existing file is left alone");
        configure("");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
