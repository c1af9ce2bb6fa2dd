//! What places a rank on a node: its host (name and kernel boot) and, for
//! testing, a block of consecutive ranks within the host that pretends to
//! be a node of its own, so that one machine can run the hybrid.

use crate::shm::node::{BOOT_ID_BYTES, HOSTNAME_BYTES, NodeIdentity};

pub(crate) const KEY_LEN: usize = HOSTNAME_BYTES + BOOT_ID_BYTES + 8;

/// The key of `rank` of `size` when each host's ranks pretend to be
/// `pretend_nodes` nodes (0 or 1: the real placement).
pub(crate) fn node_key(identity: &NodeIdentity, rank: usize, size: usize, pretend_nodes: usize) -> [u8; KEY_LEN] {
    let block = if pretend_nodes > 1 { (rank * pretend_nodes / size.max(1)) as u64 } else { 0 };
    let mut key = [0u8; KEY_LEN];
    key[..HOSTNAME_BYTES].copy_from_slice(&identity.hostname);
    key[HOSTNAME_BYTES..HOSTNAME_BYTES + BOOT_ID_BYTES].copy_from_slice(&identity.boot_id);
    key[HOSTNAME_BYTES + BOOT_ID_BYTES..].copy_from_slice(&block.to_le_bytes());
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shm::NodeGroups;

    #[test]
    fn pretended_nodes_are_consecutive_blocks_of_each_host() {
        let here = NodeIdentity::current();
        let mut elsewhere = here;
        elsewhere.boot_id[0] ^= 1;
        let keys: Vec<_> = (0..6).map(|rank| node_key(if rank < 3 { &here } else { &elsewhere }, rank, 6, 0)).collect();
        let real = NodeGroups::from_keys(&keys);
        assert_eq!((real.count(), real.members(4).collect::<Vec<_>>()), (2, vec![3, 4, 5]));

        let keys: Vec<_> = (0..5).map(|rank| node_key(&here, rank, 5, 2)).collect();
        let pretend = NodeGroups::from_keys(&keys);
        assert_eq!((pretend.count(), pretend.members(0).collect::<Vec<_>>()), (2, vec![0, 1, 2]));
        assert_eq!(pretend.members(4).collect::<Vec<_>>(), [3, 4]);
        let one = NodeGroups::from_keys(&(0..5).map(|rank| node_key(&here, rank, 5, 1)).collect::<Vec<_>>());
        assert_eq!(one.count(), 1);
    }
}
