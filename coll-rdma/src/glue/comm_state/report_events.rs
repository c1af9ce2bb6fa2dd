//! What coll rdma records about a communicator as structured events
//! (docs/events.md): the same facts `report.rs` says in words, as fields a
//! program reads. Each function here builds its fields only when events are
//! on (`events::emit` calls the closure then), so with events off none of
//! this costs anything.

use btl_ibmc::{Cipher, Datagrams, PeerReads, Protection};

use super::super::events::{self, bytes_or_null, json, Value};
use super::super::handover::Handover;
use super::super::reduction_call::FoldOrder;
use super::ready::ReadyComm;
use super::tally::{Collective, Tallies};
use super::CommId;
use crate::collectives::bcast::Bcast;
use crate::collectives::large_reduction::ring::RingLengths;

impl ReadyComm {
    /// The agreed plan, once the transport is connected: which transport,
    /// each collective's schedule and the lengths each path serves.
    pub(super) fn report_plan_event(&self, window_bytes: usize) {
        events::emit("comm_ready", self.id.origin(), || {
            let figures = self.figures();
            let reads = self.transport.reads_peer_memory();
            let parallel = |from: usize| if reads { bytes_or_null(from) } else { Value::Null };
            let bcast = self.bcast.config();
            let memory = self.transport.memory_footprint();
            json!({
                "transport": figures.transport,
                "multicast": format!("{:?}", self.transport.multicast_kind()),
                "reads_peer_memory": reads,
                "window_bytes": window_bytes,
                "leaders_only": self.decisions.plan().leaders_only.is_some(),
                "verbs_single_packet_writes": self.transport.verbs_single_packet_writes(),
                "protection": protection_field(self.transport.datagram_protection()),
                "cipher": cipher_field(self.transport.datagram_cipher()),
                "memory": {
                    "total_bytes": figures.memory_bytes,
                    "shm_segment_bytes": memory.shm_segment_bytes,
                    "shm_ranks": memory.shm_ranks,
                    "verbs_queue_pairs": memory.verbs_queue_pairs,
                },
                "barrier": {
                    "radix": figures.barrier_radix,
                    "rounds": self.barrier.rounds(),
                    "two_level": figures.barrier_two_level,
                },
                "allreduce": {
                    "degree": figures.allreduce_degree,
                    "two_level": figures.allreduce_two_level,
                    "max_bytes": self.limits.allreduce_max_bytes,
                    "parallel_min_bytes": parallel(self.allreduce.parallel().min_bytes()),
                    "ring": ring(self.limits.allreduce_ring, self.ring.segment_bytes()),
                },
                "reduce": {
                    "degree": figures.reduce_degree,
                    "max_bytes": self.limits.reduce_max_bytes,
                    "parallel_min_bytes": parallel(self.reduce.parallel().min_bytes()),
                    "slices_min_bytes": parallel(self.reduce.parallel().slices_min_bytes()),
                    "ring": ring(self.limits.reduce_ring, self.ring.segment_bytes()),
                },
                "bcast": {
                    "single_copy_min_bytes": parallel(bcast.single_copy_min_bytes),
                    "single_copy_max_bytes": self.limits.bcast_single_copy_max_bytes,
                    "max_bytes": self.limits.bcast_max_bytes,
                    "put_tree": figures.bcast_put_tree,
                    "window_slots": figures.bcast_window_slots,
                    "slot_bytes": figures.bcast_slot_bytes,
                },
            })
        });
    }
}

/// How the transport's datagrams are sealed, as the parameter that chose
/// it spells the value (`coll_rdma_udp_protection` over udp,
/// `coll_rdma_verbs_protection` for verbs' multicast); null where no
/// datagram crosses a fabric others reach (shared memory, verbs without
/// multicast).
fn protection_field(protection: Option<Protection>) -> Value {
    protection.map_or(Value::Null, |protection| protection.name().into())
}

/// The AEAD that seals those datagrams, as `coll_rdma_udp_cipher` spells
/// it (verbs' multicast is sealed by aes-256-gcm); null where nothing is
/// sealed (no such datagrams, or `protection` none).
fn cipher_field(cipher: Option<Cipher>) -> Value {
    cipher.map_or(Value::Null, |cipher| cipher.name().into())
}

fn ring(lengths: RingLengths, slot_bytes: usize) -> Value {
    match lengths.from {
        Some(from) => json!({ "from_bytes": from, "up_to_bytes": lengths.up_to, "slot_bytes": slot_bytes }),
        None => Value::Null,
    }
}

/// Where the communicator's schedules run on two levels (nodes, then
/// their leaders) or flat, and this rank's place: emitted once per rank
/// when the schedule is chosen.
pub(super) fn hierarchy_event(id: CommId, levels: Value) {
    events::emit("hierarchy", id.origin(), || levels);
}

