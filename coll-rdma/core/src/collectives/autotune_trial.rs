//! What the self-tuning trials (`barrier::autotune`, `allreduce::autotune`)
//! share: which values are worth timing around the model's pick, and how a
//! rank sums up its samples of one candidate.

use tuning::round_fanouts;

/// 1, `model_pick` and its neighbours that are `usable`, ascending, leaving
/// out any whose rounds (`round_fanouts`) are those of a smaller one: the
/// barrier radices and allreduce degrees worth timing. The pick alone when
/// none is usable.
pub fn candidates_around(size: usize, model_pick: usize, usable: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut wanted = vec![1, model_pick.saturating_sub(1), model_pick, model_pick + 1];
    wanted.retain(|&value| value >= 1 && usable(value));
    wanted.sort_unstable();
    wanted.dedup();
    let mut candidates: Vec<usize> = Vec::new();
    for value in wanted {
        let fanouts = round_fanouts(size, value);
        if !candidates.iter().any(|&kept| round_fanouts(size, kept) == fanouts) {
            candidates.push(value);
        }
    }
    if candidates.is_empty() {
        candidates.push(model_pick.max(1));
    }
    candidates
}

/// The lower median: a sample that was measured, not an average of two.
pub(crate) fn median(samples: &[u64]) -> u64 {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    sorted.get(sorted.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_a_measured_sample_the_lower_of_two_middles() {
        assert_eq!(median(&[]), 0);
        assert_eq!(median(&[7]), 7);
        assert_eq!(median(&[900, 10, 50]), 50);
        // 10 and 50 in the middle: the lower, not their average 30
        assert_eq!(median(&[900, 10, 50, 1]), 10);
    }
}
