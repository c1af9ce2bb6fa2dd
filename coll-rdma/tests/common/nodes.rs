//! Node groupings for the two-level tests: consecutive blocks of given
//! sizes (as the hybrid groups a host's ranks) and round robin (as
//! `--map-by node` places ranks).

use btl_ibmc::shm::NodeGroups;

/// Node keys for consecutive blocks of the given sizes.
pub fn blocks(sizes: &[usize]) -> NodeGroups {
    let keys: Vec<usize> = sizes.iter().enumerate().flat_map(|(node, &count)| std::iter::repeat_n(node, count)).collect();
    NodeGroups::from_keys(&keys)
}

/// `size` ranks dealt over `nodes` nodes in turn.
pub fn round_robin(size: usize, nodes: usize) -> NodeGroups {
    NodeGroups::from_keys(&(0..size).map(|rank| rank % nodes).collect::<Vec<_>>())
}
