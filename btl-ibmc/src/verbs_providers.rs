//! Keeps libibverbs' provider libraries loaded for the life of the process.
//!
//! Some providers are ordinary shared libraries (libmlx5, libmlx4, libefa,
//! libmana) that register themselves with libibverbs from a constructor
//! when loaded. Open MPI opens and closes components during MPI_Init that
//! pull them in as dependencies (the PSM and OFI transports do, through
//! libfabric), so such a library can be mapped, registered and unmapped
//! again while libibverbs stays loaded because this component links it.
//! libibverbs keeps the registration, and the next device scan follows it
//! into unmapped memory. Loading the providers once with `RTLD_NODELETE`
//! before any of that happens makes every later unload a no-op.

use std::ffi::CStr;

/// The providers rdma-core ships as shared libraries rather than plugins.
const PROVIDER_LIBRARIES: [&CStr; 4] = [c"libmlx5.so.1", c"libmlx4.so.1", c"libefa.so.1", c"libmana.so.1"];

/// Pins every provider library present; missing ones are skipped. Returns
/// the names pinned, for diagnostics. Call it as early as possible (at
/// component open) and before any verbs device scan.
pub fn pin_provider_libraries() -> Vec<&'static str> {
    let mut pinned = Vec::new();
    for name in PROVIDER_LIBRARIES {
        // SAFETY: dlopen with a NUL-terminated name; the handle is
        // deliberately never closed (RTLD_NODELETE would ignore it anyway).
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE) };
        if !handle.is_null() {
            pinned.push(name.to_str().unwrap_or("?"));
        }
    }
    pinned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinning_keeps_a_provider_mapped_after_every_other_handle_is_closed() {
        let pinned = pin_provider_libraries();
        let Some(first) = pinned.first() else {
            println!("SKIPPED: no rdma-core provider library installed");
            return;
        };
        let name = std::ffi::CString::new(*first).unwrap();
        // SAFETY: plain dlopen/dlclose of a library pinned above.
        unsafe {
            let handle = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            assert!(!handle.is_null());
            assert_eq!(libc::dlclose(handle), 0);
            let still_loaded = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NOLOAD);
            assert!(!still_loaded.is_null(), "{first} was unloaded although pinned");
            libc::dlclose(still_loaded);
        }
    }
}
