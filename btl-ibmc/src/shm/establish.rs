//! The collective setup every rank of a communicator runs together: the
//! first rank of each node (rank 0 when all share one) creates the node's
//! segment, all ranks compare node identities, the others attach, all
//! confirm, and each creator removes the name at once so nothing outlives
//! the processes in /dev/shm. A creator killed before that leaves its
//! segment behind; the next creator on the node removes it first. Every decision is computed from
//! exchanged data alone, so all ranks reach the same verdict and none is
//! left waiting in an exchange the others skipped.

use super::ShmTransport;
use super::groups::NodeGroups;
use super::layout::SegmentLayout;
use super::node::NodeIdentity;
use super::reap::reap_orphans;
use super::record::{OUTCOME_LEN, RECORD_LEN, Record, decode_outcome, encode_outcome};
use super::segment::{SegmentError, ShmSegment};
use crate::transport::{Exchange, TransportError};

/// Why a communicator cannot use shared memory. Every rank of the
/// communicator receives the same variant (except for `InvalidArguments`
/// and `Exchange`, which are local failures).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShmSetupError {
    /// `rank >= size`, `size == 0`, or the segment would not fit in memory.
    InvalidArguments { rank: usize, size: usize, window_len: usize },
    /// The exchange used for setup failed.
    Exchange(TransportError),
    /// A rank's record was not understood, or it asked for a different
    /// communicator size or window length than rank 0.
    Inconsistent { rank: usize, detail: String },
    /// Some rank runs on another node than rank 0 (`rank` is the first).
    NotNodeLocal { rank: usize, host: String, leader_host: String, off_node: usize },
    /// A node's first rank could not create the segment.
    CreateFailed(SegmentError),
    /// A rank could not map its node's segment (`rank` is the first).
    AttachFailed { rank: usize, reason: SegmentError },
}

impl std::fmt::Display for ShmSetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShmSetupError::InvalidArguments { rank, size, window_len } => write!(
                f,
                "cannot set up shared memory for rank {rank} of {size} with {window_len}-byte windows \
                 (rank out of range, or the segment would not fit in memory)"
            ),
            ShmSetupError::Exchange(error) => write!(f, "the shared-memory setup exchange failed: {error}"),
            ShmSetupError::Inconsistent { rank, detail } => {
                write!(f, "ranks disagree about the shared-memory setup: rank {rank} {detail}")
            }
            ShmSetupError::NotNodeLocal { rank, host, leader_host, off_node } => {
                write!(f, "shared memory needs every rank on one node, but rank {rank} runs on {host}")?;
                if host == leader_host {
                    write!(f, " (same hostname as rank 0 but a different kernel boot id)")?;
                } else {
                    write!(f, " and rank 0 on {leader_host}")?;
                }
                write!(f, "; {off_node} rank(s) are off rank 0's node")
            }
            ShmSetupError::CreateFailed(reason) => {
                write!(f, "the first rank of a node could not create its shared-memory segment: {reason}")
            }
            ShmSetupError::AttachFailed { rank, reason } => {
                write!(f, "rank {rank} could not attach its node's shared-memory segment: {reason}")
            }
        }
    }
}

impl std::error::Error for ShmSetupError {}

/// Sets up shared memory for one communicator; every rank calls it with the
/// same `size` and `window_len`, and all get a transport or all get an error.
pub fn establish(exchange: &dyn Exchange, rank: usize, size: usize, window_len: usize) -> Result<ShmTransport, ShmSetupError> {
    if size == 0 {
        return Err(ShmSetupError::InvalidArguments { rank, size, window_len });
    }
    establish_in_groups(exchange, rank, &NodeGroups::single(size), window_len)
}

