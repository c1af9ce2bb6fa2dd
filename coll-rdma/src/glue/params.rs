//! coll rdma's MCA parameters: registration (their storage must live at a
//! fixed address for Open MPI's variable system) and validation into
//! `Settings`, which is what the rest of the component reads.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;
use std::time::Duration;

use ompi_sys as sys;
use tuning::{AllreduceModel, BarrierModel, MAX_BARRIER_RADIX};

use super::comm_state::Collective;

// Storage written by Open MPI's variable system during registration (single
// threaded, inside MPI_Init or ompi_info) and only read afterwards.
static mut PRIORITY: c_int = 40;
static mut VERBOSE: c_int = 0;
static mut TRANSPORT: *const c_char = c"auto".as_ptr();
static mut VERBS_DEVICE: *const c_char = c"".as_ptr();
static mut VERBS_PORT: c_int = 1;
static mut VERBS_GID_INDEX: c_int = -1;
static mut VERBS_MULTICAST: c_int = 1;
static mut TEST_PRETEND_NODES: c_int = 0;
static mut BARRIER_RADIX: c_int = 0;
static mut SPIN_POLLS: c_int = -1;
static mut STALL_WARNING_SECONDS: c_int = 10;
static mut FAULT_TIMEOUT_SECONDS: c_int = btl_ibmc::DEFAULT_FAULT_TIMEOUT.as_secs() as c_int;
static mut MODEL_LATENCY_NS: c_int = BarrierModel::SHARED_MEMORY.latency_ns as c_int;
static mut MODEL_PUT_GAP_NS: c_int = BarrierModel::SHARED_MEMORY.put_gap_ns as c_int;
static mut TEST_RUNNING_VERSION: *const c_char = c"".as_ptr();
static mut TEST_MODULE_CLASS_SIZE: c_int = 0;
static mut TEST_PANIC_AT: *const c_char = c"".as_ptr();
static mut TEST_PACK_FAILURE_AT: c_int = 0;
static mut TEST_SETUP_PAUSE_S: c_int = 0;
static mut ALLREDUCE_DEGREE: c_int = 0;
static mut ALLREDUCE_SEGMENT_SIZE: c_int = 8192;
static mut ALLREDUCE_EXCHANGE_MAX: c_int = -1;
// Measured crossovers on the development machine (2 and 4 ranks, shared
// memory): above these the module underneath was faster.
static mut ALLREDUCE_MAX_BYTES: c_int = 16384;
static mut REDUCE_DEGREE: c_int = 0;
static mut REDUCE_SEGMENT_SIZE: c_int = 8192;
static mut REDUCE_MAX_BYTES: c_int = 8192;
static mut REDUCTION_MODEL_LATENCY_NS: c_int = AllreduceModel::SHARED_MEMORY.message_latency_ns as c_int;
static mut REDUCTION_MODEL_TRANSFER_PS_PER_BYTE: c_int = (AllreduceModel::SHARED_MEMORY.transfer_ns_per_byte * 1000.0) as c_int;
static mut REDUCTION_MODEL_COMBINE_PS_PER_BYTE: c_int = (AllreduceModel::SHARED_MEMORY.reduce_ns_per_byte * 1000.0) as c_int;
static mut REDUCTION_MODEL_PUT_GAP_NS: c_int = AllreduceModel::SHARED_MEMORY.put_gap_ns as c_int;
static mut BCAST_WINDOW: c_int = 64;
static mut BCAST_SLOT_SIZE: c_int = 4096;
static mut BCAST_FRAGMENT_SIZE: c_int = 4096;
static mut BCAST_CO_ROOTS: c_int = -1;
static mut BCAST_ACK_INTERVAL: c_int = 8;
static mut BCAST_TIMEOUT_MS: c_int = 20;
static mut BCAST_NACK: c_int = 1;
static mut BCAST_MAX_BYTES: c_int = 16384;

/// Which transport the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportChoice {
    /// Shared memory when every rank is on one node, else verbs.
    Auto,
    Shm,
    /// Verbs between every pair of ranks, node-local ones included (tests
    /// the verbs path on one machine).
    Verbs,
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
}

/// Validated parameter values.
#[derive(Clone, Debug)]
pub struct Settings {
    pub priority: i32,
    pub transport: TransportChoice,
    pub verbs: VerbsSettings,
    /// `None`: choose per communicator from the model.
    pub barrier_radix: Option<usize>,
    /// `None`: spin only when the node is not oversubscribed.
    pub spin_polls: Option<u32>,
    pub stall_warning: Duration,
    /// `None`: a wait never gives up.
    pub fault_timeout: Option<Duration>,
    pub model: BarrierModel,
    pub pretend_running_version: Option<String>,
    /// Testing: pretend the running Open MPI's module class has this size.
    pub pretend_module_class_size: Option<usize>,
    pub test_faults: TestFaults,
    pub allreduce: ReductionSettings,
    pub reduce: ReductionSettings,
    pub reduction_model: AllreduceModel,
    pub bcast: BcastSettings,
}

