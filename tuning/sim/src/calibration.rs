//! The simulator's parameters: a LogGP level for shared memory inside a
//! node and one for the network between nodes, a multicast with a loss
//! rate, CPU costs, and the reliable-multicast settings (defaults from
//! btl-ibmc's `RmcastConfig`).
//!
//! The file format is one `key = value` per line, `#` starts a comment.
//! Several files may be layered: a later file overrides an earlier one,
//! key by key. The format has no sections or nesting, so a hand-written
//! reader of a few lines is enough (no TOML crate).

use std::collections::BTreeSet;

use btl_ibmc::RmcastConfig;

/// One LogGP level, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Level {
    /// L: from the end of the sender's overhead to the data being visible
    /// at the receiver.
    pub latency_ns: f64,
    /// o: the CPU time the sender spends posting one message, and the
    /// receiver taking one in.
    pub overhead_ns: f64,
    /// g: the least time between two messages leaving one sender (on the
    /// network: one node's NIC, shared by the node's ranks).
    pub gap_ns: f64,
    /// G: time per byte on the wire (or per byte copied, on a node).
    pub gap_per_byte_ns: f64,
    /// What a two-sided MPI send or receive adds to `overhead_ns` at each
    /// end (matching, protocol): paid by Open MPI's algorithms, which run
    /// over point-to-point messages, not by coll rdma's one-sided writes.
    pub mpi_overhead_ns: f64,
}

impl Level {
    /// Time the sender is busy with one message of `bytes`.
    pub fn send_busy_ns(&self, bytes: usize) -> f64 {
        self.overhead_ns + self.gap_per_byte_ns * bytes as f64
    }

    /// Least time between the starts of two consecutive sends of `bytes`.
    pub fn send_interval_ns(&self, bytes: usize) -> f64 {
        self.gap_ns.max(self.send_busy_ns(bytes))
    }

    /// From the start of a send to the data being at the receiver (before
    /// the receiver's overhead).
    pub fn arrival_after_ns(&self, bytes: usize) -> f64 {
        self.send_busy_ns(bytes) + self.latency_ns
    }
}

/// The datagram multicast between nodes.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Multicast {
    /// Posting one datagram at the root (T_ud).
    pub post_ns: f64,
    /// From the post to the datagram at the farthest node (T_mc).
    pub latency_ns: f64,
    /// Serialisation per byte of a datagram.
    pub gap_per_byte_ns: f64,
    /// Each further receiving rank on one node gets the datagram this much
    /// later (the adapter replicates it to every attached queue pair).
    pub node_replica_ns: f64,
    /// Probability that one receiver misses one datagram.
    pub loss: f64,
}

/// Everything the simulator needs.
#[derive(Clone, Copy, Debug)]
pub struct Calibration {
    pub shm: Level,
    pub net: Level,
    /// Each further rank polling one flag line on a node sees it this much
    /// later (the line is handed from reader to reader).
    pub shm_flag_reader_ns: f64,
    pub multicast: Multicast,
    /// A memory copy, per byte (into or out of a window).
    pub copy_ns_per_byte: f64,
    /// Combining one byte of a partial result (the MPI op).
    pub combine_ns_per_byte: f64,
    /// Ports per switch of the network's fat tree (0: one switch whatever
    /// the node count). With more nodes than one switch has ports, every
    /// message between nodes (multicast included) crosses two more
    /// switches per extra level of the tree.
    pub switch_ports: usize,
    /// What each further switch on the way adds to the latency.
    pub switch_hop_ns: f64,
    pub rmcast: RmcastSettings,
}

/// The reliable-multicast rules the simulation follows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RmcastSettings {
    pub window_slots: usize,
    pub fragment_bytes: usize,
    /// The lazy-ACK interval M actually used.
    pub ack_interval: usize,
    /// A collector resends to a silent member this long after sending it
    /// the first piece it misses.
    pub timeout_ns: f64,
    /// A receiver acknowledges explicitly once a delivery waited this long.
    pub ack_delay_ns: f64,
    pub nack: bool,
    /// The last this many pieces of a message are multicast twice
    /// (`btl_ibmc::rmcast::repair`).
    pub tail_repeat: usize,
    /// Candidates studied, not built (None: as the component does):
    /// the root probes "the last piece is s" this many round trips after
    /// posting it, so a receiver that lost it NACKs at once;
    pub tail_probe_round_trips: Option<f64>,
    /// and the collector's timeout is this many round trips instead of
    /// `timeout_ns`.
    pub timeout_round_trips: Option<f64>,
}

