//! A record sent from inside a wait of the same thread's own record on the
//! same transport: what Open MPI's progress engine does when a bcast root,
//! retransmitting to a NACKing member and waiting for room in the reliable
//! window, runs the idle hook and the hook serves the same transport's
//! NACKs again. The nested record must neither wait for the turn its own
//! thread holds (that hung a root for good) nor interleave its fragments
//! with the record under way; it goes out right after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use super::{establish_all, finish, loopback_config, loopback_multicast_refusal, tag};
use crate::idle::per_thread::with_idle_action;
use crate::test_support::{PATIENCE, pattern, run_with, test_seed};
use crate::transport::{ReliableChannel, TransportError};
use crate::udp::{UdpConfig, UdpFaults};

#[test]
fn a_record_sent_inside_a_wait_of_the_threads_own_record_goes_out_after_it() {
    skip_without_loopback_multicast!("a_record_sent_inside_a_wait_of_the_threads_own_record_goes_out_after_it");
    let seed = test_seed();
    // Two fragments in flight at most: the long record waits for room,
    // and that wait (nothing arrives while rank 1 holds back) runs the hook.
    let config = UdpConfig { reliable_window: 2, ..loopback_config(seed, UdpFaults::default()) };
    let hook_ran = Arc::new(AtomicBool::new(false));
    let done = AtomicUsize::new(0);
    run_with(establish_all(2, 64, &config), |rank, (_, transport)| {
        let transport = Arc::new(transport);
        let outer = pattern(tag(0, 1, 0), 16 * transport.fragment_bytes() + 7);
        let nested = pattern(tag(0, 1, 1), 100);
        if rank == 0 {
            // On a thread of its own, so that a hang fails the test instead
            // of hanging it.
            let (told, outcome) = mpsc::channel::<Result<(), TransportError>>();
            let (sender, hooked, ran) = (Arc::clone(&transport), Arc::clone(&transport), Arc::clone(&hook_ran));
            let (message, nested_message) = (outer.clone(), nested.clone());
            std::thread::spawn(move || {
                let nest_once = move || {
                    if !ran.load(Ordering::Acquire) {
                        let nested_result = hooked.send_reliable(1, &nested_message);
                        assert!(nested_result.is_ok(), "the nested send failed: {nested_result:?}");
                        ran.store(true, Ordering::Release);
                    }
                };
                let _ = told.send(with_idle_action(nest_once, || sender.send_reliable(1, &message)));
            });
            let result = outcome.recv_timeout(PATIENCE).unwrap_or_else(|_| {
                panic!("seed {seed}: rank 0's record never finished: a record sent from inside its wait deadlocked it")
            });
            result.unwrap_or_else(|e| panic!("seed {seed}: the outer record failed: {e}"));
            assert_eq!(transport.stats().records_deferred, 1, "seed {seed}: the nested record was not deferred");
        } else {
            // Nothing taken in (no ACK) until rank 0's hook has run, so its
            // wait for room lasts until then.
            let started = Instant::now();
            while !hook_ran.load(Ordering::Acquire) {
                assert!(started.elapsed() < PATIENCE, "seed {seed}: rank 0's wait for room never ran the idle hook (or hung in it)");
                std::thread::yield_now();
            }
            for (index, expected) in [&outer, &nested].into_iter().enumerate() {
                let mut message = Vec::new();
                while transport.poll_reliable(&mut message).is_none() {
                    assert!(started.elapsed() < PATIENCE, "seed {seed}: record {index} never came");
                    std::thread::yield_now();
                }
                assert!(message == *expected, "seed {seed}: record {index} arrived wrong ({} bytes)", message.len());
            }
        }
        finish(&transport, &done);
    });
}
