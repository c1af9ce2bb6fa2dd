//! mpi-runner: runs the MPI test cases that ci/mpi/cases/*.toml describe as
//! data (the table format: src/table.rs, docs/tests.md), as ci/mpi/run.sh's
//! run_test runs the cases written as shell: one mpirun per case under a
//! load-scaled time limit and a hang watcher (src/launch.rs), the expected
//! outcome (src/verdict.rs), the listed checks (src/checks.rs) and the
//! /dev/shm leak check (src/shm.rs), a first run whose segment creator is
//! killed where a case asks for one (src/killed_first.rs); one PASS or FAIL line per case in
//! run.sh's format and the closing line "N passed, N failed" (", N skipped"
//! when some were).
//!
//! ci/mpi-tests.sh calls it where the table's cases run among the others,
//! with the settings it has worked out (--list-var for its lists such as V
//! and SERVED, --tally to add the counts to its own). Exit status: 0 when
//! every case passed, 1 when one failed, 2 for a bad table or argument
//! (then nothing runs).

mod checks;
mod killed_first;
mod launch;
mod shm;
mod table;
mod verdict;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use checks::Check;
use launch::Launcher;
use table::{Case, Lists};

const HELP: &str = "\
usage: mpi-runner [options] TABLE...
  runs the cases of the TABLEs (TOML, format in docs/tests.md) in order
  --root DIR          the checkout (ci/ and its tools; default .)
  --bin DIR           the test programs (default ROOT/build/tests)
  --logdir DIR        each case's logs go to DIR/NAME (default ROOT/build/mpi-tests)
  --mpirun CMD        the launcher (default mpirun; the self-tests give a stand-in)
  --ompi-major N      Open MPI's major version: 5 and later capture output per rank
                      with ci/rank-output.sh (default 4)
  --component-path P  mca_base_component_path of every run (default SYS_DEFAULT:ROOT/build/components)
  --hosts HOSTS       mpirun --host HOSTS, TCP between hosts
  --transport NAME    the transport the events must report (EXPECT_TRANSPORT wins)
  --section1-only     run only the cases named np<N>-... (another transport, hosts, --mca)
  --stock             stock Open MPI, no component: the cases that need it say
                      SKIP (--list leaves them out), the others run without
                      the checks on its events
  --timeout S         seconds per run on an idle machine (default TEST_TIMEOUT or 120)
  --timeout-max-factor F  the most the load per core stretches it (default
                      TEST_TIMEOUT_MAX_FACTOR or 6)
  --only REGEX        run only the cases whose name REGEX matches
  --list              print the case names, run nothing
  --list-deps         the same, each name followed by a tab and the cases it
                      must run after (its smaller-window-than:), if any
  --list-var NAME ITEMS  the list @NAME of the tables: ITEMS one element a line
  --var NAME VALUE    {NAME} in the tables' strings stands for VALUE
  --keep-logs         keep the logs of passing cases (default KEEP_LOGS=1)
  --pids-file FILE    append every rank's pid to FILE (the caller's final leak check)
  --tally FILE        write 'PASSED FAILED SKIPPED' and the failed names there
  --no-summary        no closing line (the caller prints its own)";

struct Options {
    tables: Vec<PathBuf>,
    logdir: PathBuf,
    transport: Option<String>,
    section1_only: bool,
    stock: bool,
    only: Option<regex::Regex>,
    list: bool,
    /// --list-deps: each name followed by a tab and the cases it runs after.
    list_deps: bool,
    lists: Lists,
    vars: table::Vars,
    keep_logs: bool,
    pids_file: Option<PathBuf>,
    tally: Option<PathBuf>,
    summary: bool,
    launcher: Launcher,
}

