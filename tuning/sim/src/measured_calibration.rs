//! The shared-memory calibration `make bench` writes: from the floor samples
//! of bench/coll_pairs.c (`floor SIZE K ROUND_TRIP_US MEMCPY_US` in the
//! paired runs' logs) it measures the flag latency and the copy cost; the
//! keys the bench does not measure are copied from the committed file.
//!
//! Decision on `shm.gap_per_byte_ns` (a put's payload per byte): not taken
//! from the memcpy column. The bench's memcpy is one rank copying its own
//! 64 MiB buffers, i.e. memory bandwidth; a put moves a tree segment (a few
//! KiB, in cache) into lines another core then pulls, so the two differ in
//! regime even though both are copies. It stays the committed model value.

use std::path::Path;

use tuning::bench_log::{quantile, PairsLine};

/// One floor sample, from a log of a run at `np` ranks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloorSample {
    pub np: usize,
    pub size: usize,
    pub round_trip_us: f64,
    pub memcpy_us: f64,
}

/// ci/bench-pairs.sh's split between the VM's fast and slow placements.
pub const PHASE_SPLIT_US: f64 = 0.25;

/// The floor lines of one log; other lines (samples, comments) are skipped.
pub fn floor_samples(np: usize, text: &str) -> Vec<FloorSample> {
    text.lines()
        .filter_map(|line| match PairsLine::parse(line)? {
            PairsLine::Floor { size, round_trip_us, memcpy_us, .. } => {
                Some(FloorSample { np, size: usize::try_from(size).ok()?, round_trip_us, memcpy_us })
            }
            PairsLine::Sample { .. } => None,
        })
        .collect()
}

/// Every floor sample under `dir/logs` (or `dir` itself), from the files
/// ci/bench-pairs.sh names `npN-COLL-VARIANT.out`.
pub fn read_pairs_logs(dir: &Path) -> Result<Vec<FloorSample>, String> {
    let logs = if dir.join("logs").is_dir() { dir.join("logs") } else { dir.to_path_buf() };
    let entries = std::fs::read_dir(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let mut samples = Vec::new();
    let mut names: Vec<_> = entries.filter_map(|entry| entry.ok().map(|entry| entry.path())).collect();
    names.sort();
    for path in names {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let Some(np) = name.strip_prefix("np").and_then(|rest| rest.split('-').next()).and_then(|n| n.parse().ok()) else { continue };
        if !name.ends_with(".out") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        samples.extend(floor_samples(np, &text));
    }
    if samples.is_empty() {
        return Err(format!("{}: no `floor` lines in any npN-*.out log", logs.display()));
    }
    Ok(samples)
}

/// Median, quartiles and range of some values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    pub min: f64,
    pub max: f64,
}

/// Quantiles as ci/bench-pairs.sh interpolates them; None for no values.
pub fn summarize(values: &[f64]) -> Option<Summary> {
    let at = |p| quantile(values, p);
    Some(Summary {
        count: values.len(),
        median: at(0.5)?,
        q1: at(0.25)?,
        q3: at(0.75)?,
        min: at(0.0)?,
        max: at(1.0)?,
    })
}

/// What the floor samples say about shared memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// The np whose floors gave the latency (2 when present: ranks bound
    /// to distinct cores, as the np=2 figures run).
    pub latency_np: usize,
    pub round_trip_us: Summary,
    pub fast: Option<Summary>,
    pub slow: Option<Summary>,
    pub copy_size: usize,
    /// ns per byte of one memcpy of `copy_size` bytes.
    pub copy_ns_per_byte: Summary,
}

impl Measured {
    pub fn latency_ns(&self) -> f64 {
        self.round_trip_us.median * 1e3 / 2.0
    }
}

