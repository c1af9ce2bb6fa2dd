//! Reading back what bench/coll_pairs.c prints, for every tool that does:
//! its `sample` and `floor` lines, and the order statistics that
//! `ci/bench-pairs.sh` computes from them (quantiles by linear
//! interpolation at position (n-1)p), so that the bench's, the tuner's and
//! the simulator's figures can be read side by side.

/// One line of a coll_pairs log that the tools use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PairsLine {
    /// `sample JOB COLL SIZE ROUND US ITERS`: the slowest rank's mean
    /// microseconds per call of one job's turn.
    Sample { job: usize, size: u64, round: usize, us: f64 },
    /// `floor SIZE K ROUND_TRIP_US MEMCPY_US`: the machine's cache-line
    /// round trip measured before round K, and one rank's 64 MiB memcpy.
    Floor { size: u64, k: usize, round_trip_us: f64, memcpy_us: f64 },
}

impl PairsLine {
    /// The line's meaning; `None` for comments, Open MPI's own messages and
    /// malformed lines.
    pub fn parse(line: &str) -> Option<PairsLine> {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["sample", job, _coll, size, round, us, _iters] => {
                Some(PairsLine::Sample { job: job.parse().ok()?, size: size.parse().ok()?, round: round.parse().ok()?, us: us.parse().ok()? })
            }
            ["floor", size, k, round_trip, memcpy] => Some(PairsLine::Floor {
                size: size.parse().ok()?,
                k: k.parse().ok()?,
                round_trip_us: round_trip.parse().ok()?,
                memcpy_us: memcpy.parse().ok()?,
            }),
            _ => None,
        }
    }
}

/// The `p` quantile (0..=1) of `values`, linear interpolation between the
/// two nearest sorted values; `None` for no values.
pub fn quantile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let position = (sorted.len() - 1) as f64 * p.clamp(0.0, 1.0);
    let below = position.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    Some(sorted[below] + (position - below as f64) * (sorted[above] - sorted[below]))
}

pub fn median(values: &[f64]) -> Option<f64> {
    quantile(values, 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn quantiles_interpolate_like_the_bench_script() {
        // bench-pairs.sh --self-test, size 256: ratios .5 .6 .7 10 -> median
        // .65, quartiles .575 and 3.025 (worked by hand: (n-1)p = .75, 2.25)
        let values = [0.7, 10.0, 0.5, 0.6];
        assert!(close(median(&values).unwrap(), 0.65));
        assert!(close(quantile(&values, 0.25).unwrap(), 0.575));
        assert!(close(quantile(&values, 0.75).unwrap(), 3.025));
        assert!(close(quantile(&values, 0.0).unwrap(), 0.5) && close(quantile(&values, 1.0).unwrap(), 10.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn sample_and_floor_lines_are_read_and_everything_else_skipped() {
        assert_eq!(
            PairsLine::parse("sample 1 allreduce 4096 3 12.5 100"),
            Some(PairsLine::Sample { job: 1, size: 4096, round: 3, us: 12.5 })
        );
        assert_eq!(
            PairsLine::parse("floor 4096 2 0.13 4.5"),
            Some(PairsLine::Floor { size: 4096, k: 2, round_trip_us: 0.13, memcpy_us: 4.5 })
        );
        for other in ["# coll_pairs: allreduce", "floor 4096 2 0.13", "sample 1 allreduce x 3 12.5 100", "", "[host] warning"] {
            assert_eq!(PairsLine::parse(other), None, "{other:?}");
        }
    }
}
