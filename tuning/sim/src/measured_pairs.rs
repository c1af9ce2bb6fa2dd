//! The paired table of `make bench` (ci/bench-pairs.sh's `pairs.txt`,
//! kept as bench/results/latest-pairs.txt): coll rdma's time against
//! stock Open MPI's, per np, collective and size.

/// One row of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct PairsRow {
    pub np: usize,
    pub coll: String,
    pub size: usize,
    pub base_us: f64,
    pub rdma_us: f64,
    /// Median over the pairs of rdma / base.
    pub ratio: f64,
    /// (Q3 - Q1) / median of the per-pair ratios.
    pub spread: f64,
    /// The row's own mark: false for "NOT SETTLED".
    pub settled: bool,
}

/// The rows of the first table (coll rdma against the first other variant:
/// stock in `make bench`); lines that are not rows are skipped.
pub fn parse(text: &str) -> Vec<PairsRow> {
    let mut rows: Vec<PairsRow> = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // np coll size base_us rdma_us ratio spread pairs floor_us memcpy_us to_floor fast slow [intervals] settled...
        if fields.len() < 14 {
            continue;
        }
        let number = |i: usize| fields[i].parse::<f64>().ok();
        let (Ok(np), Ok(size), Some(base_us), Some(rdma_us), Some(ratio), Some(spread)) =
            (fields[0].parse::<usize>(), fields[2].parse::<usize>(), number(3), number(4), number(5), number(6))
        else {
            continue;
        };
        if rows.iter().any(|row| row.np == np && row.coll == fields[1] && row.size == size) {
            continue;
        }
        // The mark ends the row after a varying number of interval
        // columns (none, ratio_ci95, launch_ci95) and may carry a note.
        let settled = !line.contains("NOT SETTLED") && fields[13..].contains(&"settled");
        rows.push(PairsRow { np, coll: fields[1].to_string(), size, base_us, rdma_us, ratio, spread, settled });
    }
    rows
}

pub fn find<'a>(rows: &'a [PairsRow], np: usize, coll: &str, size: usize) -> Option<&'a PairsRow> {
    rows.iter().find(|row| row.np == np && row.coll == coll && row.size == size)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "coll rdma against stock (--mca coll ^rdma), paired samples:\n\n\
np   coll            size   stock_us    rdma_us    ratio  spread     pairs floor_us  memcpy_us to_floor      fast      slow  settled\n\
2    barrier            0      0.467      0.298    0.643    0.15    20/21     0.531      0.000     0.56   0.446/1  0.644/19  settled\n\
2    allreduce          4      4.231      0.479    0.113    2.07    21/21     0.513      0.003     0.93         -  0.113/21  NOT SETTLED\n\
4    bcast             64      0.340      6.122   18.031    0.01    21/21     0.501      0.002    12.23         - 18.031/21  settled\n\
\nJobs: stock: mpirun --mca coll ^rdma; rdma: mpirun (default selection);\n\
coll rdma against other (x), paired samples:\n\
2    barrier            0      9.000      0.298    0.033    0.15    20/21     0.531      0.000     0.56   0.446/1  0.644/19  settled\n";

    #[test]
    fn rows_of_the_first_table_are_read_with_their_mark() {
        let rows = parse(TABLE);
        assert_eq!(rows.len(), 3, "{rows:?}");
        let barrier = find(&rows, 2, "barrier", 0).expect("barrier row");
        assert_eq!((barrier.base_us, barrier.rdma_us, barrier.ratio, barrier.settled), (0.467, 0.298, 0.643, true));
        let allreduce = find(&rows, 2, "allreduce", 4).expect("allreduce row");
        assert_eq!((allreduce.ratio, allreduce.spread, allreduce.settled), (0.113, 2.07, false));
        assert_eq!(find(&rows, 4, "bcast", 64).map(|row| row.ratio), Some(18.031));
        assert!(find(&rows, 4, "bcast", 4).is_none());
    }

    /// Tables since the interval columns: the mark is no longer the 14th field.
    #[test]
    fn the_mark_is_read_after_the_interval_columns() {
        let table = "np   coll            size   stock_us    rdma_us    ratio  spread     pairs floor_us  memcpy_us to_floor      fast      slow    ratio_ci95   launch_ci95  settled\n\
2    barrier            0      0.467      0.298    0.643    0.15    20/21     0.531      0.000     0.56   0.446/1  0.644/19   0.610-0.700   0.600-0.720  settled\n\
2    allreduce          4      4.231      0.479    0.113    2.07    21/21     0.513      0.003     0.93         -  0.113/21   0.100-0.130             -  NOT SETTLED (rdma handed over: above 0 B)\n\
2    bcast              4      0.340      0.122    0.359    0.01    21/21     0.501      0.002     1.23         -  0.359/21   0.350-0.370  settled\n";
        let rows = parse(table);
        assert_eq!(find(&rows, 2, "barrier", 0).map(|row| row.settled), Some(true));
        assert_eq!(find(&rows, 2, "allreduce", 4).map(|row| row.settled), Some(false));
        assert_eq!(find(&rows, 2, "bcast", 4).map(|row| (row.ratio, row.settled)), Some((0.359, true)));
    }
}