pub fn measure(samples: &[FloorSample]) -> Result<Measured, String> {
    let latency_np = if samples.iter().any(|s| s.np == 2) { 2 } else { samples.iter().map(|s| s.np).min().ok_or("no floor samples")? };
    let round_trips: Vec<f64> = samples.iter().filter(|s| s.np == latency_np).map(|s| s.round_trip_us).collect();
    let fast: Vec<f64> = round_trips.iter().copied().filter(|&rt| rt < PHASE_SPLIT_US).collect();
    let slow: Vec<f64> = round_trips.iter().copied().filter(|&rt| rt >= PHASE_SPLIT_US).collect();
    let copy_size = samples.iter().map(|s| s.size).max().unwrap_or(0);
    if copy_size == 0 {
        return Err("no floor sample with a memcpy (every size is 0: only barrier logs?)".into());
    }
    let per_byte: Vec<f64> = samples.iter().filter(|s| s.size == copy_size).map(|s| s.memcpy_us * 1e3 / copy_size as f64).collect();
    Ok(Measured {
        latency_np,
        round_trip_us: summarize(&round_trips).ok_or("no round trips")?,
        fast: summarize(&fast),
        slow: summarize(&slow),
        copy_size,
        copy_ns_per_byte: summarize(&per_byte).ok_or("no memcpy samples")?,
    })
}

/// The keys this module measures; every other key comes from the base file.
pub const MEASURED_KEYS: [&str; 2] = ["shm.latency_ns", "copy_ns_per_byte"];

fn spread(summary: &Summary, unit: &str, digits: usize) -> String {
    format!(
        "{} samples, median {:.digits$} {unit}, quartiles {:.digits$}-{:.digits$}, range {:.digits$}-{:.digits$}",
        summary.count, summary.median, summary.q1, summary.q3, summary.min, summary.max
    )
}

fn placement(name: &str, summary: &Option<Summary>) -> String {
    match summary {
        Some(s) => format!("{} {name} (median {:.3} us)", s.count, s.median),
        None => format!("0 {name}"),
    }
}

