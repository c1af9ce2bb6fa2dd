//! The settings every rank must share for the protocols to meet: the same
//! barrier radix, tree degrees, segment and slot sizes, bcast window,
//! size limits (each decides between our path and the module underneath),
//! transport choice... Each rank may read different MCA parameters (per-rank
//! environment, files, MPMD launches), so the first collective call on a
//! communicator gathers every rank's values before any protocol runs; on a
//! difference every rank hands over, and the message names what differs.

use std::fmt::Write as _;

use btl_ibmc::{Exchange, TransportError};

use crate::collectives::allreduce::AllreduceConfig;
use crate::collectives::bcast::BcastConfig;
use crate::patterns::TreeStreamConfig;

use super::params::{Hierarchy, Settings, TransportChoice, WindowLimit};

/// What a communicator's protocols are built from, as its setup computed it.
pub(super) struct ProtocolInputs<'a> {
    pub settings: &'a Settings,
    pub size: usize,
    pub barrier_radix: usize,
    /// The radices the barrier region holds (several when autotuning).
    pub barrier_candidates: &'a [usize],
    pub allreduce: &'a AllreduceConfig,
    pub reduce: &'a TreeStreamConfig,
    pub bcast: &'a BcastConfig,
    pub window_len: usize,
    /// Ranks that hold a slice of a parallel reduction at most.
    pub parallel_workers: usize,
}

/// The effective value of every protocol-changing setting, each named by
/// the parameter that sets it (a model's choice counts: two ranks with
/// different model parameters may choose different radices).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ProtocolSettings {
    values: Vec<(&'static str, u64)>,
}

/// A protection as its place in `Protection::ALL`.
fn protection_index(protection: btl_ibmc::Protection) -> u64 {
    btl_ibmc::Protection::ALL.iter().position(|&known| known == protection).unwrap_or(usize::MAX) as u64
}

/// A limit of `None` (never hand over) as a value no limit reaches.
fn limit(max_bytes: Option<usize>) -> u64 {
    max_bytes.map_or(u64::MAX, |bytes| bytes as u64)
}

/// The automatic choice and "never" as values no byte count reaches; every
/// rank with the same setting and transport reaches the same modelled limit.
fn window_limit(setting: WindowLimit) -> u64 {
    match setting {
        WindowLimit::Modelled => MODELLED,
        WindowLimit::Never => u64::MAX,
        WindowLimit::Bytes(bytes) => bytes as u64,
    }
}

/// Radices 1..=64 (MAX_BARRIER_RADIX) as one word.
fn radix_mask(radices: &[usize]) -> u64 {
    radices.iter().fold(0, |mask, &radix| mask | 1u64.checked_shl((radix as u32).saturating_sub(1)).unwrap_or(0))
}

/// How `window_limit` records the automatic choice (shown as -2, its value).
const MODELLED: u64 = u64::MAX - 1;

