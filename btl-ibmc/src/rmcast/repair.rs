//! Which pieces a root multicasts twice before anyone asks: the one
//! decision that both the datagram flavour (`datagram::sender`) and the
//! simulator (tuning/sim) take from here, so that what the simulator
//! measures is what runs.
//!
//! Why: a receiver notices a lost piece when a later piece arrives, and
//! NACKs it then. The last piece of a message has no later piece, so its
//! loss waits for the collector's timeout (20 ms by default), a thousand
//! round trips on InfiniBand; with thousands of receivers some receiver
//! loses a tail in most bcasts once loss reaches 1e-4, and the mean
//! latency becomes the timeout. A second copy of the last pieces, multicast
//! once the originals have gone out and been forwarded to the co-roots,
//! turns a lost tail into a loss of both copies (p^2 under independent
//! loss), and a receiver that lost an earlier piece sees the gap at the
//! copy and NACKs it at once. docs/rmcast-congestion.md has the study.
//!
//! Invariant: a copy is the same frame (same sequence number) as its
//! original; receivers drop whichever arrives second, so correctness
//! never depends on the copies, only the time to repair does.

/// Bytes of a piece's header on the wire (`wire`), for wire-cost figures.
pub const PIECE_HEADER_BYTES: usize = super::wire::PIECE_HEADER_BYTES;

/// Whether piece `index` of a message cut into `pieces` pieces is
/// multicast a second time: the last `tail_repeat` pieces of every
/// message, so every piece of a message of at most `tail_repeat` pieces.
pub fn repeated(index: usize, pieces: usize, tail_repeat: usize) -> bool {
    index < pieces && pieces - index <= tail_repeat
}

/// Multicasts of piece `index` (of `pieces`): 1, or 2 if repeated.
pub fn copies(index: usize, pieces: usize, tail_repeat: usize) -> u32 {
    1 + u32::from(repeated(index, pieces, tail_repeat))
}

/// Datagrams a root multicasts for a message of `pieces` pieces, loss-free:
/// the wire cost of the repeats is this over `pieces`.
pub fn multicasts_per_message(pieces: usize, tail_repeat: usize) -> usize {
    pieces + pieces.min(tail_repeat)
}

/// The most data pieces one block's parity protects. A block is rebuilt
/// only once its last piece or parity has come, so a long message is cut
/// into blocks of at most this many; the wire carries it in a byte.
pub const MOST_BLOCK_PIECES: usize = 64;

/// The share of bcasts in which some receiver may lose more of a block
/// than its parity rebuilds (and so NACK): what `parity_plan` aims at.
pub const BLOCK_FAILURE_TARGET: f64 = 0.01;

/// Loss rates below this count as none: no parity is sent.
pub const LEAST_LOSS: f64 = 1e-5;

/// How a message's pieces are protected by parity (forward error
/// correction, issue 36): blocks of `block_pieces` data pieces (the last
/// block of a message may be shorter), each followed by `parity` parity
/// pieces of a Reed-Solomon erasure code. A receiver holding any
/// `block_pieces` of a block's data and parity pieces rebuilds the rest
/// at once, without a round trip. `parity` 0: no parity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParityPlan {
    pub block_pieces: usize,
    pub parity: usize,
}

impl ParityPlan {
    pub const NONE: ParityPlan = ParityPlan { block_pieces: 0, parity: 0 };
}

/// Data pieces per block for a message of `pieces`: as even as possible,
/// at most `MOST_BLOCK_PIECES`.
pub fn block_pieces(pieces: usize) -> usize {
    if pieces == 0 {
        return 0;
    }
    pieces.div_ceil(pieces.div_ceil(MOST_BLOCK_PIECES))
}

/// The parity for a message of `pieces`, with `loss` the root's estimate
/// of the loss per datagram and receiver, `receivers` the ranks that take
/// its multicast, and at most `most_percent` % of a block's data pieces as
/// parity (0: parity off). The least parity that keeps the chance that
/// any receiver loses more of a block than it can rebuild within
/// `BLOCK_FAILURE_TARGET`, or the cap. None while no loss is seen (the
/// loss-free wire carries no parity), nor for a one-piece message (the
/// tail repeat already sends it twice).
///
/// The sender's decision (`datagram`). The simulator (tuning/sim) does
/// not model parity yet: its loss tables are of the tail repeat alone.
/// A block's parity is at least one piece where any is sent, so blocks
/// of fewer than 100 / `most_percent` pieces get one.
pub fn parity_plan(pieces: usize, loss: f64, receivers: usize, most_percent: u32) -> ParityPlan {
    if pieces < 2 || most_percent == 0 || receivers == 0 || loss.is_nan() || loss < LEAST_LOSS {
        return ParityPlan::NONE;
    }
    let loss = loss.min(0.5);
    let block = block_pieces(pieces);
    let cap = (block * most_percent as usize / 100).clamp(1, block);
    let parity = (1..=cap)
        .find(|&parity| block_failure(block, parity, loss, receivers) <= BLOCK_FAILURE_TARGET)
        .unwrap_or(cap);
    ParityPlan { block_pieces: block, parity }
}

/// The chance that some of `receivers` loses more than `parity` of a
/// block's `block + parity` pieces, each lost independently with `loss`.
pub fn block_failure(block: usize, parity: usize, loss: f64, receivers: usize) -> f64 {
    let sent = block + parity;
    // P(at most `parity` lost) = sum over j <= parity of C(sent, j) p^j (1-p)^(sent-j).
    let mut term = (1.0 - loss).powi(sent as i32);
    let mut within = term;
    for lost in 1..=parity {
        term *= (sent - lost + 1) as f64 / lost as f64 * loss / (1.0 - loss);
        within += term;
    }
    let one = (1.0 - within).max(0.0);
    1.0 - (1.0 - one).powi(receivers as i32)
}

