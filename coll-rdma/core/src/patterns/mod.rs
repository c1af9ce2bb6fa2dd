//! The machinery the collectives share: carving a region of the
//! window, cutting a message into segments, streaming segments through slot
//! rings with credits, the degree-k tree, and the upward (reduction) half
//! of a tree collective. Allreduce and reduce build on all of it; the put
//! tree bcast on everything but the upward half. The cross-memory
//! collectives share the done lines and the wait for a peer's step of the
//! same call (`in_step`).

pub(crate) mod done_lines;
pub(crate) mod in_step;
pub(crate) mod meet;
pub(crate) mod region;
pub(crate) mod segments;
pub(crate) mod slots;
pub(crate) mod tree;
mod tree_stream;
pub(crate) mod upward;

pub use tree::{two_level_links, TwoLevelTree};
pub use tree_stream::TreeStreamConfig;

/// `buffer` grown to at least `len` bytes, as a slice of exactly `len`.
#[inline]
pub(crate) fn scratch(buffer: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if buffer.len() < len {
        buffer.resize(len, 0);
    }
    &mut buffer[..len]
}
