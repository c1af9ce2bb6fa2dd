//! Routes `tracing` events to an Open MPI output stream so that coll rdma's
//! messages appear where and how every other component's do. Warnings and
//! errors always print; `coll_rdma_verbose` 1 adds the summary (info events
//! of target [`SUMMARY`]: a line or two per communicator from its rank 0,
//! none longer than [`SUMMARY_MAX_CHARS`]), 2 every other info and debug
//! event (what each rank chose and why), 3 and above trace.
//!
//! Invariant: the stream is ours only between a component open and the
//! following close. Open MPI finalises its output streams with the rest of
//! OPAL at the end of each initialisation of the process (every MPI 4
//! session) and may hand the same number to another stream at the next, so
//! the stream is opened at each open and closed at each close; in between,
//! messages go straight to stderr, where the default stream writes them.

use std::ffi::CString;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI32, Ordering};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// No stream of ours is open.
const NO_STREAM: i32 = -1;

/// The target of the info events `coll_rdma_verbose` 1 prints: what a
/// user of a thousand ranks can still read (per communicator, from its
/// rank 0; per process, from the job's rank 0).
pub const SUMMARY: &str = "coll_rdma::summary";

/// No summary line is longer (the prefix `coll:rdma: ` included).
pub const SUMMARY_MAX_CHARS: usize = 200;

static STREAM: AtomicI32 = AtomicI32::new(NO_STREAM);
static VERBOSITY: AtomicI32 = AtomicI32::new(0);

/// Opens our stream for this initialisation of the process (at component
/// open, on the thread that initialises MPI) and installs the subscriber
/// the first time.
pub fn open_stream() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let _ = tracing::subscriber::set_global_default(OpalOutput);
    });
    // SAFETY: a null descriptor asks opal_output_open for its default
    // settings (stderr); OPAL is initialised when a component opens.
    let stream = unsafe { ompi_sys::opal_output_open(std::ptr::null_mut()) };
    // A stream still recorded here (an open without a close) is not closed:
    // its number may belong to another stream by now.
    STREAM.store(if stream >= 0 { stream } else { NO_STREAM }, Ordering::Relaxed);
}

/// Closes our stream (at component close, before OPAL finalises).
pub fn close_stream() {
    let stream = STREAM.swap(NO_STREAM, Ordering::Relaxed);
    if stream >= 0 {
        close(stream);
    }
}

fn close(stream: i32) {
    // SAFETY: `stream` came from opal_output_open in this initialisation
    // (close_stream runs before OPAL finalises its streams) and is closed once.
    unsafe { ompi_sys::opal_output_close(stream) };
}

/// The verbosity read at the latest component open.
pub fn set_verbosity(verbosity: i32) {
    VERBOSITY.store(verbosity, Ordering::Relaxed);
}

pub fn verbosity() -> i32 {
    VERBOSITY.load(Ordering::Relaxed)
}

fn level_needed(metadata: &Metadata<'_>) -> i32 {
    match *metadata.level() {
        Level::ERROR | Level::WARN => 0,
        Level::INFO if metadata.target() == SUMMARY => 1,
        Level::INFO | Level::DEBUG => 2,
        Level::TRACE => 3,
    }
}

/// Says `text` in the summary (verbose 1) from the job's first process
/// only, and as detail (verbose 2) from the others: for what holds for
/// every process alike.
pub fn say_once_per_job(text: &str) {
    if is_first_process() {
        tracing::info!(target: SUMMARY, "{text}");
    } else {
        tracing::info!("{text}");
    }
}

/// Whether this process is the job's first (rank 0 of MPI_COMM_WORLD, as
/// the launcher says; a singleton is), which alone prints the summary of
/// what holds for every process alike.
pub fn is_first_process() -> bool {
    std::env::var("OMPI_COMM_WORLD_RANK").map_or(true, |rank| rank.trim() == "0")
}

fn emit(line: &str) {
    let stream = STREAM.load(Ordering::Relaxed);
    if stream < 0 {
        eprintln!("{line}");
        return;
    }
    let Ok(text) = CString::new(line.replace('\0', " ")) else { return };
    // SAFETY: `text` is a valid NUL-terminated string that outlives the
    // call; the shim passes it to opal_output as a "%s" argument.
    unsafe { ompi_sys::coll_rdma_shim_output(stream, text.as_ptr()) };
}

struct MessageText(String);

impl Visit for MessageText {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

struct OpalOutput;

impl Subscriber for OpalOutput {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        verbosity() >= level_needed(metadata)
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut text = MessageText(String::new());
        event.record(&mut text);
        let tag = match *event.metadata().level() {
            Level::ERROR => "error: ",
            Level::WARN => "warning: ",
            _ => "",
        };
        emit(&format!("coll:rdma: {tag}{}", text.0));
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}
