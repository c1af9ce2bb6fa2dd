//! The runner on small tables run by a stand-in for mpirun and stand-in
//! programs (tests/stand-in/; no Open MPI needed): a case that holds
//! passes, and a wrong expected outcome, a failing program, a check that
//! cannot hold, a hang and a leaked /dev/shm segment each make a case FAIL
//! with the reason run.sh gave, and so does a killed creator's orphan that
//! the next run does not reap; the closing line and the tally count them.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A scratch directory of its own for TEST (removed first).
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mpi-runner-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the runner on TABLE (written into DIR) with the stand-ins and
/// TIMEOUT seconds per case: its exit status and stdout.
fn run(dir: &Path, table: &str, timeout: u32, more: &[&str]) -> (i32, String) {
    std::fs::write(dir.join("table.toml"), table).unwrap();
    let stand_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stand-in");
    let out = Command::new(env!("CARGO_BIN_EXE_mpi-runner"))
        .arg("--root")
        .arg(root())
        .arg("--bin")
        .arg(&stand_in)
        .arg("--mpirun")
        .arg(stand_in.join("mpirun"))
        .arg("--logdir")
        .arg(dir.join("logs"))
        .args(["--timeout", &timeout.to_string(), "--timeout-max-factor", "1"])
        .arg("--tally")
        .arg(dir.join("tally"))
        .args(more)
        .arg(dir.join("table.toml"))
        .env_remove("KEEP_LOGS")
        .env_remove("EXPECT_TRANSPORT")
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn case(name: &str, np: u32, expect: &str, program: &str, checks: &[&str]) -> String {
    let checks: Vec<String> = checks.iter().map(|c| format!("'{c}'")).collect();
    format!(
        "[[case]]\nname = \"{name}\"\nnp = {np}\nexpect = \"{expect}\"\nprogram = \"{program}\"\nchecks = [{}]\n",
        checks.join(", ")
    )
}

/// The verdict word (PASS or FAIL) of case NAME and the lines below it.
fn verdict<'a>(stdout: &'a str, name: &str) -> (&'a str, String) {
    let lines: Vec<&str> = stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no line for {name} in:\n{stdout}"));
    let word = lines[at].split_whitespace().nth(1).unwrap();
    let details = lines[at + 1..].iter().take_while(|l| l.starts_with("      ")).copied().collect::<Vec<_>>();
    (word, details.join("\n"))
}

