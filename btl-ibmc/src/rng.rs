//! A small seeded generator for reproducible fault injection: the same seed
//! gives every rank the same sequence of decisions, so a failing test can be
//! replayed from the seed it prints. Not for anything that needs real
//! randomness.

/// xorshift64* seeded through splitmix64 so that nearby seeds diverge.
/// Verbs (initial PSNs), the udp fault injection and the test fabric
/// draw from it.
#[derive(Clone, Debug)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        let mixed = splitmix64(seed);
        // xorshift has a fixed point at zero.
        Rng { state: if mixed == 0 { 0x9E37_79B9_7F4A_7C15 } else { mixed } }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (0 never draws, so a fault-free config
    /// leaves the sequence untouched for the faults that are enabled).
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// Uniform in `[0, bound)`; `bound` must be non-zero.
    pub(crate) fn below(&mut self, bound: u64) -> u64 {
        ((self.next_u64() as u128 * bound as u128) >> 64) as u64
    }
}

pub(crate) fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_values_stay_in_range() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let mut c = Rng::new(43);
        let first: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let again: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let other: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(first, again);
        assert_ne!(first, other);
        let mut hits = 0;
        for _ in 0..100_000 {
            assert!(a.below(7) < 7);
            let u = a.unit();
            assert!((0.0..1.0).contains(&u));
            hits += a.chance(0.25) as u32;
        }
        assert!((23_500..26_500).contains(&hits), "chance(0.25) hit {hits} of 100000");
    }
}
