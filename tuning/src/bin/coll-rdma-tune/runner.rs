//! Running things: `ompi_info` for the parameters and their current values,
//! and one sweep as K concurrent mpirun jobs of `bench/coll_pairs.c` (the
//! default and each candidate) that take turns through a shared control
//! file, each checked afterwards to have run under coll rdma.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::plan::Sweep;
use crate::samples::Samples;

/// How jobs are started.
#[derive(Clone, Debug)]
pub struct Launch {
    /// the mpirun command and its own options (hosts, binding, btl, ...)
    pub mpirun: Vec<String>,
    /// `mca_base_component_path` for every job and for ompi_info (empty:
    /// Open MPI's default search path, e.g. an installed component)
    pub component_path: String,
    /// the coll_pairs program
    pub bench: PathBuf,
    /// where the jobs' output goes
    pub log_dir: PathBuf,
    pub rounds: usize,
    pub sample_ms: f64,
    /// seconds one sweep may take before its jobs are stopped
    pub timeout_s: u64,
    /// on one host with no placement given: its core count; each job then
    /// gets `--bind-to core`, or `--oversubscribe --bind-to none` when it
    /// has more ranks than cores (as ci/bench-pairs.sh places them)
    pub local_cores: Option<usize>,
}

impl Launch {
    /// One line for the file's header: the command a job ran, without the
    /// per-job parts.
    pub fn describe(&self, np: usize) -> String {
        let mut words = self.mpirun.clone();
        words.extend(["-np".to_string(), np.to_string()]);
        words.extend(self.placement(np).iter().map(|w| w.to_string()));
        words.join(" ")
    }

    pub fn placement(&self, np: usize) -> &'static [&'static str] {
        match self.local_cores {
            Some(cores) if np > cores => &["--oversubscribe", "--bind-to", "none"],
            Some(_) => &["--bind-to", "core"],
            None => &[],
        }
    }
}

/// A parameter's value in force and where it comes from, from
/// `ompi_info --parsable`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentValue {
    pub value: String,
    pub source: String,
}

/// `mca:coll:rdma:param:NAME:value:V` and `...:NAME:source:S` lines.
pub fn parse_ompi_info(text: &str) -> BTreeMap<String, CurrentValue> {
    let mut values: BTreeMap<String, CurrentValue> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("mca:coll:rdma:param:") else { continue };
        let mut fields = rest.splitn(3, ':');
        let (Some(name), Some(key), Some(text)) = (fields.next(), fields.next(), fields.next()) else { continue };
        let entry = values
            .entry(name.to_string())
            .or_insert_with(|| CurrentValue { value: String::new(), source: String::new() });
        match key {
            "value" => entry.value = text.to_string(),
            "source" => entry.source = text.to_string(),
            _ => {}
        }
    }
    values
}

/// coll rdma's parameters as the component on `launch`'s path reports them.
pub fn current_values(launch: &Launch) -> Result<BTreeMap<String, CurrentValue>, String> {
    let mut command = Command::new("ompi_info");
    command.args(["--param", "coll", "rdma", "--level", "9", "--parsable"]);
    if !launch.component_path.is_empty() {
        // ompi_info applies the component path only from the environment
        command.env("OMPI_MCA_mca_base_component_path", &launch.component_path);
    }
    let output = command.output().map_err(|e| format!("cannot run ompi_info: {e}"))?;
    let values = parse_ompi_info(&String::from_utf8_lossy(&output.stdout));
    if values.is_empty() {
        return Err(format!(
            "ompi_info lists no coll rdma parameters (component path '{}'): is the component built?",
            launch.component_path
        ));
    }
    Ok(values)
}

/// Fewest calls in one sample: on a busy machine a slow first call in the
/// warm-up would otherwise leave samples of one cold call each (seen: a
/// 64 KiB bcast sampled one call at a time at 3.6x its warm time).
const MIN_CALLS_PER_SAMPLE: u32 = 20;

/// One job of a sweep: its name in the logs and its MCA settings.
#[derive(Clone, Debug)]
pub struct Job {
    pub name: String,
    pub mca: Vec<(String, String)>,
}

/// What coll rdma recorded about the job's MPI_COMM_WORLD in its events
/// (docs/events.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// the transport of comm 0's `comm_ready`
    pub transport: Option<String>,
    /// the choices in force on rank 0 (barrier radix, degrees, bcast
    /// window), from its `comm_ready`, in words
    pub choices: Option<String>,
    /// per rank of comm 0: calls of the swept collective served, handed
    /// over (its `comm_freed`)
    pub tallies: BTreeMap<usize, (u64, u64)>,
}

