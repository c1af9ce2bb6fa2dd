//! The checks a case lists (`checks = [...]`), as ci/mpi/run.sh's CHECKS
//! words them, and how each judges a finished run.
//!
//! Invariant: a check either holds or adds one reason, worded as
//! ci/mpi/run.sh words it, to the run's list of reasons; the runner knows
//! a subset of run.sh's checks and refuses the others when the table is
//! read (so a table never silently drops a check it names). The checks on
//! coll rdma's events call the same tools as run.sh (jq with
//! ci/served/checks.jq, ci/events-check.sh, ci/served/summary-check.sh).

use std::path::Path;
use std::process::Command;

use regex::Regex;

/// A wait's report that it is slow (btl-ibmc's wait loops), not an error.
pub const STALL_WARNING_RE: &str = r"coll:rdma: warning: rank [0-9]+ of [0-9]+ has waited [0-9]+\.[0-9] s for ";
/// The warning a run asks for with a protection of none, not an error.
const UNPROTECTED_WARNING_RE: &str = r"coll:rdma: comm [0-9]+: warning: (udp frames|verbs multicast datagrams) unprotected \(coll_rdma_(udp|verbs)_protection=none\)";

#[derive(Debug, Clone)]
pub enum Check {
    /// ci/events-check.sh: the counts at free match the program's expect lines.
    Events { where_connected: bool },
    /// A jq filter over every rank's events (ci/served/checks.jq's helpers).
    EventsHold(String),
    /// A jq filter over every rank's events as they are, one array (`jq -s`:
    /// no `world`, no helpers; `events-file:`).
    EventsFile(String),
    /// The autotune of the barrier (`autotune`) or of the allreduce degree
    /// (`autotune-allreduce`): no more plans or choices than communicators
    /// claimed, one plan on comm 0 and one agreed choice (the barrier's
    /// must be made; the allreduce's trial runs only once the tree serves).
    Autotune { allreduce: bool },
    /// Every rank warned that coll_rdma_events_file was refused and ran on;
    /// the links planted in this directory (relative: in the case's log
    /// directory) were not written through: `victim` still holds "keep",
    /// the dangling link's `absent` was not created.
    EventsRefused(String),
    /// comm 0's window on rank 0 (its comm_ready's window_bytes) is smaller
    /// than in the case named, run before this one by the same runner.
    SmallerWindowThan(String),
    /// Every rank's comm_ready on comm 0 states the shm segment's size the
    /// layout formula gives for np ranks.
    Memory,
    /// ci/served/summary-check.sh: verbose 1's summary lines.
    Summary,
    /// No coll:rdma output but stall warnings.
    Quiet,
    /// coll rdma claimed no communicator.
    NoServe,
    /// The fixed string appears in the output (`says:` and `grep:`).
    Says { prefix: &'static str, text: String },
    /// A line matches (`says-re:` and `re:`).
    Matches { prefix: &'static str, pattern: Regex },
    /// No line matches (`nore:`).
    NoMatch(Regex),
    /// No line matches but stall and protection warnings (`nowarn:`).
    NoWarning(Regex),
    /// mpirun ended within this many seconds.
    Within(f64),
    /// The run must leave a segment in /dev/shm (a test of the leak check).
    Leaks,
    /// mpirun outlived its ranks and was ended for it (a test of the watcher).
    LauncherEnded,
}

impl PartialEq for Check {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Check::Events { where_connected: false } => write!(f, "events"),
            Check::Events { where_connected: true } => write!(f, "events-where-connected"),
            Check::EventsHold(filter) => write!(f, "ev:{filter}"),
            Check::EventsFile(filter) => write!(f, "events-file:{filter}"),
            Check::Autotune { allreduce: false } => write!(f, "autotune"),
            Check::Autotune { allreduce: true } => write!(f, "autotune-allreduce"),
            Check::Memory => write!(f, "memory"),
            Check::EventsRefused(planted) => write!(f, "events-refused:{planted}"),
            Check::SmallerWindowThan(case) => write!(f, "smaller-window-than:{case}"),
            Check::Summary => write!(f, "summary"),
            Check::Quiet => write!(f, "quiet"),
            Check::NoServe => write!(f, "noserve"),
            Check::Says { prefix, text } => write!(f, "{prefix}{text}"),
            Check::Matches { prefix, pattern } => write!(f, "{prefix}{pattern}"),
            Check::NoMatch(pattern) => write!(f, "nore:{pattern}"),
            Check::NoWarning(pattern) => write!(f, "nowarn:{pattern}"),
            Check::Within(secs) => write!(f, "within:{secs}"),
            Check::Leaks => write!(f, "leaks"),
            Check::LauncherEnded => write!(f, "launcher-ended"),
        }
    }
}

