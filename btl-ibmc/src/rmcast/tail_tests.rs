//! The tail repeat end to end (issue 36). The root's first multicast of
//! every piece is lost for every receiver and the collector's timeout is
//! ten minutes, far beyond the test's patience: a bcast completes only if
//! the copy of its last piece arrives and the gap it reveals is NACKed.
//! Before the tail repeat these bcasts waited for the timeout and the
//! test gave up.

use std::time::Duration;

use super::congestion_tests::ScriptedLoss;
use super::tests::{Script, expected_deliveries, run_script, test_config};
use super::{RmcastConfig, RmcastStats, region_len};
use crate::fabric::{Fabric, FabricConfig};

const PIECE: usize = 64;
const NEVER: Duration = Duration::from_secs(600);

/// Every root in turn, one-piece, exact-piece and multi-piece messages
/// (the copy of the last reveals the lost ones before it), and a
/// zero-length one (no piece, nothing to repeat).
fn mixed_script(size: usize) -> Script {
    let lengths = [8, PIECE, 3 * PIECE + 7, 0, 2 * PIECE, 1];
    (0..24).map(|index| (index % size, lengths[index % lengths.len()])).collect()
}

fn run_with_every_original_lost(size: usize, co_roots: usize, tail_repeat: usize) -> (Script, RmcastStats) {
    let config = RmcastConfig { fragment_bytes: PIECE, co_roots, tail_repeat, timeout: NEVER, ..test_config() };
    let script = mixed_script(size);
    let what = format!("size {size}, {co_roots} co-root(s), tail repeat {tail_repeat}, every original lost, timeout {NEVER:?}");
    let transports = Fabric::new(size, region_len(size, &config), FabricConfig::default())
        .into_iter()
        .map(|fabric| ScriptedLoss::new(fabric, 1, 0, u64::MAX, true))
        .collect();
    let stats = RmcastStats::sum(&run_script(transports, config, &script, &what));
    (script, stats)
}

#[test]
fn a_lost_tail_is_repaired_through_its_copy_without_the_collector_timeout() {
    for (size, co_roots, tail_repeat) in [(2, 0, 1), (5, 0, 1), (6, 2, 1), (5, 0, 2)] {
        let (script, total) = run_with_every_original_lost(size, co_roots, tail_repeat);
        let what = format!("size {size}, {co_roots} co-root(s), tail repeat {tail_repeat}");
        assert_eq!(total.pieces_delivered, expected_deliveries(&script, size, PIECE), "{what}");
        assert_eq!(total.overruns, 0, "{what}");
        // One copy per repeated piece, counted from the script.
        let repeated: u64 = script.iter().map(|&(_, len)| len.div_ceil(PIECE).min(tail_repeat) as u64).sum();
        assert_eq!(total.tail_repeats, repeated, "{what}: {total:?}");
        // The pieces before the repeated ones reached the leaves only
        // through NACKs (the timeout never came).
        let unrepeated = script.iter().any(|&(_, len)| len.div_ceil(PIECE) > tail_repeat);
        if unrepeated && size - 1 > co_roots {
            assert!(total.nacks_sent > 0 && total.nacks_served > 0, "{what}: {total:?}");
        }
        println!("{what}: {} copies, {} NACKs, {} retransmissions", total.tail_repeats, total.nacks_sent, total.retransmissions);
    }
}
