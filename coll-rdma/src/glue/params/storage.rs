//! Where Open MPI's variable system writes the parameters: one slot per
//! row of the table, at a fixed address for the life of the process.

use std::ffi::{c_char, c_int, c_void, CStr};

use ompi_sys as sys;

use super::table::{Kind, COUNT, TABLE};
use super::RawParams;

/// An int parameter's storage is a C int, a string parameter's a pointer
/// to a NUL-terminated string; the row's kind says which field is live.
#[derive(Clone, Copy)]
#[repr(C)]
union Slot {
    int: c_int,
    text: *const c_char,
}

const fn initial_slots() -> [Slot; COUNT] {
    let mut slots = [Slot { int: 0 }; COUNT];
    let mut index = 0;
    while index < COUNT {
        slots[index] = match TABLE[index].kind {
            Kind::Int { default, .. } => Slot { int: default },
            Kind::Text { default } => Slot { text: default.as_ptr() },
        };
        index += 1;
    }
    slots
}

// Written by Open MPI's variable system during registration (single
// threaded, inside MPI_Init, MPI_Session_init or ompi_info; again at each
// initialisation of the process) and only read afterwards. The
// defaults are in place before registration, which takes them as the
// parameters' defaults.
static mut SLOTS: [Slot; COUNT] = initial_slots();

fn slot(index: usize) -> *mut Slot {
    debug_assert!(index < COUNT);
    // SAFETY: callers pass the index of a row of the table, so the slot is
    // in bounds; no reference to the static is made.
    unsafe { (&raw mut SLOTS).cast::<Slot>().add(index) }
}

/// Registers every parameter of the table with Open MPI's variable system.
///
/// Open MPI registers again at each initialisation of a process (every MPI
/// 4 session, then MPI_Init), after its finalisation released the strings it
/// had stored in the slots: the defaults are put back first, so that each
/// registration starts from them and never from a string already freed.
pub fn register(component: *const sys::mca_base_component_t) -> c_int {
    // SAFETY: registration is single threaded (see SLOTS) and nothing reads
    // the slots while it runs; the write goes through a raw pointer, no
    // reference to the static is made.
    unsafe { (&raw mut SLOTS).write(initial_slots()) };
    for (index, param) in TABLE.iter().enumerate() {
        let kind = match param.kind {
            Kind::Int { .. } => sys::MCA_BASE_VAR_TYPE_INT,
            Kind::Text { .. } => sys::MCA_BASE_VAR_TYPE_STRING,
        };
        // SAFETY: `component` is our static component; name and help are
        // 'static C strings; the storage is the row's slot, which holds a
        // value of the declared type and lives as long as the process.
        let rc = unsafe {
            sys::mca_base_component_var_register(
                component,
                param.name.as_ptr(),
                param.help.as_ptr(),
                kind,
                std::ptr::null_mut(),
                0,
                0,
                param.level,
                sys::MCA_BASE_VAR_SCOPE_READONLY,
                slot(index) as *mut c_void,
            )
        };
        if rc < 0 {
            return rc;
        }
    }
    sys::OMPI_SUCCESS as c_int
}

fn string_value(storage: *const c_char) -> String {
    if storage.is_null() {
        return String::new();
    }
    // SAFETY: the variable system stores a NUL-terminated string (or our
    // static default) in string storage.
    unsafe { CStr::from_ptr(storage) }.to_string_lossy().trim().to_string()
}

/// The values as the user set them (or the defaults before registration).
pub fn read_raw() -> RawParams {
    let mut raw = RawParams::defaults();
    for (index, param) in TABLE.iter().enumerate() {
        // SAFETY: registration, the only writer, has finished before
        // component open, which is the only caller; the row's kind says
        // which field the variable system wrote.
        unsafe {
            let slot = slot(index).read();
            match param.kind {
                Kind::Int { .. } => raw.set_int(param.id, slot.int),
                Kind::Text { .. } => raw.set_text(param.id, string_value(slot.text)),
            }
        }
    }
    raw
}

/// Tests only: sets an int parameter's slot, as the variable system does at
/// registration.
#[cfg(test)]
pub fn store_int(id: super::table::Id, value: c_int) {
    debug_assert!(matches!(TABLE[id as usize].kind, Kind::Int { .. }));
    // SAFETY: the slot of an int row, written through a raw pointer (no
    // reference to the static); the one test that calls this is the only
    // writer, and readers copy the slot out.
    unsafe { slot(id as usize).write(Slot { int: value }) };
}
