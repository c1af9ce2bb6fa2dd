//! Whether a communicator's collectives run in two levels (within each
//! node, then among the nodes' leaders) or flat over all ranks, decided
//! once its transport is set up: every rank sees the same node groups and
//! the same agreed `coll_rdma_hierarchy`, so every rank decides alike.
//!
//! With `coll_rdma_transport=shm`, `coll_rdma_test_pretend_nodes` splits
//! the ranks into pretended nodes for these schedules alone (the hybrid
//! needs an RDMA device for that), so that the two-level paths run under
//! mpirun on a machine without one.

use btl_ibmc::shm::NodeGroups;
use btl_ibmc::{Endpoint, SelectedTransport, WaitPolicy};
use tuning::{choose_barrier_radix, choose_co_roots, BarrierModel, CoRootModel};

use super::params::{Hierarchy, Settings};
use crate::collectives::barrier::two_level::TwoLevelBarrier;

/// What the two-level schedules are built from, kept from the settings
/// until the transport is known.
#[derive(Clone, Debug)]
pub(super) struct HierarchyPlan {
    choice: Hierarchy,
    fixed_radix: Option<usize>,
    model: BarrierModel,
    policy: WaitPolicy,
    barrier_offset: usize,
    pretend_nodes: usize,
    bcast_co_roots: Option<usize>,
    /// Whether the window holds the two-level schedules' regions.
    room: bool,
}

/// The job's ranks on this node and in all, as Open MPI's launchers (4.1's
/// orte, 5.0's prte) export them to every rank.
fn launcher_sizes() -> (Option<usize>, Option<usize>) {
    let read = |name: &str| std::env::var(name).ok().and_then(|value| value.trim().parse::<usize>().ok());
    (read("OMPI_COMM_WORLD_LOCAL_SIZE"), read("OMPI_COMM_WORLD_SIZE"))
}

/// Where the launcher placed the job's ranks, as its environment says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum JobPlacement {
    OneNode,
    SeveralNodes,
    Unknown,
}

impl JobPlacement {
    /// From the sizes the launcher exported.
    pub(super) fn from_launcher() -> Self {
        let (local, world) = launcher_sizes();
        Self::from_sizes(local, world)
    }

    /// The job's ranks when the launcher placed all of them on this node:
    /// every rank of the job then sees the same count and the same cores.
    pub(super) fn one_node_ranks() -> Option<usize> {
        let (local, world) = launcher_sizes();
        Self::ranks_on_one_node(local, world)
    }

    fn ranks_on_one_node(local: Option<usize>, world: Option<usize>) -> Option<usize> {
        (Self::from_sizes(local, world) == JobPlacement::OneNode).then_some(local).flatten()
    }

    fn from_sizes(local: Option<usize>, world: Option<usize>) -> Self {
        match (local, world) {
            (Some(local), Some(world)) if local >= 1 && local == world => JobPlacement::OneNode,
            (Some(local), Some(world)) if local >= 1 && local < world => JobPlacement::SeveralNodes,
            _ => JobPlacement::Unknown,
        }
    }
}

/// The communicator's schedule across nodes: flat with a sentence saying
/// why, or two levels over these nodes.
pub(super) enum Schedule {
    Flat(String),
    TwoLevel(NodeGroups),
}

impl HierarchyPlan {
    /// `room`: whether the window holds the two-level regions
    /// ([`Self::may_use_two_levels`]).
    pub(super) fn new(settings: &Settings, policy: WaitPolicy, barrier_offset: usize, room: bool) -> Self {
        HierarchyPlan {
            choice: settings.hierarchy,
            fixed_radix: settings.barrier_radix,
            model: settings.model,
            policy,
            barrier_offset,
            pretend_nodes: settings.verbs.pretend_nodes,
            bcast_co_roots: settings.bcast.co_roots,
            room,
        }
    }

