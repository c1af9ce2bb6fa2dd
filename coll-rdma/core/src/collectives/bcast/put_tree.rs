//! MPI_Bcast over one-sided puts, for transports that offer no multicast
//! (a verbs fabric whose multicast join failed, or where it is turned
//! off): the message flows down a binomial tree rooted at rank 0, segment
//! by segment through two-slot rings (see `patterns::slots`); a root other
//! than rank 0 first relays each segment to rank 0.
//!
//! Each call can also be a resumable run (`put_tree_run`,
//! `PutTreeBcast::start`, for MPI_Ibcast); the blocking call keeps its own
//! loop over the same steps.
//!
//! The tree stays rooted at rank 0 whatever the root, for the reason given
//! in `reduce`: every slot ring keeps a single writer across calls, which
//! the credits below rely on. Every rank but 0, the root included, takes
//! each segment from its parent, so all ranks move through the same
//! sequence numbers.
//!
//! # When may a sender write a slot again?
//!
//! * Tree rings (parent p writes into child c). p may finish a call before
//!   c has read it and start the next, so these streams use acknowledged
//!   reuse: c acknowledges every segment right after reading it, and p
//!   waits for the acknowledgement of the slot's previous occupant. p
//!   keeps the highest acknowledgement it has read (`ToChild`): the
//!   credit word only grows, so a slot freed by then needs no read.
//! * The relay ring in rank 0's window has a different writer whenever the
//!   root changes, so no writer can know from its own credit word what an
//!   earlier root left there; the data flow answers instead. A root R
//!   writes the relay ring in call e+1 only after finishing call e, in
//!   which it received every segment of e from its parent; rank 0 sent
//!   those only after reading them out of the relay ring. So every slot is
//!   read before any later call writes it. Within a call, rank 0 returns a
//!   credit to R's own word for segments whose slot R reuses.
//!
//! Deadlock: a rank's wait for segment i depends only on its ancestors'
//! (and, through the relay, the root's) progress on segment i; a credit
//! wait depends on a receiver reading an earlier segment, which depends on
//! nothing the sender does later.
//!
//! # A root without a message
//!
//! A root that cannot provide its message (its MPI_Pack failed) must still
//! release the ranks already waiting for it. It marks its first segment
//! abandoned in the slot's flag word (see `patterns::slots::Arrival`); each
//! rank that finds the mark forwards it to its children and fails its
//! call. The check costs a receiver one comparison of the flag value its
//! wait has already read.

use std::sync::Arc;

use btl_ibmc::{TransportError, WaitPolicy, Windows};

use super::put_tree_run::{PutTreeCursor, PutTreePlan, ToChild};
pub use super::put_tree_run::PutTreeRun;
use crate::patterns::meet::{Meet, StallClock, StallLimits};
use crate::patterns::region::RegionCursor;
use crate::patterns::segments::Segments;
use crate::patterns::slots::{Arrival, KnownCredit, Reuse, SlotShape, Stream, Turn, CREDIT_BYTES};
use crate::patterns::tree::TreeLinks;

/// A binomial tree: the degree-1 tree of `TreeLinks` doubles the ranks
/// that hold the message at every step.
const TREE_DEGREE: usize = 1;

#[derive(Clone, Copy, Debug)]
pub struct PutTreeConfig {
    /// Largest segment; a message is cut into segments of this many bytes.
    pub segment_bytes: usize,
    pub policy: WaitPolicy,
}

/// The tree's region, identical on every rank.
struct TreeRegion {
    incoming_ring: usize,
    child_credits: usize,
    relay_ring: usize,
    relay_credit: usize,
    shape: SlotShape,
    end: usize,
}

impl TreeRegion {
    fn new(start: usize, size: usize, segment_bytes: usize) -> Self {
        let shape = SlotShape::holding(segment_bytes);
        let mut cursor = RegionCursor::starting_at(start);
        let incoming_ring = cursor.take(shape.ring_bytes());
        let child_credits = cursor.take(TreeLinks::positions(size, TREE_DEGREE) * CREDIT_BYTES);
        let relay_ring = cursor.take(shape.ring_bytes());
        let relay_credit = cursor.take(CREDIT_BYTES);
        TreeRegion { incoming_ring, child_credits, relay_ring, relay_credit, shape, end: cursor.end() }
    }
}

