//! What `coll_rdma_verbose` 1 says about a communicator: one line when it
//! is ready and one when it is freed, from its rank 0 only, each at most
//! `SUMMARY_MAX_CHARS` long, so that a job of a thousand ranks prints a
//! couple of lines per communicator, not a thousand. Every rank's own
//! detail (why each choice, what its transport set up, its own counts) is
//! `report.rs`'s, at verbose 2. The texts are built by pure functions of
//! plain figures so that their length can be checked for any values.

use super::super::output::{SUMMARY, SUMMARY_MAX_CHARS};
use super::ready::ReadyComm;
use super::tally::Tallies;
use super::CommId;
use crate::collectives::bcast::Bcast;
use btl_ibmc::Endpoint;

/// The figures of a ready communicator that its summary line gives.
pub(super) struct ReadyFigures<'a> {
    pub cid: u32,
    pub size: usize,
    pub transport: &'a str,
    pub barrier_radix: usize,
    pub barrier_two_level: bool,
    pub allreduce_degree: usize,
    pub allreduce_two_level: bool,
    pub reduce_degree: usize,
    pub bcast_window_slots: usize,
    pub bcast_slot_bytes: usize,
    pub bcast_put_tree: bool,
    pub memory_bytes: usize,
}

impl ReadyComm {
    /// The figures both reports of a ready communicator give: its summary
    /// line here and its `comm_ready` event (`report_events.rs`), gathered
    /// in this one place so the two cannot disagree.
    pub(super) fn figures(&self) -> ReadyFigures<'_> {
        let bcast = self.bcast.config();
        ReadyFigures {
            cid: self.id.cid,
            size: self.id.size,
            transport: self.transport.name(),
            barrier_radix: self.barrier.radix(),
            barrier_two_level: self.two_level_barrier.is_some(),
            allreduce_degree: self.allreduce.config().tree.degree,
            allreduce_two_level: self.allreduce.is_two_level(),
            reduce_degree: self.reduce.config().degree,
            bcast_window_slots: bcast.multicast.window_slots,
            bcast_slot_bytes: bcast.multicast.slot_bytes,
            bcast_put_tree: Bcast::uses_put_tree(&self.transport),
            memory_bytes: self.transport.memory_footprint().total_bytes(),
        }
    }

    /// Rank 0's line once the communicator is ready.
    pub(super) fn say_ready_summary(&self) {
        if self.id.rank != 0 {
            return;
        }
        tracing::info!(target: SUMMARY, "{}", ready_line(&self.figures()));
    }
}

/// Rank 0's line when the communicator is freed: its own counts (every
/// rank makes the same calls on a communicator, so they stand for all).
pub(super) fn say_freed_summary(id: CommId, transport: &str, tallies: &Tallies) {
    if id.rank != 0 {
        return;
    }
    let counts: Vec<(&str, u64, u64)> =
        tallies.reported().map(|(collective, tally)| (collective.name(), tally.served, tally.handed_over)).collect();
    tracing::info!(target: SUMMARY, "{}", freed_line(id.cid, transport, &counts, tallies.has_failed()));
}

pub(super) fn ready_line(figures: &ReadyFigures<'_>) -> String {
    let two_level = |yes: bool| if yes { " two-level" } else { "" };
    let bcast = if figures.bcast_put_tree {
        "put tree".to_string()
    } else {
        format!("window {}x{} B", figures.bcast_window_slots, figures.bcast_slot_bytes)
    };
    fit(format!(
        "comm {} ({} ranks) over {}: barrier radix {}{}, allreduce degree {}{}, reduce degree {}, bcast {bcast}; {} KiB",
        figures.cid,
        figures.size,
        figures.transport,
        figures.barrier_radix,
        two_level(figures.barrier_two_level),
        figures.allreduce_degree,
        two_level(figures.allreduce_two_level),
        figures.reduce_degree,
        figures.memory_bytes.div_ceil(1024)
    ))
}