impl ProtocolSettings {
    pub(super) fn of(inputs: &ProtocolInputs) -> Self {
        let settings = inputs.settings;
        let multicast = &inputs.bcast.multicast;
        let transport = match settings.transport {
            TransportChoice::Auto => 0,
            TransportChoice::Shm => 1,
            TransportChoice::Verbs => 2,
            TransportChoice::Udp => 3,
        };
        let udp = &settings.udp;
        let two_level_input = |value: u64| if settings.hierarchy == Hierarchy::Auto { value } else { 0 };
        let values = vec![
            ("communicator size", inputs.size as u64),
            ("coll_rdma_transport (0 auto, 1 shm, 2 verbs, 3 udp)", transport),
            // A build without verbs skips the verbs setup that `auto` runs
            // across nodes: ranks of both kinds would meet in different
            // exchanges.
            ("verbs support built in (1 yes)", u64::from(cfg!(feature = "verbs"))),
            ("coll_rdma_verbs_multicast", settings.verbs.multicast as u64),
            ("coll_rdma_verbs_protection (0 encrypt, 1 authenticate, 2 none)", protection_index(settings.verbs.protection)),
            ("coll_rdma_hierarchy (0 auto, 1 flat)", match settings.hierarchy {
                Hierarchy::Auto => 0,
                Hierarchy::Flat => 1,
            }),
            ("coll_rdma_test_pretend_nodes", settings.verbs.pretend_nodes.max(1) as u64),
            // Which pairs connect decides which queue pairs a rank creates
            // and names in its setup record.
            ("coll_rdma_hierarchy_queue_pairs_max (-1 every pair), with coll_rdma_hierarchy auto", two_level_input(limit(settings.verbs.queue_pairs_max))),
            // Not coll_rdma_udp_interface: it names this host's interface.
            ("coll_rdma_udp_group_base (address)", u64::from(u32::from(udp.group_base))),
            ("coll_rdma_udp_group_base (prefix length)", u64::from(udp.group_prefix_len)),
            ("coll_rdma_udp_port_range (first)", u64::from(udp.port_base)),
            ("coll_rdma_udp_port_range (ports)", u64::from(udp.port_count)),
            ("coll_rdma_udp_ttl", u64::from(udp.ttl)),
            // 0: fitted to each rank's MTU, agreed at setup (the least).
            ("coll_rdma_udp_fragment_bytes", udp.datagram_bytes.unwrap_or(0) as u64),
            ("coll_rdma_udp_cwnd_initial", udp.cwnd_initial as u64),
            ("coll_rdma_udp_ssthresh_initial", udp.ssthresh_initial as u64),
            ("coll_rdma_udp_window", udp.window_slots as u64),
            ("coll_rdma_udp_ack_interval", udp.ack_interval as u64),
            ("coll_rdma_test_udp_loss_percent", u64::from(udp.loss_percent)),
            ("coll_rdma_test_udp_duplicate_percent", u64::from(udp.duplicate_percent)),
            ("coll_rdma_test_udp_reorder_percent", u64::from(udp.reorder_percent)),
            ("coll_rdma_barrier_radix", inputs.barrier_radix as u64),
            // A two-level barrier's leaders choose their radix later, for
            // their own count, from the setting and the model: two ranks
            // whose flat radices agree could still pick different leader
            // schedules (and wait for ever), so with hierarchy auto the
            // inputs themselves must agree too.
            ("coll_rdma_barrier_radix as set (0 automatic), with coll_rdma_hierarchy auto", two_level_input(settings.barrier_radix.unwrap_or(0) as u64)),
            ("coll_rdma_model_latency_ns, with coll_rdma_hierarchy auto", two_level_input(settings.model.latency_ns.round() as u64)),
            ("coll_rdma_model_put_gap_ns, with coll_rdma_hierarchy auto", two_level_input(settings.model.put_gap_ns.round() as u64)),
            ("coll_rdma_autotune_calls (0: coll_rdma_autotune off)", settings.autotune_calls.unwrap_or(0) as u64),
            ("barrier radices in the window (bit r-1 for radix r)", radix_mask(inputs.barrier_candidates)),
            ("coll_rdma_allreduce_degree", inputs.allreduce.tree.degree as u64),
            ("coll_rdma_allreduce_segment_size", inputs.allreduce.tree.segment_bytes as u64),
            ("coll_rdma_allreduce_exchange_max", inputs.allreduce.exchange_max_bytes as u64),
            ("coll_rdma_allreduce_max_bytes", limit(settings.allreduce.max_bytes)),
            ("coll_rdma_allreduce_parallel_min_bytes", limit(settings.allreduce.parallel_min_bytes)),
            ("coll_rdma_allreduce_ring_min_bytes", limit(settings.allreduce.ring_min_bytes)),
            ("coll_rdma_reduce_degree", inputs.reduce.degree as u64),
            ("coll_rdma_reduce_segment_size", inputs.reduce.segment_bytes as u64),
            ("coll_rdma_reduce_max_bytes", limit(settings.reduce.max_bytes)),
            ("coll_rdma_reduce_parallel_min_bytes", limit(settings.reduce.parallel_min_bytes)),
            ("coll_rdma_reduce_ring_min_bytes", limit(settings.reduce.ring_min_bytes)),
            ("coll_rdma_ring_segment_size", settings.ring_segment_bytes as u64),
            ("coll_rdma_udp_ring_max_bytes", limit(settings.udp_ring_max_bytes)),
            ("coll_rdma_reduce_parallel_slices_min_bytes", limit(settings.reduce.parallel_slices_min_bytes)),
            ("coll_rdma_window_max_mib", (settings.window_max_bytes >> 20) as u64),
            ("coll_rdma_bcast_window", multicast.window_slots as u64),
            ("coll_rdma_bcast_slot_size", multicast.slot_bytes as u64),
            ("coll_rdma_bcast_fragment_size", multicast.fragment_bytes as u64),
            ("coll_rdma_bcast_co_roots", multicast.co_roots as u64),
            ("coll_rdma_bcast_ack_interval", multicast.ack_interval as u64),
            ("coll_rdma_bcast_timeout_ms", multicast.timeout.as_millis() as u64),
            ("coll_rdma_bcast_nack", multicast.nack as u64),
            ("coll_rdma_bcast_max_bytes", window_limit(settings.bcast.max_bytes)),
            // Resolved: by placement (its default), a communicator mixing
            // two jobs may disagree, and must not bcast two ways.
            ("coll_rdma_bcast_single_copy_min_bytes", inputs.bcast.single_copy_min_bytes as u64),
            ("coll_rdma_bcast_single_copy_max_bytes", limit(settings.bcast.single_copy_max_bytes)),
            ("bcast length served natively", inputs.bcast.substrate_max_bytes as u64),
            // Judged from the job's placement: a communicator mixing two
            // jobs may disagree, and must not run an ibcast two ways.
            ("shortest ibcast on shm multicast through the window (0 where ranks outnumber cores)", inputs.bcast.shared_window_runs_multicast_from as u64),
            ("window length", inputs.window_len as u64),
            ("ranks reducing in parallel (the cores of a node with more ranks)", limit(Some(inputs.parallel_workers))),
        ];
        ProtocolSettings { values }
    }

