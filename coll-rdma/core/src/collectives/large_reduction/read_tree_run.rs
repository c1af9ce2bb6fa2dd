//! One call down the read tree (`read_tree`) as a state machine that both
//! forms drive: the blocking reduce resumes it once under `Meet::Block`,
//! the non-blocking and persistent reduces poll it as part of a parallel
//! reduction's run (`parallel_run::ParallelRun`).
//!
//! # States (call n, the protocol of `read_tree`)
//!
//! * `Publish`: store where this rank's partial lies and the length
//!   (never waits).
//! * `Children { index, next }`: child `index` (nearest first); `next` is
//!   `None` until its ready word n is seen, then the first byte of its
//!   partial not folded yet. A poll folds at most `CHUNKS_PER_POLL` chunks,
//!   then returns; once the whole partial is folded the child is told done
//!   (never waits) and the next child begins.
//! * `Ready`: ready = n, unless this rank is the root (never waits).
//! * `Parent`: until the parent's done line in this rank's window reads n.
//!
//! A call that fails while it folds (a child out of step or of another
//! length, a failed read) tells every child it has not released yet that
//! it is done, so that they return, and fails at once: it never said
//! ready, so its parent never reads its partial, and no peer reads its
//! input (only its parent would, were it a leaf).

use btl_ibmc::{PeerReads, TransportError};

use super::buffers::ReductionBuffers;
use super::parallel_run::CHUNKS_PER_POLL;
use super::read_tree::{ReadTree, LENGTH_WORD, PARTIAL_ADDRESS_WORD, READY_WORD};
use crate::patterns::done_lines::DoneLines;
use crate::patterns::in_step::{check_in_step, check_peer_length, PeerStep};
use crate::patterns::meet::Meet;
use crate::patterns::scratch;
use crate::reduction::Reduction;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TreeStage {
    Publish,
    Children { index: usize, next: Option<usize> },
    Ready,
    Parent,
    Finished,
}

/// One rank's part of one call down the tree, and where it stands.
#[derive(Debug)]
pub(crate) struct TreeRunCall {
    pub tree: ReadTree,
    /// The parallel reduction's call number.
    pub call: u64,
    /// The parallel reduction's announcement line (the tree's words are in
    /// it) and its done lines.
    pub announcement: usize,
    pub done: DoneLines,
    /// Folds go in chunks of this many bytes (rounded down to whole
    /// elements).
    pub chunk_bytes: usize,
    pub stage: TreeStage,
    /// The partial of the child being folded, in its memory.
    child_address: u64,
}

/// The buffers a call folds with: an inner node's partial (not the
/// root's: it folds into its result) and a child's chunk on its way in.
pub(crate) struct TreeScratch<'b> {
    pub partial: &'b mut Vec<u8>,
    pub staging: &'b mut Vec<u8>,
}

impl TreeRunCall {
    pub(crate) fn new(tree: ReadTree, call: u64, announcement: usize, done: DoneLines, chunk_bytes: usize) -> Self {
        TreeRunCall { tree, call, announcement, done, chunk_bytes, stage: TreeStage::Publish, child_address: 0 }
    }

