//! What each rank says about a communicator at verbose level 2 (its rank
//! 0's summary at level 1 is `summary.rs`'s): the paths
//! chosen at setup, the autotunes' plans and outcomes, each kind of
//! hand-over (once), and the summary when the communicator is freed. The
//! same facts go to the structured events (`report_events.rs`), which the
//! served checks of ci/mpi-tests.sh read; the words of these lines are
//! still read by other checks there, by ci/rxe-tests.sh and by the tuner:
//! change none without changing those readers. Nothing here decides
//! anything; it only describes what the state holds.

use btl_ibmc::{Datagrams, Endpoint, MulticastKind, PeerReads};

use super::super::handover::Handover;
use super::super::reduction_call::FoldOrder;
use super::ready::ReadyComm;
use super::report_events::{autotune_event, autotune_plan_event, freed_event, handover_event, trial_table};
use super::tally::{Collective, Tallies};
use super::CommId;
use crate::collectives::allreduce::autotune::{trial_bytes, DegreeOutcome};
use crate::collectives::barrier::autotune::TrialOutcome;
use crate::collectives::bcast::Bcast;
use crate::collectives::large_reduction::read_tree::ReadTree;

/// The setup's and the autotunes' reports, from the ready state they
/// describe.
impl ReadyComm {
    /// Says at verbose level 2 which allreduce and reduce lengths are
    /// reduced in parallel, or why none are.
    pub(super) fn report_parallel_reduction(&self) {
        let transport = &self.transport;
        let from = [("allreduce", self.allreduce.parallel().min_bytes()), ("reduce", self.reduce.parallel().min_bytes())];
        for (name, from) in from {
            if transport.reads_peer_memory() && from != usize::MAX {
                let lengths = if name == "allreduce" { self.limits.allreduce_ring } else { self.limits.reduce_ring };
                let shorter = match lengths.from.filter(|&ring_from| ring_from < from) {
                    Some(ring_from) => format!(
                        "from {ring_from} bytes commutative ops go around a ring of {}-byte slots, shorter ones (and the others) through the window",
                        self.ring.segment_bytes()
                    ),
                    None => "shorter ones through the window".to_string(),
                };
                tracing::info!(
                    "comm {} rank {}: {name} of {from} bytes or more reduced in parallel (each rank reduces its slice of every \
                     rank's input, read with process_vm_readv, and writes it into the gathering ranks' buffers with process_vm_writev) at any length; {shorter}",
                    self.id.cid,
                    self.id.rank
                );
                let workers = self.reduce.parallel().workers();
                if name == "reduce" && workers < self.id.size {
                    tracing::info!(
                        "comm {} rank {}: allreduce and reduce slices held by {workers} of the {} ranks at most (the job's ranks \
                         outnumber the {workers} cores of its node; the others announce their buffers and wait)",
                        self.id.cid,
                        self.id.rank,
                        self.id.size
                    );
                }
                if name == "reduce" {
                    let slices_from = self.reduce.parallel().slices_min_bytes();
                    let unsplit = if self.id.size >= ReadTree::MIN_RANKS {
                        "shorter ones go down a binomial tree of reads (each rank reads its children's partial results with \
                         process_vm_readv and folds them, so the root reads about log2 of the ranks) where the op is commutative \
                         or the root is rank 0, and otherwise the root reduces alone (it reads every rank's input and folds it)"
                    } else {
                        "shorter ones the root reduces alone (it reads every rank's input with process_vm_readv and folds it)"
                    };
                    tracing::info!(
                        "comm {} rank {}: of those, reduce of {} split into slices; {unsplit}",
                        self.id.cid,
                        self.id.rank,
                        if slices_from == usize::MAX { "no length".to_string() } else { format!("{slices_from} bytes or more") }
                    );
                }
            } else {
                tracing::info!(
                    "comm {} rank {}: no parallel {name} ({}): {}",
                    self.id.cid,
                    self.id.rank,
                    if from == usize::MAX {
                        format!("coll_rdma_{name}_parallel_min_bytes is -1")
                    } else {
                        format!("{} cannot read its peers' memory", transport.name())
                    },
                    self.ring_report(name)
                );
            }
        }
    }

