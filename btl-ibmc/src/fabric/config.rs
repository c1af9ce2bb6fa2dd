//! What faults the test fabric injects. Every random decision comes from a
//! generator seeded by `seed`, so a failure is replayed by rerunning with
//! the seed the test printed.

use std::time::Duration;

use crate::shm::NodeGroups;
use crate::transport::MulticastKind;

#[derive(Clone, Debug, PartialEq)]
pub struct FabricConfig {
    /// Each put and put_flag first waits a random time up to this long,
    /// to create skew between ranks and late arrivals.
    pub put_delay_max: Duration,
    /// Each send_reliable first waits a random time up to this long: the
    /// in-process stand-in for a reliable channel that recovers loss by
    /// retransmission (RC under netem on the Soft-RoCE bed), whose
    /// messages arrive late relative to datagrams but never lost,
    /// duplicated, reordered or changed.
    pub reliable_delay_max: Duration,
    /// Probability that one receiver's copy of a datagram is lost.
    pub multicast_drop: f64,
    /// Probability that a delivered copy arrives twice.
    pub multicast_duplicate: f64,
    /// Probability that a copy overtakes up to [`REORDER_SPAN`](super::REORDER_SPAN)
    /// datagrams still waiting in the receiver's queue.
    pub multicast_reorder: f64,
    /// Largest datagram `multicast` accepts.
    pub max_datagram: usize,
    /// Which backend the fabric imitates. `Datagram` (the default): lossy
    /// multicast, and peers' windows reachable only by puts, as over a
    /// network. `SharedWindow`: no datagrams, but every window readable
    /// with `read_peer`/`peer_flag`, as on shared memory. `None`: neither.
    /// Offering only what the imitated backend offers keeps a collective
    /// from passing here by leaning on a primitive the real one lacks.
    pub multicast_kind: MulticastKind,
    /// Which ranks share a node, for collectives that treat node-local and
    /// remote peers differently; `None`: one node (or no notion of nodes).
    /// The fabric counts every put between nodes and records which pairs
    /// made them (`FabricEndpoint::inter_node_pairs`), so that a test can
    /// check which ranks crossed.
    pub nodes: Option<NodeGroups>,
    /// What a put between two nodes costs on top of `put_delay_max`: a
    /// fixed wait, so that crossing nodes is expensive and staying within
    /// one is cheap, as between an adapter and shared memory.
    pub inter_node_put_delay: Duration,
    pub seed: u64,
}

impl Default for FabricConfig {
    /// A perfect fabric: no delays, no loss, no duplicates, no reordering.
    fn default() -> Self {
        FabricConfig {
            put_delay_max: Duration::ZERO,
            reliable_delay_max: Duration::ZERO,
            multicast_drop: 0.0,
            multicast_duplicate: 0.0,
            multicast_reorder: 0.0,
            max_datagram: 4096,
            multicast_kind: MulticastKind::Datagram,
            nodes: None,
            inter_node_put_delay: Duration::ZERO,
            seed: 0,
        }
    }
}

impl FabricConfig {
    /// Panics naming the first probability outside [0, 1]: a config typo
    /// should stop the test, not silently inject nothing or everything.
    pub(crate) fn validate(&self) {
        for (name, p) in [
            ("multicast_drop", self.multicast_drop),
            ("multicast_duplicate", self.multicast_duplicate),
            ("multicast_reorder", self.multicast_reorder),
        ] {
            assert!((0.0..=1.0).contains(&p), "FabricConfig::{name} must be a probability in [0, 1], got {p}");
        }
    }
}
