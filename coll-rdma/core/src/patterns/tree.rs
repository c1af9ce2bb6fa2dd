//! The degree-k reduction tree rooted at rank 0 (Gupta 2002, section 6.2):
//! the link table is `tuning::tree`, shared with the simulator, so that
//! both build the same tree. Across nodes, the two-level tree of the same
//! table: degree k within each node, then among the nodes' leaders.

use btl_ibmc::shm::NodeGroups;
pub(crate) use tuning::tree::TreeLinks;
use tuning::tree::TwoLevelShape;

/// One rank's links in the two-level tree, and the slot rings the tree
/// needs on every rank.
#[derive(Clone, Debug)]
pub struct TwoLevelTree {
    pub(crate) links: TreeLinks,
    pub(crate) rings: usize,
}

/// `rank`'s links in the two-level tree of degree `degree` on `nodes`,
/// the same table on every rank that sees the same nodes.
pub fn two_level_links(rank: usize, nodes: &NodeGroups, degree: usize) -> TwoLevelTree {
    let members: Vec<usize> = nodes.members(rank).collect();
    let leaders = nodes.leaders();
    let largest = largest_node(nodes);
    let shape = TwoLevelShape { members: &members, leaders: &leaders, node_positions: TreeLinks::positions(largest, degree) };
    TwoLevelTree { links: TreeLinks::two_level(rank, &shape, degree), rings: TreeLinks::two_level_positions(largest, leaders.len(), degree) }
}

fn largest_node(nodes: &NodeGroups) -> usize {
    (0..nodes.size()).map(|member| nodes.local_count(member)).max().unwrap_or(1)
}