/// One rank's put-tree broadcast state for one communicator.
#[derive(Clone, Debug)]
pub struct PutTreeBcast {
    size: usize,
    config: PutTreeConfig,
    /// Shared with the outstanding runs.
    plan: Arc<PutTreePlan>,
    relay_ring: usize,
    relay_credit: usize,
    shape: SlotShape,
    last_seq: u64,
}

impl PutTreeBcast {
    /// Bytes of window the tree needs on every rank.
    pub fn region_len(size: usize, config: &PutTreeConfig) -> usize {
        TreeRegion::new(0, size, config.segment_bytes).end
    }

    /// The schedule of `rank` among `size` ranks; its region starts at
    /// `region_offset` of every rank's window.
    pub fn new(rank: usize, size: usize, region_offset: usize, config: PutTreeConfig) -> Self {
        assert!(config.segment_bytes >= 1, "put-tree segments hold at least one byte");
        let region = TreeRegion::new(region_offset, size, config.segment_bytes);
        let links = TreeLinks::new(rank, size, TREE_DEGREE);
        let stream = |parent: usize, child: usize, position: usize| Stream {
            what: "bcast segment down the put tree",
            sender: parent,
            receiver: child,
            ring: region.incoming_ring,
            credit: region.child_credits + position * CREDIT_BYTES,
            shape: region.shape,
        };
        PutTreeBcast {
            size,
            config,
            plan: Arc::new(PutTreePlan {
                rank,
                from_parent: links.parent.map(|parent| stream(parent.peer, rank, parent.position)),
                to_children: links
                    .children
                    .iter()
                    .rev()
                    .map(|child| ToChild { stream: stream(rank, child.peer, child.position), credit_seen: KnownCredit::default() })
                    .collect(),
            }),
            relay_ring: region.relay_ring,
            relay_credit: region.relay_credit,
            shape: region.shape,
            last_seq: 0,
        }
    }

    fn relay_from(&self, root: usize) -> Stream {
        Stream {
            what: "bcast segment relayed to rank 0",
            sender: root,
            receiver: 0,
            ring: self.relay_ring,
            credit: self.relay_credit,
            shape: self.shape,
        }
    }

