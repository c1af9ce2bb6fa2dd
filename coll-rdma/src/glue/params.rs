//! coll rdma's MCA parameters: the table that declares them (`table`),
//! their registration with Open MPI's variable system (`storage`), the rule
//! each integer follows (`rule`), and their validation into `Settings`,
//! which is what the rest of the component reads. `reference` renders the
//! table as docs/parameters.md (only its tests use it).
//!
//! Invariant: the settings in force are those read at the latest component
//! open. Open MPI registers and opens the component again at each
//! initialisation of a process (every MPI 4 session, then MPI_Init), and
//! the user may change a value in between (the environment, MPI_T), so
//! nothing keeps values from an earlier open: each communicator takes a
//! copy when it is set up, and the process-wide consumers (the output
//! verbosity, the transports' wait policy) are set again at each open.

#[cfg(test)]
mod reference;
mod rule;
mod storage;
mod table;
mod udp;

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use tuning::{AllreduceModel, BarrierModel};

use crate::select::Collective;
pub use storage::register;
pub use udp::UdpSettings;
#[cfg(test)]
pub(super) use udp::{parse_cipher, parse_protection};
pub use crate::select::policy::{BcastSettings, ReductionSettings, SingleCopyFrom, WindowLimit};
use storage::read_raw;
use table::{Id, Kind, COUNT, TABLE};

/// Which transport the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportChoice {
    /// Shared memory when every rank is on one node, else verbs, else udp.
    Auto,
    Shm,
    /// Verbs between every pair of ranks, node-local ones included (tests
    /// the verbs path on one machine).
    Verbs,
    /// UDP multicast and unicast between every pair of ranks, node-local
    /// ones included.
    Udp,
}

/// How collectives are scheduled across nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    /// Two levels where the transport tells node-local peers from remote
    /// ones (the hybrid) and the communicator spans nodes; flat otherwise.
    Auto,
    /// One schedule over all ranks everywhere.
    Flat,
}

/// Which RDMA device and port the verbs transport uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerbsSettings {
    /// `None`: the first device with an active port.
    pub device: Option<String>,
    pub port: u8,
    /// `None`: a RoCE v2 IPv4 GID if the port has one, else index 0.
    pub gid_index: Option<u32>,
    /// Join a UD multicast group for bcast; without it bcast goes down a
    /// tree of RDMA writes.
    pub multicast: bool,
    /// Testing: each host's ranks act as this many nodes (blocks of
    /// consecutive ranks), so that one machine runs shared memory within
    /// the blocks and verbs between them. 0 = the real placement.
    pub pretend_nodes: usize,
    /// With two-level schedules, the most queue pairs a rank may hold
    /// across nodes before only leaders connect; `None`: every pair.
    pub queue_pairs_max: Option<usize>,
    /// How UD multicast datagrams are sealed.
    pub protection: btl_ibmc::Protection,
}

/// Validated parameter values.
#[derive(Clone, Debug)]
pub struct Settings {
    pub priority: i32,
    pub transport: TransportChoice,
    pub hierarchy: Hierarchy,
    pub verbs: VerbsSettings,
    pub udp: UdpSettings,
    /// `None`: choose per communicator from the model.
    pub barrier_radix: Option<usize>,
    /// `None`: spin only when the node is not oversubscribed.
    pub spin_polls: Option<u32>,
    pub stall_warning: Duration,
    /// `None`: a wait never gives up.
    pub fault_timeout: Option<Duration>,
    pub model: BarrierModel,
    /// `Some(calls per candidate)`: measure the barrier radices around the
    /// model's pick on each communicator's first barriers and keep the
    /// fastest (only where the radix is not fixed).
    pub autotune_calls: Option<usize>,
    pub pretend_running_version: Option<String>,
    /// Testing: pretend the running Open MPI's module class has this size.
    pub pretend_module_class_size: Option<usize>,
    pub test_faults: TestFaults,
    pub allreduce: ReductionSettings,
    pub reduce: ReductionSettings,
    pub reduction_model: AllreduceModel,
    /// Bytes per slot of the ring allreduce and reduce share.
    pub ring_segment_bytes: usize,
    /// On udp, longer messages do not go around the ring; `None`: no bound.
    pub udp_ring_max_bytes: Option<usize>,
    /// The largest window a communicator may take on each rank
    /// (`coll_rdma_window_max_mib`); a larger one is not served.
    pub window_max_bytes: usize,
    pub bcast: BcastSettings,
}

