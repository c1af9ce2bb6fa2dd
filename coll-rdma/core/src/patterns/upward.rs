//! The reduction half that allreduce and reduce share: for one segment, a
//! rank folds its children's partials into its own in ascending rank order,
//! then passes the result to its parent.

use btl_ibmc::{TransportError, Windows};

use super::meet::Meet;
use super::slots::{KnownCredit, SlotShape, Stream, Turn};
use super::tree::TreeLinks;
use crate::reduction::Reduction;

#[derive(Clone, Debug)]
pub(crate) struct Upward {
    to_parent: Option<Stream>,
    parent_credit: KnownCredit,
    from_children: Vec<Stream>,
}

/// Where one collective keeps its tree's incoming rings and the word
/// through which a parent returns slots; the same offsets on every rank.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UpwardRegion {
    pub child_rings: usize,
    pub parent_credit: usize,
    pub shape: SlotShape,
}

impl UpwardRegion {
    fn ring(&self, position: usize) -> usize {
        self.child_rings + position * self.shape.ring_bytes()
    }
}

impl Upward {
    pub(crate) fn new(what: &'static str, rank: usize, links: &TreeLinks, region: UpwardRegion) -> Self {
        let to_parent = links.parent.map(|parent| Stream {
            what,
            sender: rank,
            receiver: parent.peer,
            ring: region.ring(parent.position),
            credit: region.parent_credit,
            shape: region.shape,
        });
        let from_children = links
            .children
            .iter()
            .map(|child| Stream {
                what,
                sender: child.peer,
                receiver: rank,
                ring: region.ring(child.position),
                credit: region.parent_credit,
                shape: region.shape,
            })
            .collect();
        Upward { to_parent, parent_credit: KnownCredit::default(), from_children }
    }

    pub(crate) fn is_root(&self) -> bool {
        self.to_parent.is_none()
    }

    /// Whether this rank has no children: its partial of a segment is its
    /// own part alone.
    pub(crate) fn is_leaf(&self) -> bool {
        self.from_children.is_empty()
    }

    /// `resume_segment` for a leaf (`is_leaf`), whose partial is `own`,
    /// its own part of segment `turn`, as it is: sent to the parent
    /// straight from there, with no copy into scratch first. Resumable
    /// as `resume_segment`.
    #[inline(always)]
    pub(crate) fn resume_leaf_segment<T: Windows + ?Sized>(
        &self,
        transport: &T,
        turn: Turn,
        own: &[u8],
        done: &mut usize,
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        debug_assert!(self.is_leaf());
        if *done == 0 {
            if let Some(parent) = &self.to_parent
                && !parent.try_send(transport, turn.seq, own, turn.credit_needed(), &self.parent_credit, meet)?
            {
                return Ok(false);
            }
            *done = 1;
        }
        Ok(true)
    }

    /// Folds the children's partials of segment `turn` into `partial`,
    /// which holds this rank's own contribution on entry and the partial of
    /// its whole subtree on return, and sends that to the parent.
    /// `incoming` is scratch of the same length. Resumable: `done` counts
    /// the steps already taken (0 on entry to the segment); returns whether
    /// the segment is finished, which under `Meet::Block` it always is.
    ///
    /// Always inlined, as `Stream::try_send` is: in the blocking calls,
    /// which pass a constant `Meet::Block`, the compiler then drops the
    /// poll branches and the `bool` results, so the blocking reduce is not
    /// slower than its own loop was before the runs shared this code
    /// (`docs/bench/2026-11-30`: out of line it cost the non-root about 60
    /// instructions a call).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn resume_segment<T: Windows + ?Sized, R: Reduction + ?Sized>(
        &self,
        transport: &T,
        op: &R,
        turn: Turn,
        partial: &mut [u8],
        incoming: &mut [u8],
        done: &mut usize,
        meet: Meet<'_>,
    ) -> Result<bool, TransportError> {
        while let Some(child) = self.from_children.get(*done) {
            if !child.try_receive(transport, turn.seq, incoming, meet)? {
                return Ok(false);
            }
            if turn.must_acknowledge() {
                child.acknowledge(transport, turn.seq)?;
            }
            op.combine(partial, incoming);
            partial.copy_from_slice(incoming);
            *done += 1;
        }
        if *done == self.from_children.len() {
            if let Some(parent) = &self.to_parent
                && !parent.try_send(transport, turn.seq, partial, turn.credit_needed(), &self.parent_credit, meet)?
            {
                return Ok(false);
            }
            *done += 1;
        }
        Ok(true)
    }
}
