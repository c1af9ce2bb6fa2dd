//! coll-rdma-tune: measures, on the machines of an allocation and through
//! mpirun, short sweeps of the coll rdma parameters that matter on the
//! transport in use, and writes an Open MPI parameter file
//! (`mca-params.conf` syntax) with a comment per value saying what was
//! measured. A value goes in only when it is clearly better than the
//! default and nowhere slower (rule.rs), so the file never makes a
//! collective slower than the defaults did in the same measurement.
//!
//! ```text
//! coll-rdma-tune [--np 2[,4...]] [--mpirun "mpirun OPTIONS"] [--hosts H1,H2...]
//!                [--component-path PATH] [--bench PATH] [--output FILE]
//!                [--smoke | --quick | --full] [--rounds N] [--sample-ms MS]
//!                [--only PARAM,...] [--margin F] [--tolerance F] [--max-spread F]
//!                [--log-dir DIR] [--timeout S] [--retries N] [--accept-best]
//! ```
//!
//! Measurement: `bench/coll_pairs.c`, one job per value (the default first)
//! started together; the jobs take turns in short samples, so each pair of
//! samples sees the same state of the machine (see ci/bench-pairs.sh).

mod conf;
mod plan;
mod rule;
mod runner;
mod samples;
mod stats;
mod together;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use conf::{CandidateReport, Header, ParamReport};
use plan::{Collective, Mode, NotSwept, Sizes, Sweep, Transport};
use rule::{baseline_reproduces, choose, judge, nowhere_slower, Decision, Point, Thresholds};
use runner::{current_values, run_sweep, CurrentValue, Job, Launch};

const USAGE: &str = "usage: coll-rdma-tune [--np 2[,4...]] [--mpirun \"mpirun OPTIONS\"] [--hosts H1,H2...]
                      [--component-path PATH] [--bench PATH] [--output FILE]
                      [--smoke | --quick | --full] [--rounds N] [--sample-ms MS]
                      [--only PARAM,...] [--margin F] [--tolerance F] [--max-spread F]
                      [--log-dir DIR] [--timeout S] [--retries N] [--accept-best]
  --np             process counts to measure at (default 2); a value must pass the rule
                   at every one
  --mpirun         the mpirun command with its options (default \"mpirun\"), split at blanks
  --hosts          adds --host H1,H2... to it
  --component-path mca_base_component_path of every job and of ompi_info (default: Open
                   MPI's own search path, e.g. an installed component)
  --bench          the coll_pairs program built from bench/coll_pairs.c (default
                   build/bench/coll_pairs); every host must see it at this path
  --output         the parameter file to write (default mca-params.conf)
  --smoke          two sweeps, few pairs: checks that the tuner and its file work
  --quick          (default) the parameters that matter most, a few candidates each
  --full           every parameter the transport uses, more candidates, sizes, pairs
  --rounds, --sample-ms  pairs per size and sample length (defaults per mode)
  --only           sweep only these parameters (names with or without coll_rdma_)
  --margin         a value must be this much faster overall (default 0.10)
  --tolerance      and at no size more than this much slower (default 0.03)
  --max-spread     a size where the per-pair ratios' quartiles are further apart than
                   this is too noisy to tell: no value is set (default 0.3)
  --log-dir        the jobs' output and coll rdma's events (default: beside the output file,
                   tune-logs/; with --hosts a directory every host sees)
  --timeout        seconds one sweep may take (default 600)
  --retries        run a sweep again, up to N times, while the default measured as the
                   first and the last job disagree (default 0; --full: 2)
  --accept-best    TESTING ONLY: set the best candidate even where the rule keeps the
                   default (marked so in the file)";

struct Options {
    nps: Vec<usize>,
    launch: Launch,
    output: PathBuf,
    mode: Mode,
    only: Vec<String>,
    thresholds: Thresholds,
    accept_best: bool,
    hosts: Option<String>,
    /// a sweep whose control does not hold is run again up to this many times
    retries: usize,
}

fn value<'a>(option: &str, args: &mut impl Iterator<Item = &'a String>) -> Result<&'a String, String> {
    args.next().ok_or_else(|| format!("{option} needs a value"))
}

fn parsed<T: std::str::FromStr>(option: &str, text: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("{option}: '{text}' is not a valid value"))
}