/// What a check reads of a finished run.
pub struct Run<'a> {
    pub root: &'a Path,
    /// The case's log directory (events/, out/, all.log).
    pub dir: &'a Path,
    pub np: u32,
    /// mpirun's output and every rank's stdout and stderr.
    pub all_log: &'a str,
    pub secs: f64,
    /// The transports the served calls may report (EXPECT_TRANSPORT).
    pub expect_transport: &'a str,
    /// Set when mpirun outlived its ranks and was ended for it.
    pub launcher_note: Option<&'a str>,
    /// comm 0's window on rank 0 in the cases run before, by name.
    pub earlier_windows: &'a std::collections::BTreeMap<String, u64>,
}

impl Run<'_> {
    /// The log directory as the reasons name it: relative to the checkout.
    pub fn shown_dir(&self) -> String {
        self.dir.strip_prefix(self.root).unwrap_or(self.dir).display().to_string()
    }
}

fn pattern(text: &str) -> Result<Regex, String> {
    Regex::new(text).map_err(|e| format!("'{text}' is not a regular expression the runner reads: {e}"))
}

impl Check {
    /// The case this check compares with, which must run first (in the
    /// same runner: --list-deps names it).
    pub fn runs_after(&self) -> Option<&str> {
        match self {
            Check::SmallerWindowThan(case) => Some(case),
            _ => None,
        }
    }

    pub fn parse(text: &str) -> Result<Check, String> {
        let (word, rest) = text.split_once(':').unwrap_or((text, ""));
        Ok(match (word, text) {
            (_, "events") => Check::Events { where_connected: false },
            (_, "events-where-connected") => Check::Events { where_connected: true },
            (_, "summary") => Check::Summary,
            (_, "quiet") => Check::Quiet,
            (_, "noserve") => Check::NoServe,
            (_, "leaks") => Check::Leaks,
            (_, "launcher-ended") => Check::LauncherEnded,
            (_, "autotune") => Check::Autotune { allreduce: false },
            (_, "autotune-allreduce") => Check::Autotune { allreduce: true },
            (_, "memory") => Check::Memory,
            ("ev", _) => Check::EventsHold(rest.to_string()),
            ("events-file", _) => Check::EventsFile(rest.to_string()),
            ("events-refused", _) if !rest.is_empty() => Check::EventsRefused(rest.to_string()),
            ("smaller-window-than", _) if !rest.is_empty() => Check::SmallerWindowThan(rest.to_string()),
            ("says", _) => Check::Says { prefix: "says:", text: rest.to_string() },
            ("grep", _) => Check::Says { prefix: "grep:", text: rest.to_string() },
            ("says-re", _) => Check::Matches { prefix: "says-re:", pattern: pattern(rest)? },
            ("re", _) => Check::Matches { prefix: "re:", pattern: pattern(rest)? },
            ("nore", _) => Check::NoMatch(pattern(rest)?),
            ("nowarn", _) => Check::NoWarning(pattern(rest)?),
            ("within", _) => Check::Within(
                rest.parse().ok().filter(|s: &f64| *s > 0.0).ok_or(format!("within:{rest}: not a number of seconds"))?,
            ),
            _ => {
                return Err(format!(
                    "check '{text}' is not one the runner knows (events, events-where-connected, ev:, events-file:, \
                     events-refused:, smaller-window-than:, autotune, autotune-allreduce, memory, summary, quiet, noserve, says:, says-re:, grep:, re:, \
                     nore:, nowarn:, within:, leaks, launcher-ended; the others are ci/mpi/run.sh's)"
                ));
            }
        })
    }

    /// Does the run need coll_rdma_events_file?
    pub fn reads_events(&self) -> bool {
        matches!(
            self,
            Check::Events { .. }
                | Check::EventsHold(_)
                | Check::EventsFile(_)
                | Check::Autotune { .. }
                | Check::Memory
                | Check::SmallerWindowThan(_)
                | Check::Summary
                | Check::NoServe
        )
    }