/// `counts`: (collective, served, handed over) in the order to say them.
pub(super) fn freed_line(cid: u32, transport: &str, counts: &[(&str, u64, u64)], failed: bool) -> String {
    let served: Vec<String> = counts.iter().map(|(name, served, _)| format!("{name} {served}")).collect();
    let handed_over: Vec<String> =
        counts.iter().filter(|(_, _, handed)| *handed > 0).map(|(name, _, handed)| format!("{name} {handed}")).collect();
    let handed_over = if handed_over.is_empty() { "none".to_string() } else { handed_over.join(", ") };
    let failed = if failed { "; a call failed, later ones went underneath" } else { "" };
    fit(format!("comm {cid} freed: served over {transport}: {}; handed over: {handed_over}{failed}", served.join(", ")))
}

/// The line cut to fit `SUMMARY_MAX_CHARS` with its prefix, should figures
/// far beyond any real job's make it longer.
fn fit(mut line: String) -> String {
    let room = SUMMARY_MAX_CHARS - "coll:rdma: ".len();
    if line.chars().count() > room {
        line = line.chars().take(room - 3).collect::<String>() + "...";
    }
    line
}

#[cfg(test)]
mod tests {
    use super::super::tally::Collective;
    use super::*;

    fn widest() -> ReadyFigures<'static> {
        ReadyFigures {
            cid: u32::MAX,
            size: 1 << 20,
            transport: "shm+verbs",
            barrier_radix: 64,
            barrier_two_level: true,
            allreduce_degree: 64,
            allreduce_two_level: true,
            reduce_degree: 64,
            bcast_window_slots: 4096,
            bcast_slot_bytes: 1 << 20,
            bcast_put_tree: false,
            memory_bytes: 1 << 40,
        }
    }

    #[test]
    fn the_ready_line_gives_every_figure_and_fits_at_the_widest() {
        let line = ready_line(&widest());
        assert!(line.len() + "coll:rdma: ".len() <= SUMMARY_MAX_CHARS, "{} chars: {line}", line.len());
        assert!(!line.ends_with("..."), "cut where nothing should be: {line}");
        for figure in ["comm 4294967295", "1048576 ranks", "shm+verbs", "radix 64 two-level", "degree 64 two-level", "4096x1048576 B", "1073741824 KiB"] {
            assert!(line.contains(figure), "{figure:?} missing from {line}");
        }
        let put_tree = ready_line(&ReadyFigures { bcast_put_tree: true, ..widest() });
        assert!(put_tree.contains("bcast put tree") && !put_tree.contains("4096x"), "{put_tree}");
    }

    #[test]
    fn the_freed_line_gives_each_count_and_fits_at_the_widest() {
        let counts: Vec<(&str, u64, u64)> = Collective::ALL.iter().map(|c| (c.name(), 10_u64.pow(12), 10_u64.pow(12))).collect();
        let line = freed_line(u32::MAX, "shm+verbs", &counts, true);
        assert!(line.chars().count() + "coll:rdma: ".len() <= SUMMARY_MAX_CHARS, "{line}");
        let line = freed_line(3, "shm", &[("barrier", 100, 0), ("bcast", 7, 2), ("allreduce", 0, 0), ("reduce", 5, 0)], false);
        assert_eq!(line, "comm 3 freed: served over shm: barrier 100, bcast 7, allreduce 0, reduce 5; handed over: bcast 2");
        let none = freed_line(0, "udp", &[("barrier", 1, 0)], false);
        assert!(none.ends_with("handed over: none"), "{none}");
    }

    #[test]
    fn a_line_too_long_is_cut_to_the_limit() {
        let cut = fit("x".repeat(500));
        assert_eq!(cut.chars().count() + "coll:rdma: ".len(), SUMMARY_MAX_CHARS);
        assert!(cut.ends_with("..."));
        assert_eq!(fit("short".into()), "short");
    }
}