/// Testing only: faults injected to exercise the recovery paths.
#[derive(Clone, Copy, Debug, Default)]
pub struct TestFaults {
    /// Panic inside this collective's n-th call (1-based) on a communicator.
    pub panic_at: Option<(Collective, u64)>,
    /// The n-th packing bcast root of a communicator fails to pack.
    pub pack_failure_at: Option<u64>,
    /// Every rank but 0 pauses this long between agreeing on the settings
    /// and setting up the transport (rank 0 waits there with its segment).
    pub setup_pause: Option<Duration>,
    /// Packing roots seen so far (per communicator: each state has a copy).
    pub packs_seen: u64,
}

/// "bcast:3" as (Bcast, 3); `None` (with a warning) when malformed.
fn panic_at_setting(text: &str) -> Option<(Collective, u64)> {
    if text.is_empty() {
        return None;
    }
    let parsed = text.split_once(':').and_then(|(name, calls)| {
        let collective = Collective::ALL.into_iter().find(|c| c.name() == name.trim())?;
        let calls = calls.trim().parse::<u64>().ok().filter(|&n| n >= 1)?;
        Some((collective, calls))
    });
    if parsed.is_none() {
        tracing::warn!("coll_rdma_test_panic_at=\"{text}\" is invalid (COLLECTIVE:N, e.g. allreduce:3); no panic is injected");
    }
    parsed
}

/// How MPI_Bcast's reliable multicast is configured.
#[derive(Clone, Copy, Debug)]
pub struct BcastSettings {
    pub window_slots: usize,
    pub slot_bytes: usize,
    pub fragment_bytes: usize,
    /// `None`: the paper's model chooses per communicator.
    pub co_roots: Option<usize>,
    pub ack_interval: usize,
    pub timeout: Duration,
    pub nack: bool,
    /// Messages above this go to the module underneath; `None`: never.
    pub max_bytes: Option<usize>,
}