    /// Whether the window must hold the two-level schedules' regions: not
    /// where `coll_rdma_hierarchy=flat`, nor where the launcher says that
    /// every rank of the job shares one node and no nodes are pretended
    /// (those regions more than doubled the bcast region on every
    /// single-node communicator). A communicator that later spans nodes
    /// anyway (ranks spawned elsewhere) stays flat.
    pub(super) fn may_use_two_levels(settings: &Settings, placement: JobPlacement) -> bool {
        settings.hierarchy == Hierarchy::Auto && (settings.verbs.pretend_nodes > 1 || placement != JobPlacement::OneNode)
    }

    /// The hybrid's `leaders_above` (see `LinkRequest`): `queue_pairs_max`
    /// where the schedules will be two-level wherever the communicator
    /// spans nodes, else every pair, since flat schedules write across
    /// nodes from any rank.
    pub(super) fn leaders_above(&self, queue_pairs_max: Option<usize>) -> Option<usize> {
        queue_pairs_max.filter(|_| self.choice == Hierarchy::Auto && self.room)
    }

    pub(super) fn schedule(&self, transport: &SelectedTransport) -> Schedule {
        if self.choice == Hierarchy::Flat {
            return Schedule::Flat("coll_rdma_hierarchy=flat".to_string());
        }
        let pretended = match transport {
            SelectedTransport::Shm(_) if self.pretend_nodes > 1 => Some(NodeGroups::blocks(transport.size(), self.pretend_nodes)),
            _ => None,
        };
        match pretended.as_ref().or(transport.node_groups()) {
            Some(nodes) if nodes.count() > 1 && !self.room => Schedule::Flat(format!(
                "the ranks span {} nodes, but the window holds no two-level regions: at setup the launcher said every rank \
                 of the job shares one node (OMPI_COMM_WORLD_LOCAL_SIZE = OMPI_COMM_WORLD_SIZE)",
                nodes.count()
            )),
            Some(nodes) if nodes.count() > 1 => Schedule::TwoLevel(nodes.clone()),
            Some(_) => Schedule::Flat("every rank is on one node".to_string()),
            None => Schedule::Flat(format!("the {} transport reaches every peer alike", transport.name())),
        }
    }

    /// Whether allreduce and reduce can take the two-level tree on `nodes`;
    /// if not, why they stay flat.
    pub(super) fn reductions_fit(nodes: &NodeGroups) -> Result<(), String> {
        if nodes.nodes_are_contiguous() {
            Ok(())
        } else {
            // Serving commutative operations on the two-level tree and the
            // others flat would need a second tree's rings in the window
            // (switching one set of rings between trees breaks the rule
            // that each has one writer); all stay flat instead.
            Err("the nodes do not hold consecutive ranks (a round-robin placement), so folding node by node would not \
                 combine the ranks in rank order, which non-commutative operations need"
                .to_string())
        }
    }

    /// The co-roots of the leaders' bcast stage on `nodes`: the model's
    /// for the number of leaders, or `coll_rdma_bcast_co_roots` (clamped
    /// to the leaders); with a sentence saying why.
    pub(super) fn leaders_bcast_co_roots(&self, nodes: &NodeGroups) -> (usize, String) {
        let leaders = nodes.count();
        match self.bcast_co_roots {
            Some(co_roots) => (co_roots.min(leaders - 1), format!("coll_rdma_bcast_co_roots={co_roots}")),
            None => {
                let choice = choose_co_roots(leaders, &CoRootModel::PAPER_2004);
                (choice.co_roots, format!("automatic: {}", choice.reason))
            }
        }
    }