    /// MPI_Bcast of `buf` from `root`; every rank passes the same root and
    /// length. Fails on every rank but the root if the root abandons the
    /// call (`abandon_at_root`). Not a run of `start`: the blocking call
    /// keeps its own loop, which costs less per call.
    pub fn bcast<T: Windows + ?Sized>(&mut self, transport: &T, root: usize, buf: &mut [u8]) -> Result<(), TransportError> {
        if root >= self.size {
            return Err(TransportError::OutOfRange { peer: root, offset: 0, len: buf.len() });
        }
        if buf.is_empty() || self.size == 1 {
            return Ok(());
        }
        let segments = Segments::new(buf.len(), 1, self.config.segment_bytes)?;
        let base = self.last_seq;
        let count = segments.count();
        let waits = self.config.policy.without_side_progress();
        let relay = (root != 0).then(|| self.relay_from(root));
        let plan = &*self.plan;
        let mut abandoned = None;
        'segments: for index in 0..count {
            let range = segments.range(index);
            let segment = &mut buf[range];
            let turn = Turn::new(index, count, base, Reuse::AcknowledgedEachCall);
            if let Some(relay) = &relay {
                let relay_turn = Turn::new(index, count, base, Reuse::ImpliedByDataFlow);
                if plan.rank == root {
                    relay.send(transport, relay_turn.seq, segment, relay_turn.credit_needed(), waits)?;
                } else if plan.rank == 0 {
                    if relay.try_receive_unless_abandoned(transport, relay_turn.seq, segment, Meet::Block(waits))? == Some(Arrival::Abandoned) {
                        abandoned = Some((turn, segment.len()));
                        break 'segments;
                    }
                    if relay_turn.must_acknowledge() {
                        relay.acknowledge(transport, relay_turn.seq)?;
                    }
                }
            }
            if let Some(parent) = &plan.from_parent {
                if parent.try_receive_unless_abandoned(transport, turn.seq, segment, Meet::Block(waits))? == Some(Arrival::Abandoned) {
                    abandoned = Some((turn, segment.len()));
                    break 'segments;
                }
                parent.acknowledge(transport, turn.seq)?;
            }
            for child in &plan.to_children {
                child.stream.send_knowing(transport, turn.seq, segment, turn.credit_needed(), &child.credit_seen, waits)?;
            }
        }
        self.last_seq = base + count as u64;
        match abandoned {
            None => Ok(()),
            Some((turn, segment_len)) => self.pass_on_abandonment(transport, root, buf.len(), turn, segment_len),
        }
    }

    /// A receiver found segment `turn`, of `segment_len` bytes, marked
    /// abandoned by the root.
    fn pass_on_abandonment<T: Windows + ?Sized>(
        &self,
        transport: &T,
        root: usize,
        len: usize,
        turn: Turn,
        segment_len: usize,
    ) -> Result<(), TransportError> {
        self.mark_children(transport, turn, segment_len)?;
        Err(TransportError::Failed(format!(
            "bcast from root {root}: the root could not provide its {len}-byte message (it said so down the put tree)"
        )))
    }

    /// Starts one bcast as a resumable run (see `put_tree_run`). Takes the
    /// call's sequence numbers now, so runs must be started in the
    /// communicator's post order and advanced one at a time in that order
    /// (`schedule_queue`).
    #[inline(always)]
    pub fn start<'a>(&mut self, root: usize, buf: &'a mut [u8]) -> Result<PutTreeRun<'a>, TransportError> {
        let cursor = self.next_cursor(root, buf.len())?;
        let relay = (root != 0).then(|| self.relay_from(root));
        let stall = StallClock::new(StallLimits::of(&self.config.policy));
        Ok(PutTreeRun { plan: Arc::clone(&self.plan), root, relay, buf, cursor, stall })
    }

    /// Where the next call starts (taking its sequence numbers), or `None`
    /// for a call with nothing to send.
    fn next_cursor(&mut self, root: usize, len: usize) -> Result<Option<PutTreeCursor>, TransportError> {
        if root >= self.size {
            return Err(TransportError::OutOfRange { peer: root, offset: 0, len });
        }
        if len == 0 || self.size == 1 {
            return Ok(None);
        }
        let segments = Segments::new(len, 1, self.config.segment_bytes)?;
        let base = self.last_seq;
        self.last_seq = base + segments.count() as u64;
        Ok(Some(PutTreeCursor::new(segments, base)))
    }

    /// The root's side of a `len`-byte call whose message it cannot provide
    /// (its pack failed), instead of `bcast`: the first segment goes out
    /// marked abandoned, and every rank that receives the mark forwards it to
    /// its children and fails its call, so no rank waits for the message.
    /// The root does not wait for its own parent's mark. Afterwards the
    /// streams are out of step (the ranks stop at different points of the
    /// call): the communicator must not broadcast through this tree again.
    pub fn abandon_at_root<T: Windows + ?Sized>(&mut self, transport: &T, root: usize, len: usize) -> Result<(), TransportError> {
        if root != self.plan.rank {
            return Err(TransportError::OutOfRange { peer: root, offset: 0, len });
        }
        if len == 0 || self.size == 1 {
            return Ok(());
        }
        let segments = Segments::new(len, 1, self.config.segment_bytes)?;
        let (count, first_len) = (segments.count(), segments.range(0).len());
        let base = self.last_seq;
        self.last_seq = base + count as u64;
        if root != 0 {
            let relay_turn = Turn::new(0, count, base, Reuse::ImpliedByDataFlow);
            self.relay_from(root).send_abandoned(transport, relay_turn.seq, first_len, relay_turn.credit_needed(), self.config.policy.without_side_progress())?;
        }
        self.mark_children(transport, Turn::new(0, count, base, Reuse::AcknowledgedEachCall), first_len)
    }

    /// Marks segment `turn`, of `len` bytes, abandoned to every child.
    fn mark_children<T: Windows + ?Sized>(&self, transport: &T, turn: Turn, len: usize) -> Result<(), TransportError> {
        for child in &self.plan.to_children {
            child.stream.send_abandoned(transport, turn.seq, len, turn.credit_needed(), self.config.policy.without_side_progress())?;
        }
        Ok(())
    }
}
