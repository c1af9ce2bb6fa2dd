//! The case tables: TOML files that describe MPI test cases as data.
//!
//! A table holds an optional `[lists]` section and any number of `[[case]]`
//! entries, in the order they run (and `--list` prints them):
//!
//! ```toml
//! [lists]                      # named lists of strings, spliced with "@NAME"
//! PR = ["--mca", "coll_rdma_allreduce_parallel_min_bytes", "16384"]
//!
//! [[case]]
//! name = "allreduce-degree-{k}-np{np}"
//! each = [{ k = 1, np = 5 }, { k = 2, np = 8 }]   # optional: one case per entry
//! np = "{np}"                  # an integer, or a string that becomes one
//! expect = "ok"                # ok | fail | refused (ci/mpi/run.sh's EXPECT)
//! mpirun = ["@PR", "--mca", "coll_rdma_allreduce_degree", "{k}", "@V"]
//! program = "reduce_ops"       # a program of build/tests/
//! args = ["@RO_PARAM"]
//! checks = ["@SERVED", 'ev:every_rank_ready(0; .allreduce.degree == {k})']
//! needs_free_memory_gib = 8     # optional: SKIP (saying why) with less free
//! run_wrapper = ["ci/per-rank-mca.sh", "x", "1", "2"]  # optional: each rank runs the program through it
//! skip_unless = { sh = "command -v jq", why = "needs jq" }  # optional: SKIP unless bash -c sh succeeds
//! setup = 'mkdir -p "$CASE_DIR/x"'  # optional: bash runs it first, in its log directory
//! mpirun_wrapper = ["unshare", "-m", "..."]  # optional: runs mpirun with its arguments
//! needs_component = true        # optional: SKIP with --stock (not listed)
//! launch_wrapper = ["sh", "-c", "..."]  # optional: each rank, before the output capture
//! teardown = 'rm -f "$CASE_DIR/x"'    # optional: bash runs it once the run is judged
//! launcher_grace_seconds = 5    # optional: in place of TEST_LAUNCHER_GRACE (20)
//! expect_transport = "shm udp"  # optional: the transports served calls may report
//! multi_rank_checks = ["@UDP_PROTECTED"]  # optional: more checks, only where np > 1
//! creator_killed_first = { mpirun = ["--mca", "..."], args = ["-n", "10"] }  # optional:
//!                               # a first run whose segment creator is killed; the
//!                               # case's run must leave the orphan gone (killed_first.rs)
//! ```
//!
//! Instead of `[[case]]` entries, a table may hold `[[block]]` entries,
//! each with its `[[block.case]]` entries and an optional
//! `each_from = { list = "NPS", as = "np" }`: the block's cases all run for
//! the list's first element (`{np}` standing for it), then all for the
//! next, and so on (a list the caller gives at run time, such as the
//! suite's `--nps`; an empty one leaves the block out). A table holds
//! cases or blocks, not both (TOML keeps no order between the two).
//!
//! `{case_dir}` stands, in mpirun, args and run_wrapper, for the case's log
//! directory (known only when it runs: `CASE_DIR`), so that a setup's
//! fixtures can be named; `{NAME}` for a caller's `--var NAME VALUE` is
//! replaced like an `each` key (the entry's own keys win).
//!
//! Invariants: every case the runner returns has a non-empty name, a
//! process count of at least 1, a known expectation and only checks the
//! runner knows (`checks::Check`); `{KEY}` is replaced only for the keys of
//! the case's own `each` entry (so a jq object such as `{ "served": 2 }` is
//! never touched) and an element that is exactly `@NAME` is replaced by the
//! list NAME's elements (the table's `[lists]`, then the caller's
//! `--list-var`s). Anything else (an unknown key, a missing list, a key left
//! unreplaced) is an error naming the case, never a case run differently.

use std::collections::BTreeMap;

use crate::checks::Check;
use crate::killed_first::CreatorKilledFirst;