    /// Which lengths of `name` (allreduce or reduce) go around the ring
    /// where the parallel reduction cannot serve.
    fn ring_report(&self, name: &str) -> String {
        let lengths = if name == "allreduce" { self.limits.allreduce_ring } else { self.limits.reduce_ring };
        let Some(from) = lengths.from else {
            return format!("{name} keeps the window, up to coll_rdma_{name}_max_bytes for commutative ops (at any length for the others)");
        };
        let up_to = match lengths.up_to {
            Some(up_to) => format!(" up to {up_to} (coll_rdma_udp_ring_max_bytes; longer ones as coll_rdma_{name}_max_bytes says)"),
            None => String::new(),
        };
        format!(
            "{name} of {from} bytes or more{up_to} with a commutative op goes around a ring of {}-byte slots (reduce-scatter, \
             then allgather, each rank putting to the next); shorter ones, and non-commutative ops at any length, through the window's tree",
            self.ring.segment_bytes()
        )
    }

    /// Says at verbose level 2, once per communicator (from its rank 0),
    /// what the barrier autotune will measure, or that there is nothing to
    /// choose from.
    pub(super) fn report_barrier_trial_plan(&self, autotune: bool) {
        if self.id.rank != 0 || !autotune {
            return;
        }
        if self.two_level_barrier.is_some() {
            autotune_plan_event(self.id, Collective::Barrier, "two-level", &[]);
            tracing::info!("comm {} rank 0: barrier autotune: not run, the two-level barrier serves this communicator", self.id.cid);
            return;
        }
        match self.barrier.trial() {
            Some(_) => autotune_plan_event(self.id, Collective::Barrier, "trial", &self.barrier.candidates()),
            None => autotune_plan_event(self.id, Collective::Barrier, "nothing to measure", &[self.barrier.radix()]),
        }
        match self.barrier.trial() {
            Some(trial) => tracing::info!(
                "comm {} rank 0: barrier autotune: radices {:?} in turn over the next {} barrier(s) ({} each), then one allreduce \
                 of {} bytes to agree",
                self.id.cid,
                self.barrier.candidates(),
                trial.total_calls(),
                trial.total_calls() / self.barrier.candidates().len(),
                (2 * self.barrier.candidates().len() + 1) * 8
            ),
            None => tracing::info!(
                "comm {} rank 0: barrier autotune: nothing to measure, radix {} is the only useful one for {} ranks",
                self.id.cid,
                self.barrier.radix(),
                self.id.size
            ),
        }
    }

    /// Says at verbose level 2, once per communicator (from its rank 0),
    /// what the allreduce degree autotune will measure, or why nothing;
    /// `setup.rs` has dropped the trial where the two-level tree serves.
    pub(super) fn report_allreduce_trial_plan(&self, autotune: bool) {
        if self.id.rank != 0 || !autotune {
            return;
        }
        let cid = self.id.cid;
        if self.allreduce.is_two_level() {
            autotune_plan_event(self.id, Collective::Allreduce, "two-level", &[]);
            tracing::info!("comm {cid} rank 0: allreduce autotune: not run, the two-level tree serves this communicator");
            return;
        }
        let config = self.allreduce.config();
        match &self.allreduce_trial {
            Some(trial) => autotune_plan_event(self.id, Collective::Allreduce, "trial", trial.degrees()),
            None => autotune_plan_event(self.id, Collective::Allreduce, "nothing to measure", &[config.tree.degree]),
        }
        match &self.allreduce_trial {
            Some(trial) => tracing::info!(
                "comm {cid} rank 0: allreduce autotune: degrees {:?} (those whose tree fits the window's {} slot ring(s)) in turn over \
                 {} trial allreduce(s) ({} each, a barrier before each) of the first tree-served call's length (above {} bytes, at most \
                 {} bytes), run before that call, then one allreduce of {} bytes to agree",
                trial.degrees(),
                self.allreduce.reserved_rings(),
                trial.total_calls(),
                trial.total_calls() / trial.degrees().len(),
                config.exchange_max_bytes,
                trial_bytes(usize::MAX, config.exchange_max_bytes, config.tree.segment_bytes),
                trial.summary_words() * 8
            ),
            None => tracing::info!(
                "comm {cid} rank 0: allreduce autotune: nothing to measure, degree {} is the only tree the window holds for {} ranks",
                config.tree.degree,
                self.id.size
            ),
        }
    }

