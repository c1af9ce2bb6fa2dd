//! Which parameters are worth sweeping, with which candidate values and at
//! which message sizes, for the transport a job runs on and its process
//! count. A parameter that cannot change any schedule at that process count
//! or on that transport is not swept, and the reason goes into the file.
//!
//! Sizes are chosen so that every size range a candidate moves between two
//! code paths has a measured size in it (thresholds are swept at sizes a
//! factor 2 apart around them), because a value that helps at one size and
//! hands another to a slower path must show up as slower somewhere.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collective {
    Barrier,
    Allreduce,
    Reduce,
    Bcast,
}

impl Collective {
    /// As `bench/coll_pairs.c -c` and coll rdma's events name it.
    pub fn name(self) -> &'static str {
        match self {
            Collective::Barrier => "barrier",
            Collective::Allreduce => "allreduce",
            Collective::Reduce => "reduce",
            Collective::Bcast => "bcast",
        }
    }
}

/// Message sizes `min, min * factor, ...` up to `max`, as `coll_pairs -m
/// MIN:MAX -f FACTOR` runs them (barrier: size 0 only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    pub min: u64,
    pub max: u64,
    pub factor: u64,
}

impl Sizes {
    pub const NONE: Sizes = Sizes { min: 0, max: 0, factor: 2 };

    const fn span(min: u64, max: u64, factor: u64) -> Sizes {
        Sizes { min, max, factor }
    }

    const fn one(size: u64) -> Sizes {
        Sizes { min: size, max: size, factor: 2 }
    }

    pub fn list(&self) -> Vec<u64> {
        let mut sizes = vec![self.min];
        let mut size = self.min;
        while size > 0 && size * self.factor <= self.max {
            size *= self.factor;
            sizes.push(size);
        }
        sizes
    }
}

/// How long and how wide the sweeps are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// two sweeps, few pairs: for the test that the file works, not for a site
    Smoke,
    /// the parameters that matter most, a few candidates each (minutes)
    Quick,
    /// every parameter the transport uses, more candidates and sizes
    Full,
}

/// The transport coll rdma reported (its `comm_ready` event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    Shm,
    /// verbs, shm+verbs: RDMA writes and UD multicast between nodes
    Verbs(String),
    Udp,
    Other(String),
}

impl Transport {
    pub fn from_name(name: &str) -> Transport {
        match name {
            "shm" => Transport::Shm,
            "udp" => Transport::Udp,
            n if n.contains("verbs") => Transport::Verbs(n.to_string()),
            n => Transport::Other(n.to_string()),
        }
    }

    fn has_datagram_bcast(&self) -> bool {
        matches!(self, Transport::Verbs(_) | Transport::Udp)
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::Shm => f.write_str("shm"),
            Transport::Udp => f.write_str("udp"),
            Transport::Verbs(n) | Transport::Other(n) => f.write_str(n),
        }
    }
}

/// One parameter's sweep: the default (current value) against `candidates`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    /// without the `coll_rdma_` prefix
    pub param: &'static str,
    pub collective: Collective,
    pub sizes: Sizes,
    pub candidates: Vec<i64>,
}

impl Sweep {
    pub fn full_name(&self) -> String {
        format!("coll_rdma_{}", self.param)
    }
}

/// A parameter left out, and why (a comment in the file).
#[derive(Clone, Debug, PartialEq)]
pub struct NotSwept {
    pub param: &'static str,
    pub why: String,
}

pub struct Plan {
    pub sweeps: Vec<Sweep>,
    pub not_swept: Vec<NotSwept>,
}

/// Radix or degree candidates 1..=min(np - 1, most): a radix or degree of
/// np - 1 already reaches every peer in one round, so larger ones repeat it.
fn fanouts(np: usize, most: i64) -> Vec<i64> {
    (1..=most.min(np as i64 - 1)).collect()
}

