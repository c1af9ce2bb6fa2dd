//! A test scenario that the udp unit tests and the verbs device tests
//! share (tests only: the `fabric` feature): a bcast member away from MPI
//! (computing after the bcast) takes in nothing and acknowledges nothing,
//! so the collector's timeout-driven resends fill the reliable channel to
//! it. The collector's progress runs inside every MPI call's progress pass:
//! it must keep returning instead of waiting for room
//! (`ReliableChannel::has_room_for`), and the member must still get the
//! message once back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{ReliableMulticast, RmcastConfig, RmcastStats};
use crate::transport::Transport;

/// What the root reports: its progress passes after its first held-back
/// resend, and its counters.
pub type RootReport = (usize, RmcastStats);

/// Plays `rank` (0 the root, 1 the member) of a two-rank scenario. The
/// root sends a message of `pieces` pieces (at most what it may send
/// before any ACK), then runs its progress, as MPI calls would, until
/// `passes_after_full` passes came after its first held-back resend, and
/// lets the member return; the member makes no call into `transport` until
/// then, or `away_at_most` (so that a root blocked in its progress is let
/// go, and falls short of its count, instead of hanging), then receives and
/// checks the message. Both drain. The root's report, None on the member.
pub fn play<T: Transport + ?Sized>(
    transport: &T,
    rank: usize,
    config: RmcastConfig,
    pieces: usize,
    passes_after_full: usize,
    away_at_most: Duration,
    member_may_return: &AtomicBool,
) -> Option<RootReport> {
    let mut multicast = ReliableMulticast::new(rank, 2, 0, config);
    let piece = multicast.piece_bytes(transport).expect("piece size");
    let payload: Vec<u8> = (0..piece * pieces).map(|index| (index * 7 + 3) as u8).collect();
    let report = if rank == 0 {
        multicast.send(transport, &payload).expect("the root's send (what it may send before any ACK)");
        let started = Instant::now();
        let mut passes = 0;
        while passes < passes_after_full && started.elapsed() < away_at_most {
            multicast.progress(transport).expect("progress while the member is away");
            if multicast.stats().resends_held_back > 0 {
                passes += 1;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        member_may_return.store(true, Ordering::Release);
        Some((passes, multicast.stats()))
    } else {
        let started = Instant::now();
        while !member_may_return.load(Ordering::Acquire) && started.elapsed() < away_at_most {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut got = vec![0xEE; payload.len()];
        multicast.receive(transport, 0, &mut got).expect("the member's receive once back");
        assert!(got == payload, "the member got the message wrong");
        None
    };
    multicast.drain(transport).unwrap_or_else(|error| panic!("rank {rank} drain: {error}"));
    report
}