/// Reads the events of one job (every rank's lines, in any order) for
/// `collective`. A line that is not JSON is skipped: the tally check
/// afterwards notices a rank whose summary is missing.
pub fn parse_served(events: &str, collective: &str) -> Served {
    let mut served = Served::default();
    for event in events.lines().filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok()) {
        if event["cid"] != 0 {
            continue;
        }
        let Some(rank) = event["rank"].as_u64().and_then(|rank| usize::try_from(rank).ok()) else { continue };
        match event["event"].as_str() {
            Some("comm_ready") => {
                if let Some(name) = event["transport"].as_str() {
                    served.transport.get_or_insert_with(|| name.to_string());
                }
                if rank == 0 {
                    served.choices = Some(choices_of(&event));
                }
            }
            Some("comm_freed") => {
                let calls = &event["calls"][collective];
                if let (Some(count), Some(handed)) = (calls["served"].as_u64(), calls["handed_over"].as_u64()) {
                    served.tallies.insert(rank, (count, handed));
                }
            }
            _ => {}
        }
    }
    served
}

/// The plan of a `comm_ready` event in a few words, for the tuner's report.
fn choices_of(ready: &serde_json::Value) -> String {
    format!(
        "{} ranks, window {} bytes, barrier radix {}, allreduce degree {}, reduce degree {}, bcast window {} x {} bytes",
        ready["size"], ready["window_bytes"], ready["barrier"]["radix"], ready["allreduce"]["degree"], ready["reduce"]["degree"],
        ready["bcast"]["window_slots"], ready["bcast"]["slot_bytes"]
    )
}

/// Every rank's events file of one job, one after the other.
fn read_events(dir: &Path) -> String {
    let mut files: Vec<PathBuf> = fs::read_dir(dir).map(|entries| entries.flatten().map(|entry| entry.path()).collect()).unwrap_or_default();
    files.sort();
    files.iter().map(|file| read(file)).collect::<Vec<_>>().join("\n")
}

/// The outcome of one sweep at one process count.
#[derive(Debug)]
pub struct SweepRun {
    pub samples: Samples,
    /// per job, what coll rdma reported
    pub served: Vec<Served>,
}

