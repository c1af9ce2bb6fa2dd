//! `mpirun --mca coll rdma` restricts the coll framework to coll rdma, but
//! after selection Open MPI wants every collective entry point of a
//! communicator filled (blocking, non-blocking, persistent, neighborhood,
//! intercommunicator, size-1 communicators), and coll rdma fills four.
//!
//! So when the `coll` parameter names rdma and nothing else, our open hook
//! loads, registers and opens the other installed coll components and puts
//! them into the framework's component list. The framework's
//! per-communicator selection then sees the default stack with coll rdma in
//! it: each entry point goes to the highest-priority component that
//! provides it, as without the parameter. A list naming other components
//! too (`rdma,libnbc,basic,self`, a common way to keep tuned out while
//! debugging), an exclusion list (`^tuned`) or no list is the user's full
//! choice and stays untouched.
//!
//! Why the open hook: the framework filters its list by the `coll`
//! parameter again just before it opens the components, so anything added
//! while components register would be dropped; during the open walk, an
//! entry placed before ours is behind the walk and stays (see
//! `coll_rdma_shim_coll_load_before`).

use std::ffi::{c_char, c_int, c_void, CStr, CString};

use ompi_sys as sys;

use super::{output, process_facts};

/// What to do about the components the `coll` parameter left out.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// Leave the framework's list as it is, for this reason.
    Untouched(&'static str),
    /// Load these installed components underneath coll rdma.
    Load(Vec<String>),
}

/// Decides from the `coll` parameter's value, the installed coll components
/// and those the framework kept.
pub fn plan(selection: Option<&str>, installed: &[String], listed: &[String]) -> Plan {
    let selection = selection.map(str::trim).unwrap_or("");
    if selection.is_empty() {
        return Plan::Untouched("the coll parameter is not set: every installed component takes part");
    }
    if selection.starts_with('^') {
        return Plan::Untouched("the coll parameter is an exclusion list: the user chose what is left");
    }
    let mut named = selection.split(',').map(str::trim).filter(|name| !name.is_empty());
    if !named.all(|name| name == "rdma") {
        return Plan::Untouched("the coll parameter names other components: the user chose what sits underneath");
    }
    let mut missing: Vec<String> =
        installed.iter().filter(|name| *name != "rdma" && !listed.contains(name)).cloned().collect();
    missing.sort();
    missing.dedup();
    if missing.is_empty() {
        Plan::Untouched("every installed coll component is already in the list")
    } else {
        Plan::Load(missing)
    }
}

unsafe extern "C" fn collect_name(context: *mut c_void, name: *const c_char) {
    // SAFETY: `context` is the `Vec<String>` passed by `names` below, alive
    // and exclusively ours during the walk; `name` is a NUL-terminated
    // component name owned by Open MPI for the duration of the call.
    let (names, name) = unsafe { (&mut *(context as *mut Vec<String>), CStr::from_ptr(name)) };
    names.push(name.to_string_lossy().into_owned());
}

type Walk = unsafe extern "C" fn(Option<unsafe extern "C" fn(*mut c_void, *const c_char)>, *mut c_void);

fn names(walk: Walk) -> Vec<String> {
    let mut names = Vec::new();
    // SAFETY: the walk calls `collect_name` synchronously with our vector as
    // context and keeps no pointer to it afterwards.
    unsafe { walk(Some(collect_name), &mut names as *mut Vec<String> as *mut c_void) };
    names
}

/// Loads the other installed coll components when the `coll` parameter
/// names rdma alone, from coll rdma's open hook. `ours` is coll rdma's component.
pub fn complete(ours: *const sys::mca_base_component_t) {
    // SAFETY: reads the framework's selection string, which Open MPI keeps
    // alive while the framework is open (we are called from its open).
    let selection = unsafe {
        let raw = sys::coll_rdma_shim_coll_selection();
        (!raw.is_null()).then(|| CStr::from_ptr(raw).to_string_lossy().into_owned())
    };
    let installed = names(sys::coll_rdma_shim_coll_each_installed);
    let listed = names(sys::coll_rdma_shim_coll_each_listed);
    let missing = match plan(selection.as_deref(), &installed, &listed) {
        Plan::Untouched(why) => {
            tracing::debug!("coll components: list left as it is ({why})");
            return;
        }
        Plan::Load(missing) => missing,
    };
    let shown = selection.as_deref().unwrap_or("");
    let loaded: Vec<String> = missing.into_iter().filter(|name| load_and_open(name, ours)).collect();
    if loaded.is_empty() {
        tracing::warn!(
            "--mca coll {shown}: none of the coll components it leaves out could be opened; \
             Open MPI will refuse communicators whose collectives coll rdma does not all provide"
        );
    } else {
        process_facts::opened_underneath(&loaded);
        output::say_once_per_job(&format!(
            "--mca coll {shown}: also opened {} underneath coll rdma, which serves only barrier, bcast, \
             allreduce and reduce while Open MPI needs every collective of a communicator provided",
            loaded.join(", ")
        ));
    }
}