    /// Takes every step `meet` lets it; returns whether the call is over
    /// (always under `Meet::Block`).
    pub(crate) fn resume<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        op: &R,
        buffers: &mut ReductionBuffers<'_>,
        scratch_buffers: TreeScratch<'_>,
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        let TreeScratch { partial, staging } = scratch_buffers;
        let (line, call, len) = (self.announcement, self.call, buffers.len());
        let is_root = self.tree.parent().is_none();
        loop {
            match self.stage {
                TreeStage::Publish => {
                    let partial_address = if self.tree.is_leaf() {
                        buffers.input().as_ptr()
                    } else if is_root {
                        std::ptr::null()
                    } else {
                        scratch(partial, len).as_ptr()
                    };
                    transport.set_local_flag(line + PARTIAL_ADDRESS_WORD, partial_address as usize as u64);
                    transport.set_local_flag(line + LENGTH_WORD, len as u64);
                    self.stage = if self.tree.is_leaf() { TreeStage::Ready } else { TreeStage::Children { index: 0, next: None } };
                }
                TreeStage::Children { index, next } => {
                    let Some(child) = self.tree.children().nth(index) else {
                        self.stage = TreeStage::Ready;
                        continue;
                    };
                    match self.fold_child(transport, op, buffers, partial, staging, (index, child, next), meet) {
                        Ok(true) => {}
                        Ok(false) => return Ok(false),
                        Err(why) => {
                            // Every child not released yet may return:
                            // this rank reads none of them any more.
                            for child in self.tree.children().skip(index) {
                                let _ = self.done.say_done(transport, child, self.tree.rank(), call);
                            }
                            self.stage = TreeStage::Finished;
                            return Err(why);
                        }
                    }
                }
                TreeStage::Ready => {
                    if is_root {
                        self.stage = TreeStage::Finished;
                        continue;
                    }
                    // Release: the parent that sees the call number sees
                    // the words above and, at an inner node, the folded
                    // partial.
                    transport.set_local_flag(line + READY_WORD, call);
                    self.stage = TreeStage::Parent;
                }
                TreeStage::Parent => {
                    let parent = self.tree.parent().expect("the root is finished at Ready");
                    let rank = self.tree.rank();
                    let describe = || format!("rank {parent} to read rank {rank}'s partial in reduce tree {call}");
                    if meet.local_at_least(transport, self.done.line(parent), call, describe)?.is_none() {
                        return Ok(false);
                    }
                    self.stage = TreeStage::Finished;
                }
                TreeStage::Finished => return Ok(true),
            }
        }
    }

    /// Folds (more of) child `index`'s partial into this rank's
    /// accumulator, nearest child first (`acc = acc op partial`, so the
    /// accumulator starts as this rank's own input); `true` once the child
    /// is folded and released, `false` where `meet` left the rest for later
    /// (the stage says where).
    #[allow(clippy::too_many_arguments)] // one child's whole context
    fn fold_child<T: PeerReads + ?Sized, R: Reduction + ?Sized>(
        &mut self,
        transport: &T,
        op: &R,
        buffers: &mut ReductionBuffers<'_>,
        partial: &mut Vec<u8>,
        staging: &mut Vec<u8>,
        (index, child, next): (usize, usize, Option<usize>),
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        let (rank, line, call, len) = (self.tree.rank(), self.announcement, self.call, buffers.len());
        let start = match next {
            Some(start) => start,
            None => {
                let step = PeerStep { rank, peer: child, word: line + READY_WORD, call, step: "reduce tree partial" };
                let describe = || format!("rank {child}'s reduce tree partial {call}, for rank {rank}");
                let Some(seen) = meet.peer_at_least(transport, child, step.word, call, describe)? else {
                    return Ok(false);
                };
                check_in_step(&step, seen)?;
                check_peer_length(transport, rank, child, line + LENGTH_WORD, len as u64)?;
                self.child_address = transport.peer_flag(child, line + PARTIAL_ADDRESS_WORD)?;
                0
            }
        };
        let element_size = op.element_size();
        let chunk_len = (self.chunk_bytes / element_size).max(1) * element_size;
        let budget = match meet {
            Meet::Poll(_) => CHUNKS_PER_POLL.saturating_mul(chunk_len),
            Meet::Block(_) => usize::MAX,
        };
        let end = start.saturating_add(budget).min(len);
        let is_root = self.tree.parent().is_none();
        // In place at the root the accumulator already holds this rank's
        // input; elsewhere the first child's partial is read straight into
        // the accumulator and the input folded under it.
        let acc_holds_own = is_root && matches!(buffers, ReductionBuffers::InPlace(_));
        let staging = scratch(staging, chunk_len.min(len));
        let mut at = start;
        while at < end {
            let chunk = at..(at + chunk_len).min(len);
            let n = chunk.len();
            let (own, acc): (&[u8], &mut [u8]) = match buffers {
                ReductionBuffers::Separate { send, recv } if is_root => (&send[chunk.clone()], &mut recv[chunk.clone()]),
                ReductionBuffers::Separate { send, .. } => (&send[chunk.clone()], &mut partial[chunk.clone()]),
                ReductionBuffers::InPlace(buffer) if is_root => (&[], &mut buffer[chunk.clone()]),
                ReductionBuffers::InPlace(buffer) => (&buffer[chunk.clone()], &mut partial[chunk.clone()]),
            };
            let from = self.child_address + chunk.start as u64;
            if index == 0 && !acc_holds_own {
                transport.read_peer_memory(child, from, acc)?;
                op.combine(own, acc);
            } else {
                let theirs = &mut staging[..n];
                transport.read_peer_memory(child, from, theirs)?;
                if op.is_commutative() {
                    // acc op theirs, exactly, as theirs op acc.
                    op.combine(theirs, acc);
                } else {
                    op.combine(acc, theirs);
                    acc.copy_from_slice(theirs);
                }
            }
            at = chunk.end;
        }
        if end < len {
            self.stage = TreeStage::Children { index, next: Some(end) };
            return Ok(false);
        }
        // Release, after the reads returned: the child may return.
        self.done.say_done(transport, child, rank, call)?;
        self.stage = TreeStage::Children { index: index + 1, next: None };
        Ok(true)
    }
}
