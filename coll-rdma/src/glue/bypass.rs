//! A communicator on which every rank agreed to fall back for good (no
//! transport, or settings that differ between ranks) gains nothing from
//! passing through coll rdma on each call: its table gets the module
//! underneath's functions back, as if we had never been selected for them.
//!
//! Open MPI 4.1 holds one reference on our module per slot it fills and one
//! more in the communicator's list of enabled modules, released only when
//! the communicator is freed. So the slots can give theirs up: our module,
//! its state and its saved functions live on until then, and a call that
//! is still inside our entry point (the one that made the decision, or one
//! up the stack) returns normally.

use ompi_sys as sys;

use super::saved::SavedCollectives;

/// Puts the saved functions into `comm`'s table wherever `ours` sits and
/// says so at verbose level; leaves the table alone if the slots hold the
/// only references on `ours`, as giving them up would free it.
///
/// # Safety
/// `ours` must be our module enabled on the live communicator `comm`, with
/// its state released, and no other call of `comm` may be running (MPI
/// forbids concurrent collectives on one communicator; under
/// MPI_THREAD_MULTIPLE a program that breaks the rule is stopped when the
/// second call finds the first inside, see `misuse`).
pub(super) unsafe fn install_underneath(
    comm: *mut sys::ompi_communicator_t,
    ours: *mut sys::mca_coll_base_module_t,
    saved: &SavedCollectives,
    cid: u32,
    rank: usize,
) {
    // SAFETY: guaranteed by the caller; the count is only read.
    let (slots, references) =
        unsafe { (SavedCollectives::slots_held(comm, ours), std::ptr::read_volatile(&raw const (*ours).super_.obj_reference_count)) };
    if slots == 0 {
        return;
    }
    if i64::from(references) <= slots as i64 {
        tracing::debug!(
            "comm {cid} rank {rank}: calls keep passing through coll rdma: its module has no reference besides the table's {slots}"
        );
        return;
    }
    // SAFETY: guaranteed by the caller, and `ours` keeps a reference
    // besides the slots' (checked above).
    let reinstalled = unsafe { saved.reinstall_into(comm, ours) };
    tracing::info!(
        "comm {cid} rank {rank}: the module underneath's functions are installed on the communicator for {}: later calls \
         go straight to them, not through coll rdma (nor into the counts below)",
        reinstalled.join(", ")
    );
}
