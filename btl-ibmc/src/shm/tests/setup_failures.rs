//! Setups that must fail on every rank alike and leave nothing behind.

use std::cell::Cell;
use std::sync::Mutex;

use super::super::node::HOSTNAME_BYTES;
use super::super::record::{RECORD_LEN, Record};
use super::super::segment::{OsCall, SegmentError, dev_shm_path};
use super::super::{ShmSetupError, establish};
use crate::fabric::{Fabric, FabricConfig, FabricEndpoint};
use crate::test_support::run_with;
use crate::transport::{Exchange, TransportError};

type Edit<'a> = &'a (dyn Fn(usize, usize, &mut [u8]) + Sync);

/// An exchange that lets a test rewrite what one rank sends or receives,
/// imitating a rank on another node or a rank that sees a different name.
struct Tampering<'a> {
    inner: FabricEndpoint,
    rank: usize,
    calls: Cell<usize>,
    /// (rank, call, record about to be sent)
    edit_mine: Edit<'a>,
    /// (rank, call, all records just received)
    edit_all: Edit<'a>,
    /// Rank 0's first record, to learn the segment name.
    leader_record: &'a Mutex<Option<Record>>,
}

impl Exchange for Tampering<'_> {
    fn allgather(&self, mine: &[u8], all: &mut [u8]) -> Result<(), TransportError> {
        let call = self.calls.get();
        self.calls.set(call + 1);
        let mut sent = mine.to_vec();
        (self.edit_mine)(self.rank, call, &mut sent);
        if self.rank == 0 && call == 0 {
            *self.leader_record.lock().unwrap() = Record::decode(&sent);
        }
        self.inner.allgather(&sent, all)?;
        (self.edit_all)(self.rank, call, all);
        Ok(())
    }
}

fn no_edit(_: usize, _: usize, _: &mut [u8]) {}

/// Runs `establish` on `size` tampered ranks; returns each rank's error and
/// the name rank 0 created.
fn failing_setup(size: usize, window_len: impl Fn(usize) -> usize + Sync, edit_mine: Edit, edit_all: Edit) -> (Vec<ShmSetupError>, String) {
    let leader_record = Mutex::new(None);
    let endpoints = Fabric::new(size, 0, FabricConfig::default());
    let errors = run_with(endpoints, |rank, inner| {
        let exchange = Tampering { inner, rank, calls: Cell::new(0), edit_mine, edit_all, leader_record: &leader_record };
        match establish(&exchange, rank, size, window_len(rank)) {
            Ok(_) => panic!("rank {rank} established despite the fault"),
            Err(error) => error,
        }
    });
    let name = leader_record.into_inner().unwrap().expect("rank 0 sent a record").segment_name;
    assert!(name.starts_with("/coll_rdma."), "rank 0 did not create a segment: {name:?}");
    (errors, name)
}

#[test]
fn a_rank_on_another_host_makes_every_rank_fail_and_nothing_is_left() {
    let rename_rank_2 = |rank: usize, call: usize, record: &mut [u8]| {
        if rank == 2 && call == 0 {
            let mut decoded = Record::decode(record).unwrap();
            decoded.node.hostname = [0; HOSTNAME_BYTES];
            decoded.node.hostname[..9].copy_from_slice(b"elsewhere");
            record.copy_from_slice(&decoded.encode());
        }
    };
    let (errors, name) = failing_setup(3, |_| 4096, &rename_rank_2, &no_edit);

    let here = super::super::node::NodeIdentity::current().host();
    for (rank, error) in errors.iter().enumerate() {
        assert_eq!(
            *error,
            ShmSetupError::NotNodeLocal { rank: 2, host: "elsewhere".into(), leader_host: here.clone(), off_node: 1 },
            "rank {rank}"
        );
    }
    let message = errors[0].to_string();
    assert!(message.contains("rank 2 runs on elsewhere") && message.contains(&here), "{message}");
    assert!(!dev_shm_path(&name).exists(), "{name} left in /dev/shm");
}

