//! Shared memory between threads of this process (ranks set up through the
//! fabric's exchange) and, in `cross_process`, between a forked child and
//! its parent.

mod cross_process;
mod full_dev_shm;
mod footprint;
mod grouped;
mod killed_creator;
mod setup_failures;

use std::time::{Duration, Instant};

use super::segment::dev_shm_path;
use super::{RELIABLE_MAX, ShmTransport, establish};
use crate::fabric::{Fabric, FabricConfig};
use crate::test_support::{assert_rejects_bad_access, await_flag, await_reliable, pattern, pattern_byte, run_with};
use crate::transport::{Datagrams, Endpoint, MulticastKind, PeerReads, ReliableChannel, TransportError, Windows};

/// Sets up shared memory for `size` threads and returns each rank's transport.
pub(super) fn establish_all(size: usize, window_len: usize) -> Vec<ShmTransport> {
    let endpoints = Fabric::new(size, 0, FabricConfig::default());
    run_with(endpoints, |rank, exchange| {
        establish(&exchange, rank, size, window_len).unwrap_or_else(|e| panic!("rank {rank}: {e}"))
    })
}

#[test]
fn puts_from_one_byte_to_64_kib_land_intact_with_their_flag() {
    const DATA_FLAG: usize = 0;
    const READY_FLAG: usize = 8;
    const SCRATCH_FLAG: usize = 16;
    const DATA_AT: usize = 64;
    const SIZES: [usize; 19] = [1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4095, 4096, 4097, 30_001, 65_535, 65_536];
    const SENTINEL: u8 = 0xA5;
    let window_len = DATA_AT + 8 + 65_536 + 64;

    let transports = establish_all(2, window_len);
    run_with(transports, |rank, shm| {
        for (round, &len) in SIZES.iter().enumerate() {
            let epoch = round as u64 + 1;
            let offset = DATA_AT + round % 8;
            if rank == 1 {
                // Fill around the target range so stray or missing bytes show.
                shm.put(1, DATA_AT - 8, &vec![SENTINEL; len + 24], SCRATCH_FLAG, epoch).unwrap();
                shm.put_flag(0, READY_FLAG, epoch).unwrap();
                await_flag(&shm, DATA_FLAG, epoch, "the data flag");
                let mut seen = vec![0u8; len + 16];
                shm.read_local(offset - 8, &mut seen);
                assert!(seen[..8].iter().all(|&b| b == SENTINEL), "bytes before a {len}-byte put changed");
                assert!(seen[8..8 + len] == pattern(epoch, len)[..], "a {len}-byte put at offset {offset} arrived damaged");
                assert!(seen[8 + len..].iter().all(|&b| b == SENTINEL), "bytes after a {len}-byte put changed");
                assert_eq!(shm.local_flag(DATA_FLAG), epoch);
            } else {
                await_flag(&shm, READY_FLAG, epoch, "the receiver to be ready");
                shm.put(1, offset, &pattern(epoch, len), DATA_FLAG, epoch).unwrap();
            }
        }
    });
}

#[test]
fn windows_start_zeroed_and_bad_accesses_are_rejected() {
    let window_len = 4096 + 64;
    let transports = establish_all(2, window_len);
    run_with(transports, |rank, shm| {
        assert_eq!((shm.name(), shm.rank(), shm.size(), shm.window_len()), ("shm", rank, 2, window_len));
        assert_eq!(shm.local_ranks(), 2);
        let mut window = vec![0xFF; window_len];
        shm.read_local(0, &mut window);
        assert!(window.iter().all(|&b| b == 0), "rank {rank}'s window is not zeroed");

        assert_rejects_bad_access(&shm);

        assert_eq!(shm.multicast_kind(), MulticastKind::SharedWindow);
        assert_eq!(shm.max_datagram(), 0);
        assert!(matches!(shm.multicast(b"x"), Err(TransportError::Unsupported(_))));
        let mut out = vec![1, 2, 3];
        assert!(shm.poll_multicast(&mut out).is_none());
        assert!(out.is_empty());
        let too_large = vec![0u8; RELIABLE_MAX + 1];
        assert_eq!(shm.send_reliable(0, &too_large), Err(TransportError::TooLarge { len: RELIABLE_MAX + 1, max: RELIABLE_MAX }));
        assert!(matches!(shm.send_reliable(2, b"x"), Err(TransportError::OutOfRange { peer: 2, .. })));
    });
}