/// Testing only: faults injected to exercise the recovery paths.
#[derive(Clone, Copy, Debug, Default)]
pub struct TestFaults {
    /// Panic inside this collective's n-th call (1-based) on a communicator.
    pub panic_at: Option<(Collective, u64)>,
    /// The first thread of communicator rank 1 in this collective's n-th
    /// call stops there for good (see `comm_state::stop_this_thread`).
    pub thread_stop_at: Option<(Collective, u64)>,
    /// The n-th packing bcast root of a communicator fails to pack.
    pub pack_failure_at: Option<u64>,
    /// Every rank but 0 pauses this long between agreeing on the settings
    /// and setting up the transport (rank 0 waits there with its segment).
    pub setup_pause: Option<Duration>,
    /// Packing roots seen so far (per communicator: each state has a copy).
    pub packs_seen: u64,
}

/// "bcast:3" as (Bcast, 3), for the testing-only `parameter`; `None`
/// (with a warning) when malformed.
fn collective_call_setting(parameter: &str, text: &str) -> Option<(Collective, u64)> {
    if text.is_empty() {
        return None;
    }
    let parsed = text.split_once(':').and_then(|(name, calls)| {
        let collective = Collective::ALL.into_iter().find(|c| c.name() == name.trim())?;
        let calls = calls.trim().parse::<u64>().ok().filter(|&n| n >= 1)?;
        Some((collective, calls))
    });
    if parsed.is_none() {
        tracing::warn!("coll_rdma_{parameter}=\"{text}\" is invalid (COLLECTIVE:N, e.g. allreduce:3); nothing is injected");
    }
    parsed
}

/// `coll_rdma_bcast_single_copy_min_bytes` as set: `None` by placement,
/// negative never, otherwise bytes.
fn single_copy_from(choice: Option<i32>) -> SingleCopyFrom {
    match choice {
        None => SingleCopyFrom::Placement,
        Some(bytes) if bytes >= 0 => SingleCopyFrom::Bytes(bytes as usize),
        Some(_) => SingleCopyFrom::Never,
    }
}

/// `coll_rdma_bcast_max_bytes` as set: `None` the model chooses, negative
/// never, otherwise bytes.
fn window_limit_of(choice: Option<i32>) -> WindowLimit {
    match choice {
        None => WindowLimit::Modelled,
        Some(bytes) if bytes >= 0 => WindowLimit::Bytes(bytes as usize),
        Some(_) => WindowLimit::Never,
    }
}

static CURRENT: RwLock<Option<Arc<Settings>>> = RwLock::new(None);

#[derive(Clone, Debug)]
enum RawValue {
    Int(i32),
    Text(String),
}

/// Raw values as the user set them, before validation, one per row of the
/// table.
pub struct RawParams {
    values: Vec<RawValue>,
}

impl RawParams {
    /// Every parameter at its default.
    pub fn defaults() -> Self {
        let values = TABLE
            .iter()
            .map(|param| match param.kind {
                Kind::Int { default, .. } => RawValue::Int(default),
                Kind::Text { default } => RawValue::Text(default.to_string_lossy().into_owned()),
            })
            .collect();
        RawParams { values }
    }

    /// Sets an int parameter (a string parameter keeps its value).
    fn set_int(&mut self, id: Id, value: i32) {
        if let RawValue::Int(slot) = &mut self.values[id as usize] {
            *slot = value;
        }
    }

    /// Sets a string parameter (an int parameter keeps its value).
    fn set_text(&mut self, id: Id, value: String) {
        if let RawValue::Text(slot) = &mut self.values[id as usize] {
            *slot = value;
        }
    }

    fn int(&self, id: Id) -> i32 {
        match &self.values[id as usize] {
            RawValue::Int(value) => *value,
            RawValue::Text(_) => 0,
        }
    }

    fn text(&self, id: Id) -> &str {
        match &self.values[id as usize] {
            RawValue::Text(value) => value,
            RawValue::Int(_) => "",
        }
    }
}

/// The int parameters after their rules, and the strings as they were.
struct Checked {
    ints: [Option<i32>; COUNT],
    raw: RawParams,
}

impl Checked {
    /// Applies each int parameter's rule, warning (in table order) about
    /// each value that was not acceptable and saying what is used instead.
    fn new(raw: RawParams) -> Self {
        let mut ints = [None; COUNT];
        for param in &TABLE {
            if let Kind::Int { default, rule } = param.kind {
                let (checked, warning) = rule.check(param.short_name(), raw.int(param.id), default);
                if let Some(warning) = warning {
                    tracing::warn!("{warning}");
                }
                ints[param.id as usize] = checked;
            }
        }
        Checked { ints, raw }
    }

