//! Where each collective's region sits in a communicator's window. Every
//! rank computes the same layout from the same inputs, so offsets never
//! need to be exchanged.

use crate::collectives::allreduce::{Allreduce, AllreduceConfig};
use crate::collectives::barrier::autotune::TunedBarrier;
use crate::collectives::bcast::{Bcast, BcastConfig};
use crate::collectives::reduce::Reduce;
use crate::collectives::large_reduction::ring::RingReduction;
use crate::patterns::TreeStreamConfig;

/// Regions are page-aligned so that later regions can be registered or
/// mapped on their own.
const REGION_ALIGN: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowLayout {
    pub barrier_offset: usize,
    pub allreduce_offset: usize,
    pub reduce_offset: usize,
    /// The ring that allreduce and reduce share (`RingReduction`).
    pub ring_offset: usize,
    pub bcast_offset: usize,
    pub window_len: usize,
}

impl WindowLayout {
    /// The layout for a communicator whose collectives run with these
    /// configurations (only the sizes they imply matter).
    pub fn new(size: usize, barrier_radix: usize, allreduce: &AllreduceConfig, reduce: &TreeStreamConfig, bcast: &BcastConfig) -> Self {
        Self::with_barrier_radices(size, &[barrier_radix], allreduce, reduce, bcast)
    }

    /// The layout when the barrier region holds one barrier per radix in
    /// `barrier_radices`, one after another (the autotune's candidates).
    pub fn with_barrier_radices(
        size: usize,
        barrier_radices: &[usize],
        allreduce: &AllreduceConfig,
        reduce: &TreeStreamConfig,
        bcast: &BcastConfig,
    ) -> Self {
        let barrier_len = TunedBarrier::region_len(size, barrier_radices);
        Self::with_barrier_region(size, barrier_len, allreduce, reduce, RingReduction::DEFAULT_SEGMENT_BYTES, bcast)
    }

    /// The layout when the barrier region takes `barrier_len` bytes (the
    /// larger of the flat and the two-level barrier's regions where either
    /// may serve: a communicator uses one of them all its life, so they
    /// share the region), and the ring's slots `ring_segment_bytes`.
    pub fn with_barrier_region(
        size: usize,
        barrier_len: usize,
        allreduce: &AllreduceConfig,
        reduce: &TreeStreamConfig,
        ring_segment_bytes: usize,
        bcast: &BcastConfig,
    ) -> Self {
        let barrier_offset = 0;
        let allreduce_offset = page_align(barrier_offset + barrier_len);
        let reduce_offset = page_align(allreduce_offset + Allreduce::region_len(size, allreduce));
        let ring_offset = page_align(reduce_offset + Reduce::region_len(size, reduce));
        let bcast_offset = page_align(ring_offset + RingReduction::region_len(ring_segment_bytes));
        let end = bcast_offset + Bcast::region_len(size, bcast);
        let window_len = page_align(end).max(REGION_ALIGN);
        WindowLayout { barrier_offset, allreduce_offset, reduce_offset, ring_offset, bcast_offset, window_len }
    }

    /// Each collective's region and its length in bytes, in window order
    /// (what makes a window large, for the message that refuses it).
    pub fn region_lens(&self) -> [(&'static str, usize); 5] {
        [
            ("barrier", self.allreduce_offset - self.barrier_offset),
            ("allreduce", self.reduce_offset - self.allreduce_offset),
            ("reduce", self.ring_offset - self.reduce_offset),
            ("ring", self.bcast_offset - self.ring_offset),
            ("bcast", self.window_len - self.bcast_offset),
        ]
    }

    /// The layout when reduce uses the allreduce's tree and bcast its
    /// default.
    pub fn with_reductions(size: usize, barrier_radix: usize, reductions: &AllreduceConfig) -> Self {
        Self::new(size, barrier_radix, reductions, &reductions.tree, &BcastConfig::default())
    }
}

fn page_align(offset: usize) -> usize {
    offset.next_multiple_of(REGION_ALIGN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collectives::barrier::DisseminationBarrier;

    #[test]
    fn regions_are_page_aligned_ordered_and_inside_the_window() {
        for size in [1, 2, 7, 64, 300] {
            for degree in [1, 3, 8] {
                let tree = TreeStreamConfig { degree, ..TreeStreamConfig::default() };
                let config = AllreduceConfig { tree, ..AllreduceConfig::default() };
                let layout = WindowLayout::with_reductions(size, 2, &config);
                for offset in [layout.allreduce_offset, layout.reduce_offset, layout.ring_offset, layout.bcast_offset, layout.window_len] {
                    assert_eq!(offset % REGION_ALIGN, 0);
                }
                assert!(layout.barrier_offset + DisseminationBarrier::region_len(size, 2) <= layout.allreduce_offset);
                assert!(layout.allreduce_offset + Allreduce::region_len(size, &config) <= layout.reduce_offset);
                assert!(layout.reduce_offset + Reduce::region_len(size, &config.tree) <= layout.ring_offset);
                assert!(layout.ring_offset + RingReduction::region_len(RingReduction::DEFAULT_SEGMENT_BYTES) <= layout.bcast_offset);
                assert!(layout.bcast_offset + Bcast::region_len(size, &BcastConfig::default()) <= layout.window_len);
            }
        }
    }

    #[test]
    fn region_lens_cover_the_window_and_follow_the_bcast_settings() {
        let config = AllreduceConfig::default();
        let mut bcast = BcastConfig::default();
        let small = WindowLayout::new(5, 2, &config, &config.tree, &bcast);
        bcast.multicast.window_slots = 4096;
        bcast.multicast.slot_bytes = 1 << 20;
        let large = WindowLayout::new(5, 2, &config, &config.tree, &bcast);
        for layout in [small, large] {
            assert_eq!(layout.region_lens().iter().map(|&(_, len)| len).sum::<usize>(), layout.window_len);
        }
        // 4096 slots of 1 MiB: the bcast region alone is over 4 GiB, the
        // others as before.
        assert!(large.region_lens()[4].1 >= 4096 << 20);
        assert_eq!(large.region_lens()[..4], small.region_lens()[..4]);
    }

    #[test]
    fn every_barrier_candidate_fits_before_the_allreduce() {
        let config = AllreduceConfig::default();
        for size in [2, 4, 9, 64, 1000] {
            let radices = [1, 2, 3, 4];
            let layout = WindowLayout::with_barrier_radices(size, &radices, &config, &config.tree, &BcastConfig::default());
            let needed: usize = radices.iter().map(|&radix| DisseminationBarrier::region_len(size, radix)).sum();
            assert!(layout.barrier_offset + needed <= layout.allreduce_offset, "size {size}");
        }
    }
}
