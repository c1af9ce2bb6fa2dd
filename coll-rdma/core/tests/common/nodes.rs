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

/// The placements every two-level test runs on: nodes of 1, 2 and 7 ranks
/// in several orders (the uneven sizes), round robin, one node and
/// one rank per node.
pub fn uneven_layouts() -> Vec<(&'static str, NodeGroups)> {
    vec![
        ("1,2,7", blocks(&[1, 2, 7])),
        ("7,2,1", blocks(&[7, 2, 1])),
        ("2,7,1", blocks(&[2, 7, 1])),
        ("2,1,7,1,2", blocks(&[2, 1, 7, 1, 2])),
        ("round robin of 10 over 3", round_robin(10, 3)),
        ("round robin of 9 over 4", round_robin(9, 4)),
        ("one node of 6", blocks(&[6])),
        ("one rank per node, 5", blocks(&[1, 1, 1, 1, 1])),
        ("single rank", blocks(&[1])),
    ]
}
