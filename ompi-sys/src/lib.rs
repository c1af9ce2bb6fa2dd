//! Raw bindings to the installed Open MPI's internal interfaces (generated
//! at build time) and to the small C shim for its macros. Nothing here is
//! safe to call without reading the Open MPI headers it came from.

#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code, clippy::all)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// The Open MPI version whose headers these bindings were generated from.
pub const BUILT_AGAINST_VERSION: &str = env!("OMPI_SYS_BUILT_VERSION");

/// `MPI_IN_PLACE` is the sentinel address 1 in Open MPI.
pub const MPI_IN_PLACE: *mut std::ffi::c_void = 1 as *mut std::ffi::c_void;
