//! Launching one case under mpirun and watching it, as ci/mpi/run.sh and
//! ci/mpi/watch.sh do.
//!
//! Invariant: every launch ends, whatever its ranks do. At its load-scaled
//! limit the watcher marks the run as timed out (DIR/timed-out), records
//! what its processes were doing (DIR/hung.txt, by watch.sh's
//! record_hung_job: states, kernel stacks, gdb's user stacks) and ends it;
//! a launcher still there TEST_LAUNCHER_GRACE seconds (or the case's
//! launcher_grace_seconds) after every rank exited is recorded and ended the same way and the run judged on its
//! ranks' statuses (DIR/launcher-outlived-ranks); timeout(1), later, is the
//! backstop.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How mpirun is reached and what each run gets (from ci/mpi-tests.sh).
pub struct Launcher {
    pub root: PathBuf,
    /// The test programs (build/tests).
    pub bin: PathBuf,
    /// mpirun, or a stand-in (the runner's self-tests).
    pub mpirun: String,
    /// Open MPI's major version: 5 and later capture each rank's output
    /// with ci/rank-output.sh and pass the component path in its environment.
    pub ompi_major: u32,
    pub component_path: String,
    /// mpirun --host (ranks on several machines), if any.
    pub hosts: Option<String>,
    /// TEST_TIMEOUT: seconds for a run on an idle machine.
    pub timeout: u64,
    /// TEST_TIMEOUT_MAX_FACTOR: the most the load may stretch it.
    pub timeout_max_factor: f64,
}

/// What each rank runs: PROGRAM ARGS, through WRAPPER (run.sh's
/// RUN_WRAPPER: after the output capture and the component path, before
/// ci/record-pid.sh, so the pid recorded is the program's).
pub struct RanksRun<'a> {
    /// Run first, before the output capture (run.sh's LAUNCH_WRAPPER).
    pub launch_wrapper: &'a [String],
    pub wrapper: &'a [String],
    pub program: &'a str,
    pub args: &'a [String],
}

/// How a launch ended.
pub struct Ended {
    /// The status as a shell reports it (exit code, or 128 + signal; 124
    /// when the watcher ended it at its limit).
    pub rc: i32,
    pub secs: f64,
    pub limit: u64,
    /// Set when mpirun outlived its ranks and was ended for it.
    pub launcher_note: Option<String>,
}

impl Launcher {
    /// The command line of a run of PROGRAM ARGS on NP ranks, logging to DIR.
    pub fn command(&self, dir: &Path, run_id: &str, np: u32, opts: &[String], ranks_run: &RanksRun) -> Vec<String> {
        let out = dir.join("out").display().to_string();
        let mut cmd = vec![self.mpirun.clone(), "-np".into(), np.to_string()];
        if np > 2 {
            cmd.push("--oversubscribe".into());
        }
        match &self.hosts {
            Some(hosts) => cmd.extend(["--host", hosts, "--map-by", "node", "--mca", "btl", "self,vader,tcp"].map(String::from)),
            None => cmd.extend(["--mca", "btl", "self,vader"].map(String::from)),
        }
        let mut rank_wrapper = Vec::new();
        if self.ompi_major >= 5 {
            rank_wrapper.push(self.root.join("ci/rank-output.sh").display().to_string());
            rank_wrapper.push(out);
            rank_wrapper.push("env".into());
            rank_wrapper.push(format!("OMPI_MCA_mca_base_component_path={}", self.component_path));
        } else {
            cmd.extend(["--mca".into(), "mca_base_component_path".into(), self.component_path.clone()]);
            cmd.extend(["--output-filename".into(), format!("{out}:nocopy")]);
        }
        cmd.extend(["-x".into(), format!("CRTEST_RUN={run_id}")]);
        cmd.extend(opts.iter().cloned());
        cmd.extend(ranks_run.launch_wrapper.iter().cloned());
        cmd.extend(rank_wrapper);
        cmd.extend(ranks_run.wrapper.iter().cloned());
        cmd.push(self.root.join("ci/record-pid.sh").display().to_string());
        cmd.push(dir.join("pids").display().to_string());
        cmd.push(self.bin.join(ranks_run.program).display().to_string());
        cmd.extend(ranks_run.args.iter().cloned());
        cmd
    }

