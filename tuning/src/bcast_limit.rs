//! The default size limit of coll rdma's windowed bcast (a multicast
//! through the sliding window, or the put tree where there is none): above
//! it a message goes to the module underneath.
//!
//! For large messages both sides are bandwidth-bound at the root, so the
//! model compares what the root spends per byte. The window paths send
//! each byte from the root once (the shared window: one copy in, which the
//! readers copy out in parallel; a datagram multicast: one post that every
//! receiver takes), but the window holds only `window_bytes` at a time, so
//! the root can go no faster than a window per credit round trip. The put
//! tree sends each byte to every child of a binomial tree, ⌈log2 n⌉ of them
//! at the root. The module underneath (a pipelined binary tree for large
//! messages) sends each byte to at most two children. Where the root's
//! path costs no more per byte, no length is better served underneath and
//! there is no limit (the window bounds memory whatever the length);
//! otherwise the limit is [`SMALLEST_DEFAULT_LIMIT`], since below it the
//! window's shorter start-up decides.

/// No default limit lies below this many bytes (64 MiB).
pub const SMALLEST_DEFAULT_LIMIT: usize = 64 << 20;

/// Costs of a transport, per byte and per credit round trip.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BcastStreamModel {
    /// Nanoseconds to move one byte once (a memory copy, or the wire).
    pub byte_ns: f64,
    /// Nanoseconds from sending a piece to its credit coming back.
    pub round_trip_ns: f64,
}

impl BcastStreamModel {
    /// Shared memory: a copy at about 10 GB/s, a flag round trip of 0.3 µs.
    pub const SHARED_MEMORY: BcastStreamModel = BcastStreamModel { byte_ns: 0.1, round_trip_ns: 300.0 };
    /// Verbs: about 3 GB/s on the wire, an ACK round trip of 10 µs
    /// (lazy, skewed ACKs included).
    pub const VERBS: BcastStreamModel = BcastStreamModel { byte_ns: 0.33, round_trip_ns: 10_000.0 };
}

/// How the windowed bcast reaches its receivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowedBcast {
    /// Through a window of `window_bytes` (shared window or datagram multicast).
    Multicast { window_bytes: usize },
    /// Down a binomial tree of puts (no multicast).
    PutTree,
}

/// The limit the model picked, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct BcastLimitChoice {
    /// `None`: no limit.
    pub max_bytes: Option<usize>,
    pub reason: String,
}

/// The default limit for `size` ranks broadcasting by `path` on a
/// transport costed by `model`.
pub fn choose_bcast_max_bytes(size: usize, path: WindowedBcast, model: &BcastStreamModel) -> BcastLimitChoice {
    let receivers = size.saturating_sub(1).max(1);
    let underneath_ns = model.byte_ns * receivers.min(2) as f64;
    let (native_ns, how) = match path {
        WindowedBcast::Multicast { window_bytes } => {
            let window_paced = model.round_trip_ns / window_bytes.max(1) as f64;
            (model.byte_ns.max(window_paced), format!("the window of {window_bytes} bytes sends each byte from the root once"))
        }
        WindowedBcast::PutTree => {
            let children = usize::BITS - (size.max(2) - 1).leading_zeros();
            (model.byte_ns * f64::from(children), format!("the put tree sends each byte to {children} child(ren) at the root"))
        }
    };
    let costs = format!("{native_ns:.3} ns/byte vs {underneath_ns:.3} ns/byte for the module underneath's pipelined tree");
    if native_ns <= underneath_ns {
        BcastLimitChoice { max_bytes: None, reason: format!("no limit: {how} ({costs}), and the window bounds memory at any length") }
    } else {
        BcastLimitChoice {
            max_bytes: Some(SMALLEST_DEFAULT_LIMIT),
            reason: format!("{SMALLEST_DEFAULT_LIMIT} bytes, the smallest default limit: {how} ({costs})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: WindowedBcast = WindowedBcast::Multicast { window_bytes: 64 * 4096 };

    #[test]
    fn a_multicast_window_has_no_limit_on_either_transport() {
        for model in [BcastStreamModel::SHARED_MEMORY, BcastStreamModel::VERBS] {
            for size in [2, 3, 4, 8, 64, 1024] {
                let choice = choose_bcast_max_bytes(size, WINDOW, &model);
                assert_eq!(choice.max_bytes, None, "{size} ranks: {}", choice.reason);
                assert!(choice.reason.starts_with("no limit"), "{}", choice.reason);
            }
        }
    }

    #[test]
    fn a_window_too_small_for_its_round_trip_is_limited_but_not_below_64_mib() {
        let tiny = WindowedBcast::Multicast { window_bytes: 4096 };
        let choice = choose_bcast_max_bytes(8, tiny, &BcastStreamModel::VERBS);
        assert_eq!(choice.max_bytes, Some(64 << 20), "{}", choice.reason);
        // 10 µs per 4096 bytes is 2.441 ns/byte, against two sends of 0.33
        assert!(choice.reason.contains("2.441 ns/byte vs 0.660 ns/byte"), "{}", choice.reason);
    }

    #[test]
    fn the_put_tree_is_limited_once_the_root_has_more_than_two_children() {
        let model = BcastStreamModel::VERBS;
        for size in 2..=4 {
            assert_eq!(choose_bcast_max_bytes(size, WindowedBcast::PutTree, &model).max_bytes, None, "{size} ranks");
        }
        for size in [5, 8, 9, 64] {
            let choice = choose_bcast_max_bytes(size, WindowedBcast::PutTree, &model);
            assert_eq!(choice.max_bytes, Some(SMALLEST_DEFAULT_LIMIT), "{size} ranks: {}", choice.reason);
        }
        let eight = choose_bcast_max_bytes(8, WindowedBcast::PutTree, &model);
        assert!(eight.reason.contains("3 child(ren)"), "{}", eight.reason);
    }

    #[test]
    fn no_choice_lies_below_the_smallest_default_limit() {
        for size in 1..=300 {
            for path in [WINDOW, WindowedBcast::PutTree, WindowedBcast::Multicast { window_bytes: 1 }] {
                for model in [BcastStreamModel::SHARED_MEMORY, BcastStreamModel::VERBS] {
                    let limit = choose_bcast_max_bytes(size, path, &model).max_bytes;
                    assert!(limit.is_none_or(|bytes| bytes >= SMALLEST_DEFAULT_LIMIT), "{size} {path:?}");
                }
            }
        }
    }
}