/// Runs the jobs of `sweep` at `np` together; `Err` names the first job
/// that failed (exit status, wrong result, not run under coll rdma).
pub fn run_sweep(launch: &Launch, np: usize, sweep: &Sweep, jobs: &[Job]) -> Result<SweepRun, String> {
    let tag = format!("np{np}-{}", sweep.param);
    fs::create_dir_all(&launch.log_dir).map_err(|e| format!("cannot create {}: {e}", launch.log_dir.display()))?;
    let control = PathBuf::from(format!("/dev/shm/coll-rdma-tune-{}-{tag}", std::process::id()));
    let _ = fs::remove_file(&control);
    let sizes = sweep.sizes;
    let mut children = Vec::new();
    for (index, job) in jobs.iter().enumerate() {
        let out = launch.log_dir.join(format!("{tag}-{}.out", job.name));
        let err = launch.log_dir.join(format!("{tag}-{}.err", job.name));
        // a fresh directory per job: coll rdma never writes into a file
        // that exists
        let events = launch.log_dir.join(format!("{tag}-{}.events", job.name));
        let _ = fs::remove_dir_all(&events);
        fs::create_dir_all(&events).map_err(|e| format!("cannot create {}: {e}", events.display()))?;
        let mut command = Command::new("timeout");
        command.args(["-k", "5", &launch.timeout_s.to_string()]);
        command.args(&launch.mpirun);
        command.args(["-np", &np.to_string()]);
        command.args(launch.placement(np));
        if !launch.component_path.is_empty() {
            command.args(["--mca", "mca_base_component_path", &launch.component_path]);
        }
        command.args(["--mca", "coll_rdma_verbose", "1"]);
        command.arg("--mca").arg("coll_rdma_events_file").arg(events.join("rank-%r.jsonl"));
        for (name, value) in &job.mca {
            command.args(["--mca", name, value]);
        }
        command.arg(&launch.bench);
        command.args(["-J", &index.to_string(), "-K", &jobs.len().to_string()]);
        command.arg("-C").arg(&control);
        command.args(["-c", sweep.collective.name()]);
        command.args(["-m", &format!("{}:{}", sizes.min, sizes.max), "-f", &sizes.factor.to_string()]);
        command.args(["-P", &launch.rounds.to_string(), "-t", &launch.sample_ms.to_string(), "-T", "120"]);
        command.args(["-n", &MIN_CALLS_PER_SAMPLE.to_string()]);
        command.stdin(Stdio::null());
        command.stdout(File::create(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?);
        command.stderr(File::create(&err).map_err(|e| format!("cannot create {}: {e}", err.display()))?);
        match command.spawn() {
            Ok(child) => children.push((job, child, out, err, events)),
            Err(e) => {
                stop(&mut children);
                let _ = fs::remove_file(&control);
                return Err(format!("cannot start mpirun: {e}"));
            }
        }
    }
    let mut failure = None;
    let mut samples = Samples::default();
    let mut served = Vec::new();
    for (job, child, out, err, events) in children.iter_mut() {
        let status = child.wait().map_err(|e| format!("waiting for job {}: {e}", job.name))?;
        samples.add(&read(out.as_path()));
        let report = parse_served(&read_events(events), sweep.collective.name());
        if failure.is_none() {
            failure = job_failure(&job.name, status.code(), &report, np, err.as_path());
        }
        served.push(report);
    }
    let _ = fs::remove_file(&control);
    match failure {
        Some(why) => Err(why),
        None => Ok(SweepRun { samples, served }),
    }
}

fn job_failure(name: &str, code: Option<i32>, served: &Served, np: usize, err: &Path) -> Option<String> {
    let log = err.display();
    let why = match code {
        Some(0) => None,
        Some(3) => Some("a wrong result".to_string()),
        Some(124) | Some(137) => Some("the time limit".to_string()),
        Some(c) => Some(format!("exit status {c}")),
        None => Some("a signal".to_string()),
    };
    if let Some(why) = why {
        return Some(format!("job '{name}' ended with {why} (log: {log})"));
    }
    if served.tallies.len() != np {
        return Some(format!(
            "job '{name}': coll rdma's comm_freed event for MPI_COMM_WORLD came from {} of {np} ranks: not run under coll rdma? (log: {log})",
            served.tallies.len()
        ));
    }
    None
}

/// Stops jobs already started when a later one cannot start: SIGTERM to
/// timeout(1), which passes it on to mpirun, which stops its ranks (a
/// SIGKILL would stop timeout alone).
fn stop(children: &mut [(&Job, std::process::Child, PathBuf, PathBuf, PathBuf)]) {
    for (_, child, _, _, _) in children.iter_mut() {
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let _ = child.wait();
    }
}

fn read(path: &Path) -> String {
    fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ompi_info_values_and_sources() {
        let text = "mca:coll:rdma:param:coll_rdma_barrier_radix:value:3\n\
                    mca:coll:rdma:param:coll_rdma_barrier_radix:source:file (/etc/x.conf)\n\
                    mca:coll:rdma:param:coll_rdma_barrier_radix:help:n of the n-way: barrier\n\
                    mca:coll:rdma:param:coll_rdma_udp_group_base:value:239.78.0.0/16\n\
                    mca:coll:tuned:param:coll_tuned_priority:value:30\n";
        let v = parse_ompi_info(text);
        assert_eq!(v.len(), 2);
        assert_eq!(v["coll_rdma_barrier_radix"], CurrentValue { value: "3".into(), source: "file (/etc/x.conf)".into() });
        assert_eq!(v["coll_rdma_udp_group_base"].value, "239.78.0.0/16");
    }

    #[test]
    fn served_tallies_of_the_swept_collective() {
        // two ranks' files one after the other, a line cut short by a
        // crash, and another communicator that must not count
        let text = r#"{"v":1,"event":"comm_ready","cid":0,"rank":1,"size":2,"transport":"shm","window_bytes":65536,"barrier":{"radix":2},"allreduce":{"degree":1},"reduce":{"degree":1},"bcast":{"window_slots":16,"slot_bytes":4096}}
{"v":1,"event":"comm_freed","cid":0,"rank":1,"size":2,"transport":"shm","calls":{"bcast":{"served":1100,"handed_over":100},"barrier":{"served":9,"handed_over":0}}}
{"v":1,"event":"comm_ready","cid":0,"rank":0,"size":2,"transport":"shm","window_bytes":65536,"barrier":{"radix":2},"allreduce":{"degree":1},"reduce":{"degree":1},"bcast":{"window_slots":16,"slot_bytes":4096}}
{"v":1,"event":"comm_freed","cid":0,"rank":0,"size":2,"transport":"shm","calls":{"bcast":{"served":1200,"handed_over":0}}}
{"v":1,"event":"comm_freed","cid":3,"rank":0,"size":2,"transport":"shm","calls":{"bcast":{"served":5,"handed_over":0}}}
{"v":1,"event":"comm_fre"#;
        let s = parse_served(text, "bcast");
        assert_eq!(s.transport.as_deref(), Some("shm"));
        assert_eq!(
            s.choices.as_deref(),
            Some("2 ranks, window 65536 bytes, barrier radix 2, allreduce degree 1, reduce degree 1, bcast window 16 x 4096 bytes")
        );
        assert_eq!(s.tallies, BTreeMap::from([(0, (1200, 0)), (1, (1100, 100))]));
        assert_eq!(parse_served(text, "reduce").tallies.len(), 0);
        // verbose lines are not events: nothing is read from them
        let prose = "coll:rdma: comm 0 rank 0: served 1200 bcast(s) over shm, 0 handed to the fallback\n";
        assert_eq!(parse_served(prose, "bcast"), Served::default());
    }

    #[test]
    fn a_job_without_coll_rdma_is_a_failure() {
        let err = Path::new("/tmp/x.err");
        let none = Served::default();
        assert!(job_failure("default", Some(0), &none, 2, err).unwrap().contains("0 of 2 ranks"));
        let both = Served { tallies: BTreeMap::from([(0, (1, 0)), (1, (1, 0))]), ..Served::default() };
        assert_eq!(job_failure("default", Some(0), &both, 2, err), None);
        assert!(job_failure("v=4", Some(3), &both, 2, err).unwrap().contains("wrong result"));
    }
}