impl Default for RmcastSettings {
    /// btl-ibmc's defaults, read from `RmcastConfig::default()`.
    fn default() -> Self {
        let config = RmcastConfig::default();
        RmcastSettings {
            window_slots: config.window_slots,
            fragment_bytes: config.fragment_bytes,
            ack_interval: config.effective_ack_interval() as usize,
            timeout_ns: config.timeout.as_nanos() as f64,
            ack_delay_ns: config.ack_delay().as_nanos() as f64,
            nack: config.nack,
            tail_repeat: config.tail_repeat,
            tail_probe_round_trips: None,
            timeout_round_trips: None,
        }
    }
}

impl Default for Calibration {
    /// All costs zero: a file (or a test) sets what it needs.
    fn default() -> Self {
        Calibration {
            shm: Level::default(),
            net: Level::default(),
            shm_flag_reader_ns: 0.0,
            multicast: Multicast::default(),
            copy_ns_per_byte: 0.0,
            combine_ns_per_byte: 0.0,
            switch_ports: 0,
            switch_hop_ns: 0.0,
            rmcast: RmcastSettings::default(),
        }
    }
}

/// The keys a calibration must set, across all its files, before use.
pub const REQUIRED_KEYS: [&str; 4] = ["shm.latency_ns", "net.latency_ns", "mcast.latency_ns", "copy_ns_per_byte"];

impl Calibration {
    /// Switches a message between two of `nodes` nodes crosses on its
    /// longest way through the fat tree: 2·levels - 1.
    pub fn switch_hops(&self, nodes: usize) -> usize {
        if self.switch_ports < 2 {
            return 1;
        }
        let (mut levels, mut reach) = (1usize, self.switch_ports);
        while reach < nodes {
            levels += 1;
            reach = reach.saturating_mul((self.switch_ports / 2).max(2));
        }
        2 * levels - 1
    }

    /// Latency the fat tree adds between nodes, over one switch's.
    pub fn extra_network_latency_ns(&self, nodes: usize) -> f64 {
        (self.switch_hops(nodes) - 1) as f64 * self.switch_hop_ns
    }

