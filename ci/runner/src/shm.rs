//! The /dev/shm leak check, with ci/mpi/run.sh's rules: a segment a run
//! leaked is one that appeared during the run, that no live process maps
//! (another job's segment in use is no leak) and that one of the run's own
//! ranks created (segment names are
//! `coll_rdma.<origin>.<creator pid>.<start>.<nonce>`, in hex, as
//! btl-ibmc/src/shm/naming.rs makes them). A segment another job left (a
//! killed rank of a concurrent test run) is not this run's leak.

use std::collections::BTreeSet;
use std::path::Path;

/// The entries of DIR whose names start with PREFIX, sorted.
pub fn list(dir: &Path, prefix: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.starts_with(prefix))
        .collect()
}

/// The pid that created the segment NAME, from its name; None for a name
/// of another form.
pub fn creator_pid(name: &str) -> Option<u32> {
    let field = name.split('.').nth(2)?;
    if field.is_empty() || !field.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u32::from_str_radix(field, 16).ok()
}

/// Is /dev/shm/NAME mapped by a live process? (every /proc/PID/maps)
pub fn mapped_by_someone(name: &str) -> bool {
    let needle = format!("/dev/shm/{name}");
    std::fs::read_dir("/proc").into_iter().flatten().flatten().any(|e| {
        let is_pid = e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
        is_pid && std::fs::read_to_string(e.path().join("maps")).is_ok_and(|maps| maps.contains(&needle))
    })
}

/// The segments of AFTER not in BEFORE that a process of RUN_PIDS created
/// and that IS_MAPPED says no live process maps: what the run leaked.
pub fn leaked(
    before: &BTreeSet<String>,
    after: &BTreeSet<String>,
    run_pids: &BTreeSet<u32>,
    is_mapped: impl Fn(&str) -> bool,
) -> Vec<String> {
    after
        .difference(before)
        .filter(|name| creator_pid(name).is_some_and(|pid| run_pids.contains(&pid)))
        .filter(|name| !is_mapped(name))
        .cloned()
        .collect()
}

/// The pids in a file of one pid a line (ci/record-pid.sh's).
pub fn read_pids(file: &Path) -> BTreeSet<u32> {
    std::fs::read_to_string(file).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_creator_pid_is_the_third_field_in_hex() {
        assert_eq!(creator_pid("coll_rdma.0.3039.1a.ff"), Some(0x3039));
        assert_eq!(creator_pid("coll_rdma.0.3039"), Some(0x3039));
        for other in ["coll_rdma.0", "coll_rdma.0..1", "coll_rdma.0.XYZ.1", "coll_rdma.0.-1.2", "coll_rdma.0.1A.2"] {
            assert_eq!(creator_pid(other), None, "{other}");
        }
    }

    #[test]
    fn only_new_unmapped_segments_of_the_runs_own_ranks_are_leaks() {
        let before = set(&["coll_rdma.0.64.1.1"]); // pid 100, there before the run
        let after = set(&[
            "coll_rdma.0.64.1.1",
            "coll_rdma.0.65.1.1", // pid 101: the run's, left behind
            "coll_rdma.0.66.1.1", // pid 102: the run's, but mapped (in use)
            "coll_rdma.0.c8.1.1", // pid 200: another job's
            "coll_rdma.bogus",
        ]);
        let run_pids: BTreeSet<u32> = [100, 101, 102].into();
        let mapped = |name: &str| name == "coll_rdma.0.66.1.1";
        assert_eq!(leaked(&before, &after, &run_pids, mapped), ["coll_rdma.0.65.1.1"]);
        assert!(leaked(&before, &before, &run_pids, |_| false).is_empty());
    }

    #[test]
    fn listing_and_pid_files() {
        let dir = std::env::temp_dir().join(format!("mpi-runner-shm-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["coll_rdma.a", "coll_rdma.b", "crtest.c"] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        std::fs::write(dir.join("pids"), "12\n\n34\nnot a pid\n").unwrap();
        assert_eq!(list(&dir, "coll_rdma."), set(&["coll_rdma.a", "coll_rdma.b"]));
        assert_eq!(read_pids(&dir.join("pids")), [12, 34].into());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