    /// TIMEOUT times the load per core now, from 1 to the factor's limit
    /// (the larger of this machine's and HOST_LOADAVG_FILE's, as watch.sh).
    pub fn load_scaled_timeout(&self) -> u64 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let mut factor = load_of(Path::new("/proc/loadavg")).map_or(0.0, |l| l / cores);
        if let Ok(host) = std::env::var("HOST_LOADAVG_FILE") {
            let host_cores = std::env::var("HOST_CORES").ok().and_then(|c| c.parse().ok()).unwrap_or(1.0);
            if let Some(load) = load_of(Path::new(&host)) {
                factor = factor.max(load / host_cores);
            }
        }
        let factor = factor.clamp(1.0, self.timeout_max_factor.max(1.0));
        (self.timeout as f64 * factor + 0.5) as u64
    }

    /// Runs CMD (from `command`) with its output in DIR/mpirun.log, watched;
    /// GRACE, if given, in place of TEST_LAUNCHER_GRACE.
    pub fn run(&self, dir: &Path, run_id: &str, np: u32, cmd: &[String], grace: Option<u64>) -> std::io::Result<Ended> {
        let limit = self.load_scaled_timeout();
        let log = std::fs::File::create(dir.join("mpirun.log"))?;
        let start = Instant::now();
        let mut child = Command::new("timeout")
            .args(["-k", "10", &(limit + 600).to_string()])
            .args(cmd)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        let grace = grace
            .or_else(|| std::env::var("TEST_LAUNCHER_GRACE").ok().and_then(|g| g.parse().ok()))
            .unwrap_or(20u64);
        let mut exited_since: Option<Instant> = None;
        let mut launcher_note = None;
        let mut ended_by_watcher = false;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            std::thread::sleep(Duration::from_millis(200));
            if ended_by_watcher {
                continue;
            }
            if start.elapsed() >= Duration::from_secs(limit) {
                std::fs::write(dir.join("timed-out"), "")?;
                self.record_hung_job(dir, run_id, None);
                end(child.id());
                ended_by_watcher = true;
                continue;
            }
            match (self.hosts.is_none()).then(|| exited_ranks(&dir.join("pids"), np)).flatten() {
                Some(statuses) => {
                    let since = *exited_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= Duration::from_secs(grace) {
                        std::fs::write(dir.join("launcher-outlived-ranks"), statuses.join("\n") + "\n")?;
                        let why = format!("mpirun is still there {}s after every rank exited", since.elapsed().as_secs());
                        self.record_hung_job(dir, run_id, Some(&why));
                        end(child.id());
                        ended_by_watcher = true;
                        let shown = statuses.iter().map(|s| s.split(' ').nth(1).unwrap_or("?")).collect::<Vec<_>>();
                        // the first non-zero status stands for the launcher's
                        let rc = shown.iter().find(|s| **s != "reaped" && **s != "0").map_or(0, |s| s.parse().unwrap_or(1));
                        launcher_note = Some((rc, format!(
                            "mpirun was still there {grace}s after every rank had exited (rank statuses: {}); ended, the run judged on its ranks (what it was doing: {}/hung.txt)",
                            shown.join(" "),
                            dir.strip_prefix(&self.root).unwrap_or(dir).display()
                        )));
                    }
                }
                None => exited_since = None,
            }
        };
        let secs = start.elapsed().as_secs_f64();
        let mut rc = shell_status(status);
        if dir.join("timed-out").exists() {
            rc = 124;
        }
        let launcher_note = launcher_note.map(|(ranks_rc, note)| {
            rc = ranks_rc;
            note
        });
        Ok(Ended { rc, secs, limit, launcher_note })
    }

    /// watch.sh's record_hung_job, run as it is (one place says what a hang
    /// report holds).
    fn record_hung_job(&self, dir: &Path, run_id: &str, why: Option<&str>) {
        let mut cmd = Command::new("bash");
        cmd.arg("-c").arg(". \"$1\"; shift; record_hung_job \"$@\"").arg("record_hung_job");
        cmd.arg(self.root.join("ci/mpi/watch.sh")).arg(dir).arg(run_id);
        if let Some(why) = why {
            cmd.arg(why);
        }
        let _ = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status();
    }
}

/// SIGTERM to PID (the run's timeout(1), which passes it on to mpirun).
fn end(pid: u32) {
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).stderr(Stdio::null()).status();
}

