//! The memory report's shared-memory figures against the kernel's view:
//! the segment's mapping in /proc/self/maps.

use super::establish_all;
use crate::shm::segment::dev_shm_path;

/// Lengths of this process's mappings of the object `name` once was (it
/// is unlinked once every rank has attached, so the kernel lists it as
/// deleted).
fn mapped_lengths(name: &str) -> Vec<usize> {
    let path = dev_shm_path(name).to_string_lossy().into_owned();
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    maps.lines()
        .filter(|line| line.split_whitespace().nth(5) == Some(path.as_str()))
        .map(|line| {
            let range = line.split_whitespace().next().expect("an address range");
            let (start, end) = range.split_once('-').expect("start-end");
            usize::from_str_radix(end, 16).expect("hex") - usize::from_str_radix(start, 16).expect("hex")
        })
        .collect()
}

#[test]
fn the_reported_segment_is_what_the_kernel_mapped() {
    for size in [1, 2, 4] {
        for window_len in [64, 5000, 70_000] {
            let transports = establish_all(size, window_len);
            let name = transports[0].segment_name().to_string();
            let lengths = mapped_lengths(&name);
            // one mapping per rank (each thread attached its own)
            assert_eq!(lengths.len(), size, "size {size} window {window_len}: mappings of {name}: {lengths:?}");
            for (rank, transport) in transports.iter().enumerate() {
                let footprint = transport.memory_footprint();
                let label = format!("size {size} window {window_len} rank {rank}: {footprint:?}");
                assert!(lengths.iter().all(|&len| len == footprint.shm_segment_bytes), "{label}: the kernel mapped {lengths:?}");
                assert!(footprint.segment_parts_fit(), "{label}");
                assert_eq!(footprint.shm_ranks, size, "{label}");
                assert!(footprint.shm_windows_bytes >= size * window_len && footprint.shm_windows_bytes < size * (window_len + 4096), "{label}");
                assert_eq!(footprint.total_bytes(), footprint.shm_segment_bytes, "{label}: nothing but the segment on shm");
                assert_eq!(footprint.registered_bytes() + footprint.verbs_queue_pairs, 0, "{label}");
            }
        }
    }
}
