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

#[cfg(test)]
mod tests {
    use super::*;

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
