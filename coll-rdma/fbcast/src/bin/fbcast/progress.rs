//! The root's progress line on stderr: bytes, percentage, throughput.

use crate::summary::bytes;
use coll_rdma_fbcast::Progress;
use std::io::Write;
use std::time::{Duration, Instant};

const EVERY: Duration = Duration::from_millis(200);
const BAR_WIDTH: usize = 24;

pub struct ProgressLine {
    start: Instant,
    last: Option<Instant>,
    drawn: bool,
}

impl ProgressLine {
    pub fn new() -> ProgressLine {
        ProgressLine { start: Instant::now(), last: None, drawn: false }
    }

    pub fn update(&mut self, p: &Progress) {
        let now = Instant::now();
        let finished = p.done >= p.total;
        if !finished && self.last.is_some_and(|t| now - t < EVERY) {
            return;
        }
        self.last = Some(now);
        let fraction = if p.total == 0 { 1.0 } else { p.done as f64 / p.total as f64 };
        let filled = (fraction * BAR_WIDTH as f64) as usize;
        let bar: String = "#".repeat(filled) + &"-".repeat(BAR_WIDTH - filled.min(BAR_WIDTH));
        let rate = p.done as f64 / now.duration_since(self.start).as_secs_f64().max(1e-6);
        let line = format!(
            "\rfbcast [{bar}] {:>5.1}% {} / {} {}/s  {}",
            fraction * 100.0,
            bytes(p.done),
            bytes(p.total),
            bytes(rate as u64),
            p.path.display()
        );
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{line}\x1b[K");
        let _ = err.flush();
        self.drawn = true;
    }

    /// Ends the line (before the summary is printed).
    pub fn finish(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
    }
}
