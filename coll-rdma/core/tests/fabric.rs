//! The collectives' in-process fabric tests (threads play ranks), one test
//! binary for all but the scale runs (`scale.rs`). Each file below was a
//! binary of its own; as one, the core crate's generic code is
//! instantiated, optimised and linked once instead of fifteen times, which
//! was most of `make test-rust`'s compile time (docs/tests.md, "Layout of
//! the cargo tests"). The files stay self-contained: each keeps its own
//! helpers and shares only `common`. libtest runs the tests of every file
//! in one pool of threads (as many as cores), so no test may rely on
//! process-wide state another file changes; none sets the process's wait
//! policy (btl-ibmc's `process_wait_policy` test binary does, alone).
//!
//! `cargo test -p coll-rdma-core --test fabric bcast_fabric::` runs one file.

mod common;

mod allreduce_autotune_fabric;
mod allreduce_fabric;
mod barrier_autotune_fabric;
mod barrier_fabric;
mod barrier_run_fabric;
mod barrier_two_level_fabric;
mod bcast_fabric;
mod bcast_run_fabric;
mod bcast_single_copy;
mod bcast_two_level_fabric;
mod exchange_overlap_fabric;
mod fault_fabric;
mod multicast_run_fabric;
mod parallel_reduction;
mod parallel_run_fabric;
mod ring_reduction;
mod restart_fabric;
mod ring_run_fabric;
mod run_scratch_fabric;
mod schedule_fabric;

/// With `autotests = false` (Cargo.toml) a file of tests/ that neither
/// binary names as a module would compile nowhere and run nowhere, without
/// a word: every one must be a `mod` of this file or of `scale.rs`.
#[test]
fn every_test_file_is_a_module_of_a_test_binary() {
    let roots = [("fabric.rs", include_str!("fabric.rs")), ("scale.rs", include_str!("scale.rs"))];
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        let Some(name) = path.file_name().and_then(|name| name.to_str()).and_then(|name| name.strip_suffix(".rs")) else {
            continue;
        };
        if roots.iter().any(|(root, _)| root.strip_suffix(".rs") == Some(name)) {
            continue;
        }
        files += 1;
        let declaration = format!("\nmod {name};\n");
        let holders: Vec<&str> = roots.iter().filter(|(_, text)| text.contains(&declaration)).map(|(root, _)| *root).collect();
        assert_eq!(holders.len(), 1, "tests/{name}.rs must be a `mod {name};` of exactly one of fabric.rs and scale.rs, is in {holders:?}");
    }
    assert!(files >= 17, "only {files} test files found in {}", dir.display());
}
