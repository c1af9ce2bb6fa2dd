//! `--hosts` / `--hostfile`: start mpirun with one rank per host, running
//! this same program with the other arguments.

use crate::args::Launch;
use std::io::IsTerminal;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Whether this process is a rank of an MPI job (Open MPI's launchers set
/// these for every rank; PMI/PMIx for others).
pub fn started_by_mpirun() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"].iter().any(|v| std::env::var_os(v).is_some())
}

/// The host names a hostfile lists (first word of each line, comments and
/// blank lines left out).
pub fn hostfile_hosts(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The options that select hosts (and their values) removed from `argv`.
pub fn without_launch_options(argv: &[String]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--hosts" | "--hostfile" | "--mpirun-arg" => {
                it.next();
            }
            a if a.starts_with("--hosts=") || a.starts_with("--hostfile=") || a.starts_with("--mpirun-arg=") => {}
            _ => kept.push(arg.clone()),
        }
    }
    kept
}

/// The ranks' arguments: `argv` without the launch options, with
/// `--progress` first when `terminal` (the ranks' stderr is a pipe to
/// mpirun, so they cannot see that the user's is a terminal) and neither
/// progress option was given.
pub fn rank_arguments(argv: &[String], terminal: bool) -> Vec<String> {
    let mut kept = without_launch_options(argv);
    let chosen = kept.iter().any(|a| a == "--progress" || a == "--no-progress" || a == "-q" || a == "--quiet");
    if terminal && !chosen {
        kept.insert(0, "--progress".into());
    }
    kept
}

/// Replaces this process with mpirun (FBCAST_MPIRUN, default `mpirun`);
/// returns only when that fails.
pub fn exec_mpirun(launch: &Launch, mpirun_args: &[String], argv: &[String]) -> String {
    let (host_args, ranks) = match launch {
        Launch::Hosts(hosts) => (vec!["--host".to_string(), hosts.join(",")], hosts.len()),
        Launch::Hostfile(path) => match std::fs::read_to_string(path) {
            Ok(text) => (vec!["--hostfile".to_string(), path.display().to_string()], hostfile_hosts(&text).len()),
            Err(e) => return format!("cannot read {}: {e}", path.display()),
        },
        Launch::Rank => return "internal error: nothing to launch".into(),
    };
    if ranks < 2 {
        return "name at least two hosts (the first sends, the others receive)".into();
    }
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return format!("cannot find this program's path: {e}"),
    };
    let mpirun = std::env::var("FBCAST_MPIRUN").unwrap_or_else(|_| "mpirun".into());
    let err = Command::new(&mpirun)
        .args(&host_args)
        .args(["-np", &ranks.to_string(), "--map-by", "node"])
        .args(mpirun_args)
        .arg(&exe)
        .args(rank_arguments(argv, std::io::stderr().is_terminal()))
        .exec();
    format!("cannot run {mpirun}: {err}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostfile_lines() {
        assert_eq!(hostfile_hosts("# cluster\nnode1 slots=4\n\n  node2\nnode3 # spare\n"), ["node1", "node2", "node3"]);
    }

    #[test]
    fn launch_options_are_not_passed_on() {
        let argv: Vec<String> = ["--hosts", "a,b", "--quiet", "--mpirun-arg", "--oversubscribe", "--hostfile=f", "s", "d"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(without_launch_options(&argv), ["--quiet", "s", "d"]);
        assert_eq!(rank_arguments(&argv, true), ["--quiet", "s", "d"], "quiet wins");
        let plain: Vec<String> = ["--hosts", "a,b", "s"].iter().map(|s| s.to_string()).collect();
        assert_eq!(rank_arguments(&plain, true), ["--progress", "s"]);
        assert_eq!(rank_arguments(&plain, false), ["s"]);
    }
}