/// The sweeps for `transport` at process count `np` (several process counts
/// give several plans; the tuner joins their points per parameter).
pub fn plan(transport: &Transport, np: usize, mode: Mode) -> Plan {
    use Collective::*;
    let mut sweeps = Vec::new();
    let mut not_swept = Vec::new();
    let full = mode == Mode::Full;
    let mut sweep = |param, collective, sizes, candidates: Vec<i64>| {
        sweeps.push(Sweep { param, collective, sizes, candidates })
    };
    let mut skip = |param, why: String| not_swept.push(NotSwept { param, why });

    if mode == Mode::Smoke {
        sweep("allreduce_exchange_max", Allreduce, Sizes::span(64, 1024, 16), vec![0, 4096]);
        if transport == &Transport::Shm {
            sweep("bcast_single_copy_min_bytes", Bcast, Sizes::span(16384, 65536, 4), vec![65536]);
        } else {
            sweep("bcast_slot_size", Bcast, Sizes::span(1024, 16384, 16), vec![1024, 16384]);
        }
        return Plan { sweeps, not_swept };
    }

    let one_round = format!("at np={np} every value gives the same schedule (one peer per round, one round)");
    if np >= 3 {
        sweep("barrier_radix", Barrier, Sizes::NONE, fanouts(np, if full { 8 } else { 4 }));
        let small = if full { Sizes::span(8, 8192, 4) } else { Sizes::span(64, 4096, 8) };
        sweep("allreduce_degree", Allreduce, small, fanouts(np, if full { 8 } else { 4 }));
        sweep("reduce_degree", Reduce, small, fanouts(np, if full { 8 } else { 4 }));
    } else {
        for param in ["barrier_radix", "allreduce_degree", "reduce_degree"] {
            skip(param, one_round.clone());
        }
    }
    if full {
        sweep("allreduce_exchange_max", Allreduce, Sizes::span(16, 4096, 4), vec![0, 64, 256, 1024, 4096]);
        sweep("allreduce_segment_size", Allreduce, Sizes::span(6144, 12288, 2), vec![1024, 2048, 4096, 16384]);
        sweep("reduce_segment_size", Reduce, Sizes::span(4096, 8192, 2), vec![1024, 2048, 4096]);
    } else {
        sweep("allreduce_exchange_max", Allreduce, Sizes::span(16, 4096, 4), vec![0, 256, 4096]);
        sweep("allreduce_segment_size", Allreduce, Sizes::one(12288), vec![2048, 4096, 16384]);
        sweep("reduce_segment_size", Reduce, Sizes::one(8192), vec![2048, 4096]);
    }

    if transport == &Transport::Shm {
        // the thresholds between the tree and the parallel reduction (and
        // the module underneath), and between window and single copy
        if full {
            sweep("allreduce_parallel_min_bytes", Allreduce, Sizes::span(2048, 131072, 2), vec![4096, 8192, 32768, 65536]);
            sweep("reduce_parallel_min_bytes", Reduce, Sizes::span(2048, 65536, 2), vec![4096, 16384, 65536]);
            sweep("reduce_parallel_slices_min_bytes", Reduce, Sizes::span(16384, 1048576, 2), vec![32768, 65536, 262144, 524288]);
            sweep("bcast_single_copy_min_bytes", Bcast, Sizes::span(4096, 262144, 2), vec![4096, 8192, 32768, 65536, 131072]);
            sweep("bcast_slot_size", Bcast, Sizes::span(512, 32768, 2), vec![1024, 2048, 8192, 16384, 32768]);
            sweep("bcast_window", Bcast, Sizes::span(16384, 32768, 2), vec![2, 4, 16]);
        } else {
            sweep("allreduce_parallel_min_bytes", Allreduce, Sizes::span(4096, 65536, 2), vec![4096, 8192, 32768]);
            // candidates on both sides of the defaults (the parallel
            // reduction from 8 KiB, in slices from 128 KiB)
            sweep("reduce_parallel_min_bytes", Reduce, Sizes::span(4096, 32768, 2), vec![4096, 16384]);
            sweep("reduce_parallel_slices_min_bytes", Reduce, Sizes::span(32768, 262144, 2), vec![65536, 262144]);
            sweep("bcast_single_copy_min_bytes", Bcast, Sizes::span(8192, 65536, 2), vec![8192, 32768, 65536]);
            // every factor 2: a slot of 16 KiB looked 2-6x faster at 8 and 32 KiB
            // here, and was 1.3x slower at 16 KiB, which sizes 4x apart skipped
            sweep("bcast_slot_size", Bcast, Sizes::span(2048, 32768, 2), vec![1024, 2048, 8192, 16384]);
            skip("bcast_window", "quick mode: on shared memory at the quick sizes the default window never fills".into());
        }
        skip("allreduce_max_bytes", "on shared memory where the ranks may read each other's memory the parallel reduction serves every length above its threshold, so this limit applies to nothing".into());
        skip("reduce_max_bytes", "on shared memory where the ranks may read each other's memory the parallel reduction serves every length above its threshold, so this limit applies to nothing".into());
        for param in ["allreduce_ring_min_bytes", "reduce_ring_min_bytes"] {
            skip(param, "on shared memory where the ranks may read each other's memory the parallel reduction takes the lengths the ring would".into());
        }
        skip("bcast_co_roots", "shared memory has no datagrams to acknowledge".into());
        skip("bcast_max_bytes", "on shared memory single copy serves the lengths this limit is about".into());
    } else if transport.has_datagram_bcast() {
        let bcast_sizes = if full { Sizes::span(1024, 1048576, 4) } else { Sizes::span(4096, 262144, 8) };
        sweep("bcast_fragment_size", Bcast, bcast_sizes, if full { vec![1024, 2048, 8192] } else { vec![2048, 8192] });
        sweep("bcast_window", Bcast, bcast_sizes, if full { vec![16, 32, 128, 256] } else { vec![16, 256] });
        if np >= 3 {
            sweep("bcast_co_roots", Bcast, bcast_sizes, fanouts(np, if full { 8 } else { 4 }));
        } else {
            skip("bcast_co_roots", "at np=2 the one receiver acknowledges to the root itself".into());
        }
        if full {
            sweep("bcast_ack_interval", Bcast, bcast_sizes, vec![2, 4, 16, 32]);
        }
        // where the ring (reduce-scatter, allgather) takes over from the
        // tree; -1 leaves every length to the tree up to the size limits
        sweep("allreduce_ring_min_bytes", Allreduce, Sizes::span(4096, 131072, 2), vec![4096, 65536, -1]);
        sweep("reduce_ring_min_bytes", Reduce, Sizes::span(2048, 131072, 2), vec![2048, 32768, -1]);
        for param in ["allreduce_max_bytes", "reduce_max_bytes"] {
            skip(param, "the ring serves the commutative ops above the tree's lengths, so this limit applies only where the ring is off (and, on udp, above coll_rdma_udp_ring_max_bytes)".into());
        }
        if transport == &Transport::Udp {
            // where the ring over udp's datagrams gives way to the module
            // underneath's TCP; -1 keeps the ring at every length
            sweep("udp_ring_max_bytes", Allreduce, Sizes::span(65536, 2097152, 2), vec![131072, 1048576, -1]);
        }
    } else {
        skip("bcast_*", format!("transport {transport}: the bcast sweeps are written for shm, verbs and udp"));
    }
    Plan { sweeps, not_swept }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(p: &Plan) -> Vec<&str> {
        p.sweeps.iter().map(|s| s.param).collect()
    }

    #[test]
    fn sizes_step_by_the_factor_and_stop_at_max() {
        assert_eq!(Sizes::span(4096, 65536, 2).list(), vec![4096, 8192, 16384, 32768, 65536]);
        assert_eq!(Sizes::span(16, 4096, 4).list(), vec![16, 64, 256, 1024, 4096]);
        assert_eq!(Sizes::span(64, 1000, 16).list(), vec![64]);
        assert_eq!(Sizes::NONE.list(), vec![0]);
    }

    #[test]
    fn np2_sweeps_no_radix_or_degree() {
        let p = plan(&Transport::Shm, 2, Mode::Quick);
        for param in ["barrier_radix", "allreduce_degree", "reduce_degree"] {
            assert!(!params(&p).contains(&param));
            assert!(p.not_swept.iter().any(|n| n.param == param && n.why.contains("np=2")));
        }
        assert!(params(&p).contains(&"bcast_single_copy_min_bytes"));
    }

    #[test]
    fn radix_candidates_stop_at_np_minus_one() {
        let p = plan(&Transport::Shm, 4, Mode::Full);
        let radix = p.sweeps.iter().find(|s| s.param == "barrier_radix").unwrap();
        assert_eq!(radix.candidates, vec![1, 2, 3]);
        assert_eq!(radix.sizes, Sizes::NONE);
    }

    #[test]
    fn thresholds_are_measured_on_both_sides_of_every_candidate() {
        for mode in [Mode::Quick, Mode::Full] {
            let p = plan(&Transport::Shm, 2, mode);
            for s in p.sweeps.iter().filter(|s| s.param.ends_with("_min_bytes") || s.param.ends_with("_max_bytes")) {
                let sizes = s.sizes.list();
                for c in &s.candidates {
                    let c = *c as u64;
                    assert!(sizes.iter().any(|z| *z >= c), "{} {c}: nothing measured at or above", s.param);
                }
            }
        }
    }

    #[test]
    fn datagram_transports_sweep_co_roots_and_not_single_copy() {
        let p = plan(&Transport::from_name("shm+verbs"), 8, Mode::Quick);
        assert!(params(&p).contains(&"bcast_co_roots"));
        assert!(!params(&p).contains(&"bcast_single_copy_min_bytes"));
        for (swept, skipped) in [("allreduce_ring_min_bytes", "allreduce_max_bytes"), ("reduce_ring_min_bytes", "reduce_max_bytes")] {
            assert!(params(&p).contains(&swept), "{swept}");
            assert!(p.not_swept.iter().any(|n| n.param == skipped && n.why.contains("the ring serves")), "{skipped}");
        }
        let p = plan(&Transport::Udp, 2, Mode::Quick);
        assert!(!params(&p).contains(&"bcast_co_roots"));
    }

    #[test]
    fn smoke_is_two_short_sweeps() {
        let p = plan(&Transport::Shm, 2, Mode::Smoke);
        assert_eq!(params(&p), vec!["allreduce_exchange_max", "bcast_single_copy_min_bytes"]);
    }
}
