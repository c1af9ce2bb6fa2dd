//! Host-side checks that need no RDMA device: missing or bogus devices are
//! reported as errors on every rank, never as a panic or a hang. Tests that
//! move data need a device and live in tests/verbs_device.rs.

use super::*;
use crate::fabric::{Fabric, FabricConfig};

#[test]
fn probe_names_the_device_or_says_why_there_is_none() {
    match probe(&VerbsConfig::default()) {
        Ok(summary) => println!("RDMA device present: {summary}"),
        Err(error) => {
            println!("probe: {error}");
            assert!(
                matches!(error, VerbsSetupError::NoDevice(_) | VerbsSetupError::PortUnusable(_) | VerbsSetupError::Verbs { .. }),
                "unexpected probe error {error:?}"
            );
            assert!(!error.to_string().is_empty());
        }
    }
}

#[test]
fn a_bogus_device_name_is_a_clean_error() {
    let config = VerbsConfig { device: Some("no_such_rdma_device9".into()), ..VerbsConfig::default() };
    let error = probe(&config).expect_err("a device that does not exist cannot be probed");
    let text = error.to_string();
    assert!(matches!(error, VerbsSetupError::NoDevice(_)), "{error:?}");
    assert!(text.contains("no_such_rdma_device9") || text.contains("no RDMA device"), "{text}");
}

#[test]
fn establish_fails_on_every_rank_when_one_rank_has_no_device() {
    let endpoints = Fabric::new(3, 64, FabricConfig::default());
    let results: Vec<Result<(), VerbsSetupError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = endpoints
            .iter()
            .enumerate()
            .map(|(rank, endpoint)| {
                scope.spawn(move || {
                    let device = (rank == 1).then(|| "no_such_rdma_device9".to_string());
                    let config = VerbsConfig { device, ..VerbsConfig::default() };
                    establish(endpoint, rank, 3, 4096, &config).map(|_| ())
                })
            })
            .collect();
        handles.into_iter().map(|handle| handle.join().expect("no rank panics")).collect()
    });
    for (rank, result) in results.iter().enumerate() {
        let error = result.as_ref().expect_err("no rank can go on without rank 1");
        println!("rank {rank}: {error}");
        if rank == 1 {
            assert!(matches!(error, VerbsSetupError::NoDevice(_)), "{error:?}");
        }
    }
}

#[test]
fn invalid_arguments_are_refused_before_any_exchange() {
    let endpoints = Fabric::new(1, 64, FabricConfig::default());
    assert!(matches!(establish(&endpoints[0], 1, 1, 64, &VerbsConfig::default()), Err(VerbsSetupError::InvalidArguments(_))));
    let bad = VerbsConfig { signal_interval: 0, ..VerbsConfig::default() };
    assert!(matches!(establish(&endpoints[0], 0, 1, 64, &bad), Err(VerbsSetupError::InvalidArguments(_))));
}