    /// Judges RUN: the reason it fails, if it does, and the stall warnings
    /// it accepted (for the checks that tolerate them).
    pub fn judge(&self, run: &Run) -> (Option<String>, Option<usize>) {
        let lines = || run.all_log.lines();
        let stalls = || {
            let stall = Regex::new(STALL_WARNING_RE).expect("a valid pattern");
            lines().filter(|l| stall.is_match(l)).count()
        };
        let first_three = |found: Vec<&str>| found.iter().take(3).copied().collect::<Vec<_>>().join("\n");
        match self {
            Check::Events { where_connected } => {
                let mut cmd = Command::new(run.root.join("ci/events-check.sh"));
                cmd.arg(run.dir).arg(run.np.to_string()).env("EXPECT_TRANSPORT", run.expect_transport);
                if *where_connected {
                    cmd.arg("--where-connected");
                }
                (tool_says(cmd).err().map(|out| non_empty(out, "ci/events-check.sh failed without a word")), None)
            }
            Check::EventsHold(filter) => (events_hold(run, filter).err(), None),
            Check::EventsFile(filter) => (events_file_holds(run, filter).err(), None),
            Check::Autotune { allreduce } => {
                let (collective, must_choose) = if *allreduce { ("allreduce", false) } else { ("barrier", true) };
                let filter = format!(
                    "once_per_claim(\"autotune_plan\"; \"{collective}\") and once_per_claim(\"autotune\"; \"{collective}\") \
                     and autotune_agreed(\"{collective}\"; {must_choose})"
                );
                (events_hold(run, &filter).err(), None)
            }
            Check::EventsRefused(planted) => {
                let planted = run.dir.join(planted);
                let warning = Regex::new(
                    "coll:rdma: warning: coll_rdma_events_file: cannot create .*; running on without events",
                )
                .expect("a valid pattern");
                let warned = lines().filter(|l| warning.is_match(l)).count();
                let mut why = Vec::new();
                if warned != run.np as usize {
                    why.push(format!("{warned} rank(s) warned that the events file was refused, expected {}", run.np));
                }
                if std::fs::read_to_string(planted.join("victim")).map(|t| t.trim_end().to_string()).ok().as_deref()
                    != Some("keep")
                {
                    why.push(format!("{}/victim was written through the link", planted.display()));
                }
                if planted.join("absent").exists() {
                    why.push(format!("{}/absent was created through the dangling link", planted.display()));
                }
                ((!why.is_empty()).then(|| why.join("\n")), None)
            }
            Check::SmallerWindowThan(reference) => {
                let why = match (run.earlier_windows.get(reference), window_bytes(run.dir)) {
                    (None, _) => Some(format!("no window size from {reference}, which must run first (select it too)")),
                    (Some(theirs), mine) if mine.is_none_or(|mine| mine >= *theirs) => Some(format!(
                        "comm 0's window is {} bytes per rank, not less than {theirs} in {reference}",
                        mine.map_or("?".to_string(), |m| m.to_string())
                    )),
                    _ => None,
                };
                (why, None)
            }
            Check::Memory => {
                let filter = "every_rank_ready(0; .transport == \"shm\" and .memory.shm_ranks == $np \
                              and .memory.total_bytes == shm_segment_bytes(.window_bytes; $np))";
                (events_hold(run, filter).err(), None)
            }
            Check::Summary => {
                let mut cmd = Command::new("bash");
                cmd.arg(run.root.join("ci/served/summary-check.sh")).arg(run.dir);
                (tool_says(cmd).err().map(|out| format!("verbose 1's summary: {out}")), None)
            }
            Check::Quiet => {
                let stall = Regex::new(STALL_WARNING_RE).expect("a valid pattern");
                let printed: Vec<&str> = lines().filter(|l| l.contains("coll:rdma:") && !stall.is_match(l)).collect();
                let why = (!printed.is_empty()).then(|| format!("coll:rdma printed something:\n{}", first_three(printed)));
                (why, Some(stalls()))
            }
            Check::NoServe => {
                let claimed = events_files(run.dir).iter().any(|f| {
                    std::fs::read_to_string(f).is_ok_and(|text| text.contains("\"event\":\"comm_claimed\""))
                });
                let why = claimed
                    .then(|| format!("coll rdma claimed a communicator (comm_claimed in {}/events)", run.shown_dir()));
                (why, None)
            }
            Check::Says { text, .. } => {
                ((!lines().any(|l| l.contains(text.as_str()))).then(|| format!("missing message: {text}")), None)
            }
            Check::Matches { prefix, pattern } => {
                let worded = if *prefix == "re:" { "no line matches" } else { "no line says" };
                ((!lines().any(|l| pattern.is_match(l))).then(|| format!("{worded}: {pattern}")), None)
            }
            Check::NoMatch(pattern) => {
                let found: Vec<&str> = lines().filter(|l| pattern.is_match(l)).collect();
                ((!found.is_empty()).then(|| format!("unexpected output:\n{}", first_three(found))), None)
            }
            Check::NoWarning(pattern) => {
                let tolerated = Regex::new(&format!("{STALL_WARNING_RE}|{UNPROTECTED_WARNING_RE}")).expect("valid");
                let found: Vec<&str> = lines().filter(|l| pattern.is_match(l) && !tolerated.is_match(l)).collect();
                ((!found.is_empty()).then(|| format!("unexpected output:\n{}", first_three(found))), Some(stalls()))
            }
            Check::Within(limit) => {
                ((run.secs > *limit).then(|| format!("mpirun took {:.1}s, more than {limit}s", run.secs)), None)
            }
            // judged with the /dev/shm leak check (the runner's main loop)
            Check::Leaks => (None, None),
            Check::LauncherEnded => {
                let why = run.launcher_note.is_none().then(|| "mpirun outlived its ranks, but the run was not ended as such".into());
                (why, None)
            }
        }
    }
}

