//! Why a call goes to the module underneath. Kept as data and formatted
//! only when reported: a loop of calls above a size limit must not pay for
//! building a message it prints once. The `Display` words are what verbose
//! prints (and what ci/mpi-tests.sh matches): change them only together.

use std::ffi::c_int;
use std::fmt;

/// Why a datatype cannot take the native path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotContiguous {
    Gaps,
    Query(c_int),
}

impl fmt::Display for NotContiguous {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotContiguous::Gaps => write!(f, "the datatype is not contiguous"),
            NotContiguous::Query(rc) => write!(f, "the datatype could not be queried (error {rc})"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handover {
    NegativeCount(c_int),
    Datatype(NotContiguous),
    ElementTooLarge { element_bytes: usize, segment_bytes: usize },
    AboveLimit { bytes: usize, parameter: &'static str, limit: usize },
    AboveWindow { bytes: usize },
    /// More bytes than MPI_Pack and MPI_Unpack count in a C int, and a
    /// rank (the lowest such) whose datatype is not contiguous.
    AbovePackLimit { bytes: usize, rank: usize },
    TransportUnavailable,
    /// Only the nodes' leaders hold queue pairs across nodes, and this
    /// call would need another rank to cross.
    OnlyLeadersConnected(&'static str),
    /// The path the blocking call takes here has no non-blocking form yet.
    NoResumableSchedule(&'static str),
}

impl Handover {
    /// The kind of reason: the same for every message size above a limit,
    /// so that a sweep of sizes reports it once per communicator.
    pub fn category(&self) -> &'static str {
        match self {
            Handover::NegativeCount(_) => "count",
            Handover::Datatype(_) => "datatype",
            Handover::ElementTooLarge { .. } => "element size",
            Handover::AboveLimit { .. } => "size limit",
            Handover::AboveWindow { .. } => "window limit",
            Handover::AbovePackLimit { .. } => "pack limit",
            Handover::TransportUnavailable => "transport",
            Handover::OnlyLeadersConnected(_) => "leaders' queue pairs",
            Handover::NoResumableSchedule(_) => "no resumable schedule",
        }
    }
}

impl fmt::Display for Handover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Handover::NegativeCount(count) => write!(f, "negative count {count}"),
            Handover::Datatype(why) => write!(f, "{why}"),
            Handover::ElementTooLarge { element_bytes, segment_bytes } => {
                write!(f, "one element ({element_bytes} bytes) exceeds the {segment_bytes}-byte segment")
            }
            Handover::AboveLimit { bytes, parameter, limit } => write!(f, "{bytes} bytes exceed coll_rdma_{parameter}={limit}"),
            Handover::AboveWindow { bytes } => write!(f, "{bytes} bytes are above what the multicast window serves"),
            Handover::AbovePackLimit { bytes, rank } => write!(
                f,
                "{bytes} bytes are more than MPI_Pack counts, and rank {rank}'s datatype is not contiguous (it could not pack them)"
            ),
            Handover::TransportUnavailable => write!(f, "transport unavailable"),
            Handover::NoResumableSchedule(path) => write!(f, "{path} has no non-blocking form yet"),
            Handover::OnlyLeadersConnected(why) => write!(
                f,
                "only the nodes' leaders hold queue pairs across nodes (coll_rdma_hierarchy_queue_pairs_max), and {why}"
            ),
        }
    }
}
