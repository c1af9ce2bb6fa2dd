//! The site's parameter file, in Open MPI's `mca-params.conf` syntax
//! (`name = value` lines, `#` comments): above each value, what was
//! measured (the candidates, the default's figures, the per-pair ratios,
//! date, process count, host); for a parameter left at its default, why.

use std::fmt::Write;

use crate::plan::NotSwept;
use crate::rule::{Decision, Judgement, Point, Thresholds};

/// Where and how the measurements were taken.
#[derive(Clone, Debug)]
pub struct Header {
    pub host: String,
    pub date: String,
    pub nps: Vec<usize>,
    pub transport: String,
    pub launch: String,
    pub mode: String,
    pub rounds: usize,
    pub sample_ms: f64,
    pub thresholds: Thresholds,
}

/// One candidate value with its points against the default.
#[derive(Clone, Debug)]
pub struct CandidateReport {
    pub value: i64,
    pub points: Vec<Point>,
    pub judgement: Judgement,
}

/// One swept parameter.
#[derive(Clone, Debug)]
pub struct ParamReport {
    /// full name, `coll_rdma_...`
    pub name: String,
    pub collective: &'static str,
    /// the value in force during the sweep, as ompi_info reported it, and
    /// where it came from (`default`, a file, ...)
    pub default: String,
    pub default_source: String,
    pub candidates: Vec<CandidateReport>,
    pub decision: Decision,
    /// anything that went wrong while measuring (then nothing is set)
    pub failure: Option<String>,
    /// testing only (`--accept-best`): the best candidate was set although
    /// the rule would have kept the default
    pub forced: bool,
    /// how the values chosen for the same collective did together
    pub together: Option<String>,
    /// the default's second job against its first (should be about 1)
    pub control: Vec<Point>,
}

impl ParamReport {
    /// The value the file sets, if any.
    pub fn chosen(&self) -> Option<i64> {
        match (&self.decision, &self.failure) {
            (Decision::Set { index }, None) => self.candidates.get(*index).map(|c| c.value),
            _ => None,
        }
    }
}

pub fn render(header: &Header, params: &[ParamReport], not_swept: &[NotSwept]) -> String {
    let mut out = String::new();
    let nps: Vec<String> = header.nps.iter().map(|n| n.to_string()).collect();
    let t = &header.thresholds;
    let _ = writeln!(out, "# coll rdma parameters for {}, written by coll-rdma-tune on {}", header.host, header.date);
    let _ = writeln!(out, "# measured at np={}, {} mode: {}", nps.join(","), header.mode, header.launch);
    let _ = writeln!(out, "# transport: {}", header.transport);
    let _ = writeln!(
        out,
        "# method: bench/coll_pairs.c, one job per value taking turns in samples of about {} ms, {} rounds per size;",
        header.sample_ms, header.rounds
    );
    out.push_str("#   figures: the default's median us per call, then per candidate the median ratio to the default\n");
    out.push_str("#   [first, third quartile] of the per-pair ratios (below 1: faster)\n");
    let _ = writeln!(
        out,
        "# rule: a value is set only when its overall ratio (geometric mean over sizes) is at most {:.2}, it is\n\
         #   {:.0} % faster with three quarters of the pairs faster at one size at least, and at no size is its\n\
         #   median ratio above {:.2}, three quarters of its pairs slower, or the quartiles of its ratios\n\
         #   further apart than {:.2} (too noisy to tell); otherwise the default stays.\n\
         #   Control: each sweep runs the default twice, as its first and its last job; where those differ\n\
         #   (median ratio beyond 1 +- {:.2}, quartiles further apart than {:.2}) the sweep decides nothing.\n\
         #   The values set for one collective are then measured together against the defaults, over all\n\
         #   their sizes, and left out together if that is slower anywhere",
        1.0 - t.margin,
        t.margin * 100.0,
        1.0 + t.tolerance,
        t.max_spread,
        t.margin / 2.0,
        t.max_spread
    );
    out.push_str("# install: $HOME/.openmpi/mca-params.conf (one user) or <prefix>/etc/openmpi-mca-params.conf (every user)\n");
    for p in params {
        out.push_str("\n");
        render_param(&mut out, p);
    }
    if !not_swept.is_empty() {
        out.push_str("\n# not swept:\n");
        for n in not_swept {
            let _ = writeln!(out, "#   coll_rdma_{}: {}", n.param, n.why);
        }
    }
    out
}