    /// `None`: the automatic choice, never, or off (as the rule says).
    fn choice(&self, id: Id) -> Option<i32> {
        self.ints[id as usize]
    }

    fn count(&self, id: Id) -> Option<usize> {
        self.choice(id).map(|n| n as usize)
    }

    /// A parameter whose rule always yields a value.
    fn number(&self, id: Id) -> i32 {
        self.choice(id).unwrap_or(match TABLE[id as usize].kind {
            Kind::Int { default, .. } => default,
            Kind::Text { .. } => 0,
        })
    }

    fn text(&self, id: Id) -> &str {
        self.raw.text(id)
    }
}

/// Turns raw values into settings, warning about each invalid one and
/// saying which documented fallback is used instead.
pub fn validate(raw: RawParams) -> Settings {
    let checked = Checked::new(raw);
    let v = &checked;
    Settings {
        priority: v.number(Id::Priority).min(100),
        transport: transport_choice(v.text(Id::Transport)),
        hierarchy: hierarchy(v.text(Id::Hierarchy)),
        verbs: VerbsSettings {
            device: Some(v.text(Id::VerbsDevice).to_string()).filter(|name| !name.is_empty()),
            port: v.number(Id::VerbsPort) as u8,
            gid_index: v.choice(Id::VerbsGidIndex).map(|n| n as u32),
            multicast: v.number(Id::VerbsMulticast) == 1,
            pretend_nodes: v.number(Id::TestPretendNodes) as usize,
            queue_pairs_max: usize::try_from(v.number(Id::HierarchyQueuePairsMax)).ok(),
            protection: udp::parse_protection("coll_rdma_verbs_protection", v.text(Id::VerbsProtection)).unwrap_or_else(|why| {
                tracing::warn!("{why}; using the default");
                btl_ibmc::Protection::default()
            }),
        },
        udp: udp_settings(v),
        barrier_radix: v.count(Id::BarrierRadix),
        spin_polls: v.choice(Id::SpinPolls).map(|n| n as u32),
        // Zero disables the warning: an interval no wait reaches.
        stall_warning: match v.number(Id::StallWarning) {
            0 => Duration::MAX,
            seconds => Duration::from_secs(seconds as u64),
        },
        fault_timeout: match v.number(Id::FaultTimeoutS) {
            0 => None,
            seconds => Some(Duration::from_secs(seconds as u64)),
        },
        model: BarrierModel {
            latency_ns: f64::from(v.number(Id::ModelLatencyNs)),
            put_gap_ns: f64::from(v.number(Id::ModelPutGapNs)),
        },
        autotune_calls: (v.number(Id::Autotune) == 1).then(|| v.number(Id::AutotuneCalls) as usize),
        pretend_running_version: Some(v.text(Id::TestRunningVersion).to_string()).filter(|version| !version.is_empty()),
        pretend_module_class_size: v.count(Id::TestModuleClassSize),
        test_faults: TestFaults {
            panic_at: collective_call_setting("test_panic_at", v.text(Id::TestPanicAt)),
            thread_stop_at: collective_call_setting("test_thread_stop_at", v.text(Id::TestThreadStopAt)),
            pack_failure_at: v.choice(Id::TestPackFailureAt).map(|n| n as u64),
            setup_pause: v.choice(Id::TestSetupPauseS).map(|seconds| Duration::from_secs(seconds as u64)),
            packs_seen: 0,
        },
        allreduce: ReductionSettings {
            degree: v.count(Id::AllreduceDegree),
            segment_bytes: v.number(Id::AllreduceSegmentSize) as usize,
            exchange_max_bytes: v.count(Id::AllreduceExchangeMax),
            max_bytes: v.count(Id::AllreduceMaxBytes),
            parallel_min_bytes: v.count(Id::AllreduceParallelMinBytes),
            ring_min_bytes: v.count(Id::AllreduceRingMinBytes),
            parallel_slices_min_bytes: Some(0),
        },
        reduce: ReductionSettings {
            degree: v.count(Id::ReduceDegree),
            segment_bytes: v.number(Id::ReduceSegmentSize) as usize,
            exchange_max_bytes: Some(0),
            max_bytes: v.count(Id::ReduceMaxBytes),
            parallel_min_bytes: v.count(Id::ReduceParallelMinBytes),
            ring_min_bytes: v.count(Id::ReduceRingMinBytes),
            parallel_slices_min_bytes: v.count(Id::ReduceParallelSlicesMinBytes),
        },
        ring_segment_bytes: v.number(Id::RingSegmentSize) as usize,
        udp_ring_max_bytes: v.count(Id::UdpRingMaxBytes),
        window_max_bytes: (v.number(Id::WindowMaxMib) as usize).saturating_mul(1 << 20),
        reduction_model: AllreduceModel {
            message_latency_ns: f64::from(v.number(Id::ReductionModelLatencyNs)),
            transfer_ns_per_byte: f64::from(v.number(Id::ReductionModelTransferPsPerByte)) / 1000.0,
            reduce_ns_per_byte: f64::from(v.number(Id::ReductionModelCombinePsPerByte)) / 1000.0,
            put_gap_ns: f64::from(v.number(Id::ReductionModelPutGapNs)),
            segment_bytes: AllreduceModel::SHARED_MEMORY.segment_bytes,
        },
        bcast: BcastSettings {
            window_slots: v.number(Id::BcastWindow) as usize,
            slot_bytes: v.number(Id::BcastSlotSize) as usize,
            fragment_bytes: v.number(Id::BcastFragmentSize) as usize,
            co_roots: v.count(Id::BcastCoRoots),
            // Lowered to the window where used (RmcastConfig): no warning.
            ack_interval: v.number(Id::BcastAckInterval) as usize,
            timeout: Duration::from_millis(v.number(Id::BcastTimeoutMs) as u64),
            nack: v.number(Id::BcastNack) == 1,
            tail_repeat: v.number(Id::BcastTailRepeat) as usize,
            parity_percent: v.number(Id::BcastParityPercent) as u32,
            max_bytes: window_limit_of(v.choice(Id::BcastMaxBytes)),
            single_copy_min_bytes: single_copy_from(v.choice(Id::BcastSingleCopyMinBytes)),
            single_copy_max_bytes: v.count(Id::BcastSingleCopyMaxBytes),
            pretend_no_cross_memory: v.number(Id::TestPretendNoCrossMemory) == 1,
        },
    }
}

