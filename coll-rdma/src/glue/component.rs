//! The component structure Open MPI dlsyms (`mca_coll_rdma_component`) and
//! its callbacks: parameter registration, completing the coll stack under
//! `--mca coll rdma` alone (see `components_underneath`), the version check, and the
//! per-communicator decision to claim it.

use std::ffi::{c_char, c_int, CStr};
use std::ptr::null_mut;

use ompi_sys as sys;

use super::comm_state::CommState;
use super::ffi_guard::guarded;
use super::module::new_module;
use super::thread_level::{self, Threads};
use super::{components_underneath, events, output, params, pmix_path, process_facts, version};

const fn name_field<const N: usize>(name: &str) -> [c_char; N] {
    let bytes = name.as_bytes();
    assert!(bytes.len() < N, "name does not fit its field");
    let mut field = [0 as c_char; N];
    let mut i = 0;
    while i < bytes.len() {
        field[i] = bytes[i] as c_char;
        i += 1;
    }
    field
}

/// Open MPI finds the component by this exact symbol name.
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static mut mca_coll_rdma_component: sys::mca_coll_base_component_t = sys::mca_coll_base_component_t {
    collm_version: sys::mca_base_component_t {
        mca_major_version: sys::MCA_BASE_VERSION_MAJOR as c_int,
        mca_minor_version: sys::MCA_BASE_VERSION_MINOR as c_int,
        mca_release_version: sys::MCA_BASE_VERSION_RELEASE as c_int,
        mca_project_name: name_field("ompi"),
        mca_project_major_version: sys::OMPI_MAJOR_VERSION as c_int,
        mca_project_minor_version: sys::OMPI_MINOR_VERSION as c_int,
        mca_project_release_version: sys::OMPI_RELEASE_VERSION as c_int,
        mca_type_name: name_field("coll"),
        // 2.0.0 in Open MPI 4.1, 2.4.0 in 5.0: taken from the headers built against.
        mca_type_major_version: sys::COLL_TYPE_VERSION[0] as c_int,
        mca_type_minor_version: sys::COLL_TYPE_VERSION[1] as c_int,
        mca_type_release_version: sys::COLL_TYPE_VERSION[2] as c_int,
        mca_component_name: name_field("rdma"),
        mca_component_major_version: 0,
        mca_component_minor_version: 1,
        mca_component_release_version: 0,
        mca_open_component: Some(open),
        mca_close_component: Some(close),
        mca_query_component: None,
        mca_register_component_params: Some(register),
        mca_component_flags: 0,
        reserved: [0; 28],
    },
    collm_data: sys::mca_base_component_data_t {
        // MCA_BASE_METADATA_PARAM_NONE: no checkpoint/restart support.
        param_field: 0,
        reserved: [0; 32],
    },
    collm_init_query: Some(init_query),
    collm_comm_query: Some(comm_query),
};

unsafe extern "C" fn register() -> c_int {
    guarded("component register", sys::OMPI_ERROR as c_int, || {
        // SAFETY: only the address is taken; Open MPI reads the structure.
        params::register(unsafe { &raw const mca_coll_rdma_component.collm_version })
    })
}

unsafe extern "C" fn open() -> c_int {
    guarded("component open", sys::OMPI_ERROR as c_int, || {
        output::open_stream();
        let settings = params::reload();
        process_facts::reset();
        pmix_path::remove_entries_that_give_pmix_nothing();
        // SAFETY: only the address is taken, to find our entry in the
        // framework's component list.
        components_underneath::complete(unsafe { &raw const mca_coll_rdma_component.collm_version });
        btl_ibmc::idle::set_idle_hook(progress_open_mpi);
        #[cfg(feature = "verbs")]
        if !matches!(settings.transport, params::TransportChoice::Shm | params::TransportChoice::Udp) {
            // Before MPI_Init opens and closes the components that load
            // provider libraries (see btl_ibmc::verbs_providers).
            let pinned = btl_ibmc::verbs_providers::pin_provider_libraries();
            tracing::debug!("verbs provider libraries kept loaded: {pinned:?}");
        }
        #[cfg(not(feature = "verbs"))]
        let _ = settings;
        sys::OMPI_SUCCESS as c_int
    })
}

