//! What the allreduce cost model predicts, per tree degree, for one
//! communicator size and message length: the numbers `ci/bench.sh` puts
//! next to the measured latencies.
//!
//! ```text
//! coll-rdma-model --ranks 4 --bytes 65536 [--degrees 1-7 | 1,2,4]
//!                 [--segment BYTES | --no-segment]
//!                 [--latency-ns N] [--transfer-ps-per-byte N]
//!                 [--combine-ps-per-byte N] [--put-gap-ns N]
//! ```
//!
//! The model is `AllreduceModel::SHARED_MEMORY`; the options override its
//! fields with the units of the component's MCA parameters
//! (`coll_rdma_reduction_model_*`, `coll_rdma_allreduce_segment_size`).
//! Output, one fact per line (`#` lines are comments):
//!
//! ```text
//! degree <k> <predicted ns>       one per degree asked for
//! exchange <predicted ns>         the exchange variant for the same message
//! best <k> <predicted ns> <why>   the best degree for exactly this size
//! ```

use std::process::ExitCode;

use tuning::{choose_allreduce_degree, AllreduceModel};

struct Args {
    ranks: usize,
    bytes: usize,
    degrees: Vec<usize>,
    model: AllreduceModel,
}

const USAGE: &str = "usage: coll-rdma-model --ranks N --bytes B [--degrees 1-7|1,2,4] \
[--segment BYTES|--no-segment] [--latency-ns N] [--transfer-ps-per-byte N] \
[--combine-ps-per-byte N] [--put-gap-ns N]";

fn number(option: &str, value: Option<&String>) -> Result<usize, String> {
    let value = value.ok_or_else(|| format!("{option} needs a value"))?;
    value.parse::<usize>().map_err(|_| format!("{option}: '{value}' is not a non-negative integer"))
}

/// "1-7", "1,2,4" or a mix ("1-3,7").
fn degree_list(text: &str) -> Result<Vec<usize>, String> {
    let mut degrees = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("--degrees: '{part}' is not a degree or a range a-b");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (a.parse::<usize>().map_err(|_| bad())?, b.parse::<usize>().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                degrees.extend(a..=b);
            }
            None => degrees.push(part.parse::<usize>().map_err(|_| bad())?),
        }
    }
    if degrees.is_empty() || degrees.contains(&0) {
        return Err("--degrees: give degrees of at least 1".to_string());
    }
    Ok(degrees)
}

fn parse(argv: &[String]) -> Result<Args, String> {
    let mut ranks = None;
    let mut bytes = None;
    let mut degrees = (1..=7).collect::<Vec<_>>();
    let mut model = AllreduceModel::SHARED_MEMORY;
    let mut i = 0;
    while i < argv.len() {
        let option = argv[i].as_str();
        let value = argv.get(i + 1);
        match option {
            "--ranks" => ranks = Some(number(option, value)?),
            "--bytes" => bytes = Some(number(option, value)?),
            "--degrees" => degrees = degree_list(value.ok_or("--degrees needs a value")?)?,
            "--segment" => model.segment_bytes = Some(number(option, value)?),
            "--no-segment" => {
                model.segment_bytes = None;
                i += 1;
                continue;
            }
            "--latency-ns" => model.message_latency_ns = number(option, value)? as f64,
            "--transfer-ps-per-byte" => model.transfer_ns_per_byte = number(option, value)? as f64 / 1000.0,
            "--combine-ps-per-byte" => model.reduce_ns_per_byte = number(option, value)? as f64 / 1000.0,
            "--put-gap-ns" => model.put_gap_ns = number(option, value)? as f64,
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown option '{option}'")),
        }
        i += 2;
    }
    let ranks = ranks.ok_or("--ranks is required")?;
    let bytes = bytes.ok_or("--bytes is required")?;
    if ranks == 0 {
        return Err("--ranks must be at least 1".to_string());
    }
    Ok(Args { ranks, bytes, degrees, model })
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&argv) {
        Ok(args) => args,
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("coll-rdma-model: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let m = &args.model;
    let segment = match m.segment_bytes {
        Some(s) => format!("segment {s} bytes"),
        None => "no segmentation".to_string(),
    };
    println!(
        "# coll rdma allreduce model: {} ranks, {} bytes, {segment}; latency {} ns, transfer {} ps/B, \
         combine {} ps/B, put gap {} ns",
        args.ranks,
        args.bytes,
        m.message_latency_ns,
        m.transfer_ns_per_byte * 1000.0,
        m.reduce_ns_per_byte * 1000.0,
        m.put_gap_ns
    );
    for &degree in &args.degrees {
        println!("degree {degree} {:.0}", m.predict_tree_ns(args.ranks, degree, args.bytes));
    }
    println!("exchange {:.0}", m.predict_exchange_ns(args.ranks, args.bytes));
    let best = choose_allreduce_degree(args.ranks, args.bytes, m);
    println!("best {} {:.0} {}", best.degree, best.predicted_ns, best.reason);
    ExitCode::SUCCESS
}
