//! Every MCA parameter of coll rdma, once: its name (after `coll_rdma_`),
//! type, default, the rule its values follow, info level, audience and
//! help text. Registration, reading and validation are loops over this
//! table; the settings read its rows by `Id`.
//!
//! The table is data (a constant array), so the loops are plain functions
//! that tests can call. The `parameters!` macro only writes, from the same
//! rows, the `Id` enum whose order is the table's, so that a row is named
//! without a string that could be misspelt and cannot drift from its index.

use std::ffi::CStr;

use ompi_sys as sys;
use sys::{OPAL_INFO_LVL_2 as USER, OPAL_INFO_LVL_5 as TUNER, OPAL_INFO_LVL_9 as DEV};
use btl_ibmc::rmcast::{DEFAULT_LOSS_TOLERANCE_PERCENT, DEFAULT_PARITY_PERCENT, DEFAULT_REPEAT_DOUBLINGS, DEFAULT_TAIL_REPEAT, MAX_REPEAT_DOUBLINGS};
use tuning::{AllreduceModel, BarrierModel, MAX_BARRIER_RADIX};

use super::rule::{Rule, Span};
use crate::collectives::allreduce::EXCHANGE_LIMIT_BYTES;

/// What a parameter holds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Int { default: i32, rule: Rule },
    Text { default: &'static CStr },
}

/// Who a parameter is for: testing-only parameters inject faults or
/// pretend things to exercise paths a normal run never takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Audience {
    Everyone,
    Testing,
}

/// One parameter's row.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Param {
    pub id: Id,
    /// Without the `coll_rdma_` prefix, which Open MPI adds.
    pub name: &'static CStr,
    pub kind: Kind,
    pub level: sys::mca_base_var_info_lvl_t,
    /// Read only by the tests, which hold the names and help texts to it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub audience: Audience,
    pub help: &'static CStr,
}

impl Param {
    /// The name as warnings show it after `coll_rdma_`.
    pub fn short_name(&self) -> &'static str {
        self.name.to_str().unwrap_or("?")
    }
}

const fn int(default: i32, rule: Rule) -> Kind {
    Kind::Int { default, rule }
}

const fn text(default: &'static CStr) -> Kind {
    Kind::Text { default }
}

/// -1 = automatic, or any value from 0 up.
const AUTO_OR_ANY: Rule = Rule::AutoOr { auto: -1, valid: Span::From(0) };
const DEGREE: Rule = Rule::AutoOr { auto: 0, valid: Span::Between(1, 64) };
const SEGMENT: Rule = Rule::Clamped { min: 64, max: 1 << 20 };
const SWITCH: Rule = Rule::Clamped { min: 0, max: 1 };
const AT_LEAST_ZERO: Rule = Rule::AtLeast { min: 0, requirement: "must be >= 0" };
/// The udp transport's datagram: by default (0) what the interface's MTU
/// carries, at most a 9000-byte jumbo frame's; the least leaves a bcast
/// piece room for data after the frame's and rmcast's headers; the most
/// is what one IPv4 UDP datagram carries (`UdpConfig::problem` agrees: a
/// test holds the two together).
pub(crate) const UDP_DATAGRAM_BYTES_FROM_MTU: i32 = 0;
pub(crate) const UDP_LARGEST_FITTED_DATAGRAM_BYTES: usize = btl_ibmc::udp::JUMBO_DATAGRAM_BYTES;
pub(crate) const UDP_MIN_DATAGRAM_BYTES: i32 = 256;
pub(crate) const UDP_MAX_DATAGRAM_BYTES: i32 = 65_507;
/// The bcast window and ACK interval over udp (see their rows).
pub(crate) const UDP_WINDOW: i32 = 1024;
pub(crate) const UDP_ACK_INTERVAL: i32 = 32;

macro_rules! parameters {
    ($($id:ident: $name:literal, $kind:expr, $level:ident, $audience:ident, $help:literal;)*) => {
        /// A row of `TABLE`; its discriminant is the row's index.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Id {
            $($id,)*
        }

        pub(crate) const TABLE: [Param; [$(Id::$id),*].len()] = [
            $(Param { id: Id::$id, name: $name, kind: $kind, level: $level, audience: Audience::$audience, help: $help },)*
        ];
    };
}

pub(crate) const COUNT: usize = TABLE.len();