fn parse_args(args: Vec<String>) -> Result<Options, String> {
    let env_or = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_string());
    let mut root = PathBuf::from(".");
    let (mut bin, mut logdir, mut component_path, mut hosts, mut transport) = (None, None, None, None, None);
    let mut mpirun = "mpirun".to_string();
    let mut ompi_major = 4;
    let mut timeout = env_or("TEST_TIMEOUT", "120");
    let mut factor = env_or("TEST_TIMEOUT_MAX_FACTOR", "6");
    let (mut only, mut pids_file, mut tally) = (None, None, None);
    let (mut list, mut list_deps, mut section1_only, mut stock, mut summary) = (false, false, false, false, true);
    let mut keep_logs = std::env::var("KEEP_LOGS").is_ok_and(|k| k == "1");
    let mut lists = Lists::new();
    let mut vars = table::Vars::new();
    let mut tables = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().ok_or(format!("{arg} needs {what}"));
        match arg.as_str() {
            "--root" => root = value("a directory")?.into(),
            "--bin" => bin = Some(PathBuf::from(value("a directory")?)),
            "--logdir" => logdir = Some(PathBuf::from(value("a directory")?)),
            "--mpirun" => mpirun = value("a command")?,
            "--ompi-major" => {
                let v = value("a version")?;
                ompi_major = v.parse().map_err(|_| format!("--ompi-major takes a number, not '{v}'"))?;
            }
            "--component-path" => component_path = Some(value("a path")?),
            "--hosts" => hosts = Some(value("a host list")?),
            "--transport" => transport = Some(value("a name")?),
            "--section1-only" => section1_only = true,
            "--stock" => stock = true,
            "--timeout" => timeout = value("seconds")?,
            "--timeout-max-factor" => factor = value("a factor")?,
            "--only" => {
                let re = value("a regular expression")?;
                only = Some(regex::Regex::new(&re).map_err(|e| format!("--only '{re}': {e}"))?);
            }
            "--list" => list = true,
            "--list-deps" => (list, list_deps) = (true, true),
            "--var" => {
                let name = value("a name and its value")?;
                vars.insert(name, value("a value")?);
            }
            "--list-var" => {
                let name = value("a name and its items")?;
                let items = value("the items, one a line")?;
                lists.insert(name, items.lines().map(String::from).collect());
            }
            "--keep-logs" => keep_logs = true,
            "--pids-file" => pids_file = Some(PathBuf::from(value("a file")?)),
            "--tally" => tally = Some(PathBuf::from(value("a file")?)),
            "--no-summary" => summary = false,
            "-h" | "--help" => return Err(String::new()),
            other if other.starts_with('-') => return Err(format!("unknown option '{other}' (try --help)")),
            table => tables.push(PathBuf::from(table)),
        }
    }
    if tables.is_empty() {
        return Err("no table given (try --help)".into());
    }
    let timeout = timeout.parse().map_err(|_| format!("the timeout '{timeout}' is not a number of seconds"))?;
    let timeout_max_factor =
        factor.parse().map_err(|_| format!("the timeout's factor '{factor}' is not a number"))?;
    let launcher = Launcher {
        bin: bin.unwrap_or_else(|| root.join("build/tests")),
        mpirun,
        ompi_major,
        component_path: component_path.unwrap_or_else(|| format!("SYS_DEFAULT:{}", root.join("build/components").display())),
        hosts,
        timeout,
        timeout_max_factor,
        root: root.clone(),
    };
    Ok(Options {
        tables,
        logdir: logdir.unwrap_or_else(|| root.join("build/mpi-tests")),
        transport,
        section1_only,
        stock,
        only,
        list,
        list_deps,
        lists,
        vars,
        keep_logs,
        pids_file,
        tally,
        summary,
        launcher,
    })
}

/// Should CASE run (or, with --list, be listed)? As run.sh's want, --list
/// lists every case of the section, whatever --only says.
fn wanted(options: &Options, name: &str) -> bool {
    if options.section1_only {
        let after_np = name.strip_prefix("np").unwrap_or("");
        if !after_np.starts_with(|c: char| c.is_ascii_digit()) {
            return false;
        }
    }
    options.list || options.only.as_ref().is_none_or(|re| re.is_match(name))
}

#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
    failed_names: Vec<String>,
}

