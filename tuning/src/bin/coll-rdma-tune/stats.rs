//! Order statistics of per-pair ratios, computed the way
//! `ci/bench-pairs.sh` computes them (quantiles by linear interpolation
//! between the sorted values), so that the tuner's figures and the bench's
//! can be read side by side.

pub use tuning::bench_log::{median, quantile};

/// The median with its quartiles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub q1: f64,
    pub median: f64,
    pub q3: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        Some(Spread { q1: quantile(values, 0.25)?, median: median(values)?, q3: quantile(values, 0.75)? })
    }
}

/// Geometric mean: the mean of ratios that multiply (a 2x gain and a 2x
/// loss cancel, as they should); `None` for no values or a ratio <= 0.
pub fn geometric_mean(ratios: &[f64]) -> Option<f64> {
    if ratios.is_empty() || ratios.iter().any(|r| !(*r > 0.0)) {
        return None;
    }
    Some((ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn quartiles_interpolate_like_the_bench_script() {
        // bench-pairs.sh --self-test, size 64: ratios .5 .6 .7 .8 10
        let s = Spread::of(&[0.7, 10.0, 0.5, 0.8, 0.6]).unwrap();
        assert!(close(s.median, 0.7) && close(s.q1, 0.6) && close(s.q3, 0.8), "{s:?}");
        // size 256 of the same self-test: .5 .6 .7 10 -> .65, .575, 3.025
        let s = Spread::of(&[0.5, 0.6, 0.7, 10.0]).unwrap();
        assert!(close(s.median, 0.65) && close(s.q1, 0.575) && close(s.q3, 3.025), "{s:?}");
    }

    #[test]
    fn one_value_is_every_quantile_and_none_is_none() {
        assert_eq!(Spread::of(&[2.0]), Some(Spread { q1: 2.0, median: 2.0, q3: 2.0 }));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn geometric_mean_cancels_a_gain_and_an_equal_loss() {
        assert!(close(geometric_mean(&[2.0, 0.5]).unwrap(), 1.0));
        assert!(close(geometric_mean(&[0.81, 1.0]).unwrap(), 0.9));
        assert_eq!(geometric_mean(&[1.0, 0.0]), None);
        assert_eq!(geometric_mean(&[]), None);
    }
}
