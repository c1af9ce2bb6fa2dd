//! fbcast: sends a file or a directory tree from one rank to every other
//! rank of an MPI job (coll_rdma_bcast_file), with a progress line on the
//! root and a summary per host. `fbcast --help` for the options.

mod args;
mod launch;
mod progress;
mod summary;

use args::{Launch, Parsed};
use coll_rdma_fbcast::{Comm, ErrorCode, Options, Report, bcast_path, cleanup, host, mpi};
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;
use summary::{OUTCOME_BYTES, RankOutcome};

const EXIT_USAGE: u8 = 64;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match args::parse(&argv) {
        Ok(Parsed::Run(a)) => a,
        Ok(Parsed::Help) => {
            println!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("fbcast: {e}\n{}", args::USAGE);
            return ExitCode::from(EXIT_USAGE);
        }
    };
    // --hosts/--hostfile always launch (the ranks' arguments never carry
    // them), even from a script that runs under mpirun or Slurm itself
    if args.launch != Launch::Rank {
        let why = launch::exec_mpirun(&args.launch, &args.mpirun_args, &argv);
        eprintln!("fbcast: {why}");
        return ExitCode::from(EXIT_USAGE);
    }
    if !launch::started_by_mpirun() {
        eprintln!("fbcast: not started by mpirun: run it under mpirun (one rank per host) or give --hosts or --hostfile");
        return ExitCode::from(EXIT_USAGE);
    }
    run_rank(&args)
}

fn run_rank(args: &args::Args) -> ExitCode {
    if let Err(e) = mpi::init() {
        eprintln!("fbcast: MPI_Init failed (code {})", e.0);
        return ExitCode::from(ErrorCode::Mpi as u8);
    }
    cleanup::install_signal_handlers();
    let comm = Comm::world();
    // A failed collective (a peer died) then returns ErrorCode::Mpi, and the
    // temporary is removed on the way out instead of staying behind.
    let _ = comm.set_errors_return();
    let rank = comm.rank().unwrap_or(-1);
    let size = comm.size().unwrap_or(0);
    if args.root < 0 || args.root >= size {
        if rank == 0 {
            eprintln!("fbcast: --root {} is not a rank of this job (0..{})", args.root, size - 1);
        }
        let _ = mpi::finalize();
        return ExitCode::from(EXIT_USAGE);
    }
    let hostname = host::name();
    let is_root = rank == args.root;
    // A bad DST pattern makes this rank fail inside the transfer (no DST),
    // so that every rank still returns the same code.
    let dst = match args::expand_destination(&args.dst, &hostname, rank) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("fbcast: rank {rank}: {e}");
            None
        }
    };
    let options = Options {
        policy: args.policy,
        chunk_bytes: args.chunk_bytes,
        fsync: args.fsync,
        recursive: true,
    };
    let show_progress = is_root && !args.quiet && args.progress.unwrap_or_else(|| std::io::stderr().is_terminal());
    let mut line = progress::ProgressLine::new();
    let mut on_progress = |p: &coll_rdma_fbcast::Progress| line.update(p);
    let start = Instant::now();
    let report = bcast_path(
        &comm,
        args.root,
        Some(&args.src),
        dst.as_deref().map(Path::new),
        &options,
        if show_progress { Some(&mut on_progress) } else { None },
    );
    let elapsed = start.elapsed();
    line.finish();

    let outcome = RankOutcome { rank, host: hostname, is_root, report: report.local.clone() };
    let gathered = if report.result == Err(ErrorCode::Mpi) { None } else { comm.gather_bytes(&outcome.encode(), args.root).ok() };
    if is_root {
        print_summary(args, &report, elapsed.as_secs_f64(), gathered.as_deref());
    }
    // mpirun ends the job when the first rank exits with a non-zero
    // status: the others wait until the root has printed its summary.
    if report.result != Err(ErrorCode::Mpi) {
        let _ = comm.barrier();
    }
    let _ = mpi::finalize();
    match report.result {
        Ok(()) => ExitCode::SUCCESS,
        Err(code) => ExitCode::from(code as u8),
    }
}

fn print_summary(args: &args::Args, report: &Report, seconds: f64, gathered: Option<&[u8]>) {
    let outcomes: Vec<RankOutcome> = gathered
        .map(|all| all.chunks_exact(OUTCOME_BYTES).filter_map(RankOutcome::decode).collect())
        .unwrap_or_default();
    let sent = report.local.bytes_sent;
    let status = match report.result {
        Ok(()) => "done".to_string(),
        Err(code) => format!("FAILED ({}: {})", code as i32, code.describe()),
    };
    let head = format!(
        "fbcast: {} -> {}: {status}, {} sent in {seconds:.2} s ({}/s)",
        args.src.display(),
        args.dst,
        summary::bytes(sent),
        summary::bytes((sent as f64 / seconds.max(1e-6)) as u64)
    );
    let lines = summary::per_host_lines(&outcomes);
    if report.result.is_ok() {
        if !args.quiet {
            println!("{head}");
            for l in lines {
                println!("{l}");
            }
        }
    } else {
        eprintln!("{head}");
        for l in lines {
            eprintln!("{l}");
        }
    }
}
