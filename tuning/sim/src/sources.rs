//! Which shared-memory calibration and which measured figures `make sim`
//! uses: an explicit choice first, then what `make bench` left in its
//! results directory, then the committed calibration (and no figures).

use std::path::{Path, PathBuf};

/// The file `make bench` writes beside `latest-pairs.txt`.
pub const MEASURED_CALIBRATION: &str = "latest-calibration.conf";
/// `make bench`'s paired table.
pub const MEASURED_PAIRS: &str = "latest-pairs.txt";

/// The shared-memory calibration to layer on the network's, and why.
pub fn shm_calibration(chosen: Option<&Path>, bench_results: Option<&Path>, committed: &Path) -> (PathBuf, &'static str) {
    if let Some(path) = chosen {
        return (path.to_path_buf(), "chosen (--shm-calibration, SIM_SHM_CALIBRATION)");
    }
    if let Some(measured) = bench_results.map(|dir| dir.join(MEASURED_CALIBRATION))
        && measured.is_file()
    {
        return (measured, "measured by make bench");
    }
    (committed.to_path_buf(), "committed")
}

/// The paired table to compare with: `chosen` (`none`: no table), else
/// the bench results' when there is one.
pub fn measured_pairs(chosen: Option<&Path>, bench_results: Option<&Path>) -> Option<PathBuf> {
    match chosen {
        Some(path) if path == Path::new("none") => None,
        Some(path) => Some(path.to_path_buf()),
        None => bench_results.map(|dir| dir.join(MEASURED_PAIRS)).filter(|path| path.is_file()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Calibration;

    #[test]
    fn the_measured_file_is_layered_when_make_bench_left_one() {
        let dir = std::env::temp_dir().join(format!("coll-rdma-sim-sources-{}", std::process::id()));
        let results = dir.join("results");
        std::fs::create_dir_all(&results).unwrap();
        let (network, committed) = (dir.join("net.conf"), dir.join("committed.conf"));
        std::fs::write(&network, "net.latency_ns = 1000\nmcast.latency_ns = 2000\nshm.latency_ns = 1\n").unwrap();
        std::fs::write(&committed, "shm.latency_ns = 150\ncopy_ns_per_byte = 0.1\n").unwrap();
        let load = |shm: &Path| Calibration::from_files(&[network.display().to_string(), shm.display().to_string()]).expect("loads");

        let before = shm_calibration(None, Some(&results), &committed);
        let pairs_before = measured_pairs(None, Some(&results));
        std::fs::write(results.join(MEASURED_CALIBRATION), "shm.latency_ns = 256.5\ncopy_ns_per_byte = 0.0877\n").unwrap();
        std::fs::write(results.join(MEASURED_PAIRS), "").unwrap();
        let after = shm_calibration(None, Some(&results), &committed);
        let chosen = shm_calibration(Some(&committed), Some(&results), &committed);
        let pairs_after = measured_pairs(None, Some(&results));
        let pairs_none = measured_pairs(Some(Path::new("none")), Some(&results));
        let (latency_before, latency_after) = (load(&before.0).shm.latency_ns, load(&after.0).shm.latency_ns);
        std::fs::remove_dir_all(&dir).unwrap();

        assert_eq!(before, (committed.clone(), "committed"));
        assert_eq!(pairs_before, None);
        assert_eq!(after, (results.join(MEASURED_CALIBRATION), "measured by make bench"));
        assert_eq!(chosen.0, committed, "an explicit choice wins over the bench's file");
        assert_eq!(pairs_after, Some(results.join(MEASURED_PAIRS)));
        assert_eq!(pairs_none, None);
        assert_eq!((latency_before, latency_after), (150.0, 256.5), "the shm file overrides the network file's key");
        assert_eq!(shm_calibration(None, None, &committed).1, "committed");
    }
}
