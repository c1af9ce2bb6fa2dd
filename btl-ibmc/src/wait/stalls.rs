//! The waits of this process that have lasted a while, each described in
//! its own words, so that a watchdog (a test's, or a person's debugger)
//! can say who waits for what when a run hangs. A wait notes itself only
//! once it has lasted `NOTE_AFTER`, so quick waits cost nothing here.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::poison::lock;

pub(crate) const NOTE_AFTER: Duration = Duration::from_secs(1);

static NEXT_ID: AtomicU64 = AtomicU64::new(0);
static STALLED: Mutex<BTreeMap<u64, String>> = Mutex::new(BTreeMap::new());

/// A wait's entry, removed when the wait ends.
pub(crate) struct Note(u64);

impl Note {
    pub(crate) fn new(description: String) -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        lock(&STALLED).insert(id, description);
        Note(id)
    }
}

impl Drop for Note {
    fn drop(&mut self) {
        lock(&STALLED).remove(&self.0);
    }
}

/// Every wait of this process that has lasted over a second and is still
/// going, oldest first.
pub fn stalled_waits() -> Vec<String> {
    lock(&STALLED).values().cloned().collect()
}
