//! Where one message of a resumable send or receive stands, for both
//! flavours (`datagram::transfer`, `shared`): made by
//! `ReliableMulticast::start_send` or `start_receive`, advanced by their
//! `step_*`. The blocking `send` and `receive` make one too and step it
//! with a wait between the steps.

use super::repair::ParityPlan;

/// Where one message stands.
#[derive(Debug)]
pub struct Transfer {
    pub(crate) root: usize,
    pub(crate) len: usize,
    /// Pieces queued (root) or delivered (receiver) so far.
    pub(crate) pieces_done: usize,
    /// The root's parity plan, once its first step took it (datagrams).
    pub(crate) parity: Option<ParityPlan>,
    /// The root found its window full and has not found credit since
    /// (counts one stall per wait, as the blocking wait did).
    pub(crate) stalled: bool,
}

impl Transfer {
    pub(crate) fn new(root: usize, len: usize) -> Self {
        Transfer { root, len, pieces_done: 0, parity: None, stalled: false }
    }

    /// Pieces this rank has queued or delivered: a step that moved it got
    /// something done.
    pub fn pieces_done(&self) -> usize {
        self.pieces_done
    }

    pub fn root(&self) -> usize {
        self.root
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
