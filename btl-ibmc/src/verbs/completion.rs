//! Completion queues and what a polled completion says.

use std::ffi::CStr;
use std::sync::Arc;

use rdma_sys::{ibv_cq, ibv_create_cq, ibv_destroy_cq, ibv_poll_cq, ibv_wc, ibv_wc_status, ibv_wc_status_str};

use super::context::DeviceContext;
use super::error::{VerbsError, VerbsSetupError};

/// How many completions one poll takes at most.
pub(crate) const POLL_BATCH: usize = 32;

/// A completion queue; it keeps its context open, and every queue pair
/// using it holds it.
pub(crate) struct CompletionQueue {
    cq: *mut ibv_cq,
    _context: Arc<DeviceContext>,
}

// SAFETY: CQs may be polled from any thread; callers serialise polling of
// one CQ with their own lock.
unsafe impl Send for CompletionQueue {}
// SAFETY: as above.
unsafe impl Sync for CompletionQueue {}

/// One polled completion, reduced to what the transport uses.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Completion {
    pub(crate) wr_id: u64,
    pub(crate) status: ibv_wc_status::Type,
    pub(crate) byte_len: u32,
    /// The sending queue pair (UD receives).
    pub(crate) src_qp: u32,
    /// The buffer starts with the packet's GRH (UD receives).
    pub(crate) has_grh: bool,
}

impl Completion {
    pub(crate) fn succeeded(&self) -> bool {
        self.status == ibv_wc_status::IBV_WC_SUCCESS
    }

    /// libibverbs' name of the status ("remote access error", ...).
    pub(crate) fn status_text(&self) -> String {
        // SAFETY: ibv_wc_status_str returns a static string for any value.
        let text = unsafe { ibv_wc_status_str(self.status) };
        if text.is_null() {
            return format!("status {}", self.status);
        }
        // SAFETY: checked non-null; static and NUL-terminated.
        unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
    }
}

impl CompletionQueue {
    pub(crate) fn new(context: &Arc<DeviceContext>, entries: u32, what: &str) -> Result<Arc<Self>, VerbsSetupError> {
        let entries_arg = i32::try_from(entries).unwrap_or(i32::MAX);
        // SAFETY: the context is open; no completion channel is used.
        let cq = unsafe { ibv_create_cq(context.raw(), entries_arg, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(VerbsSetupError::last_os("ibv_create_cq", format!("for the {what} ({entries} entries)")));
        }
        Ok(Arc::new(CompletionQueue { cq, _context: Arc::clone(context) }))
    }

    pub(crate) fn raw(&self) -> *mut ibv_cq {
        self.cq
    }

    /// Takes up to `POLL_BATCH` completions into `out` (cleared first).
    /// Err only if polling itself failed.
    pub(crate) fn poll(&self, out: &mut Vec<Completion>) -> Result<(), VerbsError> {
        out.clear();
        // SAFETY: ibv_wc is plain data for which all-zero is valid.
        let mut polled: [ibv_wc; POLL_BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: the CQ is valid until drop and `polled` holds POLL_BATCH
        // entries, the count passed.
        let count = unsafe { ibv_poll_cq(self.cq, POLL_BATCH as i32, polled.as_mut_ptr()) };
        if count < 0 {
            return Err(VerbsError::Poll(count));
        }
        let count = usize::try_from(count).unwrap_or(0).min(POLL_BATCH);
        out.extend(polled[..count].iter().map(|wc| Completion {
            wr_id: wc.wr_id,
            status: wc.status,
            byte_len: wc.byte_len,
            src_qp: wc.src_qp,
            has_grh: wc.wc_flags & rdma_sys::ibv_wc_flags::IBV_WC_GRH.0 != 0,
        }));
        Ok(())
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // SAFETY: the CQ was created in `new` and is destroyed once; every
        // queue pair using it holds it, so none is left.
        let rc = unsafe { ibv_destroy_cq(self.cq) };
        if rc != 0 {
            tracing::warn!("verbs: ibv_destroy_cq failed ({rc})");
        }
    }
}
