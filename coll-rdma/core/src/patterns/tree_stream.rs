//! What a degree-k tree of segment streams is configured with: allreduce
//! and reduce both embed it. Every rank of a communicator must use the same
//! values: they decide the window layout, the tree and where each message
//! is cut into segments.

use btl_ibmc::WaitPolicy;

use super::tree::TreeLinks;

#[derive(Clone, Copy, Debug)]
pub struct TreeStreamConfig {
    /// Most senders a rank receives from in one tree step (k >= 1).
    pub degree: usize,
    /// Largest payload one slot carries; longer messages stream through
    /// the slots in segments of this many bytes, rounded down to whole
    /// elements.
    pub segment_bytes: usize,
    pub policy: WaitPolicy,
    /// Reserve slot rings for the two-level tree (`TreeLinks::
    /// two_level_reserve`: one more step than the flat tree's), so that
    /// the tree can be switched to it once the transport tells which ranks
    /// share a node, where it fits.
    pub room_for_two_levels: bool,
}

impl Default for TreeStreamConfig {
    /// A moderate tree and 8 KiB segments.
    fn default() -> Self {
        TreeStreamConfig { degree: 2, segment_bytes: 8192, policy: WaitPolicy::default(), room_for_two_levels: false }
    }
}

impl TreeStreamConfig {
    /// Incoming slot rings every rank reserves among `size` ranks.
    pub fn ring_positions(&self, size: usize) -> usize {
        let flat = TreeLinks::positions(size, self.degree);
        if self.room_for_two_levels { flat.max(TreeLinks::two_level_reserve(size, self.degree)) } else { flat }
    }

    /// Says what is wrong with values read from the user, before any
    /// instance is built from them.
    pub fn validate(&self) -> Result<(), String> {
        if self.degree == 0 {
            return Err("the allreduce degree must be at least 1".to_string());
        }
        if self.segment_bytes < 8 {
            return Err(format!("a segment of {} bytes cannot hold one 8-byte element", self.segment_bytes));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_needs_a_degree_and_a_segment_holding_one_element() {
        assert!(TreeStreamConfig::default().validate().is_ok());
        assert!(TreeStreamConfig { degree: 0, ..TreeStreamConfig::default() }.validate().is_err());
        assert!(TreeStreamConfig { segment_bytes: 4, ..TreeStreamConfig::default() }.validate().is_err());
    }
}