fn render_param(out: &mut String, p: &ParamReport) {
    let _ = writeln!(out, "# {} ({}; default {}, from {})", p.name, p.collective, p.default, p.default_source);
    let Some(first) = p.candidates.first() else {
        let _ = writeln!(out, "#   not set: {}", p.failure.as_deref().unwrap_or("no candidate was measured"));
        return;
    };
    // columns: every (np, size) any candidate was measured at; the default
    // is the same job for every candidate of a sweep
    let mut columns: Vec<&Point> = Vec::new();
    for point in p.candidates.iter().flat_map(|c| &c.points).chain(&p.control) {
        if !columns.iter().any(|q| (q.np, q.size) == (point.np, point.size)) {
            columns.push(point);
        }
    }
    let labels: Vec<String> = columns.iter().map(|q| point_label(q)).collect();
    let width = labels.iter().map(|l| l.len()).max().unwrap_or(0).max(19);
    let _ = write!(out, "#   {:<14}", "");
    for l in &labels {
        let _ = write!(out, " {l:>width$}");
    }
    let _ = write!(out, "\n#   {:<14}", "default (us)");
    for q in &columns {
        let _ = write!(out, " {:>width$}", format!("{:.3}", q.comparison.baseline_us));
    }
    out.push('\n');
    let row = |out: &mut String, label: &str, points: &[Point]| {
        let _ = write!(out, "#   {label:<14}");
        for q in &columns {
            let cell = match points.iter().find(|x| (x.np, x.size) == (q.np, q.size)) {
                Some(x) => format!("{:.3}[{:.2},{:.2}]", x.comparison.ratio.median, x.comparison.ratio.q1, x.comparison.ratio.q3),
                None => "-".to_string(),
            };
            let _ = write!(out, " {cell:>width$}");
        }
    };
    if !p.control.is_empty() {
        row(out, "default again", &p.control);
        out.push_str("  (the default as the last job against the first: should be 1)\n");
    }
    for c in &p.candidates {
        row(out, &c.value.to_string(), &c.points);
        let overall = c.judgement.overall.map_or("-".to_string(), |o| format!("{o:.3}"));
        let _ = writeln!(out, "  overall {overall}: {}", c.judgement.verdict.as_ref().err().map_or("clearly better", |e| e.as_str()));
    }
    if let Some(floor) = first.points.first().and_then(|p| p.comparison.floor_us) {
        let pairs: Vec<String> = first.points.iter().map(|p| p.comparison.pairs_used.to_string()).collect();
        let _ = writeln!(out, "#   floor (cache-line round trip) {floor:.3} us; pairs used per size: {}", pairs.join(" "));
    }
    if let Some(together) = &p.together {
        let _ = writeln!(out, "#   {together}");
    }
    if let Some(failure) = &p.failure {
        let _ = writeln!(out, "#   not set: {failure}");
        return;
    }
    match p.chosen() {
        Some(value) if p.forced => {
            let _ = writeln!(out, "#   set for a TEST (--accept-best), not by the rule: {value} has the lowest overall ratio");
            let _ = writeln!(out, "{} = {value}", p.name);
        }
        Some(value) => {
            let _ = writeln!(out, "#   set: {value} is clearly better than the default {}", p.default);
            let _ = writeln!(out, "{} = {value}", p.name);
        }
        None => {
            let why = match &p.decision {
                Decision::Keep { why } => why.as_str(),
                Decision::Set { .. } => "the chosen candidate is missing",
            };
            let _ = writeln!(out, "#   not set (the default {} stays): {why}", p.default);
        }
    }
}