/// What the run of a case must end as (ci/mpi/run.sh's EXPECT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The program passes: every rank prints a clean result line.
    Ok,
    /// A checker self-test: the program must report failures.
    Fail,
    /// Open MPI must refuse the job: a non-zero status, no crash.
    Refused,
}

/// One case, after its `each` entry, its lists and its keys are applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub name: String,
    pub np: u32,
    pub expect: Expect,
    /// mpirun's options, before the program.
    pub mpirun: Vec<String>,
    pub program: String,
    pub args: Vec<String>,
    /// The checks; `multi_rank_checks` are among them where np > 1 (a
    /// single rank sets up no transport, so it reports no comm_ready).
    pub checks: Vec<Check>,
    /// Skipped, saying so, when less memory than this is free.
    pub needs_free_memory_gib: Option<u64>,
    /// A command each rank runs with the program as its arguments (run.sh's
    /// RUN_WRAPPER; a relative first word is the checkout's).
    pub run_wrapper: Vec<String>,
    /// A command that runs mpirun with its arguments (run.sh's MPIRUN_WRAPPER).
    pub mpirun_wrapper: Vec<String>,
    /// Only run with the component (--stock leaves the case out).
    pub needs_component: bool,
    /// A command each rank runs first, before the output capture (run.sh's
    /// LAUNCH_WRAPPER).
    pub launch_wrapper: Vec<String>,
    /// A bash script run once the run is judged (and before its logs go),
    /// with CASE_DIR: what the case leaves that the runner does not clear.
    pub teardown: Option<String>,
    /// Seconds mpirun may outlive all its ranks before it is ended, in
    /// place of TEST_LAUNCHER_GRACE (ci/runner/src/launch.rs).
    pub launcher_grace_seconds: Option<u64>,
    /// The transports the served calls may report, in place of the caller's.
    pub expect_transport: Option<String>,
    /// Skipped, saying why, unless this shell condition holds when the case's
    /// turn comes.
    pub skip_unless: Option<Condition>,
    /// A bash script run before the launch, with CASE_DIR (its log
    /// directory) in its environment: fixtures the case needs.
    pub setup: Option<String>,
    /// A first run whose segment creator is killed, before the case's own.
    pub creator_killed_first: Option<CreatorKilledFirst>,
}

/// The placeholder of the case's log directory, replaced when it runs.
pub const CASE_DIR: &str = "{case_dir}";

/// A shell condition a case needs (`skip_unless`), and what SKIP says
/// when it does not hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub sh: String,
    pub why: String,
}

/// Lists given by the caller, spliced where a table says `@NAME`.
pub type Lists = BTreeMap<String, Vec<String>>;
/// Values given by the caller, replaced where a table says `{NAME}`.
pub type Vars = BTreeMap<String, String>;

const CASE_KEYS: &[&str] = &[
    "name",
    "each",
    "np",
    "expect",
    "mpirun",
    "program",
    "args",
    "checks",
    "multi_rank_checks",
    "needs_free_memory_gib",
    "run_wrapper",
    "mpirun_wrapper",
    "needs_component",
    "launch_wrapper",
    "teardown",
    "launcher_grace_seconds",
    "expect_transport",
    "skip_unless",
    "setup",
    "creator_killed_first",
];

