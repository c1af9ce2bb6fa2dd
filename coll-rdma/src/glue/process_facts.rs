//! What holds for the whole process rather than one communicator (the
//! thread level coll rdma serves, the coll components it opened
//! underneath itself), gathered while the component opens and said once
//! in a `process` event, for tests and tools that must not read the
//! verbose wording of the same facts.
//!
//! Invariants: the facts are reset at each component open (an MPI 4
//! session may open it again with another thread level), and the event is
//! written at most once per open, just before that open's first
//! `comm_claimed`, with that communicator's header (an event always has
//! one; docs/events.md).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use super::events::{self, Origin};

static THREAD_MULTIPLE: AtomicBool = AtomicBool::new(false);
static OPENED_UNDERNEATH: Mutex<Vec<String>> = Mutex::new(Vec::new());
static SAID: AtomicBool = AtomicBool::new(false);

/// Forgets what an earlier open gathered.
pub(super) fn reset() {
    THREAD_MULTIPLE.store(false, Ordering::Relaxed);
    OPENED_UNDERNEATH.lock().unwrap_or_else(PoisonError::into_inner).clear();
    SAID.store(false, Ordering::Relaxed);
}

/// The job asked for MPI_THREAD_MULTIPLE, and coll rdma serves it.
pub(super) fn serving_thread_multiple() {
    THREAD_MULTIPLE.store(true, Ordering::Relaxed);
}

/// The coll components `--mca coll rdma` left out that coll rdma opened.
pub(super) fn opened_underneath(names: &[String]) {
    OPENED_UNDERNEATH.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(names);
}

/// Writes the `process` event if this open has not yet.
pub(super) fn say_once(origin: Origin) {
    if first_to_say() {
        events::emit("process", origin, fields);
    }
}

/// True for the first caller since the last `reset` only.
fn first_to_say() -> bool {
    !SAID.swap(true, Ordering::Relaxed)
}

fn fields() -> events::Value {
    let opened = OPENED_UNDERNEATH.lock().unwrap_or_else(PoisonError::into_inner).clone();
    events::json!({
        "thread_multiple": THREAD_MULTIPLE.load(Ordering::Relaxed),
        "components_opened_underneath": opened,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test that touches these statics: what one open gathered,
    /// said once, and forgotten by the next open.
    #[test]
    fn each_open_says_its_own_facts_once() {
        reset();
        serving_thread_multiple();
        opened_underneath(&["basic".to_string(), "libnbc".to_string()]);
        let said = fields();
        assert_eq!(said["thread_multiple"], true);
        assert_eq!(said["components_opened_underneath"], events::json!(["basic", "libnbc"]));
        assert!(first_to_say());
        assert!(!first_to_say(), "a second communicator says nothing more");

        reset();
        assert!(first_to_say(), "the next open says its facts again");
        let said = fields();
        assert_eq!(said["thread_multiple"], false);
        assert_eq!(said["components_opened_underneath"], events::json!([]));
    }
}