// Registration order, which is also the order of `ompi_info`'s listing and
// of the warnings about invalid values.
parameters! {
    Priority: c"priority", int(40, Rule::Unchecked), USER, Everyone,
        c"Priority of coll rdma (default 40, above coll tuned's 30, so installing it is enough to use it); a negative value keeps it from claiming any communicator";
    Verbose: c"verbose", int(0, Rule::AtLeast { min: 0, requirement: "must be >= 0" }), USER, Everyone,
        c"Verbosity: 0 silent except warnings; 1 a summary per communicator from its rank 0 (transport and schedules when it is ready, calls served and handed over when it is freed); 2 adds every rank's choices, their reasons and its own counts; 3 and above trace";
    EventsFile: c"events_file", text(c""), USER, Everyone,
        c"Where each process writes coll rdma's events, one JSON object per line (docs/events.md): the communicators' transports and plans, autotune choices, hand-over reasons, failures and, when each communicator is freed, its calls served and handed over. %r stands for the rank in MPI_COMM_WORLD, %p for the process id, %% for %; a path without %r gets .<rank> appended, so that ranks never share a file. The file must not exist: it is created with mode 0600 and never through a symbolic link; the directory must exist. Empty (default): no events";
    Transport: c"transport", text(c"auto"), USER, Everyone,
        c"Transport for one-sided writes: auto (shared memory when all ranks share a node; across nodes shared memory within each node and verbs RDMA writes and UD multicast between nodes if every rank has an active device, else udp if every rank joins the multicast group and the probe passes, else the module underneath), shm, verbs (verbs between all ranks, node-local ones included: for testing the verbs path on one machine), or udp (UDP/IPv4 multicast and unicast between all ranks, node-local ones included, for Ethernet without RDMA; if its setup fails every rank falls back to the module underneath and rank 0 warns why). Unknown values warn and use auto";
    VerbsDevice: c"verbs_device", text(c""), USER, Everyone,
        c"RDMA device for the verbs transport (e.g. mlx5_0, rxe0); empty picks the first device with an active port";
    VerbsPort: c"verbs_port", int(1, Rule::Clamped { min: 1, max: 255 }), USER, Everyone,
        c"Port of the verbs device (1..=255)";
    VerbsGidIndex: c"verbs_gid_index", int(-1, AUTO_OR_ANY), TUNER, Everyone,
        c"GID index for RoCE addressing: -1 picks a RoCE v2 IPv4 GID if the port has one, else index 0; 0 or more fixes it";
    VerbsMulticast: c"verbs_multicast", int(1, SWITCH), TUNER, Everyone,
        c"1 (default): bcast over UD multicast made reliable (co-roots, ACKs, retransmission); 0: no multicast group is joined and bcast goes down a binomial tree of RDMA writes (for fabrics that block multicast)";
    VerbsProtection: c"verbs_protection", text(c"encrypt"), USER, Everyone,
        c"How the verbs transport protects its UD multicast datagrams, the bcast pieces and their repairs (docs/security.md): encrypt (default): every datagram authenticated (AES-256-GCM under a key rank 0 draws per communicator and hands the others through Open MPI's own transport) and its payload encrypted, so that others who can open the RDMA device and join the group can neither read bcast data nor inject pieces; authenticate: the same authentication, payload in clear; none: neither (for a fabric the site trusts; verbose 1 warns). RDMA writes are not affected. Every rank must read the same value (else every rank hands over to the module underneath, naming it). Unknown values warn and use encrypt";
    Hierarchy: c"hierarchy", text(c"auto"), USER, Everyone,
        c"Schedule of the collectives across nodes: auto (default): where the transport is shm+verbs and a communicator spans more than one node, two levels (barrier: each node's ranks report to the node's leader, its lowest rank, the leaders run the dissemination among themselves, each leader releases its node; allreduce and reduce: a degree-k tree within each node into its leader and among the leaders, the result back down the same tree, where every node holds consecutive ranks and the window holds the tree's slot rings (a round-robin placement stays flat); bcast: the root's node from the root, then the leaders by the transport's multicast, then every other node from its leader; only leaders write across nodes), one flat schedule over all ranks otherwise; flat: one flat schedule over all ranks everywhere. Every rank must read the same value (else every rank hands over, naming it). Unknown values warn and use auto";
    HierarchyQueuePairsMax: c"hierarchy_queue_pairs_max", int(64, Rule::AtLeast { min: -1, requirement: "-1 = every pair, or a count >= 0" }), TUNER, Everyone,
        c"Over shm+verbs with coll_rdma_hierarchy auto, the most RC queue pairs one rank may hold across nodes before only the nodes' leaders connect: -1 connects every pair of ranks on different nodes; 0 only the leaders wherever the communicator spans nodes; N (default 64) every pair while no rank would hold more than N, only the leaders beyond. Each queue pair costs 32 registered receive buffers of 4 KiB (128 KiB, 8 MiB at 64) and the adapter's state, so at a thousand nodes every pair would not fit. With only leaders connected, the two-level schedules serve (only leaders write across nodes, verbose 2 says so) and whatever would need a non-leader to write across nodes goes to the module underneath, named at verbose 2: the ring of long allreduces and reduces with commutative ops (those above coll_rdma_allreduce_max_bytes / coll_rdma_reduce_max_bytes; non-commutative ops keep the two-level tree at every length) and an allreduce, reduce or bcast that stays flat; a reduce whose root is a non-leader off rank 0's node takes the two-level allreduce's result (ranks placed round robin, or a window too small for the two levels). Every rank must read the same value (else every rank hands over, naming it)";
    WindowMaxMib: c"window_max_mib", int(256, Rule::AtLeast { min: 1, requirement: "MiB >= 1" }), TUNER, Everyone,
        c"Most memory, in MiB, that one communicator's window may take on each rank: the slots of its barrier, allreduce, reduce, ring and bcast, which the communicator size, coll_rdma_bcast_window x coll_rdma_bcast_slot_size, the segment sizes and the tree degrees set (verbose 2 shows a window's size). A communicator whose settings need more is not served: every rank hands its collectives to the module underneath, and rank 0 warns, naming the regions' sizes. With the defaults a window takes under 10 MiB up to 1024 ranks; the largest legal settings would take over 4 GiB per rank, and on shared memory every rank of a node holds its own. Every rank must read the same value (else every rank hands over, naming it)";
    TestPretendNodes: c"test_pretend_nodes", int(0, Rule::Clamped { min: 0, max: 64 }), TUNER, Testing,
        c"Testing only: with transport auto, treat each host's ranks as this many nodes (blocks of consecutive ranks), so that one machine exercises shared memory within the blocks and verbs between them; with transport shm, the collectives' two-level schedules (coll_rdma_hierarchy) run over these blocks, all through shared memory, so that a machine without an RDMA device exercises them (0 or 1 = the real placement, up to 64)";
    UdpInterface: c"udp_interface", text(c""), USER, Everyone,
        c"Interface of the udp transport: a name (eth0) or an IPv4 address of this host. Empty (default): the interface of the address Open MPI's own out-of-band TCP connection uses (the local address of the connection between this rank's launcher daemon and mpirun), else the one the kernel routes the group range through, else the one it routes the launcher's address (from the rank's environment) through. A name that does not exist makes every rank fall back to the module underneath, saying why";
    UdpGroupBase: c"udp_group_base", text(c"239.78.0.0/16"), USER, Everyone,
        c"IPv4 multicast range the udp transport takes each communicator's group from, as ADDRESS/PREFIX (an address alone is one group); it must not overlap 224.0.0.0/24 or 232.0.0.0/8. Invalid values warn and use 239.78.0.0/16";
    UdpPortRange: c"udp_port_range", text(c"24000-24999"), USER, Everyone,
        c"UDP ports the udp transport takes each communicator's group port from, as FIRST-LAST (a port alone is a range of one), inside 1..=65535. Invalid values warn and use 24000-24999";
    UdpTtl: c"udp_ttl", int(1, Rule::Within { min: 1, max: 255 }), USER, Everyone,
        c"Multicast TTL of the udp transport: 1 (default) keeps datagrams on the local link; more crosses multicast routers (1..=255, else warns and uses 1)";
    UdpFragmentBytes: c"udp_fragment_bytes", int(UDP_DATAGRAM_BYTES_FROM_MTU, Rule::AutoOr { auto: UDP_DATAGRAM_BYTES_FROM_MTU, valid: Span::Between(UDP_MIN_DATAGRAM_BYTES, UDP_MAX_DATAGRAM_BYTES) }), TUNER, Everyone,
        c"UDP payload bytes of the udp transport's largest datagram, its 24- to 32-byte header included. 0 (default): what the MTU of each rank's interface carries without IP fragmentation (the MTU less 28 bytes of IPv4 and UDP headers: 1472 on a 1500-byte Ethernet, 8972 with 9000-byte jumbo frames, never more), the least over all ranks; verbose 2 says the choice. 256..=65507 sets it on every rank whatever the MTU (a size the MTU cannot carry is fragmented by IP); else warns and uses 0";
    UdpCwndInitial: c"udp_cwnd_initial", int(8, Rule::AtLeast { min: 1, requirement: "fragments >= 1" }), TUNER, Everyone,
        c"Congestion window, in fragments, that a bcast over the udp transport starts with (>= 1, else warns and uses 8)";
    UdpSsthreshInitial: c"udp_ssthresh_initial", int(UDP_WINDOW, Rule::AtLeast { min: 1, requirement: "fragments >= 1" }), TUNER, Everyone,
        c"Slow-start threshold, in fragments, that a bcast over the udp transport starts with: below it the congestion window grows by one per acknowledged fragment, above it by one per window; the first loss sets it to half the window (>= 1, lowered to coll_rdma_udp_window; default 1024, the whole default window; else warns and uses 1024)";
    UdpWindow: c"udp_window", int(UDP_WINDOW, Rule::Clamped { min: 1, max: 65_536 }), TUNER, Everyone,
        c"Bcast sliding window over the udp transport, in fragments: pieces a root may have in flight before every receiver has taken them, in place of coll_rdma_bcast_window there (1..=65536, default 1024, about 1.4 MiB of 1472-byte datagrams: receivers acknowledge only from inside MPI, so the window must cover a receiver's scheduling delays, not just the wire's round trip)";
    UdpAckInterval: c"udp_ack_interval", int(UDP_ACK_INTERVAL, Rule::Clamped { min: 1, max: 4096 }), TUNER, Everyone,
        c"M of the lazy, skewed ACKs over the udp transport, in place of coll_rdma_bcast_ack_interval there: each receiver acknowledges every M fragments (every ACK is a datagram the root takes in; 1..=4096, lowered to the window; default 32)";
    UdpLossTolerance: c"udp_loss_tolerance", int(DEFAULT_LOSS_TOLERANCE_PERCENT as i32, Rule::Clamped { min: 0, max: 100 }), TUNER, Everyone,
        c"Percent of the last congestion window of fragments (at least 64) that one receiver may report lost before a bcast over udp takes it for congestion and halves its window; fewer reports are random loss, repaired without slowing down (0..=100, default 10; 0 halves on every new loss, as TCP does; a timeout always shrinks the window)";
    UdpRepairBackoff: c"udp_repair_backoff", int(DEFAULT_REPEAT_DOUBLINGS as i32, Rule::Clamped { min: 0, max: MAX_REPEAT_DOUBLINGS as i32 }), TUNER, Everyone,
        c"How many times the udp transport's repeat timers double while random loss keeps defeating a repair: the reliable channel's retransmission timeout towards a peer whose ACKs stay away, and a bcast receiver's interval before it repeats a NACK whose pieces have not come. 2 (default): at most 4x the measured round-trip timeout, so a third loss in a row of the same repair waits no longer than the second; 6 was the rule before (up to 64x, a large part of a second on a loaded node). A lost repair is as likely to get through the next time, so doubling buys nothing against random loss; the bound still spaces the repeats to a rank slow to be scheduled (0..=16, default 2)";
    UdpSegmentationOffload: c"udp_segmentation_offload", int(1, SWITCH), TUNER, Everyone,
        c"1 (default): a bcast root over udp hands runs of up to 64 KiB of datagrams to the kernel in one segmented send (UDP GSO, Linux 4.18), and receivers take them in with one receive (UDP GRO, Linux 5.0), where the kernel offers it (else one datagram per system call, said at verbose 2); the datagrams on the wire are the same. 0: one datagram per system call";
    UdpProtection: c"udp_protection", text(c"encrypt"), USER, Everyone,
        c"How the udp transport protects its frames (docs/security.md): encrypt (default): every frame authenticated (by coll_rdma_udp_cipher under a key rank 0 draws per communicator and hands the others through Open MPI's own transport) and its payload encrypted, so that other users of the hosts or the link can neither read bcast data nor inject frames; authenticate: the same authentication, payload in clear; none: neither (frames carry only a nonce in clear, for a fabric the site trusts; verbose 1 warns). Every rank must read the same value (else every rank falls back to the module underneath, naming it). Unknown values warn and use encrypt";
    UdpCipher: c"udp_cipher", text(c"aegis-128l"), USER, Everyone,
        c"The AEAD that seals udp frames under coll_rdma_udp_protection encrypt or authenticate (docs/security.md): aegis-128l (default; AEGIS-128L, RFC 10032, about half AES-256-GCM's CPU time per byte on AES-NI hardware) or aes-256-gcm. Every rank must read the same value (else every rank falls back to the module underneath, naming it). Unknown values warn and use aegis-128l";
    BarrierRadix: c"barrier_radix", int(0, Rule::AutoOr { auto: 0, valid: Span::Between(1, MAX_BARRIER_RADIX as i32) }), TUNER, Everyone,
        c"n of the n-way dissemination barrier (peers notified per round): 0 chooses per communicator from the cost model; 1..=64 fixes it. Invalid values warn and use the automatic choice";
    SpinPolls: c"spin_polls", int(-1, AUTO_OR_ANY), TUNER, Everyone,
        c"Polls before a waiting rank starts yielding its core, in every wait (a flag, a multicast piece, room in a ring or send queue): -1 chooses (spin when the node has a core per rank, yield at once when oversubscribed; waits for room spin 1000); 0 or more fixes it";
    StallWarning: c"stall_warning", int(10, Rule::AtLeast { min: 0, requirement: "seconds >= 0" }), TUNER, Everyone,
        c"Seconds a rank may wait inside a coll rdma collective before it warns that a peer seems stuck (repeated at every doubling); 0 never warns";
    FaultTimeoutS: c"fault_timeout_s", int(0, Rule::AtLeast { min: 0, requirement: "seconds >= 0, 0 = never" }), TUNER, Everyone,
        c"Seconds a rank may wait inside a coll rdma collective without progress before the collective fails with MPI_ERR_OTHER, reporting the job as hung with what it waited for; 0 (the default) waits as long as the peers take, as stock Open MPI does, warning at coll_rdma_stall_warning; a failed link or peer fails it at once";
    ModelLatencyNs: c"model_latency_ns", int(BarrierModel::SHARED_MEMORY.latency_ns as i32, Rule::AtLeast { min: 1, requirement: "must be > 0" }), TUNER, Everyone,
        c"Barrier radix model: nanoseconds for one flag write to become visible at its target (must be > 0)";
    ModelPutGapNs: c"model_put_gap_ns", int(BarrierModel::SHARED_MEMORY.put_gap_ns as i32, AT_LEAST_ZERO), TUNER, Everyone,
        c"Barrier radix model: extra nanoseconds per additional flag write issued in the same round (must be >= 0)";
    Autotune: c"autotune", int(0, SWITCH), TUNER, Everyone,
        c"1: on each communicator whose radix is not fixed (coll_rdma_barrier_radix 0), the first barriers try radix 1, the model's pick and its neighbours in turn (at most 4 radices, coll_rdma_autotune_calls calls each), one allreduce of their slowest-rank median times picks the fastest, and every rank keeps it from the same call on. Likewise, where the allreduce degree is not fixed (coll_rdma_allreduce_degree 0), before the first allreduce the degree-k tree serves, every rank runs degree 1, the model's pick and its neighbours (those whose tree fits the window's slot rings, at most 4) in turn for coll_rdma_autotune_calls trial allreduces each, of that call's length but at most one segment (coll_rdma_allreduce_segment_size), with a barrier before each change of degree, and one allreduce agrees on the lowest slowest-rank median: at most 4 x coll_rdma_autotune_calls allreduces of at most one segment, as many barriers plus one, and one allreduce of at most 72 bytes per communicator, once. Verbose 1 prints both measured tables and each trial's cost. 0 (default): the model's picks. Off by default because the trial's calls run the slower radices too and its allreduce adds a call, on every communicator, while on one node the radices differ by less than a loaded machine's noise (docs/design.md, self-tuning)";
    AutotuneCalls: c"autotune_calls", int(8, Rule::Within { min: 1, max: 1000 }), TUNER, Everyone,
        c"Calls per candidate in coll_rdma_autotune's trials: barrier calls per radix, trial allreduces per degree (each trial takes candidates x this many calls; 1..=1000, else warns and uses 8)";
    TestRunningVersion: c"test_running_version", text(c""), DEV, Testing,
        c"Testing only: pretend the running Open MPI reports this version, to exercise the check that disqualifies coll rdma inside an Open MPI other than the one it was built against; empty uses the real version";
    TestModuleClassSize: c"test_module_class_size", int(0, Rule::PositiveOrOff), DEV, Testing,
        c"Testing only: pretend the running Open MPI's mca_coll_base_module_t has this many bytes, to exercise the check that disqualifies coll rdma when the running library's structures differ from those it was built against (e.g. a debug build of the same version); 0 uses the real size";
    TestPanicAt: c"test_panic_at", text(c""), DEV, Testing,
        c"Testing only: COLLECTIVE:N (barrier, allreduce, reduce or bcast) makes coll rdma panic inside the N-th call of that collective on every communicator, to exercise the recovery (the call returns an error, later calls go to the module underneath); empty injects nothing";
    TestThreadStopAt: c"test_thread_stop_at", text(c""), DEV, Testing,
        c"Testing only: COLLECTIVE:N (barrier, allreduce, reduce or bcast) makes the first thread of communicator rank 1 that enters the N-th call of that collective on its communicator stop there for good, holding the communicator and sending nothing more, as a thread killed mid-collective would (the process goes on), to check that the job then ends with a diagnostic (coll_rdma_fault_timeout_s on the peers) rather than hanging; empty injects nothing";
    TestPackFailureAt: c"test_pack_failure_at", int(0, Rule::PositiveOrOff), DEV, Testing,
        c"Testing only: N > 0 makes the N-th bcast root on a communicator that packs a non-contiguous datatype fail to pack, to exercise the recovery (every rank's call returns an error, later calls go to the module underneath); 0 injects nothing";
    TestSetupPauseS: c"test_setup_pause_s", int(0, Rule::PositiveOrOff), DEV, Testing,
        c"Testing only: N > 0 makes every rank but 0 pause N seconds between agreeing on the settings and setting up a communicator's transport, so that a test can kill rank 0 while its new shared-memory segment waits for the others; 0 pauses nowhere";
    TestPretendNoCrossMemory: c"test_pretend_no_cross_memory", int(0, SWITCH), DEV, Testing,
        c"Testing only: 1 makes this rank report, when a communicator's shared memory is set up, that it cannot read its peers' memory with process_vm_readv, so that every rank's bcast takes the window (copy in, copy out) instead of single copy, and allreduce and reduce the window up to their old limits instead of the parallel reduction; 0 pretends nothing";
    TestUdpLossPercent: c"test_udp_loss_percent", int(0, Rule::Within { min: 0, max: 99 }), DEV, Testing,
        c"Testing only: percent of the datagrams the udp transport receives (multicast and unicast, data and ACKs) that it loses on purpose, from a generator seeded per communicator and rank, to exercise retransmission; setup's probes are spared (0..=99; 100 would lose everything)";
    TestUdpDuplicatePercent: c"test_udp_duplicate_percent", int(0, Rule::Within { min: 0, max: 100 }), DEV, Testing,
        c"Testing only: percent of the datagrams the udp transport receives that it takes in twice (0..=100)";
    TestUdpReorderPercent: c"test_udp_reorder_percent", int(0, Rule::Within { min: 0, max: 100 }), DEV, Testing,
        c"Testing only: percent of the datagrams the udp transport receives that it holds back behind up to 8 later ones (0..=100)";
    AllreduceDegree: c"allreduce_degree", int(0, DEGREE), TUNER, Everyone,
        c"Degree k of the allreduce tree (senders per receiver and step): 0 chooses per communicator from the cost model; 1..=64 fixes it";
    AllreduceSegmentSize: c"allreduce_segment_size", int(8192, SEGMENT), TUNER, Everyone,
        c"Bytes per allreduce slot: longer messages are pipelined through the tree in segments of this size (64..=1048576)";
    AllreduceExchangeMax: c"allreduce_exchange_max", int(-1, Rule::AutoOr { auto: -1, valid: Span::Between(0, EXCHANGE_LIMIT_BYTES as i32) }), TUNER, Everyone,
        c"Messages of at most this many bytes use the exchange variant (every rank writes its contribution to every other and reduces locally: one transfer instead of reduce + broadcast): -1 chooses from the cost model, 0 never uses it, at most 4096";
    AllreduceMaxBytes: c"allreduce_max_bytes", int(16384, Rule::ByteLimit), TUNER, Everyone,
        c"Allreduce messages larger than this many bytes are handed to the module underneath, unless they are reduced in parallel (coll_rdma_allreduce_parallel_min_bytes) or around the ring (coll_rdma_allreduce_ring_min_bytes) or their op is not commutative (served at every length: the module underneath may not keep the rank order); -1 never hands them over";
    AllreduceParallelMinBytes: c"allreduce_parallel_min_bytes", int(16384, Rule::ByteLimit), TUNER, Everyone,
        c"On shared memory where every rank can read every other's memory (process_vm_readv; probed once per communicator), allreduce messages of at least this many bytes are reduced in parallel: each rank reduces its own slice of every rank's input, read straight from the peers' buffers, and writes it straight into every rank's result buffer (process_vm_writev); coll_rdma_allreduce_max_bytes does not apply to them, so with the defaults every length is served natively. Where the ranks cannot read each other's memory, the ring serves instead (coll_rdma_allreduce_ring_min_bytes; said at verbose 2). -1 never (no probe for it)";
    RingSegmentSize: c"ring_segment_size", int(65536, SEGMENT), TUNER, Everyone,
        c"Bytes per slot of the ring that allreduce and reduce share (coll_rdma_allreduce_ring_min_bytes): each rank's window holds two, written by its left neighbour (64..=1048576).";
    UdpRingMaxBytes: c"udp_ring_max_bytes", int(262144, Rule::ByteLimit), TUNER, Everyone,
        c"On the udp transport, allreduce and reduce messages longer than this do not go around the ring (coll_rdma_allreduce_ring_min_bytes), so the size limits coll_rdma_allreduce_max_bytes / coll_rdma_reduce_max_bytes hand them to the module underneath: udp moves a put one datagram at a time, where TCP streams. -1: no bound (the ring at any length on udp too)";
    AllreduceRingMinBytes: c"allreduce_ring_min_bytes", int(16384, Rule::ByteLimit), TUNER, Everyone,
        c"Allreduce messages the parallel reduction does not take (the ranks cannot read each other's memory: across nodes over verbs or udp, or shared memory with process_vm_readv refused; or they are shorter than coll_rdma_allreduce_parallel_min_bytes) of at least this many bytes with a commutative op go around a ring: a reduce-scatter, then an allgather, each rank putting to the next one only (each rank moves 2(P-1)/P of the message, where the tree's busiest rank moves a whole message per child); coll_rdma_allreduce_max_bytes does not apply to them, so with the defaults every length is served natively. Non-commutative ops keep the tree, which folds in rank order. -1 never";
    ReduceDegree: c"reduce_degree", int(0, DEGREE), TUNER, Everyone,
        c"Degree k of the reduce tree: 0 chooses per communicator from the cost model (where a one-node job has more ranks than cores, with each step costing at least 2 us, a core handed over: a flatter tree); 1..=64 fixes it";
    ReduceSegmentSize: c"reduce_segment_size", int(8192, SEGMENT), TUNER, Everyone,
        c"Bytes per reduce slot: longer messages are pipelined in segments of this size (64..=1048576)";
    ReduceMaxBytes: c"reduce_max_bytes", int(8192, Rule::ByteLimit), TUNER, Everyone,
        c"Reduce messages larger than this many bytes are handed to the module underneath, unless they are reduced in parallel (coll_rdma_reduce_parallel_min_bytes) or around the ring (coll_rdma_reduce_ring_min_bytes) or their op is not commutative (served at every length: the module underneath may not keep the rank order); -1 never hands them over";
    ReduceParallelMinBytes: c"reduce_parallel_min_bytes", int(8192, Rule::ByteLimit), TUNER, Everyone,
        c"As coll_rdma_allreduce_parallel_min_bytes for reduce: the ranks' inputs are read straight from their buffers (process_vm_readv), by the root alone below coll_rdma_reduce_parallel_slices_min_bytes, in slices from it (each rank reduces its own slice of every rank's input, the root a larger one since it delivers nothing, and writes it into the root's result buffer); coll_rdma_reduce_max_bytes does not apply to them, so with the defaults (the tree up to 8191 bytes, this from 8192) every length is served natively. -1 never, and no probe for it";
    ReduceRingMinBytes: c"reduce_ring_min_bytes", int(8192, Rule::ByteLimit), TUNER, Everyone,
        c"As coll_rdma_allreduce_ring_min_bytes for reduce: the same ring, the result kept at the root (its allgather costs each link what a gather costs the root's); coll_rdma_reduce_max_bytes does not apply to these messages. -1 never";
    ReduceParallelSlicesMinBytes: c"reduce_parallel_slices_min_bytes", int(131072, Rule::ByteLimit), TUNER, Everyone,
        c"Reduces served by the parallel reduction (coll_rdma_reduce_parallel_min_bytes) of at least this many bytes are split into slices, one per rank (one per core where a one-node job has more ranks than cores); shorter ones the root reduces alone: it reads every rank's input with process_vm_readv (the first one straight into its result buffer) and folds it, while the others only announce their buffers and wait: one read per peer and one synchronisation round, against a read and a write per rank and two rounds for slices. On 4 ranks or more, where the op is commutative or the root is rank 0, the shorter ones go down a binomial tree of reads instead: each rank reads its children's partial results and folds them, so the root reads about log2 of the ranks' vectors while other ranks fold theirs. -1 never splits";
    ReductionModelLatencyNs: c"reduction_model_latency_ns", int(AllreduceModel::SHARED_MEMORY.message_latency_ns as i32, Rule::AtLeast { min: 1, requirement: "must be >= 1" }), TUNER, Everyone,
        c"Allreduce/reduce degree model: nanoseconds from issuing a small put to its target seeing it (> 0)";
    ReductionModelTransferPsPerByte: c"reduction_model_transfer_ps_per_byte", int((AllreduceModel::SHARED_MEMORY.transfer_ns_per_byte * 1000.0) as i32, AT_LEAST_ZERO), TUNER, Everyone,
        c"Allreduce/reduce degree model: picoseconds to move one byte into a peer's window (>= 0)";
    ReductionModelCombinePsPerByte: c"reduction_model_combine_ps_per_byte", int((AllreduceModel::SHARED_MEMORY.reduce_ns_per_byte * 1000.0) as i32, AT_LEAST_ZERO), TUNER, Everyone,
        c"Allreduce/reduce degree model: picoseconds to combine one byte with the MPI op (>= 0)";
    ReductionModelPutGapNs: c"reduction_model_put_gap_ns", int(AllreduceModel::SHARED_MEMORY.put_gap_ns as i32, AT_LEAST_ZERO), TUNER, Everyone,
        c"Allreduce/reduce degree model: nanoseconds each further message of the same step adds at its receiver (>= 0)";
    BcastWindow: c"bcast_window", int(64, Rule::Clamped { min: 1, max: 4096 }), TUNER, Everyone,
        c"Bcast sliding window: pieces a root may have in flight before every receiver has taken them (credits; 1..=4096)";
    BcastSlotSize: c"bcast_slot_size", int(4096, SEGMENT), TUNER, Everyone,
        c"Bytes per bcast window slot on shared memory, and per segment of the put tree where a transport has no multicast; longer messages are fragmented (64..=1048576)";
    BcastFragmentSize: c"bcast_fragment_size", int(4096, SEGMENT), TUNER, Everyone,
        c"Bytes per multicast datagram on datagram transports (verbs UD, UDP), lowered to what the transport carries (64..=1048576)";
    BcastCoRoots: c"bcast_co_roots", int(-1, AUTO_OR_ANY), TUNER, Everyone,
        c"Co-roots that receive every message reliably and collect their subgroup's ACKs (datagram transports): -1 chooses from the model of Liu, Mamidala and Panda (2004, section 7.2); 0 or more fixes it";
    BcastAckInterval: c"bcast_ack_interval", int(8, Rule::Clamped { min: 1, max: 4096 }), TUNER, Everyone,
        c"M of the lazy, skewed ACKs: receiver i acknowledges message B when B mod M = i mod M (1..=4096, lowered to the window)";
    BcastTimeoutMs: c"bcast_timeout_ms", int(20, Rule::Clamped { min: 1, max: i32::MAX }), TUNER, Everyone,
        c"Milliseconds without an ACK before a collector retransmits to a receiver (doubling while it stays silent); >= 1";
    BcastNack: c"bcast_nack", int(1, SWITCH), TUNER, Everyone,
        c"1: a receiver that sees a gap asks its collector at once (a loss costs one round trip, not a timeout); 0: rely on timeouts";
    BcastTailRepeat: c"bcast_tail_repeat", int(DEFAULT_TAIL_REPEAT as i32, Rule::Clamped { min: 0, max: 4096 }), TUNER, Everyone,
        c"Datagram transports (verbs UD, udp): the root multicasts the last this many pieces of every bcast message (every piece of a shorter one) a second time, after its forwards to the co-roots, so that a receiver that lost a message's tail takes the copy instead of waiting for coll_rdma_bcast_timeout_ms (0..=4096; 0 sends each piece once; default 1, chosen with the simulator, docs/scale)";
    BcastParityPercent: c"bcast_parity_percent", int(DEFAULT_PARITY_PERCENT as i32, Rule::Clamped { min: 0, max: 100 }), TUNER, Everyone,
        c"Datagram transports (verbs UD, udp): the root follows each block of up to 64 pieces of a bcast message with Reed-Solomon parity pieces, as many as the loss it has seen calls for but at most this percentage of the block (at least one piece), so that a receiver that lost no more pieces of a block than it has parity rebuilds them without a NACK (0..=100; 0 sends no parity; none is sent while no loss is seen)";
    BcastMaxBytes: c"bcast_max_bytes", int(-2, Rule::AutoOr { auto: -2, valid: Span::From(-1) }), TUNER, Everyone,
        c"Bcast messages larger than this many bytes that go through the window (copy in, copy out; the multicast; the put tree where a transport has no multicast) are handed to the module underneath: -2 (default) chooses per communicator from the model for the transport in use (tuning: what the root spends per byte against the module underneath's pipelined tree), never below 67108864 (64 MiB), and says so at verbose level 2; -1 never hands them over; 0 or more fixes it. Single-copy messages have their own limit (coll_rdma_bcast_single_copy_max_bytes)";
    BcastSingleCopyMinBytes: c"bcast_single_copy_min_bytes", int(-2, Rule::AutoOr { auto: -2, valid: Span::From(-1) }), TUNER, Everyone,
        c"On shared memory where every rank can read every other's memory (process_vm_readv; probed once per communicator, refused e.g. by a Yama ptrace_scope of 1 or more), bcast messages of at least this many bytes are copied by each receiver straight from the root's buffer, and the root returns once all have them; shorter ones, and every length where the probe is refused, go through the window (copy in, copy out). -2 (default) chooses by the job's placement: 8192 where every rank has a core, 524288 where the job's ranks outnumber the cores of their node (there a receiver waits for a core to read on while the root waits for it); -1 never, and no probe; 0 or more fixes it";
    BcastSingleCopyMaxBytes: c"bcast_single_copy_max_bytes", int(-1, Rule::ByteLimit), TUNER, Everyone,
        c"Bcast messages that single copy serves and that are larger than this many bytes are handed to the module underneath; for them it replaces coll_rdma_bcast_max_bytes. -1 (default) never hands them over";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_sits_at_its_id() {
        for (index, param) in TABLE.iter().enumerate() {
            assert_eq!(param.id as usize, index, "{}", param.short_name());
        }
    }

    #[test]
    fn names_are_unique_and_testing_ones_say_so() {
        for (index, param) in TABLE.iter().enumerate() {
            assert!(TABLE[..index].iter().all(|other| other.name != param.name), "{} twice", param.short_name());
            let testing = param.audience == Audience::Testing;
            assert_eq!(testing, param.short_name().starts_with("test_"), "{}", param.short_name());
            assert_eq!(testing, param.help.to_bytes().starts_with(b"Testing only:"), "{}", param.short_name());
        }
    }

    #[test]
    fn every_default_follows_its_own_rule() {
        for param in TABLE {
            if let Kind::Int { default, rule } = param.kind {
                let (_, warning) = rule.check(param.short_name(), default, default);
                assert_eq!(warning, None, "{}", param.short_name());
            }
        }
    }

    #[test]
    fn model_defaults_are_the_models_exactly() {
        // The parameters are integers; a model constant with a fraction
        // would silently change when it goes through its parameter.
        let default = |id: Id| match TABLE[id as usize].kind {
            Kind::Int { default, .. } => f64::from(default),
            Kind::Text { .. } => unreachable!(),
        };
        assert_eq!(default(Id::ModelLatencyNs), BarrierModel::SHARED_MEMORY.latency_ns);
        assert_eq!(default(Id::ModelPutGapNs), BarrierModel::SHARED_MEMORY.put_gap_ns);
        let model = AllreduceModel::SHARED_MEMORY;
        assert_eq!(default(Id::ReductionModelLatencyNs), model.message_latency_ns);
        assert_eq!(default(Id::ReductionModelTransferPsPerByte) / 1000.0, model.transfer_ns_per_byte);
        assert_eq!(default(Id::ReductionModelCombinePsPerByte) / 1000.0, model.reduce_ns_per_byte);
        assert_eq!(default(Id::ReductionModelPutGapNs), model.put_gap_ns);
    }
}
