//! A case's first run whose segment creator is killed: the table key
//! `creator_killed_first = { mpirun = [...], args = [...] }`. Before the
//! case's own run, the runner launches the case's program on its ranks
//! with these mpirun options and arguments (one that holds a rank between
//! the settings agreement and the transport setup, such as
//! `coll_rdma_test_setup_pause_s`), waits for a `coll_rdma.*` segment
//! that a rank of this job created to appear in /dev/shm, kills its
//! creator (SIGKILL) and waits for the job to end. The segment is then
//! an orphan; the case's own run must leave it gone (the next job's setup
//! reaps it).
//!
//! Invariants:
//! - only a segment this job made counts: its name carries its creator's
//!   pid (`shm::creator_pid`), which must be one of this job's ranks
//!   (ci/record-pid.sh's pids file), so a second test run on the machine
//!   creating segments meanwhile is never mistaken for it;
//! - the first job always ends: `timeout` bounds it, the runner waits for
//!   it whatever happened;
//! - a failure to hit the window (no segment appeared, or the kill left
//!   nothing behind) is a failure of the case, never a pass.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::launch::{Launcher, RanksRun};
use crate::shm;

/// The first run's mpirun options and program arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct CreatorKilledFirst {
    pub mpirun: Vec<String>,
    pub args: Vec<String>,
}

/// How long a segment of the first job may take to appear (its ranks
/// start under mpirun on a loaded machine).
const APPEAR_WITHIN: Duration = Duration::from_secs(60);
/// The first job's bound: its held rank sleeps, mpirun ends it once it
/// sees the killed one die.
const FIRST_JOB_SECONDS: u64 = 120;

/// The orphan the first run left: its name in /dev/shm.
pub struct Orphan {
    pub segment: String,
    pub creator: u32,
}

/// Runs the first job of a case (logs in DIR/killed-first) and kills the
/// creator of the first segment it made: the orphan and the job's rank
/// pids, or why the case could not reach the moment it is about.
pub fn run(
    launcher: &Launcher,
    dir: &Path,
    np: u32,
    program: &str,
    first: &CreatorKilledFirst,
    run_id: &str,
) -> Result<(Orphan, BTreeSet<u32>), String> {
    let first_dir = dir.join("killed-first");
    std::fs::create_dir_all(&first_dir).map_err(|e| format!("cannot create {}: {e}", first_dir.display()))?;
    let shm_dir = Path::new("/dev/shm");
    let before = shm::list(shm_dir, "coll_rdma.");
    let ranks_run = RanksRun { launch_wrapper: &[], wrapper: &[], program, args: &first.args };
    let cmd = launcher.command(&first_dir, run_id, np, &first.mpirun, &ranks_run);
    let _ = std::fs::write(first_dir.join("command"), cmd.join(" ") + "\n");
    let log = std::fs::File::create(first_dir.join("mpirun.log")).map_err(|e| format!("cannot log: {e}"))?;
    let mut job = Command::new("timeout")
        .args(["-k", "5", &FIRST_JOB_SECONDS.to_string()])
        .args(&cmd)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start mpirun: {e}"))?;
    let pids_file: PathBuf = first_dir.join("pids");
    let found = wait_for_own_segment(&before, &pids_file, &mut job);
    let outcome = match found {
        None => Err(format!(
            "no coll_rdma.* segment of this job appeared within {}s while a rank was held before its transport setup",
            APPEAR_WITHIN.as_secs()
        )),
        Some(orphan) => {
            // the creator is a rank of this job (its own pids file)
            let _ = Command::new("kill").args(["-KILL", &orphan.creator.to_string()]).stderr(Stdio::null()).status();
            if shm_dir.join(&orphan.segment).exists() {
                Ok(orphan)
            } else {
                Err(format!(
                    "killing the creator (pid {}) left nothing in /dev/shm: the run did not hit the window it is about",
                    orphan.creator
                ))
            }
        }
    };
    // the job ends: mpirun sees a rank die and ends the held one
    let _ = job.wait();
    let pids = shm::read_pids(&pids_file);
    outcome.map(|orphan| (orphan, pids))
}

/// The first new segment whose creator is a rank of the job (PIDS_FILE),
/// polled until it appears, the job ends or APPEAR_WITHIN passes.
fn wait_for_own_segment(before: &BTreeSet<String>, pids_file: &Path, job: &mut std::process::Child) -> Option<Orphan> {
    let start = Instant::now();
    while start.elapsed() < APPEAR_WITHIN {
        let ranks = shm::read_pids(pids_file);
        let now = shm::list(Path::new("/dev/shm"), "coll_rdma.");
        let own = now.difference(before).find_map(|name| {
            let creator = shm::creator_pid(name)?;
            ranks.contains(&creator).then(|| Orphan { segment: name.clone(), creator })
        });
        if own.is_some() {
            return own;
        }
        if matches!(job.try_wait(), Ok(Some(_))) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}