fn non_empty(text: String, otherwise: &str) -> String {
    if text.is_empty() { otherwise.to_string() } else { text }
}

/// Runs CMD: Ok when it exits 0, else Err with what it printed (stdout and
/// stderr, trailing newlines cut as the shell's `$(...)` does).
fn tool_says(mut cmd: Command) -> Result<(), String> {
    match cmd.stdin(std::process::Stdio::null()).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            Err(text.trim_end_matches('\n').to_string())
        }
        Err(e) => Err(format!("cannot run {:?}: {e}", cmd.get_program())),
    }
}

/// DIR/events/rank-*.jsonl, sorted.
fn events_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("events"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("rank-") && name.ends_with(".jsonl") && p.is_file()
        })
        .collect();
    files.sort();
    files
}

/// comm 0's window per rank on rank 0 (its first comm_ready event) in the
/// run logged in DIR, if it has one.
pub fn window_bytes(dir: &Path) -> Option<u64> {
    let files = events_files(dir);
    if files.is_empty() {
        return None;
    }
    let out = Command::new("jq")
        .args(["-r", r#"select(.event == "comm_ready" and .cid == 0 and .rank == 0) | .window_bytes"#])
        .args(&files)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).lines().next()?.trim().parse().ok()
}

/// The jq FILTER holds over every rank's events read as they are, one
/// array (ci/mpi/run.sh's events-file:).
fn events_file_holds(run: &Run, filter: &str) -> Result<(), String> {
    let files = events_files(run.dir);
    if files.len() != run.np as usize {
        return Err(format!("{} events file(s) in {}/events, expected {}", files.len(), run.shown_dir(), run.np));
    }
    let out = Command::new("jq")
        .args(["-e", "-s", filter])
        .args(&files)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run jq: {e}"))?;
    jq_verdict(run, filter, out)
}

/// Ok when jq's filter held, else the reason (its error kept in DIR/jq.err).
fn jq_verdict(run: &Run, filter: &str, out: std::process::Output) -> Result<(), String> {
    if out.status.success() {
        return Ok(());
    }
    let _ = std::fs::write(run.dir.join("jq.err"), &out.stderr);
    let err = String::from_utf8_lossy(&out.stderr[..out.stderr.len().min(300)]).into_owned();
    Err(format!("the events do not satisfy: {filter} {err}"))
}

/// The jq FILTER holds over every rank's events, each with `world` added
/// (ci/mpi/run.sh's events_hold).
fn events_hold(run: &Run, filter: &str) -> Result<(), String> {
    let files = events_files(run.dir);
    if files.len() != run.np as usize {
        return Err(format!("{} events file(s) in {}/events, expected {}", files.len(), run.shown_dir(), run.np));
    }
    let program = format!(
        "include \"checks\"; [inputs | .world = (input_filename | capture(\"rank-(?<r>[0-9]+)[.]jsonl$\").r | tonumber)] | {filter}"
    );
    let out = Command::new("jq")
        .args(["-e", "-n", "--argjson", "np", &run.np.to_string(), "-L"])
        .arg(run.root.join("ci/served"))
        .arg(&program)
        .args(&files)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run jq: {e}"))?;
    jq_verdict(run, filter, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(check: &str, log: &str) -> (Option<String>, Option<usize>) {
        let run = Run {
            root: Path::new("/nonexistent"),
            dir: Path::new("/nonexistent/logs"),
            np: 2,
            all_log: log,
            secs: 3.0,
            expect_transport: "shm",
            launcher_note: None,
            earlier_windows: &Default::default(),
        };
        Check::parse(check).unwrap().judge(&run)
    }

    #[test]
    fn output_checks_hold_or_say_why() {
        let log = "coll:rdma: warning: rank 1 of 2 has waited 1.5 s for a peer\nresult: rank 0 failures 0 \n";
        assert_eq!(judge("says:failures 0", log).0, None);
        assert_eq!(judge("says:failures 1", log).0.unwrap(), "missing message: failures 1");
        assert_eq!(judge("re:^result: rank [0-9]", log).0, None);
        assert_eq!(judge("re:^rank", log).0.unwrap(), "no line matches: ^rank");
        assert!(judge("nore:result", log).0.unwrap().starts_with("unexpected output:\nresult: rank 0"));
        // a stall warning is tolerated by nowarn and counted
        assert_eq!(judge("nowarn:coll:rdma:.*warning", log), (None, Some(1)));
        let warned = format!("{log}coll:rdma: warning: something else\n");
        assert!(judge("nowarn:coll:rdma:.*warning", &warned).0.unwrap().contains("something else"));
        assert_eq!(judge("quiet", log), (None, Some(1)));
        assert!(judge("quiet", &warned).0.unwrap().starts_with("coll:rdma printed something:"));
        assert_eq!(judge("within:3", log).0, None);
        assert_eq!(judge("within:2.5", log).0.unwrap(), "mpirun took 3.0s, more than 2.5s");
    }

    #[test]
    fn an_event_check_without_events_files_fails() {
        let (why, _) = judge("ev:true", "");
        assert_eq!(why.unwrap(), "0 events file(s) in logs/events, expected 2");
    }

    /// Judges CHECK over a run of NP ranks whose events files hold EVENTS
    /// (one list of JSON lines per rank), with the checkout's jq helpers.
    fn judge_events(check: &str, np: u32, events: &[&[&str]]) -> Option<String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let dir = std::env::temp_dir().join(format!("mpi-runner-checks-{}-{check:.12}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("events")).unwrap();
        for (rank, lines) in events.iter().enumerate() {
            std::fs::write(dir.join(format!("events/rank-{rank}.jsonl")), lines.join("\n") + "\n").unwrap();
        }
        let run = Run { root: &root, dir: &dir, np, all_log: "", secs: 1.0, expect_transport: "shm", launcher_note: None, earlier_windows: &Default::default() };
        let why = Check::parse(check).unwrap().judge(&run).0;
        std::fs::remove_dir_all(&dir).unwrap();
        why
    }

    #[test]
    fn events_file_reads_the_events_as_written() {
        let rank = |r: u32| format!(r#"{{"v":1,"event":"comm_claimed","cid":0,"rank":{r}}}"#);
        let (r0, r1) = (rank(0), rank(1));
        let events: [&[&str]; 2] = [&[&r0], &[&r1]];
        assert_eq!(judge_events(r#"events-file:all(.[]; .v == 1) and length == 2"#, 2, &events), None);
        // no `world` is added, as run.sh's jq -s reads them
        let why = judge_events("events-file:all(.[]; .world != null)", 2, &events).unwrap();
        assert!(why.starts_with("the events do not satisfy: all(.[]; .world != null)"), "{why}");
        assert!(judge_events("events-file:true", 3, &events).unwrap().starts_with("2 events file(s)"));
    }

    #[test]
    fn memory_compares_the_segment_with_the_layout() {
        // 2 ranks, a 8000-byte window: 4096 + 2 * 8192 + 4 * 66816 = 287744,
        // rounded up to pages: 290816
        let ready = |r: u32, total: u64| {
            format!(
                r#"{{"event":"comm_ready","cid":0,"rank":{r},"transport":"shm","window_bytes":8000,"memory":{{"shm_ranks":2,"total_bytes":{total}}}}}"#
            )
        };
        let (good0, good1, bad1) = (ready(0, 290816), ready(1, 290816), ready(1, 287744));
        assert_eq!(judge_events("memory", 2, &[&[&good0], &[&good1]]), None);
        let why = judge_events("memory", 2, &[&[&good0], &[&bad1]]).unwrap();
        assert!(why.starts_with("the events do not satisfy: every_rank_ready(0;"), "{why}");
    }

    #[test]
    fn autotune_wants_one_plan_and_one_agreed_choice() {
        let claimed = |r: u32| format!(r#"{{"event":"comm_claimed","cid":0,"rank":{r}}}"#);
        let plan = r#"{"event":"autotune_plan","collective":"barrier","cid":0,"rank":0,"plan":"trial","candidates":[2,3]}"#;
        let chose = |r: u32, radix: u32| {
            format!(
                r#"{{"event":"autotune","collective":"barrier","cid":0,"rank":{r},"chosen":{radix},"table":{{"rows":[{{"value":2}},{{"value":3}}]}}}}"#
            )
        };
        let (c0, c1) = (claimed(0), claimed(1));
        let (agree0, agree1, differ1) = (chose(0, 3), chose(1, 3), chose(1, 2));
        assert_eq!(judge_events("autotune", 2, &[&[&c0, plan, &agree0], &[&c1, &agree1]]), None);
        assert!(judge_events("autotune", 2, &[&[&c0, plan, &agree0], &[&c1, &differ1]]).is_some());
        // the barrier's choice must be made; the allreduce's need not
        assert!(judge_events("autotune", 2, &[&[&c0, plan], &[&c1]]).is_some());
        let plan = plan.replace("barrier", "allreduce");
        assert_eq!(judge_events("autotune-allreduce", 2, &[&[&c0, &plan], &[&c1]]), None);
    }

    #[test]
    fn events_refused_wants_every_rank_to_warn_and_the_links_untouched() {
        let dir = std::env::temp_dir().join(format!("mpi-runner-refused-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("planted")).unwrap();
        std::fs::write(dir.join("planted/victim"), "keep\n").unwrap();
        let warning = "coll:rdma: warning: coll_rdma_events_file: cannot create /x/ev.0 (a link); running on without events\n";
        let judge = |log: &str| {
            let run = Run { root: Path::new("/"), dir: &dir, np: 2, all_log: log, secs: 1.0, expect_transport: "shm", launcher_note: None, earlier_windows: &Default::default() };
            Check::parse("events-refused:planted").unwrap().judge(&run).0
        };
        assert_eq!(judge(&warning.repeat(2)), None);
        assert_eq!(judge(warning).unwrap(), "1 rank(s) warned that the events file was refused, expected 2");
        std::fs::write(dir.join("planted/absent"), "").unwrap();
        std::fs::write(dir.join("planted/victim"), "{\"v\":1}\n").unwrap();
        let why = judge(&warning.repeat(2)).unwrap();
        assert!(why.contains("victim was written through") && why.contains("absent was created through"), "{why}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn smaller_window_than_compares_with_the_earlier_case() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let dir = std::env::temp_dir().join(format!("mpi-runner-window-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("events")).unwrap();
        let ready = |rank: u32, window: u64| {
            format!(r#"{{"event":"comm_ready","cid":0,"rank":{rank},"window_bytes":{window}}}"#)
        };
        std::fs::write(dir.join("events/rank-0.jsonl"), format!("{}\n{}\n", ready(0, 5000), ready(0, 9000))).unwrap();
        std::fs::write(dir.join("events/rank-1.jsonl"), ready(1, 1) + "\n").unwrap();
        assert_eq!(window_bytes(&dir), Some(5000));
        let earlier: std::collections::BTreeMap<String, u64> = [("big".to_string(), 6000), ("small".to_string(), 5000)].into();
        let judge = |check: &str| {
            let run =
                Run { root: &root, dir: &dir, np: 2, all_log: "", secs: 1.0, expect_transport: "shm", launcher_note: None, earlier_windows: &earlier };
            Check::parse(check).unwrap().judge(&run).0
        };
        assert_eq!(judge("smaller-window-than:big"), None);
        assert_eq!(judge("smaller-window-than:small").unwrap(), "comm 0's window is 5000 bytes per rank, not less than 5000 in small");
        assert!(judge("smaller-window-than:absent").unwrap().starts_with("no window size from absent, which must run first"));
        assert_eq!(Check::parse("smaller-window-than:big").unwrap().runs_after(), Some("big"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_or_malformed_checks_are_refused() {
        for text in ["smaller-window-than:", "gone:x", "events-refused:", "re:(", "within:soon", "within:-1"] {
            assert!(Check::parse(text).is_err(), "{text} was accepted");
        }
        assert!(judge("launcher-ended", "").0.unwrap().contains("was not ended as such"));
        for text in ["ev:true", "events-file:true", "autotune", "autotune-allreduce", "memory"] {
            assert!(Check::parse(text).unwrap().reads_events(), "{text}");
        }
        assert!(!Check::parse("says:x").unwrap().reads_events());
    }
}