fn shell_status(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn load_of(file: &Path) -> Option<f64> {
    std::fs::read_to_string(file).ok()?.split_whitespace().next()?.parse().ok()
}

/// "PID STATUS" for each rank in PIDS_FILE once none runs any more (STATUS
/// as a shell reports it, or "reaped" for one already gone); None while a
/// rank runs or fewer than NP pids are listed (watch.sh's exited_ranks).
pub fn exited_ranks(pids_file: &Path, np: u32) -> Option<Vec<String>> {
    let pids: Vec<u32> = std::fs::read_to_string(pids_file).ok()?.lines().filter_map(|l| l.trim().parse().ok()).collect();
    if pids.len() < np as usize {
        return None;
    }
    pids.iter()
        .map(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return Some(format!("{pid} reaped"));
            };
            // the fields after the command name, which may hold spaces: the
            // state first, the exit code (waitpid's form) 50th
            let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
            if !matches!(fields.first(), Some(&"Z") | Some(&"X")) {
                return None;
            }
            let code: i32 = fields.get(49).and_then(|c| c.parse().ok()).unwrap_or(0);
            Some(if code & 127 == 0 { format!("{pid} {}", code >> 8) } else { format!("{pid} {}", 128 + (code & 127)) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launcher(ompi_major: u32, hosts: Option<&str>) -> Launcher {
        Launcher {
            root: "/r".into(),
            bin: "/r/build/tests".into(),
            mpirun: "mpirun".into(),
            ompi_major,
            component_path: "SYS_DEFAULT:/r/build/components".into(),
            hosts: hosts.map(String::from),
            timeout: 120,
            timeout_max_factor: 6.0,
        }
    }

    #[test]
    fn the_command_is_run_shs() {
        let opts = ["--mca".to_string(), "x".into(), "1".into()];
        let wrapper = ["env".to_string(), "A=1".into()];
        let args = ["-n".to_string(), "3".into()];
        let ranks_run = RanksRun { launch_wrapper: &[], wrapper: &wrapper, program: "bcast", args: &args };
        let cmd = launcher(4, None).command(Path::new("/l/c"), "ab", 3, &opts, &ranks_run);
        assert_eq!(
            cmd.join(" "),
            "mpirun -np 3 --oversubscribe --mca btl self,vader --mca mca_base_component_path \
             SYS_DEFAULT:/r/build/components --output-filename /l/c/out:nocopy -x CRTEST_RUN=ab --mca x 1 \
             env A=1 /r/ci/record-pid.sh /l/c/pids /r/build/tests/bcast -n 3"
        );
        let cmd = launcher(5, Some("a,b")).command(Path::new("/l/c"), "ab", 2, &[], &RanksRun { launch_wrapper: &["lw".into()], wrapper: &[], program: "bcast", args: &[] });
        assert_eq!(
            cmd.join(" "),
            "mpirun -np 2 --host a,b --map-by node --mca btl self,vader,tcp -x CRTEST_RUN=ab lw /r/ci/rank-output.sh \
             /l/c/out env OMPI_MCA_mca_base_component_path=SYS_DEFAULT:/r/build/components /r/ci/record-pid.sh \
             /l/c/pids /r/build/tests/bcast"
        );
    }

    #[test]
    fn the_timeout_grows_with_the_load_within_its_bounds() {
        let mut l = launcher(4, None);
        l.timeout_max_factor = 1.0;
        assert_eq!(l.load_scaled_timeout(), 120);
        l.timeout_max_factor = 1000.0;
        assert!(l.load_scaled_timeout() >= 120);
    }

    #[test]
    fn exited_ranks_waits_for_every_rank() {
        let dir = std::env::temp_dir().join(format!("mpi-runner-exited-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pids = dir.join("pids");
        // this process runs: not exited
        std::fs::write(&pids, format!("{}\n", std::process::id())).unwrap();
        assert_eq!(exited_ranks(&pids, 1), None);
        assert_eq!(exited_ranks(&pids, 2), None, "fewer pids than ranks");
        // a child that exited with 3, not yet reaped: a zombie
        let mut child = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
        let gone = 999_999_999u32;
        std::fs::write(&pids, format!("{}\n{gone}\n", child.id())).unwrap();
        let mut seen = None;
        for _ in 0..100 {
            seen = exited_ranks(&pids, 2);
            if seen.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(seen.unwrap(), [format!("{} 3", child.id()), format!("{gone} reaped")]);
        child.wait().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
