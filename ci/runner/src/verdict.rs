//! Whether a finished run ended as its case expects (ok, fail, refused),
//! worded as ci/mpi/run.sh words it. Invariant: reads only the run's logs
//! (DIR/mpirun.log, DIR/out/*/rank.*/std*) and its status.

use std::path::{Path, PathBuf};

use regex::Regex;

use crate::table::Expect;

/// DIR/out/*/rank.* directories, sorted (one per rank that started).
pub fn rank_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut ranks: Vec<PathBuf> = std::fs::read_dir(dir.join("out"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|job| std::fs::read_dir(job.path()).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("rank.")))
        .collect();
    ranks.sort();
    ranks
}

/// mpirun's output, then each rank's stderr and stdout (run.sh's all.log).
pub fn all_output(dir: &Path, ranks: &[PathBuf]) -> String {
    let mut all = std::fs::read_to_string(dir.join("mpirun.log")).unwrap_or_default();
    for rank in ranks {
        for stream in ["stderr", "stdout"] {
            all.push_str(&std::fs::read_to_string(rank.join(stream)).unwrap_or_default());
        }
    }
    all
}

/// Every rank's stdout, one after the other.
fn rank_stdout(ranks: &[PathBuf]) -> String {
    ranks.iter().map(|r| std::fs::read_to_string(r.join("stdout")).unwrap_or_default()).collect()
}

/// The reasons the run (status RC, NP ranks) did not end as EXPECT says.
pub fn judge(expect: Expect, rc: i32, np: u32, dir: &Path, ranks: &[PathBuf], all_log: &str) -> Vec<String> {
    let mut why = Vec::new();
    let stdout = rank_stdout(ranks);
    let fail_lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL:")).collect();
    match expect {
        Expect::Ok => {
            if ![0, 124, 137].contains(&rc) {
                why.push(format!("mpirun exited with status {rc}"));
            }
            let mpirun_log = std::fs::read_to_string(dir.join("mpirun.log")).unwrap_or_default();
            let lines: Vec<&str> = mpirun_log.lines().collect();
            if let Some(at) = lines.iter().position(|l| l.contains("unable to launch the specified application")) {
                let said: Vec<String> = lines[at..(at + 7).min(lines.len())]
                    .iter()
                    .filter(|l| l.contains("Executable:") || l.contains("Node:"))
                    .map(|l| l.split(' ').filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" "))
                    .collect();
                why.push(format!("mpirun could not start the program: {}", said.join(" ")));
            }
            if ranks.len() != np as usize {
                why.push(format!("output of {} rank(s) found, expected {np}", ranks.len()));
            }
            if !fail_lines.is_empty() {
                why.push(format!("program reported failures:\n{}", fail_lines[..fail_lines.len().min(5)].join("\n")));
            }
            let clean = Regex::new("^result: rank [0-9]* failures 0 ").expect("a valid pattern");
            let clean_ranks = stdout.lines().filter(|l| clean.is_match(l)).count();
            if clean_ranks != np as usize {
                why.push(format!("{clean_ranks} of {np} rank(s) printed a clean result line"));
            }
        }
        Expect::Refused => {
            if rc == 0 {
                why.push("the job ran although it should have been refused".into());
            }
            let crash = Regex::new("Segmentation fault|Signal: |Signal code").expect("a valid pattern");
            if all_log.lines().any(|l| crash.is_match(l)) {
                let shown = Regex::new(r"Signal|\[ *[0-9]+\]").expect("a valid pattern");
                let lines: Vec<&str> = all_log.lines().filter(|l| shown.is_match(l)).take(8).collect();
                why.push(format!("a process crashed instead of failing cleanly:\n{}", lines.join("\n")));
            }
        }
        Expect::Fail => {
            if rc == 0 {
                why.push("the program passed although its self-test broke it (skipped barriers, corrupted bytes)".into());
            }
            if fail_lines.is_empty() {
                why.push("no FAIL line although the self-test broke the program (skipped barriers, corrupted bytes)".into());
            }
        }
    }
    why
}
