//! Single-copy MPI_Bcast (receivers copy straight from the root's buffer
//! with process_vm_readv) on threads as ranks: over the test fabric's
//! shared windows and over real shared memory, at sizes up to 64 MiB from
//! every root, odd lengths, interleaved with small broadcasts that take the
//! multicast window (whose root returns early), and with cross-memory
//! attach refused by one rank, which must send every rank down the
//! copy-in/copy-out window. Every receiver compares every byte with the
//! root's pattern.

use std::time::Duration;

use btl_ibmc::fabric::{run_ranks_watched, Fabric, FabricConfig, FabricEndpoint};
use btl_ibmc::{establish, CrossMemoryRefusal, MulticastKind, PeerReads, RmcastConfig, Transport, WaitPolicy};
use coll_rdma_core::collectives::bcast::single_copy::{root_share, SingleCopyBcast, ROOT_SHARE_MIN_BYTES};
use coll_rdma_core::collectives::bcast::{Bcast, BcastConfig};

const MIB: usize = 1 << 20;
const SINGLE_COPY_FROM: usize = 64 * 1024;
const PATIENCE: Duration = Duration::from_secs(600);

fn policy() -> WaitPolicy {
    WaitPolicy { spin_polls: 0, kernel_spin_polls: 0, stall_warning: Duration::from_secs(30), fault_timeout: None }
}

fn config() -> BcastConfig {
    let multicast = RmcastConfig { wait: policy(), give_up_after: Some(Duration::from_secs(300)), ..RmcastConfig::default() };
    BcastConfig { multicast, single_copy_min_bytes: SINGLE_COPY_FROM, ..BcastConfig::default() }
}

/// Message `index`'s pattern: a different one for every message, so a
/// stale byte of an earlier message cannot pass.
fn fill(buf: &mut [u8], index: usize) {
    for (position, chunk) in buf.chunks_mut(8).enumerate() {
        let word = pattern_word(index, position);
        chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
    }
}

fn first_wrong_byte(buf: &[u8], index: usize) -> Option<usize> {
    buf.chunks(8).enumerate().find_map(|(position, chunk)| {
        let word = pattern_word(index, position).to_le_bytes();
        (chunk != &word[..chunk.len()]).then(|| position * 8 + chunk.iter().zip(word).position(|(a, b)| *a != b).unwrap_or(0))
    })
}