/// How one reduction collective (allreduce or reduce) is configured.
#[derive(Clone, Copy, Debug)]
pub struct ReductionSettings {
    /// `None`: the model chooses per communicator.
    pub degree: Option<usize>,
    pub segment_bytes: usize,
    /// `None`: the model chooses (allreduce only).
    pub exchange_max_bytes: Option<usize>,
    /// Messages above this go to the module underneath; `None`: never.
    pub max_bytes: Option<usize>,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

struct Registration {
    name: &'static CStr,
    help: &'static CStr,
    kind: sys::mca_base_var_type_t,
    level: sys::mca_base_var_info_lvl_t,
    storage: *mut c_void,
}

fn registrations() -> Vec<Registration> {
    use sys::{MCA_BASE_VAR_TYPE_INT as INT, MCA_BASE_VAR_TYPE_STRING as STRING};
    use sys::{OPAL_INFO_LVL_2 as USER, OPAL_INFO_LVL_5 as TUNER, OPAL_INFO_LVL_9 as DEV};
    vec![
        Registration {
            name: c"priority",
            help: c"Priority of coll rdma (default 40, above coll tuned's 30, so installing it is enough to use it); a negative value keeps it from claiming any communicator",
            kind: INT,
            level: USER,
            storage: &raw mut PRIORITY as *mut c_void,
        },
        Registration {
            name: c"verbose",
            help: c"Verbosity: 0 silent except warnings; 1 says per communicator what was selected and why, and what was served when it is freed; 2 and above trace",
            kind: INT,
            level: USER,
            storage: &raw mut VERBOSE as *mut c_void,
        },
        Registration {
            name: c"transport",
            help: c"Transport for one-sided writes: auto (shared memory when all ranks share a node; across nodes shared memory within each node and verbs RDMA writes and UD multicast between nodes, if a device is active), shm, or verbs (verbs between all ranks, node-local ones included: for testing the verbs path on one machine). Unknown values warn and use auto",
            kind: STRING,
            level: USER,
            storage: &raw mut TRANSPORT as *mut c_void,
        },
        Registration {
            name: c"verbs_device",
            help: c"RDMA device for the verbs transport (e.g. mlx5_0, rxe0); empty picks the first device with an active port",
            kind: STRING,
            level: USER,
            storage: &raw mut VERBS_DEVICE as *mut c_void,
        },
        Registration {
            name: c"verbs_port",
            help: c"Port of the verbs device (1..=255)",
            kind: INT,
            level: USER,
            storage: &raw mut VERBS_PORT as *mut c_void,
        },
        Registration {
            name: c"verbs_gid_index",
            help: c"GID index for RoCE addressing: -1 picks a RoCE v2 IPv4 GID if the port has one, else index 0; 0 or more fixes it",
            kind: INT,
            level: TUNER,
            storage: &raw mut VERBS_GID_INDEX as *mut c_void,
        },
        Registration {
            name: c"verbs_multicast",
            help: c"1 (default): bcast over UD multicast made reliable (co-roots, ACKs, retransmission); 0: no multicast group is joined and bcast goes down a binomial tree of RDMA writes (for fabrics that block multicast)",
            kind: INT,
            level: TUNER,
            storage: &raw mut VERBS_MULTICAST as *mut c_void,
        },
        Registration {
            name: c"test_pretend_nodes",
            help: c"Testing only: with transport auto, treat each host's ranks as this many nodes (blocks of consecutive ranks), so that one machine exercises shared memory within the blocks and verbs between them (0 or 1 = the real placement, up to 64)",
            kind: INT,
            level: TUNER,
            storage: &raw mut TEST_PRETEND_NODES as *mut c_void,
        },
        Registration {
            name: c"barrier_radix",
            help: c"n of the n-way dissemination barrier (peers notified per round): 0 chooses per communicator from the cost model; 1..=64 fixes it. Invalid values warn and use the automatic choice",
            kind: INT,
            level: TUNER,
            storage: &raw mut BARRIER_RADIX as *mut c_void,
        },
        Registration {
            name: c"spin_polls",
            help: c"Polls of a flag before a waiting rank starts yielding its core: -1 chooses (spin when the node has a core per rank, yield at once when oversubscribed); 0 or more fixes it",
            kind: INT,
            level: TUNER,
            storage: &raw mut SPIN_POLLS as *mut c_void,
        },
        Registration {
            name: c"stall_warning",
            help: c"Seconds a rank may wait inside a coll rdma collective before it warns that a peer seems stuck (repeated at every doubling); 0 never warns",
            kind: INT,
            level: TUNER,
            storage: &raw mut STALL_WARNING_SECONDS as *mut c_void,
        },
        Registration {
            name: c"fault_timeout_s",
            help: c"Seconds a rank may wait inside a coll rdma collective without progress before the collective fails with MPI_ERR_OTHER, reporting the job as hung with what it waited for; a failed link or peer fails it at once; 0 waits for ever",
            kind: INT,
            level: TUNER,
            storage: &raw mut FAULT_TIMEOUT_SECONDS as *mut c_void,
        },
        Registration {
            name: c"model_latency_ns",
            help: c"Barrier radix model: nanoseconds for one flag write to become visible at its target (must be > 0)",
            kind: INT,
            level: TUNER,
            storage: &raw mut MODEL_LATENCY_NS as *mut c_void,
        },
        Registration {
            name: c"model_put_gap_ns",
            help: c"Barrier radix model: extra nanoseconds per additional flag write issued in the same round (must be >= 0)",
            kind: INT,
            level: TUNER,
            storage: &raw mut MODEL_PUT_GAP_NS as *mut c_void,
        },
        Registration {
            name: c"test_running_version",
            help: c"Testing only: pretend the running Open MPI reports this version, to exercise the check that disqualifies coll rdma inside an Open MPI other than the one it was built against; empty uses the real version",
            kind: STRING,
            level: DEV,
            storage: &raw mut TEST_RUNNING_VERSION as *mut c_void,
        },
        Registration {
            name: c"test_module_class_size",
            help: c"Testing only: pretend the running Open MPI's mca_coll_base_module_t has this many bytes, to exercise the check that disqualifies coll rdma when the running library's structures differ from those it was built against (e.g. a debug build of the same version); 0 uses the real size",
            kind: INT,
            level: DEV,
            storage: &raw mut TEST_MODULE_CLASS_SIZE as *mut c_void,
        },
        Registration {
            name: c"test_panic_at",
            help: c"Testing only: COLLECTIVE:N (barrier, allreduce, reduce or bcast) makes coll rdma panic inside the N-th call of that collective on every communicator, to exercise the recovery (the call returns an error, later calls go to the module underneath); empty injects nothing",
            kind: STRING,
            level: DEV,
            storage: &raw mut TEST_PANIC_AT as *mut c_void,
        },
        Registration {
            name: c"test_pack_failure_at",
            help: c"Testing only: N > 0 makes the N-th bcast root on a communicator that packs a non-contiguous datatype fail to pack, to exercise the recovery (every rank's call returns an error, later calls go to the module underneath); 0 injects nothing",
            kind: INT,
            level: DEV,
            storage: &raw mut TEST_PACK_FAILURE_AT as *mut c_void,
        },
        Registration {
            name: c"test_setup_pause_s",
            help: c"Testing only: N > 0 makes every rank but 0 pause N seconds between agreeing on the settings and setting up a communicator's transport, so that a test can kill rank 0 while its new shared-memory segment waits for the others; 0 pauses nowhere",
            kind: INT,
            level: DEV,
            storage: &raw mut TEST_SETUP_PAUSE_S as *mut c_void,
        },
        Registration {
            name: c"allreduce_degree",
            help: c"Degree k of the allreduce tree (senders per receiver and step): 0 chooses per communicator from the cost model; 1..=64 fixes it",
            kind: INT,
            level: TUNER,
            storage: &raw mut ALLREDUCE_DEGREE as *mut c_void,
        },
        Registration {
            name: c"allreduce_segment_size",
            help: c"Bytes per allreduce slot: longer messages are pipelined through the tree in segments of this size (64..=1048576)",
            kind: INT,
            level: TUNER,
            storage: &raw mut ALLREDUCE_SEGMENT_SIZE as *mut c_void,
        },
        Registration {
            name: c"allreduce_exchange_max",
            help: c"Messages of at most this many bytes use the exchange variant (every rank writes its contribution to every other and reduces locally: one transfer instead of reduce + broadcast): -1 chooses from the cost model, 0 never uses it, at most 4096",
            kind: INT,
            level: TUNER,
            storage: &raw mut ALLREDUCE_EXCHANGE_MAX as *mut c_void,
        },
        Registration {
            name: c"allreduce_max_bytes",
            help: c"Allreduce messages larger than this many bytes are handed to the module underneath; -1 never hands them over",
            kind: INT,
            level: TUNER,
            storage: &raw mut ALLREDUCE_MAX_BYTES as *mut c_void,
        },
        Registration {
            name: c"reduce_degree",
            help: c"Degree k of the reduce tree: 0 chooses per communicator from the cost model; 1..=64 fixes it",
            kind: INT,
            level: TUNER,
            storage: &raw mut REDUCE_DEGREE as *mut c_void,
        },
        Registration {
            name: c"reduce_segment_size",
            help: c"Bytes per reduce slot: longer messages are pipelined in segments of this size (64..=1048576)",
            kind: INT,
            level: TUNER,
            storage: &raw mut REDUCE_SEGMENT_SIZE as *mut c_void,
        },
        Registration {
            name: c"reduce_max_bytes",
            help: c"Reduce messages larger than this many bytes are handed to the module underneath; -1 never hands them over",
            kind: INT,
            level: TUNER,
            storage: &raw mut REDUCE_MAX_BYTES as *mut c_void,
        },
        Registration {
            name: c"reduction_model_latency_ns",
            help: c"Allreduce/reduce degree model: nanoseconds from issuing a small put to its target seeing it (> 0)",
            kind: INT,
            level: TUNER,
            storage: &raw mut REDUCTION_MODEL_LATENCY_NS as *mut c_void,
        },
        Registration {
            name: c"reduction_model_transfer_ps_per_byte",
            help: c"Allreduce/reduce degree model: picoseconds to move one byte into a peer's window (>= 0)",
            kind: INT,
            level: TUNER,
            storage: &raw mut REDUCTION_MODEL_TRANSFER_PS_PER_BYTE as *mut c_void,
        },
        Registration {
            name: c"reduction_model_combine_ps_per_byte",
            help: c"Allreduce/reduce degree model: picoseconds to combine one byte with the MPI op (>= 0)",
            kind: INT,
            level: TUNER,
            storage: &raw mut REDUCTION_MODEL_COMBINE_PS_PER_BYTE as *mut c_void,
        },
        Registration {
            name: c"reduction_model_put_gap_ns",
            help: c"Allreduce/reduce degree model: nanoseconds each further message of the same step adds at its receiver (>= 0)",
            kind: INT,
            level: TUNER,
            storage: &raw mut REDUCTION_MODEL_PUT_GAP_NS as *mut c_void,
        },
        Registration {
            name: c"bcast_window",
            help: c"Bcast sliding window: pieces a root may have in flight before every receiver has taken them (credits; 1..=4096)",
            kind: INT,
            level: TUNER,
            storage: &raw mut BCAST_WINDOW as *mut c_void,
        },
        Registration {
            name: c"bcast_slot_size",
            help: c"Bytes per bcast window slot on shared memory, and per segment of the put tree where a transport has no multicast; longer messages are fragmented (64..=1048576)",
            kind: INT,
            level: TUNER,
            storage: &raw mut BCAST_SLOT_SIZE as *mut c_void,
        },
        Registration {
            name: c"bcast_fragment_size",
            help: c"Bytes per multicast datagram on datagram transports (verbs UD, UDP), lowered to what the transport carries (64..=1048576)",
            kind: INT,
            level: TUNER,
            storage: &raw mut BCAST_FRAGMENT_SIZE as *mut c_void,
        },
        Registration {
            name: c"bcast_co_roots",
            help: c"Co-roots that receive every message reliably and collect their subgroup's ACKs (datagram transports): -1 chooses from the model of Liu, Mamidala and Panda (2004, section 7.2); 0 or more fixes it",
            kind: INT,
            level: TUNER,
            storage: &raw mut BCAST_CO_ROOTS as *mut c_void,
        },
        Registration {
            name: c"bcast_ack_interval",
            help: c"M of the lazy, skewed ACKs: receiver i acknowledges message B when B mod M = i mod M (1..=4096, lowered to the window)",
            kind: INT,
            level: TUNER,
            storage: &raw mut BCAST_ACK_INTERVAL as *mut c_void,
        },
        Registration {
            name: c"bcast_timeout_ms",
            help: c"Milliseconds without an ACK before a collector retransmits to a receiver (doubling while it stays silent); >= 1",
            kind: INT,
            level: TUNER,
            storage: &raw mut BCAST_TIMEOUT_MS as *mut c_void,
        },
        Registration {
            name: c"bcast_nack",
            help: c"1: a receiver that sees a gap asks its collector at once (a loss costs one round trip, not a timeout); 0: rely on timeouts",
            kind: INT,
            level: TUNER,
            storage: &raw mut BCAST_NACK as *mut c_void,
        },
        Registration {
            name: c"bcast_max_bytes",
            help: c"Bcast messages larger than this many bytes are handed to the module underneath (its pipelined tree); -1 never hands them over",
            kind: INT,
            level: TUNER,
            storage: &raw mut BCAST_MAX_BYTES as *mut c_void,
        },
    ]
}

/// Registers every parameter with Open MPI's variable system.
pub fn register(component: *const sys::mca_base_component_t) -> c_int {
    for r in registrations() {
        // SAFETY: `component` is our static component; name and help are
        // 'static C strings; storage points at a static of the declared type.
        let index = unsafe {
            sys::mca_base_component_var_register(
                component,
                r.name.as_ptr(),
                r.help.as_ptr(),
                r.kind,
                std::ptr::null_mut(),
                0,
                0,
                r.level,
                sys::MCA_BASE_VAR_SCOPE_READONLY,
                r.storage,
            )
        };
        if index < 0 {
            return index;
        }
    }
    sys::OMPI_SUCCESS as c_int
}

fn string_value(storage: *const c_char) -> String {
    if storage.is_null() {
        return String::new();
    }
    // SAFETY: the variable system stores a NUL-terminated string (or our
    // static default) in string storage.
    unsafe { CStr::from_ptr(storage) }.to_string_lossy().trim().to_string()
}

/// Raw values as the user set them, before validation.
pub struct RawParams {
    pub priority: i32,
    pub verbose: i32,
    pub transport: String,
    pub verbs_device: String,
    pub verbs_port: i32,
    pub verbs_gid_index: i32,
    pub verbs_multicast: i32,
    pub test_pretend_nodes: i32,
    pub barrier_radix: i32,
    pub spin_polls: i32,
    pub stall_warning_seconds: i32,
    pub fault_timeout_seconds: i32,
    pub model_latency_ns: i32,
    pub model_put_gap_ns: i32,
    pub test_running_version: String,
    pub test_module_class_size: i32,
    pub test_panic_at: String,
    pub test_pack_failure_at: i32,
    pub test_setup_pause_seconds: i32,
    pub allreduce_degree: i32,
    pub allreduce_segment_size: i32,
    pub allreduce_exchange_max: i32,
    pub allreduce_max_bytes: i32,
    pub reduce_degree: i32,
    pub reduce_segment_size: i32,
    pub reduce_max_bytes: i32,
    pub reduction_model_latency_ns: i32,
    pub reduction_model_transfer_ps_per_byte: i32,
    pub reduction_model_combine_ps_per_byte: i32,
    pub reduction_model_put_gap_ns: i32,
    pub bcast_window: i32,
    pub bcast_slot_size: i32,
    pub bcast_fragment_size: i32,
    pub bcast_co_roots: i32,
    pub bcast_ack_interval: i32,
    pub bcast_timeout_ms: i32,
    pub bcast_nack: i32,
    pub bcast_max_bytes: i32,
}

fn read_raw() -> RawParams {
    // SAFETY: registration, the only writer, has finished before component
    // open, which is the only caller.
    unsafe {
        RawParams {
            priority: PRIORITY,
            verbose: VERBOSE,
            transport: string_value(TRANSPORT),
            verbs_device: string_value(VERBS_DEVICE),
            verbs_port: VERBS_PORT,
            verbs_gid_index: VERBS_GID_INDEX,
            verbs_multicast: VERBS_MULTICAST,
            test_pretend_nodes: TEST_PRETEND_NODES,
            barrier_radix: BARRIER_RADIX,
            spin_polls: SPIN_POLLS,
            stall_warning_seconds: STALL_WARNING_SECONDS,
            fault_timeout_seconds: FAULT_TIMEOUT_SECONDS,
            model_latency_ns: MODEL_LATENCY_NS,
            model_put_gap_ns: MODEL_PUT_GAP_NS,
            test_running_version: string_value(TEST_RUNNING_VERSION),
            test_module_class_size: TEST_MODULE_CLASS_SIZE,
            test_panic_at: string_value(TEST_PANIC_AT),
            test_pack_failure_at: TEST_PACK_FAILURE_AT,
            test_setup_pause_seconds: TEST_SETUP_PAUSE_S,
            allreduce_degree: ALLREDUCE_DEGREE,
            allreduce_segment_size: ALLREDUCE_SEGMENT_SIZE,
            allreduce_exchange_max: ALLREDUCE_EXCHANGE_MAX,
            allreduce_max_bytes: ALLREDUCE_MAX_BYTES,
            reduce_degree: REDUCE_DEGREE,
            reduce_segment_size: REDUCE_SEGMENT_SIZE,
            reduce_max_bytes: REDUCE_MAX_BYTES,
            reduction_model_latency_ns: REDUCTION_MODEL_LATENCY_NS,
            reduction_model_transfer_ps_per_byte: REDUCTION_MODEL_TRANSFER_PS_PER_BYTE,
            reduction_model_combine_ps_per_byte: REDUCTION_MODEL_COMBINE_PS_PER_BYTE,
            reduction_model_put_gap_ns: REDUCTION_MODEL_PUT_GAP_NS,
            bcast_window: BCAST_WINDOW,
            bcast_slot_size: BCAST_SLOT_SIZE,
            bcast_fragment_size: BCAST_FRAGMENT_SIZE,
            bcast_co_roots: BCAST_CO_ROOTS,
            bcast_ack_interval: BCAST_ACK_INTERVAL,
            bcast_timeout_ms: BCAST_TIMEOUT_MS,
            bcast_nack: BCAST_NACK,
            bcast_max_bytes: BCAST_MAX_BYTES,
        }
    }
}

/// Turns raw values into settings, warning about each invalid one and
/// saying which documented fallback is used instead.
pub fn validate(raw: RawParams) -> Settings {
    let transport = match raw.transport.to_ascii_lowercase().as_str() {
        "auto" | "" => TransportChoice::Auto,
        "shm" => TransportChoice::Shm,
        "verbs" => TransportChoice::Verbs,
        _ => {
            tracing::warn!("coll_rdma_transport=\"{}\" is unknown (auto, shm, verbs); using auto", raw.transport);
            TransportChoice::Auto
        }
    };
    let barrier_radix = match raw.barrier_radix {
        0 => None,
        n if n >= 1 && n as usize <= MAX_BARRIER_RADIX => Some(n as usize),
        n => {
            tracing::warn!(
                "coll_rdma_barrier_radix={n} is invalid (0 = automatic, or 1..={MAX_BARRIER_RADIX}); using the automatic choice"
            );
            None
        }
    };
    let spin_polls = match raw.spin_polls {
        -1 => None,
        n if n >= 0 => Some(n as u32),
        n => {
            tracing::warn!("coll_rdma_spin_polls={n} is invalid (-1 = automatic, or >= 0); using the automatic choice");
            None
        }
    };
    let stall_warning = if raw.stall_warning_seconds >= 0 {
        raw.stall_warning_seconds as u64
    } else {
        tracing::warn!("coll_rdma_stall_warning={} is invalid (seconds >= 0); using 10", raw.stall_warning_seconds);
        10
    };
    // Zero disables the warning: an interval no wait reaches.
    let stall_warning = if stall_warning == 0 { Duration::MAX } else { Duration::from_secs(stall_warning) };
    let fault_timeout = match raw.fault_timeout_seconds {
        0 => None,
        n if n > 0 => Some(Duration::from_secs(n as u64)),
        n => {
            let default = btl_ibmc::DEFAULT_FAULT_TIMEOUT.as_secs();
            tracing::warn!("coll_rdma_fault_timeout_s={n} is invalid (seconds >= 0, 0 = never); using {default}");
            Some(btl_ibmc::DEFAULT_FAULT_TIMEOUT)
        }
    };
    let default_model = BarrierModel::SHARED_MEMORY;
    let latency_ns = if raw.model_latency_ns > 0 {
        raw.model_latency_ns as f64
    } else {
        tracing::warn!(
            "coll_rdma_model_latency_ns={} is invalid (must be > 0); using {}",
            raw.model_latency_ns,
            default_model.latency_ns
        );
        default_model.latency_ns
    };
    let put_gap_ns = if raw.model_put_gap_ns >= 0 {
        raw.model_put_gap_ns as f64
    } else {
        tracing::warn!(
            "coll_rdma_model_put_gap_ns={} is invalid (must be >= 0); using {}",
            raw.model_put_gap_ns,
            default_model.put_gap_ns
        );
        default_model.put_gap_ns
    };
    if raw.verbose < 0 {
        tracing::warn!("coll_rdma_verbose={} is invalid (must be >= 0); using 0", raw.verbose);
    }
    Settings {
        priority: raw.priority.min(100),
        transport,
        verbs: verbs_settings(&raw),
        barrier_radix,
        spin_polls,
        stall_warning,
        fault_timeout,
        model: BarrierModel { latency_ns, put_gap_ns },
        pretend_running_version: Some(raw.test_running_version.clone()).filter(|v| !v.is_empty()),
        pretend_module_class_size: usize::try_from(raw.test_module_class_size).ok().filter(|&bytes| bytes > 0),
        test_faults: TestFaults {
            panic_at: panic_at_setting(&raw.test_panic_at),
            pack_failure_at: u64::try_from(raw.test_pack_failure_at).ok().filter(|&n| n > 0),
            setup_pause: u64::try_from(raw.test_setup_pause_seconds).ok().filter(|&n| n > 0).map(Duration::from_secs),
            packs_seen: 0,
        },
        allreduce: ReductionSettings {
            degree: degree_setting("allreduce_degree", raw.allreduce_degree),
            segment_bytes: segment_setting("allreduce_segment_size", raw.allreduce_segment_size),
            exchange_max_bytes: exchange_setting(raw.allreduce_exchange_max),
            max_bytes: max_bytes_setting("allreduce_max_bytes", raw.allreduce_max_bytes),
        },
        reduce: ReductionSettings {
            degree: degree_setting("reduce_degree", raw.reduce_degree),
            segment_bytes: segment_setting("reduce_segment_size", raw.reduce_segment_size),
            exchange_max_bytes: Some(0),
            max_bytes: max_bytes_setting("reduce_max_bytes", raw.reduce_max_bytes),
        },
        reduction_model: reduction_model(&raw),
        bcast: bcast_settings(&raw),
    }
}

fn verbs_settings(raw: &RawParams) -> VerbsSettings {
    VerbsSettings {
        device: Some(raw.verbs_device.clone()).filter(|name| !name.is_empty()),
        port: clamped("verbs_port", raw.verbs_port, 1..=255) as u8,
        gid_index: match raw.verbs_gid_index {
            -1 => None,
            n if n >= 0 => Some(n as u32),
            n => {
                tracing::warn!("coll_rdma_verbs_gid_index={n} is invalid (-1 = automatic, or >= 0); using the automatic choice");
                None
            }
        },
        multicast: clamped("verbs_multicast", raw.verbs_multicast, 0..=1) == 1,
        pretend_nodes: clamped("test_pretend_nodes", raw.test_pretend_nodes, 0..=64) as usize,
    }
}

/// `value` if it lies in `range`, else the nearest end of it, with a warning.
fn clamped(name: &str, value: i32, range: std::ops::RangeInclusive<i32>) -> i32 {
    if range.contains(&value) {
        return value;
    }
    let nearest = value.clamp(*range.start(), *range.end());
    tracing::warn!("coll_rdma_{name}={value} is outside {}..={}; using {nearest}", range.start(), range.end());
    nearest
}

fn bcast_settings(raw: &RawParams) -> BcastSettings {
    let window_slots = clamped("bcast_window", raw.bcast_window, 1..=4096);
    BcastSettings {
        window_slots: window_slots as usize,
        slot_bytes: clamped("bcast_slot_size", raw.bcast_slot_size, SEGMENT_RANGE) as usize,
        fragment_bytes: clamped("bcast_fragment_size", raw.bcast_fragment_size, SEGMENT_RANGE) as usize,
        co_roots: match raw.bcast_co_roots {
            -1 => None,
            n if n >= 0 => Some(n as usize),
            n => {
                tracing::warn!("coll_rdma_bcast_co_roots={n} is invalid (-1 = automatic, or >= 0); using the automatic choice");
                None
            }
        },
        // Lowered to the window where it is used (see RmcastConfig), so a
        // small window alone draws no warning about this parameter.
        ack_interval: clamped("bcast_ack_interval", raw.bcast_ack_interval, 1..=4096) as usize,
        timeout: Duration::from_millis(clamped("bcast_timeout_ms", raw.bcast_timeout_ms, 1..=i32::MAX) as u64),
        nack: clamped("bcast_nack", raw.bcast_nack, 0..=1) == 1,
        max_bytes: max_bytes_setting("bcast_max_bytes", raw.bcast_max_bytes),
    }
}

const MAX_DEGREE: i32 = 64;
const SEGMENT_RANGE: std::ops::RangeInclusive<i32> = 64..=1 << 20;

fn degree_setting(name: &str, value: i32) -> Option<usize> {
    match value {
        0 => None,
        k if (1..=MAX_DEGREE).contains(&k) => Some(k as usize),
        k => {
            tracing::warn!("coll_rdma_{name}={k} is invalid (0 = automatic, or 1..={MAX_DEGREE}); using the automatic choice");
            None
        }
    }
}

fn segment_setting(name: &str, value: i32) -> usize {
    clamped(name, value, SEGMENT_RANGE) as usize
}

fn exchange_setting(value: i32) -> Option<usize> {
    let limit = exchange_limit();
    match value {
        -1 => None,
        v if (0..=limit).contains(&v) => Some(v as usize),
        v => {
            tracing::warn!("coll_rdma_allreduce_exchange_max={v} is invalid (-1 = automatic, or 0..={limit}); using the automatic choice");
            None
        }
    }
}

fn exchange_limit() -> i32 {
    crate::collectives::allreduce::EXCHANGE_LIMIT_BYTES as i32
}

fn max_bytes_setting(name: &str, value: i32) -> Option<usize> {
    match value {
        -1 => None,
        v if v >= 0 => Some(v as usize),
        v => {
            tracing::warn!("coll_rdma_{name}={v} is invalid (-1 = never, or a byte count); never handing messages over");
            None
        }
    }
}

fn reduction_model(raw: &RawParams) -> AllreduceModel {
    let default = AllreduceModel::SHARED_MEMORY;
    let checked = |name: &str, value: i32, minimum: i32, fallback: f64| -> f64 {
        if value >= minimum {
            value as f64
        } else {
            tracing::warn!("coll_rdma_{name}={value} is invalid (must be >= {minimum}); using {fallback}");
            fallback
        }
    };
    AllreduceModel {
        message_latency_ns: checked("reduction_model_latency_ns", raw.reduction_model_latency_ns, 1, default.message_latency_ns),
        transfer_ns_per_byte: checked(
            "reduction_model_transfer_ps_per_byte",
            raw.reduction_model_transfer_ps_per_byte,
            0,
            default.transfer_ns_per_byte * 1000.0,
        ) / 1000.0,
        reduce_ns_per_byte: checked(
            "reduction_model_combine_ps_per_byte",
            raw.reduction_model_combine_ps_per_byte,
            0,
            default.reduce_ns_per_byte * 1000.0,
        ) / 1000.0,
        put_gap_ns: checked("reduction_model_put_gap_ns", raw.reduction_model_put_gap_ns, 0, default.put_gap_ns),
        segment_bytes: default.segment_bytes,
    }
}

/// Reads, validates and keeps the parameters; warnings print once.
pub fn load() -> &'static Settings {
    SETTINGS.get_or_init(|| {
        let raw = read_raw();
        super::output::install(raw.verbose.max(0));
        let settings = validate(raw);
        // The waits for room in a ring or a send queue have no
        // communicator's policy at hand; they take these.
        btl_ibmc::set_process_wait_policy(&btl_ibmc::WaitPolicy {
            spin_polls: settings.spin_polls.unwrap_or(btl_ibmc::PROCESS_DEFAULT_SPIN_POLLS),
            stall_warning: settings.stall_warning,
            fault_timeout: settings.fault_timeout,
        });
        settings
    })
}
