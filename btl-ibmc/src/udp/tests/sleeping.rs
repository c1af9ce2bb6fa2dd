//! Waits over udp sleep on the sockets once past spinning (issue 13): a
//! sleeping rank still wakes for what arrives, still gives up at the
//! fault timeout, and its peers' losses are still repaired.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{establish_all, finish, loopback_config, loopback_multicast_refusal};
use crate::test_support::{PATIENCE, pattern, run_with, test_seed, thread_cpu_time};
use crate::transport::{Endpoint, Sleep, Windows};
use crate::udp::{UdpFaults, UdpTransport};
use crate::wait::{WaitPolicy, wait_at_least};

/// A policy that goes past spinning at once, so the waits sleep.
fn sleeping_policy(fault_timeout: Duration) -> WaitPolicy {
    WaitPolicy { spin_polls: 0, kernel_spin_polls: 0, stall_warning: Duration::MAX, fault_timeout: Some(fault_timeout) }
}

/// Takes in whatever is still on its way (setup's traffic) until a short
/// sleep finds nothing to wake it.
fn settle(transport: &UdpTransport) {
    let started = Instant::now();
    while transport.sleep_until_arrival(Duration::from_millis(5)) != Sleep::TimedOut {
        assert!(started.elapsed() < PATIENCE, "rank {}: traffic never stopped", transport.rank());
    }
}

#[test]
fn a_sleep_on_the_sockets_ends_when_a_datagram_arrives_and_takes_it_in() {
    skip_without_loopback_multicast!("a_sleep_on_the_sockets_ends_when_a_datagram_arrives_and_takes_it_in");
    const FLAG: usize = 128;
    let seed = test_seed();
    let config = loopback_config(seed, UdpFaults::default());
    let (asleep, done) = (AtomicBool::new(false), AtomicUsize::new(0));
    let data = pattern(seed, 100);
    run_with(establish_all(2, 256, &config), |rank, (_, transport)| {
        if rank == 0 {
            while !asleep.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            // Long enough for rank 1 to be inside its sleep.
            std::thread::sleep(Duration::from_millis(50));
            transport.put(1, 0, &data, FLAG, 5).expect("put");
        } else {
            settle(&transport);
            let before = transport.stats();
            asleep.store(true, Ordering::Release);
            let started = Instant::now();
            let woke = transport.sleep_until_arrival(PATIENCE);
            let slept = started.elapsed();
            assert_eq!(woke, Sleep::Woken, "seed {seed}: the sleep ran out its {PATIENCE:?}");
            assert!(slept < PATIENCE / 2, "seed {seed}: the put took {slept:?} to end the sleep");
            let after = transport.stats();
            assert_eq!((after.sleeps - before.sleeps, after.sleeps_woken - before.sleeps_woken), (1, 1), "seed {seed}: {after:?}");
            // Taken in by the sleep itself: no progress call in between.
            assert_eq!(transport.local_flag(FLAG), 5, "seed {seed}: the sleep did not take the put in");
            let mut got = vec![0u8; data.len()];
            transport.read_local(0, &mut got);
            assert!(got == data, "seed {seed}: the put's data is wrong");
        }
        finish(&transport, &done);
    });
}

#[test]
fn a_wait_over_udp_sleeps_until_the_put_it_waits_for_arrives() {
    skip_without_loopback_multicast!("a_wait_over_udp_sleeps_until_the_put_it_waits_for_arrives");
    const SLOT: usize = 3000;
    const FLAG: usize = SLOT;
    const AWAY: Duration = Duration::from_millis(300);
    let seed = test_seed();
    let config = loopback_config(seed, UdpFaults::default());
    let done = AtomicUsize::new(0);
    let data = pattern(seed, SLOT);
    run_with(establish_all(2, SLOT + 8, &config), |rank, (_, transport)| {
        if rank == 0 {
            std::thread::sleep(AWAY);
            transport.put(1, 0, &data, FLAG, 9).expect("put");
        } else {
            let (wall, cpu) = (Instant::now(), thread_cpu_time());
            let flag = wait_at_least(&transport, FLAG, 9, sleeping_policy(PATIENCE).without_side_progress(), || "rank 0's put".into());
            let (wall, cpu) = (wall.elapsed(), thread_cpu_time() - cpu);
            assert_eq!(flag, Ok(9), "seed {seed}");
            let mut got = vec![0u8; SLOT];
            transport.read_local(0, &mut got);
            assert!(got == data, "seed {seed}: the put's data is wrong");
            let stats = transport.stats();
            assert!(stats.sleeps > 0, "seed {seed}: the wait never slept: {stats:?}");
            // A yielding wait uses what CPU it is given; a sleeping one
            // wakes about once a millisecond, for a few microseconds.
            assert!(cpu < wall / 2, "seed {seed}: the wait used {cpu:?} of CPU in {wall:?}: {stats:?}");
        }
        finish(&transport, &done);
    });
}