    /// The fixed-length record this rank contributes: the count, then each value.
    fn record(&self) -> Vec<u8> {
        let mut record = Vec::with_capacity(8 * (self.values.len() + 1));
        record.extend_from_slice(&(self.values.len() as u64).to_le_bytes());
        for (_, value) in &self.values {
            record.extend_from_slice(&value.to_le_bytes());
        }
        record
    }
}

/// `Ok` when every rank's record in `all` equals the first one; otherwise a
/// sentence naming each differing setting with the values seen and the
/// first rank holding each. Every rank sees the same records, so every
/// rank reaches the same verdict.
fn compare(mine: &ProtocolSettings, all: &[u8]) -> Result<(), String> {
    let record_len = 8 * (mine.values.len() + 1);
    let word = |rank: usize, index: usize| {
        let at = rank * record_len + 8 * index;
        u64::from_le_bytes(all[at..at + 8].try_into().expect("8 bytes"))
    };
    let ranks = all.len() / record_len;
    if (0..ranks).any(|rank| word(rank, 0) != mine.values.len() as u64) {
        // Or a rank runs no setup at all: where coll rdma is not selected
        // for the communicator on every rank, that rank's own first
        // non-blocking collective goes to libnbc and meets this exchange
        // there (the first call was non-blocking on every rank, so each
        // side's libnbc matches the other's).
        return Err("ranks run different builds of coll rdma, or some rank does not run coll rdma on this communicator (coll_rdma_priority \
                    or --mca coll set differently per rank): their setup records differ in length"
            .to_string());
    }
    let mut differing = Vec::new();
    for (index, (name, _)) in mine.values.iter().enumerate() {
        let mut seen: Vec<(u64, usize)> = Vec::new();
        for rank in 0..ranks {
            let value = word(rank, index + 1);
            if !seen.iter().any(|&(v, _)| v == value) {
                seen.push((value, rank));
            }
        }
        if seen.len() > 1 {
            let mut text = format!("{name} (");
            for (i, (value, rank)) in seen.iter().enumerate() {
                let shown = match *value {
                    u64::MAX => "-1".to_string(),
                    MODELLED => "-2".to_string(),
                    value => value.to_string(),
                };
                let _ = write!(text, "{}{shown} at rank {rank}", if i > 0 { ", " } else { "" });
            }
            text.push(')');
            differing.push(text);
        }
    }
    if differing.is_empty() {
        Ok(())
    } else {
        Err(format!("ranks differ in settings the protocols must share: {}", differing.join("; ")))
    }
}

