//! The component is bound to the exact Open MPI whose headers it was built
//! from (struct layouts differ between releases): it refuses to run in any
//! other rather than corrupt memory.

use std::ffi::{c_char, c_int, CStr};

/// "4.1.4" out of "Open MPI v4.1.4, package: ...".
pub fn parse_library_version(text: &str) -> Option<String> {
    let rest = text.split("Open MPI v").nth(1)?;
    let version: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    let numbers = version.trim_end_matches('.');
    (numbers.split('.').count() >= 2).then(|| numbers.to_string())
}

/// The version of the Open MPI library this process runs in.
pub fn running_version() -> Option<String> {
    let mut text = vec![0 as c_char; ompi_sys::MPI_MAX_LIBRARY_VERSION_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: MPI_Get_library_version may be called before MPI_Init; the
    // buffer has MPI_MAX_LIBRARY_VERSION_STRING bytes plus a terminator.
    let rc = unsafe { ompi_sys::MPI_Get_library_version(text.as_mut_ptr(), &mut len) };
    if rc != 0 {
        return None;
    }
    // SAFETY: the library NUL-terminates within the buffer it was given.
    let text = unsafe { CStr::from_ptr(text.as_ptr()) };
    parse_library_version(&text.to_string_lossy())
}

/// `Err(message)` when the running Open MPI is not the one we were built
/// against; `pretend` replaces the running version (for tests).
pub fn check(pretend: Option<&str>) -> Result<(), String> {
    let built = ompi_sys::BUILT_AGAINST_VERSION;
    let running = match pretend {
        Some(v) => Some(v.to_string()),
        None => running_version(),
    };
    match running {
        Some(ref v) if v == built => Ok(()),
        Some(v) => Err(format!(
            "built against Open MPI {built} but running in Open MPI {v}; coll rdma disqualifies itself \
             (rebuild it against the running Open MPI)"
        )),
        None => Err(format!(
            "built against Open MPI {built} but cannot tell which Open MPI is running; coll rdma disqualifies itself"
        )),
    }
}

/// One structure the component reads or extends, with its size as the
/// running library's class descriptor reports it and as the bindings have it.
struct StructSize {
    name: &'static str,
    running: usize,
    built: usize,
}

fn struct_sizes(pretend_module_size: Option<usize>) -> [StructSize; 2] {
    // SAFETY: the class descriptors are statics of the running libmpi;
    // cls_sizeof is set where they are defined (sizeof of the C type as
    // that library was compiled) and never written afterwards.
    let (module, communicator) = unsafe {
        (
            (*std::ptr::addr_of!(ompi_sys::mca_coll_base_module_t_class)).cls_sizeof,
            (*std::ptr::addr_of!(ompi_sys::ompi_communicator_t_class)).cls_sizeof,
        )
    };
    [
        StructSize {
            name: "mca_coll_base_module_t",
            running: pretend_module_size.unwrap_or(module),
            built: std::mem::size_of::<ompi_sys::mca_coll_base_module_t>(),
        },
        StructSize { name: "ompi_communicator_t", running: communicator, built: std::mem::size_of::<ompi_sys::ompi_communicator_t>() },
    ]
}

/// `Err(message)` when a structure coll rdma extends or reads (its module,
/// which it extends; the communicator, whose collective table it reads)
/// has another size in the running library than in the headers it was built
/// from: a debug build of the same version, or other configure options,
/// lay them out differently. `pretend_module_size` replaces the running
/// module size (for tests).
pub fn check_layout(pretend_module_size: Option<usize>) -> Result<(), String> {
    let differing: Vec<String> = struct_sizes(pretend_module_size)
        .iter()
        .filter(|s| s.running != s.built)
        .map(|s| format!("{} is {} bytes in the running Open MPI, {} in the headers coll rdma was built against", s.name, s.running, s.built))
        .collect();
    if differing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}; coll rdma disqualifies itself (rebuild it against the headers of the running Open MPI, e.g. its debug build)",
            differing.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_library_matches_the_bindings() {
        assert_eq!(check_layout(None), Ok(()));
    }

    #[test]
    fn a_module_of_another_size_is_refused() {
        let built = std::mem::size_of::<ompi_sys::mca_coll_base_module_t>();
        let refusal = check_layout(Some(built + 8)).unwrap_err();
        assert!(refusal.contains(&format!("mca_coll_base_module_t is {} bytes in the running Open MPI, {built}", built + 8)), "{refusal}");
        assert!(refusal.contains("disqualifies itself"), "{refusal}");
    }

    #[test]
    fn parses_the_library_banner() {
        assert_eq!(
            parse_library_version("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4"),
            Some("4.1.4".to_string())
        );
        assert_eq!(parse_library_version("Open MPI v5.0.3rc1, package"), Some("5.0.3".to_string()));
        assert_eq!(parse_library_version("MPICH Version: 4.1"), None);
    }

    #[test]
    fn mismatch_is_refused_and_match_accepted() {
        assert!(check(Some(ompi_sys::BUILT_AGAINST_VERSION)).is_ok());
        let refusal = check(Some("9.9.9")).unwrap_err();
        assert!(refusal.contains("running in Open MPI 9.9.9"), "{refusal}");
    }
}
