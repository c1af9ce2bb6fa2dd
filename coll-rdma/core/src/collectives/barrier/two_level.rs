//! MPI_Barrier across nodes in two levels: every rank of a node reports to
//! the node's leader (its lowest rank), the leaders alone run the n-way
//! dissemination among themselves, and each leader then releases its
//! node. Only leaders write across nodes, once per dissemination round,
//! instead of every rank in every round.
//!
//! Each slot keeps the flat barrier's rules: one writer, holding that
//! writer's latest epoch (the 1-based count of barriers on the
//! communicator), read as "slot >= my epoch". A member's arrival slot lives
//! in its leader's window at the member's index on the node; its release
//! slot in its own window is written by its leader only. A leader releases
//! its node only after the dissemination, which it leaves only once every
//! leader has entered it, which each does only after its whole node
//! arrived: so no rank leaves before every rank entered. A slot already at
//! epoch + 1 is again harmless: its writer passed this barrier to get there.

use std::sync::Arc;

use btl_ibmc::shm::NodeGroups;
use btl_ibmc::{wait_at_least, SideProgress, TransportError, WaitPolicy, Windows};
use tuning::{round_fanouts, MAX_BARRIER_RADIX};

use super::two_level_run::{Arrival, TwoLevelBarrierRun};
use super::{DisseminationBarrier, SLOT_BYTES};
use crate::patterns::meet::StallLimits;

/// Where this rank's part of the barrier happens.
#[derive(Clone, Debug)]
enum Role {
    /// Reports to `leader` at `arrival_slot` of its window, then waits for
    /// the release.
    Member { leader: usize, arrival_slot: usize },
    /// Collects its node (each member at its arrival slot), joins the
    /// leaders' dissemination, releases.
    /// (`members` is shared with the non-blocking runs.)
    Leader { members: Arc<[Arrival]>, leaders: DisseminationBarrier },
}

/// One rank's two-level barrier for one communicator.
#[derive(Clone, Debug)]
pub struct TwoLevelBarrier {
    role: Role,
    /// This rank's release slot (the region's first; one arrival slot per
    /// possible member and the leaders' dissemination follow it).
    release_slot: usize,
    epoch: u64,
    policy: WaitPolicy,
    context: String,
}

/// The region's pieces from `region_offset`, the same on every rank.
struct Region {
    release_slot: usize,
    arrivals: usize,
    leaders: usize,
}

impl Region {
    fn new(region_offset: usize, size: usize) -> Self {
        let release_slot = region_offset;
        let arrivals = release_slot + SLOT_BYTES;
        // A node may hold every rank but its leader.
        let leaders = arrivals + size.saturating_sub(1) * SLOT_BYTES;
        Region { release_slot, arrivals, leaders }
    }

    fn arrival_slot(&self, local_index: usize) -> usize {
        self.arrivals + (local_index - 1) * SLOT_BYTES
    }
}

impl TwoLevelBarrier {
    /// Bytes of window it needs on every rank, whatever the nodes and the
    /// leaders' radix: the window is laid out before the transport tells
    /// which ranks share a node.
    pub fn region_len(size: usize) -> usize {
        let widest_dissemination = (1..=MAX_BARRIER_RADIX.min(size.max(2) - 1))
            .map(|radix| round_fanouts(size, radix).iter().sum::<usize>())
            .max()
            .unwrap_or(0);
        (1 + size.saturating_sub(1) + widest_dissemination) * SLOT_BYTES
    }

    /// The schedule of `rank` on `nodes`; the leaders disseminate with
    /// `leader_radix` (at most `MAX_BARRIER_RADIX`).
    pub fn new(rank: usize, nodes: &NodeGroups, leader_radix: usize, region_offset: usize, policy: WaitPolicy) -> Self {
        assert!(rank < nodes.size(), "rank {rank} outside a communicator of {}", nodes.size());
        assert!((1..=MAX_BARRIER_RADIX).contains(&leader_radix), "leader radix {leader_radix} outside 1..={MAX_BARRIER_RADIX}");
        let region = Region::new(region_offset, nodes.size());
        let leader = nodes.leader_of(rank);
        let role = if leader == rank {
            let leader_ranks = nodes.leaders();
            let position = leader_ranks.binary_search(&rank).expect("a leader is among the leaders");
            Role::Leader {
                members: nodes
                    .members(rank)
                    .filter(|&member| member != rank)
                    .map(|member| Arrival { member, slot: region.arrival_slot(nodes.local_index(member)) })
                    .collect::<Vec<_>>()
                    .into(),
                leaders: DisseminationBarrier::among(position, &leader_ranks, leader_radix, region.leaders, policy),
            }
        } else {
            Role::Member { leader, arrival_slot: region.arrival_slot(nodes.local_index(rank)) }
        };
        TwoLevelBarrier { role, release_slot: region.release_slot, epoch: 0, policy, context: String::new() }
    }

    /// Sets how stall warnings name the communicator (e.g. "comm 3").
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.context = context.into();
        if let Role::Leader { leaders, .. } = &mut self.role {
            *leaders = leaders.clone().with_context(format!("{} (node leaders)", self.context));
        }
        self
    }

    /// Whether this rank leads its node.
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader { .. })
    }

    /// The leaders' radix and rounds, as this rank knows them (a member
    /// does not run the dissemination: None).
    pub fn leader_schedule(&self) -> Option<(usize, usize)> {
        match &self.role {
            Role::Leader { leaders, .. } => Some((leaders.radix(), leaders.rounds())),
            Role::Member { .. } => None,
        }
    }

    /// Barriers run so far.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Starts a non-blocking barrier: it takes the next epoch, as `run`
    /// would, and the caller advances it (see `two_level_run.rs`). Runs
    /// must advance in the order they were started, and `run` only once all
    /// of them are done: each slot's value must only grow.
    pub fn start(&mut self) -> TwoLevelBarrierRun {
        self.epoch += 1;
        let limits = StallLimits::of(&self.policy);
        match &mut self.role {
            Role::Member { leader, arrival_slot } => {
                TwoLevelBarrierRun::member(*leader, *arrival_slot, self.release_slot, self.epoch, limits)
            }
            Role::Leader { members, leaders } => {
                TwoLevelBarrierRun::leader(Arc::clone(members), leaders.start(), self.release_slot, self.epoch, limits)
            }
        }
    }

    /// Runs one barrier: returns once every rank of the communicator has
    /// entered it. Its waits serve `side_progress` whenever they yield.
    pub fn run<T: Windows + ?Sized>(&mut self, transport: &T, side_progress: &dyn SideProgress) -> Result<(), TransportError> {
        self.epoch += 1;
        let epoch = self.epoch;
        let waits = self.policy.serving(side_progress);
        match &mut self.role {
            Role::Member { leader, arrival_slot } => {
                transport.put_flag(*leader, *arrival_slot, epoch)?;
                wait_at_least(transport, self.release_slot, epoch, waits, || {
                    format!("{} barrier {epoch}: release by node leader {leader}", self.context)
                })?;
                Ok(())
            }
            Role::Leader { members, leaders } => {
                for &Arrival { member, slot } in members.iter() {
                    wait_at_least(transport, slot, epoch, waits, || {
                        format!("{} barrier {epoch}: arrival of rank {member} on this node", self.context)
                    })?;
                }
                leaders.run(transport, side_progress)?;
                debug_assert_eq!(leaders.epoch(), epoch);
                for &Arrival { member, .. } in members.iter() {
                    transport.put_flag(member, self.release_slot, epoch)?;
                }
                Ok(())
            }
        }
    }
}
