//! Agreeing on numbers: every rank contributes u64 words and one allreduce
//! with `U64Max` leaves the largest of each word on every rank (the
//! autotune trials' slowest-rank timings, the >2 GiB bcast's lowest rank that
//! must pack). Little-endian bytes, as the collectives reduce them.

use crate::reduction::Reduction;

/// Elementwise maximum of u64 words (little-endian): the one reduction the
/// ranks agree with.
pub struct U64Max;

impl Reduction for U64Max {
    fn element_size(&self) -> usize {
        8
    }
    fn is_commutative(&self) -> bool {
        true
    }
    fn combine(&self, lower: &[u8], higher: &mut [u8]) {
        for (low, high) in lower.chunks_exact(8).zip(higher.chunks_exact_mut(8)) {
            let low = u64::from_le_bytes(low.try_into().expect("8-byte chunk"));
            let max = low.max(u64::from_le_bytes((&*high).try_into().expect("8-byte chunk")));
            high.copy_from_slice(&max.to_le_bytes());
        }
    }
}

/// Words as the bytes `U64Max` reduces, and back.
pub fn words_to_bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|word| word.to_le_bytes()).collect()
}

pub fn bytes_to_words(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks_exact(8).map(|chunk| u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn u64_max_takes_the_larger_word() {
        let lower = words_to_bytes(&[1, 70, u64::MAX]);
        let mut higher = words_to_bytes(&[5, 3, 0]);
        U64Max.combine(&lower, &mut higher);
        assert_eq!(bytes_to_words(&higher), vec![5, 70, u64::MAX]);
    }
}
