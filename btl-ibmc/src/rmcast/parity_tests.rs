//! Forward error correction end to end (issue 36): the root follows each
//! block of pieces with parity, and a receiver that lost no more of a
//! block than its parity rebuilds it without a NACK. Losses are scripted
//! (`ScriptedLoss`: every receiver loses the same first copies) and the
//! collector's timeout is ten minutes, so only parity and NACKs repair.

use std::time::Duration;

use super::congestion_tests::ScriptedLoss;
use super::tests::{Script, expected_deliveries, run_script, test_config};
use super::{RmcastConfig, RmcastStats, region_len};
use crate::fabric::{Fabric, FabricConfig};
use crate::rmcast::repair::parity_plan;

const PIECE: usize = 64;
const NEVER: Duration = Duration::from_secs(600);
const SIZE: usize = 4;
/// A message of 47 pieces (one block) and one of 150 (three of 50), as
/// udp cuts 64 KiB and 205 KiB.
const LENGTHS: [usize; 2] = [47 * PIECE - 5, 150 * PIECE];

fn script() -> Script {
    (0..6).map(|index| (0, LENGTHS[index % 2])).collect()
}

/// Runs `script` from root 0 with every receiver losing the first copy of
/// each piece s with s mod `every` = 0 (below the last piece of the
/// script, so that a later piece reveals every gap), parity set for an
/// assumed 5 % loss at most `parity_percent` % of a block.
fn run(every: u64, parity_percent: u32) -> RmcastStats {
    let config = RmcastConfig { fragment_bytes: PIECE, timeout: NEVER, parity_percent, parity_assumed_loss: 0.05, ..test_config() };
    let script = script();
    let pieces: u64 = script.iter().map(|&(_, len)| len.div_ceil(PIECE) as u64).sum();
    let what = format!("lose 1 in {every}, parity at most {parity_percent} %");
    let transports = Fabric::new(SIZE, region_len(SIZE, &config), FabricConfig::default())
        .into_iter()
        .map(|fabric| ScriptedLoss::new(fabric, every, 0, pieces - 1, false))
        .collect();
    let total = RmcastStats::sum(&run_script(transports, config, &script, &what));
    assert_eq!(total.pieces_delivered, expected_deliveries(&script, SIZE, PIECE), "{what}: {total:?}");
    assert_eq!(total.overruns, 0, "{what}");
    println!(
        "{what}: {} parity sent, {} rebuilt, {} blocks given up, {} NACKs, {} retransmissions",
        total.parity_sent, total.pieces_rebuilt, total.parity_blocks_given_up, total.nacks_sent, total.retransmissions
    );
    total
}

/// Losses within the parity: 1 in 10 is at most 5 of a block of 47 or 50,
/// and the plan for 5 % at 3 receivers gives 8 and 9 parity pieces. Every
/// lost piece is rebuilt at every receiver, and nobody NACKs. Without the
/// parity (before), each of these losses cost a NACK.
#[test]
fn losses_within_the_parity_are_rebuilt_without_a_nack() {
    assert!(parity_plan(47, 0.05, SIZE - 1, 25).parity >= 5 && parity_plan(150, 0.05, SIZE - 1, 25).parity >= 5);
    let total = run(10, 25);
    let pieces: u64 = script().iter().map(|&(_, len)| len.div_ceil(PIECE) as u64).sum();
    let lost = (pieces - 1).div_ceil(10) * (SIZE as u64 - 1);
    assert_eq!(total.pieces_rebuilt, lost, "{total:?}");
    assert_eq!((total.nacks_sent, total.retransmissions, total.parity_blocks_given_up), (0, 0, 0), "{total:?}");
    assert!(total.parity_sent > 0);
}

/// Losses beyond the parity (1 in 2: over 20 of a block's 47, with 8
/// parity pieces) cannot be rebuilt: the blocks are given up and repaired
/// by NACKs, and every message still arrives whole.
#[test]
fn losses_beyond_the_parity_fall_back_to_nacks() {
    let total = run(2, 25);
    assert!(total.parity_blocks_given_up > 0 && total.nacks_sent > 0 && total.retransmissions > 0, "{total:?}");
}

/// With parity off the same losses are all NACKed: the wire carries no
/// parity and nothing is rebuilt.
#[test]
fn without_parity_every_loss_is_nacked() {
    let total = run(10, 0);
    assert_eq!((total.parity_sent, total.pieces_rebuilt), (0, 0), "{total:?}");
    assert!(total.nacks_sent > 0, "{total:?}");
}
