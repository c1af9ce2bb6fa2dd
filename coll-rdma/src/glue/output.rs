//! Routes `tracing` events to an Open MPI output stream so that coll rdma's
//! messages appear where and how every other component's do. Warnings and
//! errors always print; `coll_rdma_verbose` 1 adds info (what was chosen
//! and why), 2 debug, 3 and above trace.
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

fn level_needed(level: &Level) -> i32 {
    match *level {
        Level::ERROR | Level::WARN => 0,
        Level::INFO => 1,
        Level::DEBUG => 2,
        Level::TRACE => 3,
    }
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
        verbosity() >= level_needed(metadata.level())
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