/// The cases of the table TEXT (read from SOURCE, named in errors).
pub fn parse(source: &str, text: &str, caller_lists: &Lists, caller_vars: &Vars) -> Result<Vec<Case>, String> {
    let doc: toml::Table = text.parse().map_err(|e| format!("{source}: not TOML: {e}"))?;
    let mut lists = caller_lists.clone();
    for (key, value) in &doc {
        match key.as_str() {
            "lists" => {
                let table = value.as_table().ok_or(format!("{source}: [lists] must be a table"))?;
                for (name, items) in table {
                    lists.insert(name.clone(), strings(items, &format!("{source}: lists.{name}"))?);
                }
            }
            "case" | "block" => {}
            other => return Err(format!("{source}: unknown top-level key '{other}' (lists, case, block)")),
        }
    }
    if doc.contains_key("case") && doc.contains_key("block") {
        // (TOML keeps no order between the two, so the run order would be a guess)
        return Err(format!("{source}: both [[case]] and [[block]]: put the cases in a block"));
    }
    let mut entries = Vec::new();
    if let Some(cases) = doc.get("case") {
        entries.extend(case_entries(cases, source)?.into_iter().map(|entry| (entry, BTreeMap::new())));
    }
    if let Some(blocks) = doc.get("block") {
        let blocks = blocks.as_array().ok_or(format!("{source}: 'block' must be [[block]] entries"))?;
        for (index, block) in blocks.iter().enumerate() {
            entries.extend(block_entries(block, &lists, &format!("{source}: block {}", index + 1))?);
        }
    }
    let mut cases = Vec::new();
    for (entry, block_keys) in entries {
        let label = match entry.get("name").and_then(|n| n.as_str()) {
            Some(name) => format!("{source}: case '{name}'"),
            None => format!("{source}: a case without a name"),
        };
        if let Some(unknown) = entry.keys().find(|k| !CASE_KEYS.contains(&k.as_str())) {
            return Err(format!("{label}: unknown key '{unknown}' ({})", CASE_KEYS.join(", ")));
        }
        for keys in each_entries(entry, &label)? {
            let mut keys_and_vars = caller_vars.clone();
            keys_and_vars.extend(block_keys.clone());
            keys_and_vars.extend(keys);
            cases.push(one_case(entry, &keys_and_vars, &lists, &label)?);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for case in &cases {
        if !seen.insert(case.name.as_str()) {
            return Err(format!("{source}: two cases are named '{}'", case.name));
        }
    }
    Ok(cases)
}

/// The `[[case]]` entries of VALUE (a table's or a block's `case`).
fn case_entries<'a>(value: &'a toml::Value, label: &str) -> Result<Vec<&'a toml::Table>, String> {
    let entries = value.as_array().ok_or(format!("{label}: 'case' must be [[case]] entries"))?;
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| entry.as_table().ok_or(format!("{label}: case {} is not a table", index + 1)))
        .collect()
}

/// A block's cases, in the order they run: all of them for the first
/// element of its `each_from` list (the key `as` names standing for the
/// element), then all for the next, and so on; once, without a key, when
/// it has no `each_from`. An empty list is no case at all (the caller's
/// way of leaving a block out).
fn block_entries<'a>(
    block: &'a toml::Value,
    lists: &Lists,
    label: &str,
) -> Result<Vec<(&'a toml::Table, BTreeMap<String, String>)>, String> {
    let block = block.as_table().ok_or(format!("{label} is not a table"))?;
    if let Some(unknown) = block.keys().find(|k| !["each_from", "case"].contains(&k.as_str())) {
        return Err(format!("{label}: unknown key '{unknown}' (each_from, case)"));
    }
    let cases = case_entries(block.get("case").ok_or(format!("{label} has no [[block.case]]"))?, label)?;
    let Some(each_from) = block.get("each_from") else {
        return Ok(cases.into_iter().map(|case| (case, BTreeMap::new())).collect());
    };
    let each_from = each_from.as_table().ok_or(format!("{label}: each_from must be {{ list = ..., as = ... }}"))?;
    if let Some(unknown) = each_from.keys().find(|k| !["list", "as"].contains(&k.as_str())) {
        return Err(format!("{label}: each_from has an unknown key '{unknown}' (list, as)"));
    }
    let field = |key: &str| -> Result<String, String> {
        let value = each_from.get(key).ok_or(format!("{label}: each_from needs '{key}'"))?;
        scalar(value, &format!("{label}: each_from.{key}"))
    };
    let (name, key) = (field("list")?, field("as")?);
    let elements = lists.get(&name).ok_or(format!("{label}: no list named '{name}' for each_from"))?;
    let mut out = Vec::new();
    for element in elements {
        out.extend(cases.iter().map(|&case| (case, BTreeMap::from([(key.clone(), element.clone())]))));
    }
    Ok(out)
}