#[test]
fn a_sleeping_wait_still_gives_up_at_the_fault_timeout() {
    skip_without_loopback_multicast!("a_sleeping_wait_still_gives_up_at_the_fault_timeout");
    const LIMIT: Duration = Duration::from_millis(300);
    let config = loopback_config(test_seed(), UdpFaults::default());
    let done = AtomicUsize::new(0);
    run_with(establish_all(2, 64, &config), |rank, (_, transport)| {
        if rank == 1 {
            let started = Instant::now();
            let outcome = wait_at_least(&transport, 0, 1, sleeping_policy(LIMIT).without_side_progress(), || "a flag nobody raises".into());
            let waited = started.elapsed();
            let failure = outcome.expect_err("a wait nobody ends returned").to_string();
            assert!(failure.contains("a flag nobody raises") && failure.contains("coll_rdma_fault_timeout_s"), "{failure}");
            assert!(waited >= LIMIT && waited < PATIENCE, "gave up after {waited:?}, the limit being {LIMIT:?}");
            let stats = transport.stats();
            assert!(stats.sleeps > 0 && stats.sleeps_woken < stats.sleeps, "the wait never slept out a quiet spell: {stats:?}");
        }
        finish(&transport, &done);
    });
}

#[test]
fn losses_are_repaired_while_both_sender_and_receiver_sleep() {
    skip_without_loopback_multicast!("losses_are_repaired_while_both_sender_and_receiver_sleep");
    const PUTS: usize = 30;
    const SLOT: usize = 2000;
    const FLAG: usize = PUTS * SLOT;
    const REPLY: usize = FLAG + 8;
    let seed = test_seed();
    let config = loopback_config(seed, UdpFaults { drop: 0.3, ..UdpFaults::default() });
    let done = AtomicUsize::new(0);
    let policy = sleeping_policy(PATIENCE);
    let stats = run_with(establish_all(2, REPLY + 8, &config), |rank, (_, transport)| {
        if rank == 0 {
            for index in 0..PUTS {
                transport.put(1, index * SLOT, &pattern(seed ^ index as u64, SLOT), FLAG, index as u64 + 1).expect("put");
            }
            // Asleep while what was lost is due again: the timers must
            // still fire, or the reply never comes.
            let reply = wait_at_least(&transport, REPLY, 1, policy.without_side_progress(), || "rank 1's reply".into());
            assert_eq!(reply, Ok(1), "seed {seed}");
        } else {
            let flag = wait_at_least(&transport, FLAG, PUTS as u64, policy.without_side_progress(), || "the last put".into());
            assert_eq!(flag, Ok(PUTS as u64), "seed {seed}");
            for index in 0..PUTS {
                let mut got = vec![0u8; SLOT];
                transport.read_local(index * SLOT, &mut got);
                assert!(got == pattern(seed ^ index as u64, SLOT), "seed {seed}: put {index} wrong");
            }
            transport.put_flag(0, REPLY, 1).expect("put_flag");
        }
        finish(&transport, &done);
        transport.stats()
    });
    let (sender, receiver) = (&stats[0], &stats[1]);
    assert!(sender.injected_drops + receiver.injected_drops > 0, "seed {seed}: nothing was lost: {stats:?}");
    assert!(sender.retransmissions > 0, "seed {seed}: losses repaired without retransmission? {stats:?}");
    assert!(sender.sleeps > 0 && receiver.sleeps > 0, "seed {seed}: a side never slept: {stats:?}");
}

/// Review of issue 33: datagrams from strangers (to the rank's port and
/// to the group; unreadable, or naming a rank they do not come from) are
/// only counted as dropped. Before, each one counted as an arrival too,
/// so a wait that had taken one in returned instead of sleeping: a
/// stranger's flood kept a rank's waits spinning.
#[test]
fn strangers_datagrams_keep_no_wait_from_sleeping() {
    skip_without_loopback_multicast!("strangers_datagrams_keep_no_wait_from_sleeping");
    const EACH: u64 = 16;
    let config = loopback_config(test_seed(), UdpFaults::default());
    let mut ranks = establish_all(2, 64, &config).into_iter().map(|(_, transport)| transport);
    let (zero, one) = (ranks.next().unwrap(), ranks.next().unwrap());
    settle(&zero);
    settle(&one);
    let (stranger, _) = crate::udp::socket::open_own(std::net::Ipv4Addr::LOCALHOST, 1, 1 << 16).expect("a socket outside the job");
    let mut in_rank_zero_s_name = Vec::new();
    crate::udp::frame::encode_multicast(zero.stamp(), b"not from rank 0's socket", &mut in_rank_zero_s_name);
    for _ in 0..EACH {
        for to in [one.local_address(), one.group()] {
            stranger.send_to(b"??", to).expect("send");
            stranger.send_to(&in_rank_zero_s_name, to).expect("send");
        }
    }
    // Let loopback deliver them before the first wait looks.
    std::thread::sleep(Duration::from_millis(20));
    let before = one.stats();
    let expected = before.strangers_dropped + 4 * EACH;
    let started = Instant::now();
    let mut waits = 0u64;
    while one.stats().strangers_dropped < expected {
        assert!(started.elapsed() < PATIENCE, "strangers' datagrams never all taken in: {:?}", one.stats());
        one.sleep_until_arrival(Duration::from_millis(10));
        waits += 1;
    }
    let after = one.stats();
    assert_eq!(after.strangers_dropped, expected, "{after:?}");
    assert_eq!(after.sleeps - before.sleeps, waits, "a wait returned without sleeping after taking in strangers' datagrams: {after:?}");
    assert_eq!(after.refused_from_ranks(), before.refused_from_ranks(), "strangers counted as the ranks' own: {after:?}");
}