    /// Applies one file's text on top of `self`; returns the keys it set.
    pub fn apply(&mut self, text: &str, origin: &str) -> Result<BTreeSet<String>, String> {
        let mut set = BTreeSet::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let at = || format!("{origin}:{}", index + 1);
            let (key, value) = line.split_once('=').ok_or_else(|| format!("{}: expected `key = value`, got `{line}`", at()))?;
            let (key, value) = (key.trim(), value.trim());
            let number: f64 = value.parse().map_err(|_| format!("{}: `{value}` is not a number", at()))?;
            if !number.is_finite() || number < 0.0 {
                return Err(format!("{}: {key} must be a finite number >= 0", at()));
            }
            self.set(key, number).map_err(|why| format!("{}: {why}", at()))?;
            set.insert(key.to_string());
        }
        Ok(set)
    }

    fn set(&mut self, key: &str, value: f64) -> Result<(), String> {
        let whole = |value: f64| -> Result<usize, String> {
            if value.fract() != 0.0 || value < 1.0 {
                return Err(format!("{key} must be a whole number >= 1"));
            }
            Ok(value as usize)
        };
        if let Some((prefix, field)) = key.split_once('.')
            && (prefix == "shm" || prefix == "net")
            && !field.starts_with("switch_")
        {
            let target = if prefix == "shm" { &mut self.shm } else { &mut self.net };
            match field {
                "latency_ns" => target.latency_ns = value,
                "overhead_ns" => target.overhead_ns = value,
                "gap_ns" => target.gap_ns = value,
                "gap_per_byte_ns" => target.gap_per_byte_ns = value,
                "mpi_overhead_ns" => target.mpi_overhead_ns = value,
                "flag_reader_ns" if prefix == "shm" => self.shm_flag_reader_ns = value,
                _ => return Err(format!("unknown key `{key}`")),
            }
            return Ok(());
        }
        match key {
            "mcast.post_ns" => self.multicast.post_ns = value,
            "mcast.latency_ns" => self.multicast.latency_ns = value,
            "mcast.gap_per_byte_ns" => self.multicast.gap_per_byte_ns = value,
            "mcast.node_replica_ns" => self.multicast.node_replica_ns = value,
            "mcast.loss" => {
                if value >= 1.0 {
                    return Err("mcast.loss must be below 1".to_string());
                }
                self.multicast.loss = value;
            }
            "copy_ns_per_byte" => self.copy_ns_per_byte = value,
            "combine_ns_per_byte" => self.combine_ns_per_byte = value,
            "net.switch_ports" => self.switch_ports = whole(value)?,
            "net.switch_hop_ns" => self.switch_hop_ns = value,
            "rmcast.window_slots" => self.rmcast.window_slots = whole(value)?,
            "rmcast.fragment_bytes" => self.rmcast.fragment_bytes = whole(value)?,
            "rmcast.ack_interval" => self.rmcast.ack_interval = whole(value)?,
            "rmcast.timeout_ns" => self.rmcast.timeout_ns = value,
            "rmcast.ack_delay_ns" => self.rmcast.ack_delay_ns = value,
            "rmcast.nack" => self.rmcast.nack = value != 0.0,
            "rmcast.tail_repeat" => self.rmcast.tail_repeat = whole(value)?,
            _ => return Err(format!("unknown key `{key}`")),
        }
        Ok(())
    }

    /// Reads and layers `paths` in order; every key of [`REQUIRED_KEYS`]
    /// must be set by one of them.
    pub fn from_files(paths: &[String]) -> Result<Calibration, String> {
        let mut calibration = Calibration::default();
        let mut set = BTreeSet::new();
        for path in paths {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            set.extend(calibration.apply(&text, path)?);
        }
        let missing: Vec<&str> = REQUIRED_KEYS.iter().copied().filter(|key| !set.contains(*key)).collect();
        if !missing.is_empty() {
            return Err(format!("the calibration sets none of: {}", missing.join(", ")));
        }
        Ok(calibration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_layer_key_by_key_and_errors_name_the_line() {
        let mut calibration = Calibration::default();
        let set = calibration
            .apply("# comment\nshm.latency_ns = 150 # trailing\nnet.gap_per_byte_ns=1.5\nrmcast.window_slots = 32\nnet.switch_ports = 24\n", "a")
            .expect("valid");
        assert_eq!(set.len(), 4);
        assert_eq!(calibration.switch_ports, 24);
        assert_eq!((calibration.shm.latency_ns, calibration.net.gap_per_byte_ns, calibration.rmcast.window_slots), (150.0, 1.5, 32));
        calibration.apply("shm.latency_ns = 99\n", "b").expect("valid");
        assert_eq!(calibration.shm.latency_ns, 99.0);
        assert_eq!(calibration.net.gap_per_byte_ns, 1.5, "untouched by the second file");
        assert!(calibration.apply("\n\nshm.nothing = 1\n", "c").unwrap_err().starts_with("c:3: unknown key"));
        assert!(calibration.apply("net.latency_ns = fast\n", "d").unwrap_err().contains("not a number"));
        assert!(calibration.apply("mcast.loss = 1\n", "e").unwrap_err().contains("below 1"));
        assert!(calibration.apply("rmcast.window_slots = 2.5\n", "f").unwrap_err().contains("whole number"));
        assert!(calibration.apply("no equals sign\n", "g").unwrap_err().contains("key = value"));
    }

    #[test]
    fn a_fat_tree_adds_two_switches_per_level() {
        let calibration = Calibration { switch_ports: 24, switch_hop_ns: 200.0, ..Calibration::default() };
        assert_eq!(calibration.switch_hops(8), 1);
        assert_eq!(calibration.switch_hops(24), 1);
        assert_eq!(calibration.switch_hops(25), 3);
        assert_eq!(calibration.switch_hops(288), 3);
        assert_eq!(calibration.switch_hops(1024), 5);
        assert_eq!(calibration.switch_hops(16384), 7);
        assert_eq!(calibration.extra_network_latency_ns(1024), 800.0);
        assert_eq!(Calibration::default().switch_hops(1 << 20), 1);
    }

    #[test]
    fn rmcast_defaults_are_btl_ibmc_s() {
        let config = RmcastConfig::default();
        let ours = RmcastSettings::default();
        assert_eq!(ours.window_slots, config.window_slots);
        assert_eq!(ours.fragment_bytes, config.fragment_bytes);
        assert_eq!(ours.timeout_ns, config.timeout.as_nanos() as f64);
        assert_eq!(ours.ack_delay_ns, ours.timeout_ns / 4.0);
        assert_eq!(ours.tail_repeat, config.tail_repeat);
    }
}
