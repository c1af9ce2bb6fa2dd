//! Turning a hang of many rank threads into a report of who waits for
//! what. Each rank notes, cheaply, which call of its script it is in
//! ([`Progress::enter`]); the waits' own stall warnings (the `describe`
//! text of `WaitPolicy::stall_warning` and the multicast's patience) are
//! captured per thread by a small tracing subscriber. When a run misses its
//! deadline, [`Progress::report`] lists every rank still running, the call
//! it is in and the last thing its waits said they were waiting for.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// `Progress::position` of a rank that has returned.
const FINISHED: usize = usize::MAX;
/// Stall warnings kept per rank: the latest say what it waits for now.
const KEPT_PER_RANK: usize = 2;

/// Where every rank of one run is in its script.
pub struct Progress {
    positions: Vec<AtomicUsize>,
}

impl Progress {
    pub fn new(size: usize) -> Self {
        capture_stall_warnings();
        Progress { positions: (0..size).map(|_| AtomicUsize::new(0)).collect() }
    }

    /// Rank `rank` starts call `call` of the script.
    pub fn enter(&self, rank: usize, call: usize) {
        self.positions[rank].store(call, Ordering::Relaxed);
    }

    pub fn finish(&self, rank: usize) {
        self.positions[rank].store(FINISHED, Ordering::Relaxed);
    }

    /// Every rank still running: the call it is in (as `describe_call`
    /// puts it) and its latest stall warnings, grouped so that a thousand
    /// ranks stuck in the same call read as one line plus the details.
    pub fn report(&self, describe_call: impl Fn(usize) -> String) -> String {
        let running: Vec<(usize, usize)> = self
            .positions
            .iter()
            .enumerate()
            .map(|(rank, position)| (rank, position.load(Ordering::Relaxed)))
            .filter(|&(_, position)| position != FINISHED)
            .collect();
        let mut by_call: HashMap<usize, Vec<usize>> = HashMap::new();
        for &(rank, call) in &running {
            by_call.entry(call).or_default().push(rank);
        }
        let mut calls: Vec<_> = by_call.into_iter().collect();
        calls.sort();
        let mut text = format!("{} of {} ranks still running:\n", running.len(), self.positions.len());
        for (call, ranks) in &calls {
            let _ = writeln!(text, "  in call {call} ({}): {} rank(s) {}", describe_call(*call), ranks.len(), rank_list(ranks));
        }
        let warnings = lock(stall_log());
        let _ = writeln!(text, "what their waits last said:");
        for &(rank, _) in &running {
            match warnings.get(&thread_name(rank)) {
                Some(said) => {
                    for line in said {
                        let _ = writeln!(text, "  rank {rank}: {line}");
                    }
                }
                None => {
                    let _ = writeln!(text, "  rank {rank}: (no stall warning yet: running, or in a wait that does not warn)");
                }
            }
        }
        text
    }
}

/// The name rank threads must carry for their warnings to be attributed.
pub fn thread_name(rank: usize) -> String {
    format!("rank {rank}")
}

/// "0-5, 9, 12-13": compact, for hundreds of ranks.
fn rank_list(ranks: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut index = 0;
    while index < ranks.len() {
        let first = ranks[index];
        let mut last = first;
        while index + 1 < ranks.len() && ranks[index + 1] == last + 1 {
            index += 1;
            last = ranks[index];
        }
        parts.push(if first == last { first.to_string() } else { format!("{first}-{last}") });
        index += 1;
    }
    parts.join(", ")
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn stall_log() -> &'static Mutex<HashMap<String, Vec<String>>> {
    static LOG: OnceLock<Mutex<HashMap<String, Vec<String>>>> = OnceLock::new();
    LOG.get_or_init(Default::default)
}

/// Installs the capturing subscriber once per test binary. Warnings from
/// threads without a rank name go to stderr as usual.
fn capture_stall_warnings() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let _ = tracing::subscriber::set_global_default(StallCapture);
    });
}

struct StallCapture;

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

impl Subscriber for StallCapture {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::WARN
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut text = MessageText(String::new());
        event.record(&mut text);
        let current = std::thread::current();
        match current.name() {
            Some(name) if name.starts_with("rank ") => {
                let mut log = lock(stall_log());
                let said = log.entry(name.to_owned()).or_default();
                if said.len() == KEPT_PER_RANK {
                    said.remove(0);
                }
                said.push(text.0);
            }
            _ => eprintln!("{}: {}", event.metadata().level(), text.0),
        }
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

