//! A member away from MPI (a rank computing after a bcast) takes in
//! nothing and acknowledges nothing, so a collector's timeout-driven
//! resends fill the reliable channel to it. The collector's progress runs
//! inside every MPI call's progress pass (MPI_Iprobe, MPI_Test): it must
//! keep returning at once instead of waiting for room, and the member
//! must still get the message when it comes back.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{establish_all, finish, loopback_config, loopback_multicast_refusal, test_rmcast_config};
use crate::rmcast::{CongestionConfig, CongestionMode, ReliableMulticast, RmcastConfig, region_len};
use crate::selected::SelectedTransport;
use crate::test_support::{PATIENCE, pattern, run_with, test_seed};
use crate::udp::UdpFaults;

/// The message: what the root sends before any ACK (congestion control's
/// first window), so that its send returns while the member is away.
const MESSAGE_PIECES: usize = 8;

/// Progress passes the root must make after its first held-back resend
/// before the member comes back.
const PASSES_AFTER_FULL: usize = 50;

#[test]
fn a_collector_resends_to_a_member_away_from_mpi_without_waiting_for_room() {
    skip_without_loopback_multicast!("a_collector_resends_to_a_member_away_from_mpi_without_waiting_for_room");
    let congestion_modes = [
        CongestionConfig { mode: CongestionMode::Off, ..CongestionConfig::default() },
        CongestionConfig { mode: CongestionMode::On, rto_floor: Duration::from_millis(1), rto_ceiling: Duration::from_millis(5), ..CongestionConfig::default() },
    ];
    for congestion in congestion_modes {
        let seed = test_seed();
        let rmcast = RmcastConfig { co_roots: 0, timeout: Duration::from_millis(1), window_slots: 64, congestion, ..test_rmcast_config() };
        let config = loopback_config(seed, UdpFaults::default());
        let member_may_return = AtomicBool::new(false);
        let done = AtomicUsize::new(0);
        let outcomes = run_with(establish_all(2, region_len(2, &rmcast), &config), |rank, (_, udp)| {
            let transport = SelectedTransport::Udp(udp);
            let mut multicast = ReliableMulticast::new(rank, 2, 0, rmcast);
            let piece = multicast.piece_bytes(&transport).expect("piece size");
            // As many pieces as congestion control's first window lets out.
            let payload = pattern(seed, piece * MESSAGE_PIECES);
            let outcome = if rank == 0 {
                multicast.send(&transport, &payload).expect("the root's send (its first window holds the message)");
                // Rank 1 is away: progress as MPI calls would run it, until
                // resends were held back and passes went on after that.
                let started = Instant::now();
                let mut passes_after_full = 0;
                while passes_after_full < PASSES_AFTER_FULL && started.elapsed() < PATIENCE {
                    multicast.progress(&transport).expect("progress while the member is away");
                    if multicast.stats().resends_held_back > 0 {
                        passes_after_full += 1;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                member_may_return.store(true, Ordering::Release);
                format!("{congestion:?}: {passes_after_full} passes after the channel filled, {:?}", multicast.stats())
            } else {
                // Away from MPI: no call into the transport until the root
                // is done, or `PATIENCE` (so that a root blocked in its
                // progress is let go, and fails its count, instead of hanging).
                let started = Instant::now();
                while !member_may_return.load(Ordering::Acquire) && started.elapsed() < PATIENCE {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let mut got = vec![0xEE; payload.len()];
                multicast.receive(&transport, 0, &mut got).expect("the member's receive once back");
                assert!(got == payload, "{congestion:?}: the member got the message wrong");
                String::new()
            };
            multicast.drain(&transport).unwrap_or_else(|e| panic!("rank {rank} drain: {e}"));
            transport.quiesce_before_teardown().unwrap_or_else(|e| panic!("rank {rank} quiesce: {e}"));
            let SelectedTransport::Udp(udp) = transport else { unreachable!() };
            finish(&udp, &done);
            outcome
        });
        assert!(outcomes[0].starts_with(&format!("{congestion:?}: {PASSES_AFTER_FULL} passes")), "{}", outcomes[0]);
    }
}
