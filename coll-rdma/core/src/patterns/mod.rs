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

/// Longest scratch a run takes on the stack (`transient_scratch`).
pub(crate) const TRANSIENT_SCRATCH_BYTES: usize = 256;

/// Stack space for `transient_scratch`: zeroing it costs a few stores,
/// against an allocation and its free for a run's own buffer.
pub(crate) type TransientScratch = [u8; TRANSIENT_SCRATCH_BYTES];

/// `len` bytes of scratch whose contents need not outlive one advance of
/// a run (a segment read, folded and forgotten): in `stack` up to
/// `TRANSIENT_SCRATCH_BYTES`, else in `spill`, grown as `scratch` does.
/// A run is made at every post, so a buffer of its own is an allocation
/// per short MPI_Iallreduce or MPI_Ireduce (docs/nonblocking.md).
#[inline]
pub(crate) fn transient_scratch<'b>(stack: &'b mut TransientScratch, spill: &'b mut Vec<u8>, len: usize) -> &'b mut [u8] {
    if len <= TRANSIENT_SCRATCH_BYTES { &mut stack[..len] } else { scratch(spill, len) }
}

/// `buffer` grown to at least `len` bytes, as a slice of exactly `len`.
#[inline]
pub(crate) fn scratch(buffer: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if buffer.len() < len {
        buffer.resize(len, 0);
    }
    &mut buffer[..len]
}