/// The substitutions of each case an entry stands for: its `each` list, or
/// one case without keys.
fn each_entries(entry: &toml::Table, label: &str) -> Result<Vec<BTreeMap<String, String>>, String> {
    let Some(each) = entry.get("each") else { return Ok(vec![BTreeMap::new()]) };
    let each = each.as_array().ok_or(format!("{label}: 'each' must be a list of tables"))?;
    if each.is_empty() {
        return Err(format!("{label}: 'each' is empty (the case would never run)"));
    }
    each.iter()
        .map(|keys| {
            let keys = keys.as_table().ok_or(format!("{label}: every 'each' entry must be a table"))?;
            keys.iter()
                .map(|(key, value)| Ok((key.clone(), scalar(value, &format!("{label}: each.{key}"))?)))
                .collect()
        })
        .collect()
}

fn one_case(
    entry: &toml::Table,
    keys: &BTreeMap<String, String>,
    lists: &Lists,
    label: &str,
) -> Result<Case, String> {
    let text = |field: &str| -> Result<String, String> {
        let value = entry.get(field).ok_or(format!("{label}: '{field}' is missing"))?;
        substitute(&scalar(value, &format!("{label}: {field}"))?, keys, label)
    };
    let list_in = |table: &toml::Table, field: &str| -> Result<Vec<String>, String> {
        let Some(value) = table.get(field) else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for item in strings(value, &format!("{label}: {field}"))? {
            match item.strip_prefix('@') {
                Some(name) => {
                    let spliced = lists.get(name).ok_or(format!("{label}: no list named '{name}' for {field}"))?;
                    out.extend(spliced.iter().cloned());
                }
                None => out.push(substitute(&item, keys, label)?),
            }
        }
        Ok(out)
    };
    let list = |field: &str| list_in(entry, field);
    let name = text("name")?;
    let label = &format!("{label} ('{name}')");
    let np_text = text("np")?;
    let np = np_text
        .parse::<u32>()
        .ok()
        .filter(|&n| n >= 1)
        .ok_or(format!("{label}: np '{np_text}' is not a process count of 1 or more"))?;
    let expect = match text("expect")?.as_str() {
        "ok" => Expect::Ok,
        "fail" => Expect::Fail,
        "refused" => Expect::Refused,
        other => return Err(format!("{label}: expect '{other}' is none of ok, fail, refused")),
    };
    let mut checks = list("checks")?;
    // (read at every count, so that a mistake in it shows at np 1 too)
    let multi_rank_checks = list("multi_rank_checks")?;
    if np > 1 {
        checks.extend(multi_rank_checks);
    }
    let checks = checks
        .iter()
        .map(|c| Check::parse(c).map_err(|e| format!("{label}: {e}")))
        .collect::<Result<_, _>>()?;
    if name.is_empty() {
        return Err(format!("{label}: the name is empty"));
    }
    let needs_free_memory_gib = match entry.get("needs_free_memory_gib") {
        None => None,
        Some(gib) => Some(
            gib.as_integer()
                .and_then(|g| u64::try_from(g).ok())
                .ok_or(format!("{label}: needs_free_memory_gib must be a number of GiB"))?,
        ),
    };
    let launcher_grace_seconds = match entry.get("launcher_grace_seconds") {
        None => None,
        Some(seconds) => Some(
            seconds
                .as_integer()
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .ok_or(format!("{label}: launcher_grace_seconds must be a number of seconds above 0"))?,
        ),
    };
    let skip_unless = match entry.get("skip_unless") {
        None => None,
        Some(condition) => {
            let condition = condition.as_table().ok_or(format!("{label}: skip_unless must be {{ sh = ..., why = ... }}"))?;
            if let Some(unknown) = condition.keys().find(|k| !["sh", "why"].contains(&k.as_str())) {
                return Err(format!("{label}: skip_unless has an unknown key '{unknown}' (sh, why)"));
            }
            let field = |key: &str| -> Result<String, String> {
                let value = condition.get(key).ok_or(format!("{label}: skip_unless needs '{key}'"))?;
                substitute(&scalar(value, &format!("{label}: skip_unless.{key}"))?, keys, label)
            };
            Some(Condition { sh: field("sh")?, why: field("why")? })
        }
    };
    let creator_killed_first = match entry.get("creator_killed_first") {
        None => None,
        Some(first) => {
            let first = first.as_table().ok_or(format!("{label}: creator_killed_first must be {{ mpirun = [...], args = [...] }}"))?;
            if let Some(unknown) = first.keys().find(|k| !["mpirun", "args"].contains(&k.as_str())) {
                return Err(format!("{label}: creator_killed_first has an unknown key '{unknown}' (mpirun, args)"));
            }
            Some(CreatorKilledFirst { mpirun: list_in(first, "mpirun")?, args: list_in(first, "args")? })
        }
    };
    Ok(Case {
        name,
        np,
        expect,
        mpirun: list("mpirun")?,
        program: text("program")?,
        args: list("args")?,
        checks,
        needs_free_memory_gib,
        run_wrapper: list("run_wrapper")?,
        mpirun_wrapper: list("mpirun_wrapper")?,
        launch_wrapper: list("launch_wrapper")?,
        teardown: entry.get("teardown").map(|_| text("teardown")).transpose()?,
        launcher_grace_seconds,
        expect_transport: entry.get("expect_transport").map(|_| text("expect_transport")).transpose()?,
        needs_component: match entry.get("needs_component") {
            None => false,
            Some(value) => value.as_bool().ok_or(format!("{label}: needs_component must be true or false"))?,
        },
        skip_unless,
        setup: entry.get("setup").map(|_| text("setup")).transpose()?,
        creator_killed_first,
    })
}