#[test]
fn reliable_messages_arrive_once_in_order_past_a_full_ring() {
    const PER_THREAD: u32 = 60;
    const SENDING_THREADS: u32 = 2;
    const RECEIVER_START_DELAY: Duration = Duration::from_millis(60);

    let transports = establish_all(3, 4096);
    run_with(transports, |rank, shm| {
        if rank == 0 {
            std::thread::sleep(RECEIVER_START_DELAY);
            shm.send_reliable(0, b"to myself").unwrap();
            let mut next = [[0u32; SENDING_THREADS as usize]; 3];
            let mut out = Vec::new();
            let mut got_self = false;
            let expected = 2 * SENDING_THREADS * PER_THREAD;
            let mut received = 0;
            while received < expected || !got_self {
                let sender = await_reliable(&shm, &mut out);
                if sender == 0 {
                    assert_eq!(out, b"to myself");
                    got_self = true;
                    continue;
                }
                let (thread, index) = (out[0] as usize, u32::from_le_bytes(out[1..5].try_into().unwrap()));
                assert_eq!(index, next[sender][thread], "rank {sender} thread {thread}: out of order or duplicated");
                assert_eq!(out, message(sender, thread, index), "rank {sender} thread {thread} message {index} damaged");
                next[sender][thread] += 1;
                received += 1;
            }
            assert!(shm.poll_reliable(&mut out).is_none(), "more messages than were sent");
        } else {
            let started = Instant::now();
            std::thread::scope(|scope| {
                for thread in 0..SENDING_THREADS as usize {
                    let shm = &shm;
                    scope.spawn(move || {
                        for index in 0..PER_THREAD {
                            shm.send_reliable(0, &message(rank, thread, index)).unwrap();
                        }
                    });
                }
            });
            // More messages than ring slots: the senders had to wait for rank 0.
            assert!(started.elapsed() >= RECEIVER_START_DELAY / 2, "send_reliable did not block on a full ring");
        }
    });

    fn message(sender: usize, thread: usize, index: u32) -> Vec<u8> {
        let len = 5 + (index as usize * 997 + sender * 31) % (RELIABLE_MAX - 4);
        let mut bytes = pattern(((sender * 8 + thread) as u64) << 32 | u64::from(index), len);
        bytes[0] = thread as u8;
        bytes[1..5].copy_from_slice(&index.to_le_bytes());
        bytes
    }
}

#[test]
fn every_rank_reads_every_window_behind_its_flag() {
    const SIZE: usize = 3;
    const ROUNDS: u64 = 200;
    const FLAG: usize = 0;
    const DATA_AT: usize = 64;
    const LEN: usize = 1001;
    let done_by = |reader: usize| 8 + 8 * reader;
    let window_len = DATA_AT + LEN.next_multiple_of(8);
    let transports = establish_all(SIZE, window_len);
    run_with(transports, |rank, shm| {
        // Every rank rewrites its own window each round, once every reader
        // has said it copied the previous round out; readers copy straight
        // out of the writer's window.
        for round in 1..=ROUNDS {
            for reader in (0..SIZE).filter(|&r| r != rank) {
                await_flag(&shm, done_by(reader), round - 1, "a reader to finish the previous round");
            }
            shm.put(rank, DATA_AT, &pattern(round * 8 + rank as u64, LEN), FLAG, round).unwrap();
            for peer in (0..SIZE).filter(|&p| p != rank) {
                let started = Instant::now();
                while shm.peer_flag(peer, FLAG).unwrap() < round {
                    assert!(started.elapsed() < Duration::from_secs(20), "rank {rank}: round {round} of rank {peer} never came");
                    std::thread::yield_now();
                }
                let mut seen = vec![0u8; LEN];
                shm.read_peer(peer, DATA_AT, &mut seen).unwrap();
                assert!(seen == pattern(round * 8 + peer as u64, LEN), "rank {rank}: round {round} of rank {peer} damaged");
                shm.put_flag(peer, done_by(rank), round).unwrap();
            }
        }
        let end = window_len;
        assert_eq!(shm.read_peer(1, end - 3, &mut [0; 4]), Err(TransportError::OutOfRange { peer: 1, offset: end - 3, len: 4 }));
        assert_eq!(shm.read_peer(SIZE, 0, &mut [0; 1]), Err(TransportError::OutOfRange { peer: SIZE, offset: 0, len: 1 }));
        assert_eq!(shm.peer_flag(0, end), Err(TransportError::OutOfRange { peer: 0, offset: end, len: 8 }));
        assert!(matches!(shm.peer_flag(0, 12), Err(TransportError::Failed(why)) if why.contains("aligned")));
        shm.read_peer(2, end, &mut []).expect("an empty read at the end is valid");
    });
}