fn pattern_word(index: usize, position: usize) -> u64 {
    let mut x = (position as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (index as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    x.wrapping_mul(0x94D0_49BB_1331_11EB)
}

/// (root, length) of every call, the same on every rank.
type Script = Vec<(usize, usize)>;

/// Every root in turn for each length, with a small broadcast from the
/// next root after each large one.
fn script(size: usize, lengths: &[usize]) -> Script {
    let mut calls = Vec::new();
    for &len in lengths {
        for root in 0..size {
            calls.push((root, len));
            calls.push(((root + 1) % size, 4096 + root));
        }
    }
    calls
}

/// Runs `script` on one rank; returns the single-copy calls it saw as a
/// root and the multicast messages it sent, and checks that as a root it
/// wrote its share into every receiver where the transport lets it.
fn play<T: Transport>(rank: usize, size: usize, transport: &T, script: &Script) -> (usize, u64) {
    let mut bcast = Bcast::new(rank, size, 0, config());
    let mut single_copy_roots = 0;
    let mut shares_written = 0u64;
    for (index, &(root, len)) in script.iter().enumerate() {
        let mut buf = vec![0xEEu8; len];
        if rank == root {
            fill(&mut buf, index);
            single_copy_roots += usize::from(bcast.uses_single_copy(transport, len));
            if bcast.uses_single_copy(transport, len) {
                shares_written += ((size - 1) * root_share(len, size)) as u64;
            }
        }
        bcast.bcast(transport, root, &mut buf).unwrap_or_else(|e| panic!("rank {rank} call {index} ({len} bytes from {root}): {e}"));
        if let Some(at) = first_wrong_byte(&buf, index) {
            panic!("rank {rank} call {index} ({len} bytes from root {root}): byte {at} is wrong");
        }
    }
    bcast.drain(transport).expect("drain");
    assert_eq!(bcast.single_copy_root_share_bytes(), shares_written, "rank {rank}: bytes written into receivers as root");
    (single_copy_roots, bcast.stats().messages_sent)
}

fn region_len(size: usize) -> usize {
    Bcast::region_len(size, &config())
}

/// Fabric endpoints with shared windows, cross-memory attach set up
/// collectively (refused if `refusing` names a rank).
fn fabric(size: usize, refusing: Option<usize>) -> Vec<(FabricEndpoint, Result<(), CrossMemoryRefusal>)> {
    let fabric = FabricConfig { multicast_kind: MulticastKind::SharedWindow, ..FabricConfig::default() };
    run_ranks_watched(Fabric::new(size, region_len(size), fabric), PATIENCE, move |rank, mut endpoint: FabricEndpoint| {
        let verdict = endpoint.enable_cross_memory(refusing == Some(rank));
        (endpoint, verdict)
    })
}

fn run(size: usize, refusing: Option<usize>, script: Script) -> Vec<(usize, u64)> {
    let endpoints: Vec<FabricEndpoint> = fabric(size, refusing)
        .into_iter()
        .map(|(endpoint, verdict)| {
            assert_eq!(verdict.is_ok(), refusing.is_none(), "{verdict:?}");
            endpoint
        })
        .collect();
    run_ranks_watched(endpoints, PATIENCE, move |rank, endpoint: FabricEndpoint| play(rank, size, &endpoint, &script))
}

#[test]
fn every_root_at_every_size_up_to_64_mib_arrives_in_one_copy() {
    for size in [2, 3, 4] {
        // Around the root's share: below it, at it, a share of less than a
        // page at np=4 (none), and shares that do not end on a page.
        let lengths = [
            SINGLE_COPY_FROM,
            SINGLE_COPY_FROM + 1,
            ROOT_SHARE_MIN_BYTES - 1,
            ROOT_SHARE_MIN_BYTES,
            MIB + 3,
            64 * MIB,
            64 * MIB - 5,
        ];
        let results = run(size, None, script(size, &lengths));
        for (rank, &(single_copy_roots, _)) in results.iter().enumerate() {
            assert_eq!(single_copy_roots, lengths.len(), "np {size} rank {rank}: single-copy calls as root");
        }
        // Only the small interleaved calls went through the window.
        let multicast: u64 = results.iter().map(|&(_, sent)| sent).sum();
        assert_eq!(multicast, (lengths.len() * size) as u64, "np {size}");
    }
}

#[test]
fn one_rank_refusing_cross_memory_sends_everyone_through_the_window() {
    for refusing in [0, 2] {
        let size = 3;
        let lengths = [SINGLE_COPY_FROM, 3 * MIB + 1];
        let results = run(size, Some(refusing), script(size, &lengths));
        for (rank, &(single_copy_roots, _)) in results.iter().enumerate() {
            assert_eq!(single_copy_roots, 0, "rank {rank} used single copy although rank {refusing} refused");
        }
        let multicast: u64 = results.iter().map(|&(_, sent)| sent).sum();
        assert_eq!(multicast, (2 * lengths.len() * size) as u64);
    }
}

#[test]
fn real_shared_memory_carries_single_copy_bcasts_from_every_root() {
    let size = 3;
    let exchanges = Fabric::new(size, 0, FabricConfig::default());
    let transports = run_ranks_watched(exchanges, PATIENCE, move |rank, exchange: FabricEndpoint| {
        let mut shm = establish(&exchange, rank, size, region_len(size)).expect("shm");
        shm.enable_cross_memory(&exchange, false).expect("cross-memory attach between threads of one process");
        assert!(shm.reads_peer_memory());
        shm
    });
    let script = script(size, &[SINGLE_COPY_FROM + 7, 5 * MIB - 1, 16 * MIB]);
    let results = run_ranks_watched(transports, PATIENCE, move |rank, shm| play(rank, size, &shm, &script));
    assert!(results.iter().all(|&(single_copy_roots, _)| single_copy_roots == 3), "{results:?}");
}

#[test]
fn a_root_that_cannot_pack_fails_every_receiver_instead_of_hanging_them() {
    let size = 3;
    let endpoints: Vec<FabricEndpoint> = fabric(size, None).into_iter().map(|(endpoint, _)| endpoint).collect();
    let outcomes = run_ranks_watched(endpoints, PATIENCE, move |rank, endpoint: FabricEndpoint| {
        let mut bcast = Bcast::new(rank, size, 0, config());
        let len = 2 * SINGLE_COPY_FROM;
        if rank == 1 {
            bcast.abandon_at_root(&endpoint, 1, len).map_err(|e| e.to_string())
        } else {
            bcast.bcast(&endpoint, 1, &mut vec![0; len]).map_err(|e| e.to_string())
        }
    });
    assert!(outcomes[1].is_ok());
    for rank in [0, 2] {
        let why = outcomes[rank].as_ref().expect_err("a receiver of an abandoned bcast must fail");
        assert!(why.contains("no message"), "rank {rank}: {why}");
    }
}

#[test]
fn the_root_copies_about_one_rank_s_share_of_large_messages() {
    assert_eq!(root_share(ROOT_SHARE_MIN_BYTES - 1, 2), 0);
    assert_eq!(root_share(ROOT_SHARE_MIN_BYTES, 2), ROOT_SHARE_MIN_BYTES / 2);
    assert_eq!(root_share(MIB + 3, 3), (MIB + 3) / 3 / 4096 * 4096);
    assert_eq!(root_share(64 * MIB, 1), 0);
    for (len, size) in [(ROOT_SHARE_MIN_BYTES, 4), (MIB + 3, 3), (64 * MIB - 5, 8)] {
        let share = root_share(len, size);
        assert!(share % 4096 == 0 && share <= len / size && share + 4096 > len / size, "{len} bytes at np {size}: {share}");
    }
}

/// A receiver that expects another length (an erroneous program) fails
/// its call; the root must neither write into that receiver's buffer nor
/// wait for it for ever (it used to wait until the fault timeout).
#[test]
fn a_receiver_expecting_another_length_fails_without_holding_the_root() {
    let size = 3;
    let len = 2 * ROOT_SHARE_MIN_BYTES;
    let endpoints: Vec<FabricEndpoint> = fabric(size, None).into_iter().map(|(endpoint, _)| endpoint).collect();
    let outcomes = run_ranks_watched(endpoints, Duration::from_secs(120), move |rank, endpoint: FabricEndpoint| {
        let mut bcast = Bcast::new(rank, size, 0, config());
        let mut buf = vec![0xEEu8; if rank == 2 { len + 4096 } else { len }];
        if rank == 0 {
            fill(&mut buf, 0);
        }
        let outcome = bcast.bcast(&endpoint, 0, &mut buf).map_err(|e| e.to_string());
        (outcome, buf, bcast.single_copy_root_share_bytes())
    });
    let (root_outcome, _, root_wrote) = &outcomes[0];
    assert!(root_outcome.is_ok(), "{root_outcome:?}");
    assert_eq!(*root_wrote, root_share(len, size) as u64, "the root writes into rank 1 only");
    assert_eq!(outcomes[1].0, Ok(()));
    assert_eq!(first_wrong_byte(&outcomes[1].1, 0), None);
    let why = outcomes[2].0.as_ref().expect_err("a receiver of another length must fail");
    assert!(why.contains(&format!("{len} bytes")), "{why}");
    assert!(outcomes[2].1.iter().all(|&b| b == 0xEE), "the root wrote into the buffer of a receiver of another length");
}

/// A transport whose writes into peers' memory fail (as a kernel could
/// refuse process_vm_writev while allowing reads): every receiver must read
/// the root's share itself.
struct RefusingWrites(FabricEndpoint);

impl btl_ibmc::Endpoint for RefusingWrites {
    fn name(&self) -> &'static str {
        "fabric refusing writes"
    }
    fn rank(&self) -> usize {
        self.0.rank()
    }
    fn size(&self) -> usize {
        self.0.size()
    }
    fn progress(&self) {
        self.0.progress()
    }
}

impl btl_ibmc::Windows for RefusingWrites {
    fn window_len(&self) -> usize {
        self.0.window_len()
    }
    fn put(&self, peer: usize, offset: usize, data: &[u8], flag_offset: usize, flag: u64) -> Result<(), btl_ibmc::TransportError> {
        self.0.put(peer, offset, data, flag_offset, flag)
    }
    fn put_flag(&self, peer: usize, flag_offset: usize, value: u64) -> Result<(), btl_ibmc::TransportError> {
        self.0.put_flag(peer, flag_offset, value)
    }
    fn local_flag(&self, flag_offset: usize) -> u64 {
        self.0.local_flag(flag_offset)
    }
    fn set_local_flag(&self, flag_offset: usize, value: u64) {
        self.0.set_local_flag(flag_offset, value)
    }
    fn read_local(&self, offset: usize, out: &mut [u8]) {
        self.0.read_local(offset, out)
    }
}

impl PeerReads for RefusingWrites {
    fn read_peer(&self, peer: usize, offset: usize, out: &mut [u8]) -> Result<(), btl_ibmc::TransportError> {
        self.0.read_peer(peer, offset, out)
    }
    fn peer_flag(&self, peer: usize, flag_offset: usize) -> Result<u64, btl_ibmc::TransportError> {
        self.0.peer_flag(peer, flag_offset)
    }
    fn reads_peer_memory(&self) -> bool {
        self.0.reads_peer_memory()
    }
    fn read_peer_memory(&self, peer: usize, address: u64, out: &mut [u8]) -> Result<(), btl_ibmc::TransportError> {
        self.0.read_peer_memory(peer, address, out)
    }
    fn write_peer_memory(&self, _peer: usize, _address: u64, _data: &[u8]) -> Result<(), btl_ibmc::TransportError> {
        Err(btl_ibmc::TransportError::Unsupported("writing a peer's memory (refused by this test)"))
    }
}

#[test]
fn receivers_read_the_root_s_share_themselves_when_its_writes_fail() {
    let size = 3;
    let lengths = [ROOT_SHARE_MIN_BYTES, 3 * MIB + 5];
    let endpoints: Vec<FabricEndpoint> = fabric(size, None).into_iter().map(|(endpoint, _)| endpoint).collect();
    assert!(SingleCopyBcast::region_len(size) <= region_len(size));
    run_ranks_watched(endpoints, PATIENCE, move |rank, endpoint: FabricEndpoint| {
        let transport = RefusingWrites(endpoint);
        let mut bcast = SingleCopyBcast::new(rank, size, 0, policy());
        for (index, &len) in lengths.iter().enumerate() {
            for root in 0..size {
                let mut buf = vec![0xEEu8; len];
                if rank == root {
                    fill(&mut buf, index);
                }
                bcast.bcast(&transport, root, &mut buf).unwrap_or_else(|e| panic!("rank {rank}, {len} bytes from {root}: {e}"));
                assert_eq!(first_wrong_byte(&buf, index), None, "rank {rank}, {len} bytes from {root}");
            }
        }
        assert_eq!(bcast.root_share_bytes(), 0);
    });
}

/// The root serves receivers in the order they offer their buffers: here
/// rank 1 enters only once rank 2 has returned, which deadlocks a root that
/// writes its shares in rank order.
#[test]
fn a_late_receiver_does_not_hold_up_another_receiver_s_share() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let size = 3;
    let len = 2 * ROOT_SHARE_MIN_BYTES + 11;
    let rank_2_returned = Arc::new(AtomicBool::new(false));
    let endpoints: Vec<FabricEndpoint> = fabric(size, None).into_iter().map(|(endpoint, _)| endpoint).collect();
    let results = run_ranks_watched(endpoints, Duration::from_secs(120), move |rank, endpoint: FabricEndpoint| {
        let mut bcast = Bcast::new(rank, size, 0, config());
        let mut buf = vec![0xEEu8; len];
        if rank == 0 {
            fill(&mut buf, 0);
        }
        if rank == 1 {
            while !rank_2_returned.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        bcast.bcast(&endpoint, 0, &mut buf).unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        if rank == 2 {
            rank_2_returned.store(true, Ordering::Release);
        }
        (first_wrong_byte(&buf, 0), bcast.single_copy_root_share_bytes())
    });
    assert!(results.iter().all(|&(wrong, _)| wrong.is_none()), "{results:?}");
    assert_eq!(results[0].1, 2 * root_share(len, size) as u64);
}