/// Why a case that needs GIB GiB of free memory cannot run now, if it
/// cannot (watch.sh's free_memory_kib: available memory, or less where a
/// cgroup limits this one).
fn too_little_memory(root: &Path, gib: u64) -> Option<String> {
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(". \"$1\"; free_memory_kib")
        .arg("free_memory_kib")
        .arg(root.join("ci/mpi/watch.sh"))
        .output();
    let free_kib: u64 = out.ok().and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok()).unwrap_or(0);
    (free_kib < gib * 1024 * 1024).then(|| format!("needs {gib} GiB of free memory, {} MiB free", free_kib / 1024))
}

/// Does the shell condition SH (a case's skip_unless) hold? Run by bash in
/// the checkout, with the caller's environment.
fn condition_holds(root: &Path, sh: &str) -> bool {
    std::process::Command::new("bash")
        .arg("-c")
        .arg(sh)
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs a case's SETUP (or teardown) script (bash, in the checkout, CASE_DIR=DIR): Err
/// with what it printed when it fails.
fn run_setup(root: &Path, dir: &Path, setup: &str) -> Result<(), String> {
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(setup)
        .current_dir(root)
        .env("CASE_DIR", dir)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
    Err(format!("status {}{}", out.status.code().unwrap_or(-1), if said.is_empty() { String::new() } else { format!(", {said}") }))
}

/// A fresh run id, as run.sh's (16 hex digits from /dev/urandom).
fn run_id() -> String {
    let mut bytes = [0u8; 8];
    if let Ok(mut random) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut random, &mut bytes);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Appends PIDS to the caller's --pids-file (its final leak check), if any.
fn record_pids(options: &Options, pids: impl IntoIterator<Item = u32>) -> std::io::Result<()> {
    let Some(file) = &options.pids_file else { return Ok(()) };
    let mut all = std::fs::OpenOptions::new().create(true).append(true).open(file)?;
    pids.into_iter().try_for_each(|pid| writeln!(all, "{pid}"))
}

/// Runs CASE and prints its PASS or FAIL line; true when it passed.
fn run_case(options: &Options, case: &Case, windows: &mut BTreeMap<String, u64>) -> std::io::Result<bool> {
    let root = &options.launcher.root;
    let dir = options.logdir.join(&case.name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let in_dir = |items: &[String]| -> Vec<String> {
        items.iter().map(|item| item.replace(table::CASE_DIR, &dir.display().to_string())).collect()
    };
    if let Some(setup) = &case.setup
        && let Err(why) = run_setup(root, &dir, setup)
    {
        println!("{:<44} FAIL  (its setup failed: {why}; logs: {})", case.name, dir.display());
        return Ok(false);
    }
    // the orphan a first run left, for the check after this case's run
    let mut orphan = None;
    if let Some(first) = &case.creator_killed_first {
        match killed_first::run(&options.launcher, &dir, case.np, &case.program, first, &run_id()) {
            Ok((left, pids)) => {
                record_pids(options, pids)?;
                orphan = Some(left);
            }
            Err(why) => {
                println!("{:<44} FAIL  ({why}; logs: {})", case.name, dir.display());
                return Ok(false);
            }
        }
    }
    // gone before this run: another job's setup on this machine (a second
    // test run) reaped it first, which is the behaviour under test
    let reaped_by_another = orphan.as_ref().is_some_and(|o| !Path::new("/dev/shm").join(&o.segment).exists());
    let mut opts = in_dir(&case.mpirun);
    if case.checks.iter().any(Check::reads_events) {
        std::fs::create_dir_all(dir.join("events"))?;
        opts.extend(["--mca".into(), "coll_rdma_events_file".into(), dir.join("events/rank-%r.jsonl").display().to_string()]);
    }
    let shm_dir = Path::new("/dev/shm");
    let (shm_before, crtest_before) = (shm::list(shm_dir, "coll_rdma."), shm::list(shm_dir, "crtest."));
    let id = run_id();
    let mut run_wrapper = in_dir(&case.run_wrapper);
    if let Some(first) = run_wrapper.first_mut().filter(|w| w.contains('/') && !w.starts_with('/')) {
        *first = root.join(&first).display().to_string();
    }
    let mut cmd = in_dir(&case.mpirun_wrapper);
    let args = in_dir(&case.args);
    let launch_wrapper = in_dir(&case.launch_wrapper);
    let ranks_run =
        launch::RanksRun { launch_wrapper: &launch_wrapper, wrapper: &run_wrapper, program: &case.program, args: &args };
    cmd.extend(options.launcher.command(&dir, &id, case.np, &opts, &ranks_run));
    std::fs::write(dir.join("command"), cmd.join(" ") + "\n")?;
    let ended = options.launcher.run(&dir, &id, case.np, &cmd, case.launcher_grace_seconds)?;

    let ranks = verdict::rank_dirs(&dir);
    let all_log = verdict::all_output(&dir, &ranks);
    std::fs::write(dir.join("all.log"), &all_log)?;
    let run = checks::Run {
        root,
        dir: &dir,
        np: case.np,
        all_log: &all_log,
        secs: ended.secs,
        expect_transport: &case.expect_transport.clone().unwrap_or_else(|| {
            std::env::var("EXPECT_TRANSPORT").unwrap_or_else(|_| options.transport.clone().unwrap_or_else(|| "shm".into()))
        }),
        launcher_note: ended.launcher_note.as_deref(),
        earlier_windows: windows,
    };
    let mut why = Vec::new();
    if ended.rc == 124 || ended.rc == 137 {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let load: Vec<&str> = load.split_whitespace().take(3).collect();
        why.push(format!(
            "timed out after {}s (load average {} at the end; what its processes were doing: {}/hung.txt)",
            ended.limit,
            load.join(" "),
            run.shown_dir()
        ));
    }
    why.extend(verdict::judge(case.expect, ended.rc, case.np, &dir, &ranks, &all_log));
    let mut stalls = 0;
    for check in &case.checks {
        let (reason, accepted) = check.judge(&run);
        why.extend(reason);
        stalls = accepted.unwrap_or(stalls);
    }
    let shown_dir = run.shown_dir();
    // kept after the logs go, for a later case's smaller-window-than
    if let Some(window) = checks::window_bytes(&dir) {
        windows.insert(case.name.clone(), window);
    }

    if let Some(orphan) = &orphan
        && shm_dir.join(&orphan.segment).exists()
    {
        why.push(format!(
            "/dev/shm/{} (its creator, pid {}, killed in the first run) is still there: this run's setup did not reap it",
            orphan.segment, orphan.creator
        ));
        let _ = std::fs::remove_file(shm_dir.join(&orphan.segment));
    }

    // leftovers in /dev/shm: segments this run's ranks created and left
    let pids = shm::read_pids(&dir.join("pids"));
    record_pids(options, pids.iter().copied())?;
    let leaked = shm::leaked(&shm_before, &shm::list(shm_dir, "coll_rdma."), &pids, shm::mapped_by_someone);
    if case.checks.contains(&Check::Leaks) {
        if leaked.is_empty() {
            why.push("the leak check missed the segment this run left in /dev/shm".into());
        }
    } else if !leaked.is_empty() {
        why.push(format!("left in /dev/shm: {}", leaked.join(" ")));
    }
    for name in &leaked {
        let _ = std::fs::remove_file(shm_dir.join(name));
    }
    for name in shm::list(shm_dir, "crtest.").difference(&crtest_before) {
        if !shm::mapped_by_someone(name) {
            let _ = std::fs::remove_file(shm_dir.join(name));
        }
    }

    if let Some(teardown) = &case.teardown
        && let Err(failed) = run_setup(root, &dir, teardown)
    {
        why.push(format!("its teardown failed: {failed}"));
    }

    let secs = format!("{:.1}", ended.secs);
    if why.is_empty() {
        if stalls > 0 {
            println!("{:<44} PASS  {secs:>6}s  ({stalls} stall warning(s) accepted)", case.name);
        } else if reaped_by_another {
            println!("{:<44} PASS  {secs:>6}s  (the killed creator's segment was reaped by another job's setup first)", case.name);
        } else {
            println!("{:<44} PASS  {secs:>6}s", case.name);
        }
        if let Some(note) = &ended.launcher_note {
            println!("      note: {note}");
        }
        if !options.keep_logs && ended.launcher_note.is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        return Ok(true);
    }
    println!("{:<44} FAIL  {secs:>6}s  (logs: {shown_dir})", case.name);
    why.extend(ended.launcher_note.iter().map(|note| format!("note: {note}")));
    for reason in &why {
        for line in reason.lines() {
            println!("      {line}");
        }
    }
    println!("      command: {}", cmd.join(" "));
    Ok(false)
}

fn main() {
    let options = match parse_args(std::env::args().skip(1).collect()) {
        Ok(options) => options,
        Err(e) if e.is_empty() => {
            println!("{HELP}");
            return;
        }
        Err(e) => {
            eprintln!("mpi-runner: {e}");
            std::process::exit(2);
        }
    };
    let mut cases = Vec::new();
    for table in &options.tables {
        let parsed = std::fs::read_to_string(table)
            .map_err(|e| format!("{}: {e}", table.display()))
            .and_then(|text| table::parse(&table.display().to_string(), &text, &options.lists, &options.vars));
        match parsed {
            // (stock Open MPI writes no events: those checks go too)
            Ok(more) if options.stock => cases.extend(more.into_iter().map(|mut c| {
                c.checks.retain(|check| !check.reads_events());
                c
            })),
            Ok(more) => cases.extend(more),
            Err(e) => {
                eprintln!("mpi-runner: {e}");
                std::process::exit(2);
            }
        }
    }
    let names: BTreeSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    if names.len() != cases.len() {
        eprintln!("mpi-runner: two tables name the same case");
        std::process::exit(2);
    }
    let mut tally = Tally::default();
    let mut windows = BTreeMap::new();
    for case in cases.iter().filter(|c| wanted(&options, &c.name)) {
        let needs_absent_component = options.stock && case.needs_component;
        if options.list && needs_absent_component {
            continue;
        }
        if options.list {
            let after: Vec<&str> = case.checks.iter().filter_map(Check::runs_after).collect();
            if options.list_deps && !after.is_empty() {
                println!("{}\t{}", case.name, after.join(" "));
            } else {
                println!("{}", case.name);
            }
            continue;
        }
        if needs_absent_component {
            println!("{:<44} SKIP  (needs the component)", case.name);
            tally.skipped += 1;
            continue;
        }
        let unmet = case.skip_unless.as_ref().filter(|c| !condition_holds(&options.launcher.root, &c.sh)).map(|c| c.why.clone());
        let too_little = || case.needs_free_memory_gib.and_then(|gib| too_little_memory(&options.launcher.root, gib));
        if let Some(reason) = unmet.or_else(too_little) {
            println!("{:<44} SKIP  ({reason})", case.name);
            tally.skipped += 1;
            continue;
        }
        match run_case(&options, case, &mut windows) {
            Ok(true) => tally.passed += 1,
            Ok(false) => {
                tally.failed += 1;
                tally.failed_names.push(case.name.clone());
            }
            Err(e) => {
                println!("{:<44} FAIL  (the runner could not run it: {e})", case.name);
                tally.failed += 1;
                tally.failed_names.push(case.name.clone());
            }
        }
    }
    if let Some(file) = &options.tally {
        let text = format!("{} {} {}\n{}", tally.passed, tally.failed, tally.skipped, tally.failed_names.join("\n"));
        if let Err(e) = std::fs::write(file, text) {
            eprintln!("mpi-runner: cannot write {}: {e}", file.display());
            std::process::exit(2);
        }
    }
    if options.summary && !options.list {
        if tally.skipped > 0 {
            println!("{} passed, {} failed, {} skipped", tally.passed, tally.failed, tally.skipped);
        } else {
            println!("{} passed, {} failed", tally.passed, tally.failed);
        }
    }
    std::process::exit(if tally.failed == 0 { 0 } else { 1 });
}
