//! No panic may unwind into Open MPI's C frames: it would abort the job
//! without a word. Every entry point runs its body through `guarded`.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `body`; if it panics, reports where and returns `on_panic`.
pub fn guarded<R>(entry_point: &str, on_panic: R, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(payload) => {
            let why = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            tracing::error!("internal error in {entry_point}: {why}");
            on_panic
        }
    }
}
