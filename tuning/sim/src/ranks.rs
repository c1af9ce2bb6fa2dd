//! Where ranks sit and what a message between two of them costs.

use crate::calibration::{Calibration, Level};

/// `nodes` nodes of `ranks_per_node` ranks each, placed in blocks (ranks
/// 0..R-1 on node 0, ...), as mpirun maps by slot.
#[derive(Clone, Copy, Debug)]
pub struct Ranks<'a> {
    pub nodes: usize,
    pub ranks_per_node: usize,
    pub calibration: &'a Calibration,
    /// Whether messages pay the MPI layer's overhead (Open MPI's
    /// algorithms) or not (coll rdma's one-sided writes).
    pub two_sided: bool,
    /// What the fat tree adds to every message between nodes.
    pub extra_network_latency_ns: f64,
}

/// What one message between two ranks costs.
#[derive(Clone, Copy, Debug)]
pub struct Hop<'a> {
    pub level: &'a Level,
    pub crosses_nodes: bool,
    pub overhead_ns: f64,
    pub latency_ns: f64,
}

impl Hop<'_> {
    pub fn send_busy_ns(&self, bytes: usize) -> f64 {
        self.overhead_ns + self.level.gap_per_byte_ns * bytes as f64
    }

    /// When the sender's CPU may start its next send: on a node the gap
    /// binds the rank itself; between nodes it binds the node's adapter
    /// (see [`Nics`]).
    pub fn cpu_interval_ns(&self, bytes: usize) -> f64 {
        let busy = self.send_busy_ns(bytes);
        if self.crosses_nodes { busy } else { busy.max(self.level.gap_ns) }
    }

    pub fn arrival_after_ns(&self, bytes: usize) -> f64 {
        self.send_busy_ns(bytes) + self.latency_ns
    }

    /// Time the adapter is taken by one message.
    pub fn nic_busy_ns(&self, bytes: usize) -> f64 {
        self.level.gap_ns.max(self.level.gap_per_byte_ns * bytes as f64)
    }
}

impl<'a> Ranks<'a> {
    pub fn new(nodes: usize, ranks_per_node: usize, calibration: &'a Calibration) -> Self {
        assert!(nodes >= 1 && ranks_per_node >= 1, "at least one node of one rank");
        let extra_network_latency_ns = calibration.extra_network_latency_ns(nodes);
        Ranks { nodes, ranks_per_node, calibration, two_sided: false, extra_network_latency_ns }
    }

    /// The same ranks paying the MPI layer's overhead per message.
    pub fn two_sided(self) -> Self {
        Ranks { two_sided: true, ..self }
    }

    /// The same nodes with one rank each (the leaders of a two-level
    /// collective).
    pub fn leaders(self) -> Self {
        Ranks { ranks_per_node: 1, ..self }
    }

    pub fn size(&self) -> usize {
        self.nodes * self.ranks_per_node
    }

    pub fn node_of(&self, rank: usize) -> usize {
        rank / self.ranks_per_node
    }

    pub fn hop(&self, from: usize, to: usize) -> Hop<'a> {
        let crosses_nodes = self.node_of(from) != self.node_of(to);
        let level = if crosses_nodes { &self.calibration.net } else { &self.calibration.shm };
        let mpi = if self.two_sided { level.mpi_overhead_ns } else { 0.0 };
        let extra = if crosses_nodes { self.extra_network_latency_ns } else { 0.0 };
        Hop { level, crosses_nodes, overhead_ns: level.overhead_ns + mpi, latency_ns: level.latency_ns + extra }
    }
}

/// Each node's network adapter: messages leaving one node go out one
/// after the other, a gap apart, in the order their ranks post them.
pub struct Nics {
    free_at: Vec<f64>,
}

impl Nics {
    pub fn new(nodes: usize) -> Self {
        Nics { free_at: vec![0.0; nodes] }
    }

    /// The time a send ready at `ready` from `node` actually starts.
    pub fn start(&mut self, node: usize, ready: f64, busy: f64) -> f64 {
        let start = ready.max(self.free_at[node]);
        self.free_at[node] = start + busy;
        start
    }
}

/// One rank's own use of its node's adapter, for schedules where a rank
/// sends (or takes in) several messages between nodes in a row: they pass
/// one after the other, a gap apart.
#[derive(Default)]
pub struct Adapter {
    free_at: f64,
}

impl Adapter {
    /// When a message ready at `ready` passes; messages on the node pass at once.
    pub fn pass(&mut self, hop: &Hop, ready: f64, bytes: usize) -> f64 {
        if !hop.crosses_nodes {
            return ready;
        }
        let at = ready.max(self.free_at);
        self.free_at = at + hop.nic_busy_ns(bytes);
        at
    }
}

/// Largest value of a slice (0 for an empty one).
pub fn latest(times: &[f64]) -> f64 {
    times.iter().copied().fold(0.0, f64::max)
}
