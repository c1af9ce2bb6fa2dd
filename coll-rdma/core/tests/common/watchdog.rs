//! What a scripted run of many rank threads adds to btl-ibmc's hang
//! report: each rank notes, cheaply, which call of its script it is in
//! ([`Progress::enter`]), and when a run misses its deadline
//! [`Progress::report`] lists every rank still running, grouped by the call
//! it is in, with what its waits say they wait for (btl-ibmc's registry of
//! stalled waits, [`btl_ibmc::stalled_waits`], which
//! `btl_ibmc::fabric::run_ranks_watched` prints too). Unlike that runner,
//! the report is returned rather than raised, so that a test can look at
//! it and then release a rank it held back.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

/// `Progress::position` of a rank that has returned.
const FINISHED: usize = usize::MAX;

/// Where every rank of one run is in its script.
pub struct Progress {
    positions: Vec<AtomicUsize>,
}

impl Progress {
    pub fn new(size: usize) -> Self {
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
    /// puts it) and its waits that have lasted over a second, grouped so
    /// that a thousand ranks stuck in the same call read as one line plus
    /// the details.
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
        // Each wait describes itself starting "rank R of N".
        let size = self.positions.len();
        let waits = btl_ibmc::stalled_waits();
        let _ = writeln!(text, "what their waits say they wait for:");
        for &(rank, _) in &running {
            let own = format!("rank {rank} of {size} ");
            let mut said = waits.iter().filter(|wait| wait.starts_with(&own)).peekable();
            if said.peek().is_none() {
                let _ = writeln!(text, "  rank {rank}: (no wait has lasted a second: running, or between waits)");
            }
            for wait in said {
                let _ = writeln!(text, "  rank {rank}: {wait}");
            }
        }
        text
    }
}

/// The name rank threads carry, so that a panic names its rank.
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