/// TEXT with every `{KEY}` of KEYS replaced; a `{KEY}` left for a key that
/// an `each` entry lacks is an error (a name such as "degree-{k}" that was
/// never expanded would otherwise run under that literal name).
fn substitute(text: &str, keys: &BTreeMap<String, String>, label: &str) -> Result<String, String> {
    let mut out = text.to_string();
    for (key, value) in keys {
        out = out.replace(&format!("{{{key}}}"), value);
    }
    let placeholder = regex::Regex::new(r"\{[A-Za-z_][A-Za-z0-9_]*\}").expect("a valid pattern");
    if let Some(left) = placeholder.find_iter(&out).find(|p| p.as_str() != CASE_DIR) {
        return Err(format!("{label}: '{}' in \"{text}\" has no value in this case's 'each' entry", left.as_str()));
    }
    Ok(out)
}

fn scalar(value: &toml::Value, what: &str) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        other => Err(format!("{what}: expected a string or an integer, found {}", other.type_str())),
    }
}

fn strings(value: &toml::Value, what: &str) -> Result<Vec<String>, String> {
    let items = value.as_array().ok_or(format!("{what}: expected a list of strings"))?;
    items.iter().map(|item| scalar(item, what)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lists(pairs: &[(&str, &[&str])]) -> Lists {
        pairs.iter().map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect())).collect()
    }

    #[test]
    fn each_entry_makes_one_case_with_its_keys_and_lists_spliced() {
        let text = r#"
            [lists]
            PR = ["--mca", "a", "1"]
            [[case]]
            name = "degree-{k}-np{np}"
            each = [{ k = 1, np = 5 }, { k = 7, np = "8" }]
            np = "{np}"
            expect = "ok"
            mpirun = ["@PR", "--mca", "degree", "{k}", "@V"]
            program = "reduce_ops"
            args = ["-x", "{k}0"]
            checks = ["@SERVED", 'ev:every_rank_ready(0; .degree == {k} and .calls == { "served": 2 })']
        "#;
        let caller = lists(&[("V", &["--mca", "verbose", "1"]), ("SERVED", &["events"])]);
        let cases = parse("t.toml", text, &caller, &Vars::new()).unwrap();
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[1].name, "degree-7-np8");
        assert_eq!(cases[1].np, 8);
        assert_eq!(cases[1].mpirun, ["--mca", "a", "1", "--mca", "degree", "7", "--mca", "verbose", "1"]);
        assert_eq!(cases[0].args, ["-x", "10"]);
        assert_eq!(
            cases[1].checks,
            [
                Check::parse("events").unwrap(),
                Check::parse(r#"ev:every_rank_ready(0; .degree == 7 and .calls == { "served": 2 })"#).unwrap()
            ]
        );
    }

    #[test]
    fn a_case_without_each_or_lists_is_taken_as_written() {
        let text = "[[case]]\nname = \"plain\"\nnp = 3\nexpect = \"refused\"\nprogram = \"p\"\n";
        let cases = parse("t", text, &Lists::new(), &Vars::new()).unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(cases[0].needs_free_memory_gib, None);
        let huge = parse("t", &format!("{text}needs_free_memory_gib = 8\n"), &Lists::new(), &Vars::new()).unwrap();
        assert_eq!(huge[0].needs_free_memory_gib, Some(8));
        assert_eq!(cases[0].launcher_grace_seconds, None);
        let graced = parse("t", &format!("{text}launcher_grace_seconds = 5\n"), &Lists::new(), &Vars::new()).unwrap();
        assert_eq!(graced[0].launcher_grace_seconds, Some(5));
        assert_eq!((cases[0].np, cases[0].expect), (3, Expect::Refused));
        assert!(cases[0].mpirun.is_empty() && cases[0].args.is_empty() && cases[0].checks.is_empty());
        assert!(cases[0].run_wrapper.is_empty() && cases[0].skip_unless.is_none());
    }

    #[test]
    fn wrappers_conditions_and_setups_take_the_keys_of_each_entry() {
        let text = r#"
            [[case]]
            name = "planted-np{np}"
            each = [{ np = 2 }]
            np = "{np}"
            expect = "ok"
            program = "p"
            run_wrapper = ["ci/per-rank-mca.sh", "@PARAM", "{np}"]
            skip_unless = { sh = "test {np} -gt 1", why = "needs {np} ranks" }
            mpirun = ["--mca", "coll_rdma_events_file", "{case_dir}/planted/ev.%r"]
            setup = 'mkdir "$CASE_DIR/planted" && echo {np}'
        "#;
        let cases = parse("t", text, &lists(&[("PARAM", &["x", "1"])]), &Vars::new()).unwrap();
        assert_eq!(cases[0].run_wrapper, ["ci/per-rank-mca.sh", "x", "1", "2"]);
        assert_eq!(cases[0].skip_unless, Some(Condition { sh: "test 2 -gt 1".into(), why: "needs 2 ranks".into() }));
        // the case's log directory is left for the run
        assert_eq!(cases[0].mpirun[2], "{case_dir}/planted/ev.%r");
        assert_eq!(cases[0].setup.as_deref(), Some(r#"mkdir "$CASE_DIR/planted" && echo 2"#));
        assert_eq!((cases[0].teardown.as_deref(), cases[0].expect_transport.as_deref()), (None, None));
        assert_eq!(cases[0].creator_killed_first, None);
    }

    #[test]
    fn the_killed_first_run_takes_lists_and_keys() {
        let text = r#"
            [[case]]
            name = "killed-np{np}"
            each = [{ np = 2 }]
            np = "{np}"
            expect = "ok"
            program = "p"
            creator_killed_first = { mpirun = ["--mca", "pause", "60", "@V"], args = ["-n", "{np}0"] }
        "#;
        let cases = parse("t", text, &lists(&[("V", &["--mca", "v", "1"])]), &Vars::new()).unwrap();
        let first = cases[0].creator_killed_first.as_ref().unwrap();
        assert_eq!(first.mpirun, ["--mca", "pause", "60", "--mca", "v", "1"]);
        assert_eq!(first.args, ["-n", "20"]);
        let odd = text.replace("args = [", "sleep = 1, args = [");
        assert!(parse("t", &odd, &lists(&[("V", &[])]), &Vars::new()).unwrap_err().contains("unknown key 'sleep'"));
    }

    #[test]
    fn caller_vars_fill_placeholders_and_each_keys_win() {
        let text = r#"
            [[case]]
            name = "v-{np}"
            each = [{ np = 2, VERSION = "mine" }, { np = 3 }]
            np = "{np}"
            expect = "ok"
            program = "p"
            mpirun_wrapper = ["unshare", "{VERSION}"]
            checks = ['says-re:built against {VERSION}']
        "#;
        let vars: Vars = [("VERSION".to_string(), "4\\.1\\.4".to_string())].into();
        let cases = parse("t", text, &Lists::new(), &vars).unwrap();
        assert_eq!(cases[0].mpirun_wrapper, ["unshare", "mine"]);
        assert_eq!(cases[1].checks, [Check::parse(r"says-re:built against 4\.1\.4").unwrap()]);
        assert!(parse("t", text, &Lists::new(), &Vars::new()).unwrap_err().contains("'{VERSION}'"));
    }

    #[test]
    fn a_block_repeats_its_cases_in_turn_for_each_element_of_the_callers_list() {
        let text = r#"
            [[block]]
            each_from = { list = "NPS", as = "np" }
            [[block.case]]
            name = "np{np}-a"
            np = "{np}"
            expect = "ok"
            program = "a"
            [[block.case]]
            name = "np{np}-b-{k}"
            each = [{ k = 1 }, { k = 2 }]
            np = "{np}"
            expect = "ok"
            program = "b"
            [[block]]
            each_from = { list = "NPS2", as = "np" }
            [[block.case]]
            name = "np{np}-c"
            np = "{np}"
            expect = "ok"
            program = "c"
        "#;
        let names = |nps: &[&str], nps2: &[&str]| -> Vec<String> {
            let caller = lists(&[("NPS", nps), ("NPS2", nps2)]);
            parse("t", text, &caller, &Vars::new()).unwrap().into_iter().map(|c| c.name).collect()
        };
        assert_eq!(
            names(&["3", "1"], &["2"]),
            ["np3-a", "np3-b-1", "np3-b-2", "np1-a", "np1-b-1", "np1-b-2", "np2-c"]
        );
        // an empty list leaves its block out
        assert_eq!(names(&["4"], &[]), ["np4-a", "np4-b-1", "np4-b-2"]);
    }

    #[test]
    fn multi_rank_checks_join_the_checks_only_above_one_rank() {
        let text = r#"
            [[block]]
            each_from = { list = "NPS", as = "np" }
            [[block.case]]
            name = "np{np}"
            np = "{np}"
            expect = "ok"
            program = "p"
            checks = ["@SERVED"]
            multi_rank_checks = ["@MORE", "ev:every_rank_ready(0; .n == {np})"]
        "#;
        let caller = lists(&[("NPS", &["1", "2"]), ("SERVED", &["events"]), ("MORE", &["quiet"])]);
        let cases = parse("t", text, &caller, &Vars::new()).unwrap();
        assert_eq!(cases[0].checks, [Check::parse("events").unwrap()]);
        let at_two = ["events", "quiet", "ev:every_rank_ready(0; .n == 2)"];
        assert_eq!(cases[1].checks, at_two.map(|c| Check::parse(c).unwrap()));
        // a mistake in them shows at one rank too
        let only_one = lists(&[("NPS", &["1"]), ("SERVED", &["events"])]);
        assert!(parse("t", text, &only_one, &Vars::new()).unwrap_err().contains("no list named 'MORE'"));
    }

    #[test]
    fn block_mistakes_are_errors() {
        let case = "[[block.case]]\nname = \"c{n}\"\nnp = 2\nexpect = \"ok\"\nprogram = \"p\"\n";
        let from = "[[block]]\neach_from = { list = \"L\", as = \"n\" }\n";
        let bad = [
            (format!("{from}{case}[[case]]\nname = \"d\"\nnp = 2\nexpect = \"ok\"\nprogram = \"p\"\n"), "put the cases in a block"),
            (format!("[[block]]\neach_from = {{ list = \"NOPE\", as = \"n\" }}\n{case}"), "no list named 'NOPE' for each_from"),
            (format!("[[block]]\neach_from = {{ list = \"L\" }}\n{case}"), "each_from needs 'as'"),
            (format!("[[block]]\neach_from = \"L\"\n{case}"), "each_from must be"),
            (format!("[[block]]\neach_from = {{ list = \"L\", as = \"n\", step = 2 }}\n{case}"), "unknown key 'step'"),
            (format!("[[block]]\ncolour = 1\n{case}"), "unknown key 'colour'"),
            ("[[block]]\neach_from = { list = \"L\", as = \"n\" }\n".to_string(), "has no [[block.case]]"),
            (format!("[[block]]\n{case}"), "'{n}'"),
            (format!("{from}{case}{from}{case}"), "two cases are named 'c1'"),
        ];
        for (text, wanted) in bad {
            let err = parse("t.toml", &text, &lists(&[("L", &["1"])]), &Vars::new()).unwrap_err();
            assert!(err.contains(wanted), "{text:?}: error '{err}' does not say '{wanted}'");
            assert!(err.starts_with("t.toml"), "{err}");
        }
    }

    #[test]
    fn mistakes_are_errors_naming_the_case() {
        let base = "name = \"c\"\nnp = 2\nexpect = \"ok\"\nprogram = \"p\"\n";
        let bad = [
            (format!("[[case]]\n{base}colour = 1\n"), "unknown key 'colour'"),
            (format!("[[case]]\n{base}args = [\"@NOPE\"]\n"), "no list named 'NOPE'"),
            (format!("[[case]]\n{base}args = [\"{{k}}\"]\n"), "'{k}'"),
            ("[[case]]\nname = \"c\"\nnp = 0\nexpect = \"ok\"\nprogram = \"p\"\n".to_string(), "np '0'"),
            ("[[case]]\nname = \"c\"\nnp = 2\nexpect = \"maybe\"\nprogram = \"p\"\n".to_string(), "expect 'maybe'"),
            (format!("[[case]]\n{base}checks = [\"smell:x\"]\n"), "smell:x"),
            (format!("[[case]]\n{base}[[case]]\n{base}"), "two cases are named 'c'"),
            (format!("[[case]]\n{base}each = []\n"), "'each' is empty"),
            (format!("[[case]]\n{base}needs_free_memory_gib = -1\n"), "needs_free_memory_gib"),
            (format!("[[case]]\n{base}launcher_grace_seconds = 0\n"), "launcher_grace_seconds"),
            (format!("[[case]]\n{base}skip_unless = \"true\"\n"), "skip_unless must be"),
            (format!("[[case]]\n{base}needs_component = 1\n"), "needs_component must be"),
            (format!("[[case]]\n{base}skip_unless = {{ sh = \"true\" }}\n"), "skip_unless needs 'why'"),
            (format!("[[case]]\n{base}skip_unless = {{ sh = \"true\", why = \"w\", or = 1 }}\n"), "unknown key 'or'"),
            ("[[case]]\nnp = 2\nexpect = \"ok\"\nprogram = \"p\"\n".to_string(), "'name' is missing"),
            ("colour = 1\n".to_string(), "unknown top-level key 'colour'"),
        ];
        for (text, wanted) in bad {
            let err = parse("t.toml", &text, &Lists::new(), &Vars::new()).unwrap_err();
            assert!(err.contains(wanted), "{text:?}: error '{err}' does not say '{wanted}'");
            assert!(err.starts_with("t.toml"), "{err}");
        }
    }
}
