//! What an allreduce or reduce instance is configured with. Every rank of a
//! communicator must use the same values: they decide the window layout,
//! the tree and where each message is cut into segments.

use btl_ibmc::WaitPolicy;
use tuning::{choose_degree_for_range, choose_exchange_max_bytes, AllreduceModel};

/// Longest message `from_model` weighs when it picks the degree; beyond
/// it the pipelined tree's time grows in proportion and the ranking of
/// degrees no longer changes.
pub const RANGE_TOP_BYTES: usize = 1 << 20;

/// Largest exchange threshold `from_model` will pick: every rank reserves
/// two slots of this size per rank of the communicator.
pub const EXCHANGE_LIMIT_BYTES: usize = 4096;

#[derive(Clone, Copy, Debug)]
pub struct AllreduceConfig {
    /// Most senders a rank receives from in one tree step (k >= 1).
    pub degree: usize,
    /// Largest payload one slot carries; longer messages stream through
    /// the slots in segments of this many bytes, rounded down to whole
    /// elements.
    pub segment_bytes: usize,
    /// Allreduce messages of at most this many bytes use the exchange
    /// variant; 0 turns it off. Reduce ignores it.
    pub exchange_max_bytes: usize,
    pub policy: WaitPolicy,
}

impl Default for AllreduceConfig {
    /// A moderate tree and 8 KiB segments; the exchange for messages up to
    /// 256 bytes, where the shared-memory model favours it on small nodes.
    fn default() -> Self {
        AllreduceConfig { degree: 2, segment_bytes: 8192, exchange_max_bytes: 256, policy: WaitPolicy::default() }
    }
}

impl AllreduceConfig {
    /// The configuration the model predicts fastest for `size` ranks, with
    /// a sentence for each choice. The window holds one tree, so its degree
    /// is the one least slower than the best over every length the tree
    /// carries: from just above the exchange threshold to `RANGE_TOP_BYTES`.
    pub fn from_model(size: usize, model: &AllreduceModel, policy: WaitPolicy) -> (AllreduceConfig, String) {
        let segment_bytes = model.segment_bytes.unwrap_or(AllreduceConfig::default().segment_bytes);
        let exchange = choose_exchange_max_bytes(size, model, EXCHANGE_LIMIT_BYTES.min(segment_bytes));
        let degree = choose_degree_for_range(size, exchange.max_bytes + 1, RANGE_TOP_BYTES, model);
        let config =
            AllreduceConfig { degree: degree.degree, segment_bytes, exchange_max_bytes: exchange.max_bytes, policy };
        (config, format!("Tree: {} Exchange: {}", degree.reason, exchange.reason))
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
    fn the_model_yields_a_valid_configuration_for_every_size() {
        for size in 1..=70 {
            let (config, why) =
                AllreduceConfig::from_model(size, &AllreduceModel::SHARED_MEMORY, WaitPolicy::default());
            assert!(config.validate().is_ok(), "size {size}: {config:?}");
            assert!(config.exchange_max_bytes <= EXCHANGE_LIMIT_BYTES);
            assert!(why.starts_with(&format!("Tree: k={} because", config.degree)), "{why}");
        }
        assert!(AllreduceConfig { degree: 0, ..AllreduceConfig::default() }.validate().is_err());
        assert!(AllreduceConfig { segment_bytes: 4, ..AllreduceConfig::default() }.validate().is_err());
    }
}