/// The root's estimate of the loss per datagram and receiver, from what
/// its members NACK. Rises fast and falls slowly: with parity on, only
/// losses beyond the parity are NACKed, so a quiet spell says little
/// about the loss itself, and an estimate that fell at once would drop
/// the parity that made it quiet (underestimating costs a round trip,
/// overestimating only bytes under loss).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LossEstimate {
    rate: f64,
}

impl LossEstimate {
    /// The weight of a sample above the estimate, and below it.
    pub const RISE: f64 = 0.25;
    pub const FALL: f64 = 1.0 / 64.0;

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Takes in one message's count: `lost` pieces reported lost over
    /// `deliveries` pieces times receivers.
    pub fn observe(&mut self, deliveries: u64, lost: u64) {
        if deliveries == 0 {
            return;
        }
        let sample = (lost as f64 / deliveries as f64).min(1.0);
        let gain = if sample > self.rate { Self::RISE } else { Self::FALL };
        self.rate += (sample - self.rate) * gain;
        if self.rate < LEAST_LOSS / 2.0 {
            self.rate = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_pieces_and_every_piece_of_a_short_message_are_repeated() {
        // Counted by brute force against the closed form.
        for tail_repeat in 0..5 {
            for pieces in 0..12 {
                let repeated_pieces = (0..pieces).filter(|&index| repeated(index, pieces, tail_repeat)).collect::<Vec<_>>();
                let expected: Vec<usize> = (pieces.saturating_sub(tail_repeat)..pieces).collect();
                assert_eq!(repeated_pieces, expected, "{pieces} pieces, tail {tail_repeat}");
                let sent: u32 = (0..pieces).map(|index| copies(index, pieces, tail_repeat)).sum();
                assert_eq!(sent as usize, multicasts_per_message(pieces, tail_repeat));
            }
        }
        assert!(!repeated(3, 3, 5), "an index past the message is no piece");
    }
    #[test]
    fn parity_plan_table() {
        // (pieces, loss, receivers, most %) -> (block, parity): by the closed
        // form's definition, checked against a brute-force failure count below.
        let table = [
            ((47, 0.0, 3, 25), ParityPlan::NONE),
            ((47, 0.05, 3, 0), ParityPlan::NONE),
            ((1, 0.05, 3, 25), ParityPlan::NONE),
            ((47, 0.05, 3, 25), ParityPlan { block_pieces: 47, parity: 8 }),
            ((47, 1e-3, 3, 25), ParityPlan { block_pieces: 47, parity: 1 }),
            ((47, 0.05, 3, 5), ParityPlan { block_pieces: 47, parity: 2 }),
            ((750, 0.05, 3, 25), ParityPlan { block_pieces: 63, parity: 9 }),
            ((47, 0.5, 3, 25), ParityPlan { block_pieces: 47, parity: 11 }),
        ];
        for ((pieces, loss, receivers, percent), expected) in table {
            assert_eq!(parity_plan(pieces, loss, receivers, percent), expected, "{pieces} pieces, loss {loss}, {receivers} receivers, {percent} %");
        }
    }

    /// `block_failure` against an exhaustive sum over every loss pattern of
    /// a small block, and the plan is the least parity under the target.
    #[test]
    fn block_failure_matches_counting_every_loss_pattern() {
        for (block, parity, loss) in [(4, 0, 0.1f64), (4, 1, 0.1), (5, 2, 0.3), (6, 3, 0.05)] {
            let sent = block + parity;
            let within: f64 = (0u32..1 << sent)
                .filter(|pattern| pattern.count_ones() as usize <= parity)
                .map(|pattern| loss.powi(pattern.count_ones() as i32) * (1.0 - loss).powi((sent - pattern.count_ones() as usize) as i32))
                .sum();
            let expected = 1.0 - within.powi(3);
            assert!((block_failure(block, parity, loss, 3) - expected).abs() < 1e-12, "{block}+{parity} at {loss}");
        }
        for pieces in [2, 10, 47, 64, 65, 750] {
            let plan = parity_plan(pieces, 0.05, 3, 100);
            assert!(plan.block_pieces <= MOST_BLOCK_PIECES && pieces.div_ceil(plan.block_pieces) == pieces.div_ceil(MOST_BLOCK_PIECES));
            assert!(block_failure(plan.block_pieces, plan.parity, 0.05, 3) <= BLOCK_FAILURE_TARGET);
            assert!(block_failure(plan.block_pieces, plan.parity - 1, 0.05, 3) > BLOCK_FAILURE_TARGET);
        }
    }

    #[test]
    fn the_loss_estimate_rises_fast_falls_slowly_and_forgets_to_zero() {
        let mut estimate = LossEstimate::default();
        estimate.observe(0, 0);
        assert_eq!(estimate.rate(), 0.0);
        estimate.observe(100, 20);
        assert!((estimate.rate() - 0.05).abs() < 1e-12);
        estimate.observe(100, 0);
        assert!((estimate.rate() - 0.05 * 63.0 / 64.0).abs() < 1e-12);
        for _ in 0..2000 {
            estimate.observe(100, 0);
        }
        assert_eq!(estimate.rate(), 0.0, "a long quiet spell ends the parity");
    }
}
