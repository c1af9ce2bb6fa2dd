//! What `coll_rdma_verbose` 1 says about a communicator: one line when it
//! is ready and one when it is freed (two or three where non-blocking or
//! persistent calls were made: one per family of calls, so that the counts
//! of all twelve kinds fit), from its rank 0 only, each at most
//! `SUMMARY_MAX_CHARS` long, so that a job of a thousand ranks prints a
//! couple of lines per communicator, not a thousand. Every rank's own
//! detail (why each choice, what its transport set up, its own counts) is
//! `report.rs`'s, at verbose 2. The texts are built by pure functions of
//! plain figures so that their length can be checked for any values.

use super::super::output::{SUMMARY, SUMMARY_MAX_CHARS};
use super::ready::ReadyComm;
use super::tally::{Collective, Tallies};
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

/// Rank 0's lines when the communicator is freed: its own counts (every
/// rank makes the same calls on a communicator, so they stand for all).
pub(super) fn say_freed_summary(id: CommId, transport: &str, tallies: &Tallies) {
    if id.rank != 0 {
        return;
    }
    let counts: Vec<(Collective, u64, u64)> =
        tallies.reported().map(|(collective, tally)| (collective, tally.served, tally.handed_over)).collect();
    for line in freed_lines(id.cid, transport, &counts, tallies.has_failed()) {
        tracing::info!(target: SUMMARY, "{line}");
    }
}

/// The families of calls the freed lines count apart, in their order.
#[derive(PartialEq, Eq, Clone, Copy)]
enum Family {
    Blocking,
    NonBlocking,
    Persistent,
}

fn family_of(collective: Collective) -> Family {
    match collective {
        Collective::Barrier | Collective::Allreduce | Collective::Reduce | Collective::Bcast => Family::Blocking,
        Collective::Ibarrier | Collective::Ibcast | Collective::Iallreduce | Collective::Ireduce => Family::NonBlocking,
        Collective::BarrierInit | Collective::BcastInit | Collective::AllreduceInit | Collective::ReduceInit => Family::Persistent,
    }
}

/// `counts`: (collective, served, handed over) in the order to say them.
/// One `freed_line` per family that has counts (the blocking one always;
/// the failure is said on it).
pub(super) fn freed_lines(cid: u32, transport: &str, counts: &[(Collective, u64, u64)], failed: bool) -> Vec<String> {
    [Family::Blocking, Family::NonBlocking, Family::Persistent]
        .into_iter()
        .filter_map(|family| {
            let of_family: Vec<(&str, u64, u64)> = counts
                .iter()
                .filter(|(collective, ..)| family_of(*collective) == family)
                .map(|&(collective, served, handed_over)| (collective.name(), served, handed_over))
                .collect();
            (family == Family::Blocking || !of_family.is_empty())
                .then(|| freed_line(cid, transport, &of_family, failed && family == Family::Blocking))
        })
        .collect()
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
    fn every_kind_is_counted_uncut_on_its_familys_line() {
        // A million calls of each of the twelve kinds served on the widest
        // communicator id and transport name, a failure said: no line is
        // cut, each kind is said on exactly one.
        let counts: Vec<(Collective, u64, u64)> = Collective::ALL.iter().map(|&c| (c, 999_999, 0)).collect();
        let lines = freed_lines(u32::MAX, "shm+verbs", &counts, true);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        for line in &lines {
            assert!(line.chars().count() + "coll:rdma: ".len() <= SUMMARY_MAX_CHARS, "{} chars: {line}", line.chars().count());
            assert!(!line.ends_with("..."), "cut: {line}");
        }
        for collective in Collective::ALL {
            let said = format!(" {} 999999", collective.name());
            let saying = lines.iter().filter(|line| line.contains(&format!("{said},")) || line.contains(&format!("{said};"))).count();
            assert_eq!(saying, 1, "{said:?} on {saying} lines: {lines:#?}");
        }
        assert!(lines[0].contains("barrier 999999") && lines[0].ends_with("later ones went underneath"), "{}", lines[0]);
        assert!(lines[1].contains("iallreduce 999999") && !lines[1].contains("failed"), "{}", lines[1]);
        assert!(lines[2].contains("reduce_init 999999") && !lines[2].contains("failed"), "{}", lines[2]);
        // Blocking calls only: one line, as before.
        let blocking = [(Collective::Barrier, 4, 0), (Collective::Allreduce, 0, 0), (Collective::Reduce, 0, 0), (Collective::Bcast, 1, 0)];
        assert_eq!(freed_lines(1, "shm", &blocking, false), ["comm 1 freed: served over shm: barrier 4, allreduce 0, reduce 0, bcast 1; handed over: none"]);
        // Persistent calls but no non-blocking ones: no empty line for them.
        let persistent = [(Collective::Barrier, 1, 0), (Collective::AllreduceInit, 7, 1)];
        assert_eq!(
            freed_lines(2, "udp", &persistent, false),
            ["comm 2 freed: served over udp: barrier 1; handed over: none", "comm 2 freed: served over udp: allreduce_init 7; handed over: allreduce_init 1"]
        );
    }

    #[test]
    fn a_line_too_long_is_cut_to_the_limit() {
        let cut = fit("x".repeat(500));
        assert_eq!(cut.chars().count() + "coll:rdma: ".len(), SUMMARY_MAX_CHARS);
        assert!(cut.ends_with("..."));
        assert_eq!(fit("short".into()), "short");
    }
}