fn point_label(p: &Point) -> String {
    if p.size == 0 { format!("np={}", p.np) } else { format!("np={} {} B", p.np, p.size) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::judge;
    use crate::samples::Comparison;
    use crate::stats::Spread;

    fn point(size: u64, median: f64) -> Point {
        Point {
            np: 2,
            size,
            comparison: Comparison {
                ratio: Spread { q1: median - 0.02, median, q3: median + 0.02 },
                pairs_used: 11,
                pairs_taken: 11,
                baseline_us: 4.0,
                candidate_us: 4.0 * median,
                floor_us: Some(0.15),
            },
        }
    }

    fn candidate(value: i64, medians: &[(u64, f64)]) -> CandidateReport {
        let points: Vec<Point> = medians.iter().map(|(s, m)| point(*s, *m)).collect();
        let judgement = judge(&points, &Thresholds::default());
        CandidateReport { value, points, judgement }
    }

    fn header() -> Header {
        Header {
            host: "node7".into(),
            date: "2026-11-24 01:02 UTC".into(),
            nps: vec![2],
            transport: "shm".into(),
            launch: "mpirun -np 2".into(),
            mode: "quick".into(),
            rounds: 11,
            sample_ms: 10.0,
            thresholds: Thresholds::default(),
        }
    }

    fn reports() -> Vec<ParamReport> {
        let better = candidate(32768, &[(16384, 1.0), (32768, 0.6), (65536, 0.99)]);
        let worse = candidate(131072, &[(16384, 1.0), (32768, 1.0), (65536, 1.4)]);
        let even = candidate(4096, &[(64, 0.98), (1024, 1.01)]);
        vec![
            ParamReport {
                name: "coll_rdma_bcast_single_copy_min_bytes".into(),
                collective: "bcast",
                default: "65536".into(),
                default_source: "default".into(),
                decision: crate::rule::choose(&[worse.judgement.clone(), better.judgement.clone()]),
                candidates: vec![worse, better],
                failure: None,
                forced: false,
                together: None,
                control: vec![point(16384, 1.01), point(32768, 0.99), point(65536, 1.0)],
            },
            ParamReport {
                name: "coll_rdma_allreduce_exchange_max".into(),
                collective: "allreduce",
                default: "-1".into(),
                default_source: "default".into(),
                decision: crate::rule::choose(&[even.judgement.clone()]),
                candidates: vec![even],
                failure: None,
                forced: false,
                together: None,
                control: vec![],
            },
        ]
    }

    /// The `name = value` lines, as Open MPI's parser reads them.
    fn values(text: &str) -> Vec<(String, String)> {
        text.lines()
            .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
            .map(|l| {
                let (n, v) = l.split_once('=').expect("a value line has '='");
                (n.trim().to_string(), v.trim().to_string())
            })
            .collect()
    }

    #[test]
    fn only_the_clearly_better_value_is_set() {
        let text = render(&header(), &reports(), &[]);
        assert_eq!(values(&text), vec![("coll_rdma_bcast_single_copy_min_bytes".to_string(), "32768".to_string())]);
        assert!(text.contains("# coll_rdma_allreduce_exchange_max (allreduce; default -1, from default)"));
        assert!(text.contains("not set (the default -1 stays): no candidate is clearly better"));
    }

    #[test]
    fn each_value_has_its_measurements_above_it() {
        let text = render(&header(), &reports(), &[]);
        let lines: Vec<&str> = text.lines().collect();
        let at = lines.iter().position(|l| l.starts_with("coll_rdma_bcast_single_copy_min_bytes =")).unwrap();
        let block: Vec<&str> = lines[..at].iter().rev().take_while(|l| l.starts_with('#')).copied().collect();
        let block = block.join("\n");
        for needle in ["default (us)", "default again", "np=2 32768 B", "0.600[0.58,0.62]", "131072", "slower at np=2 65536 B", "floor", "set: 32768"] {
            assert!(block.contains(needle), "missing {needle:?} in\n{block}");
        }
        for needle in ["node7", "2026-11-24 01:02 UTC", "np=2", "mca-params.conf", "Control: each sweep runs the default twice"] {
            assert!(text.contains(needle), "header misses {needle:?}");
        }
    }

    #[test]
    fn a_failed_sweep_sets_nothing_and_says_why() {
        let mut r = reports();
        r[0].failure = Some("job 2 exited with status 3 (wrong result)".into());
        let text = render(&header(), &r, &[NotSwept { param: "barrier_radix", why: "at np=2 ...".into() }]);
        assert!(values(&text).is_empty());
        assert!(text.contains("#   not set: job 2 exited with status 3"));
        assert!(text.contains("#   coll_rdma_barrier_radix: at np=2"));
    }
}