/// Sets up one segment per node group of a communicator that spans nodes:
/// each rank gets a transport over the ranks of its own group, indexed by
/// their position in it. The exchanges run over the whole communicator and
/// every verdict covers every group, so all ranks (of all groups) get a
/// transport or all get the same error.
pub fn establish_in_groups(
    exchange: &dyn Exchange,
    rank: usize,
    groups: &NodeGroups,
    window_len: usize,
) -> Result<ShmTransport, ShmSetupError> {
    let size = groups.size();
    let invalid = ShmSetupError::InvalidArguments { rank, size, window_len };
    if rank >= size {
        return Err(invalid);
    }
    let group_len = groups.local_count(rank);
    let Some(layout) = SegmentLayout::new(group_len, window_len) else { return Err(invalid) };

    let created = (groups.leader_of(rank) == rank).then(|| {
        reap_orphans();
        create(&layout)
    });
    let mine = Record {
        size: group_len as u64,
        window_len: window_len as u64,
        node: NodeIdentity::current(),
        segment_name: match &created {
            Some(Ok(owned)) => owned.segment.name().to_owned(),
            _ => String::new(),
        },
        segment_len: layout.total_len as u64,
        create_outcome: match &created {
            Some(Err(error)) => Err(error.clone()),
            _ => Ok(()),
        },
    };
    let mut records = vec![0u8; size * RECORD_LEN];
    exchange.allgather(&mine.encode(), &mut records).map_err(ShmSetupError::Exchange)?;
    let leader = judge_records(&records, groups)?.swap_remove(groups.leader_of(rank));

    let (mapped, name_owner) = match created {
        Some(Ok(owned)) => (Ok(owned.segment), Some(owned.name)),
        Some(Err(error)) => return Err(ShmSetupError::CreateFailed(error)),
        None => (attach(&leader, &layout), None),
    };

    let mut outcomes = vec![0u8; size * OUTCOME_LEN];
    let my_outcome = mapped.as_ref().map(|_| ()).map_err(Clone::clone);
    exchange.allgather(&encode_outcome(&my_outcome), &mut outcomes).map_err(ShmSetupError::Exchange)?;
    for (failed_rank, outcome) in outcomes.chunks_exact(OUTCOME_LEN).enumerate() {
        if let Err(reason) = decode_outcome(outcome) {
            return Err(ShmSetupError::AttachFailed { rank: failed_rank, reason });
        }
    }

    // Every rank has its mapping: the name has served its purpose.
    drop(name_owner);
    let segment = mapped.map_err(|reason| ShmSetupError::AttachFailed { rank, reason })?;
    Ok(ShmTransport::new(segment, layout, groups.local_index(rank)))
}

/// Rank 0's segment and the duty to remove its name.
struct OwnedSegment {
    segment: ShmSegment,
    name: UnlinkOnDrop,
}

/// Removes a segment name however setup ends, error or panic included.
struct UnlinkOnDrop(String);

impl Drop for UnlinkOnDrop {
    fn drop(&mut self) {
        if let Err(error) = ShmSegment::unlink(&self.0) {
            tracing::warn!("could not remove shared-memory name {}: {error}", self.0);
        }
    }
}

fn create(layout: &SegmentLayout) -> Result<OwnedSegment, SegmentError> {
    // Rings included: a ring left sparse is backed only when a pair first
    // uses it, and a /dev/shm full by then kills that rank with SIGBUS in
    // the middle of a collective. Failing here instead lets every rank
    // fall back alike.
    let segment = ShmSegment::create(layout.total_len, layout.total_len)?;
    let name = UnlinkOnDrop(segment.name().to_owned());
    layout.write_header(&segment);
    Ok(OwnedSegment { segment, name })
}

fn attach(leader: &Record, layout: &SegmentLayout) -> Result<ShmSegment, SegmentError> {
    if leader.segment_len != layout.total_len as u64 {
        return Err(SegmentError::LayoutMismatch);
    }
    let segment = ShmSegment::attach(&leader.segment_name, layout.total_len)?;
    if !layout.header_matches(&segment) {
        return Err(SegmentError::LayoutMismatch);
    }
    Ok(segment)
}

/// The verdict on the first exchange, identical on every rank: every
/// rank's record if all groups can go on to attach.
fn judge_records(records: &[u8], groups: &NodeGroups) -> Result<Vec<Record>, ShmSetupError> {
    let mut decoded = Vec::with_capacity(records.len() / RECORD_LEN);
    for (rank, bytes) in records.chunks_exact(RECORD_LEN).enumerate() {
        let record = Record::decode(bytes).ok_or_else(|| ShmSetupError::Inconsistent {
            rank,
            detail: "sent a setup record this build does not understand (mixed builds of coll rdma?)".into(),
        })?;
        decoded.push(record);
    }
    let leader_of = |rank: usize| &decoded[groups.leader_of(rank)];
    let followers = || (0..decoded.len()).filter(|&rank| groups.leader_of(rank) != rank);

    for rank in followers() {
        let (record, leader) = (&decoded[rank], leader_of(rank));
        if record.size != leader.size || record.window_len != leader.window_len {
            return Err(ShmSetupError::Inconsistent {
                rank,
                detail: format!(
                    "asked for {} ranks with {}-byte windows, rank {} for {} ranks with {}-byte windows",
                    record.size,
                    record.window_len,
                    groups.leader_of(rank),
                    leader.size,
                    leader.window_len
                ),
            });
        }
    }

    let mut off_node = followers().filter(|&rank| decoded[rank].node != leader_of(rank).node);
    if let Some(rank) = off_node.next() {
        return Err(ShmSetupError::NotNodeLocal {
            rank,
            host: decoded[rank].node.host(),
            leader_host: leader_of(rank).node.host(),
            off_node: 1 + off_node.count(),
        });
    }

    let leaders = (0..decoded.len()).filter(|&rank| groups.leader_of(rank) == rank);
    if let Some(reason) = leaders.filter_map(|rank| decoded[rank].create_outcome.clone().err()).next() {
        return Err(ShmSetupError::CreateFailed(reason));
    }
    Ok(decoded)
}
