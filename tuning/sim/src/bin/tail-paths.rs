//! Prints issue 36's tail study (`coll_rdma_sim::tail_paths`): a 64 KiB
//! bcast's sampled latency under loss, mean, median and p99, with the
//! tail NACK off (before) and on, and the repair paths its slowest bcasts
//! ended with; a markdown table for docs/rmcast-tail.md.
//!
//! ```text
//! tail-paths [--calibrations tuning/sim/calibrations] [--samples 2000] [--piece 1400] [--bytes 65536]
//! ```
//!
//! The calibration is the scale study's machine (`infiniband-2004.conf`
//! with `this-vm-shm.conf` on top), one rank per node; `--piece` sets the
//! bytes per piece (1400 is udp's).

use std::path::PathBuf;
use std::process::ExitCode;

use coll_rdma_sim::tail_paths::{self, Path, Rules, SLOW_SHARE};
use coll_rdma_sim::{Calibration, Ranks};

const USAGE: &str = "usage: tail-paths [--calibrations DIR] [--samples N] [--piece BYTES] [--bytes BYTES]";

struct Args {
    calibrations: PathBuf,
    samples: usize,
    piece: usize,
    bytes: usize,
}

fn parse(argv: &[String]) -> Result<Args, String> {
    let mut args = Args { calibrations: PathBuf::from("tuning/sim/calibrations"), samples: 2000, piece: 1400, bytes: 65536 };
    for pair in argv.chunks(2) {
        let [name, value] = pair else { return Err(format!("{} needs a value", pair[0])) };
        let number = || value.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| format!("{name}: `{value}` is not a positive whole number"));
        match name.as_str() {
            "--calibrations" => args.calibrations = PathBuf::from(value),
            "--samples" => args.samples = number()?,
            "--piece" => args.piece = number()?,
            "--bytes" => args.bytes = number()?,
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(args)
}

fn ms(ns: f64) -> String {
    if ns >= 1e6 { format!("{:.2} ms", ns / 1e6) } else { format!("{:.1} µs", ns / 1e3) }
}

fn paths(counts: &[(Path, usize)]) -> String {
    let total: usize = counts.iter().map(|c| c.1).sum();
    let parts: Vec<String> =
        counts.iter().filter(|c| c.1 > 0).map(|(path, n)| format!("{} {:.0} %", path.name(), 100.0 * *n as f64 / total.max(1) as f64)).collect();
    parts.join(", ")
}

fn run(args: &Args) -> Result<(), String> {
    let dir = |name: &str| args.calibrations.join(name).display().to_string();
    let mut machine = Calibration::from_files(&[dir("infiniband-2004.conf"), dir("this-vm-shm.conf")])?;
    machine.rmcast.fragment_bytes = args.piece;
    println!(
        "{} samples of a {}-byte bcast in {}-byte pieces per row; paths of the slowest {:.0} %.\n",
        args.samples,
        args.bytes,
        args.piece,
        SLOW_SHARE * 100.0
    );
    println!("| ranks | loss | NACKs and repairs lost too | tail NACK | loss-free | median | mean | p99 | mean / loss-free | paths of the slowest bcasts |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (ranks, loss) in [(4, 0.05), (4, 1e-3), (1024, 0.05), (1024, 1e-3)] {
        let mut lossy = machine;
        lossy.multicast.loss = loss;
        let placed = Ranks::new(ranks, 1, &lossy);
        for control_loss in [true, false] {
            for tail_nack in [false, true] {
                let rules = Rules::component(&placed, loss, control_loss, tail_nack);
                let seed = 36 + ranks as u64;
                let study = tail_paths::study(&placed, args.bytes, &rules, args.samples, seed).ok_or("nothing to send")?;
                println!(
                    "| {ranks} | {loss} | {} | {} | {} | {} | {} | {} | {:.2}x | {} |",
                    if control_loss { "yes" } else { "no" },
                    if tail_nack { "on" } else { "off (before)" },
                    ms(study.lossless_ns),
                    ms(study.median_ns),
                    ms(study.mean_ns),
                    ms(study.p99_ns),
                    study.mean_ns / study.lossless_ns,
                    paths(&study.slow_paths)
                );
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match parse(&argv).and_then(|args| run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("tail-paths: {why}\n{USAGE}");
            ExitCode::FAILURE
        }
    }
}