    /// The two-level barrier of `rank` on `nodes`, with a sentence saying
    /// how the leaders disseminate and why.
    pub(super) fn two_level_barrier(&self, rank: usize, nodes: &NodeGroups) -> (TwoLevelBarrier, String) {
        let leaders = nodes.count();
        let (radix, why) = match self.fixed_radix {
            Some(radix) => (radix, "set by coll_rdma_barrier_radix".to_string()),
            None => {
                let choice = choose_barrier_radix(leaders, &self.model);
                (choice.radix, format!("automatic: {}", choice.reason))
            }
        };
        let barrier = TwoLevelBarrier::new(rank, nodes, radix, self.barrier_offset, self.policy);
        (barrier, format!("radix {radix} among the {leaders} leaders ({why})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::glue::params::{validate, RawParams};

    #[test]
    fn reductions_go_two_level_only_on_consecutive_nodes() {
        assert_eq!(HierarchyPlan::reductions_fit(&NodeGroups::blocks(10, 3)), Ok(()));
        assert_eq!(HierarchyPlan::reductions_fit(&NodeGroups::from_keys(&[0, 0, 1, 2, 2, 2, 2])), Ok(()));
        let round_robin = NodeGroups::from_keys(&(0..10).map(|rank| rank % 3).collect::<Vec<_>>());
        let why = HierarchyPlan::reductions_fit(&round_robin).unwrap_err();
        assert!(why.contains("round-robin") && why.contains("rank order, which non-commutative"), "{why}");
    }

    #[test]
    fn only_two_level_schedules_let_leaders_alone_connect() {
        let policy = WaitPolicy::for_occupancy(1, 1, std::time::Duration::MAX);
        let auto = validate(RawParams::defaults());
        assert_eq!(HierarchyPlan::new(&auto, policy, 0, true).leaders_above(Some(64)), Some(64));
        assert_eq!(HierarchyPlan::new(&auto, policy, 0, true).leaders_above(None), None);
        // no room for the two-level regions: the schedules stay flat
        assert_eq!(HierarchyPlan::new(&auto, policy, 0, false).leaders_above(Some(0)), None);
        let mut flat = validate(RawParams::defaults());
        flat.hierarchy = Hierarchy::Flat;
        assert_eq!(HierarchyPlan::new(&flat, policy, 0, true).leaders_above(Some(0)), None);
    }

    #[test]
    fn the_launchers_sizes_say_whether_the_job_spans_nodes() {
        assert_eq!(JobPlacement::from_sizes(Some(4), Some(4)), JobPlacement::OneNode);
        assert_eq!(JobPlacement::from_sizes(Some(2), Some(4)), JobPlacement::SeveralNodes);
        // missing, unreadable or impossible sizes say nothing
        assert_eq!(JobPlacement::from_sizes(None, Some(4)), JobPlacement::Unknown);
        assert_eq!(JobPlacement::from_sizes(Some(4), None), JobPlacement::Unknown);
        assert_eq!(JobPlacement::from_sizes(Some(0), Some(0)), JobPlacement::Unknown);
        assert_eq!(JobPlacement::from_sizes(Some(5), Some(4)), JobPlacement::Unknown);
        assert_eq!(JobPlacement::ranks_on_one_node(Some(4), Some(4)), Some(4));
        assert_eq!(JobPlacement::ranks_on_one_node(Some(2), Some(4)), None);
        assert_eq!(JobPlacement::ranks_on_one_node(None, Some(4)), None);
    }

    #[test]
    fn two_level_regions_only_where_ranks_may_span_nodes() {
        let auto = validate(RawParams::defaults());
        assert_eq!(auto.hierarchy, Hierarchy::Auto);
        assert!(!HierarchyPlan::may_use_two_levels(&auto, JobPlacement::OneNode));
        assert!(HierarchyPlan::may_use_two_levels(&auto, JobPlacement::SeveralNodes));
        assert!(HierarchyPlan::may_use_two_levels(&auto, JobPlacement::Unknown));
        let mut pretended = validate(RawParams::defaults());
        pretended.verbs.pretend_nodes = 2;
        assert!(HierarchyPlan::may_use_two_levels(&pretended, JobPlacement::OneNode));
        let mut flat = validate(RawParams::defaults());
        flat.hierarchy = Hierarchy::Flat;
        assert!(!HierarchyPlan::may_use_two_levels(&flat, JobPlacement::SeveralNodes));
    }
}
