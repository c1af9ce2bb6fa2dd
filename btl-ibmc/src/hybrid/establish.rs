//! Setting up the hybrid collectively: one exchange of node keys gives
//! every rank the same node groups; then shared memory is set up per group
//! and verbs between the groups, each step all-or-nothing across the whole
//! communicator, so every rank gets a transport or every rank an error.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::HybridTransport;
use super::node_key::{KEY_LEN, node_key};
use crate::shm::node::NodeIdentity;
use crate::shm::{self, NodeGroups, ShmSetupError};
use crate::transport::{Exchange, TransportError};
use crate::verbs::{BorrowedMemory, Placement, VerbsConfig, VerbsSetupError, establish_placed};

#[derive(Debug)]
pub enum HybridSetupError {
    InvalidArguments(String),
    Exchange(TransportError),
    Shm(ShmSetupError),
    Verbs(VerbsSetupError),
}

impl std::fmt::Display for HybridSetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HybridSetupError::InvalidArguments(what) => write!(f, "cannot set up shared memory + verbs: {what}"),
            HybridSetupError::Exchange(error) => write!(f, "the exchange of node identities failed: {error}"),
            HybridSetupError::Shm(error) => write!(f, "shared memory within the nodes failed: {error}"),
            HybridSetupError::Verbs(error) => write!(f, "verbs between the nodes failed: {error}"),
        }
    }
}

impl std::error::Error for HybridSetupError {}

/// Which pairs of ranks on different nodes get an RC queue pair (and its
/// receive buffers). Flat schedules write across nodes between any two
/// ranks; two-level ones only between the nodes' leaders, which bounds a
/// node's queue pairs by the node count instead of the ranks squared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrossNodePairs {
    Every,
    /// Only leaders connect wherever some rank would otherwise hold more
    /// than this many queue pairs (0: wherever there are several nodes).
    LeadersAbove(usize),
}

impl CrossNodePairs {
    /// Whether only leaders connect on `groups`: the same answer on every
    /// rank, since every rank sees the same groups.
    pub fn leaders_only(self, groups: &NodeGroups) -> bool {
        match self {
            CrossNodePairs::Every => false,
            CrossNodePairs::LeadersAbove(most) => groups.count() > 1 && groups.most_ranks_elsewhere() > most,
        }
    }
}

/// Sets up one communicator; every rank calls it with the same `size`,
/// `window_len`, `pretend_nodes`, `pairs` and (except per-host fields)
/// `config`. `pretend_nodes` > 1 splits each host's ranks into that many
/// blocks of consecutive ranks treated as separate nodes (testing on one
/// machine).
pub fn establish(
    exchange: &dyn Exchange,
    rank: usize,
    size: usize,
    window_len: usize,
    config: &VerbsConfig,
    pretend_nodes: usize,
    pairs: CrossNodePairs,
) -> Result<HybridTransport, HybridSetupError> {
    if size == 0 || rank >= size {
        return Err(HybridSetupError::InvalidArguments(format!("rank {rank} of {size}")));
    }
    let mine = node_key(&NodeIdentity::current(), rank, size, pretend_nodes);
    let mut keys = vec![0u8; size * KEY_LEN];
    exchange.allgather(&mine, &mut keys).map_err(HybridSetupError::Exchange)?;
    let groups = NodeGroups::from_keys(&keys.chunks_exact(KEY_LEN).collect::<Vec<_>>());

    let shm = Arc::new(shm::establish_in_groups(exchange, rank, &groups, window_len).map_err(HybridSetupError::Shm)?);
    let (base, len) = shm.own_window_span();
    let keeper = Arc::clone(&shm);
    let leaders_only = pairs.leaders_only(&groups);
    let placement = Placement { window: Some(BorrowedMemory { base, len, keeper }), nodes: Some(&groups), leaders_only };
    // SAFETY: the window is `shm`'s own, a whole number of pages, mapped
    // while `shm` lives; the registration holds `shm` until it is undone,
    // so whichever the hybrid drops first, the segment outlives it.
    let verbs = unsafe { establish_placed(exchange, rank, size, window_len, config, &placement) }.map_err(HybridSetupError::Verbs)?;

    let node_index = (0..size).map(|peer| groups.same_node(peer, rank).then(|| groups.local_index(peer))).collect();
    Ok(HybridTransport {
        verbs,
        shm,
        rank,
        node_index,
        node_members: groups.members(rank).collect(),
        groups,
        leaders_only,
        shm_first: AtomicBool::new(true),
    })
}
