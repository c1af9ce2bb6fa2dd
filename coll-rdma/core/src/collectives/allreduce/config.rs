//! What an allreduce instance is configured with: its tree of segment
//! streams (shared with reduce) and the exchange threshold. Every rank of a
//! communicator must use the same values.

use btl_ibmc::WaitPolicy;
use tuning::{choose_allreduce_plan, AllreduceModel};

use crate::patterns::TreeStreamConfig;

pub use tuning::{EXCHANGE_LIMIT_BYTES, RANGE_TOP_BYTES};

#[derive(Clone, Copy, Debug)]
pub struct AllreduceConfig {
    /// The tree and segments of messages above `exchange_max_bytes`; its
    /// wait policy governs the exchange too.
    pub tree: TreeStreamConfig,
    /// Messages of at most this many bytes use the exchange variant; 0
    /// turns it off.
    pub exchange_max_bytes: usize,
}

impl Default for AllreduceConfig {
    /// The default tree; the exchange for messages up to 256 bytes, where
    /// the shared-memory model favours it on small nodes.
    fn default() -> Self {
        AllreduceConfig { tree: TreeStreamConfig::default(), exchange_max_bytes: 256 }
    }
}

impl AllreduceConfig {
    /// The configuration the model predicts fastest for `size` ranks, with
    /// a sentence for each choice. The window holds one tree, so its degree
    /// is the one least slower than the best over every length the tree
    /// carries (`tuning::choose_allreduce_plan`).
    pub fn from_model(size: usize, model: &AllreduceModel, policy: WaitPolicy) -> (AllreduceConfig, String) {
        let segment_bytes = model.segment_bytes.unwrap_or(TreeStreamConfig::default().segment_bytes);
        let tuning::AllreducePlan { exchange, degree } = choose_allreduce_plan(size, model, segment_bytes);
        let tree = TreeStreamConfig { degree: degree.degree, segment_bytes, policy, room_for_two_levels: false };
        let config = AllreduceConfig { tree, exchange_max_bytes: exchange.max_bytes };
        (config, format!("Tree: {} Exchange: {}", degree.reason, exchange.reason))
    }

    /// Says what is wrong with values read from the user, before any
    /// instance is built from them.
    pub fn validate(&self) -> Result<(), String> {
        self.tree.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_yields_a_valid_configuration_for_every_size() {
        for size in 1..=70 {
            let (config, why) =
                AllreduceConfig::from_model(size, &AllreduceModel::SHARED_MEMORY, WaitPolicy::default());
            assert!(config.validate().is_ok(), "size {size}: {config:?}");
            assert!(config.exchange_max_bytes <= EXCHANGE_LIMIT_BYTES);
            assert!(why.starts_with(&format!("Tree: k={} because", config.tree.degree)), "{why}");
        }
        let tree = TreeStreamConfig { degree: 0, ..TreeStreamConfig::default() };
        assert!(AllreduceConfig { tree, ..AllreduceConfig::default() }.validate().is_err());
    }
}