#[test]
fn outcomes_checks_and_leaks_are_judged() {
    let dir = scratch("outcomes");
    let table = [
        case("holds-np2", 2, "ok", "good", &["says:failures 0", "re:^result: rank 1 "]),
        case("self-test-np2", 2, "fail", "bad", &[]),
        case("refused-np2", 2, "refused", "bad", &[]),
        case("leak-expected-np1", 1, "ok", "leak", &["leaks"]),
        case("wrong-expectation-np2", 2, "fail", "good", &[]),
        case("program-fails-np3", 3, "ok", "bad", &[]),
        case("check-cannot-hold-np2", 2, "ok", "good", &["says:no such line", "nore:failures"]),
        case("leaks-np2", 2, "ok", "leak", &[]),
    ]
    .concat();
    let (status, stdout) = run(&dir, &table, 120, &[]);
    for name in ["holds-np2", "self-test-np2", "refused-np2", "leak-expected-np1"] {
        assert_eq!(verdict(&stdout, name).0, "PASS", "{name}:\n{stdout}");
    }
    let fails = [
        ("wrong-expectation-np2", "the program passed although its self-test broke it"),
        ("program-fails-np3", "program reported failures:\n      FAIL: rank 0: sum 3, expected 4"),
        ("program-fails-np3", "mpirun exited with status 1"),
        ("program-fails-np3", "0 of 3 rank(s) printed a clean result line"),
        ("check-cannot-hold-np2", "missing message: no such line"),
        ("check-cannot-hold-np2", "unexpected output:\n      result: rank 0 failures 0"),
        ("leaks-np2", "left in /dev/shm: coll_rdma.0."),
    ];
    for (name, reason) in fails {
        let (word, details) = verdict(&stdout, name);
        assert_eq!(word, "FAIL", "{name}:\n{stdout}");
        assert!(details.contains(reason), "{name} does not say '{reason}':\n{details}");
        assert!(details.contains("command: "), "{details}");
    }
    // the segments named as leaked (one per rank) are gone again, the
    // failed case's logs kept
    let (_, details) = verdict(&stdout, "leaks-np2");
    let named = details.lines().find_map(|l| l.trim().strip_prefix("left in /dev/shm: ")).unwrap();
    let named: Vec<&str> = named.split(' ').collect();
    assert_eq!(named.len(), 2, "{details}");
    for segment in named {
        assert!(segment.ends_with(".0.5e1f7e57") && !Path::new("/dev/shm").join(segment).exists(), "{segment}");
    }
    assert!(dir.join("logs/leaks-np2/all.log").exists() && !dir.join("logs/holds-np2").exists());
    assert_eq!(stdout.lines().last(), Some("4 passed, 4 failed"), "{stdout}");
    assert_eq!(status, 1);
    let tally = std::fs::read_to_string(dir.join("tally")).unwrap();
    assert_eq!(
        tally,
        "4 4 0\nwrong-expectation-np2\nprogram-fails-np3\ncheck-cannot-hold-np2\nleaks-np2"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_hang_is_ended_at_the_limit_and_recorded() {
    let dir = scratch("hang");
    let (status, stdout) = run(&dir, &case("hangs-np2", 2, "ok", "hang", &[]), 2, &[]);
    let (word, details) = verdict(&stdout, "hangs-np2");
    assert_eq!(word, "FAIL", "{stdout}");
    assert!(details.contains("timed out after 2s (load average "), "{details}");
    let hung = std::fs::read_to_string(dir.join("logs/hangs-np2/hung.txt")).unwrap();
    assert!(hung.contains("the job outlived its limit") && hung.contains("sleep 100000"), "{hung}");
    assert_eq!(status, 1);
    // the ranks were ended with the launcher
    let pids = std::fs::read_to_string(dir.join("logs/hangs-np2/pids")).unwrap();
    for pid in pids.lines() {
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
        assert!(!alive, "rank {pid} still runs");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn listing_selects_as_the_suite_does() {
    let dir = scratch("list");
    let table = [
        case("np2-section-one", 2, "ok", "good", &[]),
        case("parameter-np2", 2, "ok", "good", &[]),
    ]
    .concat();
    // --list prints every case, whatever --only says, and runs none
    let (status, stdout) = run(&dir, &table, 60, &["--list", "--only", "nothing"]);
    assert_eq!((status, stdout.as_str()), (0, "np2-section-one\nparameter-np2\n"));
    let (_, stdout) = run(&dir, &table, 60, &["--list", "--section1-only"]);
    assert_eq!(stdout, "np2-section-one\n");
    // --list-deps names the case a smaller-window-than: compares with
    let after = format!("{table}{}", case("after-np2", 2, "ok", "good", &["smaller-window-than:parameter-np2"]));
    let (_, stdout) = run(&dir, &after, 60, &["--list-deps"]);
    assert_eq!(stdout, "np2-section-one\nparameter-np2\nafter-np2\tparameter-np2\n");
    let (status, stdout) = run(&dir, &table, 60, &["--only", "^param"]);
    assert_eq!(status, 0);
    assert!(stdout.starts_with("parameter-np2") && stdout.ends_with("1 passed, 0 failed\n"), "{stdout}");
    // a bad table runs nothing and says why
    let (status, stdout) = run(&dir, "[[case]]\nname = \"x\"\n", 60, &[]);
    assert_eq!((status, stdout.as_str()), (2, ""));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wrappers_setups_and_conditions_shape_the_run() {
    let dir = scratch("wrapper");
    let table = r#"
        [[case]]
        name = "wrapped-np2"
        np = 2
        expect = "ok"
        program = "good"
        run_wrapper = ["sh", "-c", 'echo "wrapped rank $OMPI_COMM_WORLD_RANK"; exec "$@"', "wrapper"]
        mpirun_wrapper = ["sh", "-c", 'echo "mpirun through the wrapper"; exec "$@"', "wrapper"]
        checks = ["says:wrapped rank 0", "says:wrapped rank 1", "says:mpirun through the wrapper"]
        skip_unless = { sh = "test -x ci/runner/tests/stand-in/good", why = "no stand-in" }

        [[case]]
        name = "unmet-np2"
        np = 2
        expect = "ok"
        program = "bad"
        skip_unless = { sh = "exit 1", why = "the condition does not hold here" }

        [[case]]
        name = "set-up-np2"
        np = 2
        expect = "ok"
        program = "good"
        setup = 'echo "hello from setup" >"$CASE_DIR/greeting"'
        launch_wrapper = ["sh", "-c", 'echo "launched first"; exec "$@"', "launch"]
        run_wrapper = ["sh", "-c", 'cat "$0"; exec "$@"', "{case_dir}/greeting"]
        teardown = 'touch "$CASE_DIR/../torn-down"'
        checks = ["says:hello from setup", "says:launched first"]

        [[case]]
        name = "setup-fails-np2"
        np = 2
        expect = "ok"
        program = "good"
        setup = "echo no fixtures here >&2; exit 3"
    "#;
    let (status, stdout) = run(&dir, table, 60, &[]);
    assert_eq!(verdict(&stdout, "wrapped-np2").0, "PASS", "{stdout}");
    assert!(stdout.contains("unmet-np2") && stdout.contains("SKIP  (the condition does not hold here)"), "{stdout}");
    assert_eq!(verdict(&stdout, "set-up-np2").0, "PASS", "{stdout}");
    assert!(dir.join("logs/torn-down").exists(), "the teardown did not run");
    let failed = stdout.lines().find(|l| l.starts_with("setup-fails-np2")).unwrap();
    assert!(failed.contains("FAIL  (its setup failed: status 3, no fixtures here;"), "{failed}");
    assert_eq!(stdout.lines().last(), Some("2 passed, 1 failed, 1 skipped"), "{stdout}");
    assert_eq!(status, 1);
    // listed all the same
    let (_, listed) = run(&dir, table, 60, &["--list"]);
    assert_eq!(listed, "wrapped-np2\nunmet-np2\nset-up-np2\nsetup-fails-np2\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stock_skips_component_cases_and_drops_event_checks() {
    let dir = scratch("stock");
    let table = r#"
        [[case]]
        name = "both-np2"
        np = 2
        expect = "ok"
        program = "good"
        checks = ["ev:true", "says:failures 0"]

        [[case]]
        name = "component-only-np2"
        np = 2
        expect = "ok"
        program = "good"
        needs_component = true
    "#;
    let (_, listed) = run(&dir, table, 60, &["--list", "--stock"]);
    assert_eq!(listed, "both-np2\n");
    // without the component the events check is dropped (the stand-in
    // writes no events, so it would fail), the output check kept
    // ... and the case that needs the component says why it did not run
    let (status, stdout) = run(&dir, table, 60, &["--stock"]);
    assert_eq!((status, stdout.lines().last()), (0, Some("1 passed, 0 failed, 1 skipped")), "{stdout}");
    assert!(stdout.contains("component-only-np2") && stdout.contains("SKIP  (needs the component)"), "{stdout}");
    let (status, stdout) = run(&dir, table, 60, &["--stock", "--only", "both"]);
    assert_eq!(status, 0, "{stdout}");
    let (status, stdout) = run(&dir, table, 60, &["--only", "both"]);
    assert!(status == 1 && stdout.contains("0 events file(s)"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_killed_creators_orphan_must_be_reaped_by_the_next_run() {
    let dir = scratch("killed-first");
    // a nonce of this test run's own (hex, as the segment names' fields)
    let nonce = format!("c4ea7e{:x}", std::process::id());
    let killed_case = |name: &str, first: &str, then: &str| {
        format!(
            "[[case]]\nname = \"{name}\"\nnp = 2\nexpect = \"ok\"\nprogram = \"creator\"\n\
             creator_killed_first = {{ args = [\"{first}\", \"{nonce}\"] }}\nargs = [\"{then}\", \"{nonce}\"]\n"
        )
    };
    let table = [
        killed_case("reaped-np2", "hold", "reap"),
        killed_case("left-np2", "hold", "leave"),
        killed_case("missed-np2", "none", "reap"),
    ]
    .concat();
    let (status, stdout) = run(&dir, &table, 60, &[]);
    assert_eq!(verdict(&stdout, "reaped-np2").0, "PASS", "{stdout}");
    let (word, details) = verdict(&stdout, "left-np2");
    assert!(word == "FAIL" && details.contains("is still there: this run's setup did not reap it"), "{stdout}");
    let missed = stdout.lines().find(|l| l.starts_with("missed-np2")).unwrap();
    assert!(missed.contains("FAIL  (no coll_rdma.* segment of this job appeared"), "{stdout}");
    assert_eq!((status, stdout.lines().last()), (1, Some("1 passed, 2 failed")), "{stdout}");
    // the orphan left by left-np2 is removed by the runner
    let left = shm_with(&nonce);
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The /dev/shm entries whose names end with NONCE.
fn shm_with(nonce: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.ends_with(nonce))
        .collect()
}
