//! Routes `tracing` events to an Open MPI output stream so that coll rdma's
//! messages appear where and how every other component's do. Warnings and
//! errors always print; `coll_rdma_verbose` 1 adds info (what was chosen
//! and why), 2 debug, 3 and above trace.

use std::ffi::CString;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI32, Ordering};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

static STREAM: AtomicI32 = AtomicI32::new(0);
static VERBOSITY: AtomicI32 = AtomicI32::new(0);

/// Opens our stream and installs the subscriber; later calls only update
/// the verbosity.
pub fn install(verbosity: i32) {
    VERBOSITY.store(verbosity, Ordering::Relaxed);
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // SAFETY: a null descriptor asks opal_output_open for its default
        // settings (stderr); called once, from component open on the main thread.
        let stream = unsafe { ompi_sys::opal_output_open(std::ptr::null_mut()) };
        if stream >= 0 {
            STREAM.store(stream, Ordering::Relaxed);
        }
        let _ = tracing::subscriber::set_global_default(OpalOutput);
    });
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
    let Ok(text) = CString::new(line.replace('\0', " ")) else { return };
    // SAFETY: `text` is a valid NUL-terminated string that outlives the
    // call; the shim passes it to opal_output as a "%s" argument.
    unsafe { ompi_sys::coll_rdma_shim_output(STREAM.load(Ordering::Relaxed), text.as_ptr()) };
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