fn transport_choice(text: &str) -> TransportChoice {
    match text.to_ascii_lowercase().as_str() {
        "auto" | "" => TransportChoice::Auto,
        "shm" => TransportChoice::Shm,
        "verbs" => TransportChoice::Verbs,
        "udp" => TransportChoice::Udp,
        _ => {
            tracing::warn!("coll_rdma_transport=\"{text}\" is unknown (auto, shm, verbs, udp); using auto");
            TransportChoice::Auto
        }
    }
}

fn hierarchy(text: &str) -> Hierarchy {
    match text.to_ascii_lowercase().as_str() {
        "auto" | "" => Hierarchy::Auto,
        "flat" => Hierarchy::Flat,
        _ => {
            tracing::warn!("coll_rdma_hierarchy=\"{text}\" is unknown (auto, flat); using auto");
            Hierarchy::Auto
        }
    }
}

/// The udp parameters; a text that does not parse warns and takes the
/// default (as the integer rules do).
fn udp_settings(v: &Checked) -> UdpSettings {
    fn or_default<T>(parsed: Result<T, String>, default: T) -> T {
        parsed.unwrap_or_else(|why| {
            tracing::warn!("{why}; using the default");
            default
        })
    }
    let defaults = UdpSettings::default();
    let (group_base, group_prefix_len) =
        or_default(udp::parse_group_base(v.text(Id::UdpGroupBase)), (defaults.group_base, defaults.group_prefix_len));
    let (port_base, port_count) = or_default(udp::parse_port_range(v.text(Id::UdpPortRange)), (defaults.port_base, defaults.port_count));
    UdpSettings {
        interface: Some(v.text(Id::UdpInterface).to_string()).filter(|name| !name.is_empty()),
        group_base,
        group_prefix_len,
        port_base,
        port_count,
        ttl: v.number(Id::UdpTtl) as u32,
        datagram_bytes: v.count(Id::UdpFragmentBytes),
        cwnd_initial: v.number(Id::UdpCwndInitial) as usize,
        ssthresh_initial: v.number(Id::UdpSsthreshInitial) as usize,
        window_slots: v.number(Id::UdpWindow) as usize,
        ack_interval: v.number(Id::UdpAckInterval) as usize,
        loss_tolerance_percent: v.number(Id::UdpLossTolerance) as u32,
        repair_backoff: v.number(Id::UdpRepairBackoff) as u32,
        segmentation_offload: v.number(Id::UdpSegmentationOffload) != 0,
        protection: or_default(udp::parse_protection("coll_rdma_udp_protection", v.text(Id::UdpProtection)), defaults.protection),
        cipher: or_default(udp::parse_cipher(v.text(Id::UdpCipher)), defaults.cipher),
        loss_percent: v.number(Id::TestUdpLossPercent) as u32,
        duplicate_percent: v.number(Id::TestUdpDuplicatePercent) as u32,
        reorder_percent: v.number(Id::TestUdpReorderPercent) as u32,
    }
}

