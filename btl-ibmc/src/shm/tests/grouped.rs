//! One segment per node group of a communicator that spans nodes: each
//! group's ranks reach each other and no one else, and a failure in one
//! group fails every rank of every group.

use std::cell::Cell;
use std::sync::Mutex;

use super::super::record::{RECORD_LEN, Record};
use super::super::segment::{OsCall, SegmentError, dev_shm_path};
use super::super::{NodeGroups, ShmSetupError, establish_in_groups};
use crate::fabric::{Fabric, FabricConfig, FabricEndpoint};
use crate::test_support::{await_flag, await_reliable, run_with};
use crate::transport::{Endpoint, Exchange, ReliableChannel, TransportError, Windows};

/// Ranks 0, 2, 4 on one node and 1, 3 on another.
fn interleaved_groups() -> NodeGroups {
    NodeGroups::from_keys(&["a", "b", "a", "b", "a"])
}

#[test]
fn each_group_shares_its_own_segment_indexed_by_position() {
    let groups = interleaved_groups();
    let endpoints = Fabric::new(groups.size(), 0, FabricConfig::default());
    let names = run_with(endpoints, |rank, exchange| {
        let shm = establish_in_groups(&exchange, rank, &groups, 4096).unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        let members: Vec<usize> = groups.members(rank).collect();
        assert_eq!((shm.rank(), shm.size()), (groups.local_index(rank), members.len()), "rank {rank}");
        // Every member writes its communicator rank into every member's
        // window, at the slot of its position, and sends it reliably.
        for index in 0..members.len() {
            shm.put(index, 64 + shm.rank() * 8, &(rank as u64 + 100).to_le_bytes(), shm.rank() * 8, 1).unwrap();
            shm.send_reliable(index, &(rank as u32).to_le_bytes()).unwrap();
        }
        let mut out = Vec::new();
        for (index, &member) in members.iter().enumerate() {
            await_flag(&shm, index * 8, 1, "a node-local put");
            let mut word = [0u8; 8];
            shm.read_local(64 + index * 8, &mut word);
            assert_eq!(u64::from_le_bytes(word), member as u64 + 100, "rank {rank}: slot {index}");
        }
        let mut senders: Vec<u32> = (0..members.len())
            .map(|_| {
                let index = await_reliable(&shm, &mut out);
                let sender = u32::from_le_bytes(out[..4].try_into().unwrap());
                assert_eq!(members[index], sender as usize, "rank {rank}: position {index} is not rank {sender}");
                sender
            })
            .collect();
        senders.sort_unstable();
        assert_eq!(senders, members.iter().map(|&m| m as u32).collect::<Vec<_>>(), "rank {rank}");
        shm.segment_name().to_owned()
    });
    assert_eq!(names[0], names[2]);
    assert_eq!(names[1], names[3]);
    assert_ne!(names[0], names[1], "two nodes share one segment");
}

/// An exchange that makes rank 1's segment creation look failed to all,
/// and notes the names both leaders created.
struct FailedCreation<'a> {
    inner: FabricEndpoint,
    calls: Cell<usize>,
    created: &'a Mutex<Vec<String>>,
}

impl Exchange for FailedCreation<'_> {
    fn allgather(&self, mine: &[u8], all: &mut [u8]) -> Result<(), TransportError> {
        let call = self.calls.replace(self.calls.get() + 1);
        self.inner.allgather(mine, all)?;
        if call == 0 {
            let names = all.chunks_exact(RECORD_LEN).map(|bytes| Record::decode(bytes).unwrap().segment_name);
            self.created.lock().unwrap().extend(names.filter(|name| !name.is_empty()));
            let record = &mut all[RECORD_LEN..2 * RECORD_LEN];
            let mut decoded = Record::decode(record).unwrap();
            decoded.create_outcome = Err(SegmentError::Os { call: OsCall::Ftruncate, errno: libc::ENOSPC });
            record.copy_from_slice(&decoded.encode());
        }
        Ok(())
    }
}

#[test]
fn one_group_failing_to_create_fails_every_rank_and_nothing_is_left() {
    let groups = interleaved_groups();
    let endpoints = Fabric::new(groups.size(), 0, FabricConfig::default());
    let created = Mutex::new(Vec::new());
    let outcomes = run_with(endpoints, |rank, inner| {
        let exchange = FailedCreation { inner, calls: Cell::new(0), created: &created };
        let result = establish_in_groups(&exchange, rank, &groups, 4096).map(|shm| shm.segment_name().to_owned());
        (result.err(), exchange.calls.get())
    });
    let expected = ShmSetupError::CreateFailed(SegmentError::Os { call: OsCall::Ftruncate, errno: libc::ENOSPC });
    for (rank, (error, calls)) in outcomes.iter().enumerate() {
        assert_eq!(error.as_ref(), Some(&expected), "rank {rank}");
        assert_eq!(*calls, 1, "rank {rank} went on to a second exchange");
    }
    let mut created = created.into_inner().unwrap();
    created.sort_unstable();
    created.dedup();
    assert_eq!(created.len(), 2, "both leaders created a segment: {created:?}");
    for name in created {
        assert!(!dev_shm_path(&name).exists(), "{name} left in /dev/shm");
    }
}