/// Loads, registers and opens one component, as the framework does for
/// those it finds itself; on failure takes it out again and says why.
fn load_and_open(name: &str, ours: *const sys::mca_base_component_t) -> bool {
    let Ok(c_name) = CString::new(name) else { return false };
    // SAFETY: called from the framework's open walk (see the module
    // comment); `ours` is our component, which is in the framework's list.
    let component = unsafe { sys::coll_rdma_shim_coll_load_before(c_name.as_ptr(), ours) };
    if component.is_null() {
        tracing::warn!("coll component {name} could not be loaded; carrying on without it");
        return false;
    }
    // SAFETY: a component structure Open MPI just loaded; it stays mapped
    // until it is unloaded.
    let (register, open) = unsafe { ((*component).mca_register_component_params, (*component).mca_open_component) };
    let steps: [(&str, Option<unsafe extern "C" fn() -> c_int>); 2] = [("register", register), ("open", open)];
    for (step, (what, function)) in steps.into_iter().enumerate() {
        let Some(function) = function else { continue };
        // SAFETY: the component's own MCA hooks, called in the order and at
        // the moment the framework calls them (parameters before opening,
        // while the coll framework opens).
        let rc = unsafe { function() };
        if rc != sys::OPAL_SUCCESS as c_int {
            let opened = (step > 0) as c_int;
            // SAFETY: loaded by coll_rdma_shim_coll_load_before above and not
            // referenced anywhere else yet.
            unsafe { sys::coll_rdma_shim_coll_unload(component, opened) };
            if rc == sys::OMPI_ERR_NOT_AVAILABLE {
                tracing::info!("coll component {name} declined at {what} (not available); carrying on without it");
            } else {
                tracing::warn!("coll component {name} failed at {what} (error {rc}); carrying on without it");
            }
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    const INSTALLED: &[&str] = &["adapt", "basic", "han", "inter", "libnbc", "rdma", "self", "sm", "sync", "tuned"];

    fn plan_for(selection: &str, listed: &[&str]) -> Plan {
        plan(Some(selection), &strings(INSTALLED), &strings(listed))
    }

    #[test]
    fn rdma_alone_gets_every_other_installed_component() {
        let alone = plan_for("rdma", &["rdma"]);
        assert_eq!(alone, Plan::Load(strings(&["adapt", "basic", "han", "inter", "libnbc", "self", "sm", "sync", "tuned"])));
        assert_eq!(plan_for(" rdma ,rdma", &["rdma"]), alone);
    }

    #[test]
    fn a_list_naming_other_components_is_the_users_choice() {
        assert!(matches!(plan_for("rdma,self", &["rdma", "self"]), Plan::Untouched(_)));
        assert!(matches!(plan_for("rdma,libnbc,basic,self", &["rdma", "libnbc", "basic", "self"]), Plan::Untouched(_)));
    }

    #[test]
    fn exclusion_lists_lists_without_rdma_and_no_list_are_untouched() {
        assert!(matches!(plan_for("^tuned", &["rdma", "basic"]), Plan::Untouched(_)));
        assert!(matches!(plan_for("tuned,basic", &["tuned", "basic"]), Plan::Untouched(_)));
        assert!(matches!(plan_for("", &["rdma"]), Plan::Untouched(_)));
        assert!(matches!(plan(None, &strings(INSTALLED), &strings(&["rdma"])), Plan::Untouched(_)));
    }

    #[test]
    fn names_are_matched_whole_and_installed_twice_loads_once() {
        assert!(matches!(plan_for("rdmax", &[]), Plan::Untouched(_)));
        let installed_twice = [INSTALLED, &["tuned"]].concat();
        let twice = plan(Some("rdma"), &strings(&installed_twice), &strings(&["rdma"]));
        assert!(matches!(twice, Plan::Load(ref names) if names.iter().filter(|n| *n == "tuned").count() == 1));
        assert!(matches!(plan(Some("rdma"), &strings(&["rdma"]), &strings(&["rdma"])), Plan::Untouched(_)));
    }
}