/// The calibration file: measured keys with what was measured, then the
/// base file's other keys, copied. `source` names the logs, `base_name`
/// the base file, as the comments should show them.
pub fn calibration_text(measured: &Measured, base_text: &str, base_name: &str, source: &str) -> String {
    let m = measured;
    let mut out = format!(
        "# coll-rdma-sim calibration: the shared-memory level of this machine, written by\n\
         # `make bench` (ci/bench.sh: coll-rdma-sim --calibrate-from) from the floor samples of\n\
         # bench/coll_pairs.c in {source}. Nanoseconds unless named.\n\n\
         # measured: half the median cache-line round trip between ranks 0 and 1 (np={np} runs):\n\
         # {rt};\n\
         # placements (split at {split} us, as ci/bench-pairs.sh): {fast}, {slow}.\n\
         shm.latency_ns = {latency:.1}\n\
         # measured: one memcpy of {size} bytes on rank 0 (the largest size of the run, all np):\n\
         # {copy}.\n\
         copy_ns_per_byte = {copy_median:.4}\n\n\
         # Not measured by make bench: copied from {base_name}.\n\
         # shm.gap_per_byte_ns (a put's payload) is not the memcpy figure above: that is one\n\
         # core's copy at memory bandwidth, a put moves an in-cache segment to another core.\n",
        np = m.latency_np,
        rt = spread(&m.round_trip_us, "us", 3),
        split = PHASE_SPLIT_US,
        fast = placement("fast", &m.fast),
        slow = placement("slow", &m.slow),
        latency = m.latency_ns(),
        size = m.copy_size,
        copy = spread(&m.copy_ns_per_byte, "ns/byte", 4),
        copy_median = m.copy_ns_per_byte.median,
    );
    for line in base_text.lines() {
        let setting = line.split('#').next().unwrap_or("").trim();
        let Some((key, _)) = setting.split_once('=') else { continue };
        if MEASURED_KEYS.contains(&key.trim()) {
            continue;
        }
        out += setting;
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Calibration;

    // np=2 round trips 0.1 0.12 0.5 0.6 0.7 (two fast, three slow; median
    // 0.5 -> 250 ns), np=4's 9.0 ignored for the latency; memcpy at the
    // largest size 1000 B: 0.1 0.2 0.3 us -> 100 200 300 ns / 1000 B, median
    // 0.2 ns/B; the 10-byte floors do not count for the copy.
    const LOG2: &str = "# coll_pairs: allreduce\nfloor 10 0 0.1000 0.001\nsample 0 allreduce 10 0 1.0 5\n\
                        floor 10 1 0.6000 0.001\nfloor 1000 0 0.5000 0.100\nfloor 1000 1 0.1200 0.300\nfloor 1000 2 0.7000 0.200\n";
    const LOG4: &str = "floor 1000 0 9.0000 0.200\n";
    const BASE: &str = "# comment\nshm.latency_ns = 150\nshm.overhead_ns = 20 # trailing\n\ncopy_ns_per_byte = 0.1\ncombine_ns_per_byte = 0.25\n";

    fn made_up() -> Vec<FloorSample> {
        let mut samples = floor_samples(2, LOG2);
        samples.extend(floor_samples(4, LOG4));
        samples
    }

    #[test]
    fn the_latency_and_copy_cost_are_the_medians_worked_out_by_hand() {
        let samples = made_up();
        assert_eq!(samples.len(), 6);
        let measured = measure(&samples).expect("measurable");
        assert_eq!(measured.latency_np, 2);
        assert_eq!(measured.round_trip_us.count, 5);
        assert!((measured.latency_ns() - 250.0).abs() < 1e-9);
        // sorted .1 .12 .5 .6 .7: Q1 at position 1 = .12, Q3 at 3 = .6
        assert!((measured.round_trip_us.q1 - 0.12).abs() < 1e-12 && (measured.round_trip_us.q3 - 0.6).abs() < 1e-12);
        assert_eq!((measured.fast.unwrap().count, measured.slow.unwrap().count), (2, 3));
        assert!((measured.fast.unwrap().median - 0.11).abs() < 1e-12);
        assert!((measured.slow.unwrap().median - 0.6).abs() < 1e-12);
        assert_eq!(measured.copy_size, 1000);
        assert_eq!(measured.copy_ns_per_byte.count, 4, "np=2's three and np=4's one at 1000 B");
        // 0.1 0.2 0.2 0.3 ns/B: median 0.2
        assert!((measured.copy_ns_per_byte.median - 0.2).abs() < 1e-12);
    }

    #[test]
    fn the_written_file_parses_and_copies_the_keys_not_measured() {
        let measured = measure(&made_up()).expect("measurable");
        let text = calibration_text(&measured, BASE, "base.conf", "logs/");
        let mut calibration = Calibration::default();
        let keys = calibration.apply(&text, "written").expect("the simulator reads what it writes");
        assert_eq!(keys.len(), 4, "{text}");
        assert_eq!(calibration.shm.latency_ns, 250.0);
        assert_eq!(calibration.copy_ns_per_byte, 0.2);
        assert_eq!((calibration.shm.overhead_ns, calibration.combine_ns_per_byte), (20.0, 0.25));
        assert!(text.contains("5 samples, median 0.500 us"), "{text}");
        assert!(text.contains("2 fast (median 0.110 us), 3 slow (median 0.600 us)"), "{text}");
        assert!(text.contains("copied from base.conf"), "{text}");
        assert_eq!(text.matches("copy_ns_per_byte =").count(), 1, "the base's value is replaced, not repeated");
    }

    #[test]
    fn without_np2_the_smallest_np_gives_the_latency_and_barrier_only_logs_are_refused() {
        let measured = measure(&floor_samples(4, LOG4)).expect("measurable");
        assert_eq!((measured.latency_np, measured.latency_ns()), (4, 4500.0));
        assert!(measure(&floor_samples(2, "floor 0 0 0.5 0.000\n")).unwrap_err().contains("memcpy"));
        assert!(summarize(&[]).is_none());
    }

    #[test]
    fn logs_are_read_from_the_pairs_directory() {
        let dir = std::env::temp_dir().join(format!("coll-rdma-sim-logs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        std::fs::write(dir.join("logs/np2-allreduce-stock.out"), LOG2).unwrap();
        std::fs::write(dir.join("logs/np4-bcast-rdma.out"), LOG4).unwrap();
        std::fs::write(dir.join("logs/np2-allreduce-stock.err"), "floor 1 1 1 1\n").unwrap();
        let samples = read_pairs_logs(&dir);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(samples.expect("readable").len(), 6, ".err files are not read");
    }
}