/// What an autotune will do on this communicator, from its rank 0 (`plan`:
/// `trial` over `candidates`, `nothing to measure`, or `two-level`, which
/// serves without the knob).
pub(super) fn autotune_plan_event(id: CommId, collective: Collective, plan: &str, candidates: &[usize]) {
    events::emit("autotune_plan", id.origin(), || json!({ "collective": collective.name(), "plan": plan, "candidates": candidates }));
}

/// The first hand-over of one kind (collective, reason category, fold
/// order) on a communicator; later ones of that kind are only counted.
pub(super) fn handover_event(id: CommId, collective: Collective, why: &Handover, order: FoldOrder) {
    events::emit("handover", id.origin(), || {
        let mut fields = json!({
            "collective": collective.name(),
            "category": why.category(),
            "reason": why.to_string(),
            "commutative": matches!(order, FoldOrder::Any),
        });
        if let Handover::AboveLimit { parameter, limit, .. } = why {
            fields["limit_parameter"] = format!("coll_rdma_{parameter}").into();
            fields["limit"] = (*limit).into();
        }
        fields
    });
}

/// An autotune's outcome: the value every rank keeps and, from rank 0,
/// the agreed table (`knob` is "radix" or "degree").
pub(super) fn autotune_event(id: CommId, collective: Collective, knob: &str, chosen: usize, table: impl FnOnce() -> Value) {
    events::emit("autotune", id.origin(), || {
        let mut fields = json!({ "collective": collective.name(), "knob": knob, "chosen": chosen });
        if id.rank == 0 {
            fields["table"] = table();
        }
        fields
    });
}

/// The counts when the communicator is freed.
pub(super) fn freed_event(id: CommId, transport: &str, bcast: Option<&Bcast>, tallies: &Tallies) {
    events::emit("comm_freed", id.origin(), || {
        let mut calls = serde_json::Map::new();
        for collective in Collective::ALL {
            let tally = tallies.of(collective);
            calls.insert(collective.name().into(), json!({ "served": tally.served, "handed_over": tally.handed_over }));
        }
        let mut fields = json!({
            "transport": transport,
            "failed": tallies.has_failed(),
            "handed_over_after_failure": tallies.handed_over_after_failure(),
            "agreements_underneath": tallies.agreements_underneath(),
            "calls": calls,
        });
        if let Some(bcast) = bcast {
            let multicast = bcast.stats();
            fields["bcast_multicast"] = json!({
                "pieces_sent": multicast.pieces_sent,
                "pieces_delivered": multicast.pieces_delivered,
                "retransmissions": multicast.retransmissions,
                "nacks_sent": multicast.nacks_sent,
                "frames_rejected": multicast.frames_rejected,
                "overruns": multicast.overruns,
            });
        }
        fields
    });
}

/// An autotune's agreed table as events carry it: one row per candidate
/// (its value, steps, and the slowest rank's median and longest call).
pub(super) fn trial_table(rows: impl Iterator<Item = (usize, usize, u64, u64)>, calls_per_candidate: usize) -> Value {
    let rows: Vec<Value> = rows
        .map(|(value, steps, median_ns, max_ns)| json!({ "value": value, "steps": steps, "median_ns": median_ns, "max_ns": max_ns }))
        .collect();
    json!({ "calls_per_candidate": calls_per_candidate, "rows": rows })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::glue::params::{parse_cipher, parse_protection};

    /// comm_ready's `protection` is what a user sets the parameters to, so
    /// a check compares the two directly: each protection reads back as
    /// itself through both parameters' parser, no two alike, and no
    /// sealed datagrams give null.
    #[test]
    fn the_protection_field_names_the_parameter_value_or_is_null() {
        let mut seen = Vec::new();
        for protection in Protection::ALL {
            let event = json!({ "protection": protection_field(Some(protection)) });
            let text = event["protection"].as_str().unwrap_or_else(|| panic!("{protection:?}: a string in {event}"));
            for parameter in ["coll_rdma_udp_protection", "coll_rdma_verbs_protection"] {
                assert_eq!(parse_protection(parameter, text), Ok(protection), "{parameter}={text}");
            }
            assert!(!seen.contains(&text.to_string()), "{text} names two protections");
            seen.push(text.to_string());
        }
        assert_eq!(seen, ["encrypt", "authenticate", "none"]);
        assert_eq!(json!({ "protection": protection_field(None) }).to_string(), r#"{"protection":null}"#);
    }

    /// comm_ready's `cipher` reads back through the parameter's parser as
    /// the cipher it names, each cipher under its own name.
    #[test]
    fn the_cipher_field_names_the_parameter_value_or_is_null() {
        let texts: Vec<String> = Cipher::ALL
            .into_iter()
            .map(|cipher| {
                let text = cipher_field(Some(cipher)).as_str().map(str::to_string).unwrap_or_else(|| panic!("{cipher:?}: a string"));
                assert_eq!(parse_cipher(&text), Ok(cipher), "{text}");
                text
            })
            .collect();
        assert_eq!(texts, ["aegis-128l", "aes-256-gcm"]);
        assert_eq!(json!({ "cipher": cipher_field(None) }).to_string(), r#"{"cipher":null}"#);
    }
}