/// Runs Open MPI's progress engine from a yielding wait, so that other
/// communicators (ours, through the progress callback, and point-to-point)
/// move on while one of our collectives waits.
fn progress_open_mpi() {
    // SAFETY: opal_progress may be called from any MPI call's context; it
    // re-enters our progress callback, which skips the busy module.
    unsafe { sys::opal_progress() };
}

unsafe extern "C" fn close() -> c_int {
    guarded("component close", sys::OMPI_SUCCESS as c_int, || {
        super::progress::unregister_from_opal();
        super::wrapped::abandon_at_close();
        super::own_wait::uninstall();
        super::request_pool::destroy_all();
        output::close_stream();
        sys::OMPI_SUCCESS as c_int
    })
}

unsafe extern "C" fn init_query(progress_threads: bool, mpi_thread_multiple: bool) -> c_int {
    guarded("component init query", sys::OMPI_ERR_NOT_AVAILABLE as c_int, || {
        let settings = params::current();
        let checked = version::check(settings.pretend_running_version.as_deref())
            .and_then(|()| version::check_layout(settings.pretend_module_class_size));
        if let Err(refusal) = checked {
            tracing::warn!("{refusal}");
            return sys::OMPI_ERR_NOT_AVAILABLE as c_int;
        }
        // Every thread level is served: concurrent collectives on different
        // communicators each hold their own state, and any thread may run
        // the progress callback (see `entry.rs`).
        thread_level::set(if mpi_thread_multiple || progress_threads { Threads::Concurrent } else { Threads::OneAtATime });
        if mpi_thread_multiple {
            process_facts::serving_thread_multiple();
            output::say_once_per_job(
                "serving MPI_THREAD_MULTIPLE: collectives on different communicators may run in different threads at once; \
                 two at once on one communicator end the job",
            );
        }
        sys::OMPI_SUCCESS as c_int
    })
}

pub(super) fn comm_name(comm: *mut sys::ompi_communicator_t) -> String {
    // SAFETY: c_name is a NUL-terminated array inside the communicator.
    unsafe { CStr::from_ptr(sys::coll_rdma_shim_comm_name(comm)) }.to_string_lossy().into_owned()
}

/// Why we decline `comm`, if we do.
fn refusal(comm: *mut sys::ompi_communicator_t, settings: &params::Settings) -> Option<String> {
    // SAFETY: Open MPI passes a valid communicator under construction.
    let (inter, size) = unsafe { (sys::coll_rdma_shim_comm_is_inter(comm) != 0, sys::coll_rdma_shim_comm_size(comm)) };
    if inter {
        Some("intercommunicator (only intracommunicators are supported)".to_string())
    } else if size < 2 {
        Some("a single rank needs no collective (coll self serves it)".to_string())
    } else if settings.priority < 0 {
        Some(format!("coll_rdma_priority is {}", settings.priority))
    } else {
        None
    }
}

unsafe extern "C" fn comm_query(comm: *mut sys::ompi_communicator_t, priority: *mut c_int) -> *mut sys::mca_coll_base_module_t {
    guarded("component comm query", null_mut(), || {
        let settings = params::current();
        // SAFETY: valid communicator and out-pointer from Open MPI.
        let (cid, size) = unsafe { (sys::coll_rdma_shim_comm_cid(comm), sys::coll_rdma_shim_comm_size(comm)) };
        let label = format!("comm {cid} \"{}\" size {size}", comm_name(comm));
        if let Some(why) = refusal(comm, &settings) {
            tracing::info!("{label}: not claimed: {why}");
            // SAFETY: as above.
            let rank = unsafe { sys::coll_rdma_shim_comm_rank(comm) } as usize;
            let origin = events::Origin { cid, rank, size: size as usize };
            process_facts::say_once(origin);
            events::emit("comm_not_claimed", origin, || {
                events::json!({ "name": comm_name(comm), "priority": settings.priority, "reason": why })
            });
            return null_mut();
        }
        let module = new_module();
        if module.is_null() {
            tracing::warn!("{label}: not claimed: could not allocate a module");
            return null_mut();
        }
        let (radix, why_radix) = CommState::barrier_radix(&settings, size as usize);
        tracing::info!(
            "{label}: claimed at priority {} (barrier: {radix}-way dissemination, {why_radix})",
            settings.priority
        );
        // SAFETY: Open MPI's out-parameter.
        unsafe { *priority = settings.priority };
        module
    })
}