fn parse_options(argv: &[String]) -> Result<Options, String> {
    let mut nps = vec![2];
    let mut mpirun = vec!["mpirun".to_string()];
    let mut hosts = None;
    let mut component_path = String::new();
    let mut bench = PathBuf::from("build/bench/coll_pairs");
    let mut output = PathBuf::from("mca-params.conf");
    let mut mode = Mode::Quick;
    let (mut rounds, mut sample_ms) = (None, None);
    let mut only = Vec::new();
    let mut thresholds = Thresholds::default();
    let mut log_dir = None;
    let mut timeout_s = 600;
    let mut accept_best = false;
    let mut retries = None;
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        let option = arg.as_str();
        match option {
            "--np" => {
                nps = value(option, &mut args)?.split(',').map(|n| parsed::<usize>(option, n)).collect::<Result<_, _>>()?;
                if nps.iter().any(|n| *n < 2) {
                    return Err("--np: coll_pairs needs 2 ranks or more".into());
                }
            }
            "--mpirun" => mpirun = value(option, &mut args)?.split_whitespace().map(String::from).collect(),
            "--hosts" => hosts = Some(value(option, &mut args)?.clone()),
            "--component-path" => component_path = value(option, &mut args)?.clone(),
            "--bench" => bench = PathBuf::from(value(option, &mut args)?),
            "--output" => output = PathBuf::from(value(option, &mut args)?),
            "--smoke" => mode = Mode::Smoke,
            "--quick" => mode = Mode::Quick,
            "--full" => mode = Mode::Full,
            "--rounds" => rounds = Some(parsed::<usize>(option, value(option, &mut args)?)?),
            "--sample-ms" => sample_ms = Some(parsed::<f64>(option, value(option, &mut args)?)?),
            "--only" => {
                only = value(option, &mut args)?
                    .split(',')
                    .map(|p| p.trim().trim_start_matches("coll_rdma_").to_string())
                    .collect()
            }
            "--margin" => thresholds.margin = parsed(option, value(option, &mut args)?)?,
            "--tolerance" => thresholds.tolerance = parsed(option, value(option, &mut args)?)?,
            "--max-spread" => thresholds.max_spread = parsed(option, value(option, &mut args)?)?,
            "--log-dir" => log_dir = Some(PathBuf::from(value(option, &mut args)?)),
            "--timeout" => timeout_s = parsed(option, value(option, &mut args)?)?,
            "--accept-best" => accept_best = true,
            "--retries" => retries = Some(parsed::<usize>(option, value(option, &mut args)?)?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    if mpirun.is_empty() {
        return Err("--mpirun: empty command".into());
    }
    if let Some(h) = &hosts {
        mpirun.extend(["--host".to_string(), h.clone()]);
    }
    let (default_rounds, default_ms) = match mode {
        Mode::Smoke => (6, 5.0),
        Mode::Quick => (15, 10.0),
        Mode::Full => (31, 20.0),
    };
    let rounds = rounds.unwrap_or(default_rounds);
    if rounds < thresholds.min_pairs {
        return Err(format!("--rounds: at least {} (the rule needs that many pairs)", thresholds.min_pairs));
    }
    let log_dir =
        log_dir.unwrap_or_else(|| output.parent().unwrap_or(Path::new(".")).join("tune-logs"));
    // on one host the tuner places the ranks, unless the command does
    let places_itself = mpirun.iter().any(|w| w.starts_with("--bind-to") || w.starts_with("--map-by"));
    let local_cores = (hosts.is_none() && !places_itself)
        .then(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    Ok(Options {
        nps,
        launch: Launch {
            mpirun,
            component_path,
            bench,
            log_dir,
            rounds,
            sample_ms: sample_ms.unwrap_or(default_ms),
            timeout_s,
            local_cores,
        },
        output,
        mode,
        only,
        thresholds,
        accept_best,
        hosts,
        retries: retries.unwrap_or(if mode == Mode::Full { 2 } else { 0 }),
    })
}

/// The transport coll rdma picks at `np`, and the choices its defaults make
/// there: one short barrier sweep of two default jobs, read from their
/// events.
fn probe_transport(launch: &Launch, np: usize) -> Result<(Transport, String), String> {
    let probe = Sweep { param: "probe", collective: Collective::Barrier, sizes: Sizes::NONE, candidates: vec![] };
    let quick = Launch { rounds: 1, sample_ms: 1.0, ..launch.clone() };
    let jobs = [Job { name: "a".into(), mca: vec![] }, Job { name: "b".into(), mca: vec![] }];
    let run = run_sweep(&quick, np, &probe, &jobs)?;
    let served = run.served.first().ok_or("no job ran")?;
    let name = served.transport.clone().ok_or("no comm_ready event for MPI_COMM_WORLD")?;
    Ok((Transport::from_name(&name), served.choices.clone().unwrap_or_default()))
}

/// Everything measured for one parameter, over every process count.
struct Gathered {
    sweep: Sweep,
    current: CurrentValue,
    /// candidate value -> its points (every np it was measured at)
    points: BTreeMap<i64, Vec<Point>>,
    /// the default's second job (the last) against its first
    control: Vec<Point>,
    /// the control did not hold: no decision (not a failure of the tool)
    unsteady: Option<String>,
    failure: Option<String>,
}

/// Points of job `job` against job 0 at every size of `sweep`.
fn points_of(result: &runner::SweepRun, sweep: &Sweep, np: usize, job: usize) -> Vec<Point> {
    sweep
        .sizes
        .list()
        .into_iter()
        .filter_map(|size| Some(Point { np, size, comparison: result.samples.compare(0, job, size, FLOOR_DRIFT)? }))
        .collect()
}

fn command_line(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn run(options: &Options) -> Result<usize, String> {
    let launch = &options.launch;
    if !launch.bench.is_file() {
        return Err(format!(
            "{} is missing: build it with mpicc -O2 -o {} bench/coll_pairs.c (make tune does)",
            launch.bench.display(),
            launch.bench.display()
        ));
    }
    let current = current_values(launch)?;
    let from_file: Vec<&String> =
        current.iter().filter(|(_, v)| v.source.starts_with("file")).map(|(n, _)| n).collect();
    if !from_file.is_empty() {
        println!("note: these values come from a parameter file and are the baseline here: {from_file:?}");
    }
    let mut gathered: BTreeMap<&'static str, Gathered> = BTreeMap::new();
    let mut order = Vec::new();
    let mut not_swept: Vec<NotSwept> = Vec::new();
    let mut transports = Vec::new();
    for &np in &options.nps {
        let (transport, choices) =
            probe_transport(launch, np).map_err(|e| format!("np={np}: probing the transport: {e}"))?;
        println!("== np={np}: coll rdma runs over {transport} ({choices})");
        transports.push(format!("{transport} (np={np}; with the defaults: {choices})"));
        let plan = plan::plan(&transport, np, options.mode);
        for n in plan.not_swept {
            if !not_swept.iter().any(|m| m.param == n.param) && wanted(options, n.param) {
                not_swept.push(n);
            }
        }
        for sweep in plan.sweeps.into_iter().filter(|s| wanted(options, s.param)) {
            let name = sweep.full_name();
            let Some(now) = current.get(&name) else {
                not_swept.push(NotSwept { param: sweep.param, why: "this build of coll rdma has no such parameter".into() });
                continue;
            };
            let candidates: Vec<i64> =
                sweep.candidates.iter().copied().filter(|c| now.value.parse::<i64>() != Ok(*c)).collect();
            if candidates.is_empty() {
                continue;
            }
            let mut jobs = vec![Job { name: "default".into(), mca: vec![] }];
            jobs.extend(candidates.iter().map(|c| Job { name: c.to_string(), mca: vec![(name.clone(), c.to_string())] }));
            // the default again, last: the control against position effects
            jobs.push(Job { name: "default-again".into(), mca: vec![] });
            println!(
                "== np={np} {name}: default {} vs {:?}, {} at {:?} B, {} rounds of {} ms samples",
                now.value,
                candidates,
                sweep.collective.name(),
                sweep.sizes.list(),
                launch.rounds,
                launch.sample_ms
            );
            let entry = gathered.entry(sweep.param).or_insert_with(|| {
                order.push(sweep.param);
                Gathered {
                    sweep: sweep.clone(),
                    current: now.clone(),
                    points: BTreeMap::new(),
                    control: Vec::new(),
                    unsteady: None,
                    failure: None,
                }
            });
            let mut attempt = 0;
            let outcome = loop {
                let run = run_sweep(launch, np, &sweep, &jobs);
                if let Ok(result) = &run
                    && attempt < options.retries
                    && let Err(why) = baseline_reproduces(&points_of(result, &sweep, np, candidates.len() + 1), &options.thresholds)
                {
                    attempt += 1;
                    println!("   UNSTEADY ({why}): measuring again, attempt {} of {}", attempt + 1, options.retries + 1);
                    continue;
                }
                break run;
            };
            match outcome {
                Err(why) => {
                    println!("   FAILED: {why}");
                    entry.failure.get_or_insert(format!("np={np}: {why}"));
                }
                Ok(result) => {
                    let control = points_of(&result, &sweep, np, candidates.len() + 1);
                    println!("   {:>8}: {}", "default", brief(&control));
                    if let Err(why) = baseline_reproduces(&control, &options.thresholds) {
                        println!("   UNSTEADY: {why}");
                        // a test run still wants values to check in the file
                        if !options.accept_best {
                            entry.unsteady.get_or_insert(format!("np={np}: {why}"));
                        }
                    }
                    entry.control.extend(control);
                    for (index, value) in candidates.iter().enumerate() {
                        let points = points_of(&result, &sweep, np, index + 1);
                        println!("   {value:>8}: {}", brief(&points));
                        if points.len() != sweep.sizes.list().len() {
                            entry.failure.get_or_insert(format!("np={np}: candidate {value} has no pairs at some size"));
                        }
                        entry.points.entry(*value).or_default().extend(points);
                    }
                }
            }
        }
    }
    let mut reports = Vec::new();
    for param in order {
        let g = &gathered[param];
        let candidates: Vec<CandidateReport> = g
            .points
            .iter()
            .map(|(value, points)| CandidateReport {
                value: *value,
                points: points.clone(),
                judgement: judge(points, &options.thresholds),
            })
            .collect();
        let judgements: Vec<_> = candidates.iter().map(|c| c.judgement.clone()).collect();
        let mut decision = match &g.unsteady {
            Some(why) => Decision::Keep { why: why.clone() },
            None => choose(&judgements),
        };
        let mut forced = false;
        if options.accept_best && matches!(decision, Decision::Keep { .. }) {
            if let Some((index, _)) = judgements
                .iter()
                .enumerate()
                .filter_map(|(i, j)| j.overall.map(|o| (i, o)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
            {
                decision = Decision::Set { index };
                forced = true;
            }
        }
        reports.push(ParamReport {
            name: g.sweep.full_name(),
            collective: g.sweep.collective.name(),
            default: g.current.value.clone(),
            default_source: g.current.source.clone(),
            candidates,
            decision,
            failure: g.failure.clone(),
            forced,
            together: None,
            control: g.control.clone(),
        });
    }
    if options.accept_best {
        println!("== values not measured together (--accept-best: a test, not a tuning)");
    } else {
        check_together(options, &gathered, &mut reports);
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let header = Header {
        host: match &options.hosts {
            Some(h) => format!("{h} (tuned from {host})"),
            None => host,
        },
        date: command_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]).unwrap_or_else(|| "an unknown date".into()),
        nps: options.nps.clone(),
        transport: transports.join(", "),
        launch: launch.describe(options.nps[0]),
        mode: format!("{:?}", options.mode).to_lowercase(),
        rounds: launch.rounds,
        sample_ms: launch.sample_ms,
        thresholds: options.thresholds,
    };
    let text = conf::render(&header, &reports, &not_swept);
    write_atomically(&options.output, &text)?;
    println!("== wrote {}:", options.output.display());
    for r in &reports {
        match (r.chosen(), &r.failure) {
            (Some(v), _) => println!("   {} = {v}{}", r.name, if r.forced { "  (TEST: --accept-best)" } else { "" }),
            (None, Some(f)) => println!("   {}: not set, measuring failed: {f}", r.name),
            (None, None) => match &r.decision {
                Decision::Keep { why } => println!("   {}: not set (default {} stays): {why}", r.name, r.default),
                Decision::Set { .. } => println!("   {}: not set (default {} stays)", r.name, r.default),
            },
        }
    }
    Ok(reports.iter().filter(|r| r.failure.is_some()).count())
}

/// Measures the values chosen for each collective together against the
/// defaults (together.rs); where the combination is slower somewhere, or
/// cannot be measured, none of them is set.
fn check_together(options: &Options, gathered: &BTreeMap<&'static str, Gathered>, reports: &mut [ParamReport]) {
    let chosen: Vec<(&Sweep, i64)> = reports
        .iter()
        .filter_map(|r| Some((&gathered[r.name.trim_start_matches("coll_rdma_")].sweep, r.chosen()?)))
        .collect();
    for combination in together::combinations(&chosen) {
        let what = combination.describe();
        println!("== together for {}: {what} against the defaults", combination.collective.name());
        let mut points = Vec::new();
        let mut outcome = Ok(());
        for &np in &options.nps {
            match together::measure(&options.launch, np, &combination) {
                Ok((p, control)) => {
                    println!("   {:>8}: {}", "default", brief(&control));
                    if let Err(why) = baseline_reproduces(&control, &options.thresholds) {
                        outcome = Err(why);
                    }
                    points.extend(p)
                }
                Err(why) => outcome = Err(format!("could not be measured: {why}")),
            }
        }
        let medians: Vec<String> = points
            .iter()
            .map(|p| format!("{} {:.3}[{:.2},{:.2}]", p.label(), p.comparison.ratio.median, p.comparison.ratio.q1, p.comparison.ratio.q3))
            .collect();
        println!("   {}", medians.join("  "));
        let outcome = outcome.and_then(|()| nowhere_slower(&points, &options.thresholds));
        let note = match &outcome {
            Ok(()) => format!("with {what} together against the defaults: nowhere slower ({})", medians.join(", ")),
            Err(why) => format!("with {what} together against the defaults: {why}; none of them is set"),
        };
        println!("   {}", if outcome.is_ok() { "kept" } else { "DROPPED" });
        for (name, _) in &combination.settings {
            if let Some(report) = reports.iter_mut().find(|r| &r.name == name) {
                report.together = Some(note.clone());
                if let Err(why) = &outcome {
                    report.decision = Decision::Keep { why: format!("measured together with the other values of {}: {why}", combination.collective.name()) };
                }
            }
        }
    }
}

/// Pairs whose floor before and after differ more than this are left out
/// (as ci/bench-pairs.sh's BENCH_FLOOR_DRIFT default).
pub const FLOOR_DRIFT: f64 = 1.5;

/// `SIZE B median[q1,q3]` per point, for the progress lines.
fn brief(points: &[Point]) -> String {
    let parts: Vec<String> = points
        .iter()
        .map(|p| format!("{}B {:.3}[{:.2},{:.2}]", p.size, p.comparison.ratio.median, p.comparison.ratio.q1, p.comparison.ratio.q3))
        .collect();
    parts.join("  ")
}

fn wanted(options: &Options, param: &str) -> bool {
    options.only.is_empty() || options.only.iter().any(|o| o == param)
}

fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let temporary = path.with_extension("conf.tmp");
    std::fs::write(&temporary, text).map_err(|e| format!("cannot write {}: {e}", temporary.display()))?;
    std::fs::rename(&temporary, path).map_err(|e| format!("cannot rename to {}: {e}", path.display()))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse_options(&argv) {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("coll-rdma-tune: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failed) => {
            eprintln!("coll-rdma-tune: {failed} sweep(s) failed (see the file's comments and the logs); their parameters were not set");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("coll-rdma-tune: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_take_modes_lists_and_hosts() {
        let o = parse_options(&args("--np 2,4 --smoke --hosts a,b --only coll_rdma_bcast_window,barrier_radix")).unwrap();
        assert_eq!(o.nps, vec![2, 4]);
        assert_eq!(o.mode, Mode::Smoke);
        assert_eq!(o.launch.mpirun, args("mpirun --host a,b"));
        assert_eq!(o.launch.local_cores, None, "hosts given: the placement is the user's");
        assert_eq!(o.launch.placement(4), &[] as &[&str]);
        assert_eq!(o.only, vec!["bcast_window", "barrier_radix"]);
        assert_eq!(o.launch.rounds, 6);
        assert_eq!(o.retries, 0);
        assert_eq!(parse_options(&args("--full")).unwrap().retries, 2);
        assert_eq!(parse_options(&args("--full --retries 0")).unwrap().retries, 0);
        assert_eq!(o.launch.log_dir, PathBuf::from("tune-logs"));
    }

    #[test]
    fn bad_options_are_refused() {
        assert!(parse_options(&args("--np 1")).is_err());
        assert!(parse_options(&args("--rounds 3")).is_err());
        assert!(parse_options(&args("--frobnicate")).is_err());
        assert!(parse_options(&args("--np")).is_err());
        let o = parse_options(&args("--output build/x.conf")).unwrap();
        assert_eq!(o.launch.log_dir, PathBuf::from("build/tune-logs"));
        assert!(o.launch.local_cores.is_some());
        let o = parse_options(&["--mpirun".to_string(), "mpirun --bind-to socket".to_string()]).unwrap();
        assert_eq!(o.launch.local_cores, None, "the command places the ranks itself");
    }
}
