//! Host-side checks of the hybrid's setup that need no RDMA device; data
//! movement over a device is in tests/verbs_device.rs.

use super::*;
use crate::fabric::{Fabric, FabricConfig};
use crate::test_support::run_with;
use crate::verbs::{VerbsConfig, VerbsSetupError};

#[test]
fn a_missing_device_fails_every_rank_of_every_node_alike() {
    const SIZE: usize = 4;
    let endpoints = Fabric::new(SIZE, 0, FabricConfig::default());
    let config = VerbsConfig { device: Some("no_such_rdma_device9".into()), ..VerbsConfig::default() };
    let errors = run_with(endpoints, |rank, exchange| match establish(&exchange, rank, SIZE, 4096, &config, 2, CrossNodePairs::Every) {
        Ok(_) => panic!("rank {rank} set up verbs on a device that does not exist"),
        Err(error) => error,
    });
    for (rank, error) in errors.iter().enumerate() {
        println!("rank {rank}: {error}");
        assert!(matches!(error, HybridSetupError::Verbs(_)), "rank {rank}: {error:?}");
        assert!(error.to_string().starts_with("verbs between the nodes failed"), "{error}");
    }
    assert!(
        errors.iter().any(|error| matches!(error, HybridSetupError::Verbs(VerbsSetupError::NoDevice(_)))),
        "no rank named the missing device: {errors:?}"
    );
}

#[test]
fn invalid_arguments_fail_before_any_exchange() {
    let endpoints = Fabric::new(1, 0, FabricConfig::default());
    let config = VerbsConfig::default();
    assert!(matches!(establish(&endpoints[0], 1, 1, 64, &config, 0, CrossNodePairs::Every), Err(HybridSetupError::InvalidArguments(_))));
    assert!(matches!(establish(&endpoints[0], 0, 0, 64, &config, 0, CrossNodePairs::Every), Err(HybridSetupError::InvalidArguments(_))));
}

#[test]
fn only_leaders_connect_where_a_rank_would_hold_more_queue_pairs_than_allowed() {
    use crate::shm::NodeGroups;
    // Nodes of 3, 2 and 3 ranks: ranks 0-2 hold 5 cross-node peers each,
    // 3-4 hold 6.
    let groups = NodeGroups::from_keys(&[0, 0, 0, 1, 1, 2, 2, 2]);
    assert!(!CrossNodePairs::Every.leaders_only(&groups));
    assert!(CrossNodePairs::LeadersAbove(0).leaders_only(&groups));
    assert!(CrossNodePairs::LeadersAbove(5).leaders_only(&groups));
    assert!(!CrossNodePairs::LeadersAbove(6).leaders_only(&groups));
    // One node: nothing crosses, whatever the limit.
    assert!(!CrossNodePairs::LeadersAbove(0).leaders_only(&NodeGroups::single(8)));
}
