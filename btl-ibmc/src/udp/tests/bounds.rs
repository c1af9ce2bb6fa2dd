//! Issue 33, items 2 and 3, over real sockets: what a rank holds from a
//! peer's reliable channel is bounded whatever that peer's socket sends,
//! and a flood of strangers' datagrams during setup's probe leaves every
//! rank with the same verdict.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::{establish_all, forced_onto_one_group, loopback_config, loopback_multicast_refusal, pump_until};
use crate::fabric::{Fabric, FabricConfig};
use crate::test_support::{PATIENCE, run_with, test_seed};
use crate::transport::Endpoint;
use crate::udp::engine::record_limits;
use crate::udp::frame::{Stamp, encode_data, encode_probe};
use crate::udp::socket::open_own;
use crate::udp::{UdpFaults, establish};

/// Rank 1's socket sends rank 0 in-order fragments of the agreed size
/// that never end a record. Rank 0 takes in as many as the record cap
/// holds, and the next one fails its endpoint with an error naming rank
/// 1; a fragment longer than agreed is dropped first, changing nothing.
/// Before, the record grew for as long as fragments came.
#[test]
fn a_fragment_stream_without_the_last_flag_fails_the_channel_at_the_record_cap() {
    skip_without_loopback_multicast!("a_fragment_stream_without_the_last_flag_fails_the_channel_at_the_record_cap");
    const WINDOW_LEN: usize = 64;
    let config = loopback_config(test_seed(), UdpFaults::default());
    let mut ranks = establish_all(2, WINDOW_LEN, &config).into_iter().map(|(_, transport)| transport);
    let (zero, one) = (ranks.next().unwrap(), ranks.next().unwrap());
    let limits = record_limits(&zero.config, WINDOW_LEN);
    let (to_zero, stamp) = (zero.local_address(), one.stamp());
    let mut frame = Vec::new();

    encode_data(stamp, 0, false, &vec![1; limits.fragment + 1], &mut frame);
    one.seal_as_sent(&mut frame, false);
    one.send_raw(to_zero, &frame);
    let stats = pump_until(&zero, 1, |stats| stats.malformed_dropped);
    assert_eq!(stats.malformed_dropped, 1, "{stats:?}");
    assert!(zero.health().is_ok(), "an oversized fragment failed the endpoint");

    let fitting = limits.record / limits.fragment;
    let fragment = vec![2; limits.fragment];
    let mut failed_at = None;
    for seq in 0..(4 * fitting as u64 + 8) {
        encode_data(stamp, seq, false, &fragment, &mut frame);
        one.seal_as_sent(&mut frame, false);
        one.send_raw(to_zero, &frame);
        // Loopback queues the datagram at once: this progress reads it.
        zero.progress();
        if zero.health().is_err() {
            failed_at = Some(seq);
            break;
        }
    }
    assert_eq!(failed_at, Some(fitting as u64), "{fitting} fragments of {} fit the {}-byte cap: {:?}", limits.fragment, limits.record, zero.stats());
    let error = zero.health().unwrap_err().to_string();
    assert!(error.contains("rank 1 sent a reliable record longer than"), "{error}");
}

/// Threads outside the job multicast forged probes (rank 1's, from
/// their own addresses) to the group and port setup will use, as fast
/// as they can, while three ranks set up. Whether the probes get through
/// depends on the race; what may not is a split verdict or a rank that
/// never leaves setup. The bound on the probe itself is counted in
/// `probe::tests` (an endless flood); this is the same path end to end.
#[test]
fn a_stranger_flood_during_the_probe_leaves_every_rank_with_the_same_verdict() {
    skip_without_loopback_multicast!("a_stranger_flood_during_the_probe_leaves_every_rank_with_the_same_verdict");
    const SIZE: usize = 3;
    const FLOODERS: usize = 2;
    let seed = test_seed();
    let (forced, config) = forced_onto_one_group(seed, 0xF100D);
    let mut forged = Vec::new();
    encode_probe(Stamp { communicator: 0, nonce: 0, sender: 1 }, 1, &mut forged);
    let done = AtomicBool::new(false);
    let (verdicts, sent) = std::thread::scope(|scope| {
        let flooders: Vec<_> = (0..FLOODERS)
            .map(|_| {
                let (done, forged) = (&done, &forged);
                scope.spawn(move || {
                    let (socket, _) = open_own(Ipv4Addr::LOCALHOST, 1, 1 << 16).expect("a socket outside the job");
                    let mut sent = 0u64;
                    while !done.load(Ordering::Acquire) {
                        // A full queue loses some: a flood need not be exact.
                        sent += u64::from(socket.send_to(forged, forced).is_ok());
                    }
                    sent
                })
            })
            .collect();
        let verdicts = run_with(Fabric::new(SIZE, 8, FabricConfig::default()), |rank, exchange| {
            let started = Instant::now();
            let verdict = establish(&exchange, rank, SIZE, 64, &config).map(|transport| transport.stats().strangers_dropped);
            (verdict, started.elapsed())
        });
        done.store(true, Ordering::Release);
        (verdicts, flooders.into_iter().map(|flooder| flooder.join().expect("flooder")).sum::<u64>())
    });
    println!("seed {seed}: {sent} forged probes sent; verdicts {verdicts:?}");
    assert!(sent > 0, "the flood sent nothing");
    for (rank, (verdict, took)) in verdicts.iter().enumerate() {
        assert!(*took < PATIENCE, "rank {rank}: setup under the flood took {took:?}");
        match (verdict, &verdicts[0].0) {
            (Ok(_), Ok(_)) => {}
            (Err(mine), Err(first)) => assert_eq!(mine, first, "rank {rank} and rank 0 refused differently"),
            _ => panic!("seed {seed}: split verdict under the flood: {verdicts:?}"),
        }
    }
}