    /// Says at verbose level 2 what the allreduce autotune measured and
    /// chose: the table from rank 0, the choice from every rank.
    pub(in crate::glue) fn report_allreduce_trial(&self, outcome: &DegreeOutcome, agreement_ns: u64) {
        let cid = self.id.cid;
        autotune_event(self.id, Collective::Allreduce, "degree", outcome.degree(), || {
            let rows = outcome.rows.iter().map(|row| (row.degree, row.steps, row.median_ns, row.max_ns));
            trial_table(rows, outcome.calls_per_candidate)
        });
        if self.id.rank == 0 {
            tracing::info!(
                "comm {cid} rank 0: allreduce autotune table ({} ranks, {} call(s) of {} bytes per degree; slowest rank's median and longest call):",
                self.id.size,
                outcome.calls_per_candidate,
                outcome.message_bytes
            );
            let rows = outcome.rows.iter().map(|row| (row.degree, row.steps, row.median_ns, row.max_ns));
            log_trial_rows(cid, "allreduce autotune   degree", "step(s)", rows, outcome.winner);
        }
        tracing::info!(
            "comm {cid} rank {}: allreduce autotune chose degree {} ({} step(s)); cost: {} trial allreduce(s) of {} bytes taking {:.1} us \
             on the slowest rank, {} barrier(s) between degrees, and one allreduce ({:.1} us here)",
            self.id.rank,
            outcome.degree(),
            outcome.rows[outcome.winner].steps,
            outcome.trial_calls(),
            outcome.message_bytes,
            outcome.trial_ns as f64 / 1000.0,
            outcome.barriers,
            agreement_ns as f64 / 1000.0
        );
    }

    /// Says at verbose level 2 what the barrier autotune measured and
    /// chose: the table once per communicator (from its rank 0; every rank
    /// holds the same agreed figures), the choice from every rank.
    pub(in crate::glue) fn report_barrier_trial(&self, outcome: &TrialOutcome, agreement_ns: u64) {
        let cid = self.id.cid;
        autotune_event(self.id, Collective::Barrier, "radix", outcome.radix(), || {
            let rows = outcome.rows.iter().map(|row| (row.radix, row.rounds, row.median_ns, row.max_ns));
            trial_table(rows, outcome.calls_per_candidate)
        });
        if self.id.rank == 0 {
            tracing::info!(
                "comm {cid} rank 0: barrier autotune table ({} ranks, {} call(s) per radix; slowest rank's median and longest call):",
                self.id.size,
                outcome.calls_per_candidate
            );
            let rows = outcome.rows.iter().map(|row| (row.radix, row.rounds, row.median_ns, row.max_ns));
            log_trial_rows(cid, "barrier autotune   radix", "round(s)", rows, outcome.winner);
        }
        tracing::info!(
            "comm {cid} rank {}: barrier autotune chose radix {} ({} round(s)); cost: {} trial barrier(s) taking {:.1} us on the slowest \
             rank, about {:.1} us more than radix {} throughout, and one allreduce ({:.1} us here)",
            self.id.rank,
            outcome.radix(),
            outcome.rows[outcome.winner].rounds,
            outcome.rows.len() * outcome.calls_per_candidate,
            outcome.trial_ns as f64 / 1000.0,
            outcome.excess_ns() as f64 / 1000.0,
            outcome.radix(),
            agreement_ns as f64 / 1000.0
        );
    }

