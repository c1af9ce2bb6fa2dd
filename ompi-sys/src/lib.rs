//! Raw bindings to the installed Open MPI's internal interfaces (generated
//! at build time) and to the small C shim for its macros. Nothing here is
//! safe to call without reading the Open MPI headers it came from.

#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code, clippy::all)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// The Open MPI version whose headers these bindings were generated from.
pub const BUILT_AGAINST_VERSION: &str = env!("OMPI_SYS_BUILT_VERSION");

/// The coll framework's type version in those headers (from their
/// `MCA_COLL_BASE_VERSION_x_y_z` macro), which a coll component announces.
pub const COLL_TYPE_VERSION: [u32; 3] = [
    parse_u32(env!("OMPI_SYS_COLL_TYPE_MAJOR")),
    parse_u32(env!("OMPI_SYS_COLL_TYPE_MINOR")),
    parse_u32(env!("OMPI_SYS_COLL_TYPE_RELEASE")),
];

const fn parse_u32(text: &str) -> u32 {
    let bytes = text.as_bytes();
    let mut value = 0;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "not a decimal number");
        value = value * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    value
}

/// `MPI_IN_PLACE` is the sentinel address 1 in Open MPI.
pub const MPI_IN_PLACE: *mut std::ffi::c_void = 1 as *mut std::ffi::c_void;

#[cfg(test)]
mod tests {
    use super::*;

    /// The coll type version parsed from the headers agrees with the
    /// release series they belong to (values read from coll.h of 4.1.4 and
    /// 5.0.7); a parse of the wrong macro would announce a version Open MPI
    /// rejects.
    #[test]
    fn coll_type_version_matches_the_release_series() {
        let expected = match BUILT_AGAINST_VERSION.split('.').next() {
            Some("4") => [2, 0, 0],
            Some("5") => [2, 4, 0],
            _ => {
                println!("SKIPPED: no recorded coll type version for Open MPI {BUILT_AGAINST_VERSION}");
                return;
            }
        };
        assert_eq!(COLL_TYPE_VERSION, expected);
    }
}