#[test]
fn a_rank_that_cannot_attach_makes_every_rank_fail_and_nothing_is_left() {
    let misdirect_rank_1 = |rank: usize, call: usize, all: &mut [u8]| {
        if rank == 1 && call == 0 {
            let mut leader = Record::decode(&all[..RECORD_LEN]).unwrap();
            leader.segment_name = "/coll_rdma.no.such.segment".into();
            all[..RECORD_LEN].copy_from_slice(&leader.encode());
        }
    };
    let (errors, name) = failing_setup(3, |_| 4096, &no_edit, &misdirect_rank_1);

    let expected = ShmSetupError::AttachFailed { rank: 1, reason: SegmentError::Os { call: OsCall::ShmOpen, errno: libc::ENOENT } };
    for (rank, error) in errors.iter().enumerate() {
        assert_eq!(*error, expected, "rank {rank}");
    }
    let message = errors[2].to_string();
    assert!(message.contains("rank 1 could not attach") && message.contains("shm_open failed"), "{message}");
    assert!(!dev_shm_path(&name).exists(), "{name} left in /dev/shm");
}

#[test]
fn ranks_asking_for_different_windows_all_fail() {
    let (errors, name) = failing_setup(3, |rank| if rank == 1 { 8192 } else { 4096 }, &no_edit, &no_edit);
    for (rank, error) in errors.iter().enumerate() {
        assert!(matches!(error, ShmSetupError::Inconsistent { rank: 1, .. }), "rank {rank}: {error}");
    }
    assert!(errors[0].to_string().contains("8192-byte windows, rank 0 for 3 ranks with 4096-byte"), "{}", errors[0]);
    assert!(!dev_shm_path(&name).exists(), "{name} left in /dev/shm");
}

#[test]
fn a_record_from_an_incompatible_build_fails_every_rank() {
    let garble_rank_1 = |rank: usize, call: usize, record: &mut [u8]| {
        if rank == 1 && call == 0 {
            record[0] ^= 0xFF;
        }
    };
    let (errors, name) = failing_setup(2, |_| 64, &garble_rank_1, &no_edit);
    for error in &errors {
        assert!(matches!(error, ShmSetupError::Inconsistent { rank: 1, .. }), "{error}");
    }
    assert!(!dev_shm_path(&name).exists(), "{name} left in /dev/shm");
}

#[test]
fn invalid_arguments_fail_before_any_exchange() {
    struct NoExchange;
    impl Exchange for NoExchange {
        fn allgather(&self, _: &[u8], _: &mut [u8]) -> Result<(), TransportError> {
            panic!("setup exchanged despite invalid arguments");
        }
    }
    assert_eq!(establish(&NoExchange, 2, 2, 64).unwrap_err(), ShmSetupError::InvalidArguments { rank: 2, size: 2, window_len: 64 });
    assert!(matches!(establish(&NoExchange, 0, 0, 64), Err(ShmSetupError::InvalidArguments { .. })));
    assert!(matches!(establish(&NoExchange, 0, 2, usize::MAX - 4), Err(ShmSetupError::InvalidArguments { .. })));
}

#[test]
fn a_failing_exchange_is_reported_and_rank_0_cleans_up() {
    struct BrokenExchange;
    impl Exchange for BrokenExchange {
        fn allgather(&self, mine: &[u8], _: &mut [u8]) -> Result<(), TransportError> {
            let name = Record::decode(mine).unwrap().segment_name;
            assert!(dev_shm_path(&name).exists(), "rank 0 should have created {name}");
            LAST_NAME.with(|last| *last.borrow_mut() = name);
            Err(TransportError::Failed("link down".into()))
        }
    }
    thread_local!(static LAST_NAME: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) });

    let error = establish(&BrokenExchange, 0, 2, 64).unwrap_err();
    assert_eq!(error, ShmSetupError::Exchange(TransportError::Failed("link down".into())));
    assert!(error.to_string().contains("link down"));
    let name = LAST_NAME.with(|last| last.borrow().clone());
    assert!(!dev_shm_path(&name).exists(), "{name} left in /dev/shm");
}
