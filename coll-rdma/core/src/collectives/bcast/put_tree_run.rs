//! One put-tree bcast as a resumable run (`Schedule`): `put_tree`'s call
//! cut at every point where the blocking call would wait.
//!
//! # States
//!
//! `cursor` is `None` once nothing is left (an empty message, one rank, or
//! done). Otherwise segment `index` goes through, in the blocking order:
//! the relay from a root other than 0 to rank 0 (`relayed`), the segment
//! from the parent (`received`), then the sends to the children
//! (`children_sent` of them). A rank that finds a segment marked abandoned
//! switches to `Abandoning`: it marks its children one by one (each may
//! wait for a credit), then fails the run. A root told to abandon its
//! message before the run began (`abandon_at_root`: a two-level stage
//! after an earlier one failed) abandons likewise, first relaying the
//! mark to rank 0 if it is not rank 0 (`relayed`), as
//! `PutTreeBcast::abandon_at_root` does.
//!
//! Sequence numbers are taken when the run is started, in post order; the
//! cross-call arguments of `put_tree` hold because a communicator's bcast
//! runs advance one at a time in that order (`schedule_queue`).

use btl_ibmc::{TransportError, Windows};

use crate::patterns::meet::{advance_by_polling, Meet, Resumable, StallClock};
use crate::patterns::segments::Segments;
use crate::patterns::slots::{Arrival, KnownCredit, Reuse, Stream, Turn};
use crate::schedule::{AwaitedWord, Schedule, Step};

/// What every run of one communicator's put tree uses, and the credits
/// its sends have seen (which only grow).
#[derive(Debug)]
pub(super) struct PutTreePlan {
    pub(super) rank: usize,
    pub(super) from_parent: Option<Stream>,
    /// Descending rank order: the child with the largest subtree first.
    pub(super) to_children: Vec<ToChild>,
}

/// The stream to one child and the highest credit read from it so far.
/// A parent's sends of one communicator's bcasts (blocking calls and
/// runs) go one at a time in sequence order, so the kept credit is what
/// the child had acknowledged when last read: a send whose slot was freed
/// by then reads nothing, and the credit word's line stays with the
/// child that writes it (a read of it is a cache miss, about every other
/// call where the child keeps up, with two slots per ring).
#[derive(Debug)]
pub(super) struct ToChild {
    pub(super) stream: Stream,
    pub(super) credit_seen: KnownCredit,
}

pub(super) struct PutTreeCursor {
    segments: Segments,
    base: u64,
    index: usize,
    relayed: bool,
    received: bool,
    children_sent: usize,
    /// The abandoned segment, once seen: only marks to children remain.
    abandoning: Option<Turn>,
}

impl PutTreeCursor {
    pub(super) fn new(segments: Segments, base: u64) -> Self {
        PutTreeCursor { segments, base, index: 0, relayed: false, received: false, children_sent: 0, abandoning: None }
    }
}

/// One rank's part of one put-tree bcast; made by `PutTreeBcast::start`.
pub struct PutTreeRun<'a> {
    pub(super) plan: std::sync::Arc<PutTreePlan>,
    pub(super) root: usize,
    pub(super) relay: Option<Stream>,
    pub(super) buf: &'a mut [u8],
    pub(super) cursor: Option<PutTreeCursor>,
    pub(super) stall: StallClock,
}

impl PutTreeRun<'_> {
    /// See `FlatBcastRun::abandon_at_root`: the first segment goes out
    /// marked abandoned instead of the message.
    pub(super) fn abandon_at_root(&mut self) {
        debug_assert_eq!(self.plan.rank, self.root, "only a root abandons its message");
        if let Some(cursor) = self.cursor.as_mut() {
            debug_assert_eq!((cursor.index, cursor.relayed, cursor.children_sent), (0, false, 0), "abandoned after it began");
            let turn = Turn::new(0, cursor.segments.count(), cursor.base, Reuse::AcknowledgedEachCall);
            cursor.abandoning = Some(turn);
        }
    }
}

