//! Keeps a later PMIx initialisation in this process (the next MPI 4
//! session, or MPI_Init after sessions) from warning about its component
//! path, because that warning crashes it.
//!
//! PRRTE (Open MPI 5's mpirun) copies `mca_base_component_path`, given to
//! mpirun as `--mca` or in its environment, into each rank's
//! `PMIX_MCA_mca_base_component_path`. PMIx 5.0.7 expands neither
//! `SYS_DEFAULT` nor `USER_DEFAULT` and warns through `pmix_show_help` for
//! each entry it cannot open. At the first `PMIx_Init` that warning prints;
//! at a second one in the same process (after `MPI_Session_finalize` ran
//! `PMIx_Finalize`) it is handed to the event base the first finalize freed,
//! which crashes once that memory is reused (ci/ompi5/pmix-reinit-crash.c
//! shows it without coll rdma). So at component open, which runs after the
//! first `PMIx_Init`, the entries that give PMIx nothing are taken out of
//! the variable: those it warns about, and directories without a PMIx
//! component (such as coll rdma's own, where PMIx also prints a "bad prefix"
//! line for each `mca_*` file at every initialisation). The directories
//! holding PMIx components stay, in their order, so while one is left the
//! next initialisation searches what the first searched, less what gave it
//! nothing. When no entry is left the variable is unset, and the next
//! initialisation searches PMIx's own default directory instead: it may then
//! load PMIx components that the first did not (those PMIx loads when
//! nobody sets the variable), never fewer.
//!
//! Invariant: only `PMIX_MCA_mca_base_component_path` is ever changed, and
//! only by removing entries that hold no PMIx component (a token such as
//! `SYS_DEFAULT`, a path that does not exist, a directory of other files).

use std::path::Path;

const VARIABLE: &str = "PMIX_MCA_mca_base_component_path";

/// What to do with the variable's value.
#[derive(Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// Every entry holds PMIx components: leave it.
    Keep,
    /// Replace the value with these directories, ':'-separated.
    Set(String),
    /// No entry holds a PMIx component: remove the variable.
    Unset,
}

/// Decides from the value and a test for "a directory holding a PMIx
/// component".
pub fn rewrite(value: &str, gives_pmix_components: impl Fn(&str) -> bool) -> Rewrite {
    let entries: Vec<&str> = value.split(':').filter(|entry| !entry.is_empty()).collect();
    let kept: Vec<&str> = entries.iter().copied().filter(|entry| gives_pmix_components(entry)).collect();
    if kept.len() == entries.len() {
        Rewrite::Keep
    } else if kept.is_empty() {
        Rewrite::Unset
    } else {
        Rewrite::Set(kept.join(":"))
    }
}

/// Whether `entry` is a directory with a file PMIx loads as a component
/// (PMIx 5 names them `pmix_mca_*` or `libpmix_mca_*`).
fn holds_pmix_components(entry: &str) -> bool {
    let Ok(files) = std::fs::read_dir(Path::new(entry)) else { return false };
    files.flatten().any(|file| {
        let name = file.file_name();
        let name = name.to_string_lossy();
        name.starts_with("pmix_mca_") || name.starts_with("libpmix_mca_")
    })
}

/// Applies `rewrite` to this process's environment; says what it did at
/// `coll_rdma_verbose` 1.
pub fn remove_entries_that_give_pmix_nothing() {
    let Ok(value) = std::env::var(VARIABLE) else { return };
    let decision = rewrite(&value, holds_pmix_components);
    let why = "so that a later PMIx initialisation in this process (MPI sessions) does not warn, \
               which crashes PMIx 5.0.7 (see ci/ompi5/pmix-reinit-crash.c)";
    match decision {
        Rewrite::Keep => {}
        Rewrite::Set(directories) => {
            tracing::info!("{VARIABLE}: \"{value}\" becomes \"{directories}\" {why}");
            // SAFETY: setenv is not synchronised with getenv in C code.
            // This runs once per initialisation, in component open inside
            // MPI initialisation (Open MPI sets environment variables there
            // too), where MPI lets no application thread call MPI, but
            // PMIx's progress thread and Open MPI's own threads run and may
            // call getenv. glibc (checked on 2.36 and 2.41 by replacing a
            // value, then churning malloc with freed memory poisoned)
            // replaces an existing variable by swapping one pointer in the
            // same `environ` array and does not free the old string, so a
            // concurrent getenv sees the old or the new value, never freed
            // memory. The variable exists here (we just read it), so the
            // array is never reallocated.
            unsafe { std::env::set_var(VARIABLE, directories) };
        }
        Rewrite::Unset => {
            tracing::info!("{VARIABLE}: \"{value}\" removed (no PMIx component there) {why}");
            // SAFETY: as for set_var above, with one more risk: glibc's
            // unsetenv moves the later entries of the same `environ` array
            // down one slot (nothing is freed), so a getenv of another
            // variable running at that instant may miss the entry that
            // moved past it. Accepted: it can happen only during this one
            // call per initialisation, and PMIx reads its own variables at
            // PMIx_Init, which has finished before component open.
            unsafe { std::env::remove_var(VARIABLE) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn only(directories: &'static [&'static str]) -> impl Fn(&str) -> bool {
        move |entry| directories.contains(&entry)
    }

    #[test]
    fn entries_without_pmix_components_are_removed_the_others_kept_in_order() {
        let is_dir = only(&["/opt/a", "/opt/b"]);
        assert_eq!(rewrite("SYS_DEFAULT:/opt/a", &is_dir), Rewrite::Set("/opt/a".into()));
        assert_eq!(rewrite("/opt/b:USER_DEFAULT:/gone:/opt/a", &is_dir), Rewrite::Set("/opt/b:/opt/a".into()));
    }

    #[test]
    fn a_value_of_pmix_directories_only_is_kept() {
        let is_dir = only(&["/opt/a", "/opt/b"]);
        assert_eq!(rewrite("/opt/a:/opt/b", &is_dir), Rewrite::Keep);
        assert_eq!(rewrite("/opt/a::", &is_dir), Rewrite::Keep);
    }

    #[test]
    fn nothing_left_unsets_the_variable() {
        assert_eq!(rewrite("SYS_DEFAULT:USER_DEFAULT", only(&[])), Rewrite::Unset);
    }

    #[test]
    fn only_directories_with_pmix_component_files_count() {
        let base = std::env::temp_dir().join(format!("coll-rdma-pmix-path-{}", std::process::id()));
        let (with, without) = (base.join("with"), base.join("without"));
        std::fs::create_dir_all(&with).unwrap();
        std::fs::create_dir_all(&without).unwrap();
        std::fs::write(with.join("pmix_mca_pcompress_zlib.so"), b"").unwrap();
        std::fs::write(without.join("mca_coll_rdma.so"), b"").unwrap();
        let (with, without) = (with.to_str().unwrap(), without.to_str().unwrap());
        assert!(holds_pmix_components(with));
        assert!(!holds_pmix_components(without));
        assert!(!holds_pmix_components(&format!("{with}/pmix_mca_pcompress_zlib.so")));
        let value = format!("SYS_DEFAULT:{without}:{with}");
        assert_eq!(rewrite(&value, holds_pmix_components), Rewrite::Set(with.to_string()));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