/// Gathers every rank's protocol settings (over `size` ranks) and checks
/// they are identical.
pub(super) fn agree_on_protocol(exchange: &dyn Exchange, mine: &ProtocolSettings, size: usize) -> Result<(), String> {
    let record = mine.record();
    let mut all = vec![0u8; record.len() * size];
    exchange.allgather(&record, &mut all).map_err(|why: TransportError| format!("the setup exchange failed: {why}"))?;
    compare(mine, &all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(values: &[(&'static str, u64)]) -> ProtocolSettings {
        ProtocolSettings { values: values.to_vec() }
    }

    fn gathered(records: &[&ProtocolSettings]) -> Vec<u8> {
        records.iter().flat_map(|r| r.record()).collect()
    }

    #[test]
    fn identical_records_agree() {
        let a = settings(&[("coll_rdma_barrier_radix", 2), ("coll_rdma_bcast_window", 64)]);
        assert_eq!(compare(&a, &gathered(&[&a, &a, &a])), Ok(()));
    }

    #[test]
    fn a_difference_names_the_parameter_and_its_values() {
        let a = settings(&[("coll_rdma_barrier_radix", 3), ("coll_rdma_bcast_window", 64), ("coll_rdma_bcast_max_bytes", u64::MAX)]);
        let b = settings(&[("coll_rdma_barrier_radix", 1), ("coll_rdma_bcast_window", 64), ("coll_rdma_bcast_max_bytes", 100)]);
        let why = compare(&a, &gathered(&[&a, &b, &a, &b])).unwrap_err();
        assert!(why.contains("coll_rdma_barrier_radix (3 at rank 0, 1 at rank 1)"), "{why}");
        assert!(why.contains("coll_rdma_bcast_max_bytes (-1 at rank 0, 100 at rank 1)"), "{why}");
        assert!(!why.contains("bcast_window"), "{why}");
        // every rank reaches the same verdict, whichever record is its own
        assert_eq!(compare(&b, &gathered(&[&a, &b, &a, &b])).unwrap_err(), why);
    }

    #[test]
    fn the_modelled_window_limit_shows_as_its_parameter_value() {
        let modelled = settings(&[("coll_rdma_bcast_max_bytes", window_limit(WindowLimit::Modelled))]);
        let never = settings(&[("coll_rdma_bcast_max_bytes", window_limit(WindowLimit::Never))]);
        let fixed = settings(&[("coll_rdma_bcast_max_bytes", window_limit(WindowLimit::Bytes(100)))]);
        let why = compare(&modelled, &gathered(&[&modelled, &never, &fixed])).unwrap_err();
        assert!(why.contains("coll_rdma_bcast_max_bytes (-2 at rank 0, -1 at rank 1, 100 at rank 2)"), "{why}");
    }

    #[test]
    fn records_of_another_build_disagree() {
        let a = settings(&[("coll_rdma_barrier_radix", 2)]);
        let longer = settings(&[("coll_rdma_barrier_radix", 2), ("x", 0)]);
        let mut all = a.record();
        all.extend_from_slice(&longer.record()[..a.record().len()]);
        assert!(compare(&a, &all).unwrap_err().contains("different builds"));
    }
}