impl<T: Windows + ?Sized> Resumable<T> for PutTreeRun<'_> {
    type Position = Option<(usize, bool, bool, usize, bool)>;

    fn resume(&mut self, transport: &T, meet: Meet<'_>) -> Result<bool, TransportError> {
        let Some(cursor) = self.cursor.as_mut() else {
            return Ok(true);
        };
        let plan = &*self.plan;
        let count = cursor.segments.count();
        while cursor.abandoning.is_none() && cursor.index < count {
            let segment = &mut self.buf[cursor.segments.range(cursor.index)];
            let turn = Turn::new(cursor.index, count, cursor.base, Reuse::AcknowledgedEachCall);
            if let Some(relay) = self.relay.as_ref().filter(|_| !cursor.relayed) {
                let relay_turn = Turn::new(cursor.index, count, cursor.base, Reuse::ImpliedByDataFlow);
                if plan.rank == self.root {
                    if !relay.try_send(transport, relay_turn.seq, segment, relay_turn.credit_needed(), &KnownCredit::default(), meet)? {
                        return Ok(false);
                    }
                } else if plan.rank == 0 {
                    match relay.try_receive_unless_abandoned(transport, relay_turn.seq, segment, meet)? {
                        None => return Ok(false),
                        Some(Arrival::Abandoned) => {
                            cursor.abandoning = Some(turn);
                            break;
                        }
                        Some(Arrival::Segment) if relay_turn.must_acknowledge() => relay.acknowledge(transport, relay_turn.seq)?,
                        Some(Arrival::Segment) => {}
                    }
                }
                cursor.relayed = true;
            }
            if let Some(parent) = plan.from_parent.as_ref().filter(|_| !cursor.received) {
                match parent.try_receive_unless_abandoned(transport, turn.seq, segment, meet)? {
                    None => return Ok(false),
                    Some(Arrival::Abandoned) => {
                        cursor.abandoning = Some(turn);
                        break;
                    }
                    Some(Arrival::Segment) => parent.acknowledge(transport, turn.seq)?,
                }
                cursor.received = true;
            }
            while let Some(child) = plan.to_children.get(cursor.children_sent) {
                if !child.stream.try_send(transport, turn.seq, segment, turn.credit_needed(), &child.credit_seen, meet)? {
                    return Ok(false);
                }
                cursor.children_sent += 1;
            }
            cursor.index += 1;
            cursor.relayed = false;
            cursor.received = false;
            cursor.children_sent = 0;
        }
        if let Some(turn) = cursor.abandoning {
            // The mark goes where the segment's flag would: the segment
            // the receivers wait for is this one, of this length.
            let len = cursor.segments.range(cursor.index).len();
            if let Some(relay) = self.relay.as_ref().filter(|_| plan.rank == self.root && !cursor.relayed) {
                let relay_turn = Turn::new(cursor.index, count, cursor.base, Reuse::ImpliedByDataFlow);
                if !relay.try_send_abandoned(transport, relay_turn.seq, len, relay_turn.credit_needed(), meet)? {
                    return Ok(false);
                }
                cursor.relayed = true;
            }
            while let Some(child) = plan.to_children.get(cursor.children_sent) {
                if !child.stream.try_send_abandoned(transport, turn.seq, len, turn.credit_needed(), meet)? {
                    return Ok(false);
                }
                cursor.children_sent += 1;
            }
            let (root, len) = (self.root, self.buf.len());
            self.cursor = None;
            return Err(TransportError::Failed(format!(
                "bcast from root {root}: the root could not provide its {len}-byte message (it said so down the put tree)"
            )));
        }
        self.cursor = None;
        Ok(true)
    }

    fn position(&self) -> Option<(usize, bool, bool, usize, bool)> {
        self.cursor.as_ref().map(|c| (c.index, c.relayed, c.received, c.children_sent, c.abandoning.is_some()))
    }

    fn stall_clock(&mut self) -> &mut StallClock {
        &mut self.stall
    }

    fn describe(&self) -> String {
        format!("put-tree bcast from root {} at {:?}", self.root, Resumable::<T>::position(self))
    }
}

impl<T: Windows + ?Sized> Schedule<T> for PutTreeRun<'_> {
    type Error = TransportError;

    fn advance(&mut self, transport: &mut T) -> Result<Step, TransportError> {
        advance_by_polling(self, &*transport)
    }
    fn awaited(&self) -> Option<AwaitedWord> {
        self.stall.awaited()
    }
}
