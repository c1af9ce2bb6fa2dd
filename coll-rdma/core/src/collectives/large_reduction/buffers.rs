//! What the large reductions (`parallel`, its `read_tree`, and
//! `ring`) take from their caller: this rank's buffers, and which
//! ranks end with the result. Apart from any one algorithm, so that the
//! read tree, which the parallel reduction drives, does not import it back.

/// This rank's contribution and where its result goes.
pub enum ReductionBuffers<'a> {
    /// Input and result are distinct buffers.
    Separate { send: &'a [u8], recv: &'a mut [u8] },
    /// MPI_IN_PLACE: the buffer holds the input and receives the result.
    InPlace(&'a mut [u8]),
}

impl ReductionBuffers<'_> {
    /// This rank's contribution (in place: the buffer before the result
    /// overwrites it).
    pub(crate) fn input(&self) -> &[u8] {
        match self {
            ReductionBuffers::Separate { send, .. } => send,
            ReductionBuffers::InPlace(buffer) => buffer,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.input().len()
    }
}

/// Who ends with the whole result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gather {
    /// Allreduce: every rank.
    All,
    /// Reduce: this root only.
    Root(usize),
}

/// A run's own contribution: the caller's buffer, or a copy of it where the
/// result will overwrite the buffer (MPI_IN_PLACE).
pub(crate) enum Contribution<'a> {
    Borrowed(&'a [u8]),
    Copied(Vec<u8>),
}

impl std::ops::Deref for Contribution<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Contribution::Borrowed(bytes) => bytes,
            Contribution::Copied(bytes) => bytes,
        }
    }
}