    /// Says at verbose level 2 which path serves which bcast lengths.
    pub(super) fn report_bcast_paths(&self, window_limit: &str) {
        let transport = &self.transport;
        let window = match transport.multicast_kind() {
            MulticastKind::None => "down the put tree",
            MulticastKind::SharedWindow => "through the window (copy in, copy out)",
            MulticastKind::Datagram => "by multicast through the sliding window",
        };
        let from = self.bcast.config().single_copy_min_bytes;
        if !transport.reads_peer_memory() || from == usize::MAX {
            tracing::info!("comm {} rank {}: bcast of any length {window}, {window_limit}", self.id.cid, self.id.rank);
            return;
        }
        let up_to = match self.limits.bcast_single_copy_max_bytes {
            Some(limit) => format!("up to {limit} bytes (coll_rdma_bcast_single_copy_max_bytes; longer ones to the module underneath)"),
            None => "at any length".to_string(),
        };
        tracing::info!(
            "comm {} rank {}: bcast of {from} bytes or more in one copy (receivers read the root's buffer with process_vm_readv), \
             {up_to}; shorter ones {window}, {window_limit}",
            self.id.cid,
            self.id.rank
        );
    }
}

/// The (collective, reason category, fold order) hand-overs already
/// reported, so that a loop of handed-over calls says why once, not every
/// time (a handful at most).
#[derive(Default)]
pub(super) struct HandoverReports {
    reported: Vec<(Collective, &'static str, FoldOrder)>,
}

impl HandoverReports {
    /// Says why a call goes to the module underneath, once per kind of
    /// reason (and every time at debug level). With a non-commutative op the
    /// result is right only if the module underneath keeps the rank order,
    /// which coll rdma cannot check, so the report says so, under its own
    /// category (also after the same reason was given for commutative ops).
    /// True where this was the first time, said at verbose level 2.
    pub(super) fn report(&mut self, id: CommId, collective: Collective, why: &Handover, order: FoldOrder) -> bool {
        let name = collective.name();
        let caveat = match order {
            FoldOrder::Any => "",
            FoldOrder::Canonical => {
                "; the op is not commutative, and the module underneath may not fold it in rank order \
                 (then the result is not the one MPI defines)"
            }
        };
        let key = (collective, why.category(), order);
        let first = !self.reported.contains(&key);
        if first {
            self.reported.push(key);
            handover_event(id, collective, why, order);
            tracing::info!("comm {} rank {}: {name} handed to the module underneath: {why}{caveat}", id.cid, id.rank);
            // Whether the result is the one MPI defines is the user's to
            // know at level 1 too (every rank hands the same calls over).
            if order == FoldOrder::Canonical && id.rank == 0 {
                tracing::info!(
                    target: super::super::output::SUMMARY,
                    "comm {}: {name} with a non-commutative op handed to the module underneath ({}): right only if it folds in rank order",
                    id.cid,
                    why.category()
                );
            }
        } else {
            tracing::debug!("comm {} rank {}: {name} handed to the module underneath: {why}{caveat}", id.cid, id.rank);
        }
        first
    }
}

/// Says, before the closing steps, that a failed call made teardown skip
/// them.
pub(super) fn report_closing_skipped(id: CommId, tallies: &Tallies) {
    if tallies.has_failed() {
        tracing::info!(
            "comm {} rank {}: a call failed earlier, so the protocols' closing steps are skipped; {} later call(s) \
             went to the module underneath (not in the counts below)",
            id.cid,
            id.rank,
            tallies.handed_over_after_failure()
        );
    }
}

/// The summary when the communicator is freed: what its bcast multicast
/// did (where it ran) and what each collective served over `transport`.
pub(super) fn report_summary(id: CommId, transport: &str, bcast: Option<&Bcast>, tallies: &Tallies) {
    freed_event(id, transport, bcast, tallies);
    if let Some(bcast) = bcast {
        report_multicast(id, bcast);
    }
    for (collective, tally) in tallies.reported() {
        tracing::info!(
            "comm {} rank {}: served {} {}(s) over {transport}, {} handed to the fallback",
            id.cid,
            id.rank,
            tally.served,
            collective.name(),
            tally.handed_over
        );
    }
}

fn report_multicast(id: CommId, bcast: &Bcast) {
    let multicast = bcast.stats();
    if multicast.pieces_sent + multicast.pieces_delivered + multicast.frames_rejected == 0 {
        return;
    }
    tracing::info!(
        "comm {} rank {}: bcast multicast: {} piece(s) sent, {} delivered, {} retransmitted, {} NACK(s) sent, \
         {} duplicate(s) dropped, {} window-full stall(s), {} foreign or malformed frame(s) rejected, {} overrun(s)",
        id.cid,
        id.rank,
        multicast.pieces_sent,
        multicast.pieces_delivered,
        multicast.retransmissions,
        multicast.nacks_sent,
        multicast.duplicates_dropped,
        multicast.window_full_stalls,
        multicast.frames_rejected,
        multicast.overruns
    );
    if multicast.nack_first_asks + multicast.nacks_served + multicast.timeout_resends > 0 {
        tracing::info!(
            "comm {} rank {}: bcast repair: {} first NACK(s) waiting {:.2} round trip(s) on average, {} NACK(s) repeated \
             unanswered (the longest after {} us; {} held back, the channel to a collector away from MPI full), {} served, {} timeout burst(s) (the longest timeout {} us; {} piece(s) \
             held back, the channel to a member away from MPI full)",
            id.cid,
            id.rank,
            multicast.nack_first_asks,
            multicast.nack_wait_rtt_percent as f64 / 100.0 / multicast.nack_first_asks.max(1) as f64,
            multicast.nacks_repeated,
            multicast.longest_nack_repeat_micros,
            multicast.nack_repeats_held_back,
            multicast.nacks_served,
            multicast.timeout_resends,
            multicast.longest_timeout_resend_micros,
            multicast.resends_held_back
        );
    }
    if multicast.cwnd > 0 {
        tracing::info!(
            "comm {} rank {}: bcast congestion control: window {} fragment(s) now, retransmission timeout {} us, \
             {} loss event(s), {} loss report(s) tolerated, {} timeout collapse(s), {} acker switch(es), {} NACK(s) suppressed, \
             {} repair(s) multicast",
            id.cid,
            id.rank,
            multicast.cwnd,
            multicast.rto_micros,
            multicast.loss_events,
            multicast.losses_tolerated,
            multicast.timeout_collapses,
            multicast.acker_switches,
            multicast.nacks_suppressed,
            multicast.repairs_multicast
        );
    }
}

/// An autotune's agreed table, one line per candidate (from rank 0):
/// `candidate` says what is tried ("barrier autotune   radix"), each row
/// gives its value, its step count (`steps`, e.g. "round(s)"), and the
/// slowest rank's median and longest call in nanoseconds.
fn log_trial_rows(cid: u32, candidate: &str, steps: &str, rows: impl Iterator<Item = (usize, usize, u64, u64)>, winner: usize) {
    for (index, (value, step_count, median_ns, max_ns)) in rows.enumerate() {
        tracing::info!(
            "comm {cid} rank 0: {candidate} {value:>2}, {step_count} {steps}: median {:>9.2} us, max {:>9.2} us{}",
            median_ns as f64 / 1000.0,
            max_ns as f64 / 1000.0,
            if index == winner { "  <- chosen" } else { "" }
        );
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_hand_over_is_said_once_per_collective_and_fold_order() {
        let id = CommId { cid: 3, rank: 1, size: 4 };
        let mut reports = HandoverReports::default();
        let above = |bytes| Handover::AboveLimit { bytes, parameter: "allreduce_max_bytes", limit: 8192 };
        let said: Vec<bool> = [
            (Collective::Allreduce, above(9000), FoldOrder::Any),
            // Another length above the same limit: the same kind of reason.
            (Collective::Allreduce, above(1 << 20), FoldOrder::Any),
            (Collective::Allreduce, above(9000), FoldOrder::Canonical),
            (Collective::Reduce, above(9000), FoldOrder::Any),
            (Collective::Allreduce, Handover::TransportUnavailable, FoldOrder::Any),
            (Collective::Allreduce, Handover::TransportUnavailable, FoldOrder::Any),
        ]
        .into_iter()
        .map(|(collective, why, order)| reports.report(id, collective, &why, order))
        .collect();
        assert_eq!(said, [true, false, true, true, true, false]);
    }
}