/// Reads and validates the parameters as they are now, makes them the
/// settings in force and hands them to the process-wide consumers; called
/// at each component open, so warnings about invalid values print once per
/// initialisation.
pub fn reload() -> Arc<Settings> {
    let raw = read_raw();
    super::output::set_verbosity(raw.int(Id::Verbose).max(0));
    super::events::configure(raw.text(Id::EventsFile));
    let settings = Arc::new(validate(raw));
    // The waits for room in a ring or a send queue have no communicator's
    // policy at hand; they take these.
    btl_ibmc::set_process_wait_policy(&btl_ibmc::WaitPolicy {
        spin_polls: settings.spin_polls.unwrap_or(btl_ibmc::PROCESS_DEFAULT_SPIN_POLLS),
        kernel_spin_polls: settings.spin_polls.unwrap_or(btl_ibmc::KERNEL_DEFAULT_SPIN_POLLS),
        stall_warning: settings.stall_warning,
        fault_timeout: settings.fault_timeout,
    });
    // A panic elsewhere cannot leave the slot half written: it only ever
    // holds a whole Arc, so a poisoned lock is still good to use.
    *CURRENT.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&settings));
    settings
}

/// The settings read at the latest component open (read now if the
/// component was never opened, which Open MPI does before any query).
pub fn current() -> Arc<Settings> {
    let in_force = CURRENT.read().unwrap_or_else(PoisonError::into_inner).clone();
    in_force.unwrap_or_else(reload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_give_the_documented_settings() {
        let settings = validate(RawParams::defaults());
        assert_eq!(settings.priority, 40);
        assert_eq!(settings.transport, TransportChoice::Auto);
        assert_eq!(settings.hierarchy, Hierarchy::Auto);
        assert_eq!(
            settings.verbs,
            VerbsSettings {
                device: None,
                port: 1,
                gid_index: None,
                multicast: true,
                pretend_nodes: 0,
                queue_pairs_max: Some(64),
                protection: btl_ibmc::Protection::Encrypt
            }
        );
        assert_eq!((settings.barrier_radix, settings.spin_polls), (None, None));
        assert_eq!(settings.stall_warning, Duration::from_secs(10));
        assert_eq!(settings.fault_timeout, None);
        assert_eq!(settings.model, BarrierModel::SHARED_MEMORY);
        assert_eq!(settings.autotune_calls, None);
        assert_eq!(settings.reduction_model, AllreduceModel::SHARED_MEMORY);
        assert_eq!(settings.pretend_running_version, None);
        assert_eq!(settings.pretend_module_class_size, None);
        let faults = settings.test_faults;
        assert!(faults.panic_at.is_none() && faults.thread_stop_at.is_none());
        assert!(faults.pack_failure_at.is_none() && faults.setup_pause.is_none());
        let allreduce = settings.allreduce;
        assert_eq!((allreduce.degree, allreduce.segment_bytes, allreduce.exchange_max_bytes), (None, 8192, None));
        assert_eq!((allreduce.max_bytes, allreduce.parallel_min_bytes), (Some(16384), Some(16384)));
        let reduce = settings.reduce;
        assert_eq!((reduce.degree, reduce.segment_bytes, reduce.exchange_max_bytes, reduce.max_bytes), (None, 8192, Some(0), Some(8192)));
        assert_eq!((reduce.parallel_min_bytes, reduce.parallel_slices_min_bytes), (Some(8192), Some(131072)));
        assert_eq!((allreduce.ring_min_bytes, reduce.ring_min_bytes), (Some(16384), Some(8192)));
        assert_eq!((settings.ring_segment_bytes, settings.udp_ring_max_bytes), (65536, Some(262144)));
        let bcast = settings.bcast;
        assert_eq!((bcast.window_slots, bcast.slot_bytes, bcast.fragment_bytes, bcast.co_roots), (64, 4096, 4096, None));
        assert_eq!((bcast.ack_interval, bcast.timeout, bcast.nack, bcast.max_bytes), (8, Duration::from_millis(20), true, WindowLimit::Modelled));
        assert_eq!((bcast.single_copy_min_bytes, bcast.single_copy_max_bytes, bcast.pretend_no_cross_memory), (SingleCopyFrom::Placement, None, false));
        assert_eq!(settings.udp, UdpSettings::default());
        let udp = settings.udp;
        assert_eq!((udp.group_base, udp.group_prefix_len, udp.port_base, udp.port_count), ("239.78.0.0".parse().unwrap(), 16, 24_000, 1000));
        assert_eq!((udp.interface, udp.ttl, udp.datagram_bytes, udp.cwnd_initial, udp.ssthresh_initial), (None, 1, None, 8, 1024));
        assert_eq!((udp.window_slots, udp.ack_interval, udp.segmentation_offload), (1024, 32, true));
        assert_eq!(udp.protection, btl_ibmc::udp::Protection::Encrypt);
        assert_eq!((udp.loss_percent, udp.duplicate_percent, udp.reorder_percent), (0, 0, 0));
    }

    #[test]
    fn udp_parameters_are_read_into_the_udp_settings() {
        let mut raw = RawParams::defaults();
        raw.set_text(Id::Transport, "UDP".to_string());
        raw.set_text(Id::UdpInterface, "eth1".to_string());
        raw.set_text(Id::UdpGroupBase, "239.1.0.0/24".to_string());
        raw.set_text(Id::UdpPortRange, "30000-30009".to_string());
        raw.set_int(Id::UdpTtl, 4);
        raw.set_int(Id::UdpFragmentBytes, 8972);
        raw.set_int(Id::UdpCwndInitial, 2);
        raw.set_int(Id::UdpSsthreshInitial, 16);
        raw.set_int(Id::UdpWindow, 300);
        raw.set_int(Id::UdpAckInterval, 12);
        raw.set_int(Id::UdpLossTolerance, 25);
        raw.set_int(Id::UdpRepairBackoff, 5);
        raw.set_int(Id::UdpSegmentationOffload, 0);
        raw.set_text(Id::UdpProtection, "authenticate".to_string());
        raw.set_text(Id::UdpCipher, "aes-256-gcm".to_string());
        raw.set_int(Id::TestUdpLossPercent, 5);
        raw.set_int(Id::TestUdpDuplicatePercent, 100);
        raw.set_int(Id::TestUdpReorderPercent, 3);
        let settings = validate(raw);
        assert_eq!(settings.transport, TransportChoice::Udp);
        let expected = UdpSettings {
            interface: Some("eth1".to_string()),
            group_base: "239.1.0.0".parse().unwrap(),
            group_prefix_len: 24,
            port_base: 30_000,
            port_count: 10,
            ttl: 4,
            datagram_bytes: Some(8972),
            cwnd_initial: 2,
            ssthresh_initial: 16,
            window_slots: 300,
            ack_interval: 12,
            loss_tolerance_percent: 25,
            repair_backoff: 5,
            segmentation_offload: false,
            protection: btl_ibmc::udp::Protection::Authenticate,
            cipher: btl_ibmc::udp::Cipher::Aes256Gcm,
            loss_percent: 5,
            duplicate_percent: 100,
            reorder_percent: 3,
        };
        assert_eq!(settings.udp, expected);
    }

    #[test]
    fn the_udp_window_parameters_reach_the_bcast_congestion_control() {
        let mut raw = RawParams::defaults();
        raw.set_int(Id::UdpCwndInitial, 3);
        raw.set_int(Id::UdpSsthreshInitial, 40);
        raw.set_int(Id::UdpWindow, 100);
        raw.set_int(Id::UdpAckInterval, 200);
        raw.set_int(Id::UdpLossTolerance, 0);
        raw.set_int(Id::UdpRepairBackoff, 6);
        let settings = validate(raw);
        let (config, _) = super::super::comm_state::bcast_config(&settings.bcast, &settings.udp, 4, btl_ibmc::WaitPolicy::default());
        let congestion = config.multicast.congestion;
        assert_eq!((congestion.cwnd_initial, congestion.ssthresh_initial), (3, 40));
        assert_eq!(congestion.loss_tolerance_percent, 0, "0: every new loss halves, as TCP does");
        assert_eq!(congestion.nack_retry_doublings, Some(6), "the NACK repeat's doublings over udp");
        assert_eq!(settings.udp.config(1, std::net::Ipv4Addr::LOCALHOST, 0).retransmit_doublings, 6, "and the reliable channel's");
        assert_eq!((congestion.window_slots, congestion.ack_interval), (Some(100), Some(100)), "M is lowered to the window");
        // The general window stays what coll_rdma_bcast_window says: shared memory uses it.
        assert_eq!((config.multicast.window_slots, config.multicast.ack_interval), (64, 8));
    }

    #[test]
    fn invalid_udp_parameters_take_their_defaults() {
        let mut raw = RawParams::defaults();
        raw.set_text(Id::UdpGroupBase, "10.0.0.0/8".to_string());
        raw.set_text(Id::UdpPortRange, "9-3".to_string());
        raw.set_int(Id::UdpTtl, 0);
        raw.set_int(Id::UdpFragmentBytes, 65_508);
        raw.set_int(Id::UdpCwndInitial, 0);
        raw.set_int(Id::UdpSsthreshInitial, -4);
        raw.set_int(Id::TestUdpLossPercent, 100);
        raw.set_int(Id::TestUdpDuplicatePercent, -1);
        raw.set_int(Id::TestUdpReorderPercent, 101);
        assert_eq!(validate(raw).udp, UdpSettings::default());
    }

    #[test]
    fn each_invalid_udp_integer_is_named_in_its_warning() {
        let warning = |id: Id, value: i32| {
            let param = &TABLE[id as usize];
            let Kind::Int { default, rule } = param.kind else { unreachable!() };
            rule.check(param.short_name(), value, default).1.unwrap_or_default()
        };
        assert_eq!(warning(Id::UdpTtl, 256), "coll_rdma_udp_ttl=256 is outside 1..=255; using 1");
        assert_eq!(
            warning(Id::UdpFragmentBytes, 255),
            "coll_rdma_udp_fragment_bytes=255 is invalid (0 = automatic, or 256..=65507); using the automatic choice"
        );
        assert_eq!(warning(Id::UdpCwndInitial, 0), "coll_rdma_udp_cwnd_initial=0 is invalid (fragments >= 1); using 8");
        assert_eq!(warning(Id::UdpSsthreshInitial, 0), "coll_rdma_udp_ssthresh_initial=0 is invalid (fragments >= 1); using 1024");
        assert_eq!(warning(Id::TestUdpLossPercent, 100), "coll_rdma_test_udp_loss_percent=100 is outside 0..=99; using 0");
        assert_eq!(warning(Id::TestUdpDuplicatePercent, 101), "coll_rdma_test_udp_duplicate_percent=101 is outside 0..=100; using 0");
        assert_eq!(warning(Id::TestUdpReorderPercent, -1), "coll_rdma_test_udp_reorder_percent=-1 is outside 0..=100; using 0");
        for (id, fine) in [(Id::UdpTtl, 255), (Id::UdpFragmentBytes, 0), (Id::UdpFragmentBytes, 256), (Id::UdpFragmentBytes, 65_507), (Id::TestUdpLossPercent, 99)] {
            assert_eq!(warning(id, fine), "", "{id:?} {fine}");
        }
    }

    #[test]
    fn the_fragment_bounds_are_ones_the_backend_accepts() {
        use btl_ibmc::UdpConfig;
        for bytes in [table::UDP_MIN_DATAGRAM_BYTES as usize, table::UDP_LARGEST_FITTED_DATAGRAM_BYTES, table::UDP_MAX_DATAGRAM_BYTES as usize] {
            assert_eq!(UdpConfig { datagram_bytes: bytes, ..UdpConfig::default() }.problem(), None, "{bytes}");
        }
        let beyond = UdpConfig { datagram_bytes: table::UDP_MAX_DATAGRAM_BYTES as usize + 1, ..UdpConfig::default() };
        assert!(beyond.problem().is_some(), "the backend takes more than the parameter allows");
    }

    #[test]
    fn special_values_mean_automatic_never_or_off() {
        let mut raw = RawParams::defaults();
        raw.set_int(Id::StallWarning, 0);
        raw.set_int(Id::FaultTimeoutS, 0);
        raw.set_int(Id::BcastMaxBytes, -1);
        raw.set_int(Id::BcastSingleCopyMinBytes, -1);
        raw.set_int(Id::BcastCoRoots, 3);
        raw.set_text(Id::Transport, "SHM".to_string());
        raw.set_text(Id::Hierarchy, "Flat".to_string());
        raw.set_text(Id::TestPanicAt, "bcast:3".to_string());
        raw.set_text(Id::TestThreadStopAt, " barrier : 2".to_string());
        let settings = validate(raw);
        assert_eq!(settings.hierarchy, Hierarchy::Flat);
        assert_eq!(hierarchy("two-level"), Hierarchy::Auto);
        assert_eq!(settings.stall_warning, Duration::MAX);
        assert_eq!(settings.fault_timeout, None);
        assert_eq!(settings.bcast.max_bytes, WindowLimit::Never);
        assert_eq!(settings.bcast.single_copy_min_bytes, SingleCopyFrom::Never);
        assert_eq!(settings.bcast.co_roots, Some(3));
        assert_eq!(settings.transport, TransportChoice::Shm);
        assert_eq!(settings.test_faults.panic_at, Some((Collective::Bcast, 3)));
        assert_eq!(settings.test_faults.thread_stop_at, Some((Collective::Barrier, 2)));
    }

    #[test]
    fn invalid_values_take_the_documented_fallback() {
        let mut raw = RawParams::defaults();
        raw.set_int(Id::BarrierRadix, -3);
        raw.set_int(Id::AllreduceExchangeMax, 4097);
        raw.set_int(Id::BcastWindow, 0);
        raw.set_int(Id::FaultTimeoutS, -1);
        raw.set_int(Id::ReductionModelTransferPsPerByte, -1);
        raw.set_int(Id::TestSetupPauseS, -2);
        raw.set_text(Id::Transport, "ethernet".to_string());
        raw.set_text(Id::TestPanicAt, "bcast".to_string());
        raw.set_text(Id::TestThreadStopAt, "barrier:0".to_string());
        raw.set_int(Id::BcastMaxBytes, -5);
        raw.set_int(Id::BcastSingleCopyMinBytes, -3);
        let settings = validate(raw);
        assert_eq!(settings.bcast.max_bytes, WindowLimit::Modelled);
        assert_eq!(settings.bcast.single_copy_min_bytes, SingleCopyFrom::Placement);
        assert_eq!(settings.barrier_radix, None);
        assert_eq!(settings.allreduce.exchange_max_bytes, None);
        assert_eq!(settings.bcast.window_slots, 1);
        assert_eq!(settings.fault_timeout, None);
        assert_eq!(settings.reduction_model.transfer_ns_per_byte, AllreduceModel::SHARED_MEMORY.transfer_ns_per_byte);
        assert_eq!(settings.test_faults.setup_pause, None);
        assert_eq!(settings.transport, TransportChoice::Auto);
        assert_eq!(settings.test_faults.panic_at, None);
        assert_eq!(settings.test_faults.thread_stop_at, None);
    }

    #[test]
    fn autotune_takes_its_calls_per_candidate_only_when_on() {
        let mut raw = RawParams::defaults();
        raw.set_int(Id::AutotuneCalls, 3);
        assert_eq!(validate(raw).autotune_calls, None);
        let mut raw = RawParams::defaults();
        raw.set_int(Id::Autotune, 1);
        assert_eq!(validate(raw).autotune_calls, Some(8));
        let mut raw = RawParams::defaults();
        raw.set_int(Id::Autotune, 1);
        raw.set_int(Id::AutotuneCalls, 0);
        assert_eq!(validate(raw).autotune_calls, Some(8), "an invalid count takes the default");
    }

    #[test]
    fn each_reload_takes_the_values_registered_since_and_only_then() {
        // The only test that writes the registered values or reloads.
        storage::store_int(Id::Priority, 55);
        storage::store_int(Id::Verbose, 2);
        reload();
        assert_eq!((current().priority, super::super::output::verbosity()), (55, 2));
        storage::store_int(Id::Priority, -1);
        storage::store_int(Id::Verbose, 0);
        assert_eq!(current().priority, 55, "a value registered later waits for the next open");
        reload();
        assert_eq!((current().priority, super::super::output::verbosity()), (-1, 0));
        storage::store_int(Id::Priority, 40);
        reload();
        assert_eq!(current().priority, validate(RawParams::defaults()).priority);
    }

    #[test]
    fn a_value_of_the_other_type_is_ignored() {
        let mut raw = RawParams::defaults();
        raw.set_int(Id::Transport, 2);
        raw.set_text(Id::BarrierRadix, "4".to_string());
        assert_eq!((raw.text(Id::Transport), raw.int(Id::BarrierRadix)), ("auto", 0));
    }
}