#[test]
fn no_name_is_left_in_dev_shm_once_every_rank_has_established() {
    let transports = establish_all(3, 256);
    let name = transports[0].segment_name().to_owned();
    let creator = super::naming::creator_of(&name).unwrap_or_else(|| panic!("unexpected name {name}"));
    assert_eq!(creator.pid, std::process::id(), "{name}");
    assert!(transports.iter().all(|t| t.segment_name() == name), "ranks attached different segments");
    assert!(!dev_shm_path(&name).exists(), "{name} is still in /dev/shm after setup");

    // The mappings outlive the name.
    run_with(transports, |rank, shm| {
        let next = (rank + 1) % 3;
        shm.put(next, 8, &[rank as u8 + 1; 5], 0, 1).unwrap();
        await_flag(&shm, 0, 1, "the previous rank's put");
        let mut got = [0u8; 5];
        shm.read_local(8, &mut got);
        assert_eq!(got, [((rank + 2) % 3) as u8 + 1; 5]);
    });
}

#[test]
fn a_communicator_of_one_rank_works() {
    let endpoints = Fabric::new(1, 0, FabricConfig::default());
    let shm = establish(&endpoints[0], 0, 1, 64).unwrap();
    assert!(!dev_shm_path(shm.segment_name()).exists());
    shm.put(0, 8, b"abc", 0, 9).unwrap();
    assert_eq!(shm.local_flag(0), 9);
    shm.send_reliable(0, b"me").unwrap();
    let mut out = Vec::new();
    assert_eq!(shm.poll_reliable(&mut out), Some(0));
    assert_eq!(out, b"me");
    assert_eq!(pattern_byte(1, 0), pattern(1, 1)[0]);
}

#[test]
fn every_rank_of_a_larger_communicator_reaches_every_other() {
    const SIZE: usize = 8;
    let transports = establish_all(SIZE, 1 << 20);
    let seen = run_with(transports, |rank, shm| {
        for peer in 0..SIZE {
            shm.put(peer, (1 << 19) + rank * 8, &[rank as u8; 8], rank * 8, rank as u64 + 1).unwrap();
        }
        (0..SIZE)
            .map(|source| {
                await_flag(&shm, source * 8, source as u64 + 1, "every rank's put");
                let mut got = [0u8; 8];
                shm.read_local((1 << 19) + source * 8, &mut got);
                got[0] as usize
            })
            .collect::<Vec<_>>()
    });
    let expected: Vec<usize> = (0..SIZE).collect();
    assert!(seen.iter().all(|row| *row == expected), "{seen:?}");
}

#[test]
fn polling_takes_turns_among_senders_with_messages_waiting() {
    const EACH: u8 = 10;
    let transports = establish_all(3, 64);
    let order = run_with(transports, |rank, shm| {
        if rank == 0 {
            await_flag(&shm, 0, 1, "rank 1 to finish sending");
            await_flag(&shm, 8, 1, "rank 2 to finish sending");
            let mut out = Vec::new();
            let order: Vec<(usize, u8)> = (0..2 * EACH).map(|_| (await_reliable(&shm, &mut out), out[0])).collect();
            Some(order)
        } else {
            for index in 0..EACH {
                shm.send_reliable(0, &[index]).unwrap();
            }
            shm.put_flag(0, (rank - 1) * 8, 1).unwrap();
            None
        }
    });
    let order = order[0].clone().unwrap();
    let senders: Vec<usize> = order.iter().map(|&(sender, _)| sender).collect();
    assert!(senders.windows(2).all(|pair| pair[0] != pair[1]), "one sender was served twice in a row: {senders:?}");
    for sender in [1, 2] {
        let indices: Vec<u8> = order.iter().filter(|&&(s, _)| s == sender).map(|&(_, index)| index).collect();
        assert_eq!(indices, (0..EACH).collect::<Vec<_>>(), "messages of rank {sender} out of order");
    }
}
