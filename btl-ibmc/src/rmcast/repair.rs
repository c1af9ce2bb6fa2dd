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
}
