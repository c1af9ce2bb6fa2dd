//! The collector's resends to a member away from MPI over udp
//! (`rmcast::away_member`): the pair's window fills, the root's progress
//! goes on, and the member gets the message once back.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::time::Duration;

use super::{establish_all, finish, loopback_config, loopback_multicast_refusal, test_rmcast_config};
use crate::rmcast::{CongestionConfig, CongestionMode, RmcastConfig, away_member, region_len};
use crate::selected::SelectedTransport;
use crate::test_support::{PATIENCE, run_with, test_seed};
use crate::udp::UdpFaults;

/// The message: what the root sends before any ACK (congestion control's
/// first window).
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
        let reports = run_with(establish_all(2, region_len(2, &rmcast), &config), |rank, (_, udp)| {
            let transport = SelectedTransport::Udp(udp);
            let report = away_member::play(&transport, rank, rmcast, MESSAGE_PIECES, PASSES_AFTER_FULL, PATIENCE, &member_may_return);
            transport.quiesce_before_teardown().unwrap_or_else(|e| panic!("rank {rank} quiesce: {e}"));
            let SelectedTransport::Udp(udp) = transport else { unreachable!() };
            finish(&udp, &done);
            report
        });
        let (passes, stats) = reports[0].clone().expect("the root's report");
        assert_eq!(passes, PASSES_AFTER_FULL, "{congestion:?}: the root's progress stopped after the channel filled: {stats:?}");
    }
}
