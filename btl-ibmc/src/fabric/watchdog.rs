//! Runs one thread per rank and turns a hang into a failure that says who
//! waits for what: a hung rank cannot be joined, so each rank runs on a
//! detached thread and reports back, and at the deadline the caller gets
//! every stalled wait's own description instead of a test run that never
//! ends.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::wait::stalled_waits;

/// Runs `body(rank, item)` for each item on its own thread and returns the
/// results in rank order. Re-raises the first rank's panic. If some rank
/// has not finished within `limit`, panics naming the unfinished ranks and
/// listing every wait of this process that has stalled (stuck threads are
/// left behind; the test process ends without them).
pub fn run_ranks_watched<I, T, F>(items: Vec<I>, limit: Duration, body: F) -> Vec<T>
where
    I: Send + 'static,
    T: Send + 'static,
    F: Fn(usize, I) -> T + Send + Sync + 'static,
{
    let size = items.len();
    let body = Arc::new(body);
    let (done, results) = mpsc::channel();
    for (rank, item) in items.into_iter().enumerate() {
        let body = Arc::clone(&body);
        let done = done.clone();
        let spawned = std::thread::Builder::new().name(format!("rank {rank}")).spawn(move || {
            let outcome = catch_unwind(AssertUnwindSafe(|| body(rank, item)));
            let _ = done.send((rank, outcome));
        });
        if let Err(why) = spawned {
            panic!("cannot start the thread for rank {rank}: {why}");
        }
    }
    drop(done);
    let deadline = Instant::now() + limit;
    let mut slots: Vec<Option<T>> = (0..size).map(|_| None).collect();
    for _ in 0..size {
        let left = deadline.saturating_duration_since(Instant::now());
        match results.recv_timeout(left) {
            Ok((rank, Ok(value))) => slots[rank] = Some(value),
            Ok((_, Err(panic))) => resume_unwind(panic),
            Err(_) => {
                let unfinished: Vec<usize> = (0..size).filter(|&rank| slots[rank].is_none()).collect();
                let waits = stalled_waits();
                panic!(
                    "hang: {} of {size} ranks unfinished after {:.0} s: {}\nstalled waits ({}):\n  {}",
                    unfinished.len(),
                    limit.as_secs_f64(),
                    abbreviate(&unfinished),
                    waits.len(),
                    if waits.is_empty() { "(none noted)".to_string() } else { waits.join("\n  ") }
                );
            }
        }
    }
    slots.into_iter().map(|slot| slot.expect("every rank reported")).collect()
}

fn abbreviate(ranks: &[usize]) -> String {
    const SHOWN: usize = 32;
    let shown: Vec<String> = ranks.iter().take(SHOWN).map(usize::to_string).collect();
    let more = if ranks.len() > SHOWN { format!(" and {} more", ranks.len() - SHOWN) } else { String::new() };
    format!("ranks {}{more}", shown.join(", "))
}
